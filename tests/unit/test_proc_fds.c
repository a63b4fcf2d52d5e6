/*
 * Unit tests for phase one of the /proc scan (src/proc/fds.c) against the real /proc: children
 * with exactly known descriptor tables, dense, with small holes, with holes too wide to probe
 * past, very sparse and large, so that both ways of reading fd/ (probing descriptor numbers up
 * to the count procfs reports as the directory's size, and listing the directory) and the
 * switch from one to the other find every descriptor and every device node, no more; a
 * defunct leader whose descriptors are read through a live thread; and children that hold
 * nodes by memory mapping only, their descriptors closed (maps.c).
 */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/proc.h"

/* Descriptors the tests place stay below FX_HIGH; the child needs FX_HIGH + 1024 of them. */
#define FX_HIGH 1100
#define FX_NOFILE (FX_HIGH + 1024 + 16)

struct fx {
    char dir[64];
    pid_t child;
    int proc_fd;
};

static int fx_setup(void **state)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < FX_NOFILE && rl.rlim_max >= FX_NOFILE) {
        rl.rlim_cur = FX_NOFILE;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/vg-fds-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    static const char *nodes[] = {"nvidia0", "nvidia1", "nvidia5", "nvidiactl", "nvidia-uvm"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", f->dir, nodes[i]);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    f->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->proc_fd >= 0);
    *state = f;
    return 0;
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
    static const char *nodes[] = {"nvidia0", "nvidia1", "nvidia5", "nvidiactl", "nvidia-uvm"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", f->dir, nodes[i]);
        unlink(p);
    }
    rmdir(f->dir);
    close(f->proc_fd);
    free(f);
    return 0;
}

/* What a child holds: descriptor number -> node name under the fixture's dir, or NULL for
 * /dev/null. */
struct slot {
    int fd;
    const char *node;
};

/* Fork a child whose descriptor table is exactly `slots` (nothing else, not even stdio unless
 * listed), stopped with SIGSTOP so that it cannot change while it is read. */
static void fx_spawn(struct fx *f, const struct slot *slots, size_t n)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Open everything above FX_HIGH first, close everything below, then move into place. */
        int from[1024];
        if (n > 1024)
            _exit(120);
        for (size_t i = 0; i < n; i++) {
            char p[PATH_MAX];
            if (slots[i].node)
                snprintf(p, sizeof(p), "%s/%s", f->dir, slots[i].node);
            else
                snprintf(p, sizeof(p), "/dev/null");
            int fd = open(p, O_RDONLY);
            if (fd < 0)
                _exit(121);
            from[i] = fcntl(fd, F_DUPFD, FX_HIGH + (int)i);
            if (from[i] < 0)
                _exit(122);
            close(fd);
        }
        if (close_range(0, FX_HIGH - 1, 0) < 0)
            _exit(123);
        for (size_t i = 0; i < n; i++)
            if (dup2(from[i], slots[i].fd) < 0)
                _exit(124);
        if (close_range(FX_HIGH, ~0u, 0) < 0)
            _exit(125);
        raise(SIGSTOP);
        for (;;)
            pause();
    }
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    if (!WIFSTOPPED(st))
        fail_msg("child did not set up its descriptors (status %#x)", st);
    f->child = pid;
}

/* The child's descriptors as a listing of /proc/PID/fd sees them. */
static unsigned list_count(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
    int d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(d >= 0);
    unsigned n = 0;
    static char buf[8192];
    ssize_t r;
    while ((r = getdents64(d, buf, sizeof(buf))) > 0)
        for (ssize_t off = 0; off < r;) {
            const struct dirent64 *e = (const struct dirent64 *)(const void *)(buf + off);
            off += e->d_reclen;
            if (e->d_name[0] != '.')
                n++;
        }
    close(d);
    return n;
}

static void check(struct fx *f, const struct slot *slots, size_t n, unsigned ndev,
                  const unsigned *minors, size_t nminors, bool ctl, bool uvm)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < FX_NOFILE) {
        print_message("RLIMIT_NOFILE below %d: skipped\n", FX_NOFILE);
        skip();
    }
    fx_spawn(f, slots, n);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_read(f->proc_fd, f->child, f->dir, &p, &err))
        fail_msg("read: %s", vg_err_msg(&err));
    assert_true(p.known & VG_PROC_K_FDS);
    assert_int_equal(p.fd_total, n);
    assert_int_equal(p.fd_total, list_count(f->child));
    assert_int_equal(p.dev_fd_count, ndev);
    assert_int_equal(p.ndev_minors, nminors);
    for (size_t i = 0; i < nminors; i++)
        assert_int_equal(p.dev_minors[i], minors[i]);
    assert_int_equal(p.has_ctl, ctl);
    assert_int_equal(p.has_uvm, uvm);
    vg_proc_release(&p);
    vg_err_release(&err);
    fx_stop_child(f);
}

static void test_counted(void **state)
{
    (void)state;
    struct stat st;
    assert_int_equal(stat("/proc/self/fd", &st), 0);
    print_message("this kernel %s the descriptor count as fd/'s size (%lld)\n",
                  st.st_size > 0 ? "reports" : "does not report", (long long)st.st_size);
}

/* 0..63 with the device node last: probing reaches it without a listing. */
static void test_dense(void **state)
{
    struct slot s[64];
    for (int i = 0; i < 64; i++)
        s[i] = (struct slot){i, NULL};
    s[61].node = "nvidiactl";
    s[62].node = "nvidia-uvm";
    s[63].node = "nvidia5";
    unsigned m[] = {5};
    check(*state, s, 64, 3, m, 1, true, true);
}

/* A few holes, well within what probing tries before listing. */
static void test_small_holes(void **state)
{
    struct slot s[] = {{0, NULL},      {1, NULL},  {2, NULL},       {3, NULL},      {7, NULL},
                       {8, "nvidia0"}, {10, NULL}, {13, "nvidia1"}, {14, "nvidia0"}};
    unsigned m[] = {0, 1};
    check(*state, s, sizeof(s) / sizeof(s[0]), 3, m, 2, false, false);
}

/* bash's shape: 0-2 and 255. Probing gives up and the listing finds the rest. */
static void test_wide_hole(void **state)
{
    struct slot s[] = {{0, NULL}, {1, NULL}, {2, NULL}, {255, "nvidia1"}};
    unsigned m[] = {1};
    check(*state, s, 4, 1, m, 1, false, false);
}

/* The only descriptors lie beyond the probe: nothing at 0. */
static void test_nothing_low(void **state)
{
    struct slot s[] = {{40, "nvidiactl"}, {41, "nvidia5"}, {1000, "nvidia0"}};
    unsigned m[] = {0, 5};
    check(*state, s, 3, 3, m, 2, true, false);
}

/* Holes spread all along: misses add up to the limit mid-table, and the listing must pick up
 * exactly where probing stopped (no descriptor read twice, none skipped). */
static void test_spread_holes(void **state)
{
    struct slot s[200];
    size_t n = 0;
    for (int fd = 0; fd < 600 && n < 200; fd += 3)
        s[n++] = (struct slot){fd, NULL};
    s[5].node = "nvidia0";     /* fd 15: found while probing */
    s[n - 1].node = "nvidia5"; /* the last: found by the listing */
    s[n / 2].node = "nvidia-uvm";
    unsigned m[] = {0, 5};
    check(*state, s, n, 3, m, 2, false, true);
}

/* Larger than one listing buffer, dense. */
static void test_large(void **state)
{
    static struct slot s[1000];
    for (int i = 0; i < 1000; i++)
        s[i] = (struct slot){i, NULL};
    s[999].node = "nvidia1";
    s[500].node = "nvidia1";
    unsigned m[] = {1};
    check(*state, s, 1000, 2, m, 1, false, false);
}

/* An empty table: neither way finds anything, and the process is not a holder. */
static void test_empty(void **state)
{
    check(*state, NULL, 0, 0, NULL, 0, false, false);
}

static void *fx_sleeper(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* Wait (bounded, 5 s) until pid shows as a zombie in /proc. */
static bool fx_wait_zombie(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 500; i++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            return false;
        buf[n] = '\0';
        char *r = strrchr(buf, ')');
        if (r && r[1] == ' ' && r[2] == 'Z')
            return true;
        usleep(10000);
    }
    return false;
}

/* A process of its own whose leader exited while a thread holds node: open it, start the
 * thread, end the leader. Never returns. */
static void fx_zombie_leader(const char *node)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (open(node, O_RDONLY) < 0)
        _exit(121);
    pthread_t t;
    if (pthread_create(&t, NULL, fx_sleeper, NULL) != 0)
        _exit(122);
    pthread_exit(NULL);
}

/* A leader that exited while another thread runs: its own fd/ is empty, and the descriptors
 * (the device node among them) are read through the live thread's task entry. */
static void test_zombie_leader(void **state)
{
    struct fx *f = *state;
    char node[PATH_MAX];
    snprintf(node, sizeof(node), "%s/nvidia5", f->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        fx_zombie_leader(node);
    f->child = pid;
    assert_true(fx_wait_zombie(pid));
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_read(f->proc_fd, pid, f->dir, &p, &err))
        fail_msg("read: %s", vg_err_msg(&err));
    assert_true(p.known & VG_PROC_K_FDS);
    assert_true(p.fd_total >= 4);
    assert_int_equal(p.dev_fd_count, 1);
    assert_int_equal(p.ndev_minors, 1);
    assert_int_equal(p.dev_minors[0], 5);
    vg_proc_release(&p);
    vg_err_release(&err);
    fx_stop_child(f);
}

/* A thread with a descriptor table of its own: unshare(CLONE_FILES), open the node, tell the
 * parent through the pipe, sleep. */
static int fx_tables_pipe[2];
static const char *fx_tables_node;

static void *fx_tables_thread(void *arg)
{
    (void)arg;
    char ok = unshare(CLONE_FILES) == 0 && open(fx_tables_node, O_RDONLY) >= 0;
    if (write(fx_tables_pipe[1], &ok, 1) != 1)
        _exit(123);
    for (;;)
        pause();
    return NULL;
}

/* A node held only in a thread's own table (issue 27): the leader's fd/ shows GPU 1's node,
 * task/TID/fd GPU 5's too; both are the process's, each table's descriptors counted once, and
 * a second thread sharing the leader's table adds nothing. */
static void test_thread_table(void **state)
{
    struct fx *f = *state;
    char node1[PATH_MAX], node5[PATH_MAX];
    snprintf(node1, sizeof(node1), "%s/nvidia1", f->dir);
    snprintf(node5, sizeof(node5), "%s/nvidia5", f->dir);
    assert_int_equal(pipe(fx_tables_pipe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (open(node1, O_RDONLY) < 0)
            _exit(121);
        fx_tables_node = node5;
        pthread_t t, u;
        if (pthread_create(&t, NULL, fx_tables_thread, NULL) != 0 ||
            pthread_create(&u, NULL, fx_sleeper, NULL) != 0)
            _exit(122);
        for (;;)
            pause();
    }
    f->child = pid;
    close(fx_tables_pipe[1]);
    char ok = 0;
    struct pollfd pfd = {.fd = fx_tables_pipe[0], .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1);
    assert_int_equal(read(fx_tables_pipe[0], &ok, 1), 1);
    close(fx_tables_pipe[0]);
    assert_true(ok);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_read(f->proc_fd, pid, f->dir, &p, &err))
        fail_msg("read: %s", vg_err_msg(&err));
    assert_true(p.known & VG_PROC_K_FDS);
    assert_int_equal(p.dev_fd_count, 3); /* node1 in the leader's, node1 and node5 in the copy */
    assert_int_equal(p.ndev_minors, 2);
    assert_int_equal(p.dev_minors[0], 1);
    assert_int_equal(p.dev_minors[1], 5);
    vg_proc_release(&p);
    vg_err_release(&err);
    fx_stop_child(f);
}

/* The same read by the process's own user, not root. The kernel makes an exited leader's fd/
 * root's whatever its user (it takes the owner from the memory map the leader no longer has),
 * so as that user the descriptors are read through the live thread; they used to be reported
 * unread. Run as root, a child becomes nobody and scans a zombie leader of its own (as another
 * user test_zombie_leader already is this case). */
static void test_zombie_leader_own_user(void **state)
{
    struct fx *f = *state;
    if (geteuid() != 0) {
        print_message("needs root to become nobody (test_zombie_leader covers it as a user)\n");
        skip();
    }
    char node[PATH_MAX];
    snprintf(node, sizeof(node), "%s/nvidia5", f->dir);
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(chmod(node, 0644), 0);
    pid_t scanner = fork();
    assert_true(scanner >= 0);
    if (scanner == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* a change of user leaves the process undumpable, its /proc entries root's: a user's
         * own processes are dumpable, and so is this one again */
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0 ||
            prctl(PR_SET_DUMPABLE, 1) != 0)
            _exit(2);
        pid_t leader = fork();
        if (leader < 0)
            _exit(3);
        if (leader == 0)
            fx_zombie_leader(node);
        int code = 4;
        struct vg_proc p;
        struct vg_err err = VG_ERR_INIT;
        if (fx_wait_zombie(leader)) {
            if (vg_proc_read(f->proc_fd, leader, f->dir, &p, &err) != 0)
                code = 5;
            else
                code = !(p.known & VG_PROC_K_FDS) ? 6 : p.dev_fd_count != 1 ? 7 : 0;
            if (code != 5)
                vg_proc_release(&p);
        }
        kill(leader, SIGKILL);
        _exit(code);
    }
    int st = 0;
    assert_int_equal(waitpid(scanner, &st, 0), scanner);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* Fork a child that maps each of maps[] (names under the fixture's dir, one page each,
 * repeats allowed), then closes every descriptor but keep_fd's node (opened at descriptor 0;
 * NULL: none at all), and stops: a worker that closed what it inherited and keeps CUDA's
 * mappings. */
static void fx_spawn_mapped(struct fx *f, const char *const *maps, size_t n, const char *keep)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (size_t i = 0; i < n; i++) {
            char p[PATH_MAX];
            snprintf(p, sizeof(p), "%s/%s", f->dir, maps[i]);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED)
                _exit(121);
            close(fd);
        }
        if (close_range(0, ~0u, 0) < 0)
            _exit(123);
        if (keep) {
            char p[PATH_MAX];
            snprintf(p, sizeof(p), "%s/%s", f->dir, keep);
            if (open(p, O_RDONLY) != 0)
                _exit(124);
        }
        raise(SIGSTOP);
        for (;;)
            pause();
    }
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    if (!WIFSTOPPED(st))
        fail_msg("child did not set up its mappings (status %#x)", st);
    f->child = pid;
}

/* A node held by descriptor and another only by mapping: both minors, each with how it is
 * held; nvidiactl mapped counts as held; every distinct node is listed once, by its path. */
static void test_mapped(void **state)
{
    struct fx *f = *state;
    static const char *const maps[] = {"nvidia5", "nvidiactl", "nvidia5"};
    fx_spawn_mapped(f, maps, 3, "nvidia0");
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_read(f->proc_fd, f->child, f->dir, &p, &err))
        fail_msg("read: %s", vg_err_msg(&err));
    assert_true(p.known & VG_PROC_K_FDS);
    assert_int_equal(p.fd_total, 1);
    assert_int_equal(p.dev_fd_count, 1);
    assert_int_equal(p.dev_map_count, 3);
    assert_int_equal(p.ndev_minors, 2);
    assert_int_equal(p.dev_minors[0], 0);
    assert_int_equal(p.dev_minors_by[0], VG_PROC_BY_FD);
    assert_int_equal(p.dev_minors[1], 5);
    assert_int_equal(p.dev_minors_by[1], VG_PROC_BY_MAP);
    assert_true(p.has_ctl);
    assert_false(p.has_uvm);
    assert_int_equal(p.ndev_paths, 3);
    char want[PATH_MAX];
    snprintf(want, sizeof(want), "%s/nvidia5", f->dir);
    bool found = false;
    for (size_t i = 0; i < p.ndev_paths; i++)
        found |= p.dev_paths[i] && strcmp(p.dev_paths[i], want) == 0;
    assert_true(found);
    vg_proc_release(&p);
    vg_err_release(&err);
    fx_stop_child(f);
}

/* No descriptor at all, only mappings: a holder all the same, found by the scan of every
 * process (not only when asked for by pid), with the libraries the same maps name. */
static void test_mapped_only_scan(void **state)
{
    struct fx *f = *state;
    static const char *const maps[] = {"nvidia1", "nvidia-uvm"};
    fx_spawn_mapped(f, maps, 2, NULL);
    struct vg_proc_opts o = {.dev_dir = f->dir, .scan = VG_PROC_SCAN_PROC};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_scan(&o, &t, &err))
        fail_msg("scan: %s", vg_err_msg(&err));
    const struct vg_proc *p = NULL;
    for (size_t i = 0; i < t.n; i++)
        if (t.procs[i].pid == f->child)
            p = &t.procs[i];
    assert_non_null(p);
    assert_int_equal(p->fd_total, 0);
    assert_int_equal(p->dev_fd_count, 0);
    assert_int_equal(p->dev_map_count, 2);
    assert_int_equal(p->ndev_minors, 1);
    assert_int_equal(p->dev_minors[0], 1);
    assert_int_equal(p->dev_minors_by[0], VG_PROC_BY_MAP);
    assert_true(p->has_uvm);
    assert_true(p->known & VG_PROC_K_MAPS);
    assert_true(p->known & VG_PROC_K_STAT);
    vg_proc_table_release(&t);
    vg_err_release(&err);
    fx_stop_child(f);
}

static int fx_count_map(void *arg, const struct vg_dev_match *m, const char *path, size_t len)
{
    (void)m;
    (void)path;
    (void)len;
    ++*(int *)arg;
    return 0;
}

/* The maps parser on odd text: a mapping whose file cannot be told is no "nothing mapped". */
static void test_map_nodes_parse(void **state)
{
    struct fx *f = *state;
    struct vg_proc_devset *ds;
    assert_int_equal(vg_proc_devset_new(f->proc_fd, f->dir, &ds), 0);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/nvidia1", f->dir);
    struct stat st, dir;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(stat(f->dir, &dir), 0); /* another file of the same filesystem */
    char good[512];
    int k = snprintf(good, sizeof(good),
                     "7f0000000000-7f0000001000 r--p 00000000 %x:%x %llu %s\n"
                     "7f0000001000-7f0000002000 rw-p 00000000 00:00 0 \n"
                     "7f0000002000-7f0000003000 r--p 00000000 %x:%x %llu /elsewhere/nvidia1",
                     major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino, path,
                     major(dir.st_dev), minor(dir.st_dev), (unsigned long long)dir.st_ino);
    assert_true(k > 0 && (size_t)k < sizeof(good));
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_maps(good, (size_t)k, &p), 0);
    int seen = 0;
    assert_int_equal(vg_proc_parse_map_nodes(good, (size_t)k, ds, fx_count_map, &seen), 0);
    assert_int_equal(seen, 1);
    static const char *const bad[] = {
        "7f0000000000-7f0000001000 r--p 00000000 zz:01 5 /x\n",
        "7f0000000000-7f0000001000 r--p 00000000 0801 5 /x\n",
        "7f0000000000-7f0000001000 r--p 00000000 08:01 5x /x\n",
        "7f0000000000-7f0000001000 r--p 00000000 08:01 99999999999999999999999 /x\n",
        "7f0000000000-7f0000001000 r--p 00000000 08:01\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(vg_proc_parse_map_nodes(bad[i], strlen(bad[i]), ds, NULL, NULL), -EINVAL);
    assert_int_equal(vg_proc_parse_map_nodes("", 0, ds, NULL, NULL), 0);
    /* the match is by filesystem and inode: the first line's node, not the look-alike path */
    struct vg_dev_match m;
    assert_true(vg_proc_devset_match_file(ds, major(st.st_dev), minor(st.st_dev), st.st_ino, &m));
    assert_int_equal(m.kind, VG_DEV_GPU);
    assert_int_equal(m.minor, 1);
    assert_false(
        vg_proc_devset_match_file(ds, major(dir.st_dev), minor(dir.st_dev), dir.st_ino, &m));
    vg_proc_devset_free(ds);
}

/*
 * The census of session kin: a worker whose parent died (adopted by init) holds a node; the
 * scan then lists the live non-holders of its session, this test process among them, with
 * their command lines, so the leftover model can see who else is left there.
 */
static void test_session_kin(void **state)
{
    struct fx *f = *state;
    char node[PATH_MAX];
    snprintf(node, sizeof(node), "%s/nvidia5", f->dir);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t mid = fork();
    assert_true(mid >= 0);
    if (mid == 0) {
        pid_t w = fork();
        if (w == 0) {
            alarm(30); /* bounded, whatever happens to the test */
            if (open(node, O_RDONLY) < 0)
                _exit(121);
            if (write(ready[1], &(pid_t){getpid()}, sizeof(pid_t)) != (ssize_t)sizeof(pid_t))
                _exit(122);
            for (;;)
                pause();
        }
        _exit(w > 0 ? 0 : 1);
    }
    close(ready[1]);
    pid_t w = 0;
    assert_int_equal(read(ready[0], &w, sizeof(w)), (ssize_t)sizeof(w));
    close(ready[0]);
    int st;
    assert_int_equal(waitpid(mid, &st, 0), mid);
    f->child = w; /* not ours to reap: fx_stop_child's waitpid fails, the kill is what counts */
    for (int i = 0; i < 500; i++) { /* until the kernel has re-parented it (bounded) */
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)w);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0) {
            buf[n] = '\0';
            char *r = strrchr(buf, ')');
            int ppid = 0;
            if (r && sscanf(r + 2, "%*c %d", &ppid) == 1 && ppid != mid)
                break;
        }
        usleep(10000);
    }
    struct vg_proc_opts o = {.proc_root = "/proc", .dev_dir = f->dir};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_scan(&o, &t, &err))
        fail_msg("scan: %s", vg_err_msg(&err));
    const struct vg_proc *p = vg_proc_table_find(&t, w);
    assert_non_null(p);
    assert_true(p->ppid != mid);
    bool self = false;
    for (size_t i = 0; i < t.nkin; i++) {
        assert_int_equal(t.kin[i].sid, p->sid); /* only the sessions asked about */
        assert_null(vg_proc_table_find(&t, t.kin[i].pid)); /* non-holders only */
        if (t.kin[i].pid == getpid()) {
            self = true;
            assert_non_null(t.kin[i].cmdline);
            assert_true(strstr(t.kin[i].cmdline, "test_proc_fds") != NULL);
            if (i > 0)
                assert_true(t.kin[i - 1].pid < t.kin[i].pid);
        }
    }
    assert_true(self);
    vg_proc_table_release(&t);
    vg_err_release(&err);
    kill(w, SIGKILL);
    f->child = 0;
}

/* A holder adopted by init that leads its own session (a setsid daemon, a service) shares its
 * session only with what it started: no census is taken for it. */
static void test_session_kin_none(void **state)
{
    struct fx *f = *state;
    char node[PATH_MAX];
    snprintf(node, sizeof(node), "%s/nvidia5", f->dir);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t mid = fork();
    assert_true(mid >= 0);
    if (mid == 0) {
        pid_t d = fork();
        if (d == 0) {
            alarm(30);
            if (setsid() < 0)
                _exit(121);
            /* a child of its own that holds nothing: the only company its session has */
            pid_t k = fork();
            if (k == 0) {
                /* bounded, and holding none of the test's output open */
                alarm(30);
                close(STDOUT_FILENO);
                close(STDERR_FILENO);
                for (;;)
                    pause();
            }
            if (k < 0 || open(node, O_RDONLY) < 0)
                _exit(121);
            sleep(1); /* until init has adopted it */
            if (write(ready[1], &(pid_t){getpid()}, sizeof(pid_t)) != (ssize_t)sizeof(pid_t))
                _exit(122);
            for (;;)
                pause();
        }
        _exit(d > 0 ? 0 : 1);
    }
    close(ready[1]);
    int st;
    assert_int_equal(waitpid(mid, &st, 0), mid);
    pid_t d = 0;
    assert_int_equal(read(ready[0], &d, sizeof(d)), (ssize_t)sizeof(d));
    close(ready[0]);
    f->child = d;
    struct vg_proc_opts o = {.proc_root = "/proc", .dev_dir = f->dir};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_scan(&o, &t, &err))
        fail_msg("scan: %s", vg_err_msg(&err));
    const struct vg_proc *p = vg_proc_table_find(&t, d);
    assert_non_null(p);
    assert_int_equal(p->sid, d);
    assert_true(p->ppid != mid);
    assert_int_equal(t.nkin, 0);
    vg_proc_table_release(&t);
    vg_err_release(&err);
    kill(-d, SIGKILL); /* its session's only group: it and its child */
    f->child = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counted),
        cmocka_unit_test_setup_teardown(test_dense, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_small_holes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_wide_hole, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_nothing_low, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_spread_holes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_large, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_empty, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_zombie_leader, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_zombie_leader_own_user, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_thread_table, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_mapped, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_mapped_only_scan, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_map_nodes_parse, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_session_kin, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_session_kin_none, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
