/*
 * The Prometheus text exposition (see metrics.h and docs/metrics.md). Families are written one
 * at a time, each with its HELP and TYPE lines just before its first sample, so the samples of
 * a family are contiguous as the format requires and a family without samples leaves no trace.
 *
 * Memory by reason (vramguard_gpu_memory_held_bytes) is classified by rules/reason.c; this
 * file only writes it out.
 */
#include "render/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/render.h"
#include "rules/reason.h"
#include "util/array.h"
#include "util/parse.h"
#include "util/sat.h"
#include "util/utf8.h"

void vg_metrics_opts_init(struct vg_metrics_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->per_process = VG_METRICS_PP_TOP;
    o->top_n = VG_METRICS_TOP_DEFAULT;
    o->context_max = VG_RULE_CONTEXT_MAX_DEFAULT;
    o->version = "unknown";
}

int vg_metrics_parse_pp(const char *s, struct vg_metrics_opts *o)
{
    if (!s)
        return -EINVAL;
    if (strcmp(s, "all") == 0) {
        o->per_process = VG_METRICS_PP_ALL;
        return 0;
    }
    if (strcmp(s, "none") == 0) {
        o->per_process = VG_METRICS_PP_NONE;
        return 0;
    }
    uint64_t n;
    if (strncmp(s, "top:", 4) != 0 || vg_parse_u64(s + 4, &n) != 0 || n < 1 || n > 100000)
        return -EINVAL;
    o->per_process = VG_METRICS_PP_TOP;
    o->top_n = (size_t)n;
    return 0;
}

int vg_metrics_escape(struct vg_buf *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c == '\\') {
            vg_buf_add(out, "\\\\", 2);
        } else if (c == '"') {
            vg_buf_add(out, "\\\"", 2);
        } else if (c == '\n') {
            vg_buf_add(out, "\\n", 2);
        } else if (c < 0x20 || c == 0x7f) {
            vg_buf_add(out, "\xEF\xBF\xBD", 3);
        } else {
            size_t len = vg_utf8_len(p + i, n - i);
            if (len == 0) {
                vg_buf_add(out, "\xEF\xBF\xBD", 3);
                len = 1;
            } else {
                vg_buf_add(out, p + i, len);
            }
            i += len;
            continue;
        }
        i++;
    }
    return out->err;
}

/* ---- the writer: one family at a time, one sample at a time ---- */

struct vg_metrics_writer {
    struct vg_buf *out;
    const char *name, *type, *help;
    bool header_done;
    unsigned nlabels;
};

static void vg_metrics_writer_family(struct vg_metrics_writer *w, const char *name,
                                     const char *type, const char *help)
{
    w->name = name;
    w->type = type;
    w->help = help;
    w->header_done = false;
}

static void vg_metrics_writer_begin(struct vg_metrics_writer *w)
{
    if (!w->header_done) {
        vg_buf_printf(w->out, "# HELP %s %s\n# TYPE %s %s\n", w->name, w->help, w->name, w->type);
        w->header_done = true;
    }
    vg_buf_adds(w->out, w->name);
    w->nlabels = 0;
}

/* A label; an empty or unknown value is left out (Prometheus reads both the same way). */
static void vg_metrics_writer_label(struct vg_metrics_writer *w, const char *key, const char *value)
{
    if (!value || !value[0])
        return;
    vg_buf_addc(w->out, w->nlabels++ ? ',' : '{');
    vg_buf_adds(w->out, key);
    vg_buf_add(w->out, "=\"", 2);
    vg_metrics_escape(w->out, value, strlen(value));
    vg_buf_addc(w->out, '"');
}

static void vg_metrics_writer_label_u(struct vg_metrics_writer *w, const char *key,
                                      unsigned long long v)
{
    char num[24];
    snprintf(num, sizeof(num), "%llu", v);
    vg_metrics_writer_label(w, key, num);
}

static void vg_metrics_writer_close(struct vg_metrics_writer *w)
{
    if (w->nlabels)
        vg_buf_addc(w->out, '}');
}

static void vg_metrics_writer_u64(struct vg_metrics_writer *w, uint64_t v)
{
    vg_metrics_writer_close(w);
    vg_buf_printf(w->out, " %llu\n", (unsigned long long)v);
}

static void vg_metrics_writer_fixed(struct vg_metrics_writer *w, double v, int decimals)
{
    vg_metrics_writer_close(w);
    vg_buf_printf(w->out, " %.*f\n", decimals, v);
}

/* ---- what the exposition is computed from ---- */

/* Biggest known figure first; unknown ones after; then by pid, so the choice is stable. */
static int vg_metrics_cmp_mem(const void *a, const void *b)
{
    const struct vg_reason_holder *x = a, *y = b;
    bool kx = vg_reason_holder_known(x), ky = vg_reason_holder_known(y);
    if (kx != ky)
        return kx ? -1 : 1;
    if (kx && x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Every GPU's memory by reason (rules/reason.h), holders biggest first for the top-N bound. */
static int vg_metrics_reasons(const struct vg_snapshot *snap, const struct vg_findings *fs,
                              const struct vg_metrics_opts *o, struct vg_reason_gpu *mg,
                              size_t ngpus)
{
    for (size_t i = 0; i < ngpus; i++) {
        int rc = vg_reason_gpu_build(snap, i, fs, o->context_max, &mg[i]);
        if (rc)
            return rc;
        if (mg[i].n)
            qsort(mg[i].h, mg[i].n, sizeof(*mg[i].h), vg_metrics_cmp_mem);
    }
    return 0;
}

/* ---- the families ---- */

static void vg_metrics_gpu_labels(struct vg_metrics_writer *w, const struct vg_gpu *g)
{
    vg_metrics_writer_label_u(w, "gpu", g->index);
    vg_metrics_writer_label(w, "uuid", (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    vg_metrics_writer_label(w, "name", (g->known & VG_GPU_K_NAME) ? g->name : NULL);
}

/* A family of one sample without labels: its header and the start of the sample, whose value
 * the caller writes. */
static void vg_metrics_single(struct vg_metrics_writer *w, const char *name, const char *type,
                              const char *help)
{
    vg_metrics_writer_family(w, name, type, help);
    vg_metrics_writer_begin(w);
}

static void vg_metrics_collect_families(struct vg_metrics_writer *w,
                                        const struct vg_collector_stats *st,
                                        const struct vg_metrics_opts *o)
{
    vg_metrics_writer_family(w, "vramguard_build_info", "gauge",
                             "Always 1; the version of vramguard serving these metrics.");
    vg_metrics_writer_begin(w);
    vg_metrics_writer_label(w, "version", o->version);
    vg_metrics_writer_u64(w, 1);

    vg_metrics_single(w, "vramguard_last_collect_success", "gauge",
                      "1 when the last collection read both the driver and /proc, 0 when it failed "
                      "(driver missing, failing or hung).");
    vg_metrics_writer_u64(w, st->success ? 1 : 0);

    vg_metrics_single(w, "vramguard_last_collect_duration_seconds", "gauge",
                      "How long the last collection took.");
    vg_metrics_writer_fixed(w, st->duration_seconds, 6);

    vg_metrics_single(w, "vramguard_last_collect_timestamp_seconds", "gauge",
                      "Unix time the last collection finished, successful or not.");
    vg_metrics_writer_fixed(w, st->timestamp_seconds, 3);

    if (st->last_success_known) {
        vg_metrics_single(w, "vramguard_last_successful_collect_timestamp_seconds", "gauge",
                          "Unix time the last successful collection finished.");
        vg_metrics_writer_fixed(w, st->last_success_seconds, 3);
    }

    vg_metrics_single(w, "vramguard_collections_total", "counter",
                      "Collections attempted since the exporter started.");
    vg_metrics_writer_u64(w, st->collections);

    vg_metrics_single(w, "vramguard_collect_failures_total", "counter",
                      "Collections that failed since the exporter started.");
    vg_metrics_writer_u64(w, st->failures);

    vg_metrics_single(w, "vramguard_driver_hangs_total", "counter",
                      "Collections in which the NVIDIA driver did not answer in time.");
    vg_metrics_writer_u64(w, st->driver_hangs);

    vg_metrics_writer_family(
        w, "vramguard_scans_total", "counter",
        "/proc scans by kind: full (every process's descriptors read) or incremental "
        "(only known holders, the driver's PIDs and new processes read).");
    vg_metrics_writer_begin(w);
    vg_metrics_writer_label(w, "kind", "full");
    vg_metrics_writer_u64(w, st->full_scans);
    vg_metrics_writer_begin(w);
    vg_metrics_writer_label(w, "kind", "incremental");
    vg_metrics_writer_u64(w, st->incremental_scans);
}

static void vg_metrics_gpu_info_family(struct vg_metrics_writer *w, const struct vg_snapshot *snap,
                                       const struct vg_collector_gpu_ids *last_good)
{
    vg_metrics_writer_family(
        w, "vramguard_gpu_info", "gauge",
        "Always 1 for each GPU; its identity. After a failed collection, the GPUs of "
        "the last successful one.");
    if (snap && snap->driver_ok) {
        for (size_t i = 0; i < snap->gpus.ngpus; i++) {
            const struct vg_gpu *g = &snap->gpus.gpus[i];
            vg_metrics_writer_begin(w);
            vg_metrics_gpu_labels(w, g);
            vg_metrics_writer_label(w, "pci_bus_id",
                                    (g->known & VG_GPU_K_PCI) ? g->pci_bus_id : NULL);
            if (g->known & VG_GPU_K_MINOR)
                vg_metrics_writer_label_u(w, "minor", g->minor);
            vg_metrics_writer_u64(w, 1);
        }
        return;
    }
    for (size_t i = 0; last_good && i < last_good->n; i++) {
        const struct vg_collector_gpu_id *id = &last_good->v[i];
        vg_metrics_writer_begin(w);
        vg_metrics_writer_label_u(w, "gpu", id->index);
        vg_metrics_writer_label(w, "uuid", id->uuid);
        vg_metrics_writer_label(w, "name", id->name);
        vg_metrics_writer_label(w, "pci_bus_id", id->pci_bus_id);
        if (id->minor_known)
            vg_metrics_writer_label_u(w, "minor", id->minor);
        vg_metrics_writer_u64(w, 1);
    }
}

static void vg_driver_family(struct vg_metrics_writer *w, const struct vg_snapshot *snap)
{
    const struct vg_gpu_list *l = &snap->gpus;
    char cuda[32] = "";
    if (l->cuda_version > 0)
        snprintf(cuda, sizeof(cuda), "%d.%d", l->cuda_version / 1000,
                 (l->cuda_version % 1000) / 10);
    vg_metrics_writer_family(w, "vramguard_driver_info", "gauge",
                             "Always 1; the NVIDIA driver's versions, as NVML reports them.");
    vg_metrics_writer_begin(w);
    vg_metrics_writer_label(w, "driver_version", l->driver_version);
    vg_metrics_writer_label(w, "nvml_version", l->nvml_version);
    vg_metrics_writer_label(w, "cuda_version", cuda);
    vg_metrics_writer_u64(w, 1);
}

enum vg_gpu_field { VG_F_TOTAL, VG_F_USED, VG_F_RESERVED, VG_F_FREE };

static void vg_metrics_gpu_mem_family(struct vg_metrics_writer *w, const struct vg_snapshot *snap,
                                      enum vg_gpu_field f)
{
    static const char *const names[] = {
        "vramguard_gpu_memory_total_bytes", "vramguard_gpu_memory_used_bytes",
        "vramguard_gpu_memory_reserved_bytes", "vramguard_gpu_memory_free_bytes"};
    static const char *const helps[] = {
        "Total memory of the GPU.",
        "Memory in use on the GPU, as NVML reports it (the driver's reservation apart when "
        "it is known).",
        "Memory the driver reserves for itself (absent on drivers without "
        "nvmlDeviceGetMemoryInfo_v2).",
        "Memory free on the GPU."};
    vg_metrics_writer_family(w, names[f], "gauge", helps[f]);
    for (size_t i = 0; i < snap->gpus.ngpus; i++) {
        const struct vg_gpu *g = &snap->gpus.gpus[i];
        unsigned need = f == VG_F_RESERVED ? VG_GPU_K_RESERVED : VG_GPU_K_MEM;
        if (!(g->known & need))
            continue;
        uint64_t v = f == VG_F_TOTAL  ? g->mem_total
                     : f == VG_F_USED ? g->mem_used
                     : f == VG_F_FREE ? g->mem_free
                                      : g->mem_reserved;
        vg_metrics_writer_begin(w);
        vg_metrics_gpu_labels(w, g);
        vg_metrics_writer_u64(w, v);
    }
}

/* Whether each GPU holds memory no running job holds (rules/reason.h). */
static void vg_metrics_gpu_dirty(struct vg_metrics_writer *w, const struct vg_snapshot *snap,
                                 const struct vg_reason_gpu *mg)
{
    const struct vg_gpu_list *l = &snap->gpus;
    vg_metrics_writer_family(
        w, "vramguard_gpu_dirty", "gauge",
        "1 when memory no running job holds (sure leftovers, zombies, memory with no "
        "holder) exceeds 64 MiB: not clean for the next job; else 0.");
    for (size_t i = 0; i < l->ngpus; i++) {
        if (!mg[i].known)
            continue;
        vg_metrics_writer_begin(w);
        vg_metrics_gpu_labels(w, &l->gpus[i]);
        vg_metrics_writer_u64(w,
                              vg_reason_gpu_dirty(&mg[i], snap->per_gpu[i].unexplained_has_reserved,
                                                  VG_REASON_DIRTY_TOLERANCE)
                                  ? 1
                                  : 0);
    }
}

static uint64_t vg_gpu_lost_value(const struct vg_gpu *g)
{
    return g->lost ? 1 : 0;
}

static uint64_t vg_gpu_hung_value(const struct vg_gpu *g)
{
    return g->hung ? 1 : 0;
}

static uint64_t vg_gpu_errors_value(const struct vg_gpu *g)
{
    size_t n = g->nerrors;
    for (size_t m = 0; m < g->nmig; m++)
        n += g->mig[m].nerrors;
    return n;
}

/* The health gauges every GPU has, in exposition order. */
static const struct {
    const char *name, *help;
    uint64_t (*value)(const struct vg_gpu *g);
} vg_gpu_health_gauges[] = {
    {"vramguard_gpu_lost", "1 when the GPU answered \"GPU is lost\" (fallen off the bus), else 0.",
     vg_gpu_lost_value},
    {"vramguard_gpu_hung",
     "1 when a driver call for the GPU did not return within --nvml-timeout (its figures are "
     "absent), else 0.",
     vg_gpu_hung_value},
    {"vramguard_gpu_nvml_errors",
     "NVML calls about this GPU that failed in the last collection (the values they would have "
     "given are absent).",
     vg_gpu_errors_value},
};

static void vg_metrics_gpu_families(struct vg_metrics_writer *w, const struct vg_snapshot *snap,
                                    const struct vg_reason_gpu *mg)
{
    const struct vg_gpu_list *l = &snap->gpus;
    for (size_t k = 0; k < sizeof(vg_gpu_health_gauges) / sizeof(vg_gpu_health_gauges[0]); k++) {
        vg_metrics_writer_family(w, vg_gpu_health_gauges[k].name, "gauge",
                                 vg_gpu_health_gauges[k].help);
        for (size_t i = 0; i < l->ngpus; i++) {
            vg_metrics_writer_begin(w);
            vg_metrics_gpu_labels(w, &l->gpus[i]);
            vg_metrics_writer_u64(w, vg_gpu_health_gauges[k].value(&l->gpus[i]));
        }
    }
    vg_metrics_gpu_mem_family(w, snap, VG_F_TOTAL);
    vg_metrics_gpu_mem_family(w, snap, VG_F_USED);
    vg_metrics_gpu_mem_family(w, snap, VG_F_RESERVED);
    vg_metrics_gpu_mem_family(w, snap, VG_F_FREE);

    vg_metrics_writer_family(
        w, "vramguard_gpu_utilization_ratio", "gauge",
        "Fraction of the last sample period in which a kernel ran on the GPU (0-1).");
    for (size_t i = 0; i < l->ngpus; i++) {
        const struct vg_gpu *g = &l->gpus[i];
        if (!(g->known & VG_GPU_K_UTIL))
            continue;
        vg_metrics_writer_begin(w);
        vg_metrics_gpu_labels(w, g);
        vg_metrics_writer_fixed(w, g->util_gpu / 100.0, 2);
    }

    vg_metrics_writer_family(
        w, "vramguard_gpu_holders", "gauge",
        "Processes holding the GPU: listed by NVML, or holding its device node open.");
    for (size_t i = 0; i < l->ngpus; i++) {
        if (!mg[i].known)
            continue;
        vg_metrics_writer_begin(w);
        vg_metrics_gpu_labels(w, &l->gpus[i]);
        vg_metrics_writer_u64(w, mg[i].n);
    }

    vg_metrics_gpu_dirty(w, snap, mg);

    vg_metrics_writer_family(
        w, "vramguard_gpu_memory_held_bytes", "gauge",
        "GPU memory by why it is held; the reasons partition the used memory (see "
        "docs/metrics.md).");
    for (size_t i = 0; i < l->ngpus; i++) {
        if (!mg[i].known)
            continue;
        for (int r = 0; r < VG_REASON_COUNT; r++) {
            if (r == VG_REASON_UNATTRIBUTED && !mg[i].unattributed_known)
                continue;
            vg_metrics_writer_begin(w);
            vg_metrics_gpu_labels(w, &l->gpus[i]);
            vg_metrics_writer_label(w, "reason", vg_reason_name((enum vg_reason)r));
            vg_metrics_writer_u64(w, mg[i].bytes[r]);
        }
    }
}

static size_t vg_selected(const struct vg_reason_gpu *mg, const struct vg_metrics_opts *o)
{
    if (o->per_process == VG_METRICS_PP_NONE)
        return 0;
    if (o->per_process == VG_METRICS_PP_ALL || mg->n <= o->top_n)
        return mg->n;
    return o->top_n;
}

static void vg_holder_labels(struct vg_metrics_writer *w, const struct vg_gpu *g,
                             const struct vg_reason_holder *h)
{
    vg_metrics_writer_label_u(w, "gpu", g->index);
    vg_metrics_writer_label(w, "uuid", (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    vg_metrics_writer_label_u(w, "pid", h->pid);
    const struct vg_proc *p = h->proc;
    if (p) {
        vg_metrics_writer_label(w, "user", (p->known & VG_PROC_K_USER) ? p->user : NULL);
        vg_metrics_writer_label(w, "comm", (p->known & VG_PROC_K_STAT) ? p->comm : NULL);
        vg_metrics_writer_label(w, "container", p->container_id);
        vg_metrics_writer_label(w, "pod_uid", p->pod_uid);
    }
    vg_metrics_writer_label(w, "seen_by", vg_render_seen(h->seen));
}

static void vg_process_families(struct vg_metrics_writer *w, const struct vg_snapshot *snap,
                                const struct vg_reason_gpu *mg, const struct vg_metrics_opts *o)
{
    const struct vg_gpu_list *l = &snap->gpus;
    if (o->per_process == VG_METRICS_PP_NONE)
        return;
    vg_metrics_writer_family(
        w, "vramguard_process_memory_bytes", "gauge",
        "GPU memory NVML attributes to a process; pid=\"other\" sums the holders "
        "beyond the --per-process bound.");
    for (size_t i = 0; i < l->ngpus; i++) {
        size_t sel = vg_selected(&mg[i], o);
        for (size_t k = 0; k < sel; k++) {
            const struct vg_reason_holder *h = &mg[i].h[k];
            if (!vg_reason_holder_known(h))
                continue;
            vg_metrics_writer_begin(w);
            vg_holder_labels(w, &l->gpus[i], h);
            vg_metrics_writer_u64(w, h->bytes);
        }
        uint64_t rest = 0;
        bool rest_known = false;
        for (size_t k = sel; k < mg[i].n; k++) {
            rest_known |= mg[i].h[k].any_known;
            rest = vg_sat_add(rest, mg[i].h[k].bytes);
        }
        if (rest_known) {
            vg_metrics_writer_begin(w);
            vg_metrics_writer_label_u(w, "gpu", l->gpus[i].index);
            vg_metrics_writer_label(w, "uuid",
                                    (l->gpus[i].known & VG_GPU_K_UUID) ? l->gpus[i].uuid : NULL);
            vg_metrics_writer_label(w, "pid", "other");
            vg_metrics_writer_u64(w, rest);
        }
    }
    vg_metrics_writer_family(
        w, "vramguard_process_info", "gauge",
        "Always 1 for each holder that has its own series, whether or not its memory "
        "is known (device-node-only holders have no memory figure).");
    for (size_t i = 0; i < l->ngpus; i++) {
        size_t sel = vg_selected(&mg[i], o);
        for (size_t k = 0; k < sel; k++) {
            vg_metrics_writer_begin(w);
            vg_holder_labels(w, &l->gpus[i], &mg[i].h[k]);
            vg_metrics_writer_u64(w, 1);
        }
    }
    vg_metrics_writer_family(
        w, "vramguard_process_other_holders", "gauge",
        "Holders of the GPU beyond the --per-process bound, summed in pid=\"other\".");
    for (size_t i = 0; i < l->ngpus; i++) {
        size_t sel = vg_selected(&mg[i], o);
        if (sel >= mg[i].n)
            continue;
        vg_metrics_writer_begin(w);
        vg_metrics_gpu_labels(w, &l->gpus[i]);
        vg_metrics_writer_u64(w, mg[i].n - sel);
    }
}

struct vg_fcount {
    const char *rule;
    enum vg_severity sev;
    size_t gpu; /* index into the snapshot's GPUs, or VG_SNAP_NO_GPU */
    uint64_t n;
};

static int vg_fcount_cmp(const void *a, const void *b)
{
    const struct vg_fcount *x = a, *y = b;
    int c = strcmp(x->rule, y->rule);
    if (c)
        return c;
    if (x->sev != y->sev)
        return x->sev < y->sev ? -1 : 1;
    return x->gpu < y->gpu ? -1 : x->gpu > y->gpu;
}

static int vg_fcount_add(struct vg_fcount **v, size_t *n, size_t *cap, const char *rule,
                         enum vg_severity sev, size_t gpu)
{
    for (size_t i = 0; i < *n; i++) {
        struct vg_fcount *c = &(*v)[i];
        if (c->sev == sev && c->gpu == gpu && strcmp(c->rule, rule) == 0) {
            c->n++;
            return 0;
        }
    }
    if (VG_ARRAY_GROW(*v, *cap, *n + 1))
        return -ENOMEM;
    (*v)[(*n)++] = (struct vg_fcount){rule, sev, gpu, 1};
    return 0;
}

static int vg_metrics_findings_family(struct vg_metrics_writer *w, const struct vg_snapshot *snap,
                                      const struct vg_findings *fs)
{
    struct vg_fcount *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; fs && i < fs->n; i++) {
        const struct vg_finding *f = &fs->v[i];
        int rc = 0;
        if (f->ngpus == 0)
            rc = vg_fcount_add(&v, &n, &cap, f->rule, f->severity, VG_SNAP_NO_GPU);
        for (size_t k = 0; k < f->ngpus && !rc; k++)
            rc = vg_fcount_add(&v, &n, &cap, f->rule, f->severity, f->gpus[k]);
        if (rc) {
            free(v);
            return rc;
        }
    }
    if (n)
        qsort(v, n, sizeof(*v), vg_fcount_cmp);
    vg_metrics_writer_family(
        w, "vramguard_findings", "gauge",
        "Findings of the diagnosis rules (vramguard doctor) by rule, severity and GPU; "
        "a finding about several GPUs counts on each.");
    for (size_t i = 0; i < n; i++) {
        vg_metrics_writer_begin(w);
        vg_metrics_writer_label(w, "rule", v[i].rule);
        vg_metrics_writer_label(w, "severity", vg_severity_str(v[i].sev));
        if (v[i].gpu != VG_SNAP_NO_GPU && v[i].gpu < snap->gpus.ngpus)
            vg_metrics_writer_label_u(w, "gpu", snap->gpus.gpus[v[i].gpu].index);
        vg_metrics_writer_u64(w, v[i].n);
    }
    free(v);
    return 0;
}

/* What the last collection could not read: a GPU holder among them is unseen, so dashboards
 * and alerts can tell "nothing held" from "nothing seen". */
static void vg_unread_family(struct vg_metrics_writer *w, const struct vg_snapshot *snap)
{
    vg_metrics_writer_family(
        w, "vramguard_unread_processes", "gauge",
        "What the last collection could not read: processes with some file denied, "
        "processes whose open files could not be read (any may hold a GPU unseen), "
        "holders whose environment could not be read.");
    static const char *const what[] = {"processes", "descriptors", "environments"};
    uint64_t n[] = {snap->procs.n_denied, snap->procs.n_fd_unread, vg_snap_unread_envs(snap)};
    for (size_t i = 0; i < 3; i++) {
        vg_metrics_writer_begin(w);
        vg_metrics_writer_label(w, "what", what[i]);
        vg_metrics_writer_u64(w, n[i]);
    }
}

int vg_metrics_render(const struct vg_snapshot *snap, const struct vg_findings *fs,
                      const struct vg_collector_gpu_ids *last_good,
                      const struct vg_collector_stats *st, const struct vg_metrics_opts *o,
                      struct vg_buf *out)
{
    struct vg_metrics_writer w = {.out = out};
    struct vg_reason_gpu *mg = NULL;
    size_t ngpus = snap && snap->driver_ok ? snap->gpus.ngpus : 0;
    int rc = 0;
    if (ngpus) {
        mg = calloc(ngpus, sizeof(*mg));
        if (!mg)
            return -ENOMEM;
        rc = vg_metrics_reasons(snap, fs, o, mg, ngpus);
    }
    if (!rc) {
        vg_metrics_collect_families(&w, st, o);
        vg_metrics_gpu_info_family(&w, snap, last_good);
        if (snap && snap->driver_ok) {
            vg_driver_family(&w, snap);
            vg_metrics_gpu_families(&w, snap, mg);
            vg_process_families(&w, snap, mg, o);
        }
        if (snap)
            rc = vg_metrics_findings_family(&w, snap, fs);
        if (snap && !rc)
            vg_unread_family(&w, snap);
    }
    for (size_t i = 0; i < ngpus; i++)
        vg_reason_gpu_release(&mg[i]);
    free(mg);
    if (!rc)
        rc = out->err;
    return rc;
}
