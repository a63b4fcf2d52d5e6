/*
 * Driver collection under a deadline (see collect.h): one read on a driver worker
 * (gpu/worker.h) that is stopped again at once.
 *
 * The read and the shutdown share one deadline. The worker answers before nvmlShutdown; the
 * shutdown then gets what is left of the deadline, and a worker whose shutdown (or read)
 * hangs is left behind, detached, to finish alone.
 */
#include "gpu/collect.h"

#include <errno.h>
#include <time.h>

#include "gpu/worker.h"
#include "util/clock.h"

int vg_gpu_collect(const char *path, unsigned timeout_ms, struct vg_gpu_list *out,
                   struct vg_err *err)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    vg_clock_ts_add_ms(&deadline, timeout_ms);
    struct vg_gpu_worker *w;
    int rc = vg_gpu_worker_new(path, VG_GPU_WORKER_ONCE, &w, err);
    if (rc)
        return rc;
    enum vg_gpu_worker_answer answer;
    rc = vg_gpu_worker_read(w, &deadline, out, &answer, err);
    vg_gpu_worker_free(w, &deadline);
    if (answer != VG_GPU_WORKER_ANSWERED)
        return vg_err_set(err, -ETIMEDOUT,
                          "the NVIDIA driver did not answer within %u.%03u s (a driver call is "
                          "hung); GPU memory figures are unavailable",
                          timeout_ms / 1000, timeout_ms % 1000);
    return rc;
}
