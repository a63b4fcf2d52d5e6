/*
 * GPU reservation locks: one file per GPU (named by its UUID) in a runtime directory, held with
 * flock(LOCK_EX). A flock belongs to an open file description and lasts until the last
 * descriptor of it is closed, in whatever process: `vramguard run` takes the lock and hands the
 * descriptor to the job (read-only; see job.h), so the reservation lasts as long as run or any
 * process of the job that kept the descriptor lives, a `kill -9` of run included. Descriptors
 * are opened O_CLOEXEC; only the job's first process gets them across exec, on purpose.
 *
 * The directory, first match wins:
 *   $VRAMGUARD_RUNTIME_DIR (absolute);
 *   /run/vramguard when root (created 0755), or when it exists and we may create files in it
 *     (an admin made it shared, e.g. tmpfiles.d "d /run/vramguard 1777 root root -");
 *   the per-user runtime directory's vramguard/ (created 0700): $XDG_RUNTIME_DIR when it is
 *     ours and 0700, else /run/user/UID when it is ours (util/priv.h, vg_priv_user_rundir);
 *   /tmp/vramguard-UID (created 0700; must be ours: someone else's is refused), only when the
 *     user has no runtime directory, since anyone may create that name first.
 * Runs only see each other's reservations when they use the same directory.
 *
 * Nothing follows symlinks: the directory is opened O_DIRECTORY|O_NOFOLLOW and then checked
 * (owner us or root; writable by others only with the sticky bit), lock files are opened
 * O_NOFOLLOW|O_NONBLOCK relative to it and must be regular files. Lock names must look like
 * UUIDs ("GPU-..."/"MIG-...", letters, digits and '-'), so a driver's answer never becomes a
 * path.
 *
 * Ownership: vg_lock_dir_choose() gives a heap path in struct vg_lock_dir (vg_lock_dir_release()
 * frees it and closes fd). Lock descriptors returned by vg_lock_acquire() are the caller's to
 * close (closing the last descriptor of the file description, wherever it is, releases the
 * lock). struct vg_lock_who holds no pointers.
 */
#ifndef VG_ACT_LOCK_H
#define VG_ACT_LOCK_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "util/err.h"

#define VG_LOCK_SHARED_DIR "/run/vramguard"

/* What the choice depends on, gathered by vg_lock_env_get() (or by hand in tests). */
struct vg_lock_env {
    const char *override; /* $VRAMGUARD_RUNTIME_DIR, NULL or "" when unset */
    const char *xdg;      /* the per-user runtime directory, checked (vg_priv_user_rundir;
                           * points into rundir); NULL or "" when there is none */
    const char *xdg_why;  /* which one it is, for --verbose; NULL: "XDG_RUNTIME_DIR" */
    char rundir[PATH_MAX];
    uid_t uid;          /* effective uid */
    bool shared_usable; /* VG_LOCK_SHARED_DIR exists and we may create files in it */
};

struct vg_lock_dir {
    char *path;
    mode_t mode;      /* mode when it has to be created */
    bool private_dir; /* must be owned by us (not merely by root) */
    const char *why;  /* "VRAMGUARD_RUNTIME_DIR", "root", "shared", "XDG_RUNTIME_DIR",
                       * "/run/user", "fallback": for --verbose */
    int fd;           /* after vg_lock_dir_open(); -1 before */
};

void vg_lock_env_get(struct vg_lock_env *env);
/* Pure: the directory for env, per the rules above. Errors: a relative override. */
int vg_lock_dir_choose(const struct vg_lock_env *env, struct vg_lock_dir *out, struct vg_err *err);
/* Open and check the directory, creating it when missing if create is true (its parent must
 * exist); without create a missing directory is -ENOENT (no message): nothing is reserved. */
int vg_lock_dir_open(struct vg_lock_dir *d, bool create, struct vg_err *err);
void vg_lock_dir_release(struct vg_lock_dir *d);

/* A lock file name: "GPU-"/"MIG-" then 1..120 letters, digits or '-'. */
bool vg_lock_name_ok(const char *name);

/* Try to take the lock on name without waiting: 0 with *fd set (read-only, O_CLOEXEC), -EBUSY
 * when another process holds it, or another negative errno with a message. */
int vg_lock_acquire(const struct vg_lock_dir *d, const char *name, int *fd, struct vg_err *err);

/* Look without taking: 1 when someone holds the lock on name (*holder its pid from /proc/locks
 * when known, else 0), 0 when free or never created, negative on error. Reads /proc/locks so
 * that looking never makes a concurrent vg_lock_acquire() fail. */
int vg_lock_probe(const struct vg_lock_dir *d, const char *name, pid_t *holder, struct vg_err *err);

/* Who keeps a held lock: the run that took it, or, once that run is gone, the processes that
 * inherited its descriptor (the job it started, and that job's guard). */
#define VG_LOCK_WHO_MAX 8 /* holders named; the rest are counted */

struct vg_lock_who {
    int run_alive; /* 1: the locking run still holds the file; 0: it is gone, or its pid now
                    * names a process that does not hold it; -1: cannot tell */
    struct {
        pid_t pid;
        char comm[24];
    } holders[VG_LOCK_WHO_MAX]; /* with run_alive 0: processes holding the file, pid order */
    size_t nholders;
    size_t more;       /* holders beyond those named */
    size_t unreadable; /* processes whose descriptors could not be read (not root) */
};

/* Fill who for the lock on name, which /proc/locks says run took (run > 0). Looks through
 * /proc/RUN/fd, and, when run is gone, through every /proc/PID/fd (statx, AT_STATX_DONT_SYNC:
 * a descriptor on a hung network file answers from the cache). Negative errno on an error
 * (the lock file vanished: -ENOENT). */
int vg_lock_who(const struct vg_lock_dir *d, const char *name, pid_t run, struct vg_lock_who *who,
                struct vg_err *err);

/* The /proc/locks parser, for tests: the pid holding a FLOCK write lock on (major, minor,
 * inode) in text, 0 when some holder matches only by inode (a filesystem whose st_dev differs
 * from the one /proc/locks shows), -1 when none. */
pid_t vg_lock_parse_proc_locks(const char *text, unsigned major, unsigned minor,
                               unsigned long long ino);

#endif
