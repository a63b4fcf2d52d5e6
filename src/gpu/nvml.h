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
 */
#ifndef VG_GPU_NVML_H
#define VG_GPU_NVML_H

#include "gpu/gpu.h"
#include "util/err.h"

struct vg_nvml;

/* The default library name, resolved through the dynamic loader's search path. */
#define VG_NVML_DEFAULT_LIB "libnvidia-ml.so.1"

/* path: the library to load; NULL means $VRAMGUARD_NVML if set, else VG_NVML_DEFAULT_LIB. */
int vg_nvml_open(const char *path, struct vg_nvml **out, struct vg_err *err);
void vg_nvml_free(struct vg_nvml *nvml);

/* Read every GPU, its fields, MIG devices and process lists into list (which must be
 * initialised and empty). */
int vg_nvml_read(struct vg_nvml *nvml, struct vg_gpu_list *list, struct vg_err *err);

/* nvmlErrorString's text for a status, or a text of our own when the library has none. */
const char *vg_nvml_strerror(const struct vg_nvml *nvml, int status);

/* Which symbols were resolved, for --verbose and tests: e.g. "nvmlInit_v2" -> true. */
int vg_nvml_has_symbol(const struct vg_nvml *nvml, const char *name);

#endif
