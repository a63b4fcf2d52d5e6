/*
 * The one way vramguard stops a process: SIGTERM, a grace period, SIGKILL, and a bounded wait
 * for the kernel to finish it, all through a pidfd (proc/signal.h), so that a signal reaches
 * the process the pidfd was opened on or nobody, whatever reuses its number. `clean` (after
 * act/kill.h's identity re-check), `run`'s clean-up of a job's leftovers and `demo`'s keeper
 * stop processes through it.
 *
 * Several processes are stopped together: each gets its SIGTERM when the caller decides
 * (vg_stop_term()), then vg_stop_finish() waits for all of them at once, so n targets take one
 * grace period, not n.
 *
 * Without pidfds (a kernel before 5.3, or valgrind, which does not know the calls) the same
 * sequence stops our own children (vg_stop_init_child()): by number, which is safe while a
 * child is unreaped (a zombie keeps its number), watched with waitid(WNOWAIT) so that reaping
 * stays the caller's.
 *
 * Ownership: struct vg_stop owns its pidfd from vg_stop_init() on; vg_stop_release() closes it
 * (and is called by the sequence itself as soon as a target's outcome is known). Nothing here
 * prints.
 */
#ifndef VG_ACT_STOP_H
#define VG_ACT_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum vg_stop_outcome {
    VG_STOP_IDLE,       /* nothing sent yet */
    VG_STOP_PENDING,    /* SIGTERM sent, not yet seen to exit */
    VG_STOP_TERMINATED, /* exited after SIGTERM */
    VG_STOP_KILLED,     /* exited after SIGKILL */
    VG_STOP_GONE,       /* had exited before anything was sent */
    VG_STOP_FAILED,     /* could not signal it, or it outlived SIGKILL; error says why */
};

struct vg_stop {
    int pidfd;   /* -1 when closed */
    pid_t child; /* vg_stop_init_child(): our unreaped child, signalled by number; else 0 */
    enum vg_stop_outcome outcome;
    int error; /* VG_STOP_FAILED: negative errno; -ETIMEDOUT when it outlived SIGKILL */
    bool sent_term, sent_kill;
    unsigned long long term_at_ms; /* CLOCK_MONOTONIC when SIGTERM went */
    unsigned long long exit_ms;    /* from SIGTERM to exit (TERMINATED, KILLED) */
};

/* Take pidfd (-1: none yet) into s, outcome IDLE. */
void vg_stop_init(struct vg_stop *s, int pidfd);
/* For a process with no pidfd that is our own child, not yet reaped (and not reaped by the
 * caller until the sequence is done): outcome IDLE. */
void vg_stop_init_child(struct vg_stop *s, pid_t child);
void vg_stop_release(struct vg_stop *s);

/* Send SIGTERM now: PENDING, or GONE (it had exited) or FAILED, with the pidfd closed. */
void vg_stop_term(struct vg_stop *s);

/* Wait for every PENDING one to exit, up to grace_ms after the last SIGTERM; SIGKILL those
 * still there and wait up to kill_wait_ms more. PENDING becomes TERMINATED, KILLED or FAILED.
 * The records may sit inside larger ones: the i-th is at (char *)first + i * stride. */
void vg_stop_finish(struct vg_stop *first, size_t n, size_t stride, unsigned grace_ms,
                    unsigned kill_wait_ms);

/* Send sig to pid only while same(ctx) says the process behind the number is still the one
 * meant: through a pidfd opened before the check, so that the check and the signal cannot
 * straddle the number being reused; on a kernel without pidfds (before 5.3), checked and sent
 * by number. 0, -ESRCH when it is gone or another process, or another negative errno. */
int vg_stop_signal_if(pid_t pid, int sig, bool (*same)(void *ctx), void *ctx);

/* The sequence for the process group of our own child, one step at a time, for a caller that
 * runs it from its event loop (a process group has no pidfd; the child's pid stays ours while
 * it is unreaped, so its group cannot be another's): SIGTERM to the group once now reaches
 * term_at (and *termed is set), SIGKILL at every step from term_at + grace_ms on. */
void vg_stop_group_step(pid_t pgid, uint64_t term_at, unsigned grace_ms, bool *termed,
                        uint64_t now);
/* When the next step is due. */
uint64_t vg_stop_group_due(uint64_t term_at, unsigned grace_ms, bool termed);

#endif
