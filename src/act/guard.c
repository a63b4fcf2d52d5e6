/*
 * The guard: what stops a cgroup-tracked job when `vramguard run` itself dies, SIGKILL included,
 * and keeps its GPUs reserved until then.
 *
 * A reservation is a flock on an open file description (lock.h); the job inherits the
 * descriptor, so the reservation lasts while any of its processes keeps it. That covers what
 * the kernel can see, not processes that close what they inherited (Python's subprocess does by
 * default, daemons do) and outlive the job's main process: with run gone they would hold a GPU
 * nobody has reserved. Nothing of run survives a SIGKILL to clean up, and PR_SET_PDEATHSIG
 * reaches only the job's first process, so a second process does it: forked by run once the
 * job is in its cgroup, in a session of its own, with every signal but SIGKILL blocked and no
 * descriptor but the reservations, the cgroup directory and the read end of a "lifeline" pipe
 * whose only write end run holds (close-on-exec, so no process of the job has it).
 *
 * When the lifeline reads EOF, run is gone or done. If the job's cgroup still holds processes,
 * run died under it: the job's main process has had SIGTERM (its death signal), the rest get
 * the same --grace as run's own clean-up to finish, then SIGKILL all at once (cgroup.kill; before
 * Linux 5.14, the cgroup frozen and each member killed), like systemd's KillMode=mixed. The
 * guard waits until the cgroup is empty, with no deadline: the GPUs stay reserved for as long
 * as a process of the job lives (one stuck in the driver, state D, included). Then it removes
 * the cgroup and exits, and the reservations go with the last descriptor.
 *
 * Between fork and _exit the guard is a copy of a process that may have other threads: it calls
 * only async-signal-safe functions and allocates nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "act/job.h"
#include "act/stop.h"
#include "util/clock.h"

/* How often the guard looks at the cgroup when no notification came. */
#define VG_GUARD_POLL_MS 1000

struct vg_guard {
    int life_fd;
    int cg_fd;
    const char *cg_path;
    const int *keep; /* sorted: the descriptors the guard keeps */
    size_t nkeep;
    uint64_t grace_ms;
    bool has_kill;
};

static void vg_guard_close_range(unsigned lo, unsigned hi)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
#endif
    /* Before Linux 5.9: one by one, up to the descriptor limit. */
    struct rlimit rl;
    unsigned max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (1u << 20))
        max = (unsigned)rl.rlim_cur;
    for (unsigned fd = lo; fd <= hi && fd < max; fd++)
        close((int)fd);
}

/* Close everything but keep (sorted), stdin, stdout and stderr included: a guard that held
 * run's output open would keep a pipe reader waiting after run is gone. */
static void vg_guard_close_others(const int *keep, size_t n)
{
    unsigned lo = 0;
    for (size_t i = 0; i <= n; i++) {
        unsigned hi = i < n ? (unsigned)keep[i] : ~0u;
        if (hi > lo)
            vg_guard_close_range(lo, i < n ? hi - 1 : hi);
        if (i < n && (unsigned)keep[i] + 1 > lo)
            lo = (unsigned)keep[i] + 1;
    }
}

int vg_job_cgroup_populated(const char *events)
{
    static const char key[] = "populated ";
    for (const char *line = events; *line;) {
        size_t i = 0;
        while (key[i] && line[i] == key[i])
            i++;
        if (!key[i] && (line[i] == '0' || line[i] == '1') &&
            (line[i + 1] == '\n' || line[i + 1] == '\0'))
            return line[i] - '0';
        while (*line && *line != '\n')
            line++;
        if (*line)
            line++;
    }
    return -1;
}

/* 1 while the cgroup holds a process, 0 once it holds none, -1 when cgroup.events cannot be
 * read: the cgroup was removed, which only an empty one can be. */
static int vg_guard_populated(int ev)
{
    char buf[256];
    ssize_t n = pread(ev, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return vg_job_cgroup_populated(buf);
}

static int vg_guard_write(int cg_fd, const char *file, const char *text, size_t n)
{
    int f = openat(cg_fd, file, O_WRONLY | O_CLOEXEC);
    if (f < 0)
        return -errno;
    ssize_t w = write(f, text, n);
    int rc = w == (ssize_t)n ? 0 : -EIO;
    close(f);
    return rc;
}

void vg_job_pids_feed(struct vg_job_pids *s, const char *buf, size_t n,
                      void (*fn)(pid_t pid, void *ctx), void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c >= '0' && c <= '9') {
            if (s->cur > (uint64_t)INT32_MAX)
                s->bad = true; /* no pid is that long: skip the whole number */
            else
                s->cur = s->cur * 10 + (uint64_t)(c - '0');
            s->digits = true;
            continue;
        }
        if (s->digits && !s->bad && s->cur > 0 && s->cur <= (uint64_t)INT32_MAX)
            fn((pid_t)s->cur, ctx);
        s->cur = 0;
        s->digits = s->bad = false;
    }
}

/* Whether a pid listed in the frozen cgroup is still the process listed: always (see below). */
static bool vg_guard_frozen_same(void *ctx)
{
    (void)ctx;
    return true;
}

/* Through act/stop.h's one way to signal a process by number. Its check is trivially true here:
 * the cgroup is frozen, so nobody listed can exit and have its number reused before the signal.
 * (vg_stop_signal_if() makes only async-signal-safe calls: system calls, no allocation.) */
static void vg_guard_kill_one(pid_t pid, void *ctx)
{
    vg_stop_signal_if(pid, SIGKILL, vg_guard_frozen_same, ctx);
}

/* SIGKILL to every process in the cgroup. */
static void vg_guard_kill(const struct vg_guard *g)
{
    if (g->has_kill && vg_guard_write(g->cg_fd, "cgroup.kill", "1", 1) == 0)
        return;
    /* Frozen (Linux 5.2+), nobody in the cgroup forks or exits on its own between the listing
     * and the signal, so each pid listed is still the process it was; a fatal signal still
     * ends a frozen process. */
    vg_guard_write(g->cg_fd, "cgroup.freeze", "1", 1);
    int f = openat(g->cg_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return;
    struct vg_job_pids s = {0};
    char buf[4096];
    ssize_t r;
    while ((r = read(f, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
        if (r > 0)
            vg_job_pids_feed(&s, buf, (size_t)r, vg_guard_kill_one, NULL);
    vg_job_pids_feed(&s, "\n", 1, vg_guard_kill_one, NULL);
    close(f);
}

/* Wait until the cgroup is empty, or until deadline (UINT64_MAX: none); true once empty. With
 * kill, every look kills what is there (cgroup.kill is cheap, and the fallback needs repeats). */
static bool vg_guard_wait_empty(const struct vg_guard *g, int ev, uint64_t deadline, bool kill)
{
    for (;;) {
        if (vg_guard_populated(ev) != 1)
            return true;
        if (kill)
            vg_guard_kill(g);
        uint64_t now = vg_clock_ms();
        if (now >= deadline)
            return false;
        uint64_t left = deadline - now;
        struct pollfd pfd = {.fd = ev, .events = POLLPRI};
        /* cgroup.events signals POLLPRI when "populated" changes; the timeout only guards
         * against a notification missed between the read and the poll. */
        poll(&pfd, 1, left < VG_GUARD_POLL_MS ? (int)left : VG_GUARD_POLL_MS);
    }
}

static void vg_guard_main(const struct vg_guard *g) __attribute__((noreturn));
static void vg_guard_main(const struct vg_guard *g)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    setsid(); /* no terminal: neither ^C nor a hangup reaches it */
    prctl(PR_SET_NAME, "vramguard-guard");
    vg_guard_close_others(g->keep, g->nkeep);

    char c;
    for (;;) {
        ssize_t r = read(g->life_fd, &c, 1);
        if (r == 0 || (r < 0 && errno != EINTR))
            break; /* run is gone, or done */
    }
    int ev = openat(g->cg_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
    if (ev >= 0) {
        uint64_t now = vg_clock_ms();
        uint64_t deadline = g->grace_ms > UINT64_MAX - now ? UINT64_MAX : now + g->grace_ms;
        if (!vg_guard_wait_empty(g, ev, deadline, false))
            vg_guard_wait_empty(g, ev, UINT64_MAX, true);
        close(ev);
    }
    /* Gone already when run removed it first. A process that has just been reaped may be
     * counted for a moment: 100 x 10 ms. */
    for (int i = 0; i < 100 && rmdir(g->cg_path) != 0 && errno == EBUSY; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    _exit(0);
}

static int vg_guard_int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int vg_job_guard_start(struct vg_job *job, const struct vg_job_opts *opts, struct vg_err *err)
{
    if (!job->use_cgroup || job->cgroup_fd < 0 || !job->cgroup_path)
        return vg_err_set(err, -EINVAL, "no cgroup to guard");
    int life[2];
    if (pipe2(life, O_CLOEXEC) != 0)
        return vg_err_set(err, -errno, "cannot create a pipe: %s", strerror(errno));
    size_t n = opts->nlock_fds + 2;
    int *keep = malloc(n * sizeof(*keep));
    if (!keep) {
        close(life[0]);
        close(life[1]);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < opts->nlock_fds; i++)
        keep[i] = opts->lock_fds[i];
    keep[n - 2] = life[0];
    keep[n - 1] = job->cgroup_fd;
    qsort(keep, n, sizeof(*keep), vg_guard_int_cmp);
    struct vg_guard g = {
        .life_fd = life[0],
        .cg_fd = job->cgroup_fd,
        .cg_path = job->cgroup_path,
        .keep = keep,
        .nkeep = n,
        .grace_ms = opts->grace_ms,
        .has_kill = job->cgroup_kill,
    };
    pid_t pid = fork();
    if (pid == 0)
        vg_guard_main(&g);
    int e = errno;
    close(life[0]);
    free(keep);
    if (pid < 0) {
        close(life[1]);
        return vg_err_set(err, -e, "cannot fork: %s", strerror(e));
    }
    job->guard_pid = pid;
    job->guard_fd = life[1];
    return 0;
}

bool vg_job_guard_stop(struct vg_job *job)
{
    if (job->guard_fd >= 0)
        close(job->guard_fd);
    job->guard_fd = -1;
    if (job->guard_pid <= 0 || job->guard_reaped)
        return true;
    for (unsigned waited = 0;; waited += 10) {
        int st;
        pid_t r = waitpid(job->guard_pid, &st, WNOHANG);
        if (r == job->guard_pid || (r < 0 && errno == ECHILD)) {
            job->guard_reaped = true;
            return true;
        }
        if (waited >= VG_JOB_GUARD_WAIT_MS)
            return false;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
