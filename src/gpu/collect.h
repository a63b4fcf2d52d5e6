/*
 * One-shot collection of the driver's view with a deadline. NVML calls can hang inside the
 * kernel driver (a GPU falling off the bus, a wedged driver); a command must not hang with
 * them. The whole open/read/close sequence runs on a driver worker (gpu/worker.h); if the
 * host-wide calls (init, versions, count) have not finished by the deadline the caller gets
 * -ETIMEDOUT and goes on without the driver's view. Past them, each GPU is read on a thread of its
 * own under the same deadline: a GPU whose call hangs comes back marked hung (vg_gpu.hung) and
 * costs only its own figures. The answer is handed over before nvmlShutdown, which gets what is
 * left of the same deadline: a shutdown that hangs costs that wait, never the figures. The
 * abandoned worker owns everything it touches and frees it if it ever returns.
 */
#ifndef VG_GPU_COLLECT_H
#define VG_GPU_COLLECT_H

#include "gpu/gpu.h"
#include "util/err.h"

/* Fill out (initialised, empty) from the library at path (NULL: the default search). Returns 0
 * (some GPUs perhaps hung), -ETIMEDOUT when the driver's host-wide calls did not answer in time,
 * or the error vg_nvml_open/vg_nvml_read gave. On failure out stays empty. */
int vg_gpu_collect(const char *path, unsigned timeout_ms, struct vg_gpu_list *out,
                   struct vg_err *err);

#endif
