/*
 * Unit tests for matching descriptors by what they refer to (src/proc/devset.c, fds.c):
 *  - classification of a statx result against the driver's majors (from a procfs "devices"
 *    file, or the registered 195 when it lists none) and against the inode identities of the
 *    nodes in --dev DIR (plain-file stand-ins, mknod'ed nodes, nvidia-caps/, hard links,
 *    symlinks, files elsewhere that only carry a node's name);
 *  - a fake procfs tree whose fd links point at real character devices (mknod c 195 N, as
 *    root) inside and outside DIR: matched by number, whatever the path;
 *  - the real /proc: a child holding real nodes through O_PATH (no driver answers an open; they
 *    count apart, as path only, never as holders),
 *    under DIR and through another node of the same numbers, one deleted since, a stand-in, a
 *    stand-in deleted since, many descriptors of one node; and a child holding hundreds of
 *    distinct nodes: the paths listed stop at VG_PROC_NODES_MAX and the rest are counted.
 *
 * Why the real-/proc tests use major 4000 and not 195: the test suite runs files in parallel,
 * and every vramguard scan on this host counts a held node of major 195 as a GPU, wherever it
 * is. Nodes of an unregistered major declared NVIDIA's only inside a private mount namespace
 * (a file bound over /proc/devices, where the scanning child reads it) are invisible to every
 * other test; the 195 fallback is covered by the classification and fake-tree tests, which
 * hold nothing open. Tests that need root (mknod, mount) skip without it.
 *
 * Children die with the test (PR_SET_PDEATHSIG) and are killed and reaped by every fixture's
 * teardown; every wait is a blocking read on a pipe the child answers at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/proc.h"

/* An unregistered major, declared NVIDIA's in the private /proc/devices of the real tests. */
#define FX_MAJOR 4000u
#define FX_UVM_MAJOR 4001u
#define FX_CAPS_MAJOR 4002u
#define FX_OTHER_MAJOR 4005u
#define FX_MANY 300

struct fx {
    char top[PATH_MAX];   /* mkdtemp */
    char proc[PATH_MAX];  /* top/proc: a fake procfs root (devices, pid dirs) */
    char dev[PATH_MAX];   /* top/dev: --dev */
    char other[PATH_MAX]; /* top/else: outside --dev */
    pid_t child;
};

/* a "/" b into out; -1 when it does not fit (children cannot assert). */
static int pj(char *out, size_t n, const char *a, const char *b)
{
    int k = snprintf(out, n, "%s/%s", a, b);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

static void join(char *out, size_t n, const char *a, const char *b)
{
    assert_int_equal(pj(out, n, a, b), 0);
}

static void put(const char *dir, const char *name, const char *text)
{
    char p[PATH_MAX];
    join(p, sizeof(p), dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

static void node(const char *dir, const char *name, unsigned major, unsigned minor)
{
    char p[PATH_MAX];
    join(p, sizeof(p), dir, name);
    assert_int_equal(mknod(p, S_IFCHR | 0600, makedev(major, minor)), 0);
}

static void sub(char *out, size_t n, const char *dir, const char *name)
{
    join(out, n, dir, name);
    if (mkdir(out, 0755) < 0)
        assert_int_equal(errno, EEXIST);
}

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->top, sizeof(f->top), "%s", "/tmp/vg-test-devset-XXXXXX");
    assert_non_null(mkdtemp(f->top));
    sub(f->proc, sizeof(f->proc), f->top, "proc");
    sub(f->dev, sizeof(f->dev), f->top, "dev");
    sub(f->other, sizeof(f->other), f->top, "else");
    *state = f;
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

static void fx_stop_child(struct fx *f)
{
    if (f->child > 0) {
        kill(f->child, SIGKILL);
        waitpid(f->child, NULL, 0);
        f->child = 0;
    }
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    fx_stop_child(f);
    nftw(f->top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static bool need_root(void)
{
    if (geteuid() == 0)
        return true;
    print_message("not root: mknod and mount need it, skipped\n");
    return false;
}

/* The identity of a file, as the scan reads a descriptor (statx, following symlinks). */
static struct vg_dev_id id_of(const char *dir, const char *name)
{
    char p[PATH_MAX];
    join(p, sizeof(p), dir, name);
    struct statx st;
    assert_int_equal(statx(AT_FDCWD, p, 0, STATX_TYPE | STATX_INO, &st), 0);
    return (struct vg_dev_id){
        .mode = st.stx_mode,
        .rdev_major = st.stx_rdev_major,
        .rdev_minor = st.stx_rdev_minor,
        .dev_major = st.stx_dev_major,
        .dev_minor = st.stx_dev_minor,
        .ino = st.stx_ino,
    };
}

static struct vg_dev_id chr(unsigned major, unsigned minor)
{
    return (struct vg_dev_id){.mode = S_IFCHR | 0600,
                              .rdev_major = major,
                              .rdev_minor = minor,
                              .dev_major = 0,
                              .dev_minor = 5,
                              .ino = 99};
}

static struct vg_proc_devset *devset(const struct fx *f, const char *dev_dir)
{
    int root = open(f->proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    struct vg_proc_devset *s = NULL;
    assert_int_equal(vg_proc_devset_new(root, dev_dir, &s), 0);
    close(root);
    assert_non_null(s);
    return s;
}

/* Asserts that id matches as kind (and minor, for a GPU); returns the node number. */
static uint64_t expect(const struct vg_proc_devset *s, struct vg_dev_id id, enum vg_dev_kind kind,
                       unsigned minor)
{
    struct vg_dev_match m = {.kind = (enum vg_dev_kind)77, .minor = 77};
    bool hit = vg_proc_devset_match(s, &id, &m);
    if (kind == VG_DEV_NONE) {
        assert_false(hit);
        return 0;
    }
    assert_true(hit);
    assert_int_equal(m.kind, kind);
    assert_int_equal(m.minor, kind == VG_DEV_GPU ? minor : 0);
    return m.node;
}

static const char fx_devices[] = "Character devices:\n  1 mem\n  5 /dev/tty\n"
                                 "4000 nvidia-frontend\n4001 nvidia-uvm\n4002 nvidia-caps\n"
                                 "\nBlock devices:\n  7 loop\n4003 nvidia\n";

/* ---- by device number ------------------------------------------------------------------- */

static void test_match_majors(void **state)
{
    struct fx *f = *state;
    put(f->proc, "devices", fx_devices);
    struct vg_proc_devset *s = devset(f, f->dev);
    assert_int_equal(vg_proc_devset_majors(s)->nvidia, FX_MAJOR);
    assert_int_equal(vg_proc_devset_majors(s)->uvm, FX_UVM_MAJOR);
    assert_int_equal(vg_proc_devset_size(s), 0);

    uint64_t gpu0 = expect(s, chr(FX_MAJOR, 0), VG_DEV_GPU, 0);
    assert_int_equal(expect(s, chr(FX_MAJOR, 0), VG_DEV_GPU, 0), gpu0); /* one node, one number */
    uint64_t gpu1 = expect(s, chr(FX_MAJOR, 1), VG_DEV_GPU, 1);
    assert_true(gpu1 != gpu0);
    expect(s, chr(FX_MAJOR, 253), VG_DEV_GPU, 253);
    expect(s, chr(FX_MAJOR, 254), VG_DEV_OTHER, 0); /* nvidia-modeset */
    expect(s, chr(FX_MAJOR, 255), VG_DEV_CTL, 0);
    expect(s, chr(FX_MAJOR, 300), VG_DEV_OTHER, 0); /* no node the driver makes */
    uint64_t uvm = expect(s, chr(FX_UVM_MAJOR, 0), VG_DEV_UVM, 0);
    uint64_t tools = expect(s, chr(FX_UVM_MAJOR, 1), VG_DEV_UVM, 0);
    assert_true(uvm != tools && uvm != gpu0);
    expect(s, chr(FX_CAPS_MAJOR, 7), VG_DEV_OTHER, 0);
    /* listed elsewhere, 195 is nobody's; nor are /dev/null, a block device of the major, or a
     * regular file whatever its rdev field says */
    expect(s, chr(195, 0), VG_DEV_NONE, 0);
    expect(s, chr(1, 3), VG_DEV_NONE, 0);
    struct vg_dev_id blk = chr(FX_MAJOR, 0);
    blk.mode = S_IFBLK | 0600;
    expect(s, blk, VG_DEV_NONE, 0);
    struct vg_dev_id reg = chr(FX_MAJOR, 0);
    reg.mode = S_IFREG | 0644;
    expect(s, reg, VG_DEV_NONE, 0);
    vg_proc_devset_free(s);
}

static void test_match_default_major(void **state)
{
    struct fx *f = *state;
    /* no devices file (a test tree, a copy of /proc): the registered major alone */
    struct vg_proc_devset *s = devset(f, f->dev);
    assert_int_equal(vg_proc_devset_majors(s)->nvidia, VG_DEV_NVIDIA_MAJOR);
    assert_int_equal(vg_proc_devset_majors(s)->uvm, 0);
    expect(s, chr(195, 0), VG_DEV_GPU, 0);
    expect(s, chr(195, 7), VG_DEV_GPU, 7);
    expect(s, chr(195, 255), VG_DEV_CTL, 0);
    expect(s, chr(195, 254), VG_DEV_OTHER, 0);
    expect(s, chr(FX_UVM_MAJOR, 0), VG_DEV_NONE, 0);
    vg_proc_devset_free(s);
    /* a devices file without the driver (no driver loaded): the same */
    put(f->proc, "devices", "Character devices:\n  1 mem\n\nBlock devices:\n  7 loop\n");
    s = devset(f, f->dev);
    assert_int_equal(vg_proc_devset_majors(s)->nvidia, VG_DEV_NVIDIA_MAJOR);
    expect(s, chr(195, 1), VG_DEV_GPU, 1);
    vg_proc_devset_free(s);
}

/* ---- by inode identity ------------------------------------------------------------------ */

static void test_match_identity(void **state)
{
    struct fx *f = *state;
    put(f->proc, "devices", fx_devices);
    static const char *const standins[] = {"nvidia0",    "nvidia3",        "nvidiactl",
                                           "nvidia-uvm", "nvidia-modeset", "null"};
    for (size_t i = 0; i < sizeof(standins) / sizeof(standins[0]); i++)
        put(f->dev, standins[i], "");
    char caps[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
    sub(caps, sizeof(caps), f->dev, "nvidia-caps");
    put(caps, "nvidia-cap1", "");
    put(caps, "nvidia-cap2", "");
    /* a hard link under another nvidia* name: one inode, the GPU's */
    join(p, sizeof(p), f->dev, "nvidia3");
    join(q, sizeof(q), f->dev, "nvidia-alias");
    assert_int_equal(link(p, q), 0);
    /* a symlink in DIR is a name, not a node: what it points at does not become one */
    put(f->other, "target", "");
    join(p, sizeof(p), f->other, "target");
    join(q, sizeof(q), f->dev, "nvidia9");
    assert_int_equal(symlink(p, q), 0);
    /* a file elsewhere that only carries a node's name */
    put(f->other, "nvidia0", "");

    struct vg_proc_devset *s = devset(f, f->dev);
    assert_int_equal(vg_proc_devset_size(s), 7); /* 0, 3, ctl, uvm, modeset, cap1, cap2 */
    uint64_t n0 = expect(s, id_of(f->dev, "nvidia0"), VG_DEV_GPU, 0);
    uint64_t n3 = expect(s, id_of(f->dev, "nvidia3"), VG_DEV_GPU, 3);
    assert_true(n0 != n3);
    assert_int_equal(expect(s, id_of(f->dev, "nvidia-alias"), VG_DEV_GPU, 3), n3);
    expect(s, id_of(f->dev, "nvidiactl"), VG_DEV_CTL, 0);
    expect(s, id_of(f->dev, "nvidia-uvm"), VG_DEV_UVM, 0);
    expect(s, id_of(f->dev, "nvidia-modeset"), VG_DEV_OTHER, 0);
    uint64_t c1 = expect(s, id_of(caps, "nvidia-cap1"), VG_DEV_OTHER, 0);
    assert_true(expect(s, id_of(caps, "nvidia-cap2"), VG_DEV_OTHER, 0) != c1);
    expect(s, id_of(f->dev, "null"), VG_DEV_NONE, 0);
    expect(s, id_of(f->dev, "nvidia9"), VG_DEV_NONE, 0); /* the symlink's target */
    expect(s, id_of(f->other, "nvidia0"), VG_DEV_NONE, 0);
    /* the same inode number on another filesystem is another file */
    struct vg_dev_id moved = id_of(f->dev, "nvidia0");
    moved.dev_minor++;
    expect(s, moved, VG_DEV_NONE, 0);
    /* by number still, beside the set; and the by-number and by-inode numbers never meet */
    uint64_t g0 = expect(s, chr(FX_MAJOR, 0), VG_DEV_GPU, 0);
    assert_true(g0 != n0 && g0 != n3 && g0 != c1);
    vg_proc_devset_free(s);

    /* a DIR that does not exist: no stand-ins, nodes by number as ever */
    join(p, sizeof(p), f->top, "missing");
    s = devset(f, p);
    assert_int_equal(vg_proc_devset_size(s), 0);
    expect(s, chr(FX_MAJOR, 2), VG_DEV_GPU, 2);
    vg_proc_devset_free(s);

    if (!need_root())
        return;
    /* Real nodes in DIR: one of the driver's majors counts by number and is left out of the
     * set; one of a major /proc/devices does not list counts by its inode, and another node
     * of the same numbers elsewhere does not. */
    node(f->dev, "nvidia5", FX_MAJOR, 5);
    node(f->dev, "nvidia-uvm-tools", FX_OTHER_MAJOR, 1);
    node(f->other, "uvm-copy", FX_OTHER_MAJOR, 1);
    s = devset(f, f->dev);
    assert_int_equal(vg_proc_devset_size(s), 8);
    expect(s, id_of(f->dev, "nvidia5"), VG_DEV_GPU, 5);
    expect(s, id_of(f->dev, "nvidia-uvm-tools"), VG_DEV_UVM, 0);
    expect(s, id_of(f->other, "uvm-copy"), VG_DEV_NONE, 0);
    vg_proc_devset_free(s);
}

/* ---- a fake procfs tree pointing at real nodes ------------------------------------------ */

static void fd_link(const struct fx *f, int pid, int fd, const char *target)
{
    char piddir[PATH_MAX], d[PATH_MAX], rel[64], p[PATH_MAX];
    snprintf(rel, sizeof(rel), "%d", pid);
    sub(piddir, sizeof(piddir), f->proc, rel);
    sub(d, sizeof(d), piddir, "fd");
    snprintf(rel, sizeof(rel), "%d", fd);
    join(p, sizeof(p), d, rel);
    assert_int_equal(symlink(target, p), 0);
}

static void test_scan_tree_by_number(void **state)
{
    struct fx *f = *state;
    if (!need_root())
        skip();
    /* No devices file in this root: 195 is the NVIDIA major. Nothing holds these nodes open,
     * so no other test's scan can see them. */
    node(f->other, "gpu-alias", 195, 2);
    node(f->dev, "nvidiactl", 195, 255);
    put(f->dev, "nvidia3", "");
    put(f->other, "nvidia1", "");
    char p[PATH_MAX], alias[PATH_MAX], ctl[PATH_MAX], n3[PATH_MAX];
    join(alias, sizeof(alias), f->other, "gpu-alias");
    join(ctl, sizeof(ctl), f->dev, "nvidiactl");
    join(n3, sizeof(n3), f->dev, "nvidia3");
    fd_link(f, 100, 0, "pipe:[1]");
    fd_link(f, 100, 3, alias); /* another path to GPU 2 */
    fd_link(f, 100, 4, ctl);
    fd_link(f, 100, 5, n3); /* a stand-in */
    join(p, sizeof(p), f->other, "nvidia1");
    fd_link(f, 100, 6, p); /* only a name */
    fd_link(f, 100, 7, alias);
    fd_link(f, 200, 3, p); /* only a name: no holder */
    /* stat lines: a holder whose stat is missing would read as exited */
    put(f->proc, "100/stat",
        "100 (holder) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 "
        "5000 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 "
        "0 0 0 0 0 0 0 0 0 0\n");

    struct vg_proc_opts opts = {.proc_root = f->proc, .dev_dir = f->dev};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_scan(&opts, &t, &err))
        fail_msg("scan: %s", vg_err_msg(&err));
    assert_int_equal(t.n, 1);
    const struct vg_proc *h = &t.procs[0];
    assert_int_equal(h->pid, 100);
    assert_int_equal(h->fd_total, 6);
    assert_int_equal(h->dev_fd_count, 4);
    assert_int_equal(h->ndev_minors, 2);
    assert_int_equal(h->dev_minors[0], 2);
    assert_int_equal(h->dev_minors[1], 3);
    assert_true(h->has_ctl);
    assert_false(h->has_uvm);
    /* three distinct nodes, named as the descriptors name them (in listing order, which on
     * a test tree is the filesystem's) */
    assert_int_equal(h->ndev_paths, 3);
    assert_int_equal(h->dev_nodes_more, 0);
    const char *want[] = {alias, ctl, n3};
    for (size_t i = 0; i < 3; i++) {
        size_t k = 0;
        while (k < 3 && strcmp(h->dev_paths[k], want[i]) != 0)
            k++;
        if (k == 3)
            fail_msg("%s is not among the paths held", want[i]);
    }
    vg_proc_table_release(&t);
    vg_err_release(&err);
}

/* ---- the real /proc --------------------------------------------------------------------- */

/* Fork a child that runs hold(f, arg), reports readiness on a pipe, and waits to be killed. */
static void fx_spawn(struct fx *f, void (*hold)(const struct fx *, const void *), const void *arg)
{
    int ready[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(ready[0]);
        hold(f, arg);
        char c = 'r';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    char c;
    ssize_t n = read(ready[0], &c, 1);
    close(ready[0]);
    f->child = pid;
    if (n != 1)
        fail_msg("the holder child failed to set up");
}

static void must_open(const char *dir, const char *name, int flags)
{
    char p[PATH_MAX];
    if (pj(p, sizeof(p), dir, name) < 0 || open(p, flags) < 0)
        _exit(2);
}

static void hold_real(const struct fx *f, const void *arg)
{
    (void)arg;
    must_open(f->dev, "nvidia0", O_PATH);
    must_open(f->dev, "nvidiactl", O_PATH);
    must_open(f->dev, "nvidia-uvm", O_PATH);
    must_open(f->other, "alias", O_PATH); /* GPU 1 through a node outside DIR */
    must_open(f->other, "gone", O_PATH);  /* GPU 2, deleted below */
    must_open(f->dev, "nvidia3", O_RDONLY);
    must_open(f->dev, "nvidia7", O_RDONLY); /* a stand-in, deleted below: no node any more */
    must_open("/dev", "null", O_RDONLY);
    char p[PATH_MAX];
    int ctl = pj(p, sizeof(p), f->dev, "nvidiactl") < 0 ? -1 : open(p, O_PATH);
    for (int i = 0; i < 50; i++)
        if (ctl < 0 || dup(ctl) < 0)
            _exit(3);
    if (pj(p, sizeof(p), f->other, "gone") < 0 || unlink(p) < 0)
        _exit(4);
    if (pj(p, sizeof(p), f->dev, "nvidia7") < 0 || unlink(p) < 0)
        _exit(5);
}

static int has_path(const struct vg_proc *p, const char *path)
{
    for (size_t i = 0; i < p->ndev_paths; i++)
        if (p->dev_paths[i] && strcmp(p->dev_paths[i], path) == 0)
            return 1;
    return 0;
}

/* Runs in a child: a private mount namespace where /proc/devices declares FX_MAJOR the
 * NVIDIA major, then the checks. Returns 0 or the number of the failed check. */
static int private_check(const struct fx *f, pid_t pid)
{
    char devices[PATH_MAX];
    /* the type is ignored for these; "none" rather than NULL keeps valgrind quiet */
    if (pj(devices, sizeof(devices), f->proc, "devices") < 0 || unshare(CLONE_NEWNS) < 0 ||
        mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount(devices, "/proc/devices", "none", MS_BIND, NULL) < 0)
        return 90;
    int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return 91;
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_read(root, pid, f->dev, &p, &err) != 0)
        return 92;
    char want[PATH_MAX];
    int rc = 0;
    if (!(p.known & VG_PROC_K_FDS))
        rc = 1;
    else if (p.ndev_minors != 1 || p.dev_minors[0] != 3 || p.npath_minors != 3 ||
             p.path_minors[0] != 0 || p.path_minors[1] != 1 || p.path_minors[2] != 2)
        rc = 2; /* the stand-in opened; nvidia0, the alias, the deleted node by O_PATH only */
    else if (p.has_ctl || p.has_uvm)
        rc = 3; /* an O_PATH descriptor of nvidiactl or nvidia-uvm opens nothing */
    else if (p.dev_fd_count != 1 || p.dev_path_count != 5 + 1 + 50)
        rc = 4;
    else if (p.ndev_paths != 6 || p.dev_nodes_more != 0)
        rc = 5; /* six distinct nodes, however many descriptors */
    else if (pj(want, sizeof(want), f->dev, "nvidia0") < 0 || !has_path(&p, want))
        rc = 6;
    else if (pj(want, sizeof(want), f->other, "alias") < 0 || !has_path(&p, want))
        rc = 7;
    else if (pj(want, sizeof(want), f->other, "gone (deleted)") < 0 || !has_path(&p, want))
        rc = 8;
    vg_proc_release(&p);
    vg_err_release(&err);
    close(root);
    return rc;
}

static void test_real_nodes(void **state)
{
    struct fx *f = *state;
    if (!need_root())
        skip();
    put(f->proc, "devices", fx_devices);
    node(f->dev, "nvidia0", FX_MAJOR, 0);
    node(f->dev, "nvidiactl", FX_MAJOR, 255);
    node(f->dev, "nvidia-uvm", FX_UVM_MAJOR, 0);
    node(f->other, "alias", FX_MAJOR, 1);
    node(f->other, "gone", FX_MAJOR, 2);
    put(f->dev, "nvidia3", "");
    put(f->dev, "nvidia7", "");
    fx_spawn(f, hold_real, NULL);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(private_check(f, f->child));
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) != 0)
        fail_msg("check in the private mount namespace failed with code %d", WEXITSTATUS(st));

    /* Here /proc/devices lists no NVIDIA major, so only 195 is one: the nodes of FX_MAJOR
     * count only as nodes of DIR, by their inodes, like the stand-in; the alias and the
     * deleted node outside DIR are nobody's. */
    int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read(root, f->child, f->dev, &p, &err), 0);
    close(root);
    assert_int_equal(p.ndev_minors, 1);
    assert_int_equal(p.dev_minors[0], 3);
    assert_int_equal(p.npath_minors, 1);
    assert_int_equal(p.path_minors[0], 0);
    assert_int_equal(p.dev_fd_count, 1);            /* nvidia3 */
    assert_int_equal(p.dev_path_count, 1 + 52 + 1); /* nvidia0, nvidiactl, uvm by O_PATH */
    assert_false(p.has_ctl);
    assert_false(p.has_uvm);
    assert_int_equal(p.ndev_paths, 4);
    vg_proc_release(&p);
    vg_err_release(&err);
}

static void hold_many(const struct fx *f, const void *arg)
{
    (void)arg;
    char caps[PATH_MAX];
    if (pj(caps, sizeof(caps), f->dev, "nvidia-caps") < 0)
        _exit(2);
    for (int i = 1; i <= FX_MANY; i++) {
        char name[32];
        snprintf(name, sizeof(name), "nvidia-cap%d", i);
        must_open(caps, name, O_RDONLY);
        if (i % 3 == 0)
            must_open(caps, name, O_RDONLY); /* twice: one node still */
    }
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof(name), "nvidia%d", i);
        must_open(f->dev, name, O_RDONLY);
    }
}

static void test_many_nodes(void **state)
{
    struct fx *f = *state;
    char caps[PATH_MAX];
    sub(caps, sizeof(caps), f->dev, "nvidia-caps");
    for (int i = 1; i <= FX_MANY; i++) {
        char name[32];
        snprintf(name, sizeof(name), "nvidia-cap%d", i);
        put(caps, name, "");
    }
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof(name), "nvidia%d", i);
        put(f->dev, name, "");
    }
    fx_spawn(f, hold_many, NULL);
    int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read(root, f->child, f->dev, &p, &err), 0);
    close(root);
    assert_int_equal(p.dev_fd_count, FX_MANY + FX_MANY / 3 + 4);
    assert_int_equal(p.ndev_minors, 4);
    /* the first VG_PROC_NODES_MAX distinct nodes by path, in descriptor order; the rest
     * counted, each once */
    assert_int_equal(p.ndev_paths, VG_PROC_NODES_MAX);
    assert_int_equal(p.dev_nodes_more, FX_MANY + 4 - VG_PROC_NODES_MAX);
    char want[PATH_MAX];
    join(want, sizeof(want), caps, "nvidia-cap1");
    assert_string_equal(p.dev_paths[0], want);
    join(want, sizeof(want), caps, "nvidia-cap3");
    assert_string_equal(p.dev_paths[2], want);
    join(want, sizeof(want), caps, "nvidia-cap4");
    assert_string_equal(p.dev_paths[3], want); /* cap3 is held twice, listed once */
    vg_proc_release(&p);
    vg_err_release(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_match_majors, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_match_default_major, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_match_identity, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_scan_tree_by_number, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_real_nodes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_many_nodes, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
