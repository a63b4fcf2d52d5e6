/*
 * The NVML client: loads libnvidia-ml.so.1 with dlopen, resolves each symbol it uses from a
 * table (versioned symbols one by one, newest first), and reads the host's GPUs into a
 * struct vg_gpu_list (gpu.h).
 *
 * Ownership: vg_nvml_open() returns a struct vg_nvml the caller frees with vg_nvml_free(),
 * which shuts NVML down and closes the library. A struct vg_nvml is not thread-safe; use it
 * from one thread at a time.
 *
 * Failure model: vg_nvml_open() fails (negative code, message in err) when the library cannot
 * be loaded, lacks nvmlInit, or init fails; callers then report "no NVIDIA driver" and go on
 * without the driver's view. After a successful open, vg_nvml_read() fails only when even the
 * device count is unavailable or memory runs out; every per-device or per-field failure is
 * recorded in the list (vg_gpu_error) and the rest is still read.
 *
 * Hangs: each GPU is read on a thread of its own (vg_nvml_read_gpus), so a call that never
 * returns costs only its GPU's figures: past the caller's deadline that GPU is marked hung and
 * its thread left to finish alone. Later reads on the same struct vg_nvml queue no call behind
 * it: they take its answer if it comes while they run (waiting for it only while it has been
 * busy for less than their own budget, else calling it hung at once), and read the GPU afresh
 * once it has returned. The host-wide calls (init, the
 * versions, the count) run on the caller's thread: a hang there is the caller's to bound
 * (gpu/collect.h, model/sampler.h). vg_nvml_free() never waits for a stuck thread: the
 * library is shut down and closed by whoever lets go last.
 */
#ifndef VG_GPU_NVML_H
#define VG_GPU_NVML_H

#include <stdbool.h>
#include <time.h>

#include "gpu/gpu.h"
#include "util/err.h"

struct vg_nvml;

/* The default library name, resolved through the dynamic loader's search path. */
#define VG_NVML_DEFAULT_LIB "libnvidia-ml.so.1"

/* The most GPUs read: NVML names each GPU by a /dev/nvidia<minor> node, one per 8-bit minor
 * number (the driver's own limit is lower: 32 today). A larger count is an error on the list
 * and only the first VG_NVML_MAX_GPUS are read. */
#define VG_NVML_MAX_GPUS 256u

/* path: the library to load; NULL means $VRAMGUARD_NVML if set, else VG_NVML_DEFAULT_LIB. */
int vg_nvml_open(const char *path, struct vg_nvml **out, struct vg_err *err);
void vg_nvml_free(struct vg_nvml *nvml);

/* Read every GPU, its fields, MIG devices and process lists into list (which must be
 * initialised and empty), waiting for every GPU however long it takes: vg_nvml_read_host()
 * then vg_nvml_read_gpus() without a deadline. */
int vg_nvml_read(struct vg_nvml *nvml, struct vg_gpu_list *list, struct vg_err *err);

/* The host-wide part, on the calling thread: the versions and the device count (capped at
 * VG_NVML_MAX_GPUS). list (initialised, empty) gets them and one GPU per counted device, each
 * with only its index. Fails when the count is unavailable or memory runs out. */
int vg_nvml_read_host(struct vg_nvml *nvml, struct vg_gpu_list *list, struct vg_err *err);

/* Every GPU of list (from vg_nvml_read_host), each on a thread of its own, waiting until
 * deadline (CLOCK_MONOTONIC; NULL: as long as they take). A GPU not read by then, or whose
 * reader has been stuck since an earlier read for longer than this read's budget, is marked
 * hung (vg_gpu.hung, with an error naming the call). Makes no NVML call itself after the
 * deadline. 0 or -ENOMEM. */
int vg_nvml_read_gpus(struct vg_nvml *nvml, struct vg_gpu_list *list,
                      const struct timespec *deadline, struct vg_err *err);

/* Also read each GPU's temperature, power draw and limit, and fan speed (VG_GPU_K_TEMP...) in
 * the reads that follow; off by default, so commands that do not show them make no such call.
 * Set it before the first read, from the thread that reads. */
void vg_nvml_want_sensors(struct vg_nvml *nvml, bool on);

/* nvmlErrorString's text for a status, or a text of our own when the library has none. */
const char *vg_nvml_strerror(const struct vg_nvml *nvml, int status);

/* Which symbols were resolved, for --verbose and tests: e.g. "nvmlInit_v2" -> true. */
int vg_nvml_has_symbol(const struct vg_nvml *nvml, const char *name);

#endif
