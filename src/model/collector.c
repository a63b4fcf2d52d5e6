/*
 * The collector (see collector.h): one thread that samples, diagnoses and renders (or makes its
 * caller's object) on a fixed schedule, and the latest result: a buffer holding the exposition
 * for the HTTP threads to copy, or the object for the UI to take.
 */
#include "model/collector.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/snapshot.h"
#include "util/clock.h"

/* ---- the GPUs of the last successful collection ---- */

void vg_collector_gpu_ids_init(struct vg_collector_gpu_ids *ids)
{
    ids->v = NULL;
    ids->n = 0;
}

static void vg_collector_ids_free(struct vg_collector_gpu_id *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].uuid);
        free(v[i].name);
        free(v[i].pci_bus_id);
    }
    free(v);
}

void vg_collector_gpu_ids_release(struct vg_collector_gpu_ids *ids)
{
    vg_collector_ids_free(ids->v, ids->n);
    vg_collector_gpu_ids_init(ids);
}

static int vg_collector_dup(const char *s, bool known, char **out)
{
    *out = NULL;
    if (!known || !s)
        return 0;
    *out = strdup(s);
    return *out ? 0 : -ENOMEM;
}

int vg_collector_gpu_ids_set(struct vg_collector_gpu_ids *ids, const struct vg_snapshot *snap)
{
    size_t n = snap->gpus.ngpus;
    struct vg_collector_gpu_id *v = n ? calloc(n, sizeof(*v)) : NULL;
    if (n && !v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct vg_gpu *g = &snap->gpus.gpus[i];
        v[i].index = g->index;
        v[i].minor_known = (g->known & VG_GPU_K_MINOR) != 0;
        v[i].minor = g->minor;
        if (vg_collector_dup(g->uuid, g->known & VG_GPU_K_UUID, &v[i].uuid) ||
            vg_collector_dup(g->name, g->known & VG_GPU_K_NAME, &v[i].name) ||
            vg_collector_dup(g->pci_bus_id, g->known & VG_GPU_K_PCI, &v[i].pci_bus_id)) {
            vg_collector_ids_free(v, n);
            return -ENOMEM;
        }
    }
    vg_collector_gpu_ids_release(ids);
    ids->v = v;
    ids->n = n;
    return 0;
}

/* ---- the collector ---- */

struct vg_collector {
    struct vg_collector_opts o;
    struct vg_sampler *sampler;            /* collector thread only (and the first call) */
    struct vg_collector_gpu_ids last_good; /* collector thread only */
    char *last_error;                      /* collector thread only: the failure last logged */

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t cv;
    bool stop;
    bool now; /* collect at once (vg_collector_poke) */
    bool started;
    bool busy;                  /* a collection is under way */
    struct timespec busy_since; /* CLOCK_MONOTONIC */
    void *obj;                  /* make mode: the newest object not taken */
    char *error;                /* make mode: the first failure since the last take */
    pthread_t thread;
    struct vg_buf expo; /* the latest exposition */
    struct vg_collector_stats st;
    struct timespec last_end; /* CLOCK_MONOTONIC, end of the last collection */
};

static double vg_ts_seconds(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static void vg_log(struct vg_collector *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void vg_log(struct vg_collector *c, const char *fmt, ...)
{
    if (!c->o.log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    c->o.log(c->o.log_arg, msg);
}

/* Say when collection starts failing, fails for another reason, or works again: one line per
 * change, not one per sample. A hung driver is one reason however long it stays hung (the
 * sampler's message counts the seconds). */
static void vg_log_change(struct vg_collector *c, bool success, bool hung, const char *why)
{
    if (success) {
        if (c->last_error || c->st.collections == 1)
            vg_log(c, "collection succeeds%s", c->last_error ? " again" : "");
        free(c->last_error);
        c->last_error = NULL;
        return;
    }
    const char *key = hung ? "\001hung" : why ? why : "unknown reason";
    if (c->last_error && strcmp(c->last_error, key) == 0)
        return;
    vg_log(c, "collection failed: %s", why ? why : "unknown reason");
    free(c->last_error);
    c->last_error = strdup(key);
}

/* Make mode: the sample (taken over) into the caller's object, which replaces the one not
 * taken, or the failure kept for the taker. */
static void vg_collect_make(struct vg_collector *c, int src, struct vg_snapshot *snap, bool hung,
                            const struct vg_err *serr)
{
    void *obj = NULL;
    char *why = NULL;
    struct vg_err merr = VG_ERR_INIT;
    if (src) {
        vg_snap_free(snap);
        why = strdup(vg_err_msg(serr));
    } else if (c->o.make(c->o.arg, snap, hung, &obj, &merr) != 0) {
        obj = NULL;
        why = strdup(merr.msg ? merr.msg : "out of memory");
    }
    vg_err_release(&merr);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_mutex_lock(&c->lock);
    if (c->obj && c->o.drop)
        c->o.drop(c->obj);
    c->obj = obj;
    if (why && !c->error) {
        c->error = why;
        why = NULL;
    }
    c->st.collections++;
    c->st.failures += !obj;
    c->st.driver_hangs += hung;
    c->last_end = t1;
    pthread_mutex_unlock(&c->lock);
    free(why);
}

/* One collection: sample, diagnose, render, publish (or make). Only out of memory fails it. */
static int vg_collect_once(struct vg_collector *c, bool first, struct vg_err *err)
{
    struct timespec t0, t1, wall;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&c->lock);
    c->busy = true;
    c->busy_since = t0;
    c->now = false;
    pthread_mutex_unlock(&c->lock);
    struct vg_snapshot *snap = NULL;
    bool hung = false;
    struct vg_err serr = VG_ERR_INIT;
    int src = vg_sampler_sample(c->sampler, &snap, &hung, &serr);
    int rc = 0;
    if (c->o.make) {
        vg_collect_make(c, src, snap, hung, &serr);
        snap = NULL;
        goto out;
    }
    /* Out of memory always fails; an unreadable /proc fails only the first collection (a
     * wrong --proc), later it is a failed collection like a failing driver. */
    if (src == -ENOMEM || (src && first)) {
        rc = vg_err_set(err, src, "%s", vg_err_msg(&serr));
        goto out;
    }
    if ((rc = c->o.diagnose(c->o.arg, src ? NULL : snap, err)) != 0)
        goto out;
    bool success = !src && snap->driver_ok && !hung;
    if (success && vg_collector_gpu_ids_set(&c->last_good, snap) != 0) {
        rc = vg_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_REALTIME, &wall);

    pthread_mutex_lock(&c->lock);
    struct vg_collector_stats st = c->st;
    pthread_mutex_unlock(&c->lock);
    st.success = success;
    st.duration_seconds = vg_ts_seconds(&t1) - vg_ts_seconds(&t0);
    st.timestamp_seconds = vg_ts_seconds(&wall);
    st.collections++;
    st.failures += !success;
    st.driver_hangs += hung;
    struct vg_sampler_stats ss;
    vg_sampler_stats(c->sampler, &ss);
    st.full_scans = ss.full_scans;
    st.incremental_scans = ss.incremental_scans;
    if (success) {
        st.last_success_known = true;
        st.last_success_seconds = st.timestamp_seconds;
    }

    struct vg_buf b;
    vg_buf_init(&b, 0);
    rc = c->o.render(c->o.arg, src ? NULL : snap, &c->last_good, &st, &b);
    if (rc) {
        vg_buf_release(&b);
        rc = vg_err_set(err, rc, "cannot render the metrics: %s", strerror(-rc));
        goto out;
    }
    pthread_mutex_lock(&c->lock);
    struct vg_buf old = c->expo;
    c->expo = b;
    c->st = st;
    c->last_end = t1;
    pthread_mutex_unlock(&c->lock);
    vg_buf_release(&old);

    vg_log_change(c, success, hung, src ? vg_err_msg(&serr) : snap->driver_error);
out:
    pthread_mutex_lock(&c->lock);
    c->busy = false;
    pthread_mutex_unlock(&c->lock);
    vg_err_release(&serr);
    vg_snap_free(snap);
    return rc;
}

int vg_collector_new(const struct vg_collector_opts *o, struct vg_collector **out,
                     struct vg_err *err)
{
    *out = NULL;
    struct vg_collector *c = calloc(1, sizeof(*c));
    if (!c)
        return vg_err_set(err, -ENOMEM, "out of memory");
    c->o = *o;
    if (c->o.interval_ms == 0)
        c->o.interval_ms = 5000;
    vg_collector_gpu_ids_init(&c->last_good);
    vg_buf_init(&c->expo, 0);
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = vg_sampler_new(&o->sampler, &c->sampler, err);
    if (rc) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->lock);
        vg_buf_release(&c->expo);
        free(c);
        return rc;
    }
    c->now = o->first_in_thread;
    rc = o->first_in_thread ? 0 : vg_collect_once(c, true, err);
    if (rc) {
        vg_collector_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static bool vg_ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *vg_collector_main(void *arg)
{
    struct vg_collector *c = arg;
    pthread_mutex_lock(&c->lock);
    struct timespec due = c->last_end;
    for (;;) {
        vg_clock_ts_add_ms(&due, c->o.interval_ms);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* A collection that overran its slot: start the next one a full interval later
         * rather than running back to back. */
        if (vg_ts_before(&due, &now)) {
            due = now;
            vg_clock_ts_add_ms(&due, c->o.interval_ms);
        }
        while (!c->stop && !c->now && pthread_cond_timedwait(&c->cv, &c->lock, &due) != ETIMEDOUT)
            ;
        if (c->stop)
            break;
        if (c->now) /* poked: the schedule starts again from here */
            clock_gettime(CLOCK_MONOTONIC, &due);
        pthread_mutex_unlock(&c->lock);
        struct vg_err err = VG_ERR_INIT;
        if (vg_collect_once(c, false, &err) != 0)
            vg_log(c, "collection failed: %s", vg_err_msg(&err));
        vg_err_release(&err);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int vg_collector_start(struct vg_collector *c, struct vg_err *err)
{
    /* every signal blocked on the thread: the command's own thread takes them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&c->thread, NULL, vg_collector_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return vg_err_set(err, -rc, "cannot start the collection thread: %s", strerror(rc));
    c->started = true;
    return 0;
}

void vg_collector_free(struct vg_collector *c)
{
    if (!c)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
    }
    vg_sampler_free(c->sampler);
    vg_collector_gpu_ids_release(&c->last_good);
    free(c->last_error);
    if (c->obj && c->o.drop)
        c->o.drop(c->obj);
    free(c->error);
    vg_buf_release(&c->expo);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

bool vg_collector_free_within(struct vg_collector *c, unsigned wait_ms)
{
    if (c && c->started) {
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        vg_clock_ts_add_ms(&until, wait_ms);
        if (pthread_timedjoin_np(c->thread, NULL, &until) != 0)
            return false;
        c->started = false;
    }
    vg_collector_free(c);
    return true;
}

void *vg_collector_take(struct vg_collector *c, char **error)
{
    pthread_mutex_lock(&c->lock);
    void *obj = c->obj;
    c->obj = NULL;
    if (error) {
        *error = c->error;
        c->error = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    return obj;
}

void vg_collector_poke(struct vg_collector *c)
{
    pthread_mutex_lock(&c->lock);
    c->now = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

void vg_collector_set_interval(struct vg_collector *c, uint64_t interval_ms)
{
    pthread_mutex_lock(&c->lock);
    c->o.interval_ms = interval_ms ? interval_ms : c->o.interval_ms;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

char *vg_collector_copy(struct vg_collector *c, size_t *len)
{
    pthread_mutex_lock(&c->lock);
    size_t n = c->expo.len;
    char *p = malloc(n ? n : 1);
    if (p && n)
        memcpy(p, c->expo.data, n);
    pthread_mutex_unlock(&c->lock);
    *len = p ? n : 0;
    return p;
}

void vg_collector_health(struct vg_collector *c, struct vg_collector_health *h)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&c->lock);
    h->success = c->st.success;
    h->collections = c->st.collections;
    h->age_seconds = vg_ts_seconds(&now) - vg_ts_seconds(&c->last_end);
    unsigned timeout =
        c->o.sampler.nvml_timeout_ms ? c->o.sampler.nvml_timeout_ms : VG_SNAP_NVML_TIMEOUT_MS;
    double limit = (2.0 * (double)c->o.interval_ms + timeout) / 1000.0 + 10.0;
    h->stalled = h->age_seconds > limit;
    h->busy = c->busy;
    double busy_s = c->busy ? vg_ts_seconds(&now) - vg_ts_seconds(&c->busy_since) : 0;
    h->busy_ms = busy_s > 0 ? (uint64_t)(busy_s * 1000.0) : 0;
    pthread_mutex_unlock(&c->lock);
}
