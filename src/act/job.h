/*
 * Running a job the way `vramguard run` promises: started with the environment it was given,
 * its whole process tree tracked (a cgroup v2 of its own when one can be created, always with
 * PR_SET_CHILD_SUBREAPER so orphaned descendants come back to us), signals forwarded, the
 * terminal handed over and taken back, and every leftover descendant stopped and reaped when
 * the main process ends.
 *
 * Life cycle, in one thread:
 *   vg_job_init()     block the handled signals and take them through a signalfd (before
 *                     anything else, so no thread created later can take them by default);
 *   vg_job_sleep()    an interruptible, bounded sleep while waiting for GPUs;
 *   vg_job_start()    fork; the child waits on a pipe until it is in its cgroup and owns the
 *                     terminal, then execs (PATH search like a shell; exec failures come back
 *                     through a close-on-exec pipe as an errno) with the reservation
 *                     descriptors (lock_fds) inherited and SIGTERM as its death signal; a
 *                     cgroup-tracked job also gets its guard (guard.c), which stops it if we
 *                     die;
 *   vg_job_wait()     forward signals until the main process exits; its status;
 *   vg_job_cleanup()  SIGTERM (then SIGCONT) every descendant still alive, SIGKILL after the
 *                     grace period, reap them all, report who was there and who survived;
 *   vg_job_release()  let the guard go (it stays while the cgroup still holds a process),
 *                     remove the cgroup, restore the terminal.
 * Nothing here prints: what is worth saying goes through the optional log callback, and
 * reports come back as data.
 *
 * What the job sees of us: its environment and argv as given, the signal mask and SIGCHLD
 * disposition we started with, and, besides what we inherited ourselves, one read-only
 * descriptor per reserved GPU (the lock file, lock.h): while any process of the job keeps one,
 * the GPU stays reserved, even after our death. Closing it gives up that process's share.
 *
 * Ownership: struct vg_job is embedded by the caller and owns its descriptors, its cgroup
 * directory and the arrays in it; vg_job_release() frees everything (safe after a failed init).
 * It does not own opts->lock_fds (the caller closes them after vg_job_release()).
 */
#ifndef VG_ACT_JOB_H
#define VG_ACT_JOB_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

enum vg_job_track {
    VG_JOB_TRACK_AUTO,      /* cgroup when possible, else subreaper */
    VG_JOB_TRACK_CGROUP,    /* cgroup or fail */
    VG_JOB_TRACK_SUBREAPER, /* never create a cgroup */
};

/* A process of the job, as seen when enumerating. start is the start time in clock ticks
 * (with pid, the identity: a recycled pid has another start time). */
struct vg_job_proc {
    pid_t pid;
    uint64_t start;
    char state;
    char comm[24];
};

struct vg_job_procs {
    struct vg_job_proc *v;
    size_t n, cap;
};

typedef void (*vg_job_log_fn)(void *ctx, const char *msg);

struct vg_job_cleanup_report;
/* Called by vg_job_cleanup() each time it signals processes it had not signalled yet: sig is
 * SIGTERM or SIGKILL, ps the processes just signalled, rep the report so far. */
typedef void (*vg_job_notify_fn)(void *ctx, int sig, const struct vg_job_procs *ps,
                                 const struct vg_job_cleanup_report *rep);

struct vg_job_opts {
    char *const *argv; /* argv[0] looked up in PATH like a shell; never rewritten */
    char *const *envp;
    enum vg_job_track track;
    const char *cgroup_base; /* parent directory for the job's cgroup (must be on cgroup2);
                              * NULL or "": our own cgroup in the cgroup2 mount */
    const int *lock_fds;     /* descriptors the job inherits: its GPU reservations */
    size_t nlock_fds;
    uint64_t grace_ms;       /* the guard's grace between the job's SIGTERM and SIGKILL */
    vg_job_log_fn log;       /* optional: --verbose notes */
    vg_job_notify_fn notify; /* optional: leftovers being signalled */
    void *log_ctx;           /* for both */
};

struct vg_job {
    int sigfd;   /* signalfd of the handled signals */
    int proc_fd; /* our own /proc (never --proc: these are our processes) */
    sigset_t old_mask;
    bool mask_saved;
    struct sigaction old_chld;
    bool chld_saved;

    pid_t pid; /* main process; 0 before start */
    bool exited;
    int wstatus;
    int exec_errno; /* exec failed in the child with this errno */

    bool use_cgroup; /* the job runs in its own cgroup */
    char *cgroup_path;
    int cgroup_fd;
    bool cgroup_kill;    /* cgroup.kill exists (Linux 5.14+) */
    char *no_cgroup_why; /* why not, when not */
    bool subreaper;      /* PR_SET_CHILD_SUBREAPER took */
    pid_t guard_pid;     /* the guard (guard.c), 0 when none */
    bool guard_reaped;   /* it exited and we reaped it */
    int guard_fd;        /* write end of its lifeline: closed (or we die), the guard acts */

    bool tty; /* the job got the terminal */
    int tty_fd;
    pid_t our_pgrp;

    struct vg_job_procs seen; /* every process ever seen in the job, main included */
    vg_job_log_fn log;
    vg_job_notify_fn notify;
    void *log_ctx;
};

/* What vg_job_cleanup() found and did. */
struct vg_job_cleanup_report {
    struct vg_job_procs termed;    /* leftovers sent SIGTERM */
    struct vg_job_procs killed;    /* still there after the grace period: SIGKILL */
    struct vg_job_procs survivors; /* still there after SIGKILL and VG_JOB_KILL_WAIT_MS */
    bool hurried;                  /* a signal to us cut the grace period short */
};

/* After SIGKILL, how long to wait for the kernel to finish them. */
#define VG_JOB_KILL_WAIT_MS 5000u
/* At the end, how long to wait for the guard to go (it goes at once over an empty cgroup). */
#define VG_JOB_GUARD_WAIT_MS 2000u

/* The signals taken through the signalfd: forwarded to the job, or (before it starts) a
 * reason to give up waiting. */
#define VG_JOB_FORWARDED SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2

int vg_job_init(struct vg_job *job, struct vg_err *err);
/* Sleep up to ms; returns a terminating signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) if one came,
 * else 0. */
int vg_job_sleep(struct vg_job *job, unsigned ms);
/* Start the job. On an exec failure returns 0 with exec_errno set (the child already reaped);
 * negative on a setup failure (nothing left running). */
int vg_job_start(struct vg_job *job, const struct vg_job_opts *opts, struct vg_err *err);
/* Forward signals until the main process exits; returns its status the shell way: the exit
 * code, or 128 + the signal that killed it. */
int vg_job_wait(struct vg_job *job);
/* Stop and reap every descendant still alive: SIGTERM + SIGCONT, SIGKILL after grace_ms (or at
 * once when a forwarded signal comes in meanwhile), then wait up to VG_JOB_KILL_WAIT_MS. */
int vg_job_cleanup(struct vg_job *job, uint64_t grace_ms, struct vg_job_cleanup_report *rep,
                   struct vg_err *err);
void vg_job_cleanup_report_release(struct vg_job_cleanup_report *rep);
/* Whether pid was ever part of the job (with start time when known: 0 matches any). */
bool vg_job_was_member(const struct vg_job *job, pid_t pid);
void vg_job_release(struct vg_job *job);

/* A wait status the shell way: the exit code, or 128 + the signal. */
int vg_job_status_code(int wstatus);
/* Exit status for an exec errno, as a shell gives it: 127 not found, 126 otherwise. */
int vg_job_exec_status(int err);

/* The pieces, exposed for unit tests. */
/* Read one /proc/PID/stat (rooted at proc_fd) into p; -ENOENT when gone. *ppid optional. */
int vg_job_proc_read(int proc_fd, pid_t pid, struct vg_job_proc *p, pid_t *ppid);
/* Alive: not a zombie, or a zombie leader one of whose threads still runs. */
bool vg_job_proc_live(int proc_fd, const struct vg_job_proc *p);
/* Every live descendant of root (zombies whose threads are all gone excluded), from /proc. */
int vg_job_descendants(int proc_fd, pid_t root, struct vg_job_procs *out, struct vg_err *err);
int vg_job_procs_add(struct vg_job_procs *ps, const struct vg_job_proc *p);
bool vg_job_procs_has(const struct vg_job_procs *ps, pid_t pid, uint64_t start);
void vg_job_procs_release(struct vg_job_procs *ps);

/* cgroup v2 helpers (cgroup.c). */
/* The cgroup2 directory we run in: mountinfo's cgroup2 mount joined with /proc/self/cgroup's
 * "0::" path. Pure parts for tests: */
int vg_job_cgroup_mount(const char *mountinfo, char **mountpoint, char **root);
int vg_job_cgroup_self(const char *self_cgroup, char **path);
int vg_job_cgroup_base(char **base, struct vg_err *err);
/* Create base/vramguard-run-PID (removing stale siblings of dead runs first). */
int vg_job_cgroup_create(const char *base, char **path, int *fd, bool *has_kill,
                         struct vg_err *err);
int vg_job_cgroup_add(int fd, pid_t pid, struct vg_err *err);
int vg_job_cgroup_pids(int fd, pid_t **pids, size_t *n);
int vg_job_cgroup_kill(int fd);
/* rmdir, retried while the kernel still counts exiting processes (bounded). */
int vg_job_cgroup_remove(const char *path);
/* cgroup.events text: 1 "populated 1", 0 "populated 0", -1 neither. */
int vg_job_cgroup_populated(const char *events);

/* The guard (guard.c). Start it for a job in its cgroup (job->use_cgroup), holding
 * opts->lock_fds; job->guard_pid and guard_fd set. */
int vg_job_guard_start(struct vg_job *job, const struct vg_job_opts *opts, struct vg_err *err);
/* Close its lifeline and wait up to VG_JOB_GUARD_WAIT_MS for it to exit: true when it did (or
 * there was none), false when it stays (the job's cgroup still holds a process). */
bool vg_job_guard_stop(struct vg_job *job);
/* A cgroup.procs text read in pieces, without allocating (the guard's SIGKILL before Linux
 * 5.14): feed every piece, then "\n"; fn gets each pid, numbers that are no pid skipped. */
struct vg_job_pids {
    uint64_t cur;
    bool digits, bad;
};
void vg_job_pids_feed(struct vg_job_pids *s, const char *buf, size_t n,
                      void (*fn)(pid_t pid, void *ctx), void *ctx);

#endif
