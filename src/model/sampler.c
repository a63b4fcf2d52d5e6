/*
 * The sampler (see sampler.h): repeated snapshots with NVML kept open on a worker thread of
 * its own and a cache of stable process details.
 *
 * The worker and the sampler share one reference-counted struct: requests are numbered, the
 * worker answers the latest one and records which it answered, so the sampler can tell "still
 * busy with an earlier request" (the driver is hung: do not queue more) from "idle". When the
 * sampler is freed while the worker is stuck in the driver, or its nvmlShutdown does not return
 * within the driver timeout, it lets go of its reference and detaches the thread; the worker
 * frees everything if the call ever returns.
 *
 * NVML is opened lazily by the worker and closed again after a read fails, so a driver that is
 * loaded, restarted or upgraded while `watch` runs is picked up at the next sample.
 *
 * Each request carries its deadline: the worker reads each GPU on a thread of its own until
 * then (vg_nvml_read_gpus), so one GPU whose call hangs is marked hung and costs only its own
 * figures, and the NVML session remembers it so later samples do not queue behind it. Once the
 * worker is past the host-wide calls it makes no driver call before answering, so the sampler
 * gives it a short grace past the deadline rather than call the whole driver hung.
 */
#include "model/sampler.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/nvml.h"
#include "proc/proc.h"
#include "util/clock.h"

/* How long past the deadline the sampler waits for a worker that is reading GPUs (no host-wide
 * call left): it only has to wake up and hand the list over. */
#define VG_SAMPLER_GRACE_MS 2000u

struct vg_sampler_worker {
    pthread_mutex_t lock;
    pthread_cond_t wake;      /* the worker waits here for a request or stop */
    pthread_cond_t answered;  /* the sampler waits here (CLOCK_MONOTONIC) for the answer */
    int refs;
    bool stop;
    bool finished;                /* the worker has shut NVML down and is about to return */
    uint64_t asked, answered_seq; /* request numbers */
    struct timespec deadline;     /* of request `asked` (CLOCK_MONOTONIC) */
    uint64_t gpus_phase; /* the request whose GPUs are being read: no host-wide call left */
    char *path;
    /* the answer to request answered_seq, until the sampler takes it */
    int rc;
    struct vg_err err;
    struct vg_gpu_list list;
};

struct vg_sampler {
    struct vg_sampler_opts opts; /* strings below are our copies */
    char *nvml_path, *proc_root, *dev_dir;
    struct vg_sampler_worker *w; /* NULL with skip_nvml */
    pthread_t thread;
    struct timespec hung_since;  /* CLOCK_MONOTONIC, when the unanswered request was made */
    struct vg_proc_cache *cache;
    struct vg_proc_index *index;
    struct vg_proc_devwatch *devwatch; /* NULL: no incremental scans (devwatch_error says why) */
    char *devwatch_error;        /* "no device-node watch: why", when devwatch is NULL */
    bool last_poll_events;       /* the last poll saw a device-node event */
    struct timespec last_full;   /* CLOCK_MONOTONIC, when the last full scan started */
    char *reason;                /* why this sample is a full scan, when not a fixed string */
    struct vg_snap_cpu_marks cpu; /* the last sample's CPU times: whether processes work */
    struct vg_sampler_stats stats;
};

static void vg_worker_unref(struct vg_sampler_worker *w)
{
    pthread_mutex_lock(&w->lock);
    int refs = --w->refs;
    pthread_mutex_unlock(&w->lock);
    if (refs > 0)
        return;
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->answered);
    pthread_mutex_destroy(&w->lock);
    vg_gpu_list_release(&w->list);
    vg_err_release(&w->err);
    free(w->path);
    free(w);
}

/* One read. NVML stays open between reads and is closed after a failure, to be opened afresh
 * next time (a restarted driver answers UNINITIALIZED to the old session). */
static int vg_worker_read(struct vg_sampler_worker *w, struct vg_nvml **nvml,
                          struct vg_gpu_list *list, uint64_t seq, const struct timespec *deadline,
                          struct vg_err *err)
{
    int rc = 0;
    if (!*nvml)
        rc = vg_nvml_open(w->path, nvml, err);
    if (rc == 0)
        rc = vg_nvml_read_host(*nvml, list, err);
    if (rc == 0) {
        pthread_mutex_lock(&w->lock);
        w->gpus_phase = seq;
        pthread_mutex_unlock(&w->lock);
        rc = vg_nvml_read_gpus(*nvml, list, deadline, err);
    }
    if (rc != 0) {
        vg_gpu_list_release(list);
        vg_nvml_free(*nvml);
        *nvml = NULL;
    }
    return rc;
}

static void *vg_worker_main(void *arg)
{
    struct vg_sampler_worker *w = arg;
    struct vg_nvml *nvml = NULL;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && w->answered_seq == w->asked)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->stop)
            break;
        uint64_t seq = w->asked;
        struct timespec deadline = w->deadline;
        pthread_mutex_unlock(&w->lock);

        struct vg_gpu_list list;
        vg_gpu_list_init(&list);
        struct vg_err err = VG_ERR_INIT;
        int rc = vg_worker_read(w, &nvml, &list, seq, &deadline, &err);

        pthread_mutex_lock(&w->lock);
        vg_gpu_list_release(&w->list);
        vg_err_release(&w->err);
        w->list = list;
        w->err = err;
        w->rc = rc;
        w->answered_seq = seq;
        pthread_cond_broadcast(&w->answered);
    }
    pthread_mutex_unlock(&w->lock);
    /* nvmlShutdown can hang like any other call: the sampler waits for this only so long
     * (see vg_sampler_free), then leaves the thread to finish alone. */
    vg_nvml_free(nvml);
    pthread_mutex_lock(&w->lock);
    w->finished = true;
    pthread_cond_broadcast(&w->answered);
    pthread_mutex_unlock(&w->lock);
    vg_worker_unref(w);
    return NULL;
}

static int vg_worker_start(struct vg_sampler *s, struct vg_err *err)
{
    struct vg_sampler_worker *w = calloc(1, sizeof(*w));
    if (!w || (s->nvml_path && !(w->path = strdup(s->nvml_path)))) {
        free(w);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->answered, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_cond_init(&w->wake, NULL);
    pthread_mutex_init(&w->lock, NULL);
    vg_gpu_list_init(&w->list);
    w->refs = 2;
    int rc = pthread_create(&s->thread, NULL, vg_worker_main, w);
    if (rc) {
        w->refs = 1;
        vg_worker_unref(w);
        return vg_err_set(err, -rc, "cannot start the driver worker: %s", strerror(rc));
    }
    s->w = w;
    return 0;
}

static int vg_sampler_dup(const char *src, char **dst)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

int vg_sampler_new(const struct vg_sampler_opts *opts, struct vg_sampler **out,
                   struct vg_err *err)
{
    *out = NULL;
    struct vg_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return vg_err_set(err, -ENOMEM, "out of memory");
    s->opts = *opts;
    if (!s->opts.nvml_timeout_ms)
        s->opts.nvml_timeout_ms = VG_SNAP_NVML_TIMEOUT_MS;
    int rc = vg_sampler_dup(opts->nvml_path, &s->nvml_path);
    if (!rc)
        rc = vg_sampler_dup(opts->proc_root ? opts->proc_root : "/proc", &s->proc_root);
    if (!rc)
        rc = vg_sampler_dup(opts->dev_dir ? opts->dev_dir : "/dev", &s->dev_dir);
    if (!rc)
        rc = vg_proc_cache_new(&s->cache);
    if (!rc)
        rc = vg_proc_index_new(&s->index);
    if (rc) {
        vg_sampler_free(s);
        return vg_err_set(err, rc, "out of memory");
    }
    if (!s->opts.full_scan_ms)
        s->opts.full_scan_ms = VG_SAMPLER_FULL_SCAN_MS;
    if (!s->opts.full_scans_only) {
        /* Without the watch every sample is a full scan: slower, never wrong. */
        struct vg_err werr = VG_ERR_INIT;
        rc = vg_proc_devwatch_new(s->dev_dir, &s->devwatch, &werr);
        if (rc == -ENOMEM) {
            vg_err_release(&werr);
            vg_sampler_free(s);
            return vg_err_set(err, rc, "out of memory");
        }
        if (rc &&
            asprintf(&s->devwatch_error, "no device-node watch: %s", vg_err_msg(&werr)) < 0) {
            s->devwatch_error = NULL;
            vg_err_release(&werr);
            vg_sampler_free(s);
            return vg_err_set(err, -ENOMEM, "out of memory");
        }
        vg_err_release(&werr);
    }
    s->opts.nvml_path = s->nvml_path;
    s->opts.proc_root = s->proc_root;
    s->opts.dev_dir = s->dev_dir;
    if (!opts->skip_nvml && (rc = vg_worker_start(s, err)) != 0) {
        vg_sampler_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void vg_sampler_free(struct vg_sampler *s)
{
    if (!s)
        return;
    if (s->w) {
        struct vg_sampler_worker *w = s->w;
        /* An idle worker shuts NVML down and exits; one stuck in a driver call, or whose
         * nvmlShutdown hangs past the driver timeout, is detached and left to finish alone:
         * its struct is reference counted, and process exit ends it. Joining it could wait
         * forever, with the command's stop signals already taken. */
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        vg_clock_ts_add_ms(&deadline, s->opts.nvml_timeout_ms);
        pthread_mutex_lock(&w->lock);
        bool stuck = w->answered_seq != w->asked;
        w->stop = true;
        pthread_cond_signal(&w->wake);
        int wrc = 0;
        while (!stuck && !w->finished && wrc != ETIMEDOUT)
            wrc = pthread_cond_timedwait(&w->answered, &w->lock, &deadline);
        bool finished = w->finished;
        pthread_mutex_unlock(&w->lock);
        if (finished)
            pthread_join(s->thread, NULL);
        else
            pthread_detach(s->thread);
        vg_worker_unref(w);
    }
    vg_proc_cache_free(s->cache);
    vg_proc_index_free(s->index);
    vg_proc_devwatch_free(s->devwatch);
    vg_snap_cpu_marks_release(&s->cpu);
    free(s->devwatch_error);
    free(s->reason);
    free(s->nvml_path);
    free(s->proc_root);
    free(s->dev_dir);
    free(s);
}

/*
 * Ask the worker for the GPU list and wait at most the timeout. Returns 0 with the list moved
 * into *gpus, -ETIMEDOUT (hung: now, or still since an earlier sample; *driver_error says so),
 * or the read's error with *driver_error set. -ENOMEM only for our own allocations.
 */
static int vg_sampler_driver(struct vg_sampler *s, struct vg_gpu_list *gpus, char **driver_error)
{
    struct vg_sampler_worker *w = s->w;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&w->lock);
    bool busy = w->answered_seq != w->asked;
    if (!busy) {
        struct timespec deadline = now, grace;
        vg_clock_ts_add_ms(&deadline, s->opts.nvml_timeout_ms);
        grace = deadline;
        vg_clock_ts_add_ms(&grace, VG_SAMPLER_GRACE_MS);
        w->asked++;
        w->deadline = deadline;
        s->hung_since = now;
        pthread_cond_signal(&w->wake);
        int wrc = 0;
        while (w->answered_seq != w->asked && wrc != ETIMEDOUT)
            wrc = pthread_cond_timedwait(&w->answered, &w->lock, &deadline);
        wrc = 0;
        while (w->answered_seq != w->asked && w->gpus_phase == w->asked && wrc != ETIMEDOUT)
            wrc = pthread_cond_timedwait(&w->answered, &w->lock, &grace);
        busy = w->answered_seq != w->asked;
    }
    int rc;
    char *msg = NULL;
    if (busy) {
        rc = -ETIMEDOUT;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = vg_clock_ts_diff(&s->hung_since, &now);
        if (asprintf(&msg,
                     "the NVIDIA driver has not answered for %.1f s (a driver call is hung; "
                     "timeout %u.%03u s); GPU memory figures are unavailable",
                     waited, s->opts.nvml_timeout_ms / 1000, s->opts.nvml_timeout_ms % 1000) < 0)
            msg = NULL;
    } else {
        rc = w->rc;
        if (rc == 0) {
            *gpus = w->list;
            vg_gpu_list_init(&w->list);
        } else if (!(msg = strdup(vg_err_msg(&w->err)))) {
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (rc != 0 && !msg)
        return -ENOMEM;
    *driver_error = msg;
    return rc;
}

/*
 * Whether this sample may scan incrementally; otherwise *reason says why not. The watch is
 * polled on every sample, full or not, so that the events a full scan covers do not force
 * another one later. -ENOMEM only.
 */
static int vg_sampler_plan(struct vg_sampler *s, const struct timespec *now, bool *incremental,
                           const char **reason)
{
    *incremental = false;
    free(s->reason);
    s->reason = NULL;
    int ev = 0;
    if (s->devwatch) {
        struct vg_err werr = VG_ERR_INIT;
        ev = vg_proc_devwatch_poll(s->devwatch, &werr);
        if (ev < 0 && asprintf(&s->reason, "the device-node watch failed: %s",
                               vg_err_msg(&werr)) < 0) {
            s->reason = NULL;
            vg_err_release(&werr);
            return -ENOMEM;
        }
        vg_err_release(&werr);
    }
    bool last = s->last_poll_events;
    s->last_poll_events = ev != 0;
    if (s->opts.full_scans_only)
        *reason = "incremental scans are off";
    else if (!s->devwatch)
        *reason = s->devwatch_error;
    else if (ev < 0)
        *reason = s->reason;
    else if (!vg_proc_index_primed(s->index))
        *reason = "first scan";
    else if (ev & VG_PROC_DEVWATCH_OPENED)
        *reason = "a device node was opened";
    else if (ev & VG_PROC_DEVWATCH_CHANGED)
        *reason = "the device nodes changed";
    else if (last)
        *reason = "a device-node event in the last sample";
    else if (vg_clock_ts_diff(&s->last_full, now) * 1000.0 >= (double)s->opts.full_scan_ms)
        *reason = "periodic full scan";
    else
        *incremental = true;
    return 0;
}

/* Ask the driver for the GPUs (unless --no-nvml), counting hangs and errors. *driver_ok says
 * whether it answered; -ENOMEM only. */
static int vg_sampler_ask_driver(struct vg_sampler *s, struct vg_snapshot *snap,
                                 struct vg_gpu_list *gpus, bool *driver_ok, bool *hung)
{
    if (!s->w) {
        snap->driver_error = strdup("the driver was not asked (--no-nvml)");
        return snap->driver_error ? 0 : -ENOMEM;
    }
    int rc = vg_sampler_driver(s, gpus, &snap->driver_error);
    if (rc == -ENOMEM && !snap->driver_error)
        return -ENOMEM;
    *driver_ok = rc == 0;
    *hung = rc == -ETIMEDOUT;
    s->stats.driver_hangs += *hung;
    s->stats.driver_errors += !*driver_ok && !*hung;
    return 0;
}

/* Scan /proc for the processes, incrementally when vg_sampler_plan allows, and count the
 * scan in the stats. */
static int vg_sampler_scan(struct vg_sampler *s, const pid_t *want, size_t nwant,
                           struct vg_snapshot *snap, struct vg_proc_table *procs,
                           struct vg_err *err)
{
    /* Planned after the driver answered, right before the scan: a node opened while the
     * driver was asked is then seen now, not one sample late. */
    struct timespec tscan;
    clock_gettime(CLOCK_MONOTONIC, &tscan);
    bool incremental;
    const char *reason = NULL;
    if (vg_sampler_plan(s, &tscan, &incremental, &reason) != 0)
        return vg_err_set(err, -ENOMEM, "out of memory");
    struct vg_proc_opts popts = {
        .proc_root = s->proc_root,
        .dev_dir = s->dev_dir,
        .want = want,
        .nwant = nwant,
        .cache = s->cache,
        .index = s->index,
        .incremental = incremental,
    };
    int rc = vg_proc_scan(&popts, procs, err);
    if (rc)
        return rc;
    snap->scanned_ms = vg_clock_ms();
    if (procs->incremental) {
        s->stats.incremental_scans++;
        s->stats.last_full_reason = NULL;
    } else {
        s->stats.full_scans++;
        s->stats.last_full_reason = reason;
        s->last_full = tscan;
    }
    s->stats.last_carried = procs->n_carried;
    s->stats.last_listed = procs->n_scanned;
    return 0;
}

/* Count one finished sample that began at t0. */
static void vg_sampler_count_sample(struct vg_sampler *s, const struct timespec *t0)
{
    struct vg_proc_cache_stats cs;
    vg_proc_cache_stats(s->cache, &cs);
    s->stats.cache_hits = cs.hits;
    s->stats.cache_misses = cs.misses;
    s->stats.samples++;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s->stats.last_sample_seconds = vg_clock_ts_diff(t0, &t1);
}

int vg_sampler_sample(struct vg_sampler *s, struct vg_snapshot **out, bool *hung,
                      struct vg_err *err)
{
    *out = NULL;
    *hung = false;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    struct vg_snapshot *snap = vg_snap_new();
    if (!snap)
        return vg_err_set(err, -ENOMEM, "out of memory");
    struct vg_gpu_list gpus;
    vg_gpu_list_init(&gpus);
    struct vg_proc_table procs;
    vg_proc_table_init(&procs);
    pid_t *want = NULL;
    size_t nwant = 0;
    int rc = -ENOMEM;
    bool driver_ok = false;
    if (!(snap->proc_root = strdup(s->proc_root)) || !(snap->dev_dir = strdup(s->dev_dir)))
        goto fail;
    if (vg_sampler_ask_driver(s, snap, &gpus, &driver_ok, hung) != 0)
        goto fail;
    if ((rc = vg_snap_nvml_pids(&gpus, &want, &nwant)) != 0)
        goto fail;
    rc = vg_sampler_scan(s, want, nwant, snap, &procs, err);
    if (rc)
        goto out;
    rc = vg_snap_assemble(snap, &gpus, driver_ok, &procs, err);
    if (rc)
        goto out;
    /* Whether each process works, from the CPU time it used since the last sample. */
    vg_snap_activity_since(snap, &s->cpu);
    if ((rc = vg_snap_cpu_marks_take(snap, &s->cpu)) != 0)
        goto fail;
    free(want);
    *out = snap;
    vg_sampler_count_sample(s, &t0);
    return 0;

fail:
    vg_err_set(err, -ENOMEM, "out of memory");
    rc = -ENOMEM;
out:
    free(want);
    vg_gpu_list_release(&gpus);
    vg_proc_table_release(&procs);
    vg_snap_free(snap);
    *hung = false;
    return rc;
}

void vg_sampler_stats(const struct vg_sampler *s, struct vg_sampler_stats *out)
{
    *out = s->stats;
}
