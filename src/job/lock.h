/*
 * GPU reservation locks: one file per GPU (named by its UUID) in a runtime directory, held with
 * flock(LOCK_EX) for as long as `vramguard run` lives. The kernel drops a flock when the last
 * descriptor of its open file goes away, so a `kill -9` of run frees the GPU at once; every
 * descriptor is O_CLOEXEC so the job itself never inherits (and so never prolongs) a lock.
 *
 * The directory, first match wins:
 *   $VRAMGUARD_RUNTIME_DIR (absolute);
 *   /run/vramguard when root (created 0755), or when it exists and we may create files in it
 *     (an admin made it shared, e.g. tmpfiles.d "d /run/vramguard 1777 root root -");
 *   $XDG_RUNTIME_DIR/vramguard (created 0700);
 *   /tmp/vramguard-UID (created 0700; must be ours: someone else's is refused).
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
 * close (closing releases the lock).
 */
#ifndef VG_JOB_LOCK_H
#define VG_JOB_LOCK_H

#include <stdbool.h>
#include <sys/types.h>

#include "util/err.h"

#define VG_LOCK_SHARED_DIR "/run/vramguard"

/* What the choice depends on, gathered by vg_lock_env_get() (or by hand in tests). */
struct vg_lock_env {
    const char *override; /* $VRAMGUARD_RUNTIME_DIR, NULL or "" when unset */
    const char *xdg;      /* $XDG_RUNTIME_DIR, NULL or "" when unset */
    uid_t uid;            /* effective uid */
    bool shared_usable;   /* VG_LOCK_SHARED_DIR exists and we may create files in it */
};

struct vg_lock_dir {
    char *path;
    mode_t mode;      /* mode when it has to be created */
    bool private_dir; /* must be owned by us (not merely by root) */
    const char *why;  /* "VRAMGUARD_RUNTIME_DIR", "root", "shared", "XDG_RUNTIME_DIR",
                       * "fallback": for --verbose */
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

/* Try to take the lock on name without waiting: 0 with *fd set (O_CLOEXEC), -EBUSY when
 * another process holds it, or another negative errno with a message. */
int vg_lock_acquire(const struct vg_lock_dir *d, const char *name, int *fd, struct vg_err *err);

/* Look without taking: 1 when someone holds the lock on name (*holder its pid from /proc/locks
 * when known, else 0), 0 when free or never created, negative on error. Reads /proc/locks so
 * that looking never makes a concurrent vg_lock_acquire() fail. */
int vg_lock_probe(const struct vg_lock_dir *d, const char *name, pid_t *holder, struct vg_err *err);

/* The /proc/locks parser, for tests: the pid holding a FLOCK write lock on (major, minor,
 * inode) in text, 0 when some holder matches only by inode (a filesystem whose st_dev differs
 * from the one /proc/locks shows), -1 when none. */
pid_t vg_lock_parse_proc_locks(const char *text, unsigned major, unsigned minor,
                               unsigned long long ino);

#endif
