/*
 * Unit tests for the sampler (src/model/sampler.c) and the cross-scan process cache it uses
 * (src/proc/cache.c):
 *  - the cache on a fake procfs: a second scan reuses stable details (hits), a PID reused with
 *    another start time or an exec (another comm) is read afresh, maps are re-read when the
 *    NVIDIA descriptors change, a new uid gets its own name, entries of exited processes go;
 *  - the sampler against the fake driver and a real child holding a fake device node: NVML
 *    and /proc joined, per-process utilisation read, cache hits on the second sample;
 *  - a hung driver call (the fake's hang injection): the sample returns after the deadline with
 *    hung set and the /proc side intact, the next one does not queue behind the stuck call,
 *    and a short hang is followed by recovery.
 *
 * The fake driver's environment (FAKE_NVML_SCENARIO, FAKE_NVML_LOG) is set once for the whole
 * binary and never changed, because an abandoned worker may still be calling into the fake.
 * No test depends on timing: waits are bounded polls, and time limits are generous.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/sampler.h"
#include "proc/proc.h"

#define FAKE_FULL VG_TEST_BUILD_DIR "/fake-nvml/full/libnvidia-ml.so.1"
#define GiB (1ull << 30)

static char g_top[256];     /* mkdtemp */
static char g_scenario[512]; /* g_top/scenario */
static char g_log[512];      /* g_top/log */
static char g_dev[512];      /* g_top/dev: nvidia0, nvidia1, nvidiactl */
static char g_proc[512];     /* g_top/proc: the fake procfs */

/* ---- files ------------------------------------------------------------------------------ */

static void mkdirs_for(char *path, size_t from)
{
    for (char *s = path + from; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(path, 0755) < 0)
                assert_int_equal(errno, EEXIST);
            *s = '/';
        }
    }
}

/* Write root/rel atomically (tmp + rename), creating directories. */
static void put(const char *root, const char *rel, const char *data, size_t len)
{
    char path[PATH_MAX - 8], tmp[PATH_MAX];
    int k = snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_true(k > 0 && (size_t)k < sizeof(path));
    mkdirs_for(path, strlen(root) + 1);
    k = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_true(k > 0 && (size_t)k < sizeof(tmp));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void puts_(const char *root, const char *rel, const char *s)
{
    put(root, rel, s, strlen(s));
}

static void link_(const char *root, const char *rel, const char *target)
{
    char path[PATH_MAX];
    int k = snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_true(k > 0 && (size_t)k < sizeof(path));
    mkdirs_for(path, strlen(root) + 1);
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void scenario(const char *text)
{
    puts_(g_top, "scenario", text);
}

static size_t count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Empty the fake's call log (it may not exist yet). */
static void reset_log(void)
{
    int fd = open(g_log, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int group_setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    int k = snprintf(g_top, sizeof(g_top), "%s/vg-sampler-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (k < 0 || (size_t)k >= sizeof(g_top) || !mkdtemp(g_top))
        return -1;
    snprintf(g_scenario, sizeof(g_scenario), "%s/scenario", g_top);
    snprintf(g_log, sizeof(g_log), "%s/log", g_top);
    snprintf(g_dev, sizeof(g_dev), "%s/dev", g_top);
    snprintf(g_proc, sizeof(g_proc), "%s/proc", g_top);
    if (mkdir(g_dev, 0755) < 0 || mkdir(g_proc, 0755) < 0)
        return -1;
    puts_(g_dev, "nvidia0", "");
    puts_(g_dev, "nvidia1", "");
    puts_(g_dev, "nvidiactl", "");
    if (setenv("FAKE_NVML_SCENARIO", g_scenario, 1) || setenv("FAKE_NVML_LOG", g_log, 1))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    /* An abandoned worker may still be asleep in the fake; the process exits right after
     * this, before it could look at the scenario again. */
    rm_tree(g_top);
    return 0;
}

/* ---- the cache on a fake procfs --------------------------------------------------------- */

static void fake_stat(int pid, const char *comm, unsigned long long start)
{
    char rel[64], buf[1024];
    snprintf(rel, sizeof(rel), "%d/stat", pid);
    int k = snprintf(buf, sizeof(buf),
                     "%d (%s) S 1 %d %d 34816 -1 4194560 1040 0 0 0 3 1 0 0 20 0 1 0 %llu "
                     "8192000 900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 "
                     "0 0 0 0 0 0 0 0\n",
                     pid, comm, pid, pid, start);
    assert_true(k > 0 && (size_t)k < sizeof(buf));
    put(g_proc, rel, buf, (size_t)k);
}

static void fake_file(int pid, const char *name, const char *data, size_t len)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "%d/%s", pid, name);
    put(g_proc, rel, data, len);
}

static void fake_status(int pid, unsigned uid)
{
    char buf[256];
    int k = snprintf(buf, sizeof(buf), "Name:\tx\nUid:\t%u\t%u\t%u\t%u\nNSpid:\t%d\n", uid, uid,
                     uid, uid, pid);
    fake_file(pid, "status", buf, (size_t)k);
}

static void fake_fd(int pid, int fd, const char *node)
{
    char rel[64], target[PATH_MAX];
    snprintf(rel, sizeof(rel), "%d/fd/%d", pid, fd);
    snprintf(target, sizeof(target), "%s/%s", g_dev, node);
    link_(g_proc, rel, target);
}

static const char maps_cuda[] =
    "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 2 /usr/lib/libcuda.so.550.54.15\n";
static const char maps_nccl[] =
    "7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 2 /usr/lib/libcuda.so.550.54.15\n"
    "7f1c2b000000-7f1c2b200000 r-xp 00000000 08:01 3 /usr/lib/libnccl.so.2\n";

/* pid 100: a holder of nvidia0, "python train.py", CUDA_VISIBLE_DEVICES=0. */
static void fake_holder(const char *comm, unsigned long long start, const char *cmdline,
                        size_t cmdlen)
{
    fake_stat(100, comm, start);
    fake_status(100, 0);
    fake_file(100, "cmdline", cmdline, cmdlen);
    static const char env[] = "PATH=/bin\0CUDA_VISIBLE_DEVICES=0";
    fake_file(100, "environ", env, sizeof(env) - 1);
    fake_file(100, "cgroup", "0::/user.slice\n", 15);
    fake_file(100, "maps", maps_cuda, sizeof(maps_cuda) - 1);
    fake_fd(100, 3, "nvidia0");
}

static void scan(struct vg_proc_cache *cache, struct vg_proc_table *t)
{
    struct vg_proc_opts o = {.proc_root = g_proc, .dev_dir = g_dev, .cache = cache};
    struct vg_err err = VG_ERR_INIT;
    vg_proc_table_init(t);
    int rc = vg_proc_scan(&o, t, &err);
    if (rc)
        fail_msg("vg_proc_scan: %s", vg_err_msg(&err));
    vg_err_release(&err);
}

static const struct vg_proc *must_find(const struct vg_proc_table *t, pid_t pid)
{
    const struct vg_proc *p = vg_proc_table_find(t, pid);
    if (!p)
        fail_msg("pid %d not in the scan", (int)pid);
    return p;
}

static void assert_stats(const struct vg_proc_cache *c, uint64_t hits, uint64_t misses,
                         size_t entries)
{
    struct vg_proc_cache_stats st;
    vg_proc_cache_stats(c, &st);
    if (st.hits != hits || st.misses != misses || st.entries != entries)
        fail_msg("cache: %llu hits, %llu misses, %zu entries; expected %llu, %llu, %zu",
                 (unsigned long long)st.hits, (unsigned long long)st.misses, st.entries,
                 (unsigned long long)hits, (unsigned long long)misses, entries);
}

static void test_cache_hit_and_staleness(void **state)
{
    (void)state;
    rm_tree(g_proc);
    assert_int_equal(mkdir(g_proc, 0755), 0);
    static const char cmd1[] = "python\0train.py\0";
    fake_holder("python", 5000, cmd1, sizeof(cmd1) - 1);
    /* pid 200 holds nothing: never read in full, never cached */
    fake_stat(200, "bash", 10);
    fake_file(200, "cmdline", "bash", 4);
    link_(g_proc, "200/fd/0", "/dev/null");

    struct vg_proc_cache *c = NULL;
    assert_int_equal(vg_proc_cache_new(&c), 0);
    struct vg_proc_table t;

    scan(c, &t);
    assert_int_equal(t.n, 1);
    const struct vg_proc *p = must_find(&t, 100);
    assert_string_equal(p->cmdline, "python train.py");
    assert_string_equal(p->env[VG_ENV_CUDA_VISIBLE_DEVICES], "0");
    assert_true(p->libs & VG_LIB_CUDA);
    assert_string_equal(p->user, "root");
    assert_stats(c, 0, 1, 1);
    vg_proc_table_release(&t);

    /* Same process (pid, start time, comm): the stable files are not read again, so a change
     * on disk does not show; stat, status and fds are read fresh. */
    static const char cmd2[] = "rewritten\0";
    fake_file(100, "cmdline", cmd2, sizeof(cmd2) - 1);
    fake_file(100, "environ", "CUDA_VISIBLE_DEVICES=7", 22);
    fake_stat(100, "python", 5000);
    scan(c, &t);
    p = must_find(&t, 100);
    assert_string_equal(p->cmdline, "python train.py");
    assert_string_equal(p->env[VG_ENV_CUDA_VISIBLE_DEVICES], "0");
    assert_true(p->known & VG_PROC_K_CMDLINE);
    assert_true(p->known & VG_PROC_K_ENV);
    assert_true(p->known & VG_PROC_K_MAPS);
    assert_true(p->known & VG_PROC_K_USER);
    assert_stats(c, 1, 1, 1);
    vg_proc_table_release(&t);

    /* More NVIDIA descriptors (NCCL opening every GPU): a hit, but maps are read again. */
    fake_file(100, "maps", maps_nccl, sizeof(maps_nccl) - 1);
    fake_fd(100, 4, "nvidia1");
    scan(c, &t);
    p = must_find(&t, 100);
    assert_true(p->libs & VG_LIB_NCCL);
    assert_string_equal(p->cmdline, "python train.py");
    assert_stats(c, 2, 1, 1);
    vg_proc_table_release(&t);

    /* The PID is reused by another process (another start time): nothing stale is served. */
    static const char cmd3[] = "python\0other.py\0";
    fake_holder("python", 9000, cmd3, sizeof(cmd3) - 1);
    scan(c, &t);
    p = must_find(&t, 100);
    assert_string_equal(p->cmdline, "python other.py");
    assert_false(p->libs & VG_LIB_NCCL);
    assert_stats(c, 2, 2, 1);
    vg_proc_table_release(&t);

    /* An exec keeps pid and start time but changes comm: read afresh too. */
    static const char cmd4[] = "torchrun\0--nproc=8\0";
    fake_holder("torchrun", 9000, cmd4, sizeof(cmd4) - 1);
    scan(c, &t);
    assert_string_equal(must_find(&t, 100)->cmdline, "torchrun --nproc=8");
    assert_stats(c, 2, 3, 1);
    vg_proc_table_release(&t);

    /* A new uid (setuid): the cached name is not used for it. */
    struct passwd *pw = getpwuid(1);
    fake_status(100, 1);
    scan(c, &t);
    p = must_find(&t, 100);
    assert_int_equal(p->uid, 1);
    if (pw)
        assert_string_equal(p->user, pw->pw_name);
    else
        assert_string_equal(p->user, "1");
    assert_string_equal(p->cmdline, "torchrun --nproc=8");
    assert_stats(c, 3, 3, 1);
    vg_proc_table_release(&t);

    /* The process stops holding the GPU: its entry is dropped at the end of the scan. */
    char fd3[PATH_MAX], fd4[PATH_MAX];
    snprintf(fd3, sizeof(fd3), "%s/100/fd/3", g_proc);
    snprintf(fd4, sizeof(fd4), "%s/100/fd/4", g_proc);
    assert_int_equal(unlink(fd3), 0);
    assert_int_equal(unlink(fd4), 0);
    scan(c, &t);
    assert_int_equal(t.n, 0);
    assert_stats(c, 3, 3, 0);
    vg_proc_table_release(&t);

    vg_proc_cache_free(c);
}

/* ---- the sampler with the fake driver ----------------------------------------------------- */

/* A child holding g_dev/nvidia0 open until killed. */
static pid_t spawn_holder(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/nvidia0", g_dev);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            _exit(1);
        close(ready[0]);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        close(ready[1]);
        for (int i = 0; i < 600; i++)
            sleep(1);
        _exit(0);
    }
    close(ready[1]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return pid;
}

static void kill_holder(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void holder_scenario(pid_t pid, const char *extra)
{
    char buf[2048];
    int k = snprintf(buf, sizeof(buf),
                     "driver 550.54.15\n"
                     "gpu index=0 uuid=GPU-00000000-0000-4000-8000-000000000000 name=\"Fake\" "
                     "minor=0 total=80GiB reserved=512MiB util=0\n"
                     "proc gpu=0 pid=%d type=compute mem=2GiB sm=40\n%s",
                     (int)pid, extra);
    assert_true(k > 0 && (size_t)k < sizeof(buf));
    scenario(buf);
    reset_log();
}

static struct vg_sampler *new_sampler(unsigned timeout_ms)
{
    struct vg_sampler_opts o = {
        .nvml_path = FAKE_FULL,
        .nvml_timeout_ms = timeout_ms,
        .dev_dir = g_dev,
    };
    struct vg_sampler *s = NULL;
    struct vg_err err = VG_ERR_INIT;
    if (vg_sampler_new(&o, &s, &err))
        fail_msg("vg_sampler_new: %s", vg_err_msg(&err));
    return s;
}

static struct vg_snapshot *sample(struct vg_sampler *s, bool *hung)
{
    struct vg_snapshot *snap = NULL;
    struct vg_err err = VG_ERR_INIT;
    if (vg_sampler_sample(s, &snap, hung, &err))
        fail_msg("vg_sampler_sample: %s", vg_err_msg(&err));
    return snap;
}

static const struct vg_holding *holding_of(const struct vg_snapshot *snap, pid_t pid)
{
    for (size_t i = 0; i < snap->nholdings; i++)
        if (snap->holdings[i].pid == pid)
            return &snap->holdings[i];
    return NULL;
}

static void test_sampler_joins_and_caches(void **state)
{
    (void)state;
    pid_t pid = spawn_holder();
    holder_scenario(pid, "");
    struct vg_sampler *s = new_sampler(10000);
    bool hung = true;

    struct vg_snapshot *snap = sample(s, &hung);
    assert_false(hung);
    assert_true(snap->driver_ok);
    assert_null(snap->driver_error);
    assert_int_equal(snap->gpus.ngpus, 1);
    const struct vg_holding *h = holding_of(snap, pid);
    assert_non_null(h);
    assert_int_equal(h->gpu, 0);
    assert_int_equal(h->seen, VG_SEEN_NVML | VG_SEEN_FD);
    assert_true(h->used_known && h->used_bytes == 2 * GiB);
    assert_non_null(h->proc);
    assert_non_null(h->proc->cmdline);
    /* per-process utilisation, for idle-holder */
    assert_true(snap->gpus.gpus[0].known & VG_GPU_K_PROC_UTIL);
    assert_true(snap->gpus.gpus[0].procs[0].util_known);
    assert_int_equal(snap->gpus.gpus[0].procs[0].sm_util, 40);
    char *cmd1 = strdup(h->proc->cmdline);
    vg_snap_free(snap);

    struct vg_sampler_stats st;
    vg_sampler_stats(s, &st);
    assert_int_equal(st.samples, 1);
    assert_int_equal(st.cache_hits, 0);
    assert_true(st.cache_misses >= 1);

    /* The second sample serves the holder's details from the cache, identical. */
    snap = sample(s, &hung);
    h = holding_of(snap, pid);
    assert_non_null(h);
    assert_non_null(h->proc);
    assert_string_equal(h->proc->cmdline, cmd1);
    vg_snap_free(snap);
    vg_sampler_stats(s, &st);
    assert_int_equal(st.samples, 2);
    assert_true(st.cache_hits >= 1);
    assert_int_equal(st.driver_hangs, 0);
    assert_int_equal(st.driver_errors, 0);
    assert_true(st.last_sample_seconds >= 0);

    /* NVML stays initialised between samples: one nvmlInit for both. */
    assert_int_equal(count_lines(g_log, "nvmlInit"), 1);
    assert_int_equal(count_lines(g_log, "nvmlShutdown"), 0);
    free(cmd1);
    vg_sampler_free(s);
    assert_int_equal(count_lines(g_log, "nvmlShutdown"), 1);
    kill_holder(pid);
}

static void test_sampler_no_driver(void **state)
{
    (void)state;
    scenario("this is not a scenario\n");
    reset_log();
    struct vg_sampler *s = new_sampler(10000);
    bool hung = true;
    struct vg_snapshot *snap = sample(s, &hung);
    assert_false(hung);
    assert_false(snap->driver_ok);
    assert_non_null(snap->driver_error);
    vg_snap_free(snap);
    /* fixed at the next sample: the sampler opens NVML again */
    holder_scenario(getpid(), "");
    snap = sample(s, &hung);
    assert_true(snap->driver_ok);
    vg_snap_free(snap);
    struct vg_sampler_stats st;
    vg_sampler_stats(s, &st);
    assert_int_equal(st.driver_errors, 1);
    vg_sampler_free(s);
}

static void test_sampler_hang_recovers(void **state)
{
    (void)state;
    pid_t pid = spawn_holder();
    holder_scenario(pid, "hang func=nvmlDeviceGetCount_v2 seconds=1 times=1\n");
    struct vg_sampler *s = new_sampler(200);
    bool hung = false;
    struct vg_snapshot *snap = sample(s, &hung);
    assert_true(hung);
    assert_false(snap->driver_ok);
    vg_snap_free(snap);
    /* Bounded poll: the 1 s hang ends and a later sample has the driver's view again. */
    bool ok = false;
    double t0 = now_s();
    while (!ok && now_s() - t0 < 60) {
        usleep(100 * 1000);
        snap = sample(s, &hung);
        ok = snap->driver_ok && !hung;
        if (ok)
            assert_non_null(holding_of(snap, pid));
        vg_snap_free(snap);
    }
    assert_true(ok);
    vg_sampler_free(s);
    kill_holder(pid);
}

/* A child that opens g_dev/nvidia0 only when told to (a byte on *go), and says so (a byte on
 * *done): a process that existed before it held anything. */
static pid_t spawn_later_holder(int *go, int *done)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/nvidia0", g_dev);
    int g[2], d[2];
    assert_int_equal(pipe2(g, O_CLOEXEC), 0);
    assert_int_equal(pipe2(d, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        if (read(g[0], &c, 1) != 1)
            _exit(0);
        int fd = open(path, O_RDONLY);
        if (fd < 0 || write(d[1], "x", 1) != 1)
            _exit(1);
        for (int i = 0; i < 600; i++)
            sleep(1);
        _exit(0);
    }
    close(g[0]);
    close(d[1]);
    *go = g[1];
    *done = d[0];
    return pid;
}

static struct vg_sampler *new_sampler_with(struct vg_sampler_opts o)
{
    o.nvml_path = FAKE_FULL;
    o.nvml_timeout_ms = 10000;
    if (!o.dev_dir)
        o.dev_dir = g_dev;
    struct vg_sampler *s = NULL;
    struct vg_err err = VG_ERR_INIT;
    if (vg_sampler_new(&o, &s, &err))
        fail_msg("vg_sampler_new: %s", vg_err_msg(&err));
    return s;
}

/* One sample; whether pid holds something in it, and the scan kind in *st. */
static bool sample_holds(struct vg_sampler *s, pid_t pid, struct vg_sampler_stats *st)
{
    bool hung;
    struct vg_snapshot *snap = sample(s, &hung);
    bool held = holding_of(snap, pid) != NULL;
    vg_snap_free(snap);
    vg_sampler_stats(s, st);
    return held;
}

static void assert_full(const struct vg_sampler_stats *st, const char *reason)
{
    if (!st->last_full_reason)
        fail_msg("an incremental scan where a full one (%s) was due", reason);
    if (strncmp(st->last_full_reason, reason, strlen(reason)) != 0)
        fail_msg("full scan for '%s', expected '%s'", st->last_full_reason, reason);
}

/* A carried-over process opens a node: seen by the next sample, whether the watch names the
 * opener (fanotify: it alone is read) or not (every process is, twice). */
static void incremental_open(bool named)
{
    pid_t a = spawn_holder();
    int go, done;
    pid_t b = spawn_later_holder(&go, &done);
    holder_scenario(a, "");
    struct vg_sampler *s = new_sampler_with((struct vg_sampler_opts){.unnamed_opens = !named});
    const char *kind = vg_sampler_watch_kind(s);
    if (named && strncmp(kind, "fanotify", 8) != 0) {
        /* without CAP_SYS_ADMIN: the kind says why, and the unnamed case covers the rest */
        assert_non_null(strstr(kind, "inotify (openers not named: "));
        kill_holder(a);
        kill(b, SIGKILL);
        waitpid(b, NULL, 0);
        close(go);
        close(done);
        vg_sampler_free(s);
        return;
    }
    if (!named)
        assert_non_null(strstr(kind, "inotify ("));
    struct vg_sampler_stats st;

    assert_true(sample_holds(s, a, &st));
    assert_full(&st, "first scan");
    assert_int_equal(st.full_scans, 1);

    /* steady state: incremental, the known holder read again, most processes carried */
    assert_true(sample_holds(s, a, &st));
    assert_null(st.last_full_reason);
    assert_int_equal(st.incremental_scans, 1);
    assert_true(st.last_carried > 0 && st.last_carried < st.last_listed);
    assert_false(sample_holds(s, b, &st));
    assert_null(st.last_full_reason);

    assert_int_equal(write(go, "x", 1), 1);
    char c;
    assert_int_equal(read(done, &c, 1), 1);
    if (named) {
        /* b, carried over so far, opens the node: named, read in full, nobody else is; and
         * read again in the next sample (the event precedes the descriptor) */
        assert_true(sample_holds(s, b, &st));
        assert_null(st.last_full_reason);
        assert_int_equal(st.last_openers, 1);
        assert_true(st.last_carried > 0);
        assert_true(sample_holds(s, b, &st));
        assert_null(st.last_full_reason);
        assert_int_equal(st.last_openers, 1);
        assert_true(sample_holds(s, b, &st));
        assert_int_equal(st.last_openers, 0);
        assert_int_equal(st.full_scans, 1);
        assert_int_equal(st.incremental_scans, 5);
    } else {
        /* unnamed: the next sample is a full scan that finds it, and the one after that full
         * again (the event precedes the descriptor) */
        assert_true(sample_holds(s, b, &st));
        assert_full(&st, "a device node was opened");
        assert_true(sample_holds(s, b, &st));
        assert_full(&st, "a device-node event in the last sample");
        assert_true(sample_holds(s, b, &st));
        assert_null(st.last_full_reason);
        assert_true(sample_holds(s, a, &st));
        assert_int_equal(st.full_scans, 3);
        assert_int_equal(st.incremental_scans, 4);
    }

    /* a holder that exits is gone at the next (incremental) sample */
    kill_holder(b);
    assert_false(sample_holds(s, b, &st));
    assert_null(st.last_full_reason);
    vg_sampler_free(s);
    close(go);
    close(done);
    kill_holder(a);
}

static void test_sampler_incremental(void **state)
{
    (void)state;
    incremental_open(false);
    incremental_open(true);
    pid_t a = spawn_holder();
    holder_scenario(a, "");
    struct vg_sampler *s;
    struct vg_sampler_stats st;

    /* incremental scans off: every sample is full */
    s = new_sampler_with((struct vg_sampler_opts){.full_scans_only = true});
    for (int i = 0; i < 3; i++) {
        assert_true(sample_holds(s, a, &st));
        assert_full(&st, "incremental scans are off");
    }
    assert_int_equal(st.incremental_scans, 0);
    vg_sampler_free(s);

    /* a period of 1 ms: the second sample is due a periodic full scan */
    s = new_sampler_with((struct vg_sampler_opts){.full_scan_ms = 1});
    assert_true(sample_holds(s, a, &st));
    usleep(5 * 1000);
    assert_true(sample_holds(s, a, &st));
    assert_full(&st, "periodic full scan");
    vg_sampler_free(s);

    /* no device directory to watch: full scans, saying why, and the samples still work */
    char absent[PATH_MAX];
    snprintf(absent, sizeof(absent), "%s/absent", g_top);
    s = new_sampler_with((struct vg_sampler_opts){.dev_dir = absent});
    for (int i = 0; i < 2; i++) {
        sample_holds(s, a, &st);
        assert_full(&st, "no device-node watch: ");
        assert_non_null(strstr(st.last_full_reason, "absent"));
    }
    vg_sampler_free(s);
    kill_holder(a);
}

/* Last in the binary: leaves a worker stuck in the fake for 30 s, abandoned. */
static void test_sampler_hang_deadline(void **state)
{
    (void)state;
    pid_t pid = spawn_holder();
    holder_scenario(pid, "hang func=nvmlDeviceGetCount_v2 seconds=30\n");
    struct vg_sampler *s = new_sampler(300);

    bool hung = false;
    double t0 = now_s();
    struct vg_snapshot *snap = sample(s, &hung);
    double first = now_s() - t0;
    assert_true(hung);
    /* within the deadline plus a /proc scan, far from the 30 s hang (generous for slow CI) */
    assert_true(first < 15);
    assert_false(snap->driver_ok);
    assert_non_null(snap->driver_error);
    assert_non_null(strstr(snap->driver_error, "hung"));
    /* /proc is still sampled: the device-node holder is there, its GPU unknown */
    const struct vg_holding *h = holding_of(snap, pid);
    assert_non_null(h);
    assert_int_equal(h->seen, VG_SEEN_FD);
    assert_int_equal(h->gpu, VG_SNAP_NO_GPU);
    vg_snap_free(snap);

    /* The next samples do not queue behind the stuck call: no waiting, no new NVML call. */
    for (int i = 0; i < 3; i++) {
        t0 = now_s();
        snap = sample(s, &hung);
        assert_true(now_s() - t0 < 15);
        assert_true(hung);
        assert_false(snap->driver_ok);
        assert_non_null(holding_of(snap, pid));
        vg_snap_free(snap);
    }
    assert_int_equal(count_lines(g_log, "nvmlDeviceGetCount"), 1);
    struct vg_sampler_stats st;
    vg_sampler_stats(s, &st);
    assert_int_equal(st.driver_hangs, 4);
    assert_int_equal(st.samples, 4);

    /* Freeing abandons the stuck worker instead of waiting 30 s for it. */
    t0 = now_s();
    vg_sampler_free(s);
    assert_true(now_s() - t0 < 15);
    kill_holder(pid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_hit_and_staleness),
        cmocka_unit_test(test_sampler_joins_and_caches),
        cmocka_unit_test(test_sampler_no_driver),
        cmocka_unit_test(test_sampler_hang_recovers),
        cmocka_unit_test(test_sampler_incremental),
        cmocka_unit_test(test_sampler_hang_deadline),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
