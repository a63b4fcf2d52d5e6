/*
 * The per-scan context and the small plumbing every reader in src/proc/ shares: a getdents64
 * directory iterator over a caller buffer (opendir/readdir would allocate a DIR per process,
 * and phase one must not allocate for the thousands of processes that hold no GPU), pid names,
 * and bounded whole-file reads into the context's reusable buffer.
 */
#include "proc/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "proc/signal.h"
#include "util/file.h"

#define VG_PROC_DENTS_CAP ((size_t)32 << 10)
#define VG_PROC_SUPER_MAGIC 0x9fa0 /* PROC_SUPER_MAGIC, <linux/magic.h> */

int vg_proc_ctx_init(struct vg_proc_ctx *c, int root_fd, const char *dev_dir)
{
    memset(c, 0, sizeof(*c));
    c->root_fd = root_fd;
    c->dev_dir = dev_dir && *dev_dir ? dev_dir : "/dev";
    /* Only a real procfs gives fd/ a size that is a count; a test tree or a copy does not. */
    struct statfs sfs;
    c->procfs = root_fd >= 0 && fstatfs(root_fd, &sfs) == 0 && sfs.f_type == VG_PROC_SUPER_MAGIC;
    c->fd_count_ok = c->procfs;
    pid_t self;
    c->kcmp_ok = c->procfs && vg_proc_self_pid(root_fd, &self) == 0 && self == getpid();
    vg_buf_init(&c->file, VG_PROC_STATUS_MAX);
    c->dents = malloc(VG_PROC_DENTS_CAP);
    if (!c->dents)
        return -ENOMEM;
    c->dents_cap = VG_PROC_DENTS_CAP;
    return vg_proc_devset_new(root_fd, dev_dir, &c->devset);
}

void vg_proc_ctx_release(struct vg_proc_ctx *c)
{
    free(c->dents);
    vg_buf_release(&c->file);
    vg_proc_fds_reset(c);
    free(c->slots);
    vg_proc_devset_free(c->devset);
    for (size_t i = 0; i < c->nunames; i++)
        free(c->unames[i].name);
    free(c->unames);
    memset(c, 0, sizeof(*c));
    c->root_fd = -1;
}

void vg_proc_dirit_init(struct vg_proc_dirit *it, int fd, char *buf, size_t cap)
{
    it->fd = fd;
    it->buf = buf;
    it->cap = cap;
    it->pos = it->end = 0;
}

int vg_proc_dirit_next(struct vg_proc_dirit *it, const char **name)
{
    for (;;) {
        if (it->pos >= it->end) {
            ssize_t n = getdents64(it->fd, it->buf, it->cap);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return -errno;
            }
            if (n == 0)
                return 0;
            it->pos = 0;
            it->end = (size_t)n;
        }
        struct dirent64 *d = (struct dirent64 *)(void *)(it->buf + it->pos);
        it->pos += d->d_reclen;
        const char *s = d->d_name;
        if (s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0')))
            continue;
        *name = s;
        it->ino = d->d_ino;
        return 1;
    }
}

bool vg_proc_name_pid(const char *name, pid_t *pid)
{
    if (name[0] < '1' || name[0] > '9')
        return false;
    long long v = 0;
    for (const char *s = name; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (*s - '0');
        if (v > INT_MAX)
            return false;
    }
    *pid = (pid_t)v;
    return true;
}

void vg_proc_pid_str(pid_t pid, char out[16])
{
    char tmp[16];
    size_t n = 0;
    unsigned long v = pid < 0 ? 0 : (unsigned long)pid;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < sizeof(tmp));
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
}

bool vg_proc_gone(int pid_fd)
{
    return faccessat(pid_fd, "stat", F_OK, 0) < 0 && (errno == ENOENT || errno == ESRCH);
}

int vg_proc_ctx_read(struct vg_proc_ctx *c, int dirfd, const char *name, size_t max)
{
    c->file.max = max;
    return vg_file_read_at(dirfd, name, &c->file);
}

char *vg_proc_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    if (n)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
