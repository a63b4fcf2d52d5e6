/*
 * Starting, supervising and cleaning up after a job (see job.h for the life cycle).
 *
 * Signals are taken synchronously: blocked from vg_job_init() on and read from a signalfd, so
 * no work ever happens in a handler and no thread started later (the NVML worker) can take one
 * by default. The child restores the original mask and SIGCHLD disposition before exec, so the
 * job starts with what it would have had if started directly (ignored signals stay ignored).
 *
 * The child is forked and holds on a pipe until the parent has put it in its cgroup and, when
 * we own the terminal, in its own process group in the foreground; only then does it exec.
 * A second, close-on-exec pipe carries an exec failure's errno back (EOF means exec worked).
 */
#include "act/job.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "act/note.h"
#include "act/stop.h"
#include "util/clock.h"
#include "util/priv.h"

static const int vg_job_sigs[] = {VG_JOB_FORWARDED, SIGCHLD};

static void vg_job_logf(const struct vg_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void vg_job_logf(const struct vg_job *job, const char *fmt, ...)
{
    /* whole, however long the command it names (was cut at 511 bytes without a mark) */
    va_list ap;
    va_start(ap, fmt);
    vg_note_v(job->log, job->log_ctx, "(a note about the job was lost: out of memory)", fmt, ap);
    va_end(ap);
}

int vg_job_exec_status(int err)
{
    return err == ENOENT || err == ENOTDIR ? 127 : 126;
}

int vg_job_init(struct vg_job *job, struct vg_err *err)
{
    memset(job, 0, sizeof(*job));
    job->sigfd = job->proc_fd = job->cgroup_fd = job->tty_fd = job->guard_fd = -1;
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(vg_job_sigs) / sizeof(vg_job_sigs[0]); i++)
        sigaddset(&set, vg_job_sigs[i]);
    /* Blocked but never read: with SIGTTOU blocked, tcsetpgrp() and writes to the terminal
     * work from the background, where we are while the job owns the terminal. */
    sigset_t block = set;
    sigaddset(&block, SIGTTOU);
    if (sigprocmask(SIG_BLOCK, &block, &job->old_mask) != 0)
        return vg_err_set(err, -errno, "cannot block signals: %s", strerror(errno));
    job->mask_saved = true;
    /* SIGCHLD ignored (inherited) would make the kernel reap our children behind our back. */
    if (sigaction(SIGCHLD, NULL, &job->old_chld) == 0) {
        job->chld_saved = true;
        if (job->old_chld.sa_handler == SIG_IGN || (job->old_chld.sa_flags & SA_NOCLDWAIT)) {
            struct sigaction dfl = {0};
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            sigaction(SIGCHLD, &dfl, NULL);
        }
    }
    job->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (job->sigfd < 0)
        return vg_err_set(err, -errno, "cannot create a signalfd: %s", strerror(errno));
    job->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (job->proc_fd < 0)
        return vg_err_set(err, -errno, "cannot open /proc: %s", strerror(errno));
    return 0;
}

/* Wait up to ms for a signal; 1 with *si filled, 0 on timeout. */
static int vg_job_next_signal(struct vg_job *job, int ms, struct signalfd_siginfo *si)
{
    for (;;) {
        ssize_t n = read(job->sigfd, si, sizeof(*si));
        if (n == (ssize_t)sizeof(*si))
            return 1;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return 0;
        if (ms == 0)
            return 0;
        struct pollfd pfd = {.fd = job->sigfd, .events = POLLIN};
        int r = poll(&pfd, 1, ms);
        if (r == 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return 0;
        ms = 0; /* read what woke us, then report a timeout if it was nothing */
    }
}

static bool vg_job_terminating(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

int vg_job_sleep(struct vg_job *job, unsigned ms)
{
    uint64_t end = vg_clock_ms() + ms;
    for (;;) {
        uint64_t now = vg_clock_ms();
        if (now >= end)
            return 0;
        struct signalfd_siginfo si;
        if (vg_job_next_signal(job, (int)(end - now), &si) && vg_job_terminating((int)si.ssi_signo))
            return (int)si.ssi_signo;
    }
}

static void vg_job_seen(struct vg_job *job, const struct vg_job_proc *p)
{
    if (!vg_job_procs_has(&job->seen, p->pid, p->start))
        vg_job_procs_add(&job->seen, p); /* best effort: only used to name holders */
}

bool vg_job_was_member(const struct vg_job *job, pid_t pid)
{
    return vg_job_procs_has(&job->seen, pid, 0);
}

static int vg_job_setup_cgroup(struct vg_job *job, const struct vg_job_opts *opts,
                               struct vg_err *err)
{
    char *base = NULL;
    int rc = 0;
    if (opts->cgroup_base && *opts->cgroup_base) {
        base = strdup(opts->cgroup_base);
        if (!base)
            return vg_err_set(err, -ENOMEM, "out of memory");
    } else if ((rc = vg_job_cgroup_base(&base, err)) != 0) {
        return rc;
    }
    rc = vg_job_cgroup_create(base, &job->cgroup_path, &job->cgroup_fd, &job->cgroup_kill, err);
    free(base);
    if (rc == 0)
        job->use_cgroup = true;
    return rc;
}

static void vg_job_drop_cgroup(struct vg_job *job, const char *why)
{
    if (job->cgroup_fd >= 0)
        close(job->cgroup_fd);
    job->cgroup_fd = -1;
    if (job->cgroup_path)
        vg_job_cgroup_remove(job->cgroup_path);
    free(job->cgroup_path);
    job->cgroup_path = NULL;
    job->use_cgroup = false;
    free(job->no_cgroup_why);
    job->no_cgroup_why = strdup(why);
}

/* In the child, between fork and exec: async-signal-safe calls only. */
static void vg_job_child(struct vg_job *job, const struct vg_job_opts *opts, pid_t parent,
                         int sync_fd, int err_fd)
{
    if (job->tty)
        setpgid(0, 0);
    char c;
    ssize_t r;
    do {
        r = read(sync_fd, &c, 1);
    } while (r < 0 && errno == EINTR);
    if (r != 1)
        _exit(127); /* the parent gave up on us */
    /* If run dies (even by SIGKILL), the job is told to stop: SIGTERM, so that it can stop its
     * own workers; the guard (cgroup) sends SIGKILL to what is left after the grace period, and
     * until the job is gone its descriptors keep its GPUs reserved. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(127);
    /* The reservations, on purpose across exec: the one exception to close-on-exec. */
    for (size_t i = 0; i < opts->nlock_fds; i++)
        fcntl(opts->lock_fds[i], F_SETFD, 0);
    if (job->chld_saved)
        sigaction(SIGCHLD, &job->old_chld, NULL);
    sigprocmask(SIG_SETMASK, &job->old_mask, NULL);
    /* A setuid copy's job runs as the user who started it, never as the copy's owner. */
    if (vg_priv_drop() != 0)
        _exit(126);
    execvpe(opts->argv[0], opts->argv, opts->envp);
    int e = errno;
    ssize_t w = write(err_fd, &e, sizeof(e));
    (void)w;
    _exit(vg_job_exec_status(e));
}

/* Step 1 of vg_job_start: the terminal, the subreaper bit and the cgroup, before the fork. */
static int vg_job_prepare(struct vg_job *job, const struct vg_job_opts *opts, struct vg_err *err)
{
    job->log = opts->log;
    job->notify = opts->notify;
    job->log_ctx = opts->log_ctx;
    job->our_pgrp = getpgrp();
    job->tty = isatty(STDIN_FILENO) == 1 && tcgetpgrp(STDIN_FILENO) == job->our_pgrp;
    job->tty_fd = job->tty ? STDIN_FILENO : -1;

    job->subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    if (!job->subreaper)
        vg_job_logf(job,
                    "cannot become a child subreaper (%s): orphaned processes of the job "
                    "may escape",
                    strerror(errno));
    if (opts->track == VG_JOB_TRACK_SUBREAPER) {
        vg_job_drop_cgroup(job, "--track subreaper");
        return 0;
    }
    struct vg_err cerr = VG_ERR_INIT;
    int rc = vg_job_setup_cgroup(job, opts, &cerr);
    if (rc && opts->track == VG_JOB_TRACK_CGROUP) {
        vg_err_set(err, rc, "cannot track the job with a cgroup: %s", vg_err_msg(&cerr));
        vg_err_release(&cerr);
        return rc;
    }
    if (rc)
        vg_job_drop_cgroup(job, vg_err_msg(&cerr));
    vg_err_release(&cerr);
    return 0;
}

/* Step 2: fork a child that waits on *sync_w before it execs and reports an exec failure's
 * errno on *err_r. The child never returns from here. */
static int vg_job_fork(struct vg_job *job, const struct vg_job_opts *opts, int *sync_w, int *err_r,
                       struct vg_err *err)
{
    int sync[2], errp[2];
    if (pipe2(sync, O_CLOEXEC) != 0)
        return vg_err_set(err, -errno, "cannot create a pipe: %s", strerror(errno));
    if (pipe2(errp, O_CLOEXEC) != 0) {
        int e = errno;
        close(sync[0]);
        close(sync[1]);
        return vg_err_set(err, -e, "cannot create a pipe: %s", strerror(e));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sync[0]);
        close(sync[1]);
        close(errp[0]);
        close(errp[1]);
        return vg_err_set(err, -e, "cannot fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(sync[1]);
        close(errp[0]);
        vg_job_child(job, opts, parent, sync[0], errp[1]);
    }
    close(sync[0]);
    close(errp[1]);
    job->pid = pid;
    *sync_w = sync[1];
    *err_r = errp[0];
    return 0;
}

/* Reap a child that has not exec'd yet (it reads EOF on its sync pipe and leaves). */
static void vg_job_abandon(struct vg_job *job, int sync_w, int err_r)
{
    close(sync_w);
    close(err_r);
    int st;
    while (waitpid(job->pid, &st, 0) < 0 && errno == EINTR) {
    }
    job->pid = 0;
    if (job->tty)
        tcsetpgrp(job->tty_fd, job->our_pgrp);
}

/* Step 3, while the child still waits: the terminal, the cgroup and the guard. */
static int vg_job_adopt(struct vg_job *job, const struct vg_job_opts *opts, int sync_w, int err_r,
                        struct vg_err *err)
{
    pid_t pid = job->pid;
    if (job->tty) {
        setpgid(pid, pid); /* both sides do it: whoever runs first */
        if (tcsetpgrp(job->tty_fd, pid) != 0) {
            vg_job_logf(job, "cannot give the terminal to the job: %s", strerror(errno));
            job->tty = false;
        }
    }
    if (job->use_cgroup) {
        struct vg_err cerr = VG_ERR_INIT;
        int rc = vg_job_cgroup_add(job->cgroup_fd, pid, &cerr);
        if (rc && opts->track == VG_JOB_TRACK_CGROUP) {
            vg_err_set(err, rc, "%s", vg_err_msg(&cerr));
            vg_err_release(&cerr);
            vg_job_abandon(job, sync_w, err_r);
            return rc;
        }
        if (rc)
            vg_job_drop_cgroup(job, vg_err_msg(&cerr));
        vg_err_release(&cerr);
    }
    if (job->use_cgroup) {
        /* Before the job runs, so that from its first instruction our death cannot leave it
         * running. Without a guard the job still holds its reservations itself. */
        struct vg_err gerr = VG_ERR_INIT;
        if (vg_job_guard_start(job, opts, &gerr))
            vg_job_logf(job,
                        "cannot start the guard (%s): if vramguard dies, what the job leaves "
                        "is not stopped",
                        vg_err_msg(&gerr));
        vg_err_release(&gerr);
    }
    struct vg_job_proc me;
    if (vg_job_proc_read(job->proc_fd, pid, &me, NULL) == 0)
        vg_job_seen(job, &me);
    return 0;
}

/* Step 4: let the child exec, and learn whether the exec failed. */
static void vg_job_release_child(struct vg_job *job, int sync_w, int err_r)
{
    ssize_t w;
    do {
        w = write(sync_w, "x", 1);
    } while (w < 0 && errno == EINTR);
    close(sync_w);
    int e = 0;
    ssize_t r;
    do {
        r = read(err_r, &e, sizeof(e));
    } while (r < 0 && errno == EINTR);
    close(err_r);
    if (r == (ssize_t)sizeof(e)) {
        job->exec_errno = e ? e : EIO;
        int st;
        while (waitpid(job->pid, &st, 0) < 0 && errno == EINTR) {
        }
        job->exited = true;
        job->wstatus = st;
        if (job->tty)
            tcsetpgrp(job->tty_fd, job->our_pgrp);
    }
}

int vg_job_start(struct vg_job *job, const struct vg_job_opts *opts, struct vg_err *err)
{
    int sync_w = -1, err_r = -1;
    int rc = vg_job_prepare(job, opts, err);
    if (rc == 0)
        rc = vg_job_fork(job, opts, &sync_w, &err_r, err);
    if (rc == 0)
        rc = vg_job_adopt(job, opts, sync_w, err_r, err);
    if (rc == 0)
        vg_job_release_child(job, sync_w, err_r);
    return rc;
}

/* The job stopped (^Z): take the terminal back, stop ourselves the same way so the shell sees
 * us stopped, and hand everything back once we are continued. */
static void vg_job_suspend(struct vg_job *job, int sig)
{
    tcsetpgrp(job->tty_fd, job->our_pgrp);
    kill(getpid(), sig == SIGTSTP ? SIGTSTP : SIGSTOP);
    /* Continued: by `fg` the shell gave us the terminal and the job gets it back; by `bg` it
     * did not, and the job goes on in the background, as it would without us. */
    if (tcgetpgrp(job->tty_fd) == job->our_pgrp)
        tcsetpgrp(job->tty_fd, job->pid);
    kill(-job->pid, SIGCONT);
}

/* Reap every child that has changed state; note the main process's end. */
static void vg_job_reap(struct vg_job *job)
{
    for (;;) {
        int st;
        int flags = WNOHANG | (job->tty && !job->exited ? WUNTRACED : 0);
        pid_t r = waitpid(-1, &st, flags);
        if (r <= 0)
            return;
        if (r == job->guard_pid && !job->guard_reaped) {
            /* Only SIGKILL ends it while its lifeline is open. */
            job->guard_reaped = true;
            vg_job_logf(job,
                        "the guard (pid %ld) was killed: if vramguard dies now, what the job "
                        "leaves is not stopped",
                        (long)r);
            continue;
        }
        if (r != job->pid || job->exited)
            continue;
        if (WIFSTOPPED(st)) {
            vg_job_suspend(job, WSTOPSIG(st));
            continue;
        }
        job->exited = true;
        job->wstatus = st;
    }
}

static const char *vg_job_signame(int sig)
{
    switch (sig) {
    case SIGINT:
        return "INT";
    case SIGTERM:
        return "TERM";
    case SIGHUP:
        return "HUP";
    case SIGQUIT:
        return "QUIT";
    case SIGUSR1:
        return "USR1";
    case SIGUSR2:
        return "USR2";
    default:
        return "?";
    }
}

static void vg_job_forward(struct vg_job *job, const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;
    /* Sharing our process group, the job got the terminal's ^C itself. */
    if (!job->tty && si->ssi_code == SI_KERNEL) {
        vg_job_logf(job, "SIG%s came from the terminal, which sent it to the job too",
                    vg_job_signame(sig));
        return;
    }
    if (kill(job->pid, sig) == 0)
        vg_job_logf(job, "forwarded SIG%s to the job (pid %ld)", vg_job_signame(sig),
                    (long)job->pid);
}

int vg_job_status_code(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return 1;
}

int vg_job_wait(struct vg_job *job)
{
    while (!job->exited) {
        vg_job_reap(job);
        if (job->exited)
            break;
        struct signalfd_siginfo si;
        /* SIGCHLD wakes us; the timeout only guards against a lost wake-up. */
        if (!vg_job_next_signal(job, 5000, &si))
            continue;
        if (si.ssi_signo != SIGCHLD)
            vg_job_forward(job, &si);
    }
    if (job->tty) {
        tcsetpgrp(job->tty_fd, job->our_pgrp);
        job->tty = false;
    }
    return vg_job_status_code(job->wstatus);
}

/* Everything of the job still alive now: its cgroup's members and our descendants. */
static int vg_job_alive(struct vg_job *job, struct vg_job_procs *out, struct vg_err *err)
{
    out->n = 0;
    int rc = vg_job_descendants(job->proc_fd, getpid(), out, err);
    if (rc)
        return rc;
    /* Our child, not the job's: it goes when we tell it to. */
    if (job->guard_pid > 0 && !job->guard_reaped) {
        size_t k = 0;
        for (size_t i = 0; i < out->n; i++)
            if (out->v[i].pid != job->guard_pid)
                out->v[k++] = out->v[i];
        out->n = k;
    }
    if (job->use_cgroup) {
        pid_t *pids;
        size_t n;
        if (vg_job_cgroup_pids(job->cgroup_fd, &pids, &n) == 0) {
            for (size_t i = 0; i < n; i++) {
                struct vg_job_proc p;
                if (vg_job_procs_has(out, pids[i], 0) ||
                    vg_job_proc_read(job->proc_fd, pids[i], &p, NULL) != 0 ||
                    !vg_job_proc_live(job->proc_fd, &p))
                    continue;
                if (vg_job_procs_add(out, &p)) {
                    free(pids);
                    return vg_err_set(err, -ENOMEM, "out of memory");
                }
            }
            free(pids);
        }
    }
    for (size_t i = 0; i < out->n; i++)
        vg_job_seen(job, &out->v[i]);
    return 0;
}

struct vg_job_same {
    struct vg_job *job;
    const struct vg_job_proc *p;
};

/* Whether p's pid still names the process we saw (same start time). */
static bool vg_job_same(void *ctx)
{
    const struct vg_job_same *w = ctx;
    struct vg_job_proc now;
    return vg_job_proc_read(w->job->proc_fd, w->p->pid, &now, NULL) == 0 &&
           now.start == w->p->start;
}

/* Signal p only if it is still the process we saw (act/stop.h: through a pidfd, so the check
 * and the signal cannot straddle a pid being recycled). */
static int vg_job_signal(struct vg_job *job, const struct vg_job_proc *p, int sig)
{
    struct vg_job_same w = {job, p};
    return vg_stop_signal_if(p->pid, sig, vg_job_same, &w);
}

/* Wait up to ms, reaping; true when a terminating signal asks us to hurry. */
static bool vg_job_pause(struct vg_job *job, unsigned ms)
{
    struct signalfd_siginfo si;
    bool hurry = false;
    uint64_t end = vg_clock_ms() + ms;
    for (;;) {
        vg_job_reap(job);
        uint64_t now = vg_clock_ms();
        if (now >= end || hurry)
            return hurry;
        if (vg_job_next_signal(job, (int)(end - now), &si) &&
            vg_job_terminating((int)si.ssi_signo)) {
            vg_job_logf(job, "SIG%s: not waiting for the grace period",
                        vg_job_signame((int)si.ssi_signo));
            hurry = true;
        }
    }
}

/* How one phase of the clean-up goes: the signal, and how it waits between rounds. */
struct vg_job_phase {
    int sig;
    bool cont;        /* SIGCONT after it, so that a stopped process gets to act on it */
    bool hurry;       /* waits listen for a terminating signal (vg_job_pause), in slices */
    unsigned wait_ms; /* the pause between rounds (with hurry: at most this, up to the deadline) */
};

/* Phase 1: SIGTERM (and SIGCONT, for the stopped) to each, newcomers included, until the grace
 * period ends or a terminating signal asks us to hurry. */
static const struct vg_job_phase vg_job_term_phase = {SIGTERM, true, true, 100};
/* Phase 2: SIGKILL to each not yet killed, newcomers included, until VG_JOB_KILL_WAIT_MS. */
static const struct vg_job_phase vg_job_kill_phase = {SIGKILL, false, false, 50};

/*
 * Run one phase in rounds until deadline: each round reaps, lists the living into *alive, sends
 * ph->sig to each not yet in *sent (adding it there), and tells job->notify about those it
 * reached. 1 when nobody is left, 0 when the deadline came (or we were hurried) with *alive
 * still living, or a negative errno.
 */
static int vg_job_phase_run(struct vg_job *job, const struct vg_job_phase *ph, uint64_t deadline,
                            struct vg_job_procs *sent, struct vg_job_procs *alive,
                            struct vg_job_procs *fresh, struct vg_job_cleanup_report *rep,
                            struct vg_err *err)
{
    for (;;) {
        vg_job_reap(job);
        int rc = vg_job_alive(job, alive, err);
        if (rc)
            return rc;
        if (alive->n == 0)
            return 1;
        fresh->n = 0;
        for (size_t i = 0; i < alive->n; i++) {
            if (vg_job_procs_has(sent, alive->v[i].pid, alive->v[i].start))
                continue;
            if (vg_job_signal(job, &alive->v[i], ph->sig) == 0) {
                if (ph->cont)
                    vg_job_signal(job, &alive->v[i], SIGCONT);
                vg_job_procs_add(sent, &alive->v[i]);
                vg_job_procs_add(fresh, &alive->v[i]);
            }
        }
        if (fresh->n && job->notify)
            job->notify(job->log_ctx, ph->sig, fresh, rep);
        uint64_t now = vg_clock_ms();
        if (now >= deadline || (ph->hurry && rep->hurried))
            return 0;
        if (ph->hurry) {
            uint64_t left = deadline - now;
            if (vg_job_pause(job, left < ph->wait_ms ? (unsigned)left : ph->wait_ms))
                rep->hurried = true;
        } else {
            struct timespec ts = {0, (long)ph->wait_ms * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

int vg_job_cleanup(struct vg_job *job, uint64_t grace_ms, struct vg_job_cleanup_report *rep,
                   struct vg_err *err)
{
    memset(rep, 0, sizeof(*rep));
    struct vg_job_procs alive = {0}, fresh = {0};
    int rc = vg_job_phase_run(job, &vg_job_term_phase, vg_clock_ms() + grace_ms, &rep->termed,
                              &alive, &fresh, rep, err);
    if (rc)
        goto out;
    /* SIGKILL all at once through the cgroup when it can, then each (phase 2). */
    vg_job_reap(job);
    if ((rc = vg_job_alive(job, &alive, err)) != 0)
        goto out;
    if (alive.n == 0)
        goto out;
    if (job->use_cgroup && job->cgroup_kill && vg_job_cgroup_kill(job->cgroup_fd) == 0) {
        for (size_t i = 0; i < alive.n; i++)
            vg_job_procs_add(&rep->killed, &alive.v[i]);
        if (job->notify)
            job->notify(job->log_ctx, SIGKILL, &alive, rep);
    }
    rc = vg_job_phase_run(job, &vg_job_kill_phase, vg_clock_ms() + VG_JOB_KILL_WAIT_MS,
                          &rep->killed, &alive, &fresh, rep, err);
    if (rc)
        goto out;
    /* Unkillable for now (in the driver, state D): name them. */
    for (size_t i = 0; i < alive.n; i++)
        vg_job_procs_add(&rep->survivors, &alive.v[i]);
out:
    vg_job_reap(job);
    vg_job_procs_release(&alive);
    vg_job_procs_release(&fresh);
    return rc < 0 ? rc : 0;
}

void vg_job_cleanup_report_release(struct vg_job_cleanup_report *rep)
{
    vg_job_procs_release(&rep->termed);
    vg_job_procs_release(&rep->killed);
    vg_job_procs_release(&rep->survivors);
}

void vg_job_release(struct vg_job *job)
{
    if (job->tty && job->tty_fd >= 0)
        tcsetpgrp(job->tty_fd, job->our_pgrp);
    if (!vg_job_guard_stop(job))
        vg_job_logf(job,
                    "the guard (pid %ld) stays until the job's cgroup is empty: its GPUs stay "
                    "reserved until then",
                    (long)job->guard_pid);
    if (job->cgroup_fd >= 0)
        close(job->cgroup_fd);
    int rc = job->cgroup_path ? vg_job_cgroup_remove(job->cgroup_path) : 0;
    if (rc)
        vg_job_logf(job, "cannot remove the cgroup '%s': %s", job->cgroup_path, strerror(-rc));
    free(job->cgroup_path);
    free(job->no_cgroup_why);
    if (job->sigfd >= 0)
        close(job->sigfd);
    if (job->proc_fd >= 0)
        close(job->proc_fd);
    vg_job_procs_release(&job->seen);
    /* The handled signals stay blocked: the process is about to exit, and unblocking would
     * let a late ^C kill it before it reports the job's status. */
    memset(job, 0, sizeof(*job));
    job->sigfd = job->proc_fd = job->cgroup_fd = job->tty_fd = job->guard_fd = -1;
}
