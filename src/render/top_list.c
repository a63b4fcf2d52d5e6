/*
 * The holder list of `vramguard top` (see top_list.h): the sort keys, the filters and the tree
 * order over a frame's rows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/top_list.h"

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
