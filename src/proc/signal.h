/*
 * Signalling a process so that a reused PID can never be hit: through a pidfd (Linux 5.3+),
 * which pins the process it was opened on. A signal sent through it reaches that process or
 * fails with -ESRCH once it has exited, whatever now carries the same number. Policy (whom to
 * signal, and after which checks) lives above, in act/kill.h; these are the primitives.
 *
 * Ownership: a pidfd returned by vg_proc_pidfd_open() belongs to the caller (close() it).
 * vg_proc_ancestors() returns a malloc'd array the caller frees.
 */
#ifndef VG_PROC_SIGNAL_H
#define VG_PROC_SIGNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

/* Open a pidfd (O_CLOEXEC by the kernel) on pid. 0 with *fd set, or -ESRCH (no such process),
 * -ENOSYS (kernel older than 5.3), or another negative errno. */
int vg_proc_pidfd_open(pid_t pid, int *fd);

/* Send sig through the pidfd: 0, -ESRCH when the process has exited, -EPERM when not allowed,
 * -ENOSYS when the kernel cannot. */
int vg_proc_pidfd_signal(int fd, int sig);

/* Whether the process has exited (or become a zombie: for a process that is not our child that
 * is the same thing), waiting up to timeout_ms (0: just look). 1 exited, 0 still running, or a
 * negative errno. Interrupted waits are resumed against the same deadline. */
int vg_proc_pidfd_exited(int fd, unsigned timeout_ms);

/* The chain of parents of pid (parent first, up to and including PID 1 when visible) read from
 * the procfs at proc_root_fd. A parent that cannot be read ends the chain. */
int vg_proc_ancestors(int proc_root_fd, pid_t pid, pid_t **out, size_t *n, struct vg_err *err);

/* Our own PID as the procfs at proc_root_fd numbers it (its "self" link), or -ENOENT when this
 * process is not visible there (another PID namespace's procfs). */
int vg_proc_self_pid(int proc_root_fd, pid_t *pid);

#endif
