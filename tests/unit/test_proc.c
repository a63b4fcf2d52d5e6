/*
 * Unit tests for src/proc/: the parsers on hostile content, the two-phase scan against a fake
 * procfs tree built in a temporary directory (missing files, vanished processes, denied files,
 * look-alike device links), the real /proc with a child holding a fake device node, and a
 * churn test where thousands of children exit while /proc is being scanned.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/proc.h"

/* ---- helpers ---------------------------------------------------------------------------- */

#define CID "3f1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"
#define CID2 "aa1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"
#define POD "1a2b3c4d-5e6f-7a8b-9c0d-112233445566"
#define POD_US "1a2b3c4d_5e6f_7a8b_9c0d_112233445566"

/* A full stat line the way the kernel writes it (52 fields). */
static size_t fmt_stat_full(char *buf, size_t n, int pid, const char *comm, char state, int ppid,
                            int pgid, int sid, unsigned long long start)
{
    int k = snprintf(buf, n,
                     "%d (%s) %c %d %d %d 34816 -1 4194560 1040 0 0 0 3 1 0 0 20 0 1 0 %llu "
                     "8192000 900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 "
                     "0 0 0 0 0 0 0 0\n",
                     pid, comm, state, ppid, pgid, sid, start);
    assert_true(k > 0 && (size_t)k < n);
    return (size_t)k;
}

/* dir + "/" + name into out, failing the test rather than truncating. */
static void path_join(char *out, size_t n, const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    assert_true(a + 1 + b < n);
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
}

static void put_file(const char *root, const char *rel, const void *data, size_t len)
{
    char path[PATH_MAX];
    int k = snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_true(k > 0 && (size_t)k < sizeof(path));
    /* create parent directories */
    for (char *s = path + strlen(root) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(path, 0755) < 0)
                assert_int_equal(errno, EEXIST);
            *s = '/';
        }
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, (const char *)data + off, len - off);
        assert_true(w > 0);
        off += (size_t)w;
    }
    close(fd);
}

static void put_str(const char *root, const char *rel, const char *s)
{
    put_file(root, rel, s, strlen(s));
}

static void put_link(const char *root, const char *rel, const char *target)
{
    char path[PATH_MAX];
    int k = snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_true(k > 0 && (size_t)k < sizeof(path));
    for (char *s = path + strlen(root) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(path, 0755) < 0)
                assert_int_equal(errno, EEXIST);
            *s = '/';
        }
    }
    assert_int_equal(symlink(target, path), 0);
}

static void put_stat(const char *root, int pid, const char *comm, char state, int ppid, int pgid,
                     int sid, unsigned long long start)
{
    char rel[64], buf[1024];
    snprintf(rel, sizeof(rel), "%d/stat", pid);
    size_t n = fmt_stat_full(buf, sizeof(buf), pid, comm, state, ppid, pgid, sid, start);
    put_file(root, rel, buf, n);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    /* Only directories: chmod follows a symlink, and the fake trees link fd/N to /dev/null,
     * which this once left mode 0700 on the host (nobody's tests then failed). */
    if (flag == FTW_DP)
        chmod(path, 0700);
    return remove(path) < 0 ? -1 : 0;
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- stat ------------------------------------------------------------------------------- */

static void test_stat_basic(void **state)
{
    (void)state;
    char buf[1024];
    size_t n = fmt_stat_full(buf, sizeof(buf), 1234, "python3", 'S', 1, 1200, 1100, 60291);
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_stat(buf, n, &p), 0);
    assert_int_equal(p.pid, 1234);
    assert_string_equal(p.comm, "python3");
    assert_int_equal(p.state, 'S');
    assert_int_equal(p.ppid, 1);
    assert_int_equal(p.pgid, 1200);
    assert_int_equal(p.sid, 1100);
    assert_int_equal(p.flags, 4194560);
    assert_int_equal(p.start_ticks, 60291);
    assert_int_equal(p.tty_nr, 34816); /* pts/0: a job started from a terminal */
    assert_int_equal(p.cpu_ticks, 4);  /* utime 3 + stime 1 */
    assert_true(p.known & VG_PROC_K_STAT);
    /* parsing again replaces comm without leaking */
    n = fmt_stat_full(buf, sizeof(buf), 1234, "other", 'R', 7, 0, 0, 9);
    assert_int_equal(vg_proc_parse_stat(buf, n, &p), 0);
    assert_string_equal(p.comm, "other");
    assert_int_equal(p.ppid, 7);
    vg_proc_release(&p);
}

static void test_stat_hostile_comm(void **state)
{
    (void)state;
    /* comm holds spaces, newlines, '(' and ')' and even something that looks like fields */
    const char *comm = "a) (b\nZ 1 2 3 ) x(";
    char buf[1024];
    size_t n = fmt_stat_full(buf, sizeof(buf), 42, comm, 'D', 7, 8, 9, 123456789012ULL);
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_stat(buf, n, &p), 0);
    assert_string_equal(p.comm, comm);
    assert_int_equal(p.state, 'D');
    assert_int_equal(p.ppid, 7);
    assert_int_equal(p.pgid, 8);
    assert_int_equal(p.sid, 9);
    assert_int_equal(p.start_ticks, 123456789012ULL);
    vg_proc_release(&p);

    /* empty comm, and comm that is only ")" */
    n = fmt_stat_full(buf, sizeof(buf), 5, "", 'R', 1, 5, 5, 1);
    assert_int_equal(vg_proc_parse_stat(buf, n, &p), 0);
    assert_string_equal(p.comm, "");
    vg_proc_release(&p);
    n = fmt_stat_full(buf, sizeof(buf), 5, ")", 'R', 1, 5, 5, 1);
    assert_int_equal(vg_proc_parse_stat(buf, n, &p), 0);
    assert_string_equal(p.comm, ")");
    vg_proc_release(&p);
}

static void test_stat_malformed(void **state)
{
    (void)state;
    char buf[1024];
    size_t n = fmt_stat_full(buf, sizeof(buf), 42, "x", 'S', 7, 8, 9, 100);
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_stat(buf, n, &p), 0);
    vg_proc_release(&p);

    /* truncated at every length short of starttime: never accepted, p untouched */
    const char *start = strstr(buf, " 100 8192000");
    assert_non_null(start);
    size_t need = (size_t)(start - buf) + 4;
    /* (cut inside starttime, the line is well-formed with a shorter number: nothing to see) */
    for (size_t len = 0; len <= (size_t)(start - buf); len++) {
        assert_int_equal(vg_proc_parse_stat(buf, len, &p), -EINVAL);
        assert_null(p.comm);
        assert_int_equal(p.known, 0);
    }
    assert_int_equal(vg_proc_parse_stat(buf, need, &p), 0);
    vg_proc_release(&p);

    /* 22 fields: "S" and 19 numbers after comm */
    const char *bad[] = {
        "",
        "42 x S 1 2 3",                                                       /* no parentheses */
        "42 (x S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",            /* no ')' */
        "42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18",              /* too few fields */
        "42 (x) S -1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",          /* negative ppid */
        "42 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",          /* state not a char */
        "42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 1x",           /* bad starttime */
        "42 (x) S 1 2 3 4 5 x 7 8 9 10 11 12 13 14 15 16 17 18 19",           /* bad flags */
        "42 (x) S 1 2 3 4 5 99999999999 7 8 9 10 11 12 13 14 15 16 17 18 19", /* flags > 32 bit */
        "x42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",          /* bad pid */
        "(x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",              /* no pid */
        "42 )x( S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",           /* ')' before '(' */
        "42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n19", /* fields past a newline */
        "42 (x) S 99999999999 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19", /* ppid range */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vg_proc q = {0};
        print_message("bad stat: %s\n", bad[i]);
        assert_int_equal(vg_proc_parse_stat(bad[i], strlen(bad[i]), &q), -EINVAL);
        assert_null(q.comm);
        assert_int_equal(q.known, 0);
    }
    /* exactly 22 fields is enough; the pid does not overwrite a set p->pid */
    const char *ok = "42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19";
    struct vg_proc q = {.pid = 99};
    assert_int_equal(vg_proc_parse_stat(ok, strlen(ok), &q), 0);
    assert_int_equal(q.pid, 99);
    assert_int_equal(q.start_ticks, 19);
    assert_int_equal(q.flags, 6);
    vg_proc_release(&q);
}

/* ---- status ----------------------------------------------------------------------------- */

static void test_status(void **state)
{
    (void)state;
    const char *s = "Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
                    "Pid:\t4242\nPPid:\t1\nUid:\t1000\t1001\t1002\t1003\n"
                    "Gid:\t100\t100\t100\t100\nNStgid:\t4242\t17\t1\nNSpid:\t4242\t17\t1\n"
                    "Threads:\t3\n";
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_status(s, strlen(s), &p), 0);
    assert_int_equal(p.uid, 1000);
    assert_int_equal(p.nnspid, 3);
    assert_int_equal(p.nspid[0], 4242);
    assert_int_equal(p.nspid[1], 17);
    assert_int_equal(p.nspid[2], 1);
    assert_true(p.known & VG_PROC_K_STATUS);
    vg_proc_release(&p);

    /* no NSpid (old kernels): known uid, empty chain; no final newline */
    const char *old = "Name:\tx\nUid:\t0\t0\t0\t0";
    assert_int_equal(vg_proc_parse_status(old, strlen(old), &p), 0);
    assert_int_equal(p.uid, 0);
    assert_int_equal(p.nnspid, 0);
    assert_null(p.nspid);
    vg_proc_release(&p);

    const char *bad[] = {
        "",
        "Name:\tx\n",                        /* no Uid */
        "Uid:\tabc\t0\t0\t0\n",              /* bad uid */
        "Uid:\t\n",                          /* empty uid */
        "Uid:\t0\t0\t0\t0\nNSpid:\t12\tx\n", /* bad NSpid */
        "Uid:\t0\t0\t0\t0\nNSpid:\t\n",      /* empty NSpid */
        "Uid:\t0\t0\t0\t0\nNSpid:\t0\n",     /* pid 0 */
        "Uid:\t-1\t0\t0\t0\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vg_proc q = {0};
        assert_int_equal(vg_proc_parse_status(bad[i], strlen(bad[i]), &q), -EINVAL);
        assert_int_equal(q.known, 0);
        assert_null(q.nspid);
    }
    /* SigIgn: the signals ignored, SIGHUP as bit 0 (nohup); absent leaves it unknown */
    const char *ign = "Uid:\t0\t0\t0\t0\nSigIgn:\t0000000000001001\n";
    assert_int_equal(vg_proc_parse_status(ign, strlen(ign), &p), 0);
    assert_true(p.known & VG_PROC_K_SIGIGN);
    assert_int_equal(p.sig_ignored, 0x1001);
    vg_proc_release(&p);
    assert_int_equal(vg_proc_parse_status(old, strlen(old), &p), 0);
    assert_false(p.known & VG_PROC_K_SIGIGN);
    vg_proc_release(&p);
    const char *badign[] = {"Uid:\t0\t0\t0\t0\nSigIgn:\tzz\n", "Uid:\t0\t0\t0\t0\nSigIgn:\t\n",
                            "Uid:\t0\t0\t0\t0\nSigIgn:\t00000000000000001\n"};
    for (size_t i = 0; i < sizeof(badign) / sizeof(badign[0]); i++) {
        struct vg_proc q = {0};
        assert_int_equal(vg_proc_parse_status(badign[i], strlen(badign[i]), &q), -EINVAL);
        assert_int_equal(q.known, 0);
    }
    /* "Uid:" must start a line; a field named XUid: is not it */
    const char *x = "XUid:\t5\nUid:\t7\t7\t7\t7\n";
    assert_int_equal(vg_proc_parse_status(x, strlen(x), &p), 0);
    assert_int_equal(p.uid, 7);
    vg_proc_release(&p);
}

/* ---- cmdline ---------------------------------------------------------------------------- */

static void test_cmdline(void **state)
{
    (void)state;
    struct vg_proc p = {0};
    static const char a[] = "python\0train.py\0--lr\0"
                            "0.1";
    assert_int_equal(vg_proc_parse_cmdline(a, sizeof(a) - 1, &p), 0); /* no final NUL */
    assert_string_equal(p.cmdline, "python train.py --lr 0.1");
    assert_int_equal(vg_proc_parse_cmdline(a, sizeof(a), &p), 0); /* with final NUL */
    assert_string_equal(p.cmdline, "python train.py --lr 0.1");

    /* empty: known and "" */
    vg_proc_release(&p);
    assert_int_equal(vg_proc_parse_cmdline("", 0, &p), 0);
    assert_non_null(p.cmdline);
    assert_string_equal(p.cmdline, "");
    assert_true(p.known & VG_PROC_K_CMDLINE);

    /* setproctitle padding dropped; empty arguments kept; odd bytes kept as they are */
    static const char b[] = "postgres: writer\0\0\0\0";
    assert_int_equal(vg_proc_parse_cmdline(b, sizeof(b) - 1, &p), 0);
    assert_string_equal(p.cmdline, "postgres: writer");
    static const char c[] = "a\0\0b\0\x1b[31m\xff\n\0";
    assert_int_equal(vg_proc_parse_cmdline(c, sizeof(c) - 1, &p), 0);
    assert_string_equal(p.cmdline, "a  b \x1b[31m\xff\n");
    vg_proc_release(&p);

    /* huge: exactly the maximum is fine, one byte more is -E2BIG and stays unknown */
    size_t big = VG_PROC_CMDLINE_MAX + 1;
    char *h = malloc(big);
    assert_non_null(h);
    memset(h, 'x', big);
    for (size_t i = 100; i < big; i += 100)
        h[i] = '\0';
    assert_int_equal(vg_proc_parse_cmdline(h, big, &p), -E2BIG);
    assert_null(p.cmdline);
    assert_int_equal(p.known, 0);
    assert_int_equal(vg_proc_parse_cmdline(h, big - 1, &p), 0);
    assert_int_equal(strlen(p.cmdline), big - 1); /* inner NULs became spaces */
    vg_proc_release(&p);
    free(h);
}

/* ---- environ ---------------------------------------------------------------------------- */

static void test_environ(void **state)
{
    (void)state;
    struct vg_proc p = {0};
    static const char e[] = "HOME=/root\0"
                            "CUDA_VISIBLE_DEVICES_X=1\0"
                            "XCUDA_VISIBLE_DEVICES=2\0"
                            "AWS_SECRET_ACCESS_KEY=hunter2\0"
                            "noequals\0"
                            "=novalue\0"
                            "LOCAL_RANK=3\0"
                            "CUDA_DEVICE_ORDER=\0"
                            "LOCAL_RANK=9\0"
                            "RANK\0"
                            "CUDA_VISIBLE_DEVICES=GPU-1234,1"; /* last entry, no final NUL */
    assert_int_equal(vg_proc_parse_environ(e, sizeof(e) - 1, &p), 0);
    assert_true(p.known & VG_PROC_K_ENV);
    assert_string_equal(p.env[VG_ENV_CUDA_VISIBLE_DEVICES], "GPU-1234,1");
    assert_string_equal(p.env[VG_ENV_LOCAL_RANK], "3"); /* first wins, as getenv */
    assert_non_null(p.env[VG_ENV_CUDA_DEVICE_ORDER]);
    assert_string_equal(p.env[VG_ENV_CUDA_DEVICE_ORDER], ""); /* set but empty */
    for (int v = 0; v < VG_ENV_COUNT; v++)
        if (v != VG_ENV_CUDA_VISIBLE_DEVICES && v != VG_ENV_LOCAL_RANK &&
            v != VG_ENV_CUDA_DEVICE_ORDER)
            assert_null(p.env[v]);

    /* only a look-alike: nothing kept */
    static const char f[] = "CUDA_VISIBLE_DEVICES_X=1\0CUDA_VISIBLE_DEVICE=1\0";
    assert_int_equal(vg_proc_parse_environ(f, sizeof(f) - 1, &p), 0);
    for (int v = 0; v < VG_ENV_COUNT; v++)
        assert_null(p.env[v]);

    /* the final entry parses with and without its NUL; empty environ is known and empty */
    static const char g[] = "RANK=0\0WORLD_SIZE=8";
    assert_int_equal(vg_proc_parse_environ(g, sizeof(g), &p), 0);
    assert_string_equal(p.env[VG_ENV_WORLD_SIZE], "8");
    assert_int_equal(vg_proc_parse_environ(g, sizeof(g) - 1, &p), 0);
    assert_string_equal(p.env[VG_ENV_WORLD_SIZE], "8");
    assert_string_equal(p.env[VG_ENV_RANK], "0");
    assert_int_equal(vg_proc_parse_environ("", 0, &p), 0);
    assert_null(p.env[VG_ENV_RANK]);
    vg_proc_release(&p);

    assert_string_equal(vg_env_name(VG_ENV_CUDA_VISIBLE_DEVICES), "CUDA_VISIBLE_DEVICES");
    assert_string_equal(vg_env_name(VG_ENV_HOSTNAME), "HOSTNAME");
    assert_null(vg_env_name(VG_ENV_COUNT));
}

/* ---- cgroup ----------------------------------------------------------------------------- */

struct cg_case {
    const char *name, *text, *cgroup, *cid, *pod;
};

static void test_cgroup(void **state)
{
    (void)state;
    const struct cg_case cases[] = {
        {"docker v1 cgroupfs",
         "12:pids:/docker/" CID "\n11:memory:/docker/" CID "\n1:name=systemd:/docker/" CID "\n",
         "/docker/" CID, CID, NULL},
        {"docker systemd v2", "0::/system.slice/docker-" CID ".scope\n",
         "/system.slice/docker-" CID ".scope", CID, NULL},
        {"k8s containerd systemd driver",
         "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_US
         ".slice/cri-containerd-" CID ".scope\n",
         "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_US
         ".slice/cri-containerd-" CID ".scope",
         CID, POD},
        {"k8s guaranteed pod slice",
         "0::/kubepods.slice/kubepods-pod" POD_US ".slice/cri-containerd-" CID ".scope\n", NULL,
         CID, POD},
        {"cri-o",
         "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" POD_US
         ".slice/crio-" CID ".scope\n",
         NULL, CID, POD},
        {"cri-o conmon is not the container", "0::/machine.slice/crio-conmon-" CID ".scope\n",
         "/machine.slice/crio-conmon-" CID ".scope", NULL, NULL},
        {"podman",
         "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID
         ".scope/container\n",
         NULL, CID, NULL},
        {"k8s cgroupfs driver v1",
         "12:memory:/kubepods/burstable/pod" POD "/" CID "\n11:cpu:/kubepods/burstable/pod" POD
         "/" CID "\n",
         "/kubepods/burstable/pod" POD "/" CID, CID, POD},
        {"k8s cgroupfs guaranteed", "3:cpuset:/kubepods/pod" POD "/" CID "\n", NULL, CID, POD},
        {"user slice v2, nothing", "0::/user.slice/user-1000.slice/session-3.scope\n",
         "/user.slice/user-1000.slice/session-3.scope", NULL, NULL},
        {"v2 root in a cgroup namespace", "0::/\n", "/", NULL, NULL},
        {"hybrid: v2 path wins when nothing is named",
         "12:memory:/user.slice\n1:name=systemd:/user.slice/session-1.scope\n0::/user.slice/x\n",
         "/user.slice/x", NULL, NULL},
        {"v1 without names: first path", "5:memory:/a\n4:cpu:/b\n", "/a", NULL, NULL},
        {"hybrid: id named in v1 only", "0::/\n12:memory:/docker/" CID "\n", "/docker/" CID, CID,
         NULL},
        {"docker in docker: innermost", "0::/docker/" CID "/docker/" CID2 "\n", NULL, CID2, NULL},
        {"short hex is no id", "0::/docker/3f1c2d4e5a6b\n", NULL, NULL, NULL},
        {"64 hex outside docker/kubepods is no id", "0::/system.slice/" CID "\n", NULL, NULL, NULL},
        {"no final newline", "0::/system.slice/docker-" CID ".scope", NULL, CID, NULL},
        {"empty", "", NULL, NULL, NULL},
        {"pod without container (pause)", "0::/kubepods.slice/kubepods-pod" POD_US ".slice\n", NULL,
         NULL, POD},
        {"bad pod uid", "0::/kubepods.slice/kubepods-podxyz.slice\n", NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct cg_case *c = &cases[i];
        struct vg_proc p = {0};
        print_message("cgroup: %s\n", c->name);
        assert_int_equal(vg_proc_parse_cgroup(c->text, strlen(c->text), &p), 0);
        assert_true(p.known & VG_PROC_K_CGROUP);
        if (c->cgroup)
            assert_string_equal(p.cgroup, c->cgroup);
        if (c->cid)
            assert_string_equal(p.container_id, c->cid);
        else
            assert_null(p.container_id);
        if (c->pod)
            assert_string_equal(p.pod_uid, c->pod);
        else
            assert_null(p.pod_uid);
        vg_proc_release(&p);
    }
    struct vg_proc p = {0};
    const char *bad = "0::/ok\nnocolons\n";
    assert_int_equal(vg_proc_parse_cgroup(bad, strlen(bad), &p), -EINVAL);
    assert_int_equal(p.known, 0);
    const char *colon = "1:name=systemd:/a:b\n";
    assert_int_equal(vg_proc_parse_cgroup(colon, strlen(colon), &p), 0);
    assert_string_equal(p.cgroup, "/a:b");
    vg_proc_release(&p);
}

/* ---- maps ------------------------------------------------------------------------------- */

static unsigned maps_libs(const char *path)
{
    char line[1024];
    int k = snprintf(
        line, sizeof(line),
        "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 1234567                    %s\n", path);
    assert_true(k > 0 && (size_t)k < sizeof(line));
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_maps(line, (size_t)k, &p), 0);
    assert_true(p.known & VG_PROC_K_MAPS);
    return p.libs;
}

static void test_maps(void **state)
{
    (void)state;
    const struct {
        const char *path;
        unsigned libs;
    } cases[] = {
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", VG_LIB_CUDA},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", VG_LIB_CUDA},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 (deleted)", VG_LIB_CUDA},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.1.bak", 0},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.1-old", 0},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.", 0},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.1..2", 0},
        {"/usr/lib/x86_64-linux-gnu/mylibcuda.so.1", 0},
        {"/opt/libcuda.so.1/not-a-lib.so", 0},
        {"/home/me/my dir/libcuda.so.1", VG_LIB_CUDA},
        {"/usr/local/cuda/lib64/libcudart.so.12.1.105", VG_LIB_CUDART},
        {"/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12", VG_LIB_CUDART},
        {"/site-packages/torch/lib/libcudart-e409450e.so.11.0", VG_LIB_CUDART},
        {"/usr/local/cuda/lib64/libcudart_static.a", 0},
        {"/site-packages/nvidia/nccl/lib/libnccl.so.2", VG_LIB_NCCL},
        {"/usr/lib/libnccl.so.2.18.3", VG_LIB_NCCL},
        {"/usr/lib/libnccl.so.3", 0},
        {"/site-packages/torch/lib/libtorch_cuda.so", VG_LIB_TORCH_CUDA},
        {"/site-packages/torch/lib/libtorch_cuda.so.bak", 0},
        {"/site-packages/torch/lib/libtorch_cpu.so", 0},
        {"/site-packages/tensorflow/libtensorflow_framework.so.2", VG_LIB_TENSORFLOW},
        {"/site-packages/tensorflow/python/_pywrap_tensorflow_internal.so", VG_LIB_TENSORFLOW},
        {"/site-packages/jaxlib/xla_extension.so", VG_LIB_JAX},
        {"/site-packages/jaxlib/libjax_common.so", VG_LIB_JAX},
        {"/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so", VG_LIB_JAX},
        {"/site-packages/jax_cuda12_plugin/_linalg.so", VG_LIB_JAX},
        {"/site-packages/jaxlib/cuda/_versions.cpython-311-x86_64-linux-gnu.so", VG_LIB_JAX},
        {"/site-packages/jaxlib/cpu/_lapack.so", 0},
        {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", VG_LIB_NVML},
        {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05", VG_LIB_NVML},
        {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1.bak", 0},
        {"[heap]", 0},
        {"[stack]", 0},
        {"libcuda.so.1", 0}, /* not an absolute path */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        print_message("maps: %s\n", cases[i].path);
        assert_int_equal(maps_libs(cases[i].path), cases[i].libs);
    }

    const char *m = "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /usr/bin/python3.11\n"
                    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
                    "7f0000001000-7f0000002000 rw-p 00000000 00:00 0\n"
                    "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 99 /lib/libcuda.so.1 (deleted)\n"
                    "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 99 /lib/libnccl.so.2\n"
                    "\n"
                    "7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]";
    struct vg_proc p = {0};
    assert_int_equal(vg_proc_parse_maps(m, strlen(m), &p), 0);
    assert_int_equal(p.libs, VG_LIB_CUDA | VG_LIB_NCCL);
    p.known = 0;
    const char *bad = "7f1c2a000000-7f1c2a200000 r-xp 00000000\n";
    assert_int_equal(vg_proc_parse_maps(bad, strlen(bad), &p), -EINVAL);
    assert_int_equal(p.known, 0);
    assert_int_equal(vg_proc_parse_maps("", 0, &p), 0);
    assert_int_equal(p.libs, 0);

    assert_string_equal(vg_lib_name(VG_LIB_CUDA), "cuda");
    assert_string_equal(vg_lib_name(VG_LIB_TORCH_CUDA), "torch");
    assert_string_equal(vg_lib_name(VG_LIB_NVML), "nvml");
    assert_null(vg_lib_name(VG_LIB_CUDA | VG_LIB_NCCL));
}

/* ---- names in --dev DIR, /proc/devices ------------------------------------------------ */

static void test_node_names(void **state)
{
    (void)state;
    const struct {
        const char *name;
        int hit;
        enum vg_dev_kind kind;
        unsigned minor;
    } cases[] = {
        {"nvidia0", 1, VG_DEV_GPU, 0},
        {"nvidia15", 1, VG_DEV_GPU, 15},
        {"nvidia253", 1, VG_DEV_GPU, 253},
        {"nvidia254", 1, VG_DEV_OTHER, 0}, /* the driver's numbering: modeset's minor */
        {"nvidia255", 1, VG_DEV_OTHER, 0},
        {"nvidia1000", 1, VG_DEV_OTHER, 0},
        {"nvidiactl", 1, VG_DEV_CTL, 0},
        {"nvidia-uvm", 1, VG_DEV_UVM, 0},
        {"nvidia-uvm-tools", 1, VG_DEV_UVM, 0},
        {"nvidia-modeset", 1, VG_DEV_OTHER, 0},
        {"nvidia-caps", 1, VG_DEV_OTHER, 0},
        {"nvidia01", 1, VG_DEV_OTHER, 0},
        {"nvidia0x", 1, VG_DEV_OTHER, 0},
        {"nvidia99999999999999999999", 1, VG_DEV_OTHER, 0},
        {"nvidia0 (deleted)", 1, VG_DEV_OTHER, 0},
        {"nvidia", 1, VG_DEV_OTHER, 0},
        {"nvidi", 0, VG_DEV_NONE, 0},
        {"null", 0, VG_DEV_NONE, 0},
        {"xnvidia0", 0, VG_DEV_NONE, 0},
        {"", 0, VG_DEV_NONE, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum vg_dev_kind kind = (enum vg_dev_kind)77;
        unsigned minor = 77;
        print_message("node name: '%s'\n", cases[i].name);
        int hit = vg_proc_parse_node_name(cases[i].name, strlen(cases[i].name), &kind, &minor);
        assert_int_equal(hit, cases[i].hit);
        assert_int_equal(kind, cases[i].kind);
        assert_int_equal(minor, cases[i].minor);
    }
    /* the length is respected: "nvidia12" cut to 7 bytes is nvidia1 */
    enum vg_dev_kind kind;
    unsigned minor;
    assert_int_equal(vg_proc_parse_node_name("nvidia12", 7, &kind, &minor), 1);
    assert_int_equal(kind, VG_DEV_GPU);
    assert_int_equal(minor, 1);
}

static void test_devices(void **state)
{
    (void)state;
    struct vg_dev_majors m;
    /* a host with the driver: the frontend wins over "nvidia", both may be listed */
    static const char host[] = "Character devices:\n  1 mem\n  4 /dev/vc/0\n 10 misc\n"
                               "195 nvidia-frontend\n195 nvidia\n226 drm\n"
                               "234 nvidia-nvswitch\n235 nvidia-caps-imex-channels\n"
                               "236 nvidia-nvlink\n237 nvidia-caps\n510 nvidia-uvm\n\n"
                               "Block devices:\n  7 loop\n509 nvidia\n";
    assert_int_equal(vg_proc_parse_devices(host, sizeof(host) - 1, &m), 0);
    assert_int_equal(m.nvidia, 195);
    assert_int_equal(m.uvm, 510);
    assert_int_equal(m.other[0], 237); /* nvidia-caps */
    assert_int_equal(m.other[1], 235);
    assert_int_equal(m.other[2], 236);
    assert_int_equal(m.other[3], 234);
    /* only "nvidia", at another major; a block device of the same name is no character one */
    static const char plain[] = "Character devices:\n241 nvidia\n\nBlock devices:\n195 nvidia";
    assert_int_equal(vg_proc_parse_devices(plain, sizeof(plain) - 1, &m), 0);
    assert_int_equal(m.nvidia, 241);
    assert_int_equal(m.uvm, 0);
    /* no driver (this project's test machines): nothing listed, no error */
    static const char none[] = "Character devices:\n  1 mem\n  5 /dev/tty\n";
    assert_int_equal(vg_proc_parse_devices(none, sizeof(none) - 1, &m), 0);
    assert_int_equal(m.nvidia, 0);
    /* malformed lines are skipped; majors are 1..4095 */
    static const char odd[] = "Character devices:\n0 nvidia\n4096 nvidia-uvm\nx nvidia-caps\n"
                              "  12nvidia-caps\n 99999999999999999999 nvidia\n"
                              "300 nvidia-uvm \n301 nvidia-uvm";
    assert_int_equal(vg_proc_parse_devices(odd, sizeof(odd) - 1, &m), 0);
    assert_int_equal(m.nvidia, 0);
    assert_int_equal(m.uvm, 301);
    assert_int_equal(m.other[0], 0);
    /* not /proc/devices at all */
    assert_int_equal(vg_proc_parse_devices("195 nvidia\n", 11, &m), -EINVAL);
    assert_int_equal(m.nvidia, 0);
    assert_int_equal(vg_proc_parse_devices("", 0, &m), -EINVAL);
}

/* ---- garbage in, no crash out (ASan catches reads past the buffer) ---------------------- */

static void test_parsers_garbage(void **state)
{
    (void)state;
    static const char alphabet[] = "()0123456789 \n\t:=/-_.abcdefSZDR"
                                   "\0";
    unsigned seed = 12345;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(rand_r(&seed) % 300);
        /* an exact-size heap buffer, so that reading one byte too far is caught */
        char *buf = malloc(len ? len : 1);
        assert_non_null(buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
        struct vg_proc p = {0};
        vg_proc_parse_stat(buf, len, &p);
        vg_proc_parse_status(buf, len, &p);
        vg_proc_parse_cmdline(buf, len, &p);
        vg_proc_parse_environ(buf, len, &p);
        vg_proc_parse_cgroup(buf, len, &p);
        vg_proc_parse_maps(buf, len, &p);
        enum vg_dev_kind kind;
        unsigned minor;
        vg_proc_parse_node_name(buf, len, &kind, &minor);
        struct vg_dev_majors mj;
        vg_proc_parse_devices(buf, len, &mj);
        vg_proc_release(&p);
        free(buf);
    }
}

/* ---- the fake procfs -------------------------------------------------------------------- */

struct fake {
    char top[PATH_MAX];  /* mkdtemp */
    char proc[PATH_MAX]; /* top/proc */
    char dev[PATH_MAX];  /* top/dev: where the fake device links point */
};

/* The fake tree's fd/N are plain symlinks, so what a descriptor refers to is what the link
 * points at: these stand-ins in top/dev, matched by inode as under --dev. */
static const char *const fake_nodes[] = {
    "nvidia0",   "nvidia1",    "nvidia2",        "nvidia7",
    "nvidiactl", "nvidia-uvm", "nvidia-modeset", "nvidia-caps/nvidia-cap1"};

static void fake_dev_link(struct fake *f, int pid, int fd, const char *node)
{
    char rel[64], target[PATH_MAX];
    snprintf(rel, sizeof(rel), "%d/fd/%d", pid, fd);
    int k = snprintf(target, sizeof(target), "%s/%s", f->dev, node);
    assert_true(k > 0 && (size_t)k < sizeof(target));
    put_link(f->proc, rel, target);
}

static void fake_pid_file(struct fake *f, int pid, const char *name, const void *data, size_t n)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "%d/%s", pid, name);
    put_file(f->proc, rel, data, n);
}

static void fake_status(struct fake *f, int pid, unsigned uid)
{
    char buf[256];
    int k = snprintf(buf, sizeof(buf), "Name:\tx\nUid:\t%u\t%u\t%u\t%u\nNSpid:\t%d\n", uid, uid,
                     uid, uid, pid);
    assert_true(k > 0 && (size_t)k < sizeof(buf));
    fake_pid_file(f, pid, "status", buf, (size_t)k);
}

static void fake_task(struct fake *f, int pid, int tid, char state)
{
    char rel[64], buf[1024];
    snprintf(rel, sizeof(rel), "%d/task/%d/stat", pid, tid);
    size_t n = fmt_stat_full(buf, sizeof(buf), tid, "worker", state, 1, 0, 0, 1);
    put_file(f->proc, rel, buf, n);
}

static int fake_setup(void **state)
{
    struct fake *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->top, sizeof(f->top), "%s", "/tmp/vg-test-proc-XXXXXX");
    assert_non_null(mkdtemp(f->top));
    chmod(f->top, 0755);
    path_join(f->proc, sizeof(f->proc), f->top, "proc");
    path_join(f->dev, sizeof(f->dev), f->top, "dev");
    assert_int_equal(mkdir(f->proc, 0755), 0);
    assert_int_equal(mkdir(f->dev, 0755), 0);
    for (size_t i = 0; i < sizeof(fake_nodes) / sizeof(fake_nodes[0]); i++)
        put_str(f->dev, fake_nodes[i], "");

    /* 100: a full holder */
    put_stat(f->proc, 100, "python (train)", 'S', 1, 100, 100, 5000);
    fake_status(f, 100, 0);
    static const char cmd[] = "python\0train.py\0--gpus\0"
                              "2\0";
    fake_pid_file(f, 100, "cmdline", cmd, sizeof(cmd) - 1);
    static const char env[] = "PATH=/bin\0AWS_SECRET_ACCESS_KEY=x\0CUDA_VISIBLE_DEVICES=0,1\0"
                              "CUDA_VISIBLE_DEVICES_X=9\0LOCAL_RANK=1";
    fake_pid_file(f, 100, "environ", env, sizeof(env) - 1);
    const char *cg = "0::/system.slice/docker-" CID ".scope\n";
    fake_pid_file(f, 100, "cgroup", cg, strlen(cg));
    const char *maps =
        "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /usr/bin/python3.11\n"
        "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 2 /usr/lib/libcuda.so.535.104.05\n"
        "7f1c2b000000-7f1c2b200000 r-xp 00000000 08:01 3 /sp/torch/lib/libtorch_cuda.so\n";
    fake_pid_file(f, 100, "maps", maps, strlen(maps));
    put_link(f->proc, "100/fd/0", "/dev/pts/0");
    put_link(f->proc, "100/fd/1", "pipe:[1234]");
    fake_dev_link(f, 100, 3, "nvidiactl");
    fake_dev_link(f, 100, 4, "nvidia1");
    fake_dev_link(f, 100, 5, "nvidia0");
    fake_dev_link(f, 100, 6, "nvidia1");
    fake_dev_link(f, 100, 7, "nvidia-uvm");
    put_link(f->proc, "100/fd/8", "/dev/nvidia0"); /* the real /dev's node, if there is one */
    fake_task(f, 100, 100, 'S');
    fake_task(f, 100, 101, 'D');
    fake_task(f, 100, 102, 'Z');

    /* 200: holds nothing */
    put_stat(f->proc, 200, "bash", 'S', 1, 200, 200, 10);
    fake_status(f, 200, 0);
    put_link(f->proc, "200/fd/0", "/dev/null");

    /* 300: a holder with only stat and fd/; parent and session gone, group leader alive */
    put_stat(f->proc, 300, "orphan", 'S', 999, 300, 555, 20);
    fake_dev_link(f, 300, 3, "nvidia2");

    /* 400: a holder whose stat is missing: it exited */
    fake_dev_link(f, 400, 3, "nvidia0");
    fake_status(f, 400, 0);

    /* 500: a holder whose stat reads empty: it exited */
    fake_dev_link(f, 500, 3, "nvidia0");
    fake_pid_file(f, 500, "stat", "", 0);

    /* 600: holds nothing but NVML named it; no fd/ at all (fds unknown, not vanished) */
    put_stat(f->proc, 600, "nvml-only", 'S', 1, 600, 600, 30);
    fake_status(f, 600, 0);

    /* 650: holds nothing, empty fd/ */
    put_stat(f->proc, 650, "idle", 'S', 1, 650, 650, 35);
    {
        char p[PATH_MAX];
        path_join(p, sizeof(p), f->proc, "650/fd");
        assert_int_equal(mkdir(p, 0755), 0);
    }

    /* 700: only a deleted node (procfs's text for it; here a link to nothing) */
    put_stat(f->proc, 700, "stale", 'S', 1, 700, 700, 40);
    fake_dev_link(f, 700, 3, "nvidia0 (deleted)");

    /* 800: only nvidia-modeset (Xorg style) */
    put_stat(f->proc, 800, "Xorg", 'S', 1, 800, 800, 50);
    fake_dev_link(f, 800, 3, "nvidia-modeset");
    fake_dev_link(f, 800, 4, "nvidia-caps/nvidia-cap1");

    /* 900: a numeric regular file, not a process */
    put_str(f->proc, "900", "not a dir");

    /* 1000: a holder with a cmdline over the limit and a uid with no name */
    put_stat(f->proc, 1000, "huge", 'R', 1, 1000, 1000, 60);
    fake_status(f, 1000, 4000001);
    size_t big = VG_PROC_CMDLINE_MAX + 10;
    char *h = malloc(big);
    assert_non_null(h);
    memset(h, 'a', big);
    fake_pid_file(f, 1000, "cmdline", h, big);
    free(h);
    fake_dev_link(f, 1000, 3, "nvidia7");

    /* not processes */
    put_str(f->proc, "self/status", "Name:\ttest\nUid:\t0\t0\t0\t0\nNSpid:\t4242\t1\n");
    put_str(f->proc, "abc/stat", "x");
    put_str(f->proc, "0123/stat", "x");
    put_str(f->proc, "uptime", "1.0 1.0\n");

    *state = f;
    return 0;
}

static int fake_teardown(void **state)
{
    struct fake *f = *state;
    rm_tree(f->top);
    free(f);
    return 0;
}

static const struct vg_proc *must_find(const struct vg_proc_table *t, pid_t pid)
{
    const struct vg_proc *p = vg_proc_table_find(t, pid);
    if (!p)
        fail_msg("pid %d not in the table", (int)pid);
    return p;
}

static void test_scan_fake(void **state)
{
    struct fake *f = *state;
    pid_t want[] = {4242, 600};
    struct vg_proc_opts opts = {.proc_root = f->proc, .dev_dir = f->dev, .want = want, .nwant = 2};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_proc_scan(&opts, &t, &err);
    if (rc)
        fail_msg("scan: %s", vg_err_msg(&err));

    assert_int_equal(t.n_scanned, 11); /* 100..1000 and 650, including the file 900 */
    assert_int_equal(t.n_vanished, 2); /* 400, 500 */
    assert_int_equal(t.n_denied, 0);
    assert_int_equal(t.self_nspid_depth, 2);
    assert_int_equal(t.n, 5); /* 100, 300, 600, 800, 1000 */
    for (size_t i = 1; i < t.n; i++)
        assert_true(t.procs[i - 1].pid < t.procs[i].pid);
    assert_null(vg_proc_table_find(&t, 200));
    assert_null(vg_proc_table_find(&t, 400));
    assert_null(vg_proc_table_find(&t, 700));
    assert_null(vg_proc_table_find(&t, 4242));
    assert_null(vg_proc_table_find(&t, 1));

    const struct vg_proc *p = must_find(&t, 100);
    unsigned all = VG_PROC_K_STAT | VG_PROC_K_STATUS | VG_PROC_K_CMDLINE | VG_PROC_K_ENV |
                   VG_PROC_K_CGROUP | VG_PROC_K_MAPS | VG_PROC_K_FDS | VG_PROC_K_THREADS |
                   VG_PROC_K_USER;
    assert_int_equal(p->known, all);
    assert_string_equal(p->comm, "python (train)");
    assert_int_equal(p->state, 'S');
    assert_int_equal(p->ppid, 1);
    assert_int_equal(p->start_ticks, 5000);
    assert_int_equal(p->uid, 0);
    struct passwd *pw = getpwuid(0);
    assert_string_equal(p->user, pw ? pw->pw_name : "0");
    assert_int_equal(p->nnspid, 1);
    assert_int_equal(p->nspid[0], 100);
    assert_string_equal(p->cmdline, "python train.py --gpus 2");
    assert_string_equal(p->env[VG_ENV_CUDA_VISIBLE_DEVICES], "0,1");
    assert_string_equal(p->env[VG_ENV_LOCAL_RANK], "1");
    assert_null(p->env[VG_ENV_RANK]);
    assert_string_equal(p->container_id, CID);
    assert_null(p->pod_uid);
    assert_int_equal(p->libs, VG_LIB_CUDA | VG_LIB_TORCH_CUDA);
    assert_int_equal(p->fd_total, 8);
    /* fd/8 is /dev/nvidia0: a node by its device number, if this host has one */
    struct stat real;
    bool real_gpu0 = stat("/dev/nvidia0", &real) == 0 && S_ISCHR(real.st_mode);
    assert_int_equal(p->dev_fd_count, real_gpu0 ? 6 : 5);
    assert_int_equal(p->ndev_minors, 2);
    assert_int_equal(p->dev_minors[0], 0);
    assert_int_equal(p->dev_minors[1], 1);
    assert_true(p->has_ctl);
    assert_true(p->has_uvm);
    assert_int_equal(p->nthreads, 3);
    assert_int_equal(p->threads_d, 1);
    assert_int_equal(p->threads_live, 2);
    assert_true(p->parent_alive); /* ppid 1 */
    assert_true(p->sid_alive);
    assert_true(p->pgid_alive);

    p = must_find(&t, 300); /* missing files: unknown, not an error */
    assert_int_equal(p->known, VG_PROC_K_STAT | VG_PROC_K_FDS);
    assert_null(p->cmdline);
    assert_null(p->user);
    assert_null(p->cgroup);
    assert_int_equal(p->ndev_minors, 1);
    assert_int_equal(p->dev_minors[0], 2);
    assert_false(p->has_ctl);
    assert_false(p->parent_alive);
    assert_true(p->pgid_alive);
    assert_false(p->sid_alive);

    p = must_find(&t, 600); /* wanted, no device, fd/ missing */
    assert_false(p->known & VG_PROC_K_FDS);
    assert_true(p->known & VG_PROC_K_STATUS);
    assert_int_equal(p->dev_fd_count, 0);
    assert_null(p->dev_minors);
    assert_string_equal(p->comm, "nvml-only");

    p = must_find(&t, 800); /* other nodes only */
    assert_int_equal(p->dev_fd_count, 2);
    assert_int_equal(p->ndev_minors, 0);
    assert_false(p->has_ctl);
    assert_false(p->has_uvm);

    p = must_find(&t, 1000); /* cmdline too long: unknown, the rest known */
    assert_false(p->known & VG_PROC_K_CMDLINE);
    assert_null(p->cmdline);
    assert_true(p->known & VG_PROC_K_STAT);
    assert_string_equal(p->user, "4000001");
    assert_int_equal(p->dev_minors[0], 7);

    vg_proc_table_release(&t);
    assert_int_equal(t.n, 0);
    assert_null(t.procs);

    /* --all: every process directory that is still there */
    opts = (struct vg_proc_opts){.proc_root = f->proc, .dev_dir = f->dev, .all = true};
    vg_proc_table_init(&t);
    assert_int_equal(vg_proc_scan(&opts, &t, &err), 0);
    assert_int_equal(t.n, 8); /* 100 200 300 600 650 700 800 1000 */
    p = must_find(&t, 200);
    assert_int_equal(p->dev_fd_count, 0);
    assert_int_equal(p->fd_total, 1);
    p = must_find(&t, 700);
    assert_int_equal(p->dev_fd_count, 0);
    p = must_find(&t, 650);
    assert_true(p->known & VG_PROC_K_FDS);
    assert_int_equal(p->fd_total, 0);
    assert_int_equal(p->known & VG_PROC_K_THREADS, 0);
    vg_proc_table_release(&t);

    /* default dev_dir: the stand-ins in the fake dev dir are plain files, nodes only under
     * --dev; /dev/nvidia0 is a node wherever it is found, on a host that has one */
    opts = (struct vg_proc_opts){.proc_root = f->proc};
    vg_proc_table_init(&t);
    assert_int_equal(vg_proc_scan(&opts, &t, &err), 0);
    assert_int_equal(t.n, real_gpu0 ? 1 : 0);
    if (real_gpu0) {
        assert_int_equal(t.procs[0].pid, 100);
        assert_int_equal(t.procs[0].dev_fd_count, 1);
    }
    vg_proc_table_release(&t);
    vg_err_release(&err);
}

static void test_read_one_fake(void **state)
{
    struct fake *f = *state;
    int root = open(f->proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    struct vg_err err = VG_ERR_INIT;
    struct vg_proc p;
    assert_int_equal(vg_proc_read(root, 100, f->dev, &p, &err), 0);
    assert_int_equal(p.pid, 100);
    assert_int_equal(p.start_ticks, 5000);
    assert_int_equal(p.ndev_minors, 2);
    vg_proc_release(&p);
    assert_int_equal(vg_proc_read(root, 200, f->dev, &p, &err), 0); /* no holder: still read */
    assert_string_equal(p.comm, "bash");
    vg_proc_release(&p);
    assert_int_equal(vg_proc_read(root, 4242, f->dev, &p, &err), -ENOENT);
    assert_non_null(strstr(vg_err_msg(&err), "4242"));
    assert_int_equal(vg_proc_read(root, 400, f->dev, &p, &err), -ESRCH);
    assert_int_equal(p.known, 0);
    assert_null(p.comm);
    close(root);
    vg_err_release(&err);
}

static void test_scan_bad_root(void **state)
{
    struct fake *f = *state;
    char missing[PATH_MAX];
    path_join(missing, sizeof(missing), f->top, "nope");
    struct vg_proc_opts opts = {.proc_root = missing};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_scan(&opts, &t, &err), -ENOENT);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof(want), "cannot open '%s': No such file or directory", missing);
    assert_string_equal(vg_err_msg(&err), want);
    assert_int_equal(t.n, 0);
    vg_err_release(&err);
    /* an empty root is no error */
    char empty[PATH_MAX];
    path_join(empty, sizeof(empty), f->top, "dev");
    opts.proc_root = empty;
    assert_int_equal(vg_proc_scan(&opts, &t, &err), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(t.n_scanned, 0);
    assert_int_equal(t.self_nspid_depth, 0);
    vg_proc_table_release(&t);
}

/* Denied files: as root chmod denies nothing, so the check runs in a child that drops to
 * nobody first; as another user it runs in a child too, for one code path. */
static int denied_check(struct fake *f)
{
    struct vg_proc_opts opts = {.proc_root = f->proc, .dev_dir = f->dev};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_scan(&opts, &t, &err) != 0)
        return 10;
    int rc = 0;
    const struct vg_proc *p = vg_proc_table_find(&t, 100);
    if (!p)
        rc = 11;
    else if (p->known & VG_PROC_K_ENV)
        rc = 12; /* environ denied: unknown */
    else if (!(p->known & VG_PROC_K_CMDLINE) || !(p->known & VG_PROC_K_STAT))
        rc = 13; /* the rest still read */
    else if (p->env[VG_ENV_CUDA_VISIBLE_DEVICES])
        rc = 14;
    else if (vg_proc_table_find(&t, 1100))
        rc = 15; /* a holder whose fds are unreadable is not one we know about */
    else if (t.n_denied != 2)
        rc = 16;
    else if (t.n_fd_unread != 1 || t.nunread != 1 || t.unread[0].pid != 1100)
        rc = 17; /* the unread process is named */
    else if (!t.unread[0].uid_known || !t.unread[0].user || !t.unread[0].comm ||
             strcmp(t.unread[0].comm, "secret") != 0)
        rc = 18; /* with its owner and comm, which stay readable */
    vg_proc_table_release(&t);
    vg_err_release(&err);
    return rc;
}

static void test_scan_denied(void **state)
{
    struct fake *f = *state;
    put_stat(f->proc, 1100, "secret", 'S', 1, 1100, 1100, 70);
    fake_dev_link(f, 1100, 3, "nvidia0");
    char path[PATH_MAX];
    path_join(path, sizeof(path), f->proc, "1100/fd");
    assert_int_equal(chmod(path, 0), 0);
    path_join(path, sizeof(path), f->proc, "100/environ");
    assert_int_equal(chmod(path, 0), 0);

    if (geteuid() == 0)
        print_message("running as root: checking denied files as uid 65534 in a child\n");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0) {
            if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                _exit(2);
            prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        }
        _exit(denied_check(f));
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) != 0)
        fail_msg("denied check failed with code %d", WEXITSTATUS(st));
}

/* ---- the real /proc --------------------------------------------------------------------- */

struct real {
    char dir[PATH_MAX];
    pid_t child;
};

static int real_setup(void **state)
{
    struct real *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    snprintf(r->dir, sizeof(r->dir), "%s", "/tmp/vg-test-dev-XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    r->child = -1;
    *state = r;
    return 0;
}

static int real_teardown(void **state)
{
    struct real *r = *state;
    if (r->child > 0) {
        kill(r->child, SIGKILL);
        waitpid(r->child, NULL, 0);
    }
    rm_tree(r->dir);
    free(r);
    return 0;
}

static void test_scan_real(void **state)
{
    struct real *r = *state;
    char node[PATH_MAX];
    path_join(node, sizeof(node), r->dir, "nvidia3");
    int fd = open(node, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    int syncp[2];
    assert_int_equal(pipe2(syncp, O_CLOEXEC), 0);

    r->child = fork();
    assert_true(r->child >= 0);
    if (r->child == 0) {
        /* dup2 clears close-on-exec: the node stays open in sleep */
        if (dup2(fd, 10) < 0)
            _exit(126);
        char *argv[] = {"sleep", "30", NULL};
        char *envp[] = {"CUDA_VISIBLE_DEVICES=1", "SECRET_TOKEN=abc", NULL};
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    close(fd);
    close(syncp[1]);
    char c;
    assert_int_equal(read(syncp[0], &c, 1), 0); /* EOF: exec happened */
    close(syncp[0]);

    pid_t want[] = {getpid()};
    struct vg_proc_opts opts = {.dev_dir = r->dir, .want = want, .nwant = 1};
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_scan(&opts, &t, &err))
        fail_msg("scan: %s", vg_err_msg(&err));
    assert_true(t.n_scanned > 2);
    assert_true(t.n >= 2);

    const struct vg_proc *p = must_find(&t, r->child);
    assert_true(p->known & VG_PROC_K_STAT);
    assert_string_equal(p->comm, "sleep");
    assert_int_equal(p->ppid, getpid());
    assert_true(p->parent_alive);
    assert_int_equal(p->ndev_minors, 1);
    assert_int_equal(p->dev_minors[0], 3);
    assert_int_equal(p->dev_fd_count, 1);
    assert_string_equal(p->env[VG_ENV_CUDA_VISIBLE_DEVICES], "1");
    assert_string_equal(p->cmdline, "sleep 30");
    assert_int_equal(p->uid, getuid());
    assert_true(p->known & VG_PROC_K_USER);
    assert_int_equal(p->nthreads, 1);
    assert_int_equal(p->threads_live, 1);
    assert_int_equal(p->libs, 0);
    assert_true(p->known & VG_PROC_K_MAPS);
    assert_true(p->nnspid >= 1);
    assert_int_equal(p->nspid[0], r->child);

    p = must_find(&t, getpid()); /* wanted */
    assert_int_equal(p->ppid, getppid());
    assert_true(p->fd_total >= 3);
    assert_int_equal(p->dev_fd_count, 0);
    assert_true(p->known & VG_PROC_K_CGROUP);

    FILE *sf = fopen("/proc/self/status", "re");
    assert_non_null(sf);
    char line[256];
    bool has_nspid = false;
    while (fgets(line, sizeof(line), sf))
        if (strncmp(line, "NSpid:", 6) == 0)
            has_nspid = true;
    fclose(sf);
    if (has_nspid)
        assert_true(t.self_nspid_depth >= 1);
    vg_proc_table_release(&t);

    /* vg_proc_read on the real root, and the start time is stable */
    int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    struct vg_proc one, two;
    assert_int_equal(vg_proc_read(root, r->child, r->dir, &one, &err), 0);
    assert_int_equal(vg_proc_read(root, r->child, r->dir, &two, &err), 0);
    assert_int_equal(one.start_ticks, two.start_ticks);
    assert_int_equal(one.dev_minors[0], 3);
    vg_proc_release(&one);
    vg_proc_release(&two);

    kill(r->child, SIGKILL);
    assert_int_equal(waitpid(r->child, NULL, 0), r->child);
    assert_int_equal(vg_proc_read(root, r->child, r->dir, &one, &err), -ENOENT);
    r->child = -1;
    close(root);
    vg_err_release(&err);
}

/* ---- churn ------------------------------------------------------------------------------ */

#define CHURN_CHILDREN 2000
#define CHURN_ROUNDS 8

struct churn {
    pid_t *kids;
    size_t n;
    struct sigaction old_chld;
};

static int churn_setup(void **state)
{
    struct churn *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->kids = calloc(CHURN_CHILDREN, sizeof(*c->kids));
    assert_non_null(c->kids);
    /* SIGCHLD ignored: the kernel reaps children as they exit, so their /proc directories
     * disappear while a scan runs instead of lingering as zombies until waitpid */
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGCHLD, &sa, &c->old_chld), 0);
    *state = c;
    return 0;
}

static void churn_reap(struct churn *c, bool block)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->kids[i] <= 0)
            continue;
        pid_t w = waitpid(c->kids[i], NULL, block ? 0 : WNOHANG);
        if (w == c->kids[i] || (w < 0 && errno == ECHILD))
            c->kids[i] = 0;
    }
}

static int churn_teardown(void **state)
{
    struct churn *c = *state;
    for (size_t i = 0; i < c->n; i++)
        if (c->kids[i] > 0)
            kill(c->kids[i], SIGKILL);
    churn_reap(c, true);
    sigaction(SIGCHLD, &c->old_chld, NULL);
    free(c->kids);
    free(c);
    return 0;
}

static void test_scan_churn(void **state)
{
    struct churn *c = *state;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned seed = (unsigned)getpid();
    size_t per_round = CHURN_CHILDREN / CHURN_ROUNDS;
    size_t total_vanished = 0;
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        for (size_t k = 0; k < per_round; k++) {
            long ns = (long)(rand_r(&seed) % 40000) * 1000; /* 0 to 40 ms */
            pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) {
                struct timespec ts = {0, ns};
                nanosleep(&ts, NULL);
                _exit(0);
            }
            c->kids[c->n++] = pid;
        }
        for (int s = 0; s < 2; s++) {
            struct vg_proc_opts opts = {.all = (round + s) % 2 == 0};
            struct vg_proc_table t;
            vg_proc_table_init(&t);
            struct vg_err err = VG_ERR_INIT;
            if (vg_proc_scan(&opts, &t, &err))
                fail_msg("scan during churn: %s", vg_err_msg(&err));
            for (size_t i = 1; i < t.n; i++)
                assert_true(t.procs[i - 1].pid < t.procs[i].pid);
            for (size_t i = 0; i < t.n; i++)
                assert_true((t.procs[i].known & VG_PROC_K_STAT) || !opts.all);
            total_vanished += t.n_vanished;
            vg_proc_table_release(&t);
            vg_err_release(&err);
        }
        churn_reap(c, false);
    }
    churn_reap(c, true);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    print_message("churn: %d children, %d scans, %zu vanished mid-scan, %.2f s\n", CHURN_CHILDREN,
                  CHURN_ROUNDS * 2, total_vanished, secs);
    for (size_t i = 0; i < c->n; i++)
        assert_int_equal(c->kids[i], 0);
}

/*
 * The parent's session and namespace role, against real processes: a child of this test shares
 * its session; an orphan adopted by a subreaper that leads another session (as systemd --user
 * does) shows that session, which is how orphan-holder tells it from a worker of a live job.
 * The orphan outlives its first parent on purpose, so it has no PDEATHSIG: it exits when the
 * test closes the write end of `life` (or dies), and the subreaper dies with the test.
 */
static pid_t ppid_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *e = strrchr(buf, ')');
    int ppid;
    return e && sscanf(e + 1, " %*c %d", &ppid) == 1 ? ppid : -1;
}

/* In a child: hold node open, send our pid on ready, and exit at EOF on life. */
static _Noreturn void hold_node(const char *node, int ready, int life)
{
    int nfd = open(node, O_RDONLY);
    pid_t me = getpid();
    if (nfd < 0 || write(ready, &me, sizeof(me)) != sizeof(me))
        _exit(1);
    char c;
    while (read(life, &c, 1) > 0)
        ;
    _exit(0);
}

/* The PID namespace of a procfs: the real one by the same inode fact the kernel fixes; a fake
 * tree where no namespace link can be followed is unknown, unless PID 2 is kthreadd. */
static void test_pidns(void **state)
{
    (void)state;
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    char link[64] = "";
    ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
    if (n > 0)
        link[n] = '\0';
    enum vg_proc_pidns ns = vg_proc_pidns_read(fd, 1);
    if (strcmp(link, "pid:[4026531836]") == 0)
        assert_int_equal(ns, VG_PROC_PIDNS_INITIAL);
    else if (n > 0)
        assert_int_not_equal(ns, VG_PROC_PIDNS_UNKNOWN);
    close(fd);
    assert_string_equal(vg_proc_pidns_id(VG_PROC_PIDNS_INITIAL), "initial");
    assert_string_equal(vg_proc_pidns_id(VG_PROC_PIDNS_NESTED), "nested");
    assert_null(vg_proc_pidns_id(VG_PROC_PIDNS_UNKNOWN));

    char dir[] = "/tmp/vg-pidns-XXXXXX", path[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(vg_proc_pidns_read(fd, 1), VG_PROC_PIDNS_UNKNOWN);
    /* a user-space process named kthreadd under PID 2 lacks PF_KTHREAD: still unknown */
    snprintf(path, sizeof(path), "%s/2", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/2/stat", dir);
    FILE *s = fopen(path, "w");
    assert_non_null(s);
    fprintf(s, "2 (kthreadd) S 0 0 0 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n");
    fclose(s);
    assert_int_equal(vg_proc_pidns_read(fd, 1), VG_PROC_PIDNS_UNKNOWN);
    s = fopen(path, "w");
    assert_non_null(s);
    fprintf(s, "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n");
    fclose(s);
    assert_int_equal(vg_proc_pidns_read(fd, 1), VG_PROC_PIDNS_INITIAL);
    close(fd);
    rm_tree(dir);
}

static void test_parent_session(void **state)
{
    (void)state;
    char dir[] = "/tmp/vg-parent-XXXXXX", node[64];
    assert_non_null(mkdtemp(dir));
    snprintf(node, sizeof(node), "%s/nvidia0", dir);
    int fd = open(node, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    int ready[2], life[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(life, O_CLOEXEC), 0);

    pid_t r = fork();
    assert_true(r >= 0);
    if (r == 0) {
        /* R: a subreaper leading its own session */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(life[1]);
        if (setsid() < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
            _exit(1);
        pid_t i = fork();
        if (i == 0) {
            /* I: starts the job's session, forks the worker K, and dies */
            setsid();
            pid_t k = fork();
            if (k == 0)
                hold_node(node, ready[1], life[0]);
            _exit(k > 0 ? 0 : 1);
        }
        for (;;)
            if (wait(NULL) < 0 && errno == ECHILD)
                pause();
    }
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(life[1]);
        hold_node(node, ready[1], life[0]);
    }
    close(ready[1]);
    close(life[0]);
    /* both C and K say when they hold the node, in either order */
    pid_t k = 0, got[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(read(ready[0], &got[i], sizeof(got[i])), (ssize_t)sizeof(got[i]));
        if (got[i] != c)
            k = got[i];
    }
    assert_true(k > 0 && (got[0] == c || got[1] == c));
    close(ready[0]);
    /* I exits right after forking K: bounded wait for K to be adopted by R */
    for (int i = 0; i < 1000 && ppid_of(k) != r; i++)
        usleep(10 * 1000);
    assert_int_equal(ppid_of(k), r);

    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_err err = VG_ERR_INIT;
    pid_t want = getpid();
    struct vg_proc_opts o = {.dev_dir = dir, .want = &want, .nwant = 1};
    assert_int_equal(vg_proc_scan(&o, &t, &err), 0);
    const struct vg_proc *p = vg_proc_table_find(&t, k);
    assert_non_null(p);
    assert_int_equal(p->ppid, r);
    assert_true(p->parent_alive);
    assert_true(p->parent_known);
    assert_int_equal(p->parent_sid, r);
    assert_true(p->sid != r);
    assert_false(p->sid_alive); /* I, its session leader, is gone */
    assert_false(p->parent_ns_init);
    /* a plain child of this test: its parent (us) is in its session */
    p = vg_proc_table_find(&t, c);
    assert_non_null(p);
    assert_int_equal(p->ppid, getpid());
    assert_true(p->parent_known);
    assert_int_equal(p->sid, getsid(0));
    assert_int_equal(p->parent_sid, getsid(0));
    assert_false(p->parent_ns_init);
    vg_proc_table_release(&t);

    close(life[1]);
    kill(r, SIGKILL);
    assert_int_equal(waitpid(r, NULL, 0), r);
    assert_int_equal(waitpid(c, NULL, 0), c);
    unlink(node);
    rmdir(dir);
}

/* net/tcp and net/tcp6 text: the LISTEN sockets (state 0A) on one port, by local port only. */
static void test_parse_tcp_listen(void **state)
{
    (void)state;
    static const char tcp[] =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:4D7B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
        "0 31337 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:4D7B 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        "
        "0 31338 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
        "0 2222 1 0000000000000000 100 0 0 10 0\n"
        "   3: garbage\n";
    static const char tcp6[] =
        "  sl  local_address                         remote_address                        st "
        "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000000000000000000001000000:4D7B 00000000000000000000000000000000:0000 0A "
        "00000000:00000000 00:00000000 00000000   65534        0 4242 1 0000000000000000 100 0 0 "
        "10 0\n";
    uint64_t ino[4];
    size_t n = 0;
    /* 0x4D7B = 19835: the listener, not the connection on the same port */
    assert_int_equal(vg_proc_parse_tcp_listen(tcp, strlen(tcp), 19835, ino, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ino[0], 31337);
    assert_int_equal(vg_proc_parse_tcp_listen(tcp, strlen(tcp), 22, ino, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ino[0], 2222);
    assert_int_equal(vg_proc_parse_tcp_listen(tcp, strlen(tcp), 9835, ino, 4, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(vg_proc_parse_tcp_listen(tcp6, strlen(tcp6), 19835, ino, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ino[0], 4242);
    /* no room: said, not cut short silently */
    assert_int_equal(vg_proc_parse_tcp_listen(tcp, strlen(tcp), 19835, ino, 0, &n), -E2BIG);
}

/* fdinfo: the open flags (O_PATH told apart) and an io_uring's registered files (issue 27). */
struct ring_seen {
    char paths[4][64];
    size_t n;
};

static int ring_file(void *arg, const char *path, size_t len)
{
    struct ring_seen *r = arg;
    if (r->n == 4 || len >= sizeof(r->paths[0]))
        return -E2BIG;
    memcpy(r->paths[r->n], path, len);
    r->paths[r->n++][len] = '\0';
    return 0;
}

static void test_parse_fdinfo(void **state)
{
    (void)state;
    uint64_t fl = 0;
    const char *opath = "pos:\t0\nflags:\t012000000\nmnt_id:\t17\nino:\t5\n";
    assert_int_equal(vg_proc_parse_fdinfo_flags(opath, strlen(opath), &fl), 0);
    assert_int_equal(fl, 012000000);
    assert_true(fl & O_PATH);
    const char *rd = "pos:\t0\nflags:\t02100000\nmnt_id:\t17\n";
    assert_int_equal(vg_proc_parse_fdinfo_flags(rd, strlen(rd), &fl), 0);
    assert_false(fl & O_PATH);
    static const char *const bad[] = {"pos:\t0\n", "flags:\t\n", "flags:\t0128\n",
                                      "flags:\t7777777777777777777777777\n", "xflags:\t0\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(vg_proc_parse_fdinfo_flags(bad[i], strlen(bad[i]), &fl), -EINVAL);

    const char *ring = "pos:\t0\nflags:\t02000002\nSqMask:\t0x3\nUserFiles:\t3\n"
                       "    0: /dev/nvidia1\n    1: <none>\n   12: nvidiactl\nUserBufs:\t0\n";
    struct ring_seen r = {0};
    assert_int_equal(vg_proc_parse_uring_files(ring, strlen(ring), ring_file, &r), 0);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.paths[0], "/dev/nvidia1");
    assert_string_equal(r.paths[1], "nvidiactl"); /* an older kernel's last name only */
    memset(&r, 0, sizeof(r));
    assert_int_equal(vg_proc_parse_uring_files(rd, strlen(rd), ring_file, &r), 0); /* no ring */
    assert_int_equal(r.n, 0);
    /* a list the kernel cut short stands as far as it goes; a malformed one fails */
    const char *cut = "UserFiles:\t5\n    0: /dev/nvidia0\n";
    assert_int_equal(vg_proc_parse_uring_files(cut, strlen(cut), ring_file, &r), 0);
    assert_int_equal(r.n, 1);
    static const char *const rbad[] = {"UserFiles:\tx\n", "UserFiles:\t\n",
                                       "UserFiles:\t1\n    0 /dev/x\n", "UserFiles:\t1",
                                       "UserFiles:\t1\n    a: /dev/x\n"};
    for (size_t i = 0; i < sizeof(rbad) / sizeof(rbad[0]); i++) {
        memset(&r, 0, sizeof(r));
        assert_int_equal(vg_proc_parse_uring_files(rbad[i], strlen(rbad[i]), ring_file, &r),
                         -EINVAL);
    }
    /* what fn returns stops the walk and comes back */
    memset(&r, 0, sizeof(r));
    r.n = 4;
    assert_int_equal(vg_proc_parse_uring_files(ring, strlen(ring), ring_file, &r), -E2BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_basic),
        cmocka_unit_test(test_stat_hostile_comm),
        cmocka_unit_test(test_stat_malformed),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_cmdline),
        cmocka_unit_test(test_environ),
        cmocka_unit_test(test_cgroup),
        cmocka_unit_test(test_maps),
        cmocka_unit_test(test_node_names),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_parsers_garbage),
        cmocka_unit_test_setup_teardown(test_scan_fake, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_read_one_fake, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_scan_bad_root, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_scan_denied, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_scan_real, real_setup, real_teardown),
        cmocka_unit_test_setup_teardown(test_scan_churn, churn_setup, churn_teardown),
        cmocka_unit_test(test_pidns),
        cmocka_unit_test(test_parent_session),
        cmocka_unit_test(test_parse_tcp_listen),
        cmocka_unit_test(test_parse_fdinfo),
    };
    /* The fake trees link to /dev/null: their removal must leave the host's node as it was. */
    struct stat before, after;
    if (stat("/dev/null", &before) != 0)
        before.st_mode = 0;
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (before.st_mode && (stat("/dev/null", &after) != 0 || after.st_mode != before.st_mode)) {
        fprintf(stderr, "test_proc: /dev/null's mode changed from %o to %o\n",
                (unsigned)before.st_mode & 07777, (unsigned)after.st_mode & 07777);
        failed++;
    }
    return failed;
}
