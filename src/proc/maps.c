/*
 * /proc/PID/maps, for two things. Which GPU libraries a process has loaded: libcuda means a
 * CUDA context is possible; the framework libraries say which advice applies
 * (TF_FORCE_GPU_ALLOW_GROWTH for TensorFlow, XLA_PYTHON_CLIENT_PREALLOCATE for JAX,
 * destroy_process_group() for NCCL). And, in phase one of the scan, which NVIDIA nodes it
 * holds by memory mapping: CUDA maps /dev/nvidiaN, nvidiactl and nvidia-uvm, the kernel keeps
 * a mapped file open for as long as the mapping lives, and mappings survive fork(), so a
 * worker that closed every descriptor it inherited still holds its parent's nodes (lsof and
 * fuser show it as "mem" / "m").
 *
 * Lines are "start-end perms offset dev inode [path]", one iterator (vg_proc_maps_next) for
 * both readers. A library's path is matched on its exact basename against known library names
 * and version patterns, so look-alikes such as libcuda.so.1.bak or libcuda.so.1-old do not
 * count. A " (deleted)" suffix is stripped first: a library replaced on disk (a driver upgrade
 * under a running job) is still loaded. A node is matched by its filesystem and inode (the dev
 * and inode fields), never by its path, as descriptors are (devset.c).
 */
#include "proc/internal.h"

#include <errno.h>
#include <stdint.h>
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

/* One whitespace-separated field of [*s, end): its start and length; false when none is left. */
static bool vg_maps_field(const char **s, const char *end, const char **f, size_t *n)
{
    const char *q = *s;
    while (q < end && *q == ' ')
        q++;
    if (q >= end)
        return false;
    *f = q;
    while (q < end && *q != ' ')
        q++;
    *n = (size_t)(q - *f);
    *s = q;
    return true;
}

/* Hex digits [s, s + n) into *v (at most 32 bits); false when empty, too long or not hex. */
static bool vg_maps_hex(const char *s, size_t n, uint32_t *v)
{
    if (n == 0 || n > 8)
        return false;
    uint32_t x = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int d = vg_parse_hex_digit(ch);
        if (d < 0)
            return false;
        x = x << 4 | d;
    }
    *v = x;
    return true;
}

/* The dev ("MAJ:MIN", hex) and inode (decimal) fields into m; false when either is malformed. */
static bool vg_maps_id(const char *dev, size_t ndev, const char *ino, size_t nino,
                       struct vg_proc_map_ent *m)
{
    const char *colon = memchr(dev, ':', ndev);
    if (!colon || !vg_maps_hex(dev, (size_t)(colon - dev), &m->dev_major) ||
        !vg_maps_hex(colon + 1, ndev - (size_t)(colon - dev) - 1, &m->dev_minor))
        return false;
    uint64_t v = 0;
    if (nino == 0 || nino > 20)
        return false;
    for (size_t i = 0; i < nino; i++) {
        if (ino[i] < '0' || ino[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(ino[i] - '0');
    }
    m->ino = v;
    return true;
}

int vg_proc_maps_next(const char **at, const char *end, struct vg_proc_map_ent *m)
{
    const char *line;
    size_t len_line;
    do
        if (!vg_parse_line(at, end, &line, &len_line))
            return 0;
    while (!len_line);
    const char *le = line + len_line, *q = line, *f[5];
    size_t n[5];
    for (int i = 0; i < 5; i++)
        if (!vg_maps_field(&q, le, &f[i], &n[i]))
            return -EINVAL;
    *m = (struct vg_proc_map_ent){0};
    m->id_ok = vg_maps_id(f[3], n[3], f[4], n[4], m);
    while (q < le && *q == ' ')
        q++;
    m->path = q;
    m->path_len = (size_t)(le - q);
    return 1;
}

int vg_proc_parse_maps(const char *buf, size_t len, struct vg_proc *p)
{
    if (!buf && len)
        return -EINVAL;
    static const char deleted[] = " (deleted)";
    unsigned libs = 0;
    const char *s = buf;
    struct vg_proc_map_ent m;
    int rc;
    while ((rc = vg_proc_maps_next(&s, buf + len, &m)) > 0) {
        if (m.path_len == 0 || m.path[0] != '/')
            continue; /* anonymous, [heap], [stack], [vdso] */
        size_t n = m.path_len;
        if (vg_parse_ends(m.path, n, deleted))
            n -= sizeof(deleted) - 1;
        libs |= vg_maps_lib(m.path, n);
    }
    if (rc < 0)
        return rc;
    p->libs = libs;
    p->known |= VG_PROC_K_MAPS;
    return 0;
}

int vg_proc_parse_map_nodes(const char *buf, size_t len, const struct vg_proc_devset *ds,
                            vg_proc_map_fn fn, void *arg)
{
    if (!buf && len)
        return -EINVAL;
    const char *s = buf;
    struct vg_proc_map_ent m;
    int rc;
    while ((rc = vg_proc_maps_next(&s, buf + len, &m)) > 0) {
        struct vg_dev_match dm;
        if (!m.id_ok)
            return -EINVAL; /* a mapping whose file cannot be told: what it holds is unknown */
        if (m.ino == 0 || !vg_proc_devset_match_file(ds, m.dev_major, m.dev_minor, m.ino, &dm))
            continue; /* anonymous, or a file that is no node */
        if ((rc = fn(arg, &dm, m.path, m.path_len)) != 0)
            return rc;
    }
    return rc;
}

/* The callback of vg_proc_read_map_nodes: one mapping of a node, noted in the scan context. */
static int vg_maps_held(void *arg, const struct vg_dev_match *m, const char *path, size_t n)
{
    void **a = arg;
    return vg_proc_map_held(a[0], m, path, n, a[1]);
}

int vg_proc_read_map_nodes(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    int rc = vg_proc_ctx_read(c, pid_fd, "maps", VG_PROC_MAPS_MAX);
    if (rc < 0) {
        c->file.len = 0;
        /* a test tree's process may lack the file; one that exited has nothing mapped */
        return rc == -ENOENT && !vg_proc_gone(pid_fd) ? 0 : rc;
    }
    void *arg[2] = {c, p};
    return vg_proc_parse_map_nodes(vg_buf_str(&c->file), c->file.len, c->devset, vg_maps_held, arg);
}
