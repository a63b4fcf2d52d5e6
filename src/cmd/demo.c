/*
 * `vramguard demo`: the whole product on a machine without GPUs. It builds a simulated host,
 * clearly labelled as one: the project's fake NVML driver answers for four GPUs, and real
 * processes (the test helper, exec'd under command lines that read like real jobs) are put into
 * the classic bad states: a CUDA_VISIBLE_DEVICES set too late, DDP ranks leaving contexts on
 * GPU 0, an orphaned DataLoader worker holding a device file, TensorFlow preallocating a GPU,
 * and a PID from another namespace. Then it runs `status` and `doctor` against that host, and
 * removes every process and file it made, on Ctrl-C too.
 *
 * Signals that would end the demo are blocked while it runs and acted on once everything is
 * cleaned up, so no interruption can leave a simulated process behind. Every helper also has a
 * lifetime of its own as a last line of defence (even `kill -9` of the demo leaves nothing
 * running for long).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

extern char **environ;

static const char vg_demo_help[] =
    "usage: vramguard demo [--keep] [--helper PATH] [--fake-nvml PATH]\n"
    "\n"
    "A simulation of a busy 4-GPU host, for machines without a GPU: the project's fake NVML\n"
    "driver plus real processes in the classic bad states, diagnosed with `status` and\n"
    "`doctor`. Everything it starts is stopped and removed when it ends (also on Ctrl-C).\n"
    "On a host with NVIDIA GPUs, run `vramguard doctor` instead.\n"
    "\n"
    "Options:\n"
    "  --helper PATH        the process helper (default: found beside the binary)\n"
    "  --fake-nvml PATH     the fake libnvidia-ml.so.1 (default: found beside the binary)\n"
    "  --keep               leave the simulation running until Enter is pressed\n"
    "\n"
    "Both are looked for in $VRAMGUARD_DEMO_DIR, then next to the vramguard binary (the build\n"
    "tree), then in ../libexec/vramguard/ (an installed copy).\n"
    "\n";

#define VG_DEMO_MAX_PROCS 16
#define VG_DEMO_LIFETIME "600"

/* One simulated process we started (or that our helper left behind as an orphan). */
struct vg_demo_proc {
    pid_t pid;
    int pidfd;     /* pins the identity: signals go to this process or to nobody */
    bool child;    /* our own child, to be reaped */
};

struct vg_demo {
    char dir[PATH_MAX];
    const char *helper;
    const char *fake;
    struct vg_demo_proc procs[VG_DEMO_MAX_PROCS];
    size_t nprocs;
};

static int vg_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int vg_pidfd_signal(int fd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

static void vg_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Candidates for the helper and the fake driver, in order. */
static int vg_demo_find(const char *given, const char *env_name, const char *build_rel,
                        const char *inst_rel, char *out, size_t n)
{
    if (given) {
        if (access(given, R_OK) != 0)
            return -errno;
        snprintf(out, n, "%s", given);
        return 0;
    }
    const char *dd = getenv("VRAMGUARD_DEMO_DIR");
    if (dd && dd[0] && snprintf(out, n, "%s/%s", dd, env_name) < (int)n && access(out, R_OK) == 0)
        return 0;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        return -ENOENT;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if (snprintf(out, n, "%s/%s", exe, build_rel) < (int)n && access(out, R_OK) == 0)
        return 0;
    if (snprintf(out, n, "%s/%s", exe, inst_rel) < (int)n && access(out, R_OK) == 0)
        return 0;
    return -ENOENT;
}

static int vg_demo_write(struct vg_demo *d, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", d->dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -errno;
    size_t left = strlen(text);
    while (left) {
        ssize_t w = write(fd, text, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int rc = -errno;
            close(fd);
            return rc;
        }
        text += w;
        left -= (size_t)w;
    }
    return close(fd) ? -errno : 0;
}

/* Record a process; the pidfd is opened at once so a reused PID can never be signalled. */
static void vg_demo_track(struct vg_demo *d, pid_t pid, bool child)
{
    for (size_t i = 0; i < d->nprocs; i++)
        if (d->procs[i].pid == pid)
            return;
    if (d->nprocs == VG_DEMO_MAX_PROCS)
        return;
    d->procs[d->nprocs++] = (struct vg_demo_proc){pid, vg_pidfd_open(pid), child};
}

/* Start one simulated process and wait (bounded) for its pidfile. Returns its main PID. */
static pid_t vg_demo_spawn(struct vg_demo *d, const char *tag, char *const argv[],
                           const char *opts, const char *const *env)
{
    char pidfile[PATH_MAX + 32];
    snprintf(pidfile, sizeof(pidfile), "%s/%s.pid", d->dir, tag);
    struct vg_buf ob;
    vg_buf_init(&ob, 0);
    vg_buf_printf(&ob, "VG_HELPER_OPTS=%s --pidfile %s --lifetime " VG_DEMO_LIFETIME, opts,
                  pidfile);
    if (ob.err) {
        vg_buf_release(&ob);
        return ob.err;
    }
    const char *optenv = vg_buf_str(&ob);
    const char *envp[16];
    size_t ne = 0;
    envp[ne++] = optenv;
    envp[ne++] = "PATH=/usr/local/bin:/usr/bin:/bin";
    for (size_t i = 0; env && env[i] && ne < 15; i++)
        envp[ne++] = env[i];
    envp[ne] = NULL;

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, d->helper, NULL, &attr, argv, (char *const *)envp);
    posix_spawnattr_destroy(&attr);
    vg_buf_release(&ob);
    if (rc)
        return -rc;
    vg_demo_track(d, pid, true);

    /* The pidfile appears once the process is fully in its state. */
    char buf[1024];
    for (int waited = 0; waited < 10000; waited += 20) {
        size_t len;
        rc = vg_file_read_small(AT_FDCWD, pidfile, buf, sizeof(buf), &len);
        if (rc == 0)
            break;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            /* An --orphan launcher exits 0 once its carrier is ready; anything else failed. */
            d->procs[d->nprocs - 1].child = false;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -ECHILD;
        }
        vg_sleep_ms(20);
    }
    if (rc)
        return -ETIMEDOUT;
    pid_t main_pid = -1;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        int64_t v;
        if (!sp || vg_parse_i64(sp + 1, 1, INT32_MAX, &v))
            continue;
        *sp = '\0';
        if (strcmp(line, "main") == 0 || strcmp(line, "child") == 0) {
            vg_demo_track(d, (pid_t)v, (pid_t)v == pid);
            if (strcmp(line, "main") == 0)
                main_pid = (pid_t)v;
        }
    }
    return main_pid > 0 ? main_pid : -EINVAL;
}

/* SIGTERM, a grace period, SIGKILL, and wait until each is gone; reap our own children. */
static void vg_demo_stop(struct vg_demo *d)
{
    for (size_t i = 0; i < d->nprocs; i++)
        if (d->procs[i].pidfd >= 0)
            vg_pidfd_signal(d->procs[i].pidfd, SIGTERM);
    for (size_t i = 0; i < d->nprocs; i++) {
        struct vg_demo_proc *p = &d->procs[i];
        if (p->pidfd >= 0) {
            struct pollfd pfd = {p->pidfd, POLLIN, 0};
            if (poll(&pfd, 1, 2000) == 0) {
                vg_pidfd_signal(p->pidfd, SIGKILL);
                poll(&pfd, 1, 5000);
            }
            close(p->pidfd);
            p->pidfd = -1;
        }
        if (p->child)
            waitpid(p->pid, NULL, 0);
    }
}

/* Everything the demo writes, so removal needs no recursive walk of a /tmp directory. */
static const char *const vg_demo_names[] = {
    "dev/nvidia0", "dev/nvidia1", "dev/nvidia2", "dev/nvidia3", "dev/nvidiactl",
    "dev/nvidia-uvm", "lib/libcuda.so.1", "lib/libtorch_cuda.so", "lib/libnccl.so.2",
    "lib/libtensorflow_framework.so.2", "scenario", "late.pid", "rank1.pid", "rank2.pid",
    "rank3.pid", "worker.pid", "tf.pid",
};
#define VG_DEMO_NFILES 10 /* the first names: created before any process starts */

static void vg_demo_rmdir(struct vg_demo *d)
{
    char path[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof(vg_demo_names) / sizeof(vg_demo_names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", d->dir, vg_demo_names[i]);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/dev", d->dir);
    rmdir(path);
    snprintf(path, sizeof(path), "%s/lib", d->dir);
    rmdir(path);
    rmdir(d->dir);
}

static int vg_demo_files(struct vg_demo *d)
{
    char path[PATH_MAX + 16];
    static const char *const dirs[] = {"dev", "lib"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", d->dir, dirs[i]);
        if (mkdir(path, 0755) != 0)
            return -errno;
    }
    for (size_t i = 0; i < VG_DEMO_NFILES; i++) {
        int rc = vg_demo_write(d, vg_demo_names[i], "simulated by vramguard demo\n");
        if (rc)
            return rc;
    }
    return 0;
}

/* A PID that no process has, for the "memory held by another namespace" story. */
static pid_t vg_demo_free_pid(void)
{
    for (pid_t p = 3999999; p > 3000000; p--)
        if (kill(p, 0) != 0 && errno == ESRCH)
            return p;
    return 3999999;
}

/*
 * The host: GPUs 2 and 3 have swapped minor numbers, as on real servers where /dev/nvidiaN does
 * not follow nvidia-smi's order.
 */
static const unsigned vg_demo_minor[] = {0, 1, 3, 2};

static int vg_demo_scenario(struct vg_demo *d, pid_t late, const pid_t rank[3], pid_t tf,
                            pid_t foreign)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_adds(&b, "# vramguard demo: a simulated 4-GPU host\n"
                    "driver 550.54.15\nnvml 12.550.54.15\ncuda 12040\n");
    static const char *const bus[] = {"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0",
                                      "00000000:5D:00.0"};
    static const char *const used[] = {"auto", "auto", "27GiB", "auto"};
    static const unsigned util[] = {0, 88, 91, 3};
    for (unsigned i = 0; i < 4; i++)
        vg_buf_printf(&b, "gpu index=%u uuid=GPU-%u%u7c4e1d-5a2b-4c3d-9e8f-0a1b2c3d4e5%u "
                          "name=\"NVIDIA H100 80GB HBM3\" minor=%u bus=%s total=80GiB "
                          "reserved=512MiB used=%s util=%u mem_util=%u cc=9.0 persistence=1 "
                          "compute_mode=0 mig=0\n",
                      i, i, 9 - i, i, vg_demo_minor[i], bus[i], used[i], util[i], util[i] / 2);
    /* 1. CUDA_VISIBLE_DEVICES=1, but a context on GPU 0 too. */
    vg_buf_printf(&b, "proc gpu=1 pid=%d type=compute mem=18GiB\n", (int)late);
    vg_buf_printf(&b, "proc gpu=0 pid=%d type=compute mem=512MiB\n", (int)late);
    /* 2. DDP ranks 1-3, each on its GPU and with a stray context on GPU 0. */
    for (int r = 0; r < 3; r++) {
        vg_buf_printf(&b, "proc gpu=%d pid=%d type=compute mem=18GiB\n", r + 1, (int)rank[r]);
        vg_buf_printf(&b, "proc gpu=0 pid=%d type=compute mem=640MiB\n", (int)rank[r]);
    }
    /* 3. The orphaned worker holds GPU 2's device file; the driver lists nobody for the
     *    9 GiB it keeps (27 GiB used above, 18 GiB of it rank 2's). */
    /* 4. TensorFlow took 58 GiB of GPU 3. */
    vg_buf_printf(&b, "proc gpu=3 pid=%d type=compute mem=58GiB\n", (int)tf);
    /* 5. A PID from another container. */
    vg_buf_printf(&b, "proc gpu=3 pid=%d type=compute mem=2GiB\n", (int)foreign);
    int rc = b.err ? b.err : vg_demo_write(d, "scenario", vg_buf_str(&b));
    vg_buf_release(&b);
    return rc;
}

/* Format the helper options for one story, reusing one buffer; "" when out of memory, which
 * the helper then rejects (no pidfile), so the failure is reported, not hidden. */
static const char *vg_demo_fmt(struct vg_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *vg_demo_fmt(struct vg_buf *b, const char *fmt, ...)
{
    vg_buf_reset(b);
    va_list ap;
    va_start(ap, fmt);
    vg_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return b->err ? "--bad-options" : vg_buf_str(b);
}

static int vg_demo_run_stories(struct vg_demo *d)
{
    char dev[PATH_MAX + 8], lib[PATH_MAX + 8];
    snprintf(dev, sizeof(dev), "%s/dev", d->dir);
    snprintf(lib, sizeof(lib), "%s/lib", d->dir);
    struct vg_buf ob;
    vg_buf_init(&ob, 0);
    const char *opts;
    pid_t rc;

    /* 1. The variable was set after the framework had started. */
    opts = vg_demo_fmt(&ob, "--open %s/nvidia0 --open %s/nvidia1 --open %s/nvidiactl "
                                 "--map %s/libcuda.so.1 --map %s/libtorch_cuda.so --comm python",
             dev, dev, dev, lib, lib);
    char *late_argv[] = {"python", "train.py", "--model", "resnet50", NULL};
    const char *late_env[] = {"CUDA_VISIBLE_DEVICES=1", "USER=alice", NULL};
    pid_t late = vg_demo_spawn(d, "late", late_argv, opts, late_env);
    if (late < 0)
        goto fail_late;

    /* 2. DDP ranks that touched cuda:0 before set_device(local_rank). */
    pid_t rank[3];
    for (int r = 0; r < 3; r++) {
        char tag[16], lr[32], gr[32];
        snprintf(tag, sizeof(tag), "rank%d", r + 1);
        snprintf(lr, sizeof(lr), "LOCAL_RANK=%d", r + 1);
        snprintf(gr, sizeof(gr), "RANK=%d", r + 1);
        opts = vg_demo_fmt(&ob, "--open %s/nvidia0 --open %s/nvidia%d --open %s/nvidiactl "
                                     "--map %s/libcuda.so.1 --map %s/libtorch_cuda.so "
                                     "--map %s/libnccl.so.2 --comm python",
                 dev, dev, vg_demo_minor[r + 1], dev, lib, lib, lib);
        char *argv[] = {"python", "-u", "train_ddp.py", "--epochs", "90", NULL};
        const char *env[] = {lr, gr, "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=4",
                             "TORCHELASTIC_RUN_ID=demo-ddp-7f3a", NULL};
        rank[r] = vg_demo_spawn(d, tag, argv, opts, env);
        if (rank[r] < 0) {
            rc = rank[r];
            goto fail;
        }
    }

    /* 3. A DataLoader worker whose job died: re-parented, its session gone, the device file
     *    still open. (GPU 2 is /dev/nvidia3 on this host.) */
    opts = vg_demo_fmt(&ob, "--open %s/nvidia3 --open %s/nvidiactl --open %s/nvidia-uvm "
                                 "--orphan --setsid --comm pt_data_worker",
             dev, dev, dev);
    char *worker_argv[] = {"python", "train.py", "--data", "/datasets/imagenet", NULL};
    const char *worker_env[] = {"USER=bob", NULL};
    pid_t worker = vg_demo_spawn(d, "worker", worker_argv, opts, worker_env);
    if (worker < 0) {
        rc = worker;
        goto fail;
    }

    /* 4. TensorFlow with its default preallocation. (GPU 3 is /dev/nvidia2.) */
    opts = vg_demo_fmt(&ob, "--open %s/nvidia2 --open %s/nvidiactl --map %s/libcuda.so.1 "
                                 "--map %s/libtensorflow_framework.so.2 --comm python3",
             dev, dev, lib, lib);
    char *tf_argv[] = {"python3", "serve_model.py", "--port", "8500", NULL};
    const char *tf_env[] = {"USER=carol", NULL};
    pid_t tf = vg_demo_spawn(d, "tf", tf_argv, opts, tf_env);
    if (tf < 0) {
        rc = tf;
        goto fail;
    }
    vg_buf_release(&ob);
    return vg_demo_scenario(d, late, rank, tf, vg_demo_free_pid());

fail_late:
    rc = late;
fail:
    vg_buf_release(&ob);
    return rc;
}

/* --keep: wait for Enter (or end of input), or for one of the blocked signals, which stay
 * pending so the caller acts on them after cleaning up. */
static void vg_demo_wait_enter(const sigset_t *blocked)
{
    for (;;) {
        struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
        int r = poll(&pfd, 1, 200);
        if (r > 0) {
            char c;
            ssize_t n;
            while ((n = read(STDIN_FILENO, &c, 1)) == 1 && c != '\n')
                ;
            return; /* a line, end of input, or an error: all mean stop */
        }
        if (r < 0 && errno != EINTR)
            return;
        sigset_t pending;
        sigpending(&pending);
        for (int sig = 1; sig < NSIG; sig++)
            if (sigismember(blocked, sig) && sigismember(&pending, sig))
                return;
    }
}

enum { VG_OPT_HELPER = VG_OPT_FIRST_LOCAL, VG_OPT_FAKE, VG_OPT_KEEP };

int vg_cmd_demo(struct vg_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        VG_GLOBAL_LONGOPTS,
        {"helper", required_argument, NULL, VG_OPT_HELPER},
        {"fake-nvml", required_argument, NULL, VG_OPT_FAKE},
        {"keep", no_argument, NULL, VG_OPT_KEEP},
        {NULL, 0, NULL, 0},
    };
    const char *helper_arg = NULL, *fake_arg = NULL;
    bool keep = false;
    /* .operands: demo says "unexpected argument" without the pointer to --help itself. */
    struct vg_cmd_parse p = {.g = g, .cmd = "demo", .help = vg_demo_help, .longopts = longopts,
                             .argc = argc, .argv = argv, .operands = true};
    int c;
    while ((c = vg_cmd_next_opt(&p)) >= 0) {
        switch (c) {
        case VG_OPT_HELPER:
            helper_arg = optarg;
            break;
        case VG_OPT_FAKE:
            fake_arg = optarg;
            break;
        case VG_OPT_KEEP:
            keep = true;
            break;
        }
    }
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (optind < argc) {
        vg_cmd_error("demo", "unexpected argument '%s'", argv[optind]);
        return VG_EXIT_USAGE;
    }

    struct vg_demo d;
    memset(&d, 0, sizeof(d));
    char helper[PATH_MAX], fake[PATH_MAX];
    if (vg_demo_find(helper_arg, "vg-helper", "tests/vg-helper", "../libexec/vramguard/vg-helper",
                     helper, sizeof(helper))) {
        vg_cmd_error("demo", "cannot find the process helper vg-helper (build it with 'make', "
                             "or pass --helper PATH)");
        return VG_EXIT_UNKNOWN;
    }
    if (vg_demo_find(fake_arg, "libnvidia-ml.so.1", "fake-nvml/full/libnvidia-ml.so.1",
                     "../libexec/vramguard/libnvidia-ml.so.1", fake, sizeof(fake))) {
        vg_cmd_error("demo", "cannot find the fake driver libnvidia-ml.so.1 (build it with "
                             "'make', or pass --fake-nvml PATH)");
        return VG_EXIT_UNKNOWN;
    }
    d.helper = helper;
    d.fake = fake;

    /* Interruptions wait until the simulation is cleaned up. */
    sigset_t block, old, pending;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, &old);

    const char *tmp = getenv("TMPDIR");
    int n = snprintf(d.dir, sizeof(d.dir), "%s/vramguard-demo-XXXXXX",
                     tmp && tmp[0] ? tmp : "/tmp");
    int status = VG_EXIT_OK;
    if (n < 0 || (size_t)n >= sizeof(d.dir) - 64) {
        vg_cmd_error("demo", "TMPDIR is too long for a scratch directory");
        sigprocmask(SIG_SETMASK, &old, NULL);
        return VG_EXIT_USAGE;
    }
    if (!mkdtemp(d.dir)) {
        vg_cmd_error("demo", "cannot create a directory under %s: %s", tmp ? tmp : "/tmp",
                     strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        return VG_EXIT_UNKNOWN;
    }

    /* With --json, stdout carries only the doctor document; the label goes to stderr. */
    FILE *label = g->json ? stderr : stdout;
    fprintf(label, "SIMULATION: a made-up 4-GPU host (fake NVIDIA driver + real processes in %s).\n"
           "On a machine with NVIDIA GPUs, run 'vramguard doctor' for the real thing.\n\n"
           "Staged: a job whose CUDA_VISIBLE_DEVICES came too late; three DDP ranks that\n"
           "touched cuda:0 first; a DataLoader worker orphaned by a crash; TensorFlow\n"
           "preallocating a GPU; and memory held from another container.\n\n",
           d.dir);
    fflush(label);

    int rc = vg_demo_files(&d);
    if (rc == 0)
        rc = vg_demo_run_stories(&d);
    if (rc) {
        vg_cmd_error("demo", "cannot stage the simulation: %s", strerror(-rc));
        status = VG_EXIT_SOFTWARE;
    } else {
        char scen[PATH_MAX + 16], devdir[PATH_MAX + 8];
        snprintf(scen, sizeof(scen), "%s/scenario", d.dir);
        snprintf(devdir, sizeof(devdir), "%s/dev", d.dir);
        setenv("FAKE_NVML_SCENARIO", scen, 1);
        struct vg_global dg = *g;
        dg.nvml_path = d.fake;
        dg.dev_dir = devdir;
        char *status_argv[] = {"status", NULL};
        char *doctor_argv[] = {"doctor", "--no-shell", NULL};
        if (!g->json) {
            printf("$ vramguard status\n");
            fflush(stdout);
            vg_cmd_status(&dg, 1, status_argv);
            printf("$ vramguard doctor\n");
            fflush(stdout);
        }
        vg_cmd_doctor(&dg, 2, doctor_argv);
        fflush(stdout);
        if (keep) {
            printf("\nThe simulation keeps running: try\n"
                   "  FAKE_NVML_SCENARIO=%s vramguard --nvml %s --dev %s doctor\n"
                   "Press Enter to clean up.\n",
                   scen, d.fake, devdir);
            fflush(stdout);
            vg_demo_wait_enter(&block);
        }
        unsetenv("FAKE_NVML_SCENARIO");
    }

    vg_demo_stop(&d);
    vg_demo_rmdir(&d);
    if (!g->json)
        printf("\nSimulation cleaned up: %zu processes stopped, %s removed.\n", d.nprocs, d.dir);

    sigpending(&pending);
    sigprocmask(SIG_SETMASK, &old, NULL); /* a pending signal is delivered here */
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&block, s) && sigismember(&pending, s))
            return 128 + s;
    return status;
}
