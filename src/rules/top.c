/*
 * `vramguard top`'s frame: snapshot + findings -> per-GPU bars by reason, history and findings,
 * and one row per holder process. See top.h for what is left out and why; the rows' sort keys,
 * filters and tree order are render/top_list.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rules/top.h"
#include "util/array.h"

void vg_top_history_release(struct vg_top_history *h)
{
    for (size_t i = 0; h && i < h->n; i++)
        free(h->g[i].uuid);
    if (h) {
        free(h->g);
        memset(h, 0, sizeof(*h));
    }
}

/* The history of the GPU with this UUID, created when new; NULL on -ENOMEM. */
static struct vg_top_hist_gpu *vg_top_hist_find(struct vg_top_history *h, const char *uuid)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->g[i].uuid, uuid) == 0)
            return &h->g[i];
    if (VG_ARRAY_GROW(h->g, h->cap, h->n + 1))
        return NULL;
    struct vg_top_hist_gpu *g = &h->g[h->n];
    memset(g, 0, sizeof(*g));
    if (!(g->uuid = strdup(uuid)))
        return NULL;
    h->n++;
    return g;
}

static int vg_top_hist_add(struct vg_top_history *h, struct vg_top_gpu *tg)
{
    const struct vg_gpu *g = tg->g;
    unsigned char pct = VG_TOP_HIST_UNKNOWN;
    if ((g->known & VG_GPU_K_MEM) && !g->hung && !g->lost && g->mem_total)
        pct = (unsigned char)(g->mem_used >= g->mem_total ? 100 : g->mem_used * 100 / g->mem_total);
    struct vg_top_hist_gpu *hg = NULL;
    if (h && (g->known & VG_GPU_K_UUID)) {
        if (!(hg = vg_top_hist_find(h, g->uuid)))
            return -ENOMEM;
        if (hg->n == VG_TOP_HIST) {
            memmove(hg->pct, hg->pct + 1, VG_TOP_HIST - 1);
            hg->n--;
        }
        hg->pct[hg->n++] = pct;
    }
    if (hg) {
        memcpy(tg->hist, hg->pct, hg->n);
        tg->nhist = hg->n;
    } else {
        tg->hist[0] = pct;
        tg->nhist = 1;
    }
    return 0;
}

static int vg_top_cmp_finding(const void *a, const void *b, void *ctx)
{
    const struct vg_findings *fs = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int sx = (int)fs->v[x].severity, sy = (int)fs->v[y].severity;
    if (sx != sy)
        return sy - sx;
    return x < y ? -1 : x > y;
}

/* The findings that name GPU gi, worst first (table order among equals). */
static int vg_top_gpu_findings(const struct vg_findings *fs, struct vg_top_gpu *tg)
{
    for (size_t i = 0; i < fs->n; i++)
        for (size_t k = 0; k < fs->v[i].ngpus; k++)
            if (fs->v[i].gpus[k] == tg->gi) {
                if (VG_ARRAY_GROW(tg->findings, tg->findings_cap, tg->nfindings + 1))
                    return -ENOMEM;
                tg->findings[tg->nfindings++] = i;
                break;
            }
    if (tg->nfindings > 1)
        qsort_r(tg->findings, tg->nfindings, sizeof(size_t), vg_top_cmp_finding, (void *)fs);
    return 0;
}

static int vg_top_gpu_reasons(const struct vg_top_frame *f, const struct vg_top_build_opts *o,
                              struct vg_top_gpu *tg)
{
    const struct vg_gpu *g = tg->g;
    if (!f->snap->driver_ok || g->hung || g->lost || !(g->known & VG_GPU_K_MEM))
        return 0;
    struct vg_reason_gpu rg;
    uint64_t cmax = o && o->context_max ? o->context_max : VG_RULE_CONTEXT_MAX_DEFAULT;
    int rc = vg_reason_gpu_build(f->snap, tg->gi, &f->fs, cmax, &rg);
    if (rc)
        return rc;
    tg->reasons_known = rg.known;
    memcpy(tg->bytes, rg.bytes, sizeof(tg->bytes));
    if ((g->known & VG_GPU_K_RESERVED) && !f->snap->per_gpu[tg->gi].unexplained_has_reserved) {
        tg->reserved_known = true;
        tg->reserved = g->mem_reserved;
    }
    vg_reason_gpu_release(&rg);
    return 0;
}

static int vg_top_build_gpus(struct vg_top_frame *f, const struct vg_top_build_opts *o,
                             struct vg_top_history *hist)
{
    const struct vg_snapshot *s = f->snap;
    if (!s->driver_ok || s->gpus.ngpus == 0)
        return 0;
    if (!(f->gpus = calloc(s->gpus.ngpus, sizeof(*f->gpus))))
        return -ENOMEM;
    f->ngpus = s->gpus.ngpus;
    for (size_t i = 0; i < f->ngpus; i++) {
        struct vg_top_gpu *tg = &f->gpus[i];
        tg->gi = i;
        tg->g = &s->gpus.gpus[i];
        int rc;
        if ((rc = vg_top_gpu_reasons(f, o, tg)) || (rc = vg_top_gpu_findings(&f->fs, tg)) ||
            (rc = vg_top_hist_add(hist, tg)))
            return rc;
    }
    return 0;
}

/* Where pid's row is or would go: rows are sorted by pid. */
static size_t vg_top_row_lower(const struct vg_top_frame *f, pid_t pid)
{
    return vg_array_lower_bound(&pid, f->rows, f->nrows, sizeof(*f->rows), vg_array_cmp_pid);
}

/* The row of pid, appended when new (rows stay sorted: holdings come by gpu, so insert). */
static struct vg_top_row *vg_top_row_get(struct vg_top_frame *f, pid_t pid, size_t *cap)
{
    size_t lo = vg_top_row_lower(f, pid);
    if (lo < f->nrows && f->rows[lo].pid == pid)
        return &f->rows[lo];
    if (VG_ARRAY_GROW(f->rows, *cap, f->nrows + 1))
        return NULL;
    memmove(&f->rows[lo + 1], &f->rows[lo], (f->nrows - lo) * sizeof(*f->rows));
    f->nrows++;
    struct vg_top_row *r = &f->rows[lo];
    memset(r, 0, sizeof(*r));
    r->pid = pid;
    r->state = '?';
    r->reason = VG_REASON_COUNT;
    return r;
}

static void vg_top_row_proc(struct vg_top_row *r, const struct vg_proc *p,
                            const struct vg_top_build_opts *o)
{
    r->proc = p;
    r->user = p->user;
    if (p->known & VG_PROC_K_STAT) {
        r->state = p->state;
        r->ppid = p->ppid;
        if (o && o->clk_tck && o->now_ticks >= p->start_ticks) {
            r->age_known = true;
            r->age_ms = (o->now_ticks - p->start_ticks) * 1000u / o->clk_tck;
        }
    }
    if (p->activity_known && p->activity_ms) {
        r->cpu_known = true;
        uint64_t t = p->activity_cpu_ms * 1000u / p->activity_ms;
        r->cpu_tenths = t > 100000u ? 100000u : (unsigned)t;
    }
    if ((p->known & VG_PROC_K_STAT) && p->rss_known && o && o->page_size) {
        r->rss_known = true;
        r->rss =
            p->rss_pages > UINT64_MAX / o->page_size ? UINT64_MAX : p->rss_pages * o->page_size;
    }
    r->container = p->pod_uid ? p->pod_uid : p->container_id;
    r->cvd = p->env[VG_ENV_CUDA_VISIBLE_DEVICES];
    r->command = p->cmdline && p->cmdline[0] ? p->cmdline : p->comm;
}

static void vg_top_row_holding(struct vg_top_frame *f, struct vg_top_row *r,
                               const struct vg_holding *h)
{
    if (h->gpu != VG_SNAP_NO_GPU && (r->ngpus == 0 || r->gpus[r->ngpus - 1] != h->gpu)) {
        if (r->ngpus < sizeof(r->gpus) / sizeof(r->gpus[0]))
            r->gpus[r->ngpus++] = h->gpu;
        else
            r->ngpus_more++;
    }
    r->seen |= h->seen;
    if (h->used_known) {
        r->mem_known = true;
        r->mem = r->mem + h->used_bytes < r->mem ? UINT64_MAX : r->mem + h->used_bytes;
    }
    if (h->gpu != VG_SNAP_NO_GPU && f->snap->driver_ok) {
        const struct vg_gpu_proc *gp =
            vg_gpu_find_proc(&f->snap->gpus.gpus[h->gpu], (uint32_t)h->pid);
        if (gp && gp->util_known && (!r->util_known || gp->sm_util > r->util)) {
            r->util_known = true;
            r->util = gp->sm_util;
        }
    }
}

/* The reason class of each row's memory, from the per-GPU classification (rules/reason.h). */
static int vg_top_row_reasons(struct vg_top_frame *f, const struct vg_top_build_opts *o)
{
    uint64_t cmax = o && o->context_max ? o->context_max : VG_RULE_CONTEXT_MAX_DEFAULT;
    for (size_t i = 0; i < f->ngpus; i++) {
        if (!f->gpus[i].reasons_known)
            continue;
        struct vg_reason_gpu rg;
        int rc = vg_reason_gpu_build(f->snap, i, &f->fs, cmax, &rg);
        if (rc)
            return rc;
        for (size_t k = 0; k < rg.n; k++) {
            struct vg_top_row *r = (struct vg_top_row *)vg_top_frame_row(f, (pid_t)rg.h[k].pid);
            /* over several GPUs the first class in the enum's order wins (expected last) */
            if (r && rg.h[k].reason < r->reason)
                r->reason = rg.h[k].reason;
        }
        vg_reason_gpu_release(&rg);
    }
    return 0;
}

static void vg_top_row_findings(struct vg_top_frame *f)
{
    for (size_t i = 0; i < f->fs.n; i++) {
        const struct vg_finding *fd = &f->fs.v[i];
        for (size_t k = 0; k < fd->npids; k++) {
            struct vg_top_row *r = (struct vg_top_row *)vg_top_frame_row(f, fd->pids[k]);
            if (r && (!r->has_finding || fd->severity > r->severity)) {
                r->has_finding = true;
                r->finding = i;
                r->severity = fd->severity;
            }
        }
    }
}

static int vg_top_build_rows(struct vg_top_frame *f, const struct vg_top_build_opts *o)
{
    const struct vg_snapshot *s = f->snap;
    size_t cap = 0;
    for (size_t i = 0; i < s->nholdings; i++) {
        const struct vg_holding *h = &s->holdings[i];
        if (h->bogus_pid)
            continue;
        struct vg_top_row *r = vg_top_row_get(f, h->pid, &cap);
        if (!r)
            return -ENOMEM;
        if (h->proc && !r->proc)
            vg_top_row_proc(r, h->proc, o);
    }
    /* the GPUs of a row come in holding order, which is by GPU */
    for (size_t i = 0; i < s->nholdings; i++) {
        const struct vg_holding *h = &s->holdings[i];
        struct vg_top_row *r =
            h->bogus_pid ? NULL : (struct vg_top_row *)vg_top_frame_row(f, h->pid);
        if (r)
            vg_top_row_holding(f, r, h);
    }
    vg_top_row_findings(f);
    return vg_top_row_reasons(f, o);
}

int vg_top_frame_build(struct vg_snapshot *snap, struct vg_findings *fs, bool hung,
                       const struct vg_top_build_opts *o, struct vg_top_history *hist,
                       struct vg_top_frame **out)
{
    *out = NULL;
    struct vg_top_frame *f = calloc(1, sizeof(*f));
    if (!f) {
        vg_snap_free(snap);
        vg_findings_release(fs);
        return -ENOMEM;
    }
    f->snap = snap;
    f->fs = *fs;
    vg_findings_init(fs);
    f->hung = hung;
    int rc = vg_top_build_gpus(f, o, hist);
    if (!rc)
        rc = vg_top_build_rows(f, o);
    if (rc) {
        vg_top_frame_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void vg_top_frame_free(struct vg_top_frame *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->ngpus; i++)
        free(f->gpus[i].findings);
    free(f->gpus);
    free(f->rows);
    vg_findings_release(&f->fs);
    vg_snap_free(f->snap);
    free(f);
}

int vg_top_frame_diagnose(struct vg_snapshot *snap, bool hung, const struct vg_top_build_opts *o,
                          struct vg_top_history *hist, struct vg_top_frame **out,
                          struct vg_err *err)
{
    *out = NULL;
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    ro.check_shell = false;
    if (vg_leftovers_measure(snap, VG_SNAP_ACTIVITY_MS) != 0 ||
        vg_rules_run(snap, &ro, &fs, err) != 0) {
        vg_findings_release(&fs);
        vg_snap_free(snap);
        return err->code ? err->code : -ENOMEM;
    }
    return vg_top_frame_build(snap, &fs, hung, o, hist, out);
}

const struct vg_top_row *vg_top_frame_row(const struct vg_top_frame *f, pid_t pid)
{
    size_t lo = vg_top_row_lower(f, pid);
    return lo < f->nrows && f->rows[lo].pid == pid ? &f->rows[lo] : NULL;
}
