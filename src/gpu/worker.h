/*
 * The driver worker: NVML calls made on a thread of their own under a deadline, so that a hung
 * driver never hangs a caller. NVML calls can hang inside the kernel driver (a GPU falling off
 * the bus, a wedged driver); this is the one place that keeps callers out of them. Both the
 * one-shot read (gpu/collect.h) and the long-running sampler (model/sampler.h) use it.
 *
 * - A read is a numbered request with a deadline (CLOCK_MONOTONIC). The worker opens NVML when
 *   it has no session, makes the host-wide calls (init, versions, count), then reads each GPU on
 *   a thread of its own until the deadline (vg_nvml_read_gpus): a GPU whose call hangs comes
 *   back marked hung (vg_gpu.hung) and costs only its own figures.
 * - The caller waits until the deadline; once the worker is past the host-wide calls it makes
 *   no driver call before answering, so the caller then gives it a short grace
 *   (VG_GPU_WORKER_GRACE_MS) rather than call the whole driver hung.
 * - While the worker has not answered an earlier request, no new one is queued behind it: the
 *   read reports the hang again at once.
 * - A kept session (VG_GPU_WORKER_KEEP) stays open between reads and is closed after a read
 *   fails, before that read is answered, so the next read opens it afresh (a restarted driver
 *   answers UNINITIALIZED to the old session). A one-shot session (VG_GPU_WORKER_ONCE) is closed
 *   only when the worker stops, after the answer went out: a shutdown that hangs must not cost
 *   the figures already read.
 *
 * Ownership: vg_gpu_worker_new() returns a worker freed with vg_gpu_worker_free(), which stops
 * it and waits for its nvmlShutdown until the given deadline. A worker stuck in the driver (a
 * read, or the shutdown itself) is detached and left to finish alone: the state it shares with
 * the caller is reference counted, it frees everything if the call ever returns, and process
 * exit ends it. A worker is used from one thread. The thread inherits the caller's signal mask.
 */
#ifndef VG_GPU_WORKER_H
#define VG_GPU_WORKER_H

#include <stdbool.h>
#include <time.h>

#include "gpu/gpu.h"
#include "util/err.h"

/* How long past the deadline a caller waits for a worker that is reading GPUs (no host-wide
 * call left): it only has to wake up and hand the list over. */
#define VG_GPU_WORKER_GRACE_MS 2000u

enum vg_gpu_worker_session {
    VG_GPU_WORKER_ONCE, /* one read; NVML is shut down when the worker stops */
    VG_GPU_WORKER_KEEP, /* NVML stays open between reads, reopened after a failed one */
};

struct vg_gpu_worker;

/* Start a worker for the library at path (NULL: the default search). NVML is opened by the
 * worker at the first read. Returns 0, -ENOMEM, or the error of pthread_create. */
int vg_gpu_worker_new(const char *path, enum vg_gpu_worker_session session,
                      struct vg_gpu_worker **out, struct vg_err *err);

/* Have the sessions this worker opens from now on also read the sensors (temperature, power,
 * fan: vg_nvml_want_sensors). */
void vg_gpu_worker_want_sensors(struct vg_gpu_worker *w);

/* Whether a read was answered; when not, the read returns -ETIMEDOUT with err not set. */
enum vg_gpu_worker_answer {
    VG_GPU_WORKER_ANSWERED,
    VG_GPU_WORKER_HUNG_NOW,   /* asked now, no answer by the deadline (and grace) */
    VG_GPU_WORKER_STILL_HUNG, /* busy since an earlier read: nothing was asked */
};

/* Ask for the GPU list and wait until deadline (CLOCK_MONOTONIC), plus the grace once the
 * worker reads GPUs. Returns 0 with the list moved into out (initialised, empty), the read's
 * own error with err set to its message (which may be -ETIMEDOUT: NVML's own timeout), or
 * -ETIMEDOUT with err not set when *answer says the worker did not answer. */
int vg_gpu_worker_read(struct vg_gpu_worker *w, const struct timespec *deadline,
                       struct vg_gpu_list *out, enum vg_gpu_worker_answer *answer,
                       struct vg_err *err);

/* Stop the worker and wait for its nvmlShutdown until deadline (not at all when it is busy);
 * NULL is accepted. */
void vg_gpu_worker_free(struct vg_gpu_worker *w, const struct timespec *deadline);

#endif
