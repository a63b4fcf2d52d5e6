/*
 * The sampler (see sampler.h): repeated snapshots with NVML kept open on a driver worker of
 * its own (gpu/worker.h, a kept session) and a cache of stable process details.
 *
 * The sampler decides when to ask; the worker makes the driver calls under each sample's
 * deadline, so a hung driver costs a sample its GPU figures, never the sample itself. A worker
 * still busy with an earlier request is not asked again: the sample reports the hang, with how
 * long the driver has not answered. NVML is opened lazily by the worker and closed again after
 * a read fails, so a driver that is loaded, restarted or upgraded while `watch` runs is picked
 * up at the next sample.
 */
#include "model/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/worker.h"
#include "proc/proc.h"
#include "proc/signal.h"
#include "util/clock.h"

struct vg_sampler {
    struct vg_sampler_opts opts; /* strings below are our copies */
    char *nvml_path, *proc_root, *dev_dir;
    struct vg_gpu_worker *w;    /* NULL with skip_nvml */
    struct timespec hung_since; /* CLOCK_MONOTONIC, when the unanswered request was made */
    struct vg_proc_cache *cache;
    struct vg_proc_index *index;
    struct vg_proc_kprog *kprog; /* the kernel scan's program, kept loaded between full scans */
    struct vg_proc_devwatch *devwatch; /* NULL: no incremental scans (devwatch_error says why) */
    char *devwatch_error;              /* "no device-node watch: why", when devwatch is NULL */
    bool last_poll_events;             /* the last poll saw an unnamed open or a change */
    pid_t *openers;                    /* named openers of this poll and the last, to read */
    size_t nopeners, last_nopeners;    /* all of them; those of the last poll (first) */
    struct timespec last_full;         /* CLOCK_MONOTONIC, when the last full scan started */
    char *reason;                      /* why this sample is a full scan, when not a fixed string */
    char *watch_kind;                  /* vg_sampler_watch_kind's answer, made once */
    struct vg_snap_cpu_marks cpu;      /* the last sample's CPU times: whether processes work */
    struct vg_sampler_stats stats;
};

static int vg_sampler_dup(const char *src, char **dst)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

/* Whether the procfs numbers processes as our PID namespace does: fanotify names openers by
 * our numbers, which must name the same processes in the scan. */
static bool vg_sampler_pids_ours(const char *proc_root)
{
    int fd = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    pid_t self;
    bool ours = vg_proc_self_pid(fd, &self) == 0 && self == getpid();
    close(fd);
    return ours;
}

int vg_sampler_new(const struct vg_sampler_opts *opts, struct vg_sampler **out, struct vg_err *err)
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
    if (!rc)
        rc = vg_proc_kprog_new(&s->kprog);
    if (rc) {
        vg_sampler_free(s);
        return vg_err_set(err, rc, "out of memory");
    }
    if (!s->opts.full_scan_ms)
        s->opts.full_scan_ms = VG_SAMPLER_FULL_SCAN_MS;
    if (!s->opts.full_scans_only) {
        /* Without the watch every sample is a full scan: slower, never wrong. */
        struct vg_err werr = VG_ERR_INIT;
        unsigned wf = !s->opts.unnamed_opens && vg_sampler_pids_ours(s->proc_root)
                          ? VG_PROC_DEVWATCH_NAME_OPENERS
                          : 0;
        rc = vg_proc_devwatch_new(s->dev_dir, wf, &s->devwatch, &werr);
        if (rc == -ENOMEM) {
            vg_err_release(&werr);
            vg_sampler_free(s);
            return vg_err_set(err, rc, "out of memory");
        }
        if (rc && asprintf(&s->devwatch_error, "no device-node watch: %s", vg_err_msg(&werr)) < 0) {
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
    if (!opts->skip_nvml &&
        (rc = vg_gpu_worker_new(s->nvml_path, VG_GPU_WORKER_KEEP, &s->w, err)) != 0) {
        vg_sampler_free(s);
        return rc;
    }
    if (s->w && opts->sensors)
        vg_gpu_worker_want_sensors(s->w);
    *out = s;
    return 0;
}

void vg_sampler_free(struct vg_sampler *s)
{
    if (!s)
        return;
    if (s->w) {
        /* The worker's nvmlShutdown gets at most the driver timeout (see gpu/worker.h). */
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        vg_clock_ts_add_ms(&deadline, s->opts.nvml_timeout_ms);
        vg_gpu_worker_free(s->w, &deadline);
    }
    vg_proc_cache_free(s->cache);
    vg_proc_index_free(s->index);
    vg_proc_kprog_free(s->kprog);
    vg_proc_devwatch_free(s->devwatch);
    vg_snap_cpu_marks_release(&s->cpu);
    free(s->devwatch_error);
    free(s->openers);
    free(s->watch_kind);
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
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct timespec deadline = now;
    vg_clock_ts_add_ms(&deadline, s->opts.nvml_timeout_ms);
    struct vg_err rerr = VG_ERR_INIT;
    enum vg_gpu_worker_answer answer;
    int rc = vg_gpu_worker_read(s->w, &deadline, gpus, &answer, &rerr);
    if (answer != VG_GPU_WORKER_STILL_HUNG)
        s->hung_since = now;
    char *msg = NULL;
    if (answer != VG_GPU_WORKER_ANSWERED) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = vg_clock_ts_diff(&s->hung_since, &now);
        if (asprintf(&msg,
                     "the NVIDIA driver has not answered for %.1f s (a driver call is hung; "
                     "timeout %u.%03u s); GPU memory figures are unavailable",
                     waited, s->opts.nvml_timeout_ms / 1000, s->opts.nvml_timeout_ms % 1000) < 0)
            msg = NULL;
    } else if (rc != 0 && !(msg = strdup(vg_err_msg(&rerr)))) {
        rc = -ENOMEM;
    }
    vg_err_release(&rerr);
    if (rc != 0 && !msg)
        return -ENOMEM;
    *driver_error = msg;
    return rc;
}

/* The processes this sample reads for the named opens: this poll's openers and the last
 * poll's (whose descriptors may have been installed only after that sample's scan). */
static int vg_sampler_openers(struct vg_sampler *s, bool named)
{
    size_t n = 0;
    const pid_t *now = named ? vg_proc_devwatch_openers(s->devwatch, &n) : NULL;
    size_t keep = s->last_nopeners; /* the last poll's, first in the array */
    pid_t *v = malloc((n + keep ? n + keep : 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    if (n)
        memcpy(v, now, n * sizeof(*v));
    if (keep)
        memcpy(v + n, s->openers, keep * sizeof(*v));
    free(s->openers);
    s->openers = v;
    s->nopeners = n + keep;
    s->last_nopeners = n;
    s->stats.last_openers = s->nopeners;
    return 0;
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
        if (ev < 0 &&
            asprintf(&s->reason, "the device-node watch failed: %s", vg_err_msg(&werr)) < 0) {
            s->reason = NULL;
            vg_err_release(&werr);
            return -ENOMEM;
        }
        vg_err_release(&werr);
    }
    if (vg_sampler_openers(s, ev > 0 && (ev & VG_PROC_DEVWATCH_NAMED)) != 0)
        return -ENOMEM;
    bool last = s->last_poll_events;
    s->last_poll_events = ev < 0 || (ev & (VG_PROC_DEVWATCH_OPENED | VG_PROC_DEVWATCH_CHANGED));
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
    pid_t *all = NULL;
    if (incremental && s->nopeners) {
        /* the named openers are read in full, as the driver's PIDs are */
        if (!(all = malloc((nwant + s->nopeners) * sizeof(*all))))
            return vg_err_set(err, -ENOMEM, "out of memory");
        if (nwant)
            memcpy(all, want, nwant * sizeof(*all));
        memcpy(all + nwant, s->openers, s->nopeners * sizeof(*all));
        want = all;
        nwant += s->nopeners;
    }
    struct vg_proc_opts popts = {
        .proc_root = s->proc_root,
        .dev_dir = s->dev_dir,
        .want = want,
        .nwant = nwant,
        .cache = s->cache,
        .index = s->index,
        .incremental = incremental,
        .rewalk = s->openers,
        .nrewalk = incremental ? s->nopeners : 0,
        .scan = (enum vg_proc_scan_mode)s->opts.scan,
        .kprog = s->kprog,
    };
    int rc = vg_proc_scan(&popts, procs, err);
    free(all);
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

    struct vg_snapshot *snap;
    struct vg_snap_parts pt;
    int rc = vg_snap_begin(s->proc_root, s->dev_dir, &snap, &pt, err);
    if (rc)
        return rc;
    bool driver_ok = false;
    if (vg_sampler_ask_driver(s, snap, &pt.gpus, &driver_ok, hung) != 0)
        goto fail;
    if ((rc = vg_snap_nvml_pids(&pt.gpus, &pt.want, &pt.nwant)) != 0)
        goto fail;
    rc = vg_sampler_scan(s, pt.want, pt.nwant, snap, &pt.procs, err);
    if (rc)
        goto out;
    rc = vg_snap_assemble(snap, &pt.gpus, driver_ok, &pt.procs, err);
    if (rc)
        goto out;
    /* Whether each process works, from the CPU time it used since the last sample. */
    vg_snap_activity_since(snap, &s->cpu);
    if ((rc = vg_snap_cpu_marks_take(snap, &s->cpu)) != 0)
        goto fail;
    vg_snap_parts_release(&pt);
    *out = snap;
    vg_sampler_count_sample(s, &t0);
    return 0;

fail:
    vg_err_set(err, -ENOMEM, "out of memory");
    rc = -ENOMEM;
out:
    vg_snap_parts_release(&pt);
    vg_snap_free(snap);
    *hung = false;
    return rc;
}

void vg_sampler_stats(const struct vg_sampler *s, struct vg_sampler_stats *out)
{
    *out = s->stats;
    out->kprog_loads = vg_proc_kprog_loads(s->kprog);
}

const char *vg_sampler_watch_kind(struct vg_sampler *s)
{
    if (s->watch_kind)
        return s->watch_kind;
    const char *why = s->devwatch ? vg_proc_devwatch_unnamed(s->devwatch) : NULL;
    int rc;
    if (s->opts.full_scans_only)
        rc = asprintf(&s->watch_kind, "none (incremental scans are off)");
    else if (!s->devwatch)
        rc = asprintf(&s->watch_kind, "none (%s)", s->devwatch_error ? s->devwatch_error : "?");
    else if (!why)
        rc = asprintf(&s->watch_kind, "fanotify (openers named)");
    else
        rc = asprintf(&s->watch_kind, "inotify (openers not named: %s)", why);
    if (rc < 0) {
        s->watch_kind = NULL;
        return "unknown (out of memory)";
    }
    return s->watch_kind;
}
