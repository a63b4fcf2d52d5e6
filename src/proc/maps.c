/*
 * /proc/PID/maps: which GPU libraries a process has loaded. libcuda means a CUDA context is
 * possible; the framework libraries say which advice applies (TF_FORCE_GPU_ALLOW_GROWTH for
 * TensorFlow, XLA_PYTHON_CLIENT_PREALLOCATE for JAX, destroy_process_group() for NCCL).
 *
 * Lines are "start-end perms offset dev inode [path]". The path is matched on its exact
 * basename against known library names and version patterns, so look-alikes such as
 * libcuda.so.1.bak or libcuda.so.1-old do not count. A " (deleted)" suffix is stripped first:
 * a library replaced on disk (a driver upgrade under a running job) is still loaded.
 */
#include "proc/internal.h"

#include <errno.h>
#include <string.h>

#include "util/parse.h"

/* "" or ".N[.N...]": a shared-object version suffix, digits only. */
static bool vg_version(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] != '.' || i + 1 >= n || s[i + 1] < '0' || s[i + 1] > '9')
            return false;
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    return true;
}

/* NAME.so followed by a version ("" allowed when bare is true). */
static bool vg_so(const char *s, size_t n, const char *name_so, bool bare)
{
    size_t k = strlen(name_so);
    if (!vg_parse_starts(s, n, name_so))
        return false;
    if (n == k)
        return bare;
    return vg_version(s + k, n - k);
}

/* torch wheels bundle CUDA libraries with a hash: libcudart-e409450e.so.11.0. */
static bool vg_so_hashed(const char *s, size_t n, const char *name)
{
    size_t k = strlen(name);
    if (!vg_parse_starts(s, n, name) || n <= k || s[k] != '-')
        return false;
    size_t i = k + 1, h = i;
    while (i < n && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
        i++;
    if (i == h || n - i < 3 || memcmp(s + i, ".so", 3) != 0)
        return false;
    return vg_version(s + i + 3, n - i - 3);
}

/* Offset of the first directory of path (before the basename) starting with prefix, or -1. */
static long vg_dir_starts(const char *path, size_t base_off, const char *prefix)
{
    size_t k = strlen(prefix);
    for (size_t i = 0; i + 1 + k <= base_off; i++)
        if (path[i] == '/' && memcmp(path + i + 1, prefix, k) == 0)
            return (long)i + 1;
    return -1;
}

static unsigned vg_maps_lib(const char *path, size_t len)
{
    const char *slash = memrchr(path, '/', len);
    size_t off = slash ? (size_t)(slash - path) + 1 : 0;
    const char *b = path + off;
    size_t n = len - off;
    if (n == 0)
        return 0;

    if (vg_so(b, n, "libcuda.so", true))
        return VG_LIB_CUDA;
    if (vg_so(b, n, "libcudart.so", true) || vg_so_hashed(b, n, "libcudart"))
        return VG_LIB_CUDART;
    if (vg_so(b, n, "libnccl.so.2", true) || vg_so_hashed(b, n, "libnccl"))
        return VG_LIB_NCCL;
    if (vg_parse_is(b, n, "libtorch_cuda.so") || vg_parse_is(b, n, "libtorch_cuda_cu.so") ||
        vg_parse_is(b, n, "libtorch_cuda_cpp.so"))
        return VG_LIB_TORCH_CUDA;
    if (vg_so(b, n, "libtensorflow_framework.so.2", true) ||
        vg_parse_is(b, n, "_pywrap_tensorflow_internal.so"))
        return VG_LIB_TENSORFLOW;
    if (vg_parse_is(b, n, "xla_extension.so") || vg_parse_is(b, n, "libjax_common.so") ||
        vg_parse_is(b, n, "xla_cuda_plugin.so"))
        return VG_LIB_JAX;
    /* jax_cuda12_plugin/..., jax_cuda12_pjrt/..., jaxlib/cuda/...: CUDA parts of JAX. */
    if (vg_parse_ends(b, n, ".so")) {
        long j = vg_dir_starts(path, off, "jaxlib");
        if (vg_dir_starts(path, off, "jax_cuda") >= 0 ||
            (j >= 0 && memmem(path + j, len - (size_t)j, "cuda", 4)))
            return VG_LIB_JAX;
    }
    if (vg_so(b, n, "libnvidia-ml.so", false))
        return VG_LIB_NVML;
    return 0;
}

/* Skip n whitespace-separated fields; NULL when the line has fewer. */
static const char *vg_skip_fields(const char *s, const char *end, int n)
{
    for (int i = 0; i < n; i++) {
        while (s < end && *s == ' ')
            s++;
        if (s >= end)
            return NULL;
        while (s < end && *s != ' ')
            s++;
    }
    return s;
}

int vg_proc_parse_maps(const char *buf, size_t len, struct vg_proc *p)
{
    if (!buf && len)
        return -EINVAL;
    static const char deleted[] = " (deleted)";
    unsigned libs = 0;
    const char *s = buf, *line;
    size_t len_line;
    while (vg_parse_line(&s, buf + len, &line, &len_line)) {
        if (!len_line)
            continue;
        const char *le = line + len_line;
        const char *q = vg_skip_fields(line, le, 5);
        if (!q)
            return -EINVAL;
        while (q < le && *q == ' ')
            q++;
        if (q >= le || *q != '/')
            continue; /* anonymous, [heap], [stack], [vdso] */
        size_t n = (size_t)(le - q);
        if (vg_parse_ends(q, n, deleted))
            n -= sizeof(deleted) - 1;
        libs |= vg_maps_lib(q, n);
    }
    p->libs = libs;
    p->known |= VG_PROC_K_MAPS;
    return 0;
}
