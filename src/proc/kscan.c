/*
 * The in-kernel holder scan: which processes may hold an NVIDIA node, found by a BPF iterator
 * over every task's open files (bpf/holders.bpf.c, `iter/task_file`, the mechanism `bpftool
 * pids` uses) instead of a statx of every /proc/PID/fd/N. On a host of thousands of processes
 * that lookup is nearly all of a scan's cost; the iterator reads the same kernel objects without
 * building a procfs dentry per descriptor. scan.c then reads the processes found here through
 * /proc exactly as its own phase one and two would (the descriptors again, for counts and
 * display paths; stat, environment, cgroup...), so both scans report a holder alike, and a
 * process this scan names that holds nothing by the time it is read is dropped the same way.
 * A second iterator (`iter/task_vma`) does the same for every task's memory mappings, since a
 * process may hold a node by mapping alone (a worker that closed its inherited descriptors keeps
 * CUDA's mappings): its records are marked VG_KREC_MAP and name processes, never descriptors.
 *
 * What makes the candidates complete (every process the /proc scan would call a holder is one):
 * - the program lets through every character device of the driver's majors (vg_dev_majors,
 *   from the same devset the /proc scan matches against) and every file on a filesystem of
 *   --dev DIR's inode-matched nodes; userspace applies vg_proc_devset_match to what comes back;
 * - the kernel names a file by its inode as stat does on the common filesystems (devtmpfs,
 *   tmpfs, ext4), not on all (overlayfs, btrfs subvolumes report other numbers to stat). So
 *   while the iterator runs, this process holds an O_PATH descriptor of each of DIR's
 *   inode-matched nodes, and the program reports this process's descriptors unfiltered: each
 *   node must come back under its own number with the identity statx gave it, or the scan's
 *   result is not used;
 * - tasks are numbered in the PID namespace of the --proc view (vg_kscan_view_ns); the iterator
 *   walks the namespace of the process that creates it and those below, so a view of an outer
 *   namespace (a host's /proc mounted in a container) or a sibling one is not covered and the
 *   /proc scan runs instead;
 * - threads that share their leader's table are skipped by the kernel; a thread with its own
 *   table is walked and reported under its thread group, which /proc then reads.
 *
 * libbpf is loaded with dlopen only when this scan is tried (as gpu/nvml.c loads NVML), so the
 * binary runs without it; the BPF object is built from bpf/holders.bpf.c by the Makefile and
 * embedded. A build without clang's BPF target or libbpf's headers (VG_HAVE_BPF unset) has only
 * the record parser, for the fuzz target, and says so when the kernel scan is asked for.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/kscan_rec.h"
#include "util/array.h"
#include "util/parse.h"

/* DIR nodes matched by inode that the scan checks one by one; more: the /proc scan. */
#define VG_KSCAN_CAL_MAX 256
/* What the iterator may return: 48 bytes a record, a record per NVIDIA descriptor. */
#define VG_KSCAN_OUT_MAX ((size_t)256 << 20)

static bool vg_kscan_same(const struct vg_krec *r, const struct vg_dev_id *id)
{
    return r->dev_major == id->dev_major && r->dev_minor == id->dev_minor && r->ino == id->ino;
}

int vg_proc_parse_krecs(const char *buf, size_t len, const struct vg_proc_devset *ds,
                        struct vg_proc_kcal *cal, size_t ncal, pid_t **pids, size_t *npids)
{
    *pids = NULL;
    *npids = 0;
    if (len % sizeof(struct vg_krec))
        return -EINVAL;
    size_t nrec = len / sizeof(struct vg_krec), n = 0, cap = 0;
    pid_t *out = NULL;
    for (size_t i = 0; i < nrec; i++) {
        struct vg_krec r;
        memcpy(&r, buf + i * sizeof(r), sizeof(r)); /* the buffer need not be aligned */
        if (r.magic != VG_KREC_MAGIC || (r.flags & ~(VG_KREC_SELF | VG_KREC_MAP | VG_KREC_PATH)) ||
            r.pid == 0 || r.pid > VG_PID_MAX || r.tid > VG_PID_MAX) {
            free(out);
            return -EINVAL;
        }
        bool calibration = false;
        for (size_t k = 0; (r.flags & VG_KREC_SELF) && !(r.flags & VG_KREC_MAP) && k < ncal; k++) {
            if (cal[k].fd < 0 || (unsigned)cal[k].fd != r.fd)
                continue;
            calibration = true;
            if (vg_kscan_same(&r, &cal[k].id))
                cal[k].seen = true;
            else
                cal[k].differs = true;
        }
        struct vg_dev_id id = {
            .mode = r.mode,
            .rdev_major = r.rdev_major,
            .rdev_minor = r.rdev_minor,
            .dev_major = r.dev_major,
            .dev_minor = r.dev_minor,
            .ino = r.ino,
        };
        struct vg_dev_match m;
        if (calibration || !vg_proc_devset_match(ds, &id, &m))
            continue;
        if (n && out[n - 1] == (pid_t)r.pid)
            continue; /* the usual case: a process's records come together */
        if (VG_ARRAY_GROW(out, cap, n + 1)) {
            free(out);
            return -ENOMEM;
        }
        out[n++] = (pid_t)r.pid;
    }
    if (n > 1)
        qsort(out, n, sizeof(*out), vg_array_cmp_pid);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || out[k - 1] != out[i])
            out[k++] = out[i];
    *pids = out;
    *npids = k;
    return 0;
}

#ifndef VG_HAVE_BPF

struct vg_proc_kprog {
    unsigned loads; /* always 0: nothing to load */
};

int vg_proc_kprog_new(struct vg_proc_kprog **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void vg_proc_kprog_free(struct vg_proc_kprog *k)
{
    free(k);
}

unsigned vg_proc_kprog_loads(const struct vg_proc_kprog *k)
{
    return k ? k->loads : 0;
}

bool vg_proc_kprog_loaded(const struct vg_proc_kprog *k)
{
    (void)k;
    return false;
}

int vg_proc_kscan(struct vg_proc_ctx *c, const char *dev_dir, struct vg_proc_kprog *keep,
                  pid_t **pids, size_t *npids, struct vg_proc_kfd **kfds, size_t *nkfds,
                  struct vg_err *why)
{
    (void)c;
    (void)dev_dir;
    (void)keep;
    *pids = NULL;
    *npids = 0;
    *kfds = NULL;
    *nkfds = 0;
    return vg_err_set(why, -ENOTSUP,
                      "this build has no kernel scan (built without clang's BPF target or "
                      "libbpf-dev)");
}

#else

#include <dlfcn.h>
#include <stdarg.h>

/* The BPF object built from bpf/holders.bpf.c (Makefile: VG_KSCAN_OBJ), embedded as is. */
__asm__(".pushsection .rodata\n"
        ".balign 8\n"
        "vg_kscan_obj_start:\n"
        ".incbin \"" VG_KSCAN_OBJ "\"\n"
        "vg_kscan_obj_end:\n"
        ".popsection\n");
extern const unsigned char vg_kscan_obj_start[] __asm__("vg_kscan_obj_start");
extern const unsigned char vg_kscan_obj_end[] __asm__("vg_kscan_obj_end");

/* libbpf's interface, declared here so the build needs its headers only for the program. */
struct bpf_object;
struct bpf_map;
struct bpf_program;
struct bpf_link;
typedef int (*vg_bpf_print_fn)(int level, const char *fmt, va_list ap);
typedef void (*vg_bpf_void_fn)(void);

struct vg_bpf {
    void *dl;
    vg_bpf_print_fn (*set_print)(vg_bpf_print_fn fn);
    struct bpf_object *(*open_mem)(const void *buf, size_t size, const void *opts);
    struct bpf_map *(*find_map)(const struct bpf_object *obj, const char *name);
    int (*set_initial_value)(struct bpf_map *map, const void *data, size_t size);
    void *(*initial_value)(struct bpf_map *map, size_t *size);
    int (*load)(struct bpf_object *obj);
    struct bpf_program *(*find_prog)(const struct bpf_object *obj, const char *name);
    int (*set_autoload)(struct bpf_program *prog, bool autoload);
    struct bpf_link *(*attach_iter)(const struct bpf_program *prog, const void *opts);
    int (*link_fd)(const struct bpf_link *link);
    int (*iter_create)(int link_fd);
    int (*link_destroy)(struct bpf_link *link);
    void (*close)(struct bpf_object *obj);
};

#define VG_BPF_SYM(name, member)                                                                   \
    {                                                                                              \
        name, offsetof(struct vg_bpf, member)                                                      \
    }
static const struct {
    const char *name;
    size_t off;
} vg_bpf_syms[] = {
    VG_BPF_SYM("libbpf_set_print", set_print),
    VG_BPF_SYM("bpf_object__open_mem", open_mem),
    VG_BPF_SYM("bpf_object__find_map_by_name", find_map),
    VG_BPF_SYM("bpf_map__set_initial_value", set_initial_value),
    VG_BPF_SYM("bpf_map__initial_value", initial_value),
    VG_BPF_SYM("bpf_object__load", load),
    VG_BPF_SYM("bpf_object__find_program_by_name", find_prog),
    VG_BPF_SYM("bpf_program__set_autoload", set_autoload),
    VG_BPF_SYM("bpf_program__attach_iter", attach_iter),
    VG_BPF_SYM("bpf_link__fd", link_fd),
    VG_BPF_SYM("bpf_iter_create", iter_create),
    VG_BPF_SYM("bpf_link__destroy", link_destroy),
    VG_BPF_SYM("bpf_object__close", close),
};

_Static_assert(sizeof(void *) == sizeof(vg_bpf_void_fn), "function and data pointers differ");

/* libbpf's own messages would go to stderr; the reason a load failed is said by the caller. */
static int vg_bpf_quiet(int level, const char *fmt, va_list ap)
{
    (void)level;
    (void)fmt;
    (void)ap;
    return 0;
}

static int vg_bpf_open(struct vg_bpf *b, struct vg_err *why)
{
    memset(b, 0, sizeof(*b));
    dlerror();
    b->dl = dlopen("libbpf.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!b->dl) {
        const char *e = dlerror();
        return vg_err_set(why, -ENOENT, "libbpf.so.1 cannot be loaded (%s)", e ? e : "not found");
    }
    for (size_t i = 0; i < sizeof(vg_bpf_syms) / sizeof(vg_bpf_syms[0]); i++) {
        void *sym = dlsym(b->dl, vg_bpf_syms[i].name);
        if (!sym) {
            dlclose(b->dl);
            b->dl = NULL;
            return vg_err_set(why, -ENOENT, "libbpf.so.1 lacks %s (libbpf 1.0 or later needed)",
                              vg_bpf_syms[i].name);
        }
        memcpy((char *)b + vg_bpf_syms[i].off, &sym, sizeof(sym));
    }
    b->set_print(vg_bpf_quiet);
    return 0;
}

/* An O_PATH descriptor of each of DIR's inode-matched nodes, held while the iterator runs. */
static int vg_kscan_cal_open(const struct vg_proc_devset *ds, const char *dev_dir,
                             struct vg_proc_kcal **out, size_t *nout, struct vg_err *why)
{
    *out = NULL;
    *nout = 0;
    size_t n = vg_proc_devset_size(ds);
    if (n == 0)
        return 0;
    if (n > VG_KSCAN_CAL_MAX)
        return vg_err_set(why, -E2BIG, "%zu nodes of %s are matched by inode (at most %d)", n,
                          dev_dir, VG_KSCAN_CAL_MAX);
    struct vg_proc_kcal *cal = calloc(n, sizeof(*cal));
    if (!cal)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        cal[i].fd = -1;
    *out = cal;
    *nout = n;
    int dfd = open(dev_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return vg_err_set(why, -errno, "cannot open %s", dev_dir);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = vg_proc_devset_node(ds, i, &cal[i].id);
        cal[i].fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct statx st;
        if (cal[i].fd < 0 ||
            statx(cal[i].fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_INO, &st) < 0 ||
            st.stx_dev_major != cal[i].id.dev_major || st.stx_dev_minor != cal[i].id.dev_minor ||
            st.stx_ino != cal[i].id.ino)
            rc = vg_err_set(why, -ESTALE, "%s/%s changed during the scan", dev_dir, name);
    }
    close(dfd);
    return rc;
}

static void vg_kscan_cal_close(struct vg_proc_kcal *cal, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (cal[i].fd >= 0)
            close(cal[i].fd);
    free(cal);
}

/* The program's settings: the driver's majors, the filesystems of the calibrated nodes, the
 * view's PID namespace. */
static int vg_kscan_cfg(const struct vg_proc_devset *ds, const struct vg_proc_kcal *cal,
                        size_t ncal, unsigned view_ns, struct vg_kcfg *cfg, struct vg_err *why)
{
    memset(cfg, 0, sizeof(*cfg));
    const struct vg_dev_majors *mj = vg_proc_devset_majors(ds);
    cfg->majors[0] = mj->nvidia;
    cfg->majors[1] = mj->uvm;
    for (size_t k = 0; k < VG_DEV_OTHER_MAJORS; k++)
        cfg->majors[2 + k] = mj->other[k];
    for (size_t i = 0; i < ncal; i++) {
        if (cal[i].id.dev_major >= (1u << 12) || cal[i].id.dev_minor >= (1u << 20))
            return vg_err_set(why, -ERANGE, "a node's filesystem number does not fit dev_t");
        unsigned dev = cal[i].id.dev_major << 20 | cal[i].id.dev_minor;
        size_t k = 0;
        while (k < cfg->nfs && cfg->fs_devs[k] != dev)
            k++;
        if (k < cfg->nfs)
            continue;
        if (cfg->nfs == VG_KREC_FS)
            return vg_err_set(why, -E2BIG,
                              "the nodes matched by inode span more than %d "
                              "filesystems",
                              VG_KREC_FS);
        cfg->fs_devs[cfg->nfs++] = dev;
    }
    if (ncal <= VG_KREC_INOS) {
        for (size_t i = 0; i < ncal; i++)
            cfg->inos[i] = cal[i].id.ino;
        cfg->nino = (unsigned)ncal;
    }
    cfg->view_ns = view_ns;
    return 0;
}

/* Read the iterator to its end into out. */
static int vg_kscan_read(int fd, struct vg_buf *out)
{
    for (;;) {
        int rc = vg_buf_reserve(out, 64 << 10);
        if (rc)
            return rc;
        ssize_t n = read(fd, out->data + out->len, out->cap - out->len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        /* the kernel's ENOMEM is not this process's: see vg_kscan_load_err */
        if (n < 0)
            return errno == ENOMEM ? -EAGAIN : -errno;
        if (n == 0)
            return 0;
        out->len += (size_t)n;
    }
}

/* -ENOMEM means this process is out of memory everywhere else, and fails the whole scan. The
 * kernel's ENOMEM from bpf() (its memory for maps and programs, or before 5.11 the locked-memory
 * limit) is not that: it becomes -EAGAIN, a reason to read /proc, not kept as final. */
static int vg_kscan_load_err(int rc, struct vg_err *why)
{
    if (rc == -EPERM || rc == -EACCES)
        return vg_err_set(why, rc,
                          "loading the BPF program is not permitted (it needs root, or "
                          "CAP_BPF and CAP_PERFMON)");
    if (rc == -ENOMEM)
        return vg_err_set(why, -EAGAIN,
                          "the kernel has no memory for the BPF program (on kernels before "
                          "5.11, the locked-memory limit: ulimit -l)");
    return vg_err_set(why, rc, "the kernel refused the BPF program: %s", strerror(-rc));
}

/* The program loaded (or kept loaded) between scans; see proc.h. b.dl NULL: libbpf not opened
 * yet; obj NULL: no program loaded. fail_rc/fail_msg: why it cannot load, kept when trying
 * again would not change it. */
struct vg_proc_kprog {
    struct vg_bpf b;
    struct bpf_object *obj;
    struct bpf_link *link;     /* the descriptors' iterator */
    struct bpf_link *map_link; /* the memory mappings' */
    struct vg_kstate *st;      /* the programs' .bss, mapped */
    struct vg_kcfg cfg;        /* what obj was loaded with */
    unsigned loads;
    int fail_rc;
    char *fail_msg;
    bool no_maps; /* the kernel has no iter/task_vma (before 5.12): the mappings' program is
                   * left unloaded */
};

int vg_proc_kprog_new(struct vg_proc_kprog **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

static void vg_kprog_unload(struct vg_proc_kprog *k)
{
    if (k->link)
        k->b.link_destroy(k->link);
    if (k->map_link)
        k->b.link_destroy(k->map_link);
    if (k->obj)
        k->b.close(k->obj);
    k->link = NULL;
    k->map_link = NULL;
    k->obj = NULL;
    k->st = NULL;
}

void vg_proc_kprog_free(struct vg_proc_kprog *k)
{
    if (!k)
        return;
    vg_kprog_unload(k);
    if (k->b.dl)
        dlclose(k->b.dl);
    free(k->fail_msg);
    free(k);
}

unsigned vg_proc_kprog_loads(const struct vg_proc_kprog *k)
{
    return k ? k->loads : 0;
}

bool vg_proc_kprog_loaded(const struct vg_proc_kprog *k)
{
    return k && k->obj;
}

/* Remember why the program cannot load (rc, why's message) so later scans say it untried. */
static int vg_kprog_fail(struct vg_proc_kprog *k, int rc, const struct vg_err *why)
{
    if (rc == -ENOMEM || rc == -EAGAIN)
        return rc;
    free(k->fail_msg);
    k->fail_msg = vg_proc_strndup(vg_err_msg(why), strlen(vg_err_msg(why)));
    k->fail_rc = k->fail_msg ? rc : 0;
    return k->fail_msg ? rc : -ENOMEM;
}

/* Leave the mappings' program out of the next load. 0 or -EINVAL. */
static int vg_kprog_no_maps(struct vg_proc_kprog *k)
{
    struct bpf_program *mprog = k->b.find_prog(k->obj, "vg_mapped");
    return mprog && k->b.set_autoload(mprog, false) == 0 ? 0 : -EINVAL;
}

/* Have the programs loaded with cfg in k: kept when they already are, else (re)loaded; the
 * mappings' one only where the kernel has its iterator (k->no_maps). */
static int vg_kprog_load(struct vg_proc_kprog *k, const struct vg_kcfg *cfg, struct vg_err *why)
{
    if (k->fail_rc)
        return vg_err_set(why, k->fail_rc, "%s", k->fail_msg);
    int rc;
    if (!k->b.dl && (rc = vg_bpf_open(&k->b, why)) != 0)
        return vg_kprog_fail(k, rc, why);
    if (k->obj && memcmp(&k->cfg, cfg, sizeof(*cfg)) == 0)
        return 0;
    vg_kprog_unload(k);
    struct vg_bpf *b = &k->b;
    size_t size = (size_t)(vg_kscan_obj_end - vg_kscan_obj_start);
    errno = 0;
    if (!(k->obj = b->open_mem(vg_kscan_obj_start, size, NULL)))
        return vg_err_set(why, errno ? -errno : -EINVAL, "libbpf cannot open the BPF object");
    struct bpf_map *ro = b->find_map(k->obj, ".rodata"), *bss = b->find_map(k->obj, ".bss");
    if (!ro || !bss)
        rc = vg_err_set(why, -EINVAL, "the BPF object lacks its data sections");
    else if ((rc = b->set_initial_value(ro, cfg, sizeof(*cfg))) < 0)
        vg_err_set(why, rc, "the BPF object's settings do not fit");
    else if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        rc = vg_kprog_fail(
            k, vg_err_set(why, -ENOENT, "the kernel has no BTF (/sys/kernel/btf/vmlinux)"), why);
    else if (k->no_maps && (rc = vg_kprog_no_maps(k)) < 0)
        vg_err_set(why, rc, "the BPF object lacks its mappings' program");
    else if ((rc = b->load(k->obj)) < 0 && rc == -ESRCH && !k->no_maps) {
        /* libbpf finds no bpf_iter_task_vma in the kernel's BTF: before 5.12, or not built */
        vg_kprog_unload(k);
        k->no_maps = true;
        return vg_kprog_load(k, cfg, why);
    } else if (rc < 0)
        rc = vg_kprog_fail(k, vg_kscan_load_err(rc, why), why);
    if (rc < 0) {
        vg_kprog_unload(k);
        return rc;
    }
    size_t ssize = 0;
    k->st = b->initial_value(bss, &ssize);
    struct bpf_program *prog = b->find_prog(k->obj, "vg_holders");
    struct bpf_program *mprog = b->find_prog(k->obj, "vg_mapped");
    errno = 0;
    if (!k->st || ssize < sizeof(*k->st) || !prog || !mprog)
        rc = vg_err_set(why, -EINVAL, "the loaded BPF object lacks its programs or state");
    else if (!(k->link = b->attach_iter(prog, NULL)) ||
             (!k->no_maps && (errno = 0, !(k->map_link = b->attach_iter(mprog, NULL)))))
        rc = vg_kscan_load_err(errno ? -errno : -EINVAL, why);
    if (rc < 0) {
        vg_kprog_unload(k);
        return rc;
    }
    k->cfg = *cfg;
    k->loads++;
    return 0;
}

/* Run one iterator of the loaded programs once, appending to out; *saw_init: the view's pid 1
 * was walked. */
static int vg_kprog_iterate_one(struct vg_proc_kprog *k, struct bpf_link *link, struct vg_buf *out,
                                bool *saw_init, struct vg_err *why)
{
    memset(k->st, 0, sizeof(*k->st));
    int iter = k->b.iter_create(k->b.link_fd(link));
    if (iter < 0)
        return vg_kscan_load_err(iter, why);
    int rc = vg_kscan_read(iter, out);
    if (rc == -EAGAIN)
        vg_err_set(why, rc, "reading the BPF iterator failed: the kernel is out of memory");
    else if (rc < 0 && rc != -ENOMEM)
        vg_err_set(why, rc, "reading the BPF iterator failed: %s", strerror(-rc));
    *saw_init = *saw_init || k->st->saw_view_init != 0;
    close(iter);
    return rc;
}

/* Both iterators, descriptors then mappings, into out (their records one after the other). */
static int vg_kprog_iterate(struct vg_proc_kprog *k, struct vg_buf *out, bool *saw_init,
                            struct vg_err *why)
{
    *saw_init = false;
    int rc = vg_kprog_iterate_one(k, k->link, out, saw_init, why);
    return rc || !k->map_link ? rc : vg_kprog_iterate_one(k, k->map_link, out, saw_init, why);
}

/* The inode number of the --proc view's PID namespace. When the view shows this process at
 * its own level (self/status has one NSpid entry), it is this process's namespace, which the
 * iterator walks (*below false). A view that shows this process with more entries is of an
 * outer namespace, which it does not. A view that does not show it at all is of a namespace
 * below ours (walked) or a sibling (not): that of the view's pid 1, *below true, and the
 * iterator must then walk that pid 1. */
static int vg_kscan_view_ns(struct vg_proc_ctx *c, unsigned *ns, bool *below, struct vg_err *why)
{
    struct vg_proc self = {0};
    int rc = vg_proc_ctx_read(c, c->root_fd, "self/status", VG_PROC_STATUS_MAX);
    if (rc == 0)
        rc = vg_proc_parse_status(vg_buf_str(&c->file), c->file.len, &self);
    size_t depth = self.nnspid;
    vg_proc_release(&self);
    if (rc == -ENOMEM)
        return rc;
    if (rc == 0 && depth != 1)
        return vg_err_set(why, -EXDEV,
                          "the --proc view is of an outer PID namespace, which "
                          "the kernel scan does not walk from here");
    *below = rc != 0;
    const char *path = *below ? "1/ns/pid" : "self/ns/pid";
    struct stat st;
    if (fstatat(c->root_fd, path, &st, 0) < 0)
        return vg_err_set(why, -errno,
                          "the PID namespace of the --proc view cannot be told "
                          "(%s: %s)",
                          path, strerror(errno));
    *ns = (unsigned)st.st_ino;
    return 0;
}

static int vg_kscan_cmp_kfd(const void *a, const void *b)
{
    const struct vg_proc_kfd *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->fd < y->fd ? -1 : x->fd > y->fd;
}

/* The descriptors behind the pids of records that vg_proc_parse_krecs accepted: every record
 * of a descriptor the set matches that is not a check descriptor. 0 or -ENOMEM. */
static int vg_kscan_fds(const char *buf, size_t len, const struct vg_proc_devset *ds,
                        const struct vg_proc_kcal *cal, size_t ncal, struct vg_proc_kfd **out,
                        size_t *nout)
{
    size_t n = 0, cap = 0;
    struct vg_proc_kfd *v = NULL;
    for (size_t i = 0; i < len / sizeof(struct vg_krec); i++) {
        struct vg_krec r;
        memcpy(&r, buf + i * sizeof(r), sizeof(r));
        if (r.flags & VG_KREC_MAP)
            continue; /* a mapping: its process is read in full, maps included */
        bool check = false;
        for (size_t k = 0; (r.flags & VG_KREC_SELF) && k < ncal && !check; k++)
            check = cal[k].fd >= 0 && (unsigned)cal[k].fd == r.fd;
        struct vg_dev_id id = {.mode = r.mode,
                               .rdev_major = r.rdev_major,
                               .rdev_minor = r.rdev_minor,
                               .dev_major = r.dev_major,
                               .dev_minor = r.dev_minor,
                               .ino = r.ino};
        struct vg_dev_match m;
        if (check || !vg_proc_devset_match(ds, &id, &m))
            continue;
        if (VG_ARRAY_GROW(v, cap, n + 1)) {
            free(v);
            return -ENOMEM;
        }
        v[n++] = (struct vg_proc_kfd){.pid = (pid_t)r.pid,
                                      .fd = r.fd,
                                      .other = r.tid != r.pid,
                                      .path = (r.flags & VG_KREC_PATH) != 0,
                                      .id_known = true,
                                      .id = id};
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), vg_kscan_cmp_kfd);
    *out = v;
    *nout = n;
    return 0;
}

int vg_proc_kscan(struct vg_proc_ctx *c, const char *dev_dir, struct vg_proc_kprog *keep,
                  pid_t **pids, size_t *npids, struct vg_proc_kfd **kfds, size_t *nkfds,
                  struct vg_err *why)
{
    *pids = NULL;
    *npids = 0;
    *kfds = NULL;
    *nkfds = 0;
    const char *dir = dev_dir && *dev_dir ? dev_dir : "/dev";
    if (!c->procfs)
        return vg_err_set(why, -ENOTSUP, "the --proc view is not a procfs");
    unsigned view_ns = 0;
    bool below = false;
    int rc = vg_kscan_view_ns(c, &view_ns, &below, why);
    if (rc)
        return rc;
    struct vg_proc_kprog *k = keep;
    if (!k && vg_proc_kprog_new(&k) != 0)
        return vg_err_set(why, -ENOMEM, "out of memory");
    struct vg_proc_kcal *cal = NULL;
    size_t ncal = 0;
    struct vg_kcfg cfg;
    struct vg_buf out;
    vg_buf_init(&out, VG_KSCAN_OUT_MAX);
    bool saw_init = false;
    if ((rc = vg_kscan_cal_open(c->devset, dir, &cal, &ncal, why)) != 0 ||
        (rc = vg_kscan_cfg(c->devset, cal, ncal, view_ns, &cfg, why)) != 0 ||
        (rc = vg_kprog_load(k, &cfg, why)) != 0 ||
        (rc = vg_kprog_iterate(k, &out, &saw_init, why)) != 0)
        goto out;
    c->kscan_maps = k->map_link != NULL;
    if (below && !saw_init) {
        rc = vg_err_set(why, -EXDEV,
                        "the --proc view is of a PID namespace the kernel scan "
                        "does not walk from here (or its pid 1 holds no files)");
        goto out;
    }
    rc = vg_proc_parse_krecs(out.data, out.len, c->devset, cal, ncal, pids, npids);
    if (rc == 0)
        rc = vg_kscan_fds(out.data, out.len, c->devset, cal, ncal, kfds, nkfds);
    if (rc == -EINVAL)
        vg_err_set(why, rc, "the BPF iterator wrote malformed records");
    for (size_t i = 0; rc == 0 && i < ncal; i++)
        if (cal[i].differs || !cal[i].seen) {
            struct vg_dev_id id;
            rc = vg_err_set(why, -EXDEV,
                            "the kernel names %s/%s otherwise than stat does "
                            "(overlayfs or btrfs?)",
                            dir, vg_proc_devset_node(c->devset, i, &id));
        }
    if (rc) {
        free(*pids);
        *pids = NULL;
        *npids = 0;
        free(*kfds);
        *kfds = NULL;
        *nkfds = 0;
    }
out:
    if (rc == -ENOMEM)
        vg_err_set(why, rc, "out of memory");
    vg_buf_release(&out);
    vg_kscan_cal_close(cal, ncal);
    if (k != keep)
        vg_proc_kprog_free(k);
    return rc;
}

#endif
