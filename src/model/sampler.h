/*
 * The sampler: repeated snapshots for long-running commands (`watch`, `serve`, `check` when it
 * waits), cheaper than building each one from scratch and immune to a hung driver.
 *
 * - NVML stays initialised between samples, on a worker thread of the sampler's own. Each
 *   sample asks the worker for the GPU list and waits at most nvml_timeout_ms. When the worker
 *   does not answer in time the sample is built from /proc alone with driver_ok false and
 *   driver_error saying the driver is hung, and `hung` is reported; later samples do not queue
 *   more work behind the stuck call, they report the hang again until the worker comes back.
 * - NVML is opened by the worker at the first sample and closed again after a read fails, so
 *   the next sample opens it afresh: a driver loaded, restarted or upgraded while the sampler
 *   lives is picked up without restarting the command.
 * - What a (PID, start time) pair cannot change (command line, exec-time environment, cgroup,
 *   mapped libraries of the exec'd image, user) is cached between samples and dropped when the
 *   process goes away, so a steady-state sample reads little more than fd directories and stat.
 *   The cache lives in src/proc/ (struct vg_proc_cache, see proc.h for what is re-read when).
 * - The fd scan is incremental between full scans (see proc.h, struct vg_proc_index): a sample
 *   reads the known holders, the PIDs the driver reports and the processes started since the
 *   last sample, and carries the rest over, while a watch on the device nodes says nobody
 *   opened one, or (fanotify, with CAP_SYS_ADMIN) who did: those openers are read in full in
 *   that sample and the next (the open event precedes the new descriptor), and nothing else.
 *   A sample is a full scan when there is no primed index or no watch, when a node was opened
 *   by a process the watch cannot name or the nodes changed (in this sample's poll or the
 *   last one's), and at least every full_scan_ms, for descriptors that arrive without an open
 *   (passed over a Unix socket, pidfd_getfd).
 * - Each snapshot also carries per-process utilisation where the driver has it
 *   (vg_gpu_proc.sm_util, VG_GPU_K_PROC_UTIL), for idle tracking.
 * - The worker thread is created by vg_sampler_new() and inherits the caller's signal mask:
 *   block the signals a command handles (signalfd, sigwait) before creating the sampler.
 *
 * Ownership: vg_sampler_new() returns a sampler freed with vg_sampler_free(), which stops the
 * worker and waits for its nvmlShutdown at most nvml_timeout_ms; a worker stuck in the driver
 * (a read, or the shutdown itself) is abandoned, and the process exits without waiting for it.
 * Snapshots returned by vg_sampler_sample() are independent of the sampler and freed with
 * vg_snap_free(). A sampler is used from one thread.
 */
#ifndef VG_MODEL_SAMPLER_H
#define VG_MODEL_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "model/snapshot.h"
#include "util/err.h"

struct vg_sampler;

struct vg_sampler_opts {
    const char *nvml_path;    /* NULL: $VRAMGUARD_NVML or libnvidia-ml.so.1 */
    unsigned nvml_timeout_ms; /* 0: VG_SNAP_NVML_TIMEOUT_MS */
    const char *proc_root;    /* NULL: /proc */
    const char *dev_dir;      /* NULL: /dev */
    bool skip_nvml;
    unsigned full_scan_ms; /* longest time between full scans; 0: VG_SAMPLER_FULL_SCAN_MS */
    bool full_scans_only;  /* no incremental scans */
    bool unnamed_opens;    /* never name openers (inotify alone): an open forces full scans */
    bool sensors;          /* also read GPU temperature, power and fan (top shows them) */
    int scan;              /* enum vg_proc_scan_mode: how holders are found (--scan) */
};

#define VG_SAMPLER_FULL_SCAN_MS 60000u

struct vg_sampler_stats {
    uint64_t samples;
    uint64_t driver_hangs;  /* samples in which the driver did not answer in time */
    uint64_t driver_errors; /* samples in which NVML failed (not loaded, init failed, ...) */
    uint64_t cache_hits;    /* processes whose details came from the cache */
    uint64_t cache_misses;
    double last_sample_seconds;
    uint64_t full_scans; /* samples that read every process's descriptors */
    uint64_t incremental_scans;
    unsigned kprog_loads;         /* times the kernel scan's program was loaded: once, unless the
                                   * nodes or the view changed */
    size_t last_carried;          /* processes the last sample carried over unread */
    size_t last_listed;           /* processes the last sample listed */
    const char *last_full_reason; /* why the last sample was a full scan; NULL when it was
                                   * incremental. Valid until the next sample. */
    size_t last_openers;          /* processes read because fanotify named them as openers of
                                   * a node, in this sample's poll or the last one's */
};

int vg_sampler_new(const struct vg_sampler_opts *opts, struct vg_sampler **out, struct vg_err *err);
void vg_sampler_free(struct vg_sampler *s);

/* How the sampler learns of opens of the device nodes, for --verbose: "fanotify (openers
 * named)", "inotify (OPENERS_UNNAMED_WHY)", or "none (WHY)" when every sample is full. Valid
 * while the sampler lives. */
const char *vg_sampler_watch_kind(struct vg_sampler *s);

/* One sample. Fails only when /proc cannot be read or memory runs out; driver trouble is in
 * the snapshot (driver_ok, driver_error) and in *hung. */
int vg_sampler_sample(struct vg_sampler *s, struct vg_snapshot **out, bool *hung,
                      struct vg_err *err);

void vg_sampler_stats(const struct vg_sampler *s, struct vg_sampler_stats *out);

#endif
