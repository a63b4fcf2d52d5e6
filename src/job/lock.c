/*
 * GPU reservation locks (see lock.h): where the lock directory is, opening it without being
 * fooled by symlinks or someone else's directory, taking a lock without waiting, and looking at
 * a lock through /proc/locks without taking it.
 */
#include "job/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

void vg_lock_env_get(struct vg_lock_env *env)
{
    env->override = getenv("VRAMGUARD_RUNTIME_DIR");
    env->xdg = getenv("XDG_RUNTIME_DIR");
    env->uid = geteuid();
    struct stat st;
    env->shared_usable = stat(VG_LOCK_SHARED_DIR, &st) == 0 && S_ISDIR(st.st_mode) &&
                         access(VG_LOCK_SHARED_DIR, W_OK | X_OK) == 0;
}

static int vg_lock_dir_set(struct vg_lock_dir *out, char *path, mode_t mode, bool priv,
                           const char *why, struct vg_err *err)
{
    if (!path)
        return vg_err_set(err, -ENOMEM, "out of memory");
    out->path = path;
    out->mode = mode;
    out->private_dir = priv;
    out->why = why;
    out->fd = -1;
    return 0;
}

int vg_lock_dir_choose(const struct vg_lock_env *env, struct vg_lock_dir *out, struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    if (env->override && *env->override) {
        if (env->override[0] != '/')
            return vg_err_set(err, -EINVAL,
                              "VRAMGUARD_RUNTIME_DIR must be an absolute path, not '%s'",
                              env->override);
        return vg_lock_dir_set(out, strdup(env->override), 0700, false, "VRAMGUARD_RUNTIME_DIR",
                               err);
    }
    if (env->uid == 0)
        return vg_lock_dir_set(out, strdup(VG_LOCK_SHARED_DIR), 0755, false, "root", err);
    if (env->shared_usable)
        return vg_lock_dir_set(out, strdup(VG_LOCK_SHARED_DIR), 0755, false, "shared", err);
    struct vg_buf b;
    vg_buf_init(&b, 4096);
    const char *why;
    if (env->xdg && env->xdg[0] == '/') {
        vg_buf_printf(&b, "%s/vramguard", env->xdg);
        why = "XDG_RUNTIME_DIR";
    } else {
        vg_buf_printf(&b, "/tmp/vramguard-%u", (unsigned)env->uid);
        why = "fallback";
    }
    if (b.err) {
        int rc = b.err;
        vg_buf_release(&b);
        return vg_err_set(err, rc, "runtime directory path too long");
    }
    return vg_lock_dir_set(out, vg_buf_steal(&b), 0700, true, why, err);
}

int vg_lock_dir_open(struct vg_lock_dir *d, bool create, struct vg_err *err)
{
    if (create && mkdir(d->path, d->mode) != 0 && errno != EEXIST)
        return vg_err_set(err, -errno, "cannot create the lock directory '%s': %s", d->path,
                          strerror(errno));
    int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !create)
            return -ENOENT;
        if (e == ELOOP || e == ENOTDIR)
            return vg_err_set(err, -e,
                              "the lock directory '%s' is not a directory (a "
                              "symlink?); remove it",
                              d->path);
        return vg_err_set(err, -e, "cannot open the lock directory '%s': %s", d->path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return vg_err_set(err, -e, "cannot stat '%s': %s", d->path, strerror(e));
    }
    uid_t me = geteuid();
    if (st.st_uid != me && (d->private_dir || st.st_uid != 0)) {
        close(fd);
        return vg_err_set(err, -EPERM,
                          "the lock directory '%s' belongs to uid %u, not to "
                          "you: refusing to use it",
                          d->path, (unsigned)st.st_uid);
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        close(fd);
        return vg_err_set(err, -EPERM,
                          "the lock directory '%s' is writable by others "
                          "without the sticky bit: refusing to use it",
                          d->path);
    }
    d->fd = fd;
    return 0;
}

void vg_lock_dir_release(struct vg_lock_dir *d)
{
    if (d->fd >= 0)
        close(d->fd);
    free(d->path);
    memset(d, 0, sizeof(*d));
    d->fd = -1;
}

bool vg_lock_name_ok(const char *name)
{
    if (strncmp(name, "GPU-", 4) != 0 && strncmp(name, "MIG-", 4) != 0)
        return false;
    size_t n = strlen(name);
    if (n <= 4 || n > 124)
        return false;
    for (size_t i = 4; i < n; i++) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '-'))
            return false;
    }
    return true;
}

/* Open an existing or new lock file: read-write when we may (to leave our pid in it for
 * people), read-only otherwise (a shared directory holding another user's file: flock works
 * on any descriptor). */
static int vg_lock_open(const struct vg_lock_dir *d, const char *name, bool create, bool *writable,
                        struct vg_err *err)
{
    if (!vg_lock_name_ok(name))
        return vg_err_set(err, -EINVAL, "'%s' is not a usable lock name", name);
    const int base = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    int fd = openat(d->fd, name, base | O_RDWR | (create ? O_CREAT : 0), 0644);
    *writable = fd >= 0;
    if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS))
        fd = openat(d->fd, name, base | O_RDONLY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !create)
            return -ENOENT;
        return vg_err_set(err, -e, "cannot open the lock file '%s/%s': %s", d->path, name,
                          e == ELOOP ? "it is a symlink" : strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return vg_err_set(err, -EINVAL, "the lock file '%s/%s' is not a regular file", d->path,
                          name);
    }
    return fd;
}

int vg_lock_acquire(const struct vg_lock_dir *d, const char *name, int *fd, struct vg_err *err)
{
    bool writable;
    int lfd = vg_lock_open(d, name, true, &writable, err);
    if (lfd < 0)
        return lfd;
    while (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EINTR)
            continue;
        close(lfd);
        if (e == EWOULDBLOCK)
            return -EBUSY;
        return vg_err_set(err, -e, "cannot lock '%s/%s': %s", d->path, name, strerror(e));
    }
    if (writable) {
        /* Only a courtesy for people reading the file; the lock itself is what counts. */
        char line[32];
        int n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
        if (n > 0 && (size_t)n < sizeof(line) && ftruncate(lfd, 0) == 0 &&
            pwrite(lfd, line, (size_t)n, 0) < 0) {
            /* ignored: see above */
        }
    }
    *fd = lfd;
    return 0;
}

pid_t vg_lock_parse_proc_locks(const char *text, unsigned major, unsigned minor,
                               unsigned long long ino)
{
    pid_t found = -1;
    const char *line = text;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[256];
        if (len < sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            /* "1: FLOCK  ADVISORY  WRITE 1234 00:1d:5678 0 EOF"; waiters have "->". */
            char *save = NULL, *tok[8];
            int nt = 0;
            for (char *t = strtok_r(buf, " \t", &save); t && nt < 8;
                 t = strtok_r(NULL, " \t", &save))
                tok[nt++] = t;
            unsigned long long in;
            unsigned maj, mnr;
            int64_t pid;
            char tail;
            if (nt >= 6 && strcmp(tok[1], "FLOCK") == 0 && strcmp(tok[3], "WRITE") == 0 &&
                sscanf(tok[5], "%x:%x:%llu%c", &maj, &mnr, &in, &tail) == 3 && in == ino &&
                vg_parse_i64(tok[4], -1, INT32_MAX, &pid) == 0) {
                if (maj == major && mnr == minor)
                    return pid > 0 ? (pid_t)pid : 0;
                found = 0;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return found;
}

int vg_lock_probe(const struct vg_lock_dir *d, const char *name, pid_t *holder, struct vg_err *err)
{
    *holder = 0;
    bool writable;
    int fd = vg_lock_open(d, name, false, &writable, err);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = vg_err_set(err, -errno, "cannot stat '%s/%s': %s", d->path, name, strerror(errno));
        goto out;
    }
    struct vg_buf locks;
    vg_buf_init(&locks, 16 << 20);
    if (vg_file_read_at(AT_FDCWD, "/proc/locks", &locks) == 0) {
        pid_t p = vg_lock_parse_proc_locks(vg_buf_str(&locks), major(st.st_dev), minor(st.st_dev),
                                           (unsigned long long)st.st_ino);
        vg_buf_release(&locks);
        if (p >= 0) {
            *holder = p;
            rc = 1;
        }
        goto out;
    }
    vg_buf_release(&locks);
    /* No /proc/locks: a shared lock tells without excluding other lookers. */
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? 1
                                  : vg_err_set(err, -errno, "cannot look at '%s/%s': %s", d->path,
                                               name, strerror(errno));
    } else {
        flock(fd, LOCK_UN);
    }
out:
    close(fd);
    return rc;
}
