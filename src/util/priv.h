/*
 * Privilege boundaries: whether this process runs with rights its caller does not have (a
 * setuid or setgid copy, or one with file capabilities), and whether a path names a file that
 * nobody but root (or one given owner) can change, so that a file vramguard loads, runs or
 * trusts cannot be swapped by someone else (docs/reliability.md, "Trust boundaries").
 *
 * Nothing here allocates; a canonical path is written into a caller buffer.
 */
#ifndef VG_UTIL_PRIV_H
#define VG_UTIL_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

/* True when the kernel marked this exec secure (getauxval(AT_SECURE): setuid, setgid, file
 * capabilities) or the real and effective user or group ids differ: every file the caller
 * names is then suspect, since vramguard would open it with rights the caller lacks. */
bool vg_priv_elevated(void);

/*
 * Whether path can be changed by nobody but root or owner (pass 0 for "root only"), the way
 * sshd's StrictModes judges a file: path is resolved (symlinks, "..") into canon (n bytes;
 * open canon afterwards, never path, which a symlink in a writable place could re-point), and
 * the file and every directory above it must be owned by root or owner and writable by
 * neither group nor others. A directory writable by others is accepted only with the sticky
 * bit and owned by root (/tmp): there only an entry's owner may replace it, and that owner is
 * checked at the next step. 0, or a negative errno with a message naming the part that fails
 * ("'/tmp/x' is writable by others").
 */
int vg_priv_path_trusted(const char *path, uid_t owner, char *canon, size_t n, struct vg_err *err);

/* Become the real user and group for good (saved ids too), as a child does before running a
 * command the caller chose: a setuid copy's job must not run as its owner. Nothing to do (0)
 * when the ids are equal already; a file-capability copy's capabilities are dropped by the
 * kernel at exec. 0 or a negative errno. Async-signal-safe (for a child after fork). */
int vg_priv_drop(void);

/*
 * The per-user runtime directory of uid, into out (n bytes): xdg (normally $XDG_RUNTIME_DIR)
 * when it is an absolute path to a directory, not a symlink, owned by uid with mode 0700 (what
 * the XDG spec promises), else /run/user/UID when it is a directory owned by uid that nobody
 * else may write, else, for root, /run. *why gets "XDG_RUNTIME_DIR", "/run/user" or "/run".
 * 1 when found, 0 when none is (the caller falls back to /tmp/vramguard-UID, which anyone can
 * create first: it must check that the directory is its own), -ENAMETOOLONG.
 */
int vg_priv_user_rundir(const char *xdg, uid_t uid, char *out, size_t n, const char **why);

/* Whether the real user and group (not the effective ones, nor file capabilities) may read
 * path: access(2) semantics, for deciding what a message may quote from a file. */
bool vg_priv_caller_can_read(const char *path);

#endif
