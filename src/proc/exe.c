/*
 * What a process runs (proc.h, the exe fields): the facts act/infra.h judges infrastructure
 * by, since a process chooses its name (prctl PR_SET_NAME), its argv and its environment, but
 * not the file it was exec'ed from, nor who owns that file and the directories it sits in.
 *
 * Three reads, each with its known bit, so a fact that could not be read stays unknown:
 *   - the exe link's target (readlinkat on the pid directory): the path, as the process's own
 *     root names it; the kernel appends " (deleted)" when the file was removed or replaced
 *     since exec (a package upgrade does that too);
 *   - the file itself, stat'ed through the link (the kernel follows it to the very inode the
 *     process runs, whatever happened to the path): owner and mode;
 *   - the path walked from the process's root (the pid directory's root link, so a container's
 *     /usr/bin is its own), one component at a time with O_NOFOLLOW: every directory must be
 *     owned by root and writable by neither group nor others, and the last component must be
 *     the same file the link names (same device and inode), else the path was replaced.
 * A --proc tree of plain files (tests) has no exe link: all of it unknown.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VG_EXE_DELETED " (deleted)"

/* A directory nobody but root can change: owned by root, no write bit for group or others. */
static bool vg_exe_dir_trusted(const struct stat *st)
{
    return S_ISDIR(st->st_mode) && st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Walk path (absolute, as the process's root names it) from pid_fd's root link. 0 with
 * *same and *trusted decided, or a negative errno (the walk could not be made: unknown). */
static int vg_exe_walk(int pid_fd, const char *path, const struct stat *file, bool *same,
                       bool *trusted)
{
    *same = false;
    *trusted = true;
    if (path[0] != '/')
        return -EINVAL; /* not a path from a root (a file outside the process's root) */
    int dir = openat(pid_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -errno;
    int rc = 0;
    struct stat st;
    char comp[NAME_MAX + 1];
    for (const char *s = path + 1;;) {
        if (fstat(dir, &st) < 0) {
            rc = -errno;
            break;
        }
        *trusted = *trusted && vg_exe_dir_trusted(&st);
        size_t n = strcspn(s, "/");
        if (n == 0 || n > NAME_MAX) {
            rc = -EINVAL; /* "//" or a name no filesystem holds: not the kernel's path */
            break;
        }
        memcpy(comp, s, n);
        comp[n] = '\0';
        if (s[n] == '\0') {
            /* the last component: the file itself, not followed if it is a link */
            if (fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
                rc = errno == ENOENT ? 0 : -errno; /* gone from the path: not the same */
            else
                *same =
                    S_ISREG(st.st_mode) && st.st_dev == file->st_dev && st.st_ino == file->st_ino;
            break;
        }
        int next = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            /* a directory gone or replaced by a link: the path no longer leads to the file */
            rc = errno == ENOENT || errno == ELOOP || errno == ENOTDIR ? 0 : -errno;
            break;
        }
        close(dir);
        dir = next;
        s += n + 1;
    }
    close(dir);
    return rc;
}

int vg_proc_read_exe(int pid_fd, struct vg_proc *p, bool *denied)
{
    char buf[PATH_MAX + 1];
    ssize_t n = readlinkat(pid_fd, "exe", buf, sizeof(buf));
    if (n < 0) {
        /* a kernel thread, a zombie, a test tree: no link, nothing known */
        if (vg_proc_err_denied(-errno))
            *denied = true;
        return 0;
    }
    if ((size_t)n >= sizeof(buf))
        return 0; /* longer than any path: not the kernel's, unknown */
    buf[n] = '\0';
    size_t dl = strlen(VG_EXE_DELETED);
    bool deleted = (size_t)n > dl && strcmp(buf + n - dl, VG_EXE_DELETED) == 0;
    if (deleted)
        buf[n - dl] = '\0';
    free(p->exe);
    if (!(p->exe = strdup(buf)))
        return -ENOMEM;
    p->exe_deleted = deleted;
    p->known |= VG_PROC_K_EXE;

    struct stat file;
    if (fstatat(pid_fd, "exe", &file, 0) < 0) {
        if (vg_proc_err_denied(-errno))
            *denied = true;
        return 0;
    }
    p->exe_uid = file.st_uid;
    p->exe_mode = (unsigned)file.st_mode;
    p->known |= VG_PROC_K_EXE_STAT;

    bool same, trusted;
    int rc = vg_exe_walk(pid_fd, buf, &file, &same, &trusted);
    if (rc == 0) {
        p->exe_path_same = same && !deleted;
        p->exe_dirs_trusted = trusted;
        p->known |= VG_PROC_K_EXE_PATH;
    } else if (vg_proc_err_denied(rc)) {
        *denied = true;
    }
    return 0;
}
