/*
 * Stopping a process that holds a GPU, safely: the rules about what may never be signalled, the
 * identity re-check right before a signal, then the SIGTERM-then-SIGKILL sequence of act/stop.h
 * through a pidfd. `clean` plans with vg_kill_check() and acts with
 * vg_kill_start()/vg_kill_finish().
 *
 * What is never signalled (enum vg_kill_refusal): PID 1, vramguard itself and its ancestors,
 * kernel threads, infrastructure (display servers, the persistence daemon, DCGM, the fabric
 * manager, MPS, nvidia-smi), known by its executable and named only as a hint (act/infra.h:
 * proven, or named so and unproven; one that merely calls itself Xorg is not), another
 * user's process unless the caller's real
 * uid is root, a zombie (its parent is the one to act on), and a process with a thread in
 * uninterruptible sleep (no signal reaches it; only a GPU reset or a reboot frees its memory).
 *
 * The identity of a target is (pid, start time, uid) plus what it held (device minors, and
 * whether the driver listed it). vg_kill_start() opens a pidfd FIRST, then re-reads the process
 * and compares: if the PID was reused in between, the new process shows another start time and
 * is refused; if the planned process exits after the pidfd was opened, the signal fails with
 * ESRCH instead of reaching whatever reuses the number.
 *
 * Ownership: struct vg_kill_identity owns its minors array (vg_kill_identity_release()).
 * struct vg_kill borrows its identity, which must outlive it, and owns its pidfd (in stop;
 * vg_kill_release() closes it). Nothing here prints.
 */
#ifndef VG_ACT_KILL_H
#define VG_ACT_KILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "act/stop.h"
#include "proc/proc.h"
#include "util/err.h"

enum vg_kill_refusal {
    VG_KILL_ALLOWED = 0,
    VG_KILL_INIT,         /* PID 1 */
    VG_KILL_SELF,         /* vramguard itself */
    VG_KILL_ANCESTOR,     /* the shell or tool that runs vramguard */
    VG_KILL_KTHREAD,      /* a kernel thread */
    VG_KILL_PROTECTED,    /* infrastructure (act/infra.h: proven or unproven) */
    VG_KILL_OTHER_USER,   /* another user's, and the caller is not root */
    VG_KILL_ZOMBIE,       /* defunct: act on its parent */
    VG_KILL_DSTATE,       /* a thread in uninterruptible sleep */
    VG_KILL_UNREADABLE,   /* its identity (stat, status) could not be read */
    VG_KILL_NOT_VISIBLE,  /* the driver lists the PID, this /proc does not show it */
    VG_KILL_NAMESPACE,    /* only the driver saw it and vramguard runs in a PID namespace: the
                           * driver's PID may name another process here */
    VG_KILL_NOT_HOLDER,   /* named with --pid but holds no GPU */
    VG_KILL_CHANGED,      /* at signal time: start time or uid differ (the PID was reused) */
    VG_KILL_RELEASED,     /* at signal time: no longer holds the GPU; left alone */
    VG_KILL_STALE,        /* the driver lists the PID, but the process under it now holds no
                           * node of the GPU: a stale entry, the number reused */
    VG_KILL_UNSURE,       /* a leftover of medium confidence: not a default target */
    VG_KILL_NOT_LEFTOVER, /* looks orphaned, but is not a leftover (detached on purpose, a
                           * job's leader, stopped...): not a default target */
};

/* Stable identifier for JSON ("init", "self", "ancestor", "kernel-thread", "infrastructure",
 * "other-user", "zombie", "d-state", "unreadable", "not-visible", "pid-namespace",
 * "not-holder", "identity-changed", "released", "stale-entry", "uncertain", "not-leftover");
 * NULL for VG_KILL_ALLOWED. */
const char *vg_kill_refusal_id(enum vg_kill_refusal r);

/* Who is asking. */
struct vg_kill_ctx {
    pid_t self;             /* our PID as the procfs numbers it */
    const pid_t *ancestors; /* borrowed */
    size_t nancestors;
    uid_t ruid; /* the caller's real uid; 0 may signal anyone's process */
    /* A hand-off's job (epilog): processes of its uid are never infrastructure, whatever they
     * run, so the job's own leftovers are stopped even when they run a real Xorg. */
    bool job_uid_known;
    uid_t job_uid;
};

/* Who we are in a procfs (--proc): our PID as it numbers us, whether it numbers processes as
 * our PID namespace does (only then may a pidfd act), and our ancestors (never stopped).
 * vg_kill_who_open() fills it (root_fd open, ancestors owned); vg_kill_who_release() frees. */
struct vg_kill_who {
    int root_fd;      /* that procfs, open */
    pid_t self;       /* our PID there (getpid() when it does not show us) */
    bool own_pidns;   /* it numbers processes as our PID namespace does: a pidfd may act */
    pid_t *ancestors; /* owned */
    size_t nancestors;
};
/* Open proc_root ("/proc" when NULL or empty) and find self and ancestors. 0, or a negative
 * errno with err set ("cannot open '/proc': ..."); w is then released. */
int vg_kill_who_open(const char *proc_root, struct vg_kill_who *w, struct vg_err *err);
/* The view act/kill.h and act/plan.h take (borrows w's ancestors), with getuid() as the
 * caller. */
struct vg_kill_ctx vg_kill_who_ctx(const struct vg_kill_who *w);
void vg_kill_who_release(struct vg_kill_who *w);

/* The infrastructure p is never signalled as (act/infra.h's judgement PROVEN or UNPROVEN: the
 * program its comm or argv[0] names, checked against its executable), or NULL. Borrowed from
 * a static table. */
const char *vg_kill_protected_name(const struct vg_proc *p);

/* The policy on one process as read (plan time, and again at signal time). *act_on gets the
 * parent for VG_KILL_ZOMBIE (0 otherwise). */
enum vg_kill_refusal vg_kill_check(const struct vg_proc *p, const struct vg_kill_ctx *ctx,
                                   pid_t *act_on);
/* Whether vg_kill_check() refuses p for what it is, whoever asks for what: init, vramguard
 * itself or one of its ancestors, a kernel thread (by PID and kernel flags, never a name). */
bool vg_kill_is_system(const struct vg_proc *p, const struct vg_kill_ctx *ctx);

struct vg_kill_identity {
    pid_t pid;
    uint64_t start_ticks;
    uid_t uid;
    unsigned *minors; /* GPU device minors it held open (owned), ascending */
    size_t nminors;
    bool nvml; /* the driver listed it */
};

void vg_kill_identity_release(struct vg_kill_identity *id);

/* Asks the driver, right now, whether it lists pid on any GPU: 1 yes, 0 no, negative when it
 * cannot tell. */
typedef int (*vg_kill_nvml_fn)(void *arg, pid_t pid);

/* The driver asked through gpu/collect.h: the arg of vg_kill_nvml_lists(), one per stop (the
 * plan's targets share it). hung: set once the driver did not answer within timeout_ms; every
 * later ask then answers "cannot tell" at once, so a driver that hangs costs a stop one
 * timeout, not one per target (issue 27: 16 targets were 16 timeouts). */
struct vg_kill_nvml {
    const char *path;    /* NULL: $VRAMGUARD_NVML or libnvidia-ml.so.1 */
    unsigned timeout_ms; /* 0: VG_SNAP_NVML_TIMEOUT_MS */
    bool hung;
};

/* A vg_kill_nvml_fn: a fresh process list from the driver (arg: struct vg_kill_nvml). Lists
 * pid: 1; lists every GPU's processes and not pid: 0; a GPU's list unknown (hung, refused) and
 * pid in no list read, or no answer: -1. */
int vg_kill_nvml_lists(void *arg, pid_t pid);

/* The re-check, pure: is `now` (just read) still the planned process, allowed by the policy,
 * and still holding the GPU (one of the planned minors open, or, when the driver listed it,
 * nvml_lists > 0; nvml_lists < 0 means unknown and counts as still holding)? */
enum vg_kill_refusal vg_kill_verify(const struct vg_kill_identity *id, const struct vg_proc *now,
                                    int nvml_lists, const struct vg_kill_ctx *ctx);

enum vg_kill_outcome {
    VG_KILL_PENDING,    /* SIGTERM sent, not yet seen to exit */
    VG_KILL_TERMINATED, /* exited after SIGTERM */
    VG_KILL_KILLED,     /* exited after SIGKILL */
    VG_KILL_GONE,       /* had exited before anything was sent */
    VG_KILL_REFUSED,    /* the re-check refused it; refusal says why */
    VG_KILL_FAILED,     /* could not signal it, or it outlived SIGKILL; error says why */
};

/* "pending", "terminated", "killed", "gone", "refused", "failed" */
const char *vg_kill_outcome_id(enum vg_kill_outcome o);

struct vg_kill {
    const struct vg_kill_identity *id; /* borrowed */
    struct vg_stop stop;               /* the sequence (act/stop.h): pidfd, what was sent, when */
    enum vg_kill_outcome outcome;
    enum vg_kill_refusal refusal; /* VG_KILL_REFUSED */
    int error;                    /* VG_KILL_FAILED: negative errno; -ETIMEDOUT when it
                                   * outlived SIGKILL */
    uint64_t now_start_ticks;     /* VG_KILL_CHANGED: what was found */
    uid_t now_uid;
};

void vg_kill_init(struct vg_kill *k, const struct vg_kill_identity *id);
void vg_kill_release(struct vg_kill *k);

/* Open a pidfd, re-read the process from the procfs at proc_root_fd (which must number PIDs as
 * this process does), verify it (nvml may be NULL: then only device fds count, unless they
 * cannot be read), and send SIGTERM. Sets k->outcome to PENDING, GONE, REFUSED or FAILED.
 * Returns 0, or -ENOMEM (err set): everything else is an outcome, not an error. */
int vg_kill_start(struct vg_kill *k, int proc_root_fd, const char *dev_dir,
                  const struct vg_kill_ctx *ctx, vg_kill_nvml_fn nvml, void *nvml_arg,
                  struct vg_err *err);

/* Wait for every PENDING one to exit, up to grace_ms after its SIGTERM; SIGKILL those still
 * there and wait up to kill_wait_ms more. PENDING becomes TERMINATED, KILLED or FAILED. */
void vg_kill_finish(struct vg_kill *ks, size_t n, unsigned grace_ms, unsigned kill_wait_ms);

#endif
