/*
 * Unit tests for the job layer (src/act/): where the lock directory is, lock names, locks
 * taken and looked at for real in a temporary directory (and kept by a process that inherited
 * the descriptor after the taker let go), the /proc/locks, mountinfo, cgroup, cgroup.events,
 * cgroup.procs and stat parsers, the process tree over a hand-made procfs, and one real job
 * started, waited for and cleaned up after in subreaper mode, its reservation inherited; and
 * the identity-checked signal of act/stop.h that the job's clean-up uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "act/job.h"
#include "act/lock.h"
#include "act/stop.h"

static void test_lock_dir_choice(void **state)
{
    (void)state;
    struct vg_lock_dir d;
    struct vg_err err = VG_ERR_INIT;
    struct vg_lock_env env = {.override = "/x/locks", .xdg = "/run/user/1000", .uid = 1000};
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/x/locks");
    assert_string_equal(d.why, "VRAMGUARD_RUNTIME_DIR");
    assert_int_equal(d.fd, -1);
    vg_lock_dir_release(&d);

    env.override = "relative/dir";
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err),
                        "VRAMGUARD_RUNTIME_DIR must be an absolute path, not 'relative/dir'");

    env.override = ""; /* set but empty: as unset */
    env.uid = 0;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/run/vramguard");
    assert_int_equal(d.mode, 0755);
    assert_false(d.private_dir);
    vg_lock_dir_release(&d);

    env.uid = 1000;
    env.shared_usable = true;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/run/vramguard");
    assert_string_equal(d.why, "shared");
    vg_lock_dir_release(&d);

    env.shared_usable = false;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/run/user/1000/vramguard");
    assert_int_equal(d.mode, 0700);
    assert_true(d.private_dir);
    vg_lock_dir_release(&d);
    env.xdg_why = "/run/user"; /* no usable $XDG_RUNTIME_DIR: /run/user/UID was taken */
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/run/user/1000/vramguard");
    assert_string_equal(d.why, "/run/user");
    vg_lock_dir_release(&d);
    env.xdg_why = NULL;

    env.xdg = "not/absolute";
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/tmp/vramguard-1000");
    assert_true(d.private_dir);
    vg_lock_dir_release(&d);
    env.xdg = NULL;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_string_equal(d.path, "/tmp/vramguard-1000");
    vg_lock_dir_release(&d);
    vg_err_release(&err);
}

static void test_lock_names(void **state)
{
    (void)state;
    assert_true(vg_lock_name_ok("GPU-8a1b2c3d-0000-1111-2222-333344445555"));
    assert_true(vg_lock_name_ok("MIG-aaaa"));
    const char *bad[] = {"GPU-",     "gpu-1234", "GPU-../../etc", "GPU-a/b", "GPU-a b", "MIG-a.b",
                         "../GPU-1", "",         "GPU-\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(vg_lock_name_ok(bad[i]));
    char longname[200];
    memset(longname, 'a', sizeof(longname));
    memcpy(longname, "GPU-", 4);
    longname[sizeof(longname) - 1] = '\0';
    assert_false(vg_lock_name_ok(longname));
}

static void test_proc_locks_parser(void **state)
{
    (void)state;
    const char *text = "1: POSIX  ADVISORY  WRITE 77 00:1d:4242 0 EOF\n"
                       "2: FLOCK  ADVISORY  READ 78 00:1d:4242 0 EOF\n"
                       "3: FLOCK  ADVISORY  WRITE 1234 00:1d:4242 0 EOF\n"
                       "3: -> FLOCK  ADVISORY  WRITE 1300 00:1d:4242 0 EOF\n"
                       "4: FLOCK  ADVISORY  WRITE 999 fd:01:4242 0 EOF\n";
    assert_int_equal(vg_lock_parse_proc_locks(text, 0, 0x1d, 4242), 1234);
    assert_int_equal(vg_lock_parse_proc_locks(text, 0xfd, 1, 4242), 999);
    /* Only the inode matches (a file system whose st_dev differs): held, holder unknown. */
    assert_int_equal(vg_lock_parse_proc_locks(text, 8, 2, 4242), 0);
    assert_int_equal(vg_lock_parse_proc_locks(text, 0, 0x1d, 4243), -1);
    assert_int_equal(vg_lock_parse_proc_locks("", 0, 0x1d, 4242), -1);
    assert_int_equal(vg_lock_parse_proc_locks("garbage\n\n1: FLOCK\n", 0, 0x1d, 4242), -1);
}

static char *tmpdir(void)
{
    char tmpl[] = "/tmp/vg-test-job.XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void test_locks_for_real(void **state)
{
    (void)state;
    char *base = tmpdir();
    char path[512];
    snprintf(path, sizeof(path), "%s/locks", base);
    struct vg_lock_env env = {.override = path, .uid = geteuid()};
    struct vg_lock_dir d;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    /* Looking never creates the directory. */
    assert_int_equal(vg_lock_dir_open(&d, false, &err), -ENOENT);
    assert_int_equal(vg_lock_dir_open(&d, true, &err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);

    pid_t holder = -1;
    assert_int_equal(vg_lock_probe(&d, "GPU-1111", &holder, &err), 0);
    int fd = -1, fd2 = -1;
    assert_int_equal(vg_lock_acquire(&d, "GPU-1111", &fd, &err), 0);
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    /* Read-only: a job inherits it. The file says who took it, through another descriptor. */
    assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
    char lpid[600], want[32];
    snprintf(lpid, sizeof(lpid), "%s/GPU-1111", path);
    FILE *lf = fopen(lpid, "r");
    assert_non_null(lf);
    assert_non_null(fgets(lpid, sizeof(lpid), lf));
    fclose(lf);
    snprintf(want, sizeof(want), "%ld\n", (long)getpid());
    assert_string_equal(lpid, want);
    /* A second open file description cannot have it, even in the same process. */
    assert_int_equal(vg_lock_acquire(&d, "GPU-1111", &fd2, &err), -EBUSY);
    assert_int_equal(vg_lock_probe(&d, "GPU-1111", &holder, &err), 1);
    assert_true(holder == getpid() || holder == 0);
    /* Looking did not get in the way of taking another. */
    assert_int_equal(vg_lock_acquire(&d, "GPU-2222", &fd2, &err), 0);
    close(fd2);
    close(fd);
    assert_int_equal(vg_lock_probe(&d, "GPU-1111", &holder, &err), 0);
    assert_int_equal(vg_lock_acquire(&d, "GPU-1111", &fd, &err), 0);
    struct vg_lock_who who;
    assert_int_equal(vg_lock_who(&d, "GPU-1111", getpid(), &who, &err), 0);
    assert_int_equal(who.run_alive, 1);
    assert_int_equal(who.nholders, 0);

    /* The lock outlives its taker while a process that inherited the descriptor lives: a
     * child holds it, we let go, and looking names the child. */
    int go[2];
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        char c;
        close(go[1]);
        _exit(read(go[0], &c, 1) >= 0 ? 0 : 1); /* holds fd until the pipe closes */
    }
    close(go[0]);
    close(fd);
    assert_int_equal(vg_lock_acquire(&d, "GPU-1111", &fd2, &err), -EBUSY);
    assert_int_equal(vg_lock_probe(&d, "GPU-1111", &holder, &err), 1);
    assert_int_equal(vg_lock_who(&d, "GPU-1111", getpid(), &who, &err), 0);
    assert_int_equal(who.run_alive, 0);
    assert_int_equal(who.nholders, 1);
    assert_int_equal(who.holders[0].pid, kid);
    assert_int_equal(who.more, 0);
    /* A pid that is gone reads as gone too. */
    assert_int_equal(vg_lock_who(&d, "GPU-1111", INT32_MAX, &who, &err), 0);
    assert_int_equal(who.run_alive, 0);
    assert_int_equal(who.nholders, 1);
    close(go[1]);
    int kst;
    assert_int_equal(waitpid(kid, &kst, 0), kid);
    assert_int_equal(vg_lock_acquire(&d, "GPU-1111", &fd, &err), 0);
    close(fd);
    assert_int_equal(vg_lock_who(&d, "GPU-9999", 1, &who, &err), -ENOENT);

    /* Symlinks and non-regular files are refused; so are bad names. */
    char lpath[600];
    snprintf(lpath, sizeof(lpath), "%s/GPU-3333", path);
    assert_int_equal(symlink("/etc/passwd", lpath), 0);
    assert_int_equal(vg_lock_acquire(&d, "GPU-3333", &fd, &err), -ELOOP);
    snprintf(lpath, sizeof(lpath), "%s/GPU-4444", path);
    assert_int_equal(mkfifo(lpath, 0600), 0);
    assert_int_equal(vg_lock_acquire(&d, "GPU-4444", &fd, &err), -EINVAL);
    assert_int_equal(vg_lock_acquire(&d, "GPU-../x", &fd, &err), -EINVAL);
    vg_lock_dir_release(&d);

    /* A directory writable by others without the sticky bit, or a symlink, is refused. */
    assert_int_equal(chmod(path, 0777), 0);
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_int_equal(vg_lock_dir_open(&d, true, &err), -EPERM);
    vg_lock_dir_release(&d);
    assert_int_equal(chmod(path, 01777), 0);
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_int_equal(vg_lock_dir_open(&d, true, &err), 0);
    vg_lock_dir_release(&d);
    char link[600];
    snprintf(link, sizeof(link), "%s/link", base);
    assert_int_equal(symlink(path, link), 0);
    env.override = link;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_int_equal(vg_lock_dir_open(&d, true, &err), -ENOTDIR);
    assert_non_null(strstr(vg_err_msg(&err), "is not a directory"));
    vg_lock_dir_release(&d);
    vg_err_release(&err);

    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    free(base);
}

static void test_cgroup_parsers(void **state)
{
    (void)state;
    char *mp, *root, *path;
    const char *hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                         "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
                         "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    assert_int_equal(vg_job_cgroup_mount(hybrid, &mp, &root), 0);
    assert_string_equal(mp, "/sys/fs/cgroup/unified");
    assert_string_equal(root, "/");
    free(mp);
    free(root);
    /* Pure v2 wins; optional fields; escaped blanks. */
    const char *v2 = "50 1 0:40 /a\\040b /mnt/c\\040g rw shared:9 master:2 - cgroup2 none rw\n"
                     "51 1 0:41 / /sys/fs/cgroup rw,nosuid shared:1 - cgroup2 cgroup2 rw\n";
    assert_int_equal(vg_job_cgroup_mount(v2, &mp, &root), 0);
    assert_string_equal(mp, "/sys/fs/cgroup");
    free(mp);
    free(root);
    assert_int_equal(vg_job_cgroup_mount(v2, &mp, &root), 0);
    free(mp);
    free(root);
    const char *only = "50 1 0:40 /a\\040b /mnt/c\\040g rw shared:9 - cgroup2 none rw\n";
    assert_int_equal(vg_job_cgroup_mount(only, &mp, &root), 0);
    assert_string_equal(mp, "/mnt/c g");
    assert_string_equal(root, "/a b");
    free(mp);
    free(root);
    assert_int_equal(vg_job_cgroup_mount("32 31 0:29 / /x rw - cgroup cgroup rw,cpu\n", &mp, &root),
                     -ENOENT);
    assert_null(mp);

    assert_int_equal(vg_job_cgroup_self("4:memory:/x\n0::/user.slice/s.scope\n", &path), 0);
    assert_string_equal(path, "/user.slice/s.scope");
    free(path);
    assert_int_equal(vg_job_cgroup_self("0::/\n", &path), 0);
    assert_string_equal(path, "/");
    free(path);
    assert_int_equal(vg_job_cgroup_self("4:memory:/x\n", &path), -ENOENT);

    assert_int_equal(vg_job_cgroup_populated("populated 1\nfrozen 0\n"), 1);
    assert_int_equal(vg_job_cgroup_populated("populated 0\nfrozen 0\n"), 0);
    assert_int_equal(vg_job_cgroup_populated("frozen 0\npopulated 1"), 1);
    assert_int_equal(vg_job_cgroup_populated("unpopulated 1\npopulated 2\npopulated 10\n"), -1);
    assert_int_equal(vg_job_cgroup_populated(""), -1);
}

struct pids_seen {
    pid_t v[16];
    size_t n;
};

static void pids_note(pid_t pid, void *ctx)
{
    struct pids_seen *p = ctx;
    assert_true(p->n < 16);
    p->v[p->n++] = pid;
}

/* cgroup.procs read in pieces that cut numbers in two, with junk and numbers no pid can be. */
static void test_pids_pieces(void **state)
{
    (void)state;
    const char *text = "12\n3456\n0\n99999999999999999999999\n7x\n2147483647\n2147483648\n8";
    for (size_t cut = 0; cut <= strlen(text); cut++) {
        struct vg_job_pids s = {0};
        struct pids_seen seen = {0};
        vg_job_pids_feed(&s, text, cut, pids_note, &seen);
        vg_job_pids_feed(&s, text + cut, strlen(text) - cut, pids_note, &seen);
        vg_job_pids_feed(&s, "\n", 1, pids_note, &seen);
        assert_int_equal(seen.n, 5);
        assert_int_equal(seen.v[0], 12);
        assert_int_equal(seen.v[1], 3456);
        assert_int_equal(seen.v[2], 7); /* "7x": the digits before the junk */
        assert_int_equal(seen.v[3], 2147483647);
        assert_int_equal(seen.v[4], 8);
    }
}

static void put(const char *dir, const char *rel, const char *text)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
    *slash = '/';
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A stat line: PID (COMM) STATE PPID, the rest zeros, start time START. */
static void put_stat(const char *dir, const char *rel, int pid, const char *comm, char st, int ppid,
                     int start)
{
    char line[512];
    snprintf(line, sizeof(line), "%d (%s) %c %d 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid,
             comm, st, ppid, start);
    put(dir, rel, line);
}

static void test_tree_over_fake_proc(void **state)
{
    (void)state;
    char *p = tmpdir();
    /* 100 is us; 101, 102 children; 103 grandchild through 102; 104 a zombie child; 105 a
     * zombie leader whose thread 106 still runs; 200 a stranger; 201 its child. */
    put_stat(p, "100/stat", 100, "vramguard", 'S', 1, 10);
    put_stat(p, "101/stat", 101, "python", 'S', 100, 11);
    put_stat(p, "102/stat", 102, "a) (b c", 'R', 100, 12);
    put_stat(p, "103/stat", 103, "pt_data_worker", 'D', 102, 13);
    put_stat(p, "104/stat", 104, "dead", 'Z', 100, 14);
    put_stat(p, "105/stat", 105, "leader", 'Z', 101, 15);
    put_stat(p, "105/task/105/stat", 105, "leader", 'Z', 101, 15);
    put_stat(p, "105/task/106/stat", 106, "leader", 'S', 101, 15);
    put_stat(p, "200/stat", 200, "other", 'S', 1, 20);
    put_stat(p, "201/stat", 201, "other", 'S', 200, 21);
    put(p, "self", "not a pid");
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);

    struct vg_job_proc pr;
    pid_t ppid;
    assert_int_equal(vg_job_proc_read(fd, 102, &pr, &ppid), 0);
    assert_string_equal(pr.comm, "a) (b c");
    assert_int_equal(pr.state, 'R');
    assert_int_equal(ppid, 100);
    assert_int_equal(pr.start, 12);
    assert_int_equal(vg_job_proc_read(fd, 999, &pr, NULL), -ENOENT);

    struct vg_job_procs out = {0};
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_job_descendants(fd, 100, &out, &err), 0);
    int want[] = {101, 102, 103, 105};
    assert_int_equal(out.n, 4);
    for (size_t i = 0; i < 4; i++)
        assert_true(vg_job_procs_has(&out, want[i], 0));
    assert_false(vg_job_procs_has(&out, 104, 0));
    assert_true(vg_job_procs_has(&out, 103, 13));
    assert_false(vg_job_procs_has(&out, 103, 99)); /* a recycled pid is another process */
    vg_job_procs_release(&out);

    put(p, "102/stat", "102 (broken"); /* malformed: skipped, and so its child with it */
    assert_int_equal(vg_job_descendants(fd, 100, &out, &err), 0);
    assert_int_equal(out.n, 2);
    vg_job_procs_release(&out);
    close(fd);
    vg_err_release(&err);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
    assert_int_equal(system(cmd), 0);
    free(p);
}

static bool test_same_answer(void *ctx)
{
    return *(const bool *)ctx;
}

/* A signal goes only while the check says the pid is still the process meant. */
static void test_stop_signal_if(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* test_real_job leaves the job's signals blocked in this process (as run does). */
        signal(SIGTERM, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (;;)
            pause();
    }
    bool same = false;
    assert_int_equal(vg_stop_signal_if(pid, SIGTERM, test_same_answer, &same), -ESRCH);
    int st;
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
    same = true;
    assert_int_equal(vg_stop_signal_if(pid, SIGTERM, test_same_answer, &same), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

/* A child that waits for signals with SIGTERM at ign_term ? ignored : its default. */
static pid_t test_stop_child_start(bool ign_term)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGTERM, ign_term ? SIG_IGN : SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (;;)
            pause();
    }
    return pid;
}

/* The stop sequence without pidfds, by PID for our own children: SIGTERM ends the first, the
 * second needs SIGKILL; both are left for us to reap (waitid with WNOWAIT). */
static void test_stop_children(void **state)
{
    (void)state;
    struct vg_stop ss[2];
    pid_t pids[2] = {test_stop_child_start(false), test_stop_child_start(true)};
    for (int i = 0; i < 2; i++) {
        vg_stop_init_child(&ss[i], pids[i]);
        assert_int_equal(ss[i].outcome, VG_STOP_IDLE);
    }
    /* The second must have set SIG_IGN before its SIGTERM: wait until it waits in pause(). */
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < 2; i++)
        vg_stop_term(&ss[i]);
    vg_stop_finish(ss, 2, sizeof(ss[0]), 300, 5000);
    assert_int_equal(ss[0].outcome, VG_STOP_TERMINATED);
    assert_int_equal(ss[1].outcome, VG_STOP_KILLED);
    assert_true(ss[1].sent_kill);
    int st;
    assert_int_equal(waitpid(pids[0], &st, WNOHANG), pids[0]);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_int_equal(waitpid(pids[1], &st, WNOHANG), pids[1]);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void test_statuses(void **state)
{
    (void)state;
    assert_int_equal(vg_job_exec_status(ENOENT), 127);
    assert_int_equal(vg_job_exec_status(EACCES), 126);
    assert_int_equal(vg_job_exec_status(ENOEXEC), 126);
    assert_int_equal(vg_job_status_code(3 << 8), 3);
    assert_int_equal(vg_job_status_code(SIGKILL), 128 + SIGKILL);
}

/* One real job, subreaper mode: its main exits 7 and leaves an orphan that ignores SIGTERM. */
static void test_real_job(void **state)
{
    (void)state;
    struct vg_job job;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_job_init(&job, &err), 0);
    char *base = tmpdir();
    /* A reservation for it to inherit. */
    char locks[600];
    snprintf(locks, sizeof(locks), "%s/locks", base);
    struct vg_lock_env env = {.override = locks, .uid = geteuid()};
    struct vg_lock_dir d;
    int lfd;
    assert_int_equal(vg_lock_dir_choose(&env, &d, &err), 0);
    assert_int_equal(vg_lock_dir_open(&d, true, &err), 0);
    assert_int_equal(vg_lock_acquire(&d, "GPU-1111", &lfd, &err), 0);
    char script[1200];
    /* The main process waits (bounded) until the orphan-to-be ignores SIGTERM. */
    snprintf(script, sizeof(script),
             "readlink /proc/$$/fd/%d > '%s/inherited'; "
             "(trap '' TERM; : > '%s/ready'; exec sleep 60) & "
             "i=0; while [ ! -e '%s/ready' ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; "
             "exit 7",
             lfd, base, base, base);
    char *argv[] = {"sh", "-c", script, NULL};
    extern char **environ;
    struct vg_job_opts o = {.argv = argv,
                            .envp = environ,
                            .track = VG_JOB_TRACK_SUBREAPER,
                            .lock_fds = &lfd,
                            .nlock_fds = 1};
    assert_int_equal(vg_job_start(&job, &o, &err), 0);
    assert_int_equal(job.exec_errno, 0);
    assert_false(job.use_cgroup);
    assert_int_equal(vg_job_wait(&job), 7);
    struct vg_job_cleanup_report rep;
    assert_int_equal(vg_job_cleanup(&job, 300, &rep, &err), 0);
    assert_int_equal(rep.termed.n, 1);
    assert_int_equal(rep.killed.n, 1);
    assert_int_equal(rep.survivors.n, 0);
    assert_true(vg_job_was_member(&job, rep.killed.v[0].pid));
    assert_int_equal(kill(rep.killed.v[0].pid, 0), -1); /* reaped, not a zombie */
    vg_job_cleanup_report_release(&rep);
    assert_int_equal(job.guard_pid, 0); /* no cgroup, no guard */
    vg_job_release(&job);
    /* The job had the reservation; now only we hold it, and closing it frees the GPU. */
    char seen[700], want[700];
    snprintf(seen, sizeof(seen), "%s/inherited", base);
    FILE *f = fopen(seen, "r");
    assert_non_null(f);
    assert_non_null(fgets(seen, sizeof(seen), f));
    fclose(f);
    snprintf(want, sizeof(want), "%s/GPU-1111\n", locks);
    assert_string_equal(seen, want);
    struct vg_lock_who who;
    assert_int_equal(vg_lock_who(&d, "GPU-1111", getpid(), &who, &err), 0);
    assert_int_equal(who.run_alive, 1);
    close(lfd);
    pid_t holder;
    assert_int_equal(vg_lock_probe(&d, "GPU-1111", &holder, &err), 0);
    vg_lock_dir_release(&d);

    /* Not found: 127, and nothing left running. Searched in a plain PATH: one holding a
     * directory this user cannot search gives EACCES (126), as in a shell. */
    assert_int_equal(vg_job_init(&job, &err), 0);
    char *argv2[] = {"vg-no-such-command-anywhere", NULL};
    o.argv = argv2;
    char *path = strdup(getenv("PATH") ? getenv("PATH") : "");
    assert_non_null(path);
    setenv("PATH", "/usr/bin:/bin", 1);
    int started = vg_job_start(&job, &o, &err);
    setenv("PATH", path, 1);
    free(path);
    assert_int_equal(started, 0);
    assert_int_equal(job.exec_errno, ENOENT);
    assert_true(job.exited);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    vg_job_release(&job);
    vg_err_release(&err);
    snprintf(script, sizeof(script), "rm -rf '%s'", base);
    assert_int_equal(system(script), 0);
    free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_dir_choice),   cmocka_unit_test(test_lock_names),
        cmocka_unit_test(test_proc_locks_parser), cmocka_unit_test(test_locks_for_real),
        cmocka_unit_test(test_cgroup_parsers),    cmocka_unit_test(test_tree_over_fake_proc),
        cmocka_unit_test(test_statuses),          cmocka_unit_test(test_real_job),
        cmocka_unit_test(test_pids_pieces),       cmocka_unit_test(test_stop_signal_if),
        cmocka_unit_test(test_stop_children),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
