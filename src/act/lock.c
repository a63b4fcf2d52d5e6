/*
 * GPU reservation locks (see lock.h): where the lock directory is, opening it without being
 * fooled by symlinks or someone else's directory, taking a lock without waiting, and looking at
 * a lock through /proc/locks without taking it.
 */
#include "act/lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "act/job.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"
#include "util/priv.h"

void vg_lock_env_get(struct vg_lock_env *env)
{
    env->override = secure_getenv("VRAMGUARD_RUNTIME_DIR");
    env->uid = geteuid();
    env->xdg = NULL;
    env->xdg_why = NULL;
    if (vg_priv_user_rundir(secure_getenv("XDG_RUNTIME_DIR"), env->uid, env->rundir,
                            sizeof(env->rundir), &env->xdg_why) == 1)
        env->xdg = env->rundir;
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
        why = env->xdg_why ? env->xdg_why : "XDG_RUNTIME_DIR";
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

/* Open an existing or new lock file read-only: the descriptor that carries the lock is handed
 * to the job (see lock.h), which has no business writing into the lock directory. flock works on
 * any descriptor, and a file another user created in a shared directory opens read-only too
 * (creating is then refused by protected_regular, or by the file's mode: retried without). */
static int vg_lock_open(const struct vg_lock_dir *d, const char *name, bool create,
                        struct vg_err *err)
{
    if (!vg_lock_name_ok(name))
        return vg_err_set(err, -EINVAL, "'%s' is not a usable lock name", name);
    const int base = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    int fd = openat(d->fd, name, base | (create ? O_CREAT : 0), 0644);
    if (fd < 0 && create && (errno == EACCES || errno == EPERM || errno == EROFS))
        fd = openat(d->fd, name, base);
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

/* Leave our pid in the lock file, through a second descriptor that nobody inherits. Only a
 * courtesy for people reading the file (the lock is what counts), so failures are ignored. */
static void vg_lock_note_pid(const struct vg_lock_dir *d, const char *name, int lfd)
{
    int w = openat(d->fd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (w < 0)
        return;
    struct stat a, b;
    char line[32];
    int n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
    if (fstat(w, &a) == 0 && fstat(lfd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
        n > 0 && (size_t)n < sizeof(line) && ftruncate(w, 0) == 0 &&
        pwrite(w, line, (size_t)n, 0) < 0) {
        /* ignored: see above */
    }
    close(w);
}

int vg_lock_acquire(const struct vg_lock_dir *d, const char *name, int *fd, struct vg_err *err)
{
    int lfd = vg_lock_open(d, name, true, err);
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
    vg_lock_note_pid(d, name, lfd);
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
    int fd = vg_lock_open(d, name, false, err);
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

/* 1 when some descriptor of process pid refers to the lock file, 0 when none does, or a negative
 * errno when its descriptors cannot be read (-ENOENT: no such process). */
static int vg_lock_pid_holds(int proc_fd, pid_t pid, const struct statx *lock)
{
    char path[32];
    snprintf(path, sizeof(path), "%ld/fd", (long)pid);
    int fdd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdd < 0)
        return -errno;
    DIR *dir = fdopendir(fdd);
    if (!dir) {
        int e = errno;
        close(fdd);
        return -e;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(dir)) != NULL) {
        struct statx st;
        if (de->d_name[0] != '.' &&
            statx(fdd, de->d_name, AT_STATX_DONT_SYNC, STATX_INO, &st) == 0 &&
            st.stx_ino == lock->stx_ino && st.stx_dev_major == lock->stx_dev_major &&
            st.stx_dev_minor == lock->stx_dev_minor)
            rc = 1;
    }
    closedir(dir);
    return rc;
}

int vg_lock_who(const struct vg_lock_dir *d, const char *name, pid_t run, struct vg_lock_who *who,
                struct vg_err *err)
{
    memset(who, 0, sizeof(*who));
    who->run_alive = -1;
    if (!vg_lock_name_ok(name))
        return vg_err_set(err, -EINVAL, "'%s' is not a usable lock name", name);
    struct statx lk;
    if (statx(d->fd, name, AT_SYMLINK_NOFOLLOW, STATX_INO, &lk) != 0)
        return vg_err_set(err, -errno, "cannot stat '%s/%s': %s", d->path, name, strerror(errno));
    /* Our own /proc, never --proc: locks are this host's. */
    int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc_fd < 0)
        return vg_err_set(err, -errno, "cannot open /proc: %s", strerror(errno));
    if (run > 0) {
        int h = vg_lock_pid_holds(proc_fd, run, &lk);
        who->run_alive = h == 1 ? 1 : h == 0 || h == -ENOENT ? 0 : -1;
    }
    if (who->run_alive != 0) {
        close(proc_fd);
        return 0;
    }
    /* The run is gone and the lock is still held: by what inherited its descriptor. */
    int dfd = openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *pd = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!pd) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        close(proc_fd);
        return vg_err_set(err, -e, "cannot read /proc: %s", strerror(e));
    }
    pid_t self = getpid();
    struct dirent *de;
    while ((de = readdir(pd)) != NULL) {
        uint64_t v;
        if (vg_parse_u64(de->d_name, &v) || v == 0 || v > INT32_MAX || (pid_t)v == self)
            continue;
        int h = vg_lock_pid_holds(proc_fd, (pid_t)v, &lk);
        if (h == -EACCES || h == -EPERM)
            who->unreadable++;
        if (h != 1)
            continue; /* not a holder, gone meanwhile, or unreadable (counted) */
        if (who->nholders == VG_LOCK_WHO_MAX) {
            who->more++;
            continue;
        }
        struct vg_job_proc p;
        size_t k = who->nholders++;
        who->holders[k].pid = (pid_t)v;
        if (vg_job_proc_read(proc_fd, (pid_t)v, &p, NULL) == 0)
            memcpy(who->holders[k].comm, p.comm, sizeof(who->holders[k].comm));
    }
    closedir(pd);
    close(proc_fd);
    return 0;
}
