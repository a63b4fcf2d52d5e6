/*
 * The device-node watch (see proc.h): an inotify instance with IN_OPEN on every DIR/nvidia*
 * node and, for the nodes that are directories (nvidia-caps), on the files in them, plus a
 * watch on DIR itself for nodes created, removed or renamed.
 *
 * Why per node and not one IN_OPEN watch on DIR: a watch on a directory reports opens of every
 * file in it, and on a busy host /dev/null, /dev/urandom and the ttys are opened thousands of
 * times a second; the queue would overflow and every sample would be a full scan. The nodes
 * themselves are opened rarely (a process starting CUDA or NVML), so their events are few.
 *
 * The kernel queues the open event before the new descriptor is installed in the opener's
 * table, so a scan that starts right after the event may still miss the descriptor; the
 * sampler therefore wants one more full scan after the sample that saw an open.
 *
 * When the set of nodes changes (a driver loaded, a node removed, a watch dropped by the
 * kernel) or the queue overflows, the poll reports a change and builds every watch anew, after
 * draining, so that an open in between is either seen by the full scan that follows or queued
 * on the new watches.
 */
#include "proc/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define VG_DEVWATCH_BUF ((size_t)64 << 10)

#define VG_DEVWATCH_DIR_MASK                                                                       \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |         \
     IN_ONLYDIR)
#define VG_DEVWATCH_NODE_MASK (IN_OPEN | IN_DELETE_SELF | IN_MOVE_SELF)
#define VG_DEVWATCH_SUBDIR_MASK                                                                    \
    (IN_OPEN | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |              \
     IN_MOVE_SELF | IN_ONLYDIR)

struct vg_proc_devwatch {
    char *dir;
    int fd;       /* the inotify instance; -1 between a failed rebuild and the next */
    int dir_wd;   /* the watch on dir itself */
    size_t nodes; /* node watches, directories included */
    char *buf;
};

static bool vg_devwatch_name(const char *name)
{
    return strncmp(name, "nvidia", 6) == 0;
}

/* A fresh inotify instance with every watch. The old one is closed first. */
static int vg_devwatch_build(struct vg_proc_devwatch *w, struct vg_err *err)
{
    if (w->fd >= 0)
        close(w->fd);
    w->nodes = 0;
    w->dir_wd = -1;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        int e = errno;
        return vg_err_set(err, -e, "cannot watch the device nodes: inotify: %s", strerror(e));
    }
    /* The directory first: a node created while the others are being added is then reported. */
    w->dir_wd = inotify_add_watch(w->fd, w->dir, VG_DEVWATCH_DIR_MASK);
    if (w->dir_wd < 0) {
        int e = errno;
        close(w->fd);
        w->fd = -1;
        return vg_err_set(err, -e, "cannot watch '%s': %s", w->dir, strerror(e));
    }
    DIR *d = opendir(w->dir);
    if (!d) {
        int e = errno;
        close(w->fd);
        w->fd = -1;
        return vg_err_set(err, -e, "cannot list '%s': %s", w->dir, strerror(e));
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!vg_devwatch_name(de->d_name))
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", w->dir, de->d_name) < 0) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            break;
        }
        struct stat st;
        if (stat(path, &st) < 0) {
            /* removed since the listing: the directory watch has reported it */
            free(path);
            continue;
        }
        uint32_t mask = S_ISDIR(st.st_mode) ? VG_DEVWATCH_SUBDIR_MASK : VG_DEVWATCH_NODE_MASK;
        int wd = inotify_add_watch(w->fd, path, mask);
        int e = errno;
        free(path);
        if (wd < 0) {
            if (e == ENOENT)
                continue;
            /* A node that cannot be watched (unreadable, out of watches) could be opened
             * unseen: no incremental scans at all rather than wrong ones. */
            rc = vg_err_set(err, -e, "cannot watch '%s/%s': %s", w->dir, de->d_name, strerror(e));
            break;
        }
        w->nodes++;
    }
    closedir(d);
    if (rc) {
        close(w->fd);
        w->fd = -1;
    }
    return rc;
}

int vg_proc_devwatch_new(const char *dev_dir, struct vg_proc_devwatch **out, struct vg_err *err)
{
    *out = NULL;
    struct vg_proc_devwatch *w = calloc(1, sizeof(*w));
    if (!w)
        return vg_err_set(err, -ENOMEM, "out of memory");
    w->fd = -1;
    const char *dir = dev_dir && *dev_dir ? dev_dir : "/dev";
    if (!(w->dir = strdup(dir)) || !(w->buf = malloc(VG_DEVWATCH_BUF))) {
        vg_proc_devwatch_free(w);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    int rc = vg_devwatch_build(w, err);
    if (rc) {
        vg_proc_devwatch_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void vg_proc_devwatch_free(struct vg_proc_devwatch *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w->buf);
    free(w->dir);
    free(w);
}

size_t vg_proc_devwatch_nodes(const struct vg_proc_devwatch *w)
{
    return w ? w->nodes : 0;
}

/* What one event means: 0 nothing, VG_PROC_DEVWATCH_OPENED, or VG_PROC_DEVWATCH_CHANGED. */
static int vg_devwatch_event(const struct vg_proc_devwatch *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW)
        return VG_PROC_DEVWATCH_CHANGED;
    if (ev->wd == w->dir_wd) {
        /* in DIR itself only the nodes matter: /dev sees other devices come and go */
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT))
            return VG_PROC_DEVWATCH_CHANGED;
        return ev->len && vg_devwatch_name(ev->name) ? VG_PROC_DEVWATCH_CHANGED : 0;
    }
    if (ev->mask & (IN_OPEN)) {
        /* listing a watched directory opens it too; only its files are nodes */
        if ((ev->mask & IN_ISDIR) && ev->len == 0)
            return 0;
        return VG_PROC_DEVWATCH_OPENED;
    }
    if (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                    IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT))
        return VG_PROC_DEVWATCH_CHANGED;
    return 0;
}

int vg_proc_devwatch_poll(struct vg_proc_devwatch *w, struct vg_err *err)
{
    int seen = 0;
    if (w->fd < 0)
        seen = VG_PROC_DEVWATCH_CHANGED; /* the last rebuild failed: try again */
    while (w->fd >= 0) {
        ssize_t n = read(w->fd, w->buf, VG_DEVWATCH_BUF);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            int e = errno;
            return vg_err_set(err, -e, "cannot read the device-node watch: %s", strerror(e));
        }
        if (n == 0)
            break;
        for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)n;) {
            const struct inotify_event *ev = (const void *)(w->buf + off);
            seen |= vg_devwatch_event(w, ev);
            off += sizeof(*ev) + ev->len;
        }
    }
    if (seen & VG_PROC_DEVWATCH_CHANGED) {
        int rc = vg_devwatch_build(w, err);
        if (rc)
            return rc;
    }
    return seen;
}
