/*
 * Privilege boundaries (see priv.h): AT_SECURE and differing ids, and an sshd-StrictModes-like
 * check of a path from the file up to "/".
 */
#include "util/priv.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

bool vg_priv_elevated(void)
{
    return getauxval(AT_SECURE) != 0 || getuid() != geteuid() || getgid() != getegid();
}

/* One part of the path (the file, or a directory above it): its owner and its write bits. */
static int vg_priv_part_ok(const char *part, const struct stat *st, bool dir, uid_t owner,
                           struct vg_err *err)
{
    if (st->st_uid != 0 && st->st_uid != owner) {
        if (owner == 0)
            return vg_err_set(err, -EPERM, "'%s' belongs to uid %u, not to root", part,
                              (unsigned)st->st_uid);
        return vg_err_set(err, -EPERM, "'%s' belongs to uid %u, neither root nor uid %u", part,
                          (unsigned)st->st_uid, (unsigned)owner);
    }
    if (dir && (st->st_mode & S_ISVTX) && st->st_uid == 0)
        return 0; /* sticky and root's (/tmp): the entry below is checked in its turn */
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return vg_err_set(err, -EPERM, "'%s' is writable by %s", part,
                          (st->st_mode & S_IWOTH) ? "others" : "its group");
    return 0;
}

int vg_priv_path_trusted(const char *path, uid_t owner, char *canon, size_t n, struct vg_err *err)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return vg_err_set(err, -errno, "cannot resolve '%s': %s", path, strerror(errno));
    size_t len = strlen(real);
    if (len >= n)
        return vg_err_set(err, -ENAMETOOLONG, "'%s' is too long a path", path);
    memcpy(canon, real, len + 1);
    struct stat st;
    if (stat(real, &st) != 0)
        return vg_err_set(err, -errno, "cannot stat '%s': %s", real, strerror(errno));
    int rc = vg_priv_part_ok(real, &st, S_ISDIR(st.st_mode), owner, err);
    /* Up from the file: cut the last component each time; "/" is the last one checked. */
    while (rc == 0 && len > 1) {
        char *slash = strrchr(real, '/');
        if (!slash)
            break;
        if (slash == real)
            slash[1] = '\0';
        else
            *slash = '\0';
        len = strlen(real);
        if (stat(real, &st) != 0)
            return vg_err_set(err, -errno, "cannot stat '%s': %s", real, strerror(errno));
        rc = vg_priv_part_ok(real, &st, true, owner, err);
    }
    return rc;
}

int vg_priv_drop(void)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (gid != getegid() && setresgid(gid, gid, gid) != 0)
        return -errno;
    if (uid != geteuid() && setresuid(uid, uid, uid) != 0)
        return -errno;
    return 0;
}

/* A directory (not a symlink) owned by uid that nobody else may write; exactly 0700 if strict. */
static bool vg_priv_own_dir(const char *path, uid_t uid, bool strict)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid)
        return false;
    return strict ? (st.st_mode & 07777) == 0700 : !(st.st_mode & (S_IWGRP | S_IWOTH));
}

int vg_priv_user_rundir(const char *xdg, uid_t uid, char *out, size_t n, const char **why)
{
    char run_user[64];
    snprintf(run_user, sizeof(run_user), "/run/user/%u", (unsigned)uid);
    const char *dir = NULL;
    if (xdg && xdg[0] == '/' && vg_priv_own_dir(xdg, uid, true)) {
        dir = xdg;
        *why = "XDG_RUNTIME_DIR";
    } else if (vg_priv_own_dir(run_user, uid, false)) {
        dir = run_user;
        *why = "/run/user";
    } else if (uid == 0 && vg_priv_own_dir("/run", 0, false)) {
        dir = "/run";
        *why = "/run";
    }
    if (!dir)
        return 0;
    if (snprintf(out, n, "%s", dir) >= (int)n)
        return -ENAMETOOLONG;
    return 1;
}

bool vg_priv_caller_can_read(const char *path)
{
    return access(path, R_OK) == 0;
}
