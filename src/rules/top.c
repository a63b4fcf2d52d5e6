/*
 * `vramguard top`'s frame: snapshot + findings -> per-GPU bars by reason, history and findings,
 * and one row per holder process; the sort keys, filters and tree order over the rows. See
 * top.h for what is left out and why.
 */
#include <errno.h>
#include <stdio.h>
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

const struct vg_top_row *vg_top_frame_row(const struct vg_top_frame *f, pid_t pid)
{
    size_t lo = vg_top_row_lower(f, pid);
    return lo < f->nrows && f->rows[lo].pid == pid ? &f->rows[lo] : NULL;
}

/* ---- sorting and filtering ---- */

static const char *const vg_top_sort_names[VG_TOP_SORT_COUNT] = {
    "pid", "user", "gpu", "mem", "util", "cpu", "time", "state", "finding", "command", "rss",
};

const char *vg_top_sort_name(enum vg_top_sort s)
{
    return (unsigned)s < VG_TOP_SORT_COUNT ? vg_top_sort_names[s] : "?";
}

enum vg_top_sort vg_top_sort_parse(const char *name)
{
    for (unsigned i = 0; name && i < VG_TOP_SORT_COUNT; i++)
        if (strcmp(name, vg_top_sort_names[i]) == 0)
            return (enum vg_top_sort)i;
    return VG_TOP_SORT_COUNT;
}

static bool vg_top_has(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

bool vg_top_row_match(const struct vg_top_frame *f, const struct vg_top_row *r,
                      const struct vg_top_filter *flt)
{
    if (!flt)
        return true;
    if (flt->user && (!r->user || strcmp(r->user, flt->user) != 0))
        return false;
    if (flt->by_gpu) {
        bool hit = false;
        for (size_t i = 0; i < r->ngpus; i++)
            hit |= f->snap->gpus.gpus[r->gpus[i]].index == flt->gpu_index;
        if (!hit)
            return false;
    }
    if (flt->rule && (!r->has_finding || strcmp(f->fs.v[r->finding].rule, flt->rule) != 0))
        return false;
    if (flt->text && flt->text[0]) {
        char pid[24];
        int n = snprintf(pid, sizeof(pid), "%d", (int)r->pid);
        bool pid_hit = n > 0 && (size_t)n < sizeof(pid) && strcmp(pid, flt->text) == 0;
        if (!pid_hit && !vg_top_has(r->command, flt->text) && !vg_top_has(r->user, flt->text) &&
            !vg_top_has(r->container, flt->text))
            return false;
    }
    return true;
}

struct vg_top_sorter {
    const struct vg_top_frame *f;
    enum vg_top_sort key;
    bool reverse;
};

static int vg_top_cmp_str(const char *a, const char *b)
{
    if (!a || !b)
        return a ? -1 : b ? 1 : 0; /* unknown last */
    return strcmp(a, b);
}

static int vg_top_cmp_u64(bool ka, uint64_t a, bool kb, uint64_t b)
{
    if (ka != kb)
        return ka ? -1 : 1;    /* unknown last */
    return a > b ? -1 : a < b; /* biggest first */
}

static int vg_top_cmp_key(const struct vg_top_sorter *so, const struct vg_top_row *x,
                          const struct vg_top_row *y)
{
    const struct vg_top_frame *f = so->f;
    switch (so->key) {
    case VG_TOP_SORT_USER:
        return vg_top_cmp_str(x->user, y->user);
    case VG_TOP_SORT_GPU:
        if (!x->ngpus || !y->ngpus)
            return (int)!x->ngpus - (int)!y->ngpus; /* none last */
        return (x->gpus[0] > y->gpus[0]) - (x->gpus[0] < y->gpus[0]);
    case VG_TOP_SORT_MEM:
        return vg_top_cmp_u64(x->mem_known, x->mem, y->mem_known, y->mem);
    case VG_TOP_SORT_UTIL:
        return vg_top_cmp_u64(x->util_known, x->util, y->util_known, y->util);
    case VG_TOP_SORT_CPU:
        return vg_top_cmp_u64(x->cpu_known, x->cpu_tenths, y->cpu_known, y->cpu_tenths);
    case VG_TOP_SORT_TIME:
        return vg_top_cmp_u64(x->age_known, x->age_ms, y->age_known, y->age_ms);
    case VG_TOP_SORT_RSS:
        return vg_top_cmp_u64(x->rss_known, x->rss, y->rss_known, y->rss);
    case VG_TOP_SORT_STATE:
        return (x->state > y->state) - (x->state < y->state);
    case VG_TOP_SORT_FINDING:
        if (x->has_finding != y->has_finding)
            return x->has_finding ? -1 : 1;
        if (x->has_finding && x->severity != y->severity)
            return x->severity > y->severity ? -1 : 1;
        return x->has_finding ? strcmp(f->fs.v[x->finding].rule, f->fs.v[y->finding].rule) : 0;
    case VG_TOP_SORT_COMMAND:
        return vg_top_cmp_str(x->command, y->command);
    default:
        return 0;
    }
}

static int vg_top_cmp_rows(const void *a, const void *b, void *ctx)
{
    const struct vg_top_sorter *so = ctx;
    const struct vg_top_row *x = &so->f->rows[((const struct vg_top_line *)a)->row];
    const struct vg_top_row *y = &so->f->rows[((const struct vg_top_line *)b)->row];
    int c = vg_top_cmp_key(so, x, y);
    if (so->reverse)
        c = -c;
    if (c)
        return c;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Whether sorted lists the row of pid. */
static bool vg_top_listed(const struct vg_top_frame *f, const struct vg_top_line *v, size_t n,
                          pid_t pid)
{
    for (size_t i = 0; pid > 1 && i < n; i++)
        if (f->rows[v[i].row].pid == pid)
            return true;
    return false;
}

/* Lines of sorted whose row's parent is ppid. */
static size_t vg_top_siblings(const struct vg_top_frame *f, const struct vg_top_line *v, size_t n,
                              pid_t ppid)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += f->rows[v[i].row].ppid == ppid;
    return k;
}

/* Append line l at depth, then the listed rows whose parent it is, one deeper. */
static size_t vg_top_emit(const struct vg_top_frame *f, const struct vg_top_line *sorted, size_t n,
                          struct vg_top_line l, unsigned depth, struct vg_top_line *out, size_t k)
{
    l.depth = depth;
    out[k++] = l;
    pid_t pid = f->rows[l.row].pid;
    for (size_t j = 0; depth < 4 && j < n; j++)
        if (f->rows[sorted[j].row].ppid == pid && sorted[j].row != l.row)
            k = vg_top_emit(f, sorted, n, sorted[j], depth + 1, out, k);
    return k;
}

/* Put sorted (n lines, rows only) into out (room for 2n) in tree order: a row whose parent is
 * listed goes under it; rows sharing a parent that is not listed (a launcher holding no GPU)
 * go under a group line for it when there are two or more. */
static size_t vg_top_treeify(const struct vg_top_frame *f, const struct vg_top_line *sorted,
                             size_t n, struct vg_top_line *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct vg_top_row *r = &f->rows[sorted[i].row];
        if (vg_top_listed(f, sorted, n, r->ppid))
            continue; /* comes under its parent */
        if (r->ppid <= 1 || vg_top_siblings(f, sorted, n, r->ppid) < 2) {
            k = vg_top_emit(f, sorted, n, sorted[i], 0, out, k);
            continue;
        }
        bool done = false;
        for (size_t j = 0; j < k; j++)
            done |= out[j].group && out[j].pid == r->ppid;
        if (done)
            continue;
        out[k++] = (struct vg_top_line){.group = true, .pid = r->ppid, .depth = 0};
        for (size_t j = 0; j < n; j++)
            if (f->rows[sorted[j].row].ppid == r->ppid)
                k = vg_top_emit(f, sorted, n, sorted[j], 1, out, k);
    }
    return k;
}

int vg_top_lines(const struct vg_top_frame *f, const struct vg_top_filter *flt,
                 enum vg_top_sort key, bool reverse, bool tree, struct vg_top_line **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct vg_top_line *v = calloc(f->nrows ? f->nrows : 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < f->nrows; i++)
        if (vg_top_row_match(f, &f->rows[i], flt))
            v[k++] = (struct vg_top_line){.row = i, .pid = f->rows[i].pid};
    struct vg_top_sorter so = {f, key, reverse};
    if (k > 1)
        qsort_r(v, k, sizeof(*v), vg_top_cmp_rows, &so);
    if (tree && k) {
        struct vg_top_line *t = calloc(2 * k, sizeof(*t));
        if (!t) {
            free(v);
            return -ENOMEM;
        }
        k = vg_top_treeify(f, v, k, t);
        free(v);
        v = t;
    }
    *out = v;
    *n = k;
    return 0;
}
