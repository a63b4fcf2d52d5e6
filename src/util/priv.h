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

/* Whether the real user and group (not the effective ones, nor file capabilities) may read
 * path: access(2) semantics, for deciding what a message may quote from a file. */
bool vg_priv_caller_can_read(const char *path);

#endif
