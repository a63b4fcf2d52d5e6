/*
 * Fuzz target: /proc/PID/maps, both of its readers. vg_proc_parse_maps: which GPU libraries are
 * loaded; paths are file names any process can create (a library called "libcuda.so.1
 * (deleted)", spaces, newlines in names). vg_proc_parse_map_nodes: which NVIDIA nodes are held
 * by mapping, from each line's dev and inode fields, against a device set of stand-in nodes in
 * a temporary directory. Invariants: only VG_LIB_* bits come out; a file with no '/' in it names
 * no library; failure leaves the struct untouched; every line the iterator gives lies inside
 * the input; the node reader fails wherever the library reader does (a short line), and
 * otherwise only with -EINVAL; a match is a node of the set's kinds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "proc/proc.h"

#define ALL_LIBS                                                                                   \
    (VG_LIB_CUDA | VG_LIB_CUDART | VG_LIB_NCCL | VG_LIB_TORCH_CUDA | VG_LIB_TENSORFLOW |           \
     VG_LIB_JAX | VG_LIB_NVML)

/* The stand-in nodes (nvidia0, nvidiactl) the node reader matches against, made once. */
static const struct vg_proc_devset *fuzz_devset(void)
{
    static struct vg_proc_devset *ds;
    if (ds)
        return ds;
    char dir[] = "/tmp/vg-fuzz-maps-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    static const char *const names[] = {"nvidia0", "nvidiactl"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char p[64];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            abort();
        close(fd);
    }
    if (vg_proc_devset_new(-1, dir, &ds) != 0)
        abort();
    /* the set keeps the identities it stat'ed, not the files */
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char p[64];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return ds;
}

static int fuzz_node(void *arg, const struct vg_dev_match *m, const char *path, size_t len)
{
    const char *const *buf = arg;
    FUZZ_CHECK(m->kind == VG_DEV_GPU || m->kind == VG_DEV_CTL);
    FUZZ_CHECK(m->kind != VG_DEV_GPU || m->minor == 0);
    FUZZ_CHECK(path >= buf[0] && path + len <= buf[1]);
    return 0;
}

static void fuzz_nodes(const char *buf, size_t size, int libs_rc)
{
    const char *at = buf, *end = buf + size;
    struct vg_proc_map_ent m;
    int rc;
    while ((rc = vg_proc_maps_next(&at, end, &m)) > 0) {
        FUZZ_CHECK(m.path >= buf && m.path + m.path_len <= end);
        FUZZ_CHECK(at >= m.path + m.path_len && at <= end);
    }
    FUZZ_CHECK(rc == 0 || rc == -EINVAL);
    FUZZ_CHECK(rc == libs_rc);
    const char *bounds[2] = {buf, end};
    rc = vg_proc_parse_map_nodes(buf, size, fuzz_devset(), fuzz_node, bounds);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL);
    if (libs_rc)
        FUZZ_CHECK(rc == -EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_maps(buf, size, &p);
    if (rc == 0) {
        FUZZ_CHECK(p.known == VG_PROC_K_MAPS);
        FUZZ_CHECK((p.libs & ~(unsigned)ALL_LIBS) == 0);
        if (!memchr(buf, '/', size))
            FUZZ_CHECK(p.libs == 0);
        for (unsigned bit = 1; bit <= VG_LIB_NVML; bit <<= 1)
            if (p.libs & bit)
                FUZZ_CHECK(vg_lib_name(bit) != NULL);
    } else {
        FUZZ_CHECK(rc == -EINVAL);
        FUZZ_CHECK(p.known == 0 && p.libs == 0);
    }
    fuzz_nodes(buf, size, rc);
    free(buf);
    return 0;
}
