/*
 * `check` output (see check.h). The summary line names the worst things first and stays short
 * (monitoring systems show it in one table cell); the lines after it say everything.
 */
#include "render/check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "render/json.h"
#include "render/render.h"
#include "render/text.h"

static const char *const vg_render_check_names[] = {"OK", "WARNING", "CRITICAL", "UNKNOWN"};

const char *vg_render_check_state_name(enum vg_health_state s)
{
    return (unsigned)s < 4 ? vg_render_check_names[s] : "UNKNOWN";
}

static void vg_sev_upper(enum vg_severity s, char *out, size_t n)
{
    const char *w = vg_severity_str(s);
    size_t i = 0;
    for (; w[i] && i + 1 < n; i++)
        out[i] = (char)(w[i] >= 'a' && w[i] <= 'z' ? w[i] - 'a' + 'A' : w[i]);
    out[i] = '\0';
}

/* "GPU 2 (PID 5458)", "GPUs 0,1 (PIDs 7,8,9,...)" */
static void vg_where(struct vg_buf *o, const struct vg_snapshot *snap, const size_t *gpus,
                     size_t ngpus, const pid_t *pids, size_t npids)
{
    if (ngpus) {
        vg_buf_printf(o, " on GPU%s ", ngpus > 1 ? "s" : "");
        for (size_t i = 0; i < ngpus && i < 4; i++)
            vg_buf_printf(o, "%s%u", i ? "," : "", snap->gpus.gpus[gpus[i]].index);
        if (ngpus > 4)
            vg_buf_adds(o, ",...");
    }
    if (npids) {
        vg_buf_printf(o, " (PID%s ", npids > 1 ? "s" : "");
        for (size_t i = 0; i < npids && i < 3; i++)
            vg_buf_printf(o, "%s%d", i ? "," : "", (int)pids[i]);
        vg_buf_adds(o, npids > 3 ? ",...)" : ")");
    }
}

/* The diagnoses by severity (alerts are counted apart: nalerts). */
static void vg_counts(const struct vg_findings *fs, size_t counts[3], size_t *nalerts)
{
    counts[0] = counts[1] = counts[2] = 0;
    *nalerts = 0;
    for (size_t i = 0; i < fs->n; i++) {
        if (fs->v[i].kind == VG_FINDING_ALERT)
            (*nalerts)++;
        else
            counts[fs->v[i].severity]++;
    }
}

/* A GPU the driver cannot vouch for, which makes a check critical: lost, then hung. The words
 * are a text line's after "GPU N (UUID)". */
struct vg_gpu_trouble {
    const char *word; /* "2 GPUs lost (0,1)" */
    const char *rule; /* the text line's id */
    const char *json_key;
    size_t (*count)(const struct vg_snapshot *snap);
    bool (*has)(const struct vg_gpu *g);
    const char *words;
};

static bool vg_gpu_is_lost(const struct vg_gpu *g)
{
    return g->lost;
}

static bool vg_gpu_is_hung(const struct vg_gpu *g)
{
    return g->hung;
}

static const struct vg_gpu_trouble vg_gpu_troubles[] = {
    {"lost", "gpu-lost", "lost_gpus", vg_health_lost, vg_gpu_is_lost,
     " answers \"GPU is lost\": it has fallen off the bus or its driver state is broken; see "
     "'dmesg' (Xid), then a GPU reset or a reboot"},
    {"hung", "gpu-hung", "hung_gpus", vg_health_hung, vg_gpu_is_hung,
     ": a driver call for it did not return within the driver timeout, so its memory and "
     "holders are unknown; see 'dmesg' (Xid), then a GPU reset or a reboot"},
};

#define VG_NTROUBLES (sizeof(vg_gpu_troubles) / sizeof(vg_gpu_troubles[0]))

/* "; 2 GPUs lost (0,1); 1 GPU hung (3)" into o; how many GPUs were named. */
static size_t vg_summary_troubles(struct vg_buf *o, const struct vg_snapshot *snap,
                                  const char **sep)
{
    size_t all = 0;
    for (size_t t = 0; t < VG_NTROUBLES; t++) {
        const struct vg_gpu_trouble *tr = &vg_gpu_troubles[t];
        size_t n = tr->count(snap);
        if (!n)
            continue;
        vg_buf_printf(o, "%s%zu GPU%s %s (", *sep, n, n == 1 ? "" : "s", tr->word);
        for (size_t i = 0, k = 0; i < snap->gpus.ngpus; i++)
            if (tr->has(&snap->gpus.gpus[i]))
                vg_buf_printf(o, "%s%u", k++ ? "," : "", snap->gpus.gpus[i].index);
        vg_buf_adds(o, ")");
        *sep = "; ";
        all += n;
    }
    return all;
}

/* The worst three alerts and findings (alerts first within a severity), then how many more. */
static void vg_summary_worst(struct vg_buf *o, const struct vg_snapshot *snap,
                             const struct vg_findings *fs, size_t total)
{
    static const enum vg_finding_kind order[] = {VG_FINDING_ALERT, VG_FINDING_DIAGNOSIS};
    size_t shown = 0;
    for (int sev = VG_SEV_CRITICAL; sev >= VG_SEV_WARNING; sev--)
        for (size_t k = 0; k < 2; k++)
            for (size_t i = 0; i < fs->n; i++) {
                const struct vg_finding *f = &fs->v[i];
                if (f->kind != order[k] || (int)f->severity != sev || shown >= 3)
                    continue;
                vg_buf_printf(o, "%s%s", shown++ ? "; " : "", f->rule);
                vg_where(o, snap, f->gpus, f->ngpus, f->pids, f->npids);
            }
    if (total > shown)
        vg_buf_printf(o, "; and %zu more", total - shown);
}

static void vg_summary(struct vg_buf *o, const struct vg_snapshot *snap,
                       const struct vg_findings *fs, enum vg_health_state state)
{
    vg_buf_printf(o, "VRAMGUARD %s - ", vg_render_check_state_name(state));
    const char *sep = "";
    if (!snap->driver_ok) {
        vg_buf_adds(o, "no NVIDIA driver view (");
        vg_text_escape_str(o, snap->driver_error ? snap->driver_error : "unknown reason", 0);
        vg_buf_adds(o, ")");
        sep = "; ";
    }
    size_t troubled = vg_summary_troubles(o, snap, &sep);
    if (fs->unchecked) {
        vg_buf_adds(o, sep);
        vg_text_escape_str(o, fs->unchecked, 0);
        sep = "; ";
    }
    size_t counts[3], nalerts;
    vg_counts(fs, counts, &nalerts);
    size_t serious = counts[VG_SEV_WARNING] + counts[VG_SEV_CRITICAL];
    if (nalerts || serious) {
        vg_buf_adds(o, sep);
        if (nalerts)
            vg_buf_printf(o, "%zu alert%s%s", nalerts, nalerts == 1 ? "" : "s",
                          serious ? ", " : "");
        if (serious)
            vg_buf_printf(o, "%zu finding%s", serious, serious == 1 ? "" : "s");
        vg_buf_adds(o, ": ");
        vg_summary_worst(o, snap, fs, nalerts + serious);
    } else if (snap->driver_ok && !fs->unchecked && !troubled) {
        vg_buf_printf(o, "%zu GPU%s, %zu holder%s, no problems found", snap->gpus.ngpus,
                      snap->gpus.ngpus == 1 ? "" : "s", snap->nholdings,
                      snap->nholdings == 1 ? "" : "s");
    }
    vg_buf_printf(o, " | critical=%zu warning=%zu info=%zu alerts=%zu holders=%zu\n",
                  counts[VG_SEV_CRITICAL], counts[VG_SEV_WARNING], counts[VG_SEV_INFO], nalerts,
                  snap->nholdings);
}

/* One line per alert and finding of severity sev, alerts first; a finding with its first fix. */
static void vg_text_severity(struct vg_buf *out, const struct vg_findings *fs, enum vg_severity sev,
                             const struct vg_style *st)
{
    static const enum vg_finding_kind order[] = {VG_FINDING_ALERT, VG_FINDING_DIAGNOSIS};
    const char *c = sev == VG_SEV_CRITICAL ? st->red : sev == VG_SEV_WARNING ? st->yellow : "";
    char word[16];
    vg_sev_upper(sev, word, sizeof(word));
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < fs->n; i++) {
            const struct vg_finding *f = &fs->v[i];
            if (f->kind != order[k] || f->severity != sev)
                continue;
            vg_buf_printf(out, "%s%s%s %s%s: ", c, word, *c ? st->reset : "",
                          f->kind == VG_FINDING_ALERT ? "alert " : "", f->rule);
            vg_text_escape_str(out, f->title, 0);
            vg_buf_addc(out, '\n');
            if (f->nfix) {
                vg_buf_adds(out, "  fix: ");
                vg_text_escape_str(out, f->fix[0], 0);
                vg_buf_addc(out, '\n');
            }
        }
}

int vg_render_check_text(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         enum vg_health_state state, bool color, struct vg_buf *out)
{
    struct vg_style st;
    vg_style_init(&st, color);
    /* the summary stays the first line: monitoring plugins read only that one */
    vg_summary(out, snap, fs, state);
    vg_render_replay_text(out, snap, &st);
    for (size_t t = 0; t < VG_NTROUBLES; t++) {
        const struct vg_gpu_trouble *tr = &vg_gpu_troubles[t];
        for (size_t i = 0; i < snap->gpus.ngpus && snap->driver_ok; i++) {
            const struct vg_gpu *g = &snap->gpus.gpus[i];
            if (!tr->has(g))
                continue;
            char uuid[32];
            vg_text_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
            vg_buf_printf(out, "%sCRITICAL%s %s: GPU %u (%s)%s\n", st.red, st.reset, tr->rule,
                          g->index, uuid, tr->words);
        }
    }
    for (int sev = VG_SEV_CRITICAL; sev >= VG_SEV_INFO; sev--)
        vg_text_severity(out, fs, (enum vg_severity)sev, &st);
    vg_render_unread_text(out, snap, &st);
    return out->err;
}

/* An alert as check's "alerts" array has it (docs/json.md): one GPU, at most one holder. */
static void vg_json_alert(struct vg_json *j, const struct vg_snapshot *snap,
                          const struct vg_finding *a)
{
    const struct vg_gpu *g = a->ngpus ? &snap->gpus.gpus[a->gpus[0]] : NULL;
    vg_json_obj_begin(j);
    vg_json_kstr(j, "alert", a->rule);
    vg_json_kstr(j, "severity", vg_severity_str(a->severity));
    vg_json_ku64_opt(j, "gpu", g != NULL, g ? g->index : 0);
    vg_json_kstr(j, "gpu_uuid", g && (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    vg_json_ki64_opt(j, "mig_device", a->mig >= 0, a->mig);
    vg_json_ki64_opt(j, "pid", a->npids > 0, a->npids ? a->pids[0] : 0);
    vg_json_kstr(j, "user", a->user);
    vg_json_kstr(j, "command", a->command);
    vg_json_ku64_opt(j, "memory", a->bytes_known, a->bytes);
    vg_json_kstr(j, "expect", a->expect);
    vg_json_kstr(j, "message", a->title);
    vg_json_obj_end(j);
}

/* The findings of one kind, as "alerts" or "findings". */
static void vg_json_kind(struct vg_json *j, const struct vg_snapshot *snap,
                         const struct vg_findings *fs, enum vg_finding_kind kind)
{
    vg_json_key(j, kind == VG_FINDING_ALERT ? "alerts" : "findings");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < fs->n; k++) {
        if (fs->v[k].kind != kind)
            continue;
        if (kind == VG_FINDING_ALERT)
            vg_json_alert(j, snap, &fs->v[k]);
        else
            vg_render_finding_json(j, snap, &fs->v[k]);
    }
    vg_json_arr_end(j);
}

int vg_render_check_json(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         enum vg_health_state state, struct vg_buf *out)
{
    struct vg_buf summary;
    vg_buf_init(&summary, 0);
    vg_summary(&summary, snap, fs, state);
    if (summary.len && summary.data[summary.len - 1] == '\n')
        summary.data[--summary.len] = '\0';

    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, VG_JSON_SCHEMA_CHECK, &snap->taken_at);
    vg_render_replay_json(&j, snap);
    char lower[16];
    const char *name = vg_render_check_state_name(state);
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof(lower); i++)
        lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    lower[i] = '\0';
    vg_json_kstr(&j, "status", lower);
    vg_json_ku64(&j, "exit_status", (uint64_t)state);
    vg_json_kstr(&j, "summary", summary.err ? NULL : vg_buf_str(&summary));
    vg_json_key(&j, "driver");
    vg_json_obj_begin(&j);
    vg_json_kbool(&j, "available", snap->driver_ok);
    vg_json_kstr(&j, "error", snap->driver_error);
    vg_json_obj_end(&j);
    vg_json_kstr(&j, "problem", fs->unchecked);
    for (size_t t = 0; t < VG_NTROUBLES; t++) {
        vg_json_key(&j, vg_gpu_troubles[t].json_key);
        vg_json_arr_begin(&j);
        for (size_t k = 0; k < snap->gpus.ngpus && snap->driver_ok; k++)
            if (vg_gpu_troubles[t].has(&snap->gpus.gpus[k]))
                vg_json_u64(&j, snap->gpus.gpus[k].index);
        vg_json_arr_end(&j);
    }
    vg_json_kind(&j, snap, fs, VG_FINDING_ALERT);
    vg_json_kind(&j, snap, fs, VG_FINDING_DIAGNOSIS);
    vg_render_unread_json(&j, snap);
    size_t counts[3], nalerts;
    vg_counts(fs, counts, &nalerts);
    vg_json_key(&j, "counts");
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "critical", counts[VG_SEV_CRITICAL]);
    vg_json_ku64(&j, "warning", counts[VG_SEV_WARNING]);
    vg_json_ku64(&j, "info", counts[VG_SEV_INFO]);
    vg_json_ku64(&j, "alerts", nalerts);
    vg_json_ku64(&j, "holders", snap->nholdings);
    vg_json_obj_end(&j);
    vg_json_obj_end(&j);
    vg_buf_release(&summary);
    return vg_json_finish(&j);
}
