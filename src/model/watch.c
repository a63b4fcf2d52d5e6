/*
 * The watch engine (see watch.h): sample -> view -> events (data only; render/event.c words
 * them).
 *
 * A view keeps its own copies of everything it reports (never pointers into a snapshot, which
 * is freed after each step). Holders and findings are kept sorted by identity, so that the
 * previous view is searched with bsearch and events come out in a stable order: GPU, MIG
 * device, PID. A holder's identity is its fields (vg_holder_cmp); a finding's is a text key,
 * whose order is the order its events have always come in.
 */
#include "model/watch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/buf.h"

/* A GPU is the same GPU from view to view by its UUID, or by its index when the driver gave
 * no UUID (vg_gpu_same). */
struct vg_watch_gpu {
    unsigned index;
    char *uuid, *name;
    bool minor_known;
    unsigned minor;
    bool listed; /* in the driver's latest answer */
    bool lost;
    bool hung; /* a driver call for it did not return in time */
    bool mem_known;
    uint64_t used, total;
};

/* A holder is identified by (the GPU it holds, MIG device, PID, start time): vg_holder_cmp. */
struct vg_watch_holder {
    bool gpu_known;
    unsigned gpu_index;
    char *gpu_uuid;
    size_t snap_gpu; /* index into this step's snapshot, or VG_SNAP_NO_GPU */
    bool minor_known;
    unsigned minor;
    int mig;
    pid_t pid;
    bool start_known;
    uint64_t start;
    unsigned seen;
    bool in_proc;
    bool stale; /* the driver's entry outlived its process: user and command are
                 * what the PID names now */
    char *user, *command;
    bool mem_known;
    uint64_t mem;
    bool reported_known; /* the memory figure last reported in an event */
    uint64_t reported;
    bool idle;
    uint64_t idle_since; /* now_ms when it was first seen idle in this stretch */
};

/* A diagnosis or an alert (model/verdict.h), as the view follows it. */
struct vg_watch_finding {
    /* Identity as text: diagnoses "rule|gpu keys|pids", alerts "rule|gpu key|mig|pid|start".
     * Left as text on purpose: events come out in the order of these strings, whose variable
     * lists and unpadded numbers ("100" before "99", "a,b|" before "a|") a field comparator
     * would have to re-create character by character to keep that order. */
    char *key;
    enum vg_finding_kind kind;
    const char *rule;
    enum vg_severity severity;
    char *title;
    unsigned *gpus; /* NVML indices */
    size_t ngpus;
    char *gpu_uuid; /* of the first GPU */
    pid_t *pids;
    size_t npids;
    bool bytes_known;
    uint64_t bytes;
    int mig;                       /* alerts: the holding's MIG device, or -1 */
    char *user, *command, *expect; /* alerts; NULL otherwise */
};

struct vg_watch_view {
    bool driver_ok, hung, ever_ok, frozen;
    char *driver_error;
    struct vg_watch_gpu *gpus;
    size_t ngpus, gpus_cap;
    struct vg_watch_holder *holders;
    size_t nholders, holders_cap;
    struct vg_watch_finding *findings; /* diagnoses and alerts */
    size_t nfindings, findings_cap;
    char *problem; /* why some expectation could not be checked */
};

static const char *const vg_event_names[] = {
    [VG_EV_DRIVER_HUNG] = "driver-hung",
    [VG_EV_DRIVER_ERROR] = "driver-error",
    [VG_EV_DRIVER_RECOVERED] = "driver-recovered",
    [VG_EV_GPU_PRESENT] = "gpu-present",
    [VG_EV_GPU_APPEARED] = "gpu-appeared",
    [VG_EV_GPU_LOST] = "gpu-lost",
    [VG_EV_GPU_BACK] = "gpu-back",
    [VG_EV_GPU_HUNG] = "gpu-hung",
    [VG_EV_HOLDER_PRESENT] = "holder-present",
    [VG_EV_HOLDER_APPEARED] = "holder-appeared",
    [VG_EV_HOLDER_LEFT] = "holder-left",
    [VG_EV_HOLDER_MEMORY] = "holder-memory",
    [VG_EV_FINDING_PRESENT] = "finding-present",
    [VG_EV_FINDING_OPENED] = "finding-opened",
    [VG_EV_FINDING_CLOSED] = "finding-closed",
    [VG_EV_ALERT] = "alert",
    [VG_EV_ALERT_CLEARED] = "alert-cleared",
};

const char *vg_event_name(enum vg_event_type t)
{
    return (size_t)t < sizeof(vg_event_names) / sizeof(vg_event_names[0]) ? vg_event_names[t]
                                                                          : "unknown";
}

/* ---- events ------------------------------------------------------------------------------ */

void vg_event_list_init(struct vg_event_list *e)
{
    memset(e, 0, sizeof(*e));
}

static void vg_event_release(struct vg_event *ev)
{
    free(ev->text);
    free(ev->gpu_name);
    free(ev->gpu_uuid);
    free(ev->gpus);
    free(ev->pids);
    free(ev->user);
    free(ev->command);
    free(ev->expect);
    free(ev->driver_error);
}

void vg_event_list_release(struct vg_event_list *e)
{
    for (size_t i = 0; i < e->n; i++)
        vg_event_release(&e->v[i]);
    free(e->v);
    memset(e, 0, sizeof(*e));
}

/* Allocation failures while building are collected here and checked once per step. */
struct vg_step {
    const struct vg_watch_opts *o;
    const struct vg_snapshot *snap;
    const struct vg_watch_view *prev;
    struct vg_watch_view *v;
    struct vg_event_list *events;
    uint64_t now;
    bool first;
    int err;
};

static char *vg_sdup(struct vg_step *s, const char *str)
{
    if (!str)
        return NULL;
    char *d = strdup(str);
    if (!d)
        s->err = -ENOMEM;
    return d;
}

static struct vg_event *vg_ev_new(struct vg_step *s, enum vg_event_type t, enum vg_severity sev)
{
    struct vg_event *ev = VG_ARRAY_PUSH(s->events->v, s->events->n, s->events->cap);
    if (!ev) {
        s->err = -ENOMEM;
        return NULL;
    }
    ev->type = t;
    ev->severity = sev;
    ev->mig = -1;
    return ev;
}

static void vg_ev_gpu(struct vg_step *s, struct vg_event *ev, bool known, unsigned index,
                      const char *uuid)
{
    ev->gpu_known = known;
    ev->gpu = index;
    ev->gpu_uuid = vg_sdup(s, uuid);
    if (!known)
        return;
    if (!(ev->gpus = malloc(sizeof(*ev->gpus)))) {
        s->err = -ENOMEM;
        return;
    }
    ev->gpus[0] = index;
    ev->ngpus = 1;
}

static void vg_ev_pid(struct vg_step *s, struct vg_event *ev, pid_t pid)
{
    ev->pid_known = true;
    ev->pid = pid;
    if (!(ev->pids = malloc(sizeof(*ev->pids)))) {
        s->err = -ENOMEM;
        return;
    }
    ev->pids[0] = pid;
    ev->npids = 1;
}

/* ---- building the view ------------------------------------------------------------------- */

static void vg_watch_gpu_release(struct vg_watch_gpu *g)
{
    free(g->uuid);
    free(g->name);
}

static void vg_watch_holder_release(struct vg_watch_holder *h)
{
    free(h->gpu_uuid);
    free(h->user);
    free(h->command);
}

static void vg_watch_finding_release(struct vg_watch_finding *f)
{
    free(f->key);
    free(f->title);
    free(f->gpus);
    free(f->gpu_uuid);
    free(f->pids);
    free(f->user);
    free(f->command);
    free(f->expect);
}

void vg_watch_view_free(struct vg_watch_view *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->ngpus; i++)
        vg_watch_gpu_release(&v->gpus[i]);
    for (size_t i = 0; i < v->nholders; i++)
        vg_watch_holder_release(&v->holders[i]);
    for (size_t i = 0; i < v->nfindings; i++)
        vg_watch_finding_release(&v->findings[i]);
    free(v->gpus);
    free(v->holders);
    free(v->findings);
    free(v->driver_error);
    free(v->problem);
    free(v);
}

const char *vg_watch_view_problem(const struct vg_watch_view *v)
{
    return v ? v->problem : NULL;
}

bool vg_watch_view_frozen(const struct vg_watch_view *v)
{
    return v && v->frozen;
}

/* Grow an array of elem-sized entries by one, zeroed; NULL (and s->err) on failure. */
static void *vg_push(struct vg_step *s, void *arrp, size_t *n, size_t *cap, size_t elem)
{
    void *p = vg_array_push(arrp, n, cap, elem);
    if (!p)
        s->err = -ENOMEM;
    return p;
}

static int vg_cmp_finding(const void *a, const void *b)
{
    const struct vg_watch_finding *x = a, *y = b;
    return strcmp(x->key, y->key);
}

static void vg_sort(void *arr, size_t n, size_t elem, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(arr, n, elem, cmp);
}

/* The entry of arr (sorted by cmp) with the identity of key, an entry of the same type. */
static const void *vg_find(const void *arr, size_t n, size_t elem, const void *key,
                           int (*cmp)(const void *, const void *))
{
    if (!arr || n == 0)
        return NULL;
    return bsearch(key, arr, n, elem, cmp);
}

static const struct vg_watch_finding *vg_find_finding(const struct vg_watch_finding *arr, size_t n,
                                                      const struct vg_watch_finding *f)
{
    return f->key ? vg_find(arr, n, sizeof(*arr), f, vg_cmp_finding) : NULL;
}

/* Two numbers in the order their text "%0*u|" has (numerically while both fit the width; as
 * text beyond, where "1000|" comes before "999|"): the order holders' events have always come
 * in, when identities were text. */
static int vg_cmp_num_text(uint64_t a, uint64_t b, int width)
{
    uint64_t lim = 1;
    for (int i = 0; i < width; i++)
        lim *= 10;
    if (a < lim && b < lim)
        return a < b ? -1 : a > b;
    char x[32], y[32];
    snprintf(x, sizeof(x), "%0*" PRIu64 "|", width, a);
    snprintf(y, sizeof(y), "%0*" PRIu64 "|", width, b);
    return strcmp(x, y);
}

/* Two strings in the order of their text followed by '|' (for the same reason). */
static int vg_cmp_str_text(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        i++;
    unsigned char x = a[i] ? (unsigned char)a[i] : '|', y = b[i] ? (unsigned char)b[i] : '|';
    return x < y ? -1 : x > y;
}

/* How a holder's GPU is named in its identity, in this order: the minor number when known
 * (the one name both the driver and the device nodes give a GPU, so holders keep their
 * identity while the driver's view is missing), else the UUID, else the index. */
enum vg_holder_gpu_name { VG_HG_INDEX, VG_HG_MINOR, VG_HG_UUID };

static enum vg_holder_gpu_name vg_holder_gpu_name(const struct vg_watch_holder *h)
{
    return h->minor_known ? VG_HG_MINOR : h->gpu_uuid ? VG_HG_UUID : VG_HG_INDEX;
}

/* Where a holder holds: its GPU, MIG device and PID (its identity but the start time). */
static int vg_holder_cmp_place(const struct vg_watch_holder *x, const struct vg_watch_holder *y)
{
    enum vg_holder_gpu_name nx = vg_holder_gpu_name(x), ny = vg_holder_gpu_name(y);
    if (nx != ny)
        return nx < ny ? -1 : 1;
    int c = nx == VG_HG_MINOR  ? vg_cmp_num_text(x->minor, y->minor, 3)
            : nx == VG_HG_UUID ? vg_cmp_str_text(x->gpu_uuid, y->gpu_uuid)
                               : vg_cmp_num_text(x->gpu_index, y->gpu_index, 0);
    if (c)
        return c;
    if ((c = vg_cmp_num_text((uint64_t)(x->mig + 1), (uint64_t)(y->mig + 1), 3)) != 0)
        return c;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* A holder's identity: where it holds, and the start time of its process (0 when unknown), so
 * that a reused PID is another holder. */
static int vg_holder_cmp(const void *a, const void *b)
{
    const struct vg_watch_holder *x = a, *y = b;
    int c = vg_holder_cmp_place(x, y);
    if (c)
        return c;
    uint64_t sx = x->start_known ? x->start : 0, sy = y->start_known ? y->start : 0;
    return sx < sy ? -1 : sx > sy;
}

static const struct vg_watch_holder *vg_find_holder(const struct vg_watch_holder *arr, size_t n,
                                                    const struct vg_watch_holder *h)
{
    return vg_find(arr, n, sizeof(*arr), h, vg_holder_cmp);
}

/* The same GPU in two views: by UUID, or by index when the driver gave none. */
static bool vg_gpu_same(const struct vg_watch_gpu *a, const struct vg_watch_gpu *b)
{
    if (a->uuid || b->uuid)
        return a->uuid && b->uuid && strcmp(a->uuid, b->uuid) == 0;
    return a->index == b->index;
}

static void vg_copy_gpu(struct vg_step *s, struct vg_watch_gpu *d, const struct vg_watch_gpu *g)
{
    *d = *g;
    d->uuid = vg_sdup(s, g->uuid);
    d->name = vg_sdup(s, g->name);
}

static void vg_build_gpus(struct vg_step *s)
{
    struct vg_watch_view *v = s->v;
    const struct vg_watch_view *prev = s->prev;
    if (v->frozen) {
        for (size_t i = 0; i < prev->ngpus && !s->err; i++) {
            struct vg_watch_gpu *d = vg_push(s, &v->gpus, &v->ngpus, &v->gpus_cap, sizeof(*d));
            if (d)
                vg_copy_gpu(s, d, &prev->gpus[i]);
        }
        return;
    }
    for (size_t i = 0; i < s->snap->gpus.ngpus && !s->err; i++) {
        const struct vg_gpu *g = &s->snap->gpus.gpus[i];
        struct vg_watch_gpu *d = vg_push(s, &v->gpus, &v->ngpus, &v->gpus_cap, sizeof(*d));
        if (!d)
            break;
        d->index = g->index;
        d->uuid = vg_sdup(s, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
        d->name = vg_sdup(s, (g->known & VG_GPU_K_NAME) ? g->name : NULL);
        d->minor_known = (g->known & VG_GPU_K_MINOR) != 0;
        d->minor = g->minor;
        d->listed = true;
        d->lost = g->lost;
        d->hung = g->hung;
        d->mem_known = (g->known & VG_GPU_K_MEM) != 0;
        d->used = g->mem_used;
        d->total = g->mem_total;
    }
    /* GPUs seen before and missing from this answer stay, unlisted, so a return is "back". */
    if (!prev || !v->driver_ok || s->err)
        return;
    size_t n = v->ngpus;
    for (size_t i = 0; i < prev->ngpus && !s->err; i++) {
        bool here = false;
        for (size_t k = 0; k < n && !here; k++)
            here = vg_gpu_same(&v->gpus[k], &prev->gpus[i]);
        if (here)
            continue;
        struct vg_watch_gpu *d = vg_push(s, &v->gpus, &v->ngpus, &v->gpus_cap, sizeof(*d));
        if (d) {
            vg_copy_gpu(s, d, &prev->gpus[i]);
            d->listed = false;
        }
    }
}

static const struct vg_watch_gpu *vg_view_gpu_by_minor(const struct vg_watch_view *v,
                                                       unsigned minor)
{
    for (size_t i = 0; i < v->ngpus; i++)
        if (v->gpus[i].listed && v->gpus[i].minor_known && v->gpus[i].minor == minor)
            return &v->gpus[i];
    return NULL;
}

/* The process's utilisation on its GPU: 1 idle, 0 busy, -1 unknown. */
static int vg_holder_idle(const struct vg_snapshot *snap, const struct vg_holding *h)
{
    if (h->gpu == VG_SNAP_NO_GPU || h->mig >= 0 || !h->used_known || h->used_bytes == 0)
        return -1;
    const struct vg_gpu *g = &snap->gpus.gpus[h->gpu];
    if (g->known & VG_GPU_K_PROC_UTIL) {
        const struct vg_gpu_proc *p = vg_gpu_find_proc(g, (uint32_t)h->pid);
        if (p && p->util_known)
            return p->sm_util == 0;
    }
    /* No sample of its own (silence is not 0%): the GPU's own utilisation, 0% only when nothing
     * on it worked. */
    if (g->known & VG_GPU_K_UTIL)
        return g->util_gpu == 0;
    return -1;
}

static void vg_holder_from(struct vg_step *s, struct vg_watch_holder *d, const struct vg_holding *h)
{
    const struct vg_watch_view *v = s->v;
    const struct vg_proc *p = h->proc;
    d->snap_gpu = h->gpu;
    d->minor_known = h->minor_known;
    d->minor = h->minor;
    d->mig = h->mig;
    d->pid = h->pid;
    d->seen = h->seen;
    d->in_proc = p != NULL;
    d->stale = h->stale;
    if (h->stale)
        p = h->stale_proc;
    d->mem_known = h->used_known;
    d->mem = h->used_bytes;
    if (p && !h->stale && (p->known & VG_PROC_K_STAT)) {
        d->start_known = true;
        d->start = p->start_ticks;
    }
    if (p) {
        d->user = vg_sdup(s, p->user);
        d->command = vg_sdup(s, p->cmdline && *p->cmdline ? p->cmdline : p->comm);
    }
    const struct vg_watch_gpu *wg = NULL;
    if (h->gpu != VG_SNAP_NO_GPU) {
        const struct vg_gpu *g = &s->snap->gpus.gpus[h->gpu];
        d->gpu_known = true;
        d->gpu_index = g->index;
        d->gpu_uuid = vg_sdup(s, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    } else if (h->minor_known && (wg = vg_view_gpu_by_minor(v, h->minor)) != NULL) {
        d->gpu_known = true;
        d->gpu_index = wg->index;
        d->gpu_uuid = vg_sdup(s, wg->uuid);
    }
}

/* A PID the driver still lists after /proc lost it (gone, its memory not yet freed) keeps
 * the identity it had: the same holder, not one leaving and another appearing. */
static void vg_holder_adopt_start(struct vg_watch_holder *d, const struct vg_watch_view *prev)
{
    for (size_t i = 0; i < prev->nholders; i++) {
        const struct vg_watch_holder *p = &prev->holders[i];
        if (!p->start_known || vg_holder_cmp_place(p, d) != 0)
            continue;
        d->start_known = true;
        d->start = p->start;
        return;
    }
}

static void vg_copy_holder(struct vg_step *s, struct vg_watch_holder *d,
                           const struct vg_watch_holder *h)
{
    *d = *h;
    d->gpu_uuid = vg_sdup(s, h->gpu_uuid);
    d->user = vg_sdup(s, h->user);
    d->command = vg_sdup(s, h->command);
    d->snap_gpu = VG_SNAP_NO_GPU;
}

/* Whether any GPU of this view hangs (vg_gpu.hung): its driver side is frozen alone. */
static bool vg_view_any_hung(const struct vg_watch_view *v)
{
    for (size_t i = 0; i < v->ngpus; i++)
        if (v->gpus[i].listed && v->gpus[i].hung)
            return true;
    return false;
}

/* Whether the GPU numbered index (or with this minor, when known) hangs in view v. */
static bool vg_view_gpu_hung(const struct vg_watch_view *v, bool minor_known, unsigned minor,
                             bool index_known, unsigned index)
{
    for (size_t i = 0; i < v->ngpus; i++) {
        const struct vg_watch_gpu *g = &v->gpus[i];
        if (!g->listed || !g->hung)
            continue;
        if (minor_known ? g->minor_known && g->minor == minor : index_known && g->index == index)
            return true;
    }
    return false;
}

static void vg_build_holders(struct vg_step *s)
{
    struct vg_watch_view *v = s->v;
    const struct vg_watch_view *prev = s->prev;
    bool any_hung = prev && vg_view_any_hung(v);
    for (size_t i = 0; i < s->snap->nholdings && !s->err; i++) {
        const struct vg_holding *h = &s->snap->holdings[i];
        if (h->bogus_pid)
            continue;
        struct vg_watch_holder *d =
            vg_push(s, &v->holders, &v->nholders, &v->holders_cap, sizeof(*d));
        if (!d)
            break;
        vg_holder_from(s, d, h);
        if (!d->start_known && prev)
            vg_holder_adopt_start(d, prev);
        const struct vg_watch_holder *p =
            prev ? vg_find_holder(prev->holders, prev->nholders, d) : NULL;
        /* The driver's side cannot be seen: the whole view is frozen, or this GPU hangs. */
        bool blind = v->frozen || (h->gpu != VG_SNAP_NO_GPU && s->snap->gpus.gpus[h->gpu].hung);
        if (p) {
            d->reported_known = p->reported_known;
            d->reported = p->reported;
            if (blind) {
                /* the driver's side as last seen, so nothing seems to change */
                d->seen |= p->seen;
                if (!d->mem_known) {
                    d->mem_known = p->mem_known;
                    d->mem = p->mem;
                }
            }
        }
        if (blind) {
            d->idle = p && p->idle;
            d->idle_since = p ? p->idle_since : 0;
            continue;
        }
        if (vg_holder_idle(s->snap, h) == 1) {
            d->idle = true;
            d->idle_since = p && p->idle ? p->idle_since : s->now;
        }
    }
    if (s->err)
        return;
    vg_sort(v->holders, v->nholders, sizeof(*v->holders), vg_holder_cmp);
    if (!v->frozen && !any_hung)
        return;
    /* Holders only the driver showed cannot be seen now (everywhere, or on a GPU that hangs):
     * carry those whose process lives. */
    size_t n = v->nholders;
    for (size_t i = 0; i < prev->nholders && !s->err; i++) {
        const struct vg_watch_holder *p = &prev->holders[i];
        if (vg_find_holder(v->holders, n, p))
            continue;
        if (!v->frozen &&
            !vg_view_gpu_hung(v, p->minor_known, p->minor, p->gpu_known, p->gpu_index))
            continue;
        /* One this /proc never showed (another PID namespace) cannot be checked: kept. */
        if (p->in_proc && s->o->alive &&
            !s->o->alive(s->o->alive_ctx, p->pid, p->start_known, p->start))
            continue;
        struct vg_watch_holder *d =
            vg_push(s, &v->holders, &v->nholders, &v->holders_cap, sizeof(*d));
        if (d)
            vg_copy_holder(s, d, p);
    }
    if (!s->err)
        vg_sort(v->holders, v->nholders, sizeof(*v->holders), vg_holder_cmp);
}

/* GPU gi of the snapshot as finding and alert keys name it: its UUID, or "index:N". */
static void vg_step_gpu_key(struct vg_buf *key, const struct vg_step *s, size_t gi)
{
    if (gi >= s->snap->gpus.ngpus || gi >= s->v->ngpus)
        vg_buf_adds(key, "?");
    else if (s->v->gpus[gi].uuid)
        vg_buf_adds(key, s->v->gpus[gi].uuid);
    else
        vg_buf_printf(key, "index:%u", s->v->gpus[gi].index);
}

/* The identity of finding f (d->gpus filled): a diagnosis by rule, GPUs and PIDs (sorted), an
 * alert by rule, GPU, MIG device, PID and start time (a reused PID is another alert). */
static void vg_finding_key(struct vg_step *s, struct vg_watch_finding *d,
                           const struct vg_finding *f)
{
    struct vg_buf key;
    vg_buf_init(&key, 0);
    vg_buf_printf(&key, "%s|", f->rule);
    if (f->kind == VG_FINDING_ALERT) {
        vg_step_gpu_key(&key, s, f->ngpus ? f->gpus[0] : VG_SNAP_NO_GPU);
        vg_buf_printf(&key, "|%03d|%010d|%020llu", f->mig + 1, f->npids ? (int)f->pids[0] : 0,
                      (unsigned long long)(f->start_known ? f->start_ticks : 0));
        goto done;
    }
    for (size_t i = 0; i < f->ngpus; i++) {
        if (i)
            vg_buf_addc(&key, ',');
        vg_step_gpu_key(&key, s, f->gpus[i]);
    }
    pid_t *sorted = f->npids ? malloc(f->npids * sizeof(*sorted)) : NULL;
    if (f->npids && !sorted)
        s->err = -ENOMEM;
    if (sorted) {
        memcpy(sorted, f->pids, f->npids * sizeof(*sorted));
        qsort(sorted, f->npids, sizeof(*sorted), vg_array_cmp_pid);
    }
    vg_buf_adds(&key, "|");
    for (size_t i = 0; sorted && i < f->npids; i++)
        vg_buf_printf(&key, "%s%d", i ? "," : "", (int)sorted[i]);
    free(sorted);
done:
    if (key.err)
        s->err = -ENOMEM;
    else if (!(d->key = vg_buf_steal(&key)))
        s->err = -ENOMEM;
    vg_buf_release(&key);
}

static void vg_add_finding(struct vg_step *s, const struct vg_finding *f)
{
    struct vg_watch_view *v = s->v;
    struct vg_watch_finding *d =
        vg_push(s, &v->findings, &v->nfindings, &v->findings_cap, sizeof(*d));
    if (!d)
        return;
    d->kind = f->kind;
    d->rule = f->rule;
    d->severity = f->severity;
    d->title = vg_sdup(s, f->title);
    d->bytes_known = f->bytes_known;
    d->bytes = f->bytes;
    d->mig = f->kind == VG_FINDING_ALERT ? f->mig : -1;
    d->user = vg_sdup(s, f->user);
    d->command = vg_sdup(s, f->command);
    d->expect = vg_sdup(s, f->expect);
    if (f->ngpus && !(d->gpus = calloc(f->ngpus, sizeof(*d->gpus))))
        s->err = -ENOMEM;
    if (f->npids && !(d->pids = calloc(f->npids, sizeof(*d->pids))))
        s->err = -ENOMEM;
    if (s->err)
        return;
    for (size_t i = 0; i < f->ngpus; i++) {
        const struct vg_gpu *g = &s->snap->gpus.gpus[f->gpus[i]];
        d->gpus[d->ngpus++] = g->index;
        if (i == 0)
            d->gpu_uuid = vg_sdup(s, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    }
    if (f->npids)
        memcpy(d->pids, f->pids, f->npids * sizeof(*d->pids));
    d->npids = f->npids;
    vg_finding_key(s, d, f);
}

/* The rules' diagnoses and the expectations' alerts into the view, and why some expectation
 * could not be checked (moved there). */
static void vg_build_findings(struct vg_step *s, struct vg_findings *fs)
{
    struct vg_watch_view *v = s->v;
    for (size_t i = 0; i < fs->n && !s->err; i++)
        vg_add_finding(s, &fs->v[i]);
    v->problem = fs->unchecked;
    fs->unchecked = NULL;
    if (!s->err)
        vg_sort(v->findings, v->nfindings, sizeof(*v->findings), vg_cmp_finding);
}

/* Findings and alerts, through the caller's judgement (the same as `check`'s), with the idle
 * history for idle-holder. */
static void vg_build_verdicts(struct vg_step *s, struct vg_err *err)
{
    struct vg_watch_view *v = s->v;
    struct vg_idle_info *idle = calloc(v->nholders ? v->nholders : 1, sizeof(*idle));
    if (!idle) {
        s->err = -ENOMEM;
        return;
    }
    size_t nidle = 0;
    for (size_t i = 0; i < v->nholders; i++) {
        const struct vg_watch_holder *h = &v->holders[i];
        if (!h->idle || h->snap_gpu == VG_SNAP_NO_GPU)
            continue;
        idle[nidle].pid = h->pid;
        idle[nidle].gpu = h->snap_gpu;
        idle[nidle].idle_ms = s->now - h->idle_since;
        nidle++;
    }
    struct vg_findings fs;
    vg_findings_init(&fs);
    if (s->o->judge && s->o->judge(s->o->judge_ctx, s->snap, idle, nidle, &fs, err) < 0)
        s->err = -ENOMEM;
    if (!s->err)
        vg_build_findings(s, &fs);
    vg_findings_release(&fs);
    free(idle);
}

/* Frozen: carry the previous findings, alerts and problem as they were. */
static bool vg_watch_finding_on_hung(const struct vg_watch_view *v,
                                     const struct vg_watch_finding *f)
{
    for (size_t k = 0; k < f->ngpus; k++)
        if (vg_view_gpu_hung(v, false, 0, true, f->gpus[k]))
            return true;
    return false;
}

/* hung_only: carry only the findings and alerts about a GPU that hangs now which the rules did
 * not find again (they cannot see it), and keep this step's problem. */
static void vg_carry_verdicts(struct vg_step *s, bool hung_only)
{
    struct vg_watch_view *v = s->v;
    const struct vg_watch_view *prev = s->prev;
    size_t nf = v->nfindings;
    for (size_t i = 0; i < prev->nfindings && !s->err; i++) {
        const struct vg_watch_finding *f = &prev->findings[i];
        if (hung_only && (vg_find_finding(v->findings, nf, f) || !vg_watch_finding_on_hung(v, f)))
            continue;
        struct vg_watch_finding *d =
            vg_push(s, &v->findings, &v->nfindings, &v->findings_cap, sizeof(*d));
        if (!d)
            break;
        *d = *f;
        d->key = vg_sdup(s, f->key);
        d->title = vg_sdup(s, f->title);
        d->gpu_uuid = vg_sdup(s, f->gpu_uuid);
        d->user = vg_sdup(s, f->user);
        d->command = vg_sdup(s, f->command);
        d->expect = vg_sdup(s, f->expect);
        d->gpus = NULL;
        d->pids = NULL;
        if (f->ngpus && (d->gpus = malloc(f->ngpus * sizeof(*d->gpus))))
            memcpy(d->gpus, f->gpus, f->ngpus * sizeof(*d->gpus));
        if (f->npids && (d->pids = malloc(f->npids * sizeof(*d->pids))))
            memcpy(d->pids, f->pids, f->npids * sizeof(*d->pids));
        if ((f->ngpus && !d->gpus) || (f->npids && !d->pids))
            s->err = -ENOMEM;
    }
    if (!hung_only) {
        v->problem = vg_sdup(s, prev->problem);
        return;
    }
    if (!s->err)
        vg_sort(v->findings, v->nfindings, sizeof(*v->findings), vg_cmp_finding);
}

/* ---- the diff ----------------------------------------------------------------------------- */

static void vg_diff_driver(struct vg_step *s)
{
    const struct vg_watch_view *v = s->v, *p = s->prev;
    enum vg_event_type t;
    if (v->driver_ok) {
        if (!p || p->driver_ok)
            return;
        t = VG_EV_DRIVER_RECOVERED;
    } else {
        t = v->hung ? VG_EV_DRIVER_HUNG : VG_EV_DRIVER_ERROR;
        /* unchanged: still hung, or the same error */
        if (p && !p->driver_ok && p->hung == v->hung &&
            (v->hung ||
             (p->driver_error && v->driver_error && strcmp(p->driver_error, v->driver_error) == 0)))
            return;
    }
    struct vg_event *ev = vg_ev_new(s, t,
                                    t == VG_EV_DRIVER_HUNG    ? VG_SEV_CRITICAL
                                    : t == VG_EV_DRIVER_ERROR ? VG_SEV_WARNING
                                                              : VG_SEV_INFO);
    if (!ev)
        return;
    if (t == VG_EV_DRIVER_RECOVERED) {
        for (size_t i = 0; i < v->ngpus; i++)
            ev->listed += v->gpus[i].listed;
    } else {
        ev->driver_error = vg_sdup(s, v->driver_error);
        ev->frozen = v->frozen;
    }
}

/* unlisted: a gpu-lost because the driver no longer lists the GPU. */
static void vg_watch_gpu_event(struct vg_step *s, enum vg_event_type t,
                               const struct vg_watch_gpu *g, bool unlisted)
{
    enum vg_severity sev =
        t == VG_EV_GPU_LOST || t == VG_EV_GPU_HUNG ? VG_SEV_CRITICAL : VG_SEV_INFO;
    struct vg_event *ev = vg_ev_new(s, t, sev);
    if (!ev)
        return;
    vg_ev_gpu(s, ev, true, g->index, g->uuid);
    ev->mem_known = g->mem_known && t != VG_EV_GPU_LOST && t != VG_EV_GPU_HUNG;
    ev->mem = g->used;
    ev->total = g->total;
    ev->gpu_name = vg_sdup(s, g->name);
    ev->unlisted = unlisted;
}

static const struct vg_watch_gpu *vg_prev_gpu(const struct vg_watch_view *p,
                                              const struct vg_watch_gpu *g)
{
    for (size_t i = 0; p && i < p->ngpus; i++)
        if (vg_gpu_same(&p->gpus[i], g))
            return &p->gpus[i];
    return NULL;
}

static void vg_diff_gpus(struct vg_step *s)
{
    const struct vg_watch_view *v = s->v;
    for (size_t i = 0; i < v->ngpus; i++) {
        const struct vg_watch_gpu *g = &v->gpus[i];
        const struct vg_watch_gpu *p = vg_prev_gpu(s->prev, g);
        if (!p) {
            bool present = !s->prev || !s->prev->ever_ok;
            if (g->lost)
                vg_watch_gpu_event(s, VG_EV_GPU_LOST, g, false);
            else if (g->hung)
                vg_watch_gpu_event(s, VG_EV_GPU_HUNG, g, false);
            else
                vg_watch_gpu_event(s, present ? VG_EV_GPU_PRESENT : VG_EV_GPU_APPEARED, g, false);
        } else if (g->listed && !p->listed) {
            vg_watch_gpu_event(s, g->lost ? VG_EV_GPU_LOST : VG_EV_GPU_BACK, g, false);
        } else if (!g->listed && p->listed && !p->lost) {
            vg_watch_gpu_event(s, VG_EV_GPU_LOST, g, true);
        } else if (g->listed && p->listed && g->lost != p->lost) {
            vg_watch_gpu_event(s, g->lost ? VG_EV_GPU_LOST : VG_EV_GPU_BACK, g, false);
        } else if (g->listed && p->listed && g->hung != p->hung) {
            vg_watch_gpu_event(s, g->hung ? VG_EV_GPU_HUNG : VG_EV_GPU_BACK, g, false);
        }
    }
}

/* The memory a holder is followed by: a process seen only through the device node holds no
 * memory of its own (0), so one that then allocates is reported. false: unknown. */
static bool vg_holder_mem(const struct vg_watch_holder *h, uint64_t *mem)
{
    *mem = (h->seen & VG_SEEN_NVML) ? h->mem : 0;
    return !(h->seen & VG_SEEN_NVML) || h->mem_known;
}

static struct vg_event *vg_holder_event(struct vg_step *s, enum vg_event_type t,
                                        const struct vg_watch_holder *h)
{
    struct vg_event *ev = vg_ev_new(s, t, VG_SEV_INFO);
    if (!ev)
        return NULL;
    vg_ev_gpu(s, ev, h->gpu_known, h->gpu_index, h->gpu_uuid);
    ev->mig = h->mig;
    vg_ev_pid(s, ev, h->pid);
    ev->user = vg_sdup(s, h->user);
    ev->command = vg_sdup(s, h->command);
    ev->mem_known = h->mem_known && (h->seen & VG_SEEN_NVML);
    ev->mem = h->mem;
    ev->minor_known = h->minor_known;
    ev->minor = h->minor;
    ev->node_only = !(h->seen & VG_SEEN_NVML);
    ev->in_proc = h->in_proc;
    ev->stale = h->stale;
    return ev;
}

static void vg_diff_holders(struct vg_step *s)
{
    struct vg_watch_view *v = s->v;
    const struct vg_watch_view *prev = s->prev;
    /* left first, so that a restarted job reads "left" then "appeared" */
    for (size_t i = 0; prev && i < prev->nholders; i++) {
        const struct vg_watch_holder *p = &prev->holders[i];
        if (vg_find_holder(v->holders, v->nholders, p))
            continue;
        if (!vg_holder_event(s, VG_EV_HOLDER_LEFT, p))
            return;
    }
    for (size_t i = 0; i < v->nholders; i++) {
        struct vg_watch_holder *h = &v->holders[i];
        const struct vg_watch_holder *p =
            prev ? vg_find_holder(prev->holders, prev->nholders, h) : NULL;
        if (!p) {
            struct vg_event *ev =
                vg_holder_event(s, s->prev ? VG_EV_HOLDER_APPEARED : VG_EV_HOLDER_PRESENT, h);
            if (!ev)
                return;
            h->reported_known = vg_holder_mem(h, &h->reported);
            continue;
        }
        uint64_t mem;
        if (!vg_holder_mem(h, &mem))
            continue;
        if (!h->reported_known) {
            h->reported_known = true;
            h->reported = mem;
            continue;
        }
        uint64_t delta = mem > h->reported ? mem - h->reported : h->reported - mem;
        if (delta <= s->o->threshold)
            continue;
        struct vg_event *ev = vg_holder_event(s, VG_EV_HOLDER_MEMORY, h);
        if (!ev)
            return;
        ev->prev_known = true;
        ev->prev = h->reported;
        ev->mem_known = true;
        ev->mem = mem;
        h->reported = mem;
    }
}

/* A finding-* event for a diagnosis, an alert or alert-cleared for an alert. */
static void vg_watch_finding_event(struct vg_step *s, enum vg_event_type t,
                                   const struct vg_watch_finding *f)
{
    bool gone = t == VG_EV_FINDING_CLOSED || t == VG_EV_ALERT_CLEARED;
    struct vg_event *ev = vg_ev_new(s, t, gone ? VG_SEV_INFO : f->severity);
    if (!ev)
        return;
    if (f->kind == VG_FINDING_ALERT)
        ev->alert = f->rule;
    else
        ev->rule = f->rule;
    ev->gpu_known = f->ngpus > 0;
    ev->gpu = f->ngpus ? f->gpus[0] : 0;
    ev->gpu_uuid = vg_sdup(s, f->gpu_uuid);
    if (f->ngpus && (ev->gpus = malloc(f->ngpus * sizeof(*ev->gpus)))) {
        memcpy(ev->gpus, f->gpus, f->ngpus * sizeof(*ev->gpus));
        ev->ngpus = f->ngpus;
    }
    ev->pid_known = f->npids > 0;
    ev->pid = f->npids ? f->pids[0] : 0;
    if (f->npids && (ev->pids = malloc(f->npids * sizeof(*ev->pids)))) {
        memcpy(ev->pids, f->pids, f->npids * sizeof(*ev->pids));
        ev->npids = f->npids;
    }
    if ((f->ngpus && !ev->gpus) || (f->npids && !ev->pids))
        s->err = -ENOMEM;
    ev->mig = f->mig;
    ev->user = vg_sdup(s, f->user);
    ev->command = vg_sdup(s, f->command);
    ev->mem_known = f->bytes_known;
    ev->mem = f->bytes;
    ev->expect = vg_sdup(s, f->expect);
    ev->text = vg_sdup(s, f->title);
}

/* Diagnoses first (closed, then opened), then alerts (cleared, then raised): each in the
 * views' key order. */
static void vg_diff_verdicts(struct vg_step *s)
{
    static const struct {
        enum vg_finding_kind kind;
        enum vg_event_type gone, first, later;
    } pass[] = {
        {VG_FINDING_DIAGNOSIS, VG_EV_FINDING_CLOSED, VG_EV_FINDING_PRESENT, VG_EV_FINDING_OPENED},
        {VG_FINDING_ALERT, VG_EV_ALERT_CLEARED, VG_EV_ALERT, VG_EV_ALERT},
    };
    const struct vg_watch_view *v = s->v, *prev = s->prev;
    for (size_t k = 0; k < sizeof(pass) / sizeof(pass[0]); k++) {
        for (size_t i = 0; prev && i < prev->nfindings; i++) {
            const struct vg_watch_finding *f = &prev->findings[i];
            if (f->kind == pass[k].kind && !vg_find_finding(v->findings, v->nfindings, f))
                vg_watch_finding_event(s, pass[k].gone, f);
        }
        for (size_t i = 0; i < v->nfindings; i++) {
            const struct vg_watch_finding *f = &v->findings[i];
            if (f->kind == pass[k].kind &&
                (!prev || !vg_find_finding(prev->findings, prev->nfindings, f)))
                vg_watch_finding_event(s, prev ? pass[k].later : pass[k].first, f);
        }
    }
}

int vg_watch_step(const struct vg_watch_opts *o, const struct vg_snapshot *snap, bool hung,
                  uint64_t now_ms, const struct vg_watch_view *prev, struct vg_watch_view **out,
                  struct vg_event_list *events, struct vg_err *err)
{
    *out = NULL;
    struct vg_watch_view *v = calloc(1, sizeof(*v));
    if (!v)
        return vg_err_set(err, -ENOMEM, "out of memory");
    struct vg_step s = {
        .o = o,
        .snap = snap,
        .prev = prev,
        .v = v,
        .events = events,
        .now = now_ms,
        .first = prev == NULL,
    };
    v->driver_ok = snap->driver_ok;
    v->hung = !snap->driver_ok && hung;
    v->driver_error = vg_sdup(&s, snap->driver_error);
    v->ever_ok = snap->driver_ok || (prev && prev->ever_ok);
    v->frozen = !snap->driver_ok && prev && prev->ever_ok;

    size_t nev = events->n;
    vg_build_gpus(&s);
    if (!s.err)
        vg_build_holders(&s);
    if (!s.err && v->frozen)
        vg_carry_verdicts(&s, false);
    if (!s.err && !v->frozen)
        vg_build_verdicts(&s, err);
    if (!s.err && !v->frozen && prev && vg_view_any_hung(v))
        vg_carry_verdicts(&s, true);
    if (!s.err)
        vg_diff_driver(&s);
    if (!s.err)
        vg_diff_gpus(&s);
    if (!s.err)
        vg_diff_holders(&s);
    if (!s.err)
        vg_diff_verdicts(&s);
    if (s.err) {
        /* drop this step's partial events */
        for (size_t i = nev; i < events->n; i++)
            vg_event_release(&events->v[i]);
        events->n = nev;
        vg_watch_view_free(v);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    *out = v;
    return 0;
}
