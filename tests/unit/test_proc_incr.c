/*
 * Unit tests for incremental scans (src/proc/index.c, the carry-over in src/proc/scan.c) and the
 * device-node watch that makes them sound (src/proc/devwatch.c):
 *  - against the real /proc, with children driven over pipes: a primed index carries
 *    non-holders over unread (so a process that opens a node afterwards is found only by the
 *    next full scan, which is why the sampler scans in full after an open), while known
 *    holders are always read again (a close or an exit is seen), and a child forked by a holder
 *    is read as the new process it is; a pid reused between two scans (as root, by steering
 *    ns_last_pid) is read too;
 *  - on a fake procfs tree, where no last pid is known: a pid directory replaced by another
 *    inode is read again, one left alone is carried;
 *  - the loadavg parser, and a failed scan leaving the index unprimed;
 *  - the watch: opens of a node are reported, opens of other files are not, nodes created or
 *    removed rebuild the watches (and a new node's opens are then seen), files in nvidia-caps/
 *    are watched, and a missing directory is a clear error;
 *  - the kernel scan's program kept loaded between scans (as root, where it can load).
 * Every wait is a blocking read on a pipe from a child that answers at once; children die with
 * the test (PR_SET_PDEATHSIG) and are killed and reaped on every path through the fixture.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/proc.h"

#define MAX_KIDS 32

/* A child that obeys one-byte commands: 'o' open the node, 'c' close it, 'm' map it, 'f' fork
 * a grandchild that inherits its descriptors (the answer is the grandchild's pid), 'q' exit. */
struct kid {
    pid_t pid;
    int cmd, ans;
};

struct fx {
    char dir[64];  /* the device directory: nvidia0, nvidiactl, null */
    char node[96]; /* dir/nvidia0 */
    struct kid kids[MAX_KIDS];
    size_t nkids;
    int life[2]; /* grandchildren wait for EOF on life[0]: they exit when the test closes
                  * life[1] or dies, so nothing ever kills them by a pid that may be reused */
};

static void touch(const char *dir, const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/vg-incr-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->node, sizeof(f->node), "%s/nvidia0", f->dir);
    touch(f->dir, "nvidia0");
    touch(f->dir, "nvidiactl");
    touch(f->dir, "null");
    assert_int_equal(pipe2(f->life, O_CLOEXEC), 0);
    *state = f;
    return 0;
}

static int rm_tree(const char *path)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    return system(cmd);
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    for (size_t i = 0; i < f->nkids; i++) {
        if (f->kids[i].pid > 0) {
            kill(f->kids[i].pid, SIGKILL);
            waitpid(f->kids[i].pid, NULL, 0);
        }
        close(f->kids[i].cmd);
        close(f->kids[i].ans);
    }
    close(f->life[0]);
    close(f->life[1]);
    rm_tree(f->dir);
    free(f);
    return 0;
}

static void kid_main(const char *node, int cmd, int ans, const int life[2])
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(life[1]);
    int fd = -1;
    char c;
    while (read(cmd, &c, 1) == 1) {
        int32_t reply = 0;
        if (c == 'o')
            reply = (fd = open(node, O_RDONLY)) >= 0 ? 0 : -1;
        else if (c == 'c')
            reply = close(fd);
        else if (c == 'm') /* map the open node, as CUDA does; the mapping outlives a close */
            reply = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED ? -1 : 0;
        else if (c == 'f') {
            pid_t g = fork();
            if (g == 0) {
                /* no PDEATHSIG: it must outlive its parent, as an orphaned worker does */
                char x;
                while (read(life[0], &x, 1) > 0)
                    ;
                _exit(0);
            }
            reply = g;
        } else
            _exit(0);
        if (write(ans, &reply, sizeof(reply)) != sizeof(reply))
            _exit(1);
    }
    _exit(0);
}

static struct kid *kid_spawn(struct fx *f, bool holding)
{
    assert_true(f->nkids < MAX_KIDS);
    int c[2], a[2];
    assert_int_equal(pipe2(c, O_CLOEXEC), 0);
    assert_int_equal(pipe2(a, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(c[1]);
        close(a[0]);
        kid_main(f->node, c[0], a[1], f->life);
    }
    close(c[0]);
    close(a[1]);
    struct kid *k = &f->kids[f->nkids++];
    *k = (struct kid){.pid = pid, .cmd = c[1], .ans = a[0]};
    if (holding) {
        assert_int_equal(write(k->cmd, "o", 1), 1);
        int32_t r;
        assert_int_equal(read(k->ans, &r, sizeof(r)), (ssize_t)sizeof(r));
        assert_int_equal(r, 0);
    }
    return k;
}

static int32_t kid_do(struct kid *k, char c)
{
    assert_int_equal(write(k->cmd, &c, 1), 1);
    int32_t r;
    assert_int_equal(read(k->ans, &r, sizeof(r)), (ssize_t)sizeof(r));
    return r;
}

static void kid_kill(struct kid *k)
{
    kill(k->pid, SIGKILL);
    assert_int_equal(waitpid(k->pid, NULL, 0), k->pid);
    k->pid = 0; /* reaped: its pid may belong to someone else now */
}

struct scan_result {
    size_t n, n_scanned, n_carried, n_vanished;
    bool incremental;
};

/* One scan of /proc (or root) with the index; whether each of pids was found as a holder. */
static struct scan_result scan(const char *root, const char *dev, struct vg_proc_index *idx,
                               bool incremental, const pid_t *pids, bool *found, size_t npids)
{
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    struct vg_proc_opts o = {
        .proc_root = root,
        .dev_dir = dev,
        .index = idx,
        .incremental = incremental,
    };
    if (vg_proc_scan(&o, &t, &err) != 0)
        fail_msg("scan: %s", vg_err_msg(&err));
    for (size_t i = 0; i < npids; i++) {
        const struct vg_proc *p = vg_proc_table_find(&t, pids[i]);
        found[i] = p && p->dev_fd_count > 0;
    }
    struct scan_result r = {t.n, t.n_scanned, t.n_carried, t.n_vanished, t.incremental};
    vg_proc_table_release(&t);
    return r;
}

/* The inode number of /proc/PID, as the scan's listing sees it. */
static uint64_t pid_ino(pid_t pid)
{
    char p[32];
    snprintf(p, sizeof(p), "/proc/%d", (int)pid);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return st.st_ino;
}

static void test_carry_and_reread(void **state)
{
    struct fx *f = *state;
    struct kid *h = kid_spawn(f, true);
    struct kid *n = kid_spawn(f, false);
    pid_t pids[3] = {h->pid, n->pid, 0};
    bool found[3];
    struct vg_proc_index *idx;
    assert_int_equal(vg_proc_index_new(&idx), 0);
    assert_false(vg_proc_index_primed(idx));

    /* Asked for incremental but unprimed: a full scan, which primes the index. */
    struct scan_result r = scan(NULL, f->dir, idx, true, pids, found, 2);
    assert_false(r.incremental);
    assert_int_equal(r.n_carried, 0);
    assert_true(found[0]);
    assert_false(found[1]);
    assert_true(vg_proc_index_primed(idx));
    /* every process listed and still there is indexed (others exit meanwhile on a busy host) */
    assert_int_equal(vg_proc_index_size(idx), r.n_scanned - r.n_vanished);

    /* Incremental: the holder is read again, most others are carried over. */
    r = scan(NULL, f->dir, idx, true, pids, found, 2);
    assert_true(r.incremental);
    assert_true(r.n_carried > 0 && r.n_carried < r.n_scanned);
    assert_true(found[0]);
    assert_false(found[1]);

    /* The non-holder opens the node: carried over unread, so an incremental scan cannot see
     * it (the caller's watch must ask for a full scan), and a full scan does. Unless memory
     * pressure dropped its /proc dentry meanwhile: the directory then has a new inode number
     * and the scan reads it, which is also correct. */
    uint64_t ino = pid_ino(n->pid);
    assert_int_equal(kid_do(n, 'o'), 0);
    r = scan(NULL, f->dir, idx, true, pids, found, 2);
    assert_true(r.incremental);
    assert_true(!found[1] || pid_ino(n->pid) != ino);
    r = scan(NULL, f->dir, idx, false, pids, found, 2);
    assert_false(r.incremental);
    assert_true(found[0] && found[1]);
    /* Now a known holder: read by every incremental scan. */
    r = scan(NULL, f->dir, idx, true, pids, found, 2);
    assert_true(r.incremental);
    assert_true(found[0] && found[1]);

    /* A holder that closes, and one that exits, are seen at once. */
    assert_int_equal(kid_do(h, 'c'), 0);
    r = scan(NULL, f->dir, idx, true, pids, found, 2);
    assert_false(found[0]);
    assert_true(found[1]);

    /* A child forked by a holder inherits the descriptor without opening anything: it is a
     * new pid, read in full. */
    pid_t g = kid_do(n, 'f');
    assert_true(g > 0);
    pids[2] = g;
    r = scan(NULL, f->dir, idx, true, pids, found, 3);
    assert_true(r.incremental);
    assert_true(found[1] && found[2]);

    kid_kill(n);
    r = scan(NULL, f->dir, idx, true, pids, found, 3);
    assert_false(found[1]);
    assert_true(found[2]); /* the orphan still holds it */
    vg_proc_index_free(idx);
}

/* A pid reused between two scans, by a process that inherited a node from its parent: without
 * an open, only the pid's newness shows it. Needs root to steer ns_last_pid; other processes
 * may take the pid first on a busy host, so it tries a few times and skips if it never wins. */
static void test_reused_pid(void **state)
{
    struct fx *f = *state;
    if (geteuid() != 0)
        skip();
    struct kid *h = kid_spawn(f, true);
    struct vg_proc_index *idx;
    assert_int_equal(vg_proc_index_new(&idx), 0);
    bool won = false;
    for (int attempt = 0; attempt < 20 && !won; attempt++) {
        struct kid *n = kid_spawn(f, false);
        pid_t p = n->pid;
        bool found[1];
        scan(NULL, f->dir, idx, false, &p, found, 1);
        struct scan_result r = scan(NULL, f->dir, idx, true, &p, found, 1);
        assert_true(r.incremental);
        assert_false(found[0]);
        kid_kill(n);
        int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            break;
        char buf[16];
        int len = snprintf(buf, sizeof(buf), "%d", (int)p - 1);
        bool wrote = write(fd, buf, (size_t)len) == len;
        close(fd);
        if (!wrote)
            break;
        pid_t g = kid_do(h, 'f');
        assert_true(g > 0);
        if (g != p) {
            if (f->nkids == MAX_KIDS)
                break;
            continue;
        }
        won = true;
        r = scan(NULL, f->dir, idx, true, &p, found, 1);
        assert_true(r.incremental);
        assert_true(found[0]);
    }
    vg_proc_index_free(idx);
    if (!won)
        skip();
}

/* ---- a fake procfs tree: no loadavg, so only the directory inode tells a new process ---- */

static void fake_proc(const char *root, int pid, const char *target)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%d", root, pid);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/%d/fd", root, pid);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/%d/fd/3", root, pid);
    assert_int_equal(symlink(target, p), 0);
    snprintf(p, sizeof(p), "%s/%d/stat", root, pid);
    char stat[256];
    snprintf(stat, sizeof(stat), "%d (python) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 "
             "100 0 0\n", pid, pid, pid);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, stat, strlen(stat)), (ssize_t)strlen(stat));
    close(fd);
}

static void test_fake_tree_inode(void **state)
{
    struct fx *f = *state;
    char root[128];
    snprintf(root, sizeof(root), "%s/proc", f->dir);
    assert_int_equal(mkdir(root, 0755), 0);
    fake_proc(root, 100, f->node);
    fake_proc(root, 200, "/dev/null");
    fake_proc(root, 300, "/dev/null");
    pid_t pids[3] = {100, 200, 300};
    bool found[3];
    struct vg_proc_index *idx;
    assert_int_equal(vg_proc_index_new(&idx), 0);
    struct scan_result r = scan(root, f->dir, idx, true, pids, found, 3);
    assert_false(r.incremental);
    assert_true(found[0] && !found[1] && !found[2]);

    /* 200 is replaced by a new process (a new directory, so a new inode: the old one is moved
     * away first so that its inode number cannot be reused) holding the node; 300 changes in
     * place, which a real process cannot do without an open. */
    char from[PATH_MAX], to[PATH_MAX];
    snprintf(from, sizeof(from), "%s/200", root);
    snprintf(to, sizeof(to), "%s/old200", root);
    assert_int_equal(rename(from, to), 0);
    fake_proc(root, 200, f->node);
    assert_int_equal(rm_tree(to), 0);
    snprintf(from, sizeof(from), "%s/300/fd/3", root);
    assert_int_equal(unlink(from), 0);
    assert_int_equal(symlink(f->node, from), 0);

    r = scan(root, f->dir, idx, true, pids, found, 3);
    assert_true(r.incremental);
    assert_int_equal(r.n_scanned, 3);
    assert_int_equal(r.n_carried, 1);
    assert_true(found[0] && found[1]);
    assert_false(found[2]);
    r = scan(root, f->dir, idx, false, pids, found, 3);
    assert_true(found[0] && found[1] && found[2]);
    vg_proc_index_free(idx);
}

static void test_failed_scan_unprimes(void **state)
{
    struct fx *f = *state;
    struct vg_proc_index *idx;
    assert_int_equal(vg_proc_index_new(&idx), 0);
    bool found[1];
    pid_t p = getpid();
    scan(NULL, f->dir, idx, false, &p, found, 1);
    assert_true(vg_proc_index_primed(idx));
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    struct vg_proc_opts o = {.proc_root = "/nonexistent/proc", .index = idx, .incremental = true};
    assert_int_equal(vg_proc_scan(&o, &t, &err), -ENOENT);
    vg_err_release(&err);
    assert_false(vg_proc_index_primed(idx));
    assert_int_equal(vg_proc_index_size(idx), 0);
    /* and the next scan is a full one */
    struct scan_result r = scan(NULL, f->dir, idx, true, &p, found, 1);
    assert_false(r.incremental);
    vg_proc_index_free(idx);
}

static void test_loadavg(void **state)
{
    (void)state;
    pid_t p = 0;
    const char *ok = "0.35 1.40 2.03 2/80 19215\n";
    assert_int_equal(vg_proc_parse_loadavg_pid(ok, strlen(ok), &p), 0);
    assert_int_equal(p, 19215);
    const char *nonl = "0.00 0.00 0.00 1/1 7";
    assert_int_equal(vg_proc_parse_loadavg_pid(nonl, strlen(nonl), &p), 0);
    assert_int_equal(p, 7);
    static const char *const bad[] = {
        "", "0.35 1.40 2.03 2/80", "0.35 1.40 2.03 2/80 \n", "0.35 1.40 2.03 2/80 x1\n",
        "0.35 1.40 2.03 2/80 12x\n", "0.35 1.40 2.03 2/80 99999999999\n", "garbage",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = 42;
        assert_int_equal(vg_proc_parse_loadavg_pid(bad[i], strlen(bad[i]), &p), -EINVAL);
        assert_int_equal(p, 42);
    }
}

/* ---- the device-node watch ------------------------------------------------------------- */

static struct vg_proc_devwatch *watch_new(const char *dir, unsigned flags)
{
    struct vg_proc_devwatch *w = NULL;
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_devwatch_new(dir, flags, &w, &err))
        fail_msg("devwatch: %s", vg_err_msg(&err));
    return w;
}

static int poll_(struct vg_proc_devwatch *w)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_proc_devwatch_poll(w, &err);
    if (rc < 0)
        fail_msg("poll: %s", vg_err_msg(&err));
    return rc;
}

static void open_close(const char *dir, const char *name)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
}

static void test_devwatch(void **state)
{
    struct fx *f = *state;
    struct vg_proc_devwatch *w = watch_new(f->dir, 0);
    assert_non_null(vg_proc_devwatch_unnamed(w));
    assert_int_equal(vg_proc_devwatch_nodes(w), 2); /* nvidia0, nvidiactl */
    assert_int_equal(poll_(w), 0);

    /* other files in the directory are not nodes */
    open_close(f->dir, "null");
    assert_int_equal(poll_(w), 0);

    open_close(f->dir, "nvidia0");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_OPENED);
    assert_int_equal(poll_(w), 0); /* drained */
    open_close(f->dir, "nvidiactl");
    open_close(f->dir, "nvidiactl");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_OPENED);

    /* a new node: reported, and watched from then on */
    touch(f->dir, "nvidia1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_CHANGED);
    assert_int_equal(vg_proc_devwatch_nodes(w), 3);
    assert_int_equal(poll_(w), 0);
    open_close(f->dir, "nvidia1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_OPENED);

    /* nvidia-caps/: its files are watched through the directory; listing it is not an open */
    char caps[PATH_MAX];
    snprintf(caps, sizeof(caps), "%s/nvidia-caps", f->dir);
    assert_int_equal(mkdir(caps, 0755), 0);
    touch(caps, "nvidia-cap1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_CHANGED);
    assert_int_equal(poll_(w), 0);
    int dfd = open(caps, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    close(dfd);
    assert_int_equal(poll_(w), 0);
    open_close(caps, "nvidia-cap1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_OPENED);
    touch(caps, "nvidia-cap2"); /* created by an open: both */
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_CHANGED | VG_PROC_DEVWATCH_OPENED);

    /* a node removed (a driver unloaded) */
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/nvidia1", f->dir);
    assert_int_equal(unlink(p), 0);
    assert_true(poll_(w) & VG_PROC_DEVWATCH_CHANGED);
    assert_int_equal(poll_(w), 0);
    /* other files coming and going in the directory do not matter */
    touch(f->dir, "ttyS9");
    assert_int_equal(poll_(w), 0);
    vg_proc_devwatch_free(w);

    /* no such directory: a clear error */
    struct vg_err err = VG_ERR_INIT;
    struct vg_proc_devwatch *w2 = NULL;
    snprintf(p, sizeof(p), "%s/absent", f->dir);
    assert_true(vg_proc_devwatch_new(p, 0, &w2, &err) < 0);
    assert_null(w2);
    assert_non_null(strstr(vg_err_msg(&err), "absent"));
    vg_err_release(&err);
    vg_proc_devwatch_free(NULL);
}

/* open_in_child: a child opens DIR/NAME and exits; its pid. */
static pid_t open_in_child(const char *dir, const char *name)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        _exit(open(p, O_RDONLY | O_CLOEXEC) >= 0 ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return pid;
}

/* With fanotify (CAP_SYS_ADMIN) the watch names who opened a node. */
static void test_devwatch_named(void **state)
{
    struct fx *f = *state;
    struct vg_proc_devwatch *w = watch_new(f->dir, VG_PROC_DEVWATCH_NAME_OPENERS);
    const char *why = vg_proc_devwatch_unnamed(w);
    if (why) {
        /* unprivileged: said, and opens are still seen (unnamed) */
        assert_non_null(strstr(why, "CAP_SYS_ADMIN"));
        open_close(f->dir, "nvidia0");
        assert_int_equal(poll_(w), VG_PROC_DEVWATCH_OPENED);
        vg_proc_devwatch_free(w);
        skip();
    }
    assert_int_equal(poll_(w), 0);
    size_t n;
    const pid_t *v;

    /* two children and this process, one of them twice: each named once, sorted */
    pid_t c1 = open_in_child(f->dir, "nvidia0");
    pid_t c2 = open_in_child(f->dir, "nvidiactl");
    open_close(f->dir, "nvidia0");
    open_close(f->dir, "nvidia0");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_NAMED);
    v = vg_proc_devwatch_openers(w, &n);
    pid_t want[3] = {c1, c2, getpid()};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (want[j] < want[i]) {
                pid_t t = want[i];
                want[i] = want[j];
                want[j] = t;
            }
    assert_int_equal(n, 3);
    assert_memory_equal(v, want, sizeof(want));
    assert_int_equal(poll_(w), 0); /* drained, and the list with it */
    v = vg_proc_devwatch_openers(w, &n);
    assert_int_equal(n, 0);

    /* other files are not nodes; listing nvidia-caps/ is not an open; its files are */
    open_close(f->dir, "null");
    char caps[PATH_MAX];
    snprintf(caps, sizeof(caps), "%s/nvidia-caps", f->dir);
    assert_int_equal(mkdir(caps, 0755), 0);
    touch(caps, "nvidia-cap1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_CHANGED);
    int dfd = open(caps, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    close(dfd);
    assert_int_equal(poll_(w), 0);
    pid_t c3 = open_in_child(caps, "nvidia-cap1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_NAMED);
    v = vg_proc_devwatch_openers(w, &n);
    assert_int_equal(n, 1);
    assert_int_equal(v[0], c3);

    /* a node created after the watch: rebuilt (both instances) and named from then on */
    touch(f->dir, "nvidia1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_CHANGED);
    pid_t c4 = open_in_child(f->dir, "nvidia1");
    assert_int_equal(poll_(w), VG_PROC_DEVWATCH_NAMED);
    v = vg_proc_devwatch_openers(w, &n);
    assert_int_equal(n, 1);
    assert_int_equal(v[0], c4);
    assert_null(vg_proc_devwatch_unnamed(w));
    vg_proc_devwatch_free(w);
}

/* pid's count of node descriptors in one scan with idx (0: not a holder, or not read). */
static unsigned dev_fds(const char *dev, struct vg_proc_index *idx, bool incremental,
                        const pid_t *rewalk, size_t nrewalk, pid_t pid, bool *was_incremental)
{
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    struct vg_proc_opts o = {.dev_dir = dev,
                             .index = idx,
                             .incremental = incremental,
                             .rewalk = rewalk,
                             .nrewalk = nrewalk,
                             .scan = VG_PROC_SCAN_PROC};
    if (vg_proc_scan(&o, &t, &err) != 0)
        fail_msg("scan: %s", vg_err_msg(&err));
    const struct vg_proc *p = vg_proc_table_find(&t, pid);
    unsigned n = p ? p->dev_fd_count : 0;
    *was_incremental = t.incremental;
    vg_proc_table_release(&t);
    return n;
}

/* pid's descriptors and mappings of nodes in one incremental or full scan with idx. */
static void node_counts(const char *dev, struct vg_proc_index *idx, bool incremental, pid_t pid,
                        unsigned *fds, unsigned *maps, bool *was_incremental)
{
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    struct vg_proc_opts o = {
        .dev_dir = dev, .index = idx, .incremental = incremental, .scan = VG_PROC_SCAN_PROC};
    if (vg_proc_scan(&o, &t, &err) != 0)
        fail_msg("scan: %s", vg_err_msg(&err));
    const struct vg_proc *p = vg_proc_table_find(&t, pid);
    *fds = p ? p->dev_fd_count : 0;
    *maps = p ? p->dev_map_count : 0;
    *was_incremental = t.incremental;
    vg_proc_table_release(&t);
}

/* A known holder whose maps held nothing beyond its descriptors has them skipped by an
 * incremental scan; once it closes the descriptor and keeps the mapping (no open for the watch
 * to see), the number it was read by is no node any more, its maps are read, and it is still a
 * holder: by mapping. */
static void test_holder_closes_keeps_map(void **state)
{
    struct fx *f = *state;
    struct vg_proc_index *idx = NULL;
    assert_int_equal(vg_proc_index_new(&idx), 0);
    struct kid *a = kid_spawn(f, true);
    assert_int_equal(kid_do(a, 'm'), 0);
    unsigned fds, maps;
    bool incr;
    node_counts(f->dir, idx, true, a->pid, &fds, &maps, &incr);
    assert_false(incr);
    assert_int_equal(fds, 1);
    assert_int_equal(maps, 1); /* a full read: the mapping is seen, of the same node */
    node_counts(f->dir, idx, true, a->pid, &fds, &maps, &incr);
    assert_true(incr);
    assert_int_equal(fds, 1);
    assert_int_equal(maps, 0); /* skipped: nothing beyond the descriptor last time */
    assert_int_equal(kid_do(a, 'c'), 0);
    node_counts(f->dir, idx, true, a->pid, &fds, &maps, &incr);
    assert_true(incr);
    assert_int_equal(fds, 0);
    assert_int_equal(maps, 1);
    node_counts(f->dir, idx, true, a->pid, &fds, &maps, &incr); /* and again, still */
    assert_true(incr);
    assert_int_equal(maps, 1);
    vg_proc_index_free(idx);
}

/* An incremental scan reads a known holder by the node descriptors the index kept (not its
 * whole table): a close is seen, a node descriptor gained without an open waits for the next
 * full scan, and a holder named in rewalk (fanotify named it as an opener) is walked in full. */
static void test_holder_by_number(void **state)
{
    struct fx *f = *state;
    struct vg_proc_index *idx = NULL;
    assert_int_equal(vg_proc_index_new(&idx), 0);
    struct kid *a = kid_spawn(f, true);
    bool incr;
    assert_int_equal(dev_fds(f->dir, idx, true, NULL, 0, a->pid, &incr), 1);
    assert_false(incr); /* the first scan primes the index */
    assert_int_equal(kid_do(a, 'o'), 0); /* a second descriptor of the node */
    /* read by the number the index kept: the new descriptor is not counted yet */
    assert_int_equal(dev_fds(f->dir, idx, true, NULL, 0, a->pid, &incr), 1);
    assert_true(incr);
    /* named as an opener: its whole table is read */
    assert_int_equal(dev_fds(f->dir, idx, true, &a->pid, 1, a->pid, &incr), 2);
    assert_true(incr);
    /* both numbers kept now: closing the newer one is seen by number */
    assert_int_equal(kid_do(a, 'c'), 0);
    assert_int_equal(dev_fds(f->dir, idx, true, NULL, 0, a->pid, &incr), 1);
    assert_true(incr);
    assert_int_equal(kid_do(a, 'o'), 0);
    assert_int_equal(dev_fds(f->dir, idx, false, NULL, 0, a->pid, &incr), 2); /* full: all */
    assert_false(incr);
    /* gone: not read by a number of a pid that no longer exists */
    pid_t gone = a->pid;
    kid_kill(a);
    assert_int_equal(dev_fds(f->dir, idx, true, NULL, 0, gone, &incr), 0);
    vg_proc_index_free(idx);
}

/* One scan with the kernel's holder scan (mode) and k; whether pid was found as a holder. */
static bool kscan_once(const char *dev, enum vg_proc_scan_mode mode, struct vg_proc_kprog *k,
                       pid_t pid, bool *kernel, size_t *listed, struct vg_err *err)
{
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_proc_opts o = {.dev_dir = dev, .scan = mode, .kprog = k};
    if (vg_proc_scan(&o, &t, err) != 0)
        return false;
    const struct vg_proc *p = vg_proc_table_find(&t, pid);
    bool found = p && p->dev_fd_count > 0;
    *kernel = t.kernel_scan;
    *listed = t.n_scanned;
    vg_proc_table_release(&t);
    return found;
}

/* valgrind does not model bpf(2): libbpf's calls read as uninitialised memory, so the tests
 * that load the kernel scan skip under it (tests/reliability/valgrind sets VG_VALGRIND). */
static void skip_under_valgrind(void)
{
    if (getenv("VG_VALGRIND")) {
        print_message("skipped under valgrind (it does not model bpf(2))\n");
        skip();
    }
}

/* The kernel scan's program kept loaded between scans (watch, serve, top): loaded once, used
 * again while the nodes stay the same, loaded again when --dev gains a node; and with it
 * loaded, AUTO uses it on a host of any size. Needs what the kernel scan needs (root, BTF,
 * libbpf.so.1): skipped, saying why, where it cannot run. */
static void test_kprog_kept(void **state)
{
    struct fx *f = *state;
    skip_under_valgrind();
    struct kid *a = kid_spawn(f, true);
    struct vg_proc_kprog *k = NULL;
    assert_int_equal(vg_proc_kprog_new(&k), 0);
    assert_false(vg_proc_kprog_loaded(k));
    struct vg_err err = VG_ERR_INIT;
    bool kernel = false;
    size_t listed = 0;
    bool found = kscan_once(f->dir, VG_PROC_SCAN_KERNEL, k, a->pid, &kernel, &listed, &err);
    if (err.code) {
        print_message("kernel scan cannot run here: %s\n", vg_err_msg(&err));
        vg_err_release(&err);
        vg_proc_kprog_free(k);
        skip();
    }
    assert_true(found && kernel);
    assert_int_equal(vg_proc_kprog_loads(k), 1);
    assert_true(vg_proc_kprog_loaded(k));

    /* kept: a close and a reopen are seen, without loading again */
    assert_true(kscan_once(f->dir, VG_PROC_SCAN_KERNEL, k, a->pid, &kernel, &listed, &err));
    assert_int_equal(kid_do(a, 'c'), 0);
    assert_false(kscan_once(f->dir, VG_PROC_SCAN_KERNEL, k, a->pid, &kernel, &listed, &err));
    assert_int_equal(kid_do(a, 'o'), 0);
    assert_true(kscan_once(f->dir, VG_PROC_SCAN_KERNEL, k, a->pid, &kernel, &listed, &err));
    assert_int_equal(vg_proc_kprog_loads(k), 1);
    assert_int_equal(err.code, 0);

    /* AUTO with the program loaded: the kernel scan, whatever the host's size */
    assert_true(kscan_once(f->dir, VG_PROC_SCAN_AUTO, k, a->pid, &kernel, &listed, &err));
    assert_true(kernel);
    assert_int_equal(vg_proc_kprog_loads(k), 1);

    /* a node added to --dev changes the program's settings: loaded again, once */
    touch(f->dir, "nvidia1");
    assert_true(kscan_once(f->dir, VG_PROC_SCAN_KERNEL, k, a->pid, &kernel, &listed, &err));
    assert_true(kscan_once(f->dir, VG_PROC_SCAN_KERNEL, k, a->pid, &kernel, &listed, &err));
    assert_int_equal(vg_proc_kprog_loads(k), 2);
    assert_int_equal(err.code, 0);
    vg_proc_kprog_free(k);

    /* AUTO without a loaded program on a host below the threshold: /proc, as before */
    assert_int_equal(vg_proc_kprog_new(&k), 0);
    assert_true(kscan_once(f->dir, VG_PROC_SCAN_AUTO, k, a->pid, &kernel, &listed, &err));
    if (listed < VG_PROC_KSCAN_MIN_PROCS) {
        assert_false(kernel);
        assert_int_equal(vg_proc_kprog_loads(k), 0);
    }
    vg_proc_kprog_free(k);
    vg_err_release(&err);
}

/* Make every bpf(2) of this process fail with ENOMEM, as the kernel does when it has no memory
 * for a program or a map (or, before 5.11, past the locked-memory limit). */
static int bpf_enomem(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_bpf, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* The forked half of test_kernel_enomem: 0 when all holds, 77 when the kernel scan cannot run
 * here, else the number of the check that failed. */
static int kernel_enomem_child(const char *dir, pid_t pid)
{
    struct vg_proc_kprog *k = NULL, *fresh = NULL;
    struct vg_err err = VG_ERR_INIT;
    bool kernel = false;
    size_t listed = 0;
    if (vg_proc_kprog_new(&k) != 0 || vg_proc_kprog_new(&fresh) != 0)
        return 1;
    if (!kscan_once(dir, VG_PROC_SCAN_KERNEL, k, pid, &kernel, &listed, &err) || err.code)
        return 77;
    if (bpf_enomem() != 0)
        return 2;
    /* AUTO with the program loaded: the iterator cannot be created; /proc finds the holder */
    if (!kscan_once(dir, VG_PROC_SCAN_AUTO, k, pid, &kernel, &listed, &err) || kernel || err.code)
        return 3;
    /* asked for: one error that names the kernel's memory, not this process's */
    if (kscan_once(dir, VG_PROC_SCAN_KERNEL, k, pid, &kernel, &listed, &err) ||
        err.code == 0 || err.code == -ENOMEM || !strstr(vg_err_msg(&err), "kernel"))
        return 4;
    vg_err_release(&err);
    /* a program that cannot load at all fails the asked-for scan, never as our ENOMEM */
    if (kscan_once(dir, VG_PROC_SCAN_KERNEL, fresh, pid, &kernel, &listed, &err) ||
        err.code == 0 || err.code == -ENOMEM)
        return 5;
    vg_err_release(&err);
    /* and the kept program is still there for when the kernel has memory again */
    if (!vg_proc_kprog_loaded(k) || vg_proc_kprog_loads(k) != 1)
        return 6;
    vg_proc_kprog_free(k);
    vg_proc_kprog_free(fresh);
    return 0;
}

/* The kernel answering bpf(2) with ENOMEM is a reason to read /proc, not this process running
 * out of memory: the scan used to fail whole ("out of memory"). The refusal is made real with a
 * seccomp filter in a forked child. Needs what the kernel scan needs; skipped where it cannot
 * run. */
static void test_kernel_enomem(void **state)
{
    struct fx *f = *state;
    skip_under_valgrind();
    struct kid *a = kid_spawn(f, true);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(kernel_enomem_child(f->dir, a->pid));
    int st = 0;
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        print_message("the kernel scan cannot run here\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_carry_and_reread, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reused_pid, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fake_tree_inode, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_failed_scan_unprimes, fx_setup, fx_teardown),
        cmocka_unit_test(test_loadavg),
        cmocka_unit_test_setup_teardown(test_devwatch, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_devwatch_named, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_kprog_kept, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_holder_by_number, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_holder_closes_keeps_map, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_kernel_enomem, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
