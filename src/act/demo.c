/*
 * The simulated host of `vramguard demo` (act/demo.h): staging it (directory, device nodes and
 * libraries as plain files, the simulated processes, the fake driver's scenario) and the keeper
 * process that owns it.
 *
 * Nothing is left behind on any way out, so the simulation has an owner of its own: the keeper,
 * forked before anything is staged, creates the directory, starts the simulated processes (its
 * children, reaped as they exit), and removes everything when told to, or when the command that
 * forked it is gone. It has a session of its own, so a closing terminal never reaches it or the
 * simulated processes directly. Each simulated process also holds the read end of a pipe whose
 * write end only the keeper has (vg-helper --alive-fd), and exits the moment the keeper is
 * gone, whatever killed it; its own --lifetime is a last line of defence beyond that. A kept
 * simulation (--keep) is removed whole at `demo --stop` or at its deadline, so the story never
 * turns into another (helpers running out of lifetime would have left zombies and stale driver
 * entries). What is left after a SIGKILL of the keeper itself is the directory in $TMPDIR: its
 * processes end with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "act/demo.h"
#include "act/lock.h"
#include "act/stop.h"
#include "proc/signal.h"
#include "util/array.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/parse.h"

/* The descriptor number the helpers get their end of the keeper's pipe on. */
#define VG_DEMO_ALIVE_FD 3
/* The keeper's clean-up: SIGTERM, this grace, SIGKILL, then this wait at most. */
#define VG_DEMO_GRACE_MS 2000u
#define VG_DEMO_KILL_WAIT_MS 5000u

/* ---- finding the helper and the fake driver ---------------------------------------------- */

/* Candidates for the helper and the fake driver, in order: the option, $VRAMGUARD_DEMO_DIR, the
 * build tree beside the binary (development), then the installed copy in pkglibdir (`make
 * install`, the Debian package). */
int vg_demo_find(const char *given, const char *name, const char *build_rel, const char *pkglibdir,
                 char *out, size_t n)
{
    if (given) {
        if (access(given, R_OK) != 0)
            return -errno;
        return snprintf(out, n, "%s", given) < (int)n ? 0 : -ENAMETOOLONG;
    }
    const char *dd = secure_getenv("VRAMGUARD_DEMO_DIR");
    if (dd && dd[0] && snprintf(out, n, "%s/%s", dd, name) < (int)n && access(out, R_OK) == 0)
        return 0;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            if (snprintf(out, n, "%s/%s", exe, build_rel) < (int)n && access(out, R_OK) == 0)
                return 0;
        }
    }
    if (snprintf(out, n, "%s/%s", pkglibdir, name) < (int)n && access(out, R_OK) == 0)
        return 0;
    return -ENOENT;
}

/* ---- staging (in the keeper) ------------------------------------------------------------- */

/* d->dir/name; the directory leaves 64 bytes of room (checked when it is made). */
static void vg_demo_path(const struct vg_demo *d, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", d->dir, name);
}

static int vg_demo_write(struct vg_demo *d, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    vg_demo_path(d, name, path, sizeof(path));
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

/* Record a process; the pidfd is opened at once so a reused PID can never be signalled. A
 * process that cannot be recorded (out of memory) is killed on the spot rather than lost. */
static int vg_demo_track(struct vg_demo *d, pid_t pid, bool child)
{
    for (size_t i = 0; i < d->nprocs; i++)
        if (d->procs[i].pid == pid)
            return 0;
    int fd = -1;
    if (vg_proc_pidfd_open(pid, &fd) != 0)
        fd = -1; /* already gone (then there is nothing to stop; a child is still reaped) */
    if (VG_ARRAY_GROW(d->procs, d->cap, d->nprocs + 1)) {
        if (fd >= 0) {
            vg_proc_pidfd_signal(fd, SIGKILL);
            close(fd);
        }
        if (child)
            waitpid(pid, NULL, 0);
        return -ENOMEM;
    }
    struct vg_demo_proc *p = &d->procs[d->nprocs++];
    p->pid = pid;
    p->child = child;
    vg_stop_init(&p->stop, fd);
    return 0;
}

/* Reap the children that have exited (the keeper's SIGCHLD): a simulated process that someone
 * stops (`clean --force` is the point of --keep) must not linger as our zombie. */
static void vg_demo_reap(struct vg_demo *d)
{
    for (size_t i = 0; i < d->nprocs; i++) {
        struct vg_demo_proc *p = &d->procs[i];
        if (p->child && waitpid(p->pid, NULL, WNOHANG) == p->pid)
            p->child = false;
    }
}

/* The pidfile appears once the process pid is fully in its state. Every PID it lists is
 * tracked, however many: it is read whole (more than 64 MiB fails, -E2BIG, never cut). Returns
 * the main PID or a negative errno. */
static pid_t vg_demo_await_pidfile(struct vg_demo *d, pid_t pid, const char *pidfile)
{
    struct vg_buf pids;
    vg_buf_init(&pids, 0);
    int rc = -ETIMEDOUT;
    for (int waited = 0; waited < 10000; waited += 20) {
        rc = vg_file_read_at(AT_FDCWD, pidfile, &pids);
        if (rc == 0 || rc == -E2BIG)
            break;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            /* An --orphan launcher exits 0 once its carrier is ready; anything else failed. */
            for (size_t i = 0; i < d->nprocs; i++)
                if (d->procs[i].pid == pid)
                    d->procs[i].child = false;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                vg_buf_release(&pids);
                return -ECHILD;
            }
        }
        vg_clock_sleep_until(vg_clock_ms() + 20);
    }
    if (rc == -ENOENT)
        rc = -ETIMEDOUT;
    pid_t main_pid = -1;
    char *save = NULL;
    for (char *line = rc || !pids.data ? NULL : strtok_r(pids.data, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        int64_t v;
        if (!sp || vg_parse_i64(sp + 1, 1, INT32_MAX, &v))
            continue;
        *sp = '\0';
        if (strcmp(line, "main") == 0 || strcmp(line, "child") == 0) {
            if ((rc = vg_demo_track(d, (pid_t)v, (pid_t)v == pid)) != 0)
                break;
            if (strcmp(line, "main") == 0)
                main_pid = (pid_t)v;
        }
    }
    vg_buf_release(&pids);
    if (rc)
        return rc;
    return main_pid > 0 ? main_pid : -EINVAL;
}

/* Start one simulated process and wait (bounded) for its pidfile. Returns its main PID. */
static pid_t vg_demo_spawn(struct vg_demo *d, const char *tag, char *const argv[], const char *opts,
                           const char *const *env)
{
    char pidfile[PATH_MAX + 64];
    snprintf(pidfile, sizeof(pidfile), "%s/%s.pid", d->dir, tag);
    struct vg_buf ob;
    vg_buf_init(&ob, 0);
    vg_buf_printf(&ob, "VG_HELPER_OPTS=%s --pidfile %s --lifetime %u --alive-fd %d", opts, pidfile,
                  d->lifetime_s, VG_DEMO_ALIVE_FD);
    size_t nenv = 0;
    while (env && env[nenv])
        nenv++;
    const char **envp = calloc(nenv + 3, sizeof(*envp));
    if (ob.err || !envp) {
        vg_buf_release(&ob);
        free(envp);
        return -ENOMEM;
    }
    size_t ne = 0;
    envp[ne++] = vg_buf_str(&ob);
    envp[ne++] = "PATH=/usr/local/bin:/usr/bin:/bin";
    for (size_t i = 0; i < nenv; i++)
        envp[ne++] = env[i];
    envp[ne] = NULL;

    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&fa);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    /* dup2 clears close-on-exec on the copy: the helper keeps its end of the pipe, and
     * nothing else of ours (vg_demo_pipe made sure the source is not fd 3 itself). */
    int rc = posix_spawn_file_actions_adddup2(&fa, d->alive_rd, VG_DEMO_ALIVE_FD);
    pid_t pid = -1;
    if (rc == 0)
        rc = posix_spawn(&pid, d->helper, &fa, &attr, argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    vg_buf_release(&ob);
    free(envp);
    if (rc)
        return -rc;
    if ((rc = vg_demo_track(d, pid, true)) != 0)
        return rc;

    return vg_demo_await_pidfile(d, pid, pidfile);
}

/*
 * Stop everything: SIGTERM, a grace period, SIGKILL, the one stop sequence (act/stop.h): through
 * pidfds, or, for our own children that have none (a kernel before 5.3, or valgrind, which does
 * not know the call), by PID while they are unreaped. Then reap our own children. Closing the
 * helpers' pipe as well tells every one of them to go, even a process we hold no pidfd for.
 * Counts what was stopped and what outlived SIGKILL. Bounded: never a wait on a process that
 * will not die.
 */
static void vg_demo_stop(struct vg_demo *d, struct vg_demo_result *res)
{
    for (size_t i = 0; i < d->nprocs; i++) {
        struct vg_demo_proc *p = &d->procs[i];
        if (p->stop.pidfd < 0) {
            if (!p->child)
                continue; /* gone, or not ours to signal by PID: left IDLE */
            vg_stop_init_child(&p->stop, p->pid);
        }
        vg_stop_term(&p->stop);
    }
    /* After the SIGTERMs, so that those who get them count as stopped. */
    if (d->alive_wr >= 0) {
        close(d->alive_wr);
        d->alive_wr = -1;
    }
    if (d->nprocs)
        vg_stop_finish(&d->procs[0].stop, d->nprocs, sizeof(*d->procs), VG_DEMO_GRACE_MS,
                       VG_DEMO_KILL_WAIT_MS);
    for (size_t i = 0; i < d->nprocs; i++) {
        struct vg_stop *s = &d->procs[i].stop;
        if (s->outcome == VG_STOP_FAILED && s->error != -ESRCH)
            res->survivors++;
        else if (s->outcome != VG_STOP_GONE && s->outcome != VG_STOP_IDLE)
            res->stopped++;
        vg_stop_release(s);
    }
    /* The rest of our children have exited (or are in the kernel's hands): reap, never wait. */
    for (size_t i = 0; i < d->nprocs; i++) {
        struct vg_demo_proc *p = &d->procs[i];
        if (p->child && waitpid(p->pid, NULL, WNOHANG) == p->pid)
            p->child = false;
    }
}

/* Everything the demo writes, so removal needs no recursive walk of a /tmp directory. */
static const char *const vg_demo_names[] = {
    "dev/nvidia0",      "dev/nvidia1",
    "dev/nvidia2",      "dev/nvidia3",
    "dev/nvidiactl",    "dev/nvidia-uvm",
    "lib/libcuda.so.1", "lib/libtorch_cuda.so",
    "lib/libnccl.so.2", "lib/libtensorflow_framework.so.2",
    "scenario",         "late.pid",
    "rank1.pid",        "rank2.pid",
    "rank3.pid",        "worker.pid",
    "tf.pid",
};
#define VG_DEMO_NFILES 10 /* the first names: created before any process starts */

static bool vg_demo_rmdir(struct vg_demo *d)
{
    if (!d->dir_made)
        return true;
    char path[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof(vg_demo_names) / sizeof(vg_demo_names[0]); i++) {
        vg_demo_path(d, vg_demo_names[i], path, sizeof(path));
        unlink(path);
    }
    vg_demo_path(d, "dev", path, sizeof(path));
    rmdir(path);
    vg_demo_path(d, "lib", path, sizeof(path));
    rmdir(path);
    return rmdir(d->dir) == 0 || errno == ENOENT;
}

static int vg_demo_files(struct vg_demo *d)
{
    char path[PATH_MAX + 64];
    static const char *const dirs[] = {"dev", "lib"};
    for (size_t i = 0; i < 2; i++) {
        vg_demo_path(d, dirs[i], path, sizeof(path));
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
        vg_buf_printf(&b,
                      "gpu index=%u uuid=GPU-%u%u7c4e1d-5a2b-4c3d-9e8f-0a1b2c3d4e5%u "
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

/* Format the helper options for one story, reusing one buffer; "--bad-options" when out of
 * memory, which the helper then rejects (no pidfile), so the failure is reported, not hidden. */
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
    opts = vg_demo_fmt(&ob,
                       "--open %s/nvidia0 --open %s/nvidia1 --open %s/nvidiactl "
                       "--map %s/libcuda.so.1 --map %s/libtorch_cuda.so --comm python",
                       dev, dev, dev, lib, lib);
    char *late_argv[] = {"python", "train.py", "--model", "resnet50", NULL};
    const char *late_env[] = {"CUDA_VISIBLE_DEVICES=1", "USER=alice", NULL};
    pid_t late = vg_demo_spawn(d, "late", late_argv, opts, late_env);
    if (late < 0) {
        rc = late;
        goto fail;
    }

    /* 2. DDP ranks that touched cuda:0 before set_device(local_rank). */
    pid_t rank[3];
    for (int r = 0; r < 3; r++) {
        char tag[16], lr[32], gr[32];
        snprintf(tag, sizeof(tag), "rank%d", r + 1);
        snprintf(lr, sizeof(lr), "LOCAL_RANK=%d", r + 1);
        snprintf(gr, sizeof(gr), "RANK=%d", r + 1);
        opts = vg_demo_fmt(&ob,
                           "--open %s/nvidia0 --open %s/nvidia%u --open %s/nvidiactl "
                           "--map %s/libcuda.so.1 --map %s/libtorch_cuda.so "
                           "--map %s/libnccl.so.2 --comm python",
                           dev, dev, vg_demo_minor[r + 1], dev, lib, lib, lib);
        char *argv[] = {"python", "-u", "train_ddp.py", "--epochs", "90", NULL};
        const char *env[] = {
            lr,  gr, "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=4", "TORCHELASTIC_RUN_ID=demo-ddp-7f3a",
            NULL};
        rank[r] = vg_demo_spawn(d, tag, argv, opts, env);
        if (rank[r] < 0) {
            rc = rank[r];
            goto fail;
        }
    }

    /* 3. A DataLoader worker whose job died: re-parented, its session gone, the device file
     *    still open. (GPU 2 is /dev/nvidia3 on this host.) */
    opts = vg_demo_fmt(&ob,
                       "--open %s/nvidia3 --open %s/nvidiactl --open %s/nvidia-uvm "
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
    opts = vg_demo_fmt(&ob,
                       "--open %s/nvidia2 --open %s/nvidiactl --map %s/libcuda.so.1 "
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

fail:
    vg_buf_release(&ob);
    return rc;
}

/* The helpers' pipe, both ends close-on-exec, the read end never on VG_DEMO_ALIVE_FD itself
 * (a dup2 onto the same number would leave it close-on-exec). */
static int vg_demo_pipe(struct vg_demo *d)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -errno;
    if (p[0] == VG_DEMO_ALIVE_FD) {
        int moved = fcntl(p[0], F_DUPFD_CLOEXEC, VG_DEMO_ALIVE_FD + 1);
        int e = errno;
        close(p[0]);
        if (moved < 0) {
            close(p[1]);
            return -e;
        }
        p[0] = moved;
    }
    d->alive_rd = p[0];
    d->alive_wr = p[1];
    return 0;
}

/* Directory, files, processes, scenario. On failure, what was made is still recorded in d,
 * for vg_demo_stop() and vg_demo_rmdir(). */
static int vg_demo_stage(struct vg_demo *d, const char *tmp)
{
    int n = snprintf(d->dir, sizeof(d->dir), "%s/vramguard-demo-XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof(d->dir) - 64)
        return -ENAMETOOLONG;
    if (!mkdtemp(d->dir))
        return -errno;
    d->dir_made = true;
    int rc = vg_demo_pipe(d);
    if (rc == 0)
        rc = vg_demo_files(d);
    if (rc == 0)
        rc = vg_demo_run_stories(d);
    /* The helpers have their copies; only the write end keeps them alive. */
    if (d->alive_rd >= 0) {
        close(d->alive_rd);
        d->alive_rd = -1;
    }
    return rc;
}

/* ---- the keeper -------------------------------------------------------------------------- */

/* The socket a kept simulation listens on: one per user and scratch directory ($TMPDIR,
 * hashed), so `demo --stop` run where `demo --keep` was finds it, and test suites with a TMPDIR
 * each never meet. It lives in the user's own runtime directory, the one run's locks use
 * without the shared one (act/lock.h: $XDG_RUNTIME_DIR or /run/user/UID, /run/vramguard for
 * root, /tmp/vramguard-UID only without either), so nobody else can take its name first. The
 * directory is made when create is true. 0 with *len; -ENOENT (no message) when the directory
 * does not exist and create is false; another negative errno with a message. */
static int vg_demo_sockaddr(struct sockaddr_un *sa, socklen_t *len, bool create, struct vg_err *err)
{
    const char *tmp = secure_getenv("TMPDIR");
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = tmp; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    struct vg_lock_env env;
    vg_lock_env_get(&env);
    env.shared_usable = false; /* a shared directory's names can be taken by anyone */
    struct vg_lock_dir dir;
    int rc = vg_lock_dir_choose(&env, &dir, err);
    if (rc == 0)
        rc = vg_lock_dir_open(&dir, create, err);
    if (rc == 0) {
        memset(sa, 0, sizeof(*sa));
        sa->sun_family = AF_UNIX;
        int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/demo.%016llx.sock", dir.path,
                         (unsigned long long)h);
        if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
            rc = vg_err_set(err, -ENAMETOOLONG, "the socket path in '%s' is too long", dir.path);
        else
            *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
    }
    vg_lock_dir_release(&dir);
    return rc;
}

/* Write all of s to fd; errors are the reader's problem (it sees end of file). */
static void vg_demo_send(int fd, const char *s)
{
    size_t left = strlen(s);
    while (left) {
        ssize_t w = send(fd, s, left, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        left -= (size_t)w;
    }
}

/* Read one line (without its newline) from fd into buf within timeout_ms, a byte at a time so
 * that nothing after the line is consumed. 0; -ETIMEDOUT; -EPIPE at end of file before a
 * newline; -E2BIG for a line longer than buf. */
static int vg_demo_read_line(int fd, char *buf, size_t n, int timeout_ms)
{
    size_t len = 0;
    unsigned long long deadline = vg_clock_ms() + (unsigned long long)timeout_ms;
    for (;;) {
        unsigned long long now = vg_clock_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(deadline - now));
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r <= 0)
            continue;
        char ch;
        ssize_t got = recv(fd, &ch, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -EPIPE;
        if (ch == '\n') {
            buf[len] = '\0';
            return 0;
        }
        if (len == n - 1)
            return -E2BIG;
        buf[len++] = ch;
    }
}

static bool vg_demo_peer_ok(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
           (cr.uid == geteuid() || cr.uid == 0);
}

/*
 * The keeper's life after staging: wait for "stop" or "keep" from the command (its end of
 * *ctl), the command's end of file (it is gone), SIGTERM/SIGINT, --stop on `lsock` once kept,
 * or the deadline; reap the simulated processes as they exit meanwhile. Returns the descriptor
 * to send the result to (-1: nobody). Once kept, *ctl is closed and set to -1.
 */
static int vg_demo_keeper_wait(struct vg_demo *d, int *ctl, int lsock, int sfd, uint64_t keep_ms)
{
    unsigned long long deadline = vg_clock_ms() + VG_DEMO_SHOW_MAX_MS;
    bool kept = false;
    for (;;) {
        unsigned long long now = vg_clock_ms();
        if (now >= deadline)
            return -1;
        struct pollfd p[3] = {{sfd, POLLIN, 0}, {*ctl, POLLIN, 0}, {lsock, POLLIN, 0}};
        unsigned long long wait = deadline - now;
        int r = poll(p, kept ? 3 : 2, wait > 60000 ? 60000 : (int)wait);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                    return *ctl;
            }
            vg_demo_reap(d); /* SIGCHLD; SIGHUP means nothing to a process without a terminal */
        }
        if (!kept && p[1].revents) {
            char line[64];
            int rc = vg_demo_read_line(*ctl, line, sizeof(line), 1000);
            if (rc == 0 && strcmp(line, "keep") == 0) {
                kept = true;
                deadline = vg_clock_ms() + keep_ms;
                vg_demo_send(*ctl, "kept\n");
                close(*ctl);
                *ctl = -1;
                continue;
            }
            return rc == 0 ? *ctl : -1; /* "stop", or the command is gone */
        }
        if (kept && (p[2].revents & POLLIN)) {
            int c = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            char line[64];
            if (vg_demo_peer_ok(c) && vg_demo_read_line(c, line, sizeof(line), 2000) == 0 &&
                strcmp(line, "stop") == 0)
                return c;
            close(c);
        }
    }
}

/*
 * The keeper (the forked child): a session of its own, stage, report, wait, clean up, report.
 * Its messages go to the command through ctl: "ready DIR", or "error ERRNO"; at the end
 * "done STOPPED SURVIVORS REMOVED". Returns 0 or staging's negative errno.
 */
int vg_demo_keeper(struct vg_demo *d, int ctl, int lsock, uint64_t keep_ms)
{
    setsid();
    if (chdir("/") != 0) {
        /* Nothing depends on it: it only keeps a directory from staying busy. */
    }
    /* Nothing of the keeper's or its processes' may reach the command's terminal or pipe: a
     * `demo --keep | cat` would otherwise wait for them to end. Messages go through ctl. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    const char *tmp = secure_getenv("TMPDIR");
    int rc = sfd < 0 ? -errno : vg_demo_stage(d, tmp && tmp[0] ? tmp : "/tmp");
    char msg[PATH_MAX + 64];
    if (rc)
        snprintf(msg, sizeof(msg), "error %d\n", -rc);
    else
        snprintf(msg, sizeof(msg), "ready %s\n", d->dir);
    vg_demo_send(ctl, msg);

    int to = rc ? ctl : vg_demo_keeper_wait(d, &ctl, lsock, sfd, keep_ms);
    struct vg_demo_result res = {0};
    vg_demo_stop(d, &res);
    res.dir_removed = vg_demo_rmdir(d);
    if (to >= 0) {
        snprintf(msg, sizeof(msg), "done %zu %zu %d\n", res.stopped, res.survivors,
                 res.dir_removed ? 1 : 0);
        vg_demo_send(to, msg);
        close(to);
    }
    if (to != ctl && ctl >= 0)
        close(ctl);
    if (lsock >= 0) {
        close(lsock);
        if (d->sock[0])
            unlink(d->sock);
    }
    if (sfd >= 0)
        close(sfd);
    free(d->procs);
    return rc;
}

/* Ask the keeper at fd to stop and wait (bounded) for its "done" line; a keeper still staging
 * answers "ready" or "error" first, which is skipped. */
int vg_demo_request_stop(int fd, struct vg_demo_result *res, int timeout_ms)
{
    vg_demo_send(fd, "stop\n");
    unsigned long long deadline = vg_clock_ms() + (unsigned long long)timeout_ms;
    for (;;) {
        char line[PATH_MAX + 64];
        unsigned long long now = vg_clock_ms();
        int rc = now >= deadline ? -ETIMEDOUT
                                 : vg_demo_read_line(fd, line, sizeof(line), (int)(deadline - now));
        if (rc)
            return rc;
        unsigned long long st, sv;
        int removed;
        if (strncmp(line, "done ", 5) != 0)
            continue;
        if (sscanf(line, "done %llu %llu %d", &st, &sv, &removed) != 3)
            return -EPROTO;
        res->stopped = (size_t)st;
        res->survivors = (size_t)sv;
        res->dir_removed = removed == 1;
        return 0;
    }
}

/* The first of the blocked signals that is pending, or 0. */
int vg_demo_pending(const sigset_t *blocked)
{
    sigset_t pending;
    sigpending(&pending);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(blocked, s) && sigismember(&pending, s))
            return s;
    return 0;
}

/* Whether a socket at sa answers (a kept simulation), or is left over from one that died. */
static bool vg_demo_sock_live(const struct sockaddr_un *sa, socklen_t len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true; /* cannot tell: never remove it */
    bool live = connect(fd, (const struct sockaddr *)sa, len) == 0 || errno != ECONNREFUSED;
    close(fd);
    return live;
}

/* --keep's own socket, bound before anything is staged so a second --keep fails at once; its
 * path into d->sock (the keeper removes it). A socket left by a keeper that died (nobody
 * listens) is replaced. 0, -EADDRINUSE, or another negative errno with a message. */
int vg_demo_keep_socket(struct vg_demo *d, int *out, struct vg_err *err)
{
    struct sockaddr_un sa;
    socklen_t len = 0;
    int rc = vg_demo_sockaddr(&sa, &len, true, err);
    if (rc)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return vg_err_set(err, -errno, "cannot create a socket: %s", strerror(errno));
    int b = bind(fd, (struct sockaddr *)&sa, len);
    if (b != 0 && errno == EADDRINUSE && !vg_demo_sock_live(&sa, len) && unlink(sa.sun_path) == 0)
        b = bind(fd, (struct sockaddr *)&sa, len);
    if (b != 0 || listen(fd, 8) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE)
            return -e;
        return vg_err_set(err, -e, "cannot listen on '%s': %s", sa.sun_path, strerror(e));
    }
    snprintf(d->sock, sizeof(d->sock), "%s", sa.sun_path);
    *out = fd;
    return 0;
}

int vg_demo_wait_staged(int fd, const sigset_t *block, char *line, size_t n, int *sig,
                        const char **dir)
{
    *dir = NULL;
    *sig = 0;
    int rc = -ETIMEDOUT;
    unsigned long long until = vg_clock_ms() + VG_DEMO_STAGE_WAIT_MS;
    while (vg_clock_ms() < until && !(*sig = vg_demo_pending(block))) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 100) > 0) {
            rc = vg_demo_read_line(fd, line, n, VG_DEMO_STOP_WAIT_MS);
            break;
        }
    }
    if (*sig)
        return -EINTR;
    if (rc)
        return rc;
    if (strncmp(line, "ready ", 6) == 0) {
        *dir = line + 6;
        return 0;
    }
    int e = 0;
    if (sscanf(line, "error %d", &e) == 1 && e > 0)
        return -e;
    return -EPROTO;
}

bool vg_demo_request_keep(int fd, char *line, size_t n)
{
    vg_demo_send(fd, "keep\n");
    return vg_demo_read_line(fd, line, n, VG_DEMO_STOP_WAIT_MS) == 0 && strcmp(line, "kept") == 0;
}

int vg_demo_connect_kept(int *fd, pid_t *peer, struct vg_err *err)
{
    struct sockaddr_un sa;
    socklen_t len = 0;
    int rc = vg_demo_sockaddr(&sa, &len, false, err);
    if (rc)
        return rc;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return vg_err_set(err, -errno, "cannot create a socket: %s", strerror(errno));
    if (connect(s, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(s);
        if (e == ECONNREFUSED || e == ENOENT)
            return -ENOENT;
        return vg_err_set(err, -e, "cannot reach the kept simulation: %s", strerror(e));
    }
    struct ucred cr = {0};
    socklen_t crl = sizeof(cr);
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0 || cr.uid != geteuid()) {
        *peer = cr.pid;
        close(s);
        return 1;
    }
    *fd = s;
    return 0;
}
