/*
 * The watch engine (see engine.h): sample -> view -> events (data only; render/event.c words
 * them).
 *
 * A view keeps its own copies of everything it reports (never pointers into a snapshot, which
 * is freed after each step), in arrays sorted by a text key built from the identity, so that
 * the previous view is searched with bsearch and events come out in a stable order: GPU, MIG
 * device, PID.
 */
#include "model/engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

struct vg_watch_gpu {
    char *key; /* UUID, or "index:N" */
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

struct vg_watch_holder {
    char *key; /* "m002|-01|0000004182|00000000000000123456" */
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

struct vg_watch_finding {
    char *key; /* "rule|gpu keys|pids" */
    const char *rule;
    enum vg_severity severity;
    char *title;
    unsigned *gpus;
    size_t ngpus;
    char *gpu_uuid; /* of the first GPU */
    pid_t *pids;
    size_t npids;
    bool bytes_known;
    uint64_t bytes;
};

struct vg_watch_alert {
    char *key;         /* "kind|gpu key|pid|start" */
    struct vg_alert a; /* strings owned; a.gpu is meaningless once the snapshot is gone */
    unsigned gpu_index;
    char *gpu_uuid;
};

struct vg_watch_view {
    bool driver_ok, hung, ever_ok, frozen;
    char *driver_error;
    struct vg_watch_gpu *gpus;
    size_t ngpus;
    struct vg_watch_holder *holders;
    size_t nholders;
    struct vg_watch_finding *findings;
    size_t nfindings;
    struct vg_watch_alert *alerts;
    size_t nalerts;
    char *problem;
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

void vg_events_init(struct vg_events *e)
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

void vg_events_release(struct vg_events *e)
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
    struct vg_events *events;
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
    struct vg_event *v = realloc(s->events->v, (s->events->n + 1) * sizeof(*v));
    if (!v) {
        s->err = -ENOMEM;
        return NULL;
    }
    s->events->v = v;
    struct vg_event *ev = &v[s->events->n++];
    memset(ev, 0, sizeof(*ev));
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
    free(g->key);
    free(g->uuid);
    free(g->name);
}

static void vg_watch_holder_release(struct vg_watch_holder *h)
{
    free(h->key);
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
}

static void vg_watch_alert_release(struct vg_watch_alert *a)
{
    free(a->key);
    free(a->a.user);
    free(a->a.command);
    free(a->a.expect);
    free(a->a.message);
    free(a->gpu_uuid);
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
    for (size_t i = 0; i < v->nalerts; i++)
        vg_watch_alert_release(&v->alerts[i]);
    free(v->gpus);
    free(v->holders);
    free(v->findings);
    free(v->alerts);
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
static void *vg_push(struct vg_step *s, void *arrp, size_t *n, size_t elem)
{
    void **arr = arrp;
    char *p = realloc(*arr, (*n + 1) * elem);
    if (!p) {
        s->err = -ENOMEM;
        return NULL;
    }
    *arr = p;
    memset(p + *n * elem, 0, elem);
    return p + (*n)++ * elem;
}

static char *vg_keyf(struct vg_step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *vg_keyf(struct vg_step *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *k = NULL;
    if (vasprintf(&k, fmt, ap) < 0) {
        k = NULL;
        s->err = -ENOMEM;
    }
    va_end(ap);
    return k;
}

static int vg_cmp_key(const void *a, const void *b)
{
    /* every view entry starts with its char *key */
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void vg_sort(void *arr, size_t n, size_t elem)
{
    if (n > 1)
        qsort(arr, n, elem, vg_cmp_key);
}

static const void *vg_find(const void *arr, size_t n, size_t elem, const char *key)
{
    if (!arr || !key || n == 0)
        return NULL;
    const char *const *k = &key;
    return bsearch(k, arr, n, elem, vg_cmp_key);
}

static void vg_watch_gpu_key(struct vg_step *s, const struct vg_gpu *g, char **out)
{
    if ((g->known & VG_GPU_K_UUID) && g->uuid)
        *out = vg_sdup(s, g->uuid);
    else
        *out = vg_keyf(s, "index:%u", g->index);
}

static void vg_copy_gpu(struct vg_step *s, struct vg_watch_gpu *d, const struct vg_watch_gpu *g)
{
    *d = *g;
    d->key = vg_sdup(s, g->key);
    d->uuid = vg_sdup(s, g->uuid);
    d->name = vg_sdup(s, g->name);
}

static void vg_build_gpus(struct vg_step *s)
{
    struct vg_watch_view *v = s->v;
    const struct vg_watch_view *prev = s->prev;
    if (v->frozen) {
        for (size_t i = 0; i < prev->ngpus && !s->err; i++) {
            struct vg_watch_gpu *d = vg_push(s, &v->gpus, &v->ngpus, sizeof(*d));
            if (d)
                vg_copy_gpu(s, d, &prev->gpus[i]);
        }
        return;
    }
    for (size_t i = 0; i < s->snap->gpus.ngpus && !s->err; i++) {
        const struct vg_gpu *g = &s->snap->gpus.gpus[i];
        struct vg_watch_gpu *d = vg_push(s, &v->gpus, &v->ngpus, sizeof(*d));
        if (!d)
            break;
        vg_watch_gpu_key(s, g, &d->key);
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
            here = v->gpus[k].key && strcmp(v->gpus[k].key, prev->gpus[i].key) == 0;
        if (here)
            continue;
        struct vg_watch_gpu *d = vg_push(s, &v->gpus, &v->ngpus, sizeof(*d));
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
        return p && p->util_known ? p->sm_util == 0 : -1;
    }
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
    /* Keyed by minor number when known: the one name both the driver and the device nodes
     * give a GPU, so holders keep their identity while the driver's view is missing. */
    char gk[96];
    if (h->minor_known)
        snprintf(gk, sizeof(gk), "m%03u", h->minor);
    else if (d->gpu_uuid)
        snprintf(gk, sizeof(gk), "u%s", d->gpu_uuid);
    else
        snprintf(gk, sizeof(gk), "i%u", d->gpu_index);
    d->key = vg_keyf(s, "%s|%03d|%010d|%020llu", gk, d->mig + 1, (int)d->pid,
                     (unsigned long long)(d->start_known ? d->start : 0));
}

/* A PID the driver still lists after /proc lost it (gone, its memory not yet freed) keeps
 * the identity it had: the same holder, not one leaving and another appearing. */
static void vg_holder_adopt_start(struct vg_step *s, struct vg_watch_holder *d,
                                  const struct vg_watch_view *prev)
{
    if (!d->key)
        return;
    const char *bar = strrchr(d->key, '|');
    size_t n = bar ? (size_t)(bar - d->key) + 1 : 0;
    for (size_t i = 0; n && i < prev->nholders; i++) {
        const struct vg_watch_holder *p = &prev->holders[i];
        if (!p->start_known || strncmp(p->key, d->key, n) != 0)
            continue;
        free(d->key);
        d->key = vg_sdup(s, p->key);
        d->start_known = true;
        d->start = p->start;
        return;
    }
}

static void vg_copy_holder(struct vg_step *s, struct vg_watch_holder *d,
                           const struct vg_watch_holder *h)
{
    *d = *h;
    d->key = vg_sdup(s, h->key);
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
        struct vg_watch_holder *d = vg_push(s, &v->holders, &v->nholders, sizeof(*d));
        if (!d)
            break;
        vg_holder_from(s, d, h);
        if (!d->start_known && prev)
            vg_holder_adopt_start(s, d, prev);
        const struct vg_watch_holder *p =
            prev ? vg_find(prev->holders, prev->nholders, sizeof(*p), d->key) : NULL;
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
    vg_sort(v->holders, v->nholders, sizeof(*v->holders));
    if (!v->frozen && !any_hung)
        return;
    /* Holders only the driver showed cannot be seen now (everywhere, or on a GPU that hangs):
     * carry those whose process lives. */
    size_t n = v->nholders;
    for (size_t i = 0; i < prev->nholders && !s->err; i++) {
        const struct vg_watch_holder *p = &prev->holders[i];
        if (vg_find(v->holders, n, sizeof(*p), p->key))
            continue;
        if (!v->frozen &&
            !vg_view_gpu_hung(v, p->minor_known, p->minor, p->gpu_known, p->gpu_index))
            continue;
        /* One this /proc never showed (another PID namespace) cannot be checked: kept. */
        if (p->in_proc && s->o->alive &&
            !s->o->alive(s->o->alive_ctx, p->pid, p->start_known, p->start))
            continue;
        struct vg_watch_holder *d = vg_push(s, &v->holders, &v->nholders, sizeof(*d));
        if (d)
            vg_copy_holder(s, d, p);
    }
    if (!s->err)
        vg_sort(v->holders, v->nholders, sizeof(*v->holders));
}

/* The key of GPU gi of the snapshot, for finding and alert identities. */
static const char *vg_step_gpu_key(const struct vg_step *s, size_t gi)
{
    if (gi >= s->snap->gpus.ngpus || gi >= s->v->ngpus)
        return "?";
    return s->v->gpus[gi].key ? s->v->gpus[gi].key : "?";
}

static int vg_cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return x < y ? -1 : x > y;
}

static void vg_add_finding(struct vg_step *s, const struct vg_finding *f)
{
    struct vg_watch_view *v = s->v;
    struct vg_watch_finding *d = vg_push(s, &v->findings, &v->nfindings, sizeof(*d));
    if (!d)
        return;
    d->rule = f->rule;
    d->severity = f->severity;
    d->title = vg_sdup(s, f->title);
    d->bytes_known = f->bytes_known;
    d->bytes = f->bytes;
    if (f->ngpus && !(d->gpus = calloc(f->ngpus, sizeof(*d->gpus))))
        s->err = -ENOMEM;
    if (f->npids && !(d->pids = calloc(f->npids, sizeof(*d->pids))))
        s->err = -ENOMEM;
    if (s->err)
        return;
    struct vg_buf key;
    vg_buf_init(&key, 0);
    vg_buf_printf(&key, "%s|", f->rule);
    for (size_t i = 0; i < f->ngpus; i++) {
        const struct vg_gpu *g = &s->snap->gpus.gpus[f->gpus[i]];
        d->gpus[d->ngpus++] = g->index;
        vg_buf_printf(&key, "%s%s", i ? "," : "", vg_step_gpu_key(s, f->gpus[i]));
        if (i == 0)
            d->gpu_uuid = vg_sdup(s, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    }
    if (f->npids)
        memcpy(d->pids, f->pids, f->npids * sizeof(*d->pids));
    d->npids = f->npids;
    pid_t *sorted = f->npids ? malloc(f->npids * sizeof(*sorted)) : NULL;
    if (f->npids && !sorted)
        s->err = -ENOMEM;
    if (sorted) {
        memcpy(sorted, f->pids, f->npids * sizeof(*sorted));
        qsort(sorted, f->npids, sizeof(*sorted), vg_cmp_pid);
    }
    vg_buf_adds(&key, "|");
    for (size_t i = 0; sorted && i < f->npids; i++)
        vg_buf_printf(&key, "%s%d", i ? "," : "", (int)sorted[i]);
    free(sorted);
    if (key.err)
        s->err = -ENOMEM;
    else if (!(d->key = vg_buf_steal(&key)))
        s->err = -ENOMEM;
    vg_buf_release(&key);
}

/* The rules' findings into the view. */
static void vg_build_findings(struct vg_step *s, const struct vg_findings *fs)
{
    struct vg_watch_view *v = s->v;
    for (size_t i = 0; i < fs->n && !s->err; i++)
        vg_add_finding(s, &fs->v[i]);
    if (!s->err)
        vg_sort(v->findings, v->nfindings, sizeof(*v->findings));
}

/* The expectations' alerts into the view (their strings move there). */
static void vg_build_alerts(struct vg_step *s, struct vg_alerts *as)
{
    struct vg_watch_view *v = s->v;
    v->problem = as->problem;
    as->problem = NULL;
    for (size_t i = 0; i < as->n && !s->err; i++) {
        struct vg_alert *a = &as->v[i];
        struct vg_watch_alert *d = vg_push(s, &v->alerts, &v->nalerts, sizeof(*d));
        if (!d)
            break;
        const struct vg_gpu *g = &s->snap->gpus.gpus[a->gpu];
        d->gpu_index = g->index;
        d->gpu_uuid = vg_sdup(s, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
        d->key = vg_keyf(s, "%s|%s|%03d|%010d|%020llu", a->kind, vg_step_gpu_key(s, a->gpu),
                         a->mig + 1, a->has_pid ? (int)a->pid : 0,
                         (unsigned long long)(a->start_known ? a->start_ticks : 0));
        d->a = *a;
        memset(a, 0, sizeof(*a)); /* strings moved */
    }
    if (!s->err)
        vg_sort(v->alerts, v->nalerts, sizeof(*v->alerts));
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
    struct vg_alerts as;
    vg_alerts_init(&as);
    if (s->o->judge && s->o->judge(s->o->judge_ctx, s->snap, idle, nidle, &fs, &as, err) < 0)
        s->err = -ENOMEM;
    if (!s->err)
        vg_build_findings(s, &fs);
    if (!s->err)
        vg_build_alerts(s, &as);
    vg_alerts_release(&as);
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
    size_t nf = v->nfindings, na = v->nalerts;
    for (size_t i = 0; i < prev->nfindings && !s->err; i++) {
        const struct vg_watch_finding *f = &prev->findings[i];
        if (hung_only &&
            (vg_find(v->findings, nf, sizeof(*f), f->key) || !vg_watch_finding_on_hung(v, f)))
            continue;
        struct vg_watch_finding *d = vg_push(s, &v->findings, &v->nfindings, sizeof(*d));
        if (!d)
            break;
        *d = *f;
        d->key = vg_sdup(s, f->key);
        d->title = vg_sdup(s, f->title);
        d->gpu_uuid = vg_sdup(s, f->gpu_uuid);
        d->gpus = NULL;
        d->pids = NULL;
        if (f->ngpus && (d->gpus = malloc(f->ngpus * sizeof(*d->gpus))))
            memcpy(d->gpus, f->gpus, f->ngpus * sizeof(*d->gpus));
        if (f->npids && (d->pids = malloc(f->npids * sizeof(*d->pids))))
            memcpy(d->pids, f->pids, f->npids * sizeof(*d->pids));
        if ((f->ngpus && !d->gpus) || (f->npids && !d->pids))
            s->err = -ENOMEM;
    }
    for (size_t i = 0; i < prev->nalerts && !s->err; i++) {
        const struct vg_watch_alert *a = &prev->alerts[i];
        if (hung_only && (vg_find(v->alerts, na, sizeof(*a), a->key) ||
                          !vg_view_gpu_hung(v, false, 0, true, a->gpu_index)))
            continue;
        struct vg_watch_alert *d = vg_push(s, &v->alerts, &v->nalerts, sizeof(*d));
        if (!d)
            break;
        *d = *a;
        d->key = vg_sdup(s, a->key);
        d->gpu_uuid = vg_sdup(s, a->gpu_uuid);
        d->a.user = vg_sdup(s, a->a.user);
        d->a.command = vg_sdup(s, a->a.command);
        d->a.expect = vg_sdup(s, a->a.expect);
        d->a.message = vg_sdup(s, a->a.message);
    }
    if (!hung_only) {
        v->problem = vg_sdup(s, prev->problem);
        return;
    }
    if (!s->err)
        vg_sort(v->findings, v->nfindings, sizeof(*v->findings));
    if (!s->err)
        vg_sort(v->alerts, v->nalerts, sizeof(*v->alerts));
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

static const struct vg_watch_gpu *vg_prev_gpu(const struct vg_watch_view *p, const char *key)
{
    for (size_t i = 0; p && i < p->ngpus; i++)
        if (strcmp(p->gpus[i].key, key) == 0)
            return &p->gpus[i];
    return NULL;
}

static void vg_diff_gpus(struct vg_step *s)
{
    const struct vg_watch_view *v = s->v;
    for (size_t i = 0; i < v->ngpus; i++) {
        const struct vg_watch_gpu *g = &v->gpus[i];
        const struct vg_watch_gpu *p = vg_prev_gpu(s->prev, g->key);
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
        if (vg_find(v->holders, v->nholders, sizeof(*p), p->key))
            continue;
        if (!vg_holder_event(s, VG_EV_HOLDER_LEFT, p))
            return;
    }
    for (size_t i = 0; i < v->nholders; i++) {
        struct vg_watch_holder *h = &v->holders[i];
        const struct vg_watch_holder *p =
            prev ? vg_find(prev->holders, prev->nholders, sizeof(*p), h->key) : NULL;
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

static void vg_watch_finding_event(struct vg_step *s, enum vg_event_type t,
                                   const struct vg_watch_finding *f)
{
    struct vg_event *ev = vg_ev_new(s, t, t == VG_EV_FINDING_CLOSED ? VG_SEV_INFO : f->severity);
    if (!ev)
        return;
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
    ev->mem_known = f->bytes_known;
    ev->mem = f->bytes;
    ev->text = vg_sdup(s, f->title);
}

static void vg_alert_event(struct vg_step *s, enum vg_event_type t, const struct vg_watch_alert *a)
{
    struct vg_event *ev = vg_ev_new(s, t, t == VG_EV_ALERT ? a->a.severity : VG_SEV_INFO);
    if (!ev)
        return;
    ev->alert = a->a.kind;
    vg_ev_gpu(s, ev, true, a->gpu_index, a->gpu_uuid);
    ev->mig = a->a.mig;
    if (a->a.has_pid)
        vg_ev_pid(s, ev, a->a.pid);
    ev->user = vg_sdup(s, a->a.user);
    ev->command = vg_sdup(s, a->a.command);
    ev->mem_known = a->a.bytes_known;
    ev->mem = a->a.bytes;
    ev->expect = vg_sdup(s, a->a.expect);
    ev->text = vg_sdup(s, a->a.message);
}

static void vg_diff_verdicts(struct vg_step *s)
{
    const struct vg_watch_view *v = s->v, *prev = s->prev;
    for (size_t i = 0; prev && i < prev->nfindings; i++)
        if (!vg_find(v->findings, v->nfindings, sizeof(*v->findings), prev->findings[i].key))
            vg_watch_finding_event(s, VG_EV_FINDING_CLOSED, &prev->findings[i]);
    for (size_t i = 0; i < v->nfindings; i++)
        if (!prev ||
            !vg_find(prev->findings, prev->nfindings, sizeof(*v->findings), v->findings[i].key))
            vg_watch_finding_event(s, prev ? VG_EV_FINDING_OPENED : VG_EV_FINDING_PRESENT,
                                   &v->findings[i]);
    for (size_t i = 0; prev && i < prev->nalerts; i++)
        if (!vg_find(v->alerts, v->nalerts, sizeof(*v->alerts), prev->alerts[i].key))
            vg_alert_event(s, VG_EV_ALERT_CLEARED, &prev->alerts[i]);
    for (size_t i = 0; i < v->nalerts; i++)
        if (!prev || !vg_find(prev->alerts, prev->nalerts, sizeof(*v->alerts), v->alerts[i].key))
            vg_alert_event(s, VG_EV_ALERT, &v->alerts[i]);
}

int vg_watch_step(const struct vg_watch_opts *o, const struct vg_snapshot *snap, bool hung,
                  uint64_t now_ms, const struct vg_watch_view *prev, struct vg_watch_view **out,
                  struct vg_events *events, struct vg_err *err)
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
