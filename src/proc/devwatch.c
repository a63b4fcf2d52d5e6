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
 *
 * With CAP_SYS_ADMIN the opens come from fanotify instead (FAN_OPEN marks on the same nodes,
 * FAN_EVENT_ON_CHILD on nvidia-caps/), which names the opener: the sampler then reads that
 * process alone rather than every process. inotify keeps the directory and the nodes' own
 * removal. FAN_REPORT_FID, so that no event carries a descriptor: an event descriptor of a
 * device node would be opened through the driver. An unprivileged fanotify reports pid 0
 * (and an opener the listener's PID namespace cannot see is 0 too): such an open counts as
 * unnamed, as an inotify one.
 */
#include "proc/internal.h"
#include "util/array.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#define VG_DEVWATCH_BUF ((size_t)64 << 10)

#define VG_DEVWATCH_DIR_MASK                                                                       \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |         \
     IN_ONLYDIR)
#define VG_DEVWATCH_NODE_MASK (IN_DELETE_SELF | IN_MOVE_SELF)
#define VG_DEVWATCH_SUBDIR_MASK                                                                    \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |         \
     IN_ONLYDIR)

/* More distinct openers than this between two polls: cheaper to read everyone. */
#define VG_DEVWATCH_MAX_OPENERS 1024u

struct vg_proc_devwatch {
    char *dir;
    int fd;        /* the inotify instance; -1 between a failed rebuild and the next */
    int fan_fd;    /* the fanotify instance naming openers; -1: opens come from inotify */
    bool fan_try;  /* try fanotify at each build (allowed, and the caller can use names) */
    char *fan_why; /* why opens are not named, when fan_fd < 0 */
    int dir_wd;    /* the watch on dir itself */
    size_t nodes;  /* node watches, directories included */
    char *buf;
    pid_t *openers; /* named since the last poll, sorted and unique after it */
    size_t nopeners;
};

static bool vg_devwatch_name(const char *name)
{
    return strncmp(name, "nvidia", 6) == 0;
}

/* Whether this process may read openers' PIDs from fanotify: CAP_SYS_ADMIN, which
 * fanotify_init checks. Without it the instance works but names nobody. */
static bool vg_devwatch_may_fanotify(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return false;
    return (d[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1u;
}

static void vg_devwatch_fan_off(struct vg_proc_devwatch *w, const char *what, int e)
{
    if (w->fan_fd >= 0)
        close(w->fan_fd);
    w->fan_fd = -1;
    free(w->fan_why);
    if (asprintf(&w->fan_why, "%s: %s", what, strerror(e)) < 0)
        w->fan_why = NULL;
}

/* Add the node at path (a directory: its files) to the watches; 1 when it is gone already,
 * 0, or a negative errno with the message. */
static int vg_devwatch_add(struct vg_proc_devwatch *w, const char *path, struct vg_err *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return 1; /* removed since the listing: the directory watch has reported it */
    bool dir = S_ISDIR(st.st_mode);
    if (w->fan_fd >= 0 &&
        fanotify_mark(w->fan_fd, FAN_MARK_ADD, FAN_OPEN | (dir ? FAN_EVENT_ON_CHILD : 0), AT_FDCWD,
                      path) != 0) {
        if (errno == ENOENT)
            return 1;
        /* a file system without file handles, or out of marks: opens go unnamed, never
         * unseen (the inotify instance is rebuilt with IN_OPEN by the caller) */
        vg_devwatch_fan_off(w, "fanotify", errno);
        w->fan_try = false;
        return -EAGAIN;
    }
    uint32_t mask = dir ? VG_DEVWATCH_SUBDIR_MASK : VG_DEVWATCH_NODE_MASK;
    if (w->fan_fd < 0)
        mask |= IN_OPEN;
    if (inotify_add_watch(w->fd, path, mask) < 0) {
        int e = errno;
        if (e == ENOENT)
            return 1;
        /* A node that cannot be watched (unreadable, out of watches) could be opened unseen:
         * no incremental scans at all rather than wrong ones. */
        return vg_err_set(err, -e, "cannot watch '%s': %s", path, strerror(e));
    }
    w->nodes++;
    return 0;
}

/* A fresh inotify instance (and fanotify one) with every watch. The old ones are closed
 * first. */
static int vg_devwatch_build_once(struct vg_proc_devwatch *w, struct vg_err *err)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->fan_fd >= 0)
        close(w->fan_fd);
    w->fan_fd = -1;
    w->nodes = 0;
    w->dir_wd = -1;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        int e = errno;
        return vg_err_set(err, -e, "cannot watch the device nodes: inotify: %s", strerror(e));
    }
    if (w->fan_try) {
        w->fan_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID,
                                  O_RDONLY | O_CLOEXEC | O_LARGEFILE);
        if (w->fan_fd < 0)
            vg_devwatch_fan_off(w, "fanotify", errno);
    }
    /* The directory first: a node created while the others are being added is then reported. */
    w->dir_wd = inotify_add_watch(w->fd, w->dir, VG_DEVWATCH_DIR_MASK);
    if (w->dir_wd < 0) {
        int e = errno;
        return vg_err_set(err, -e, "cannot watch '%s': %s", w->dir, strerror(e));
    }
    DIR *d = opendir(w->dir);
    if (!d) {
        int e = errno;
        return vg_err_set(err, -e, "cannot list '%s': %s", w->dir, strerror(e));
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!vg_devwatch_name(de->d_name))
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", w->dir, de->d_name) < 0) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            break;
        }
        int r = vg_devwatch_add(w, path, err);
        free(path);
        if (r < 0)
            rc = r;
    }
    closedir(d);
    return rc;
}

static int vg_devwatch_build(struct vg_proc_devwatch *w, struct vg_err *err)
{
    int rc = vg_devwatch_build_once(w, err);
    if (rc == -EAGAIN) /* fanotify gave up half-way: again with inotify's opens */
        rc = vg_devwatch_build_once(w, err);
    if (rc) {
        if (w->fd >= 0)
            close(w->fd);
        if (w->fan_fd >= 0)
            close(w->fan_fd);
        w->fd = w->fan_fd = -1;
    }
    return rc;
}

int vg_proc_devwatch_new(const char *dev_dir, unsigned flags, struct vg_proc_devwatch **out,
                         struct vg_err *err)
{
    *out = NULL;
    struct vg_proc_devwatch *w = calloc(1, sizeof(*w));
    if (!w)
        return vg_err_set(err, -ENOMEM, "out of memory");
    w->fd = w->fan_fd = -1;
    const char *dir = dev_dir && *dev_dir ? dev_dir : "/dev";
    if (!(w->dir = strdup(dir)) || !(w->buf = malloc(VG_DEVWATCH_BUF)) ||
        !(w->openers = malloc(VG_DEVWATCH_MAX_OPENERS * sizeof(*w->openers)))) {
        vg_proc_devwatch_free(w);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    const char *why = NULL;
    if (!(flags & VG_PROC_DEVWATCH_NAME_OPENERS))
        why = "the process view numbers processes differently";
    else if (!vg_devwatch_may_fanotify())
        why = "fanotify names openers only with CAP_SYS_ADMIN";
    w->fan_try = !why;
    if (why && !(w->fan_why = strdup(why))) {
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
    if (w->fan_fd >= 0)
        close(w->fan_fd);
    free(w->openers);
    free(w->fan_why);
    free(w->buf);
    free(w->dir);
    free(w);
}

size_t vg_proc_devwatch_nodes(const struct vg_proc_devwatch *w)
{
    return w ? w->nodes : 0;
}

const char *vg_proc_devwatch_unnamed(const struct vg_proc_devwatch *w)
{
    if (w->fan_fd >= 0)
        return NULL;
    return w->fan_why ? w->fan_why : "fanotify is unavailable";
}

const pid_t *vg_proc_devwatch_openers(const struct vg_proc_devwatch *w, size_t *n)
{
    *n = w->nopeners;
    return w->openers;
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

/* One read of a watch's queue into buf: the bytes read, 0 when it is empty (or fd < 0), or a
 * negative errno with the message. */
static ssize_t vg_devwatch_read(int fd, char *buf, struct vg_err *err)
{
    while (fd >= 0) {
        ssize_t n = read(fd, buf, VG_DEVWATCH_BUF);
        if (n >= 0)
            return n;
        if (errno == EAGAIN)
            return 0;
        if (errno != EINTR) {
            int e = errno;
            return vg_err_set(err, -e, "cannot read the device-node watch: %s", strerror(e));
        }
    }
    return 0;
}

/* Drain the fanotify instance: openers named into w->openers (unsorted), the rest as bits. */
static int vg_devwatch_fan_read(struct vg_proc_devwatch *w, struct vg_err *err)
{
    int seen = 0;
    ssize_t n;
    while ((n = vg_devwatch_read(w->fan_fd, w->buf, err)) > 0) {
        /* Copied out: with FAN_REPORT_FID an event's length need not keep the next one 8-byte
         * aligned, as struct fanotify_event_metadata wants. */
        for (size_t off = 0; off + FAN_EVENT_METADATA_LEN <= (size_t)n;) {
            struct fanotify_event_metadata m;
            memcpy(&m, w->buf + off, sizeof(m));
            if (m.event_len < FAN_EVENT_METADATA_LEN || m.event_len > (size_t)n - off)
                break;
            off += m.event_len;
            if (m.fd >= 0) /* never with FAN_REPORT_FID; not leaked if a kernel did */
                close(m.fd);
            if (m.vers != FANOTIFY_METADATA_VERSION || (m.mask & FAN_Q_OVERFLOW))
                seen |= VG_PROC_DEVWATCH_CHANGED;
            else if (!(m.mask & FAN_OPEN))
                continue;
            else if (m.pid <= 0 || w->nopeners == VG_DEVWATCH_MAX_OPENERS)
                seen |= VG_PROC_DEVWATCH_OPENED; /* not named to us, or too many: read all */
            else
                w->openers[w->nopeners++] = m.pid;
        }
    }
    return n < 0 ? (int)n : seen;
}

int vg_proc_devwatch_poll(struct vg_proc_devwatch *w, struct vg_err *err)
{
    int seen = 0;
    w->nopeners = 0;
    if (w->fd < 0)
        seen = VG_PROC_DEVWATCH_CHANGED; /* the last rebuild failed: try again */
    ssize_t n;
    while ((n = vg_devwatch_read(w->fd, w->buf, err)) > 0) {
        for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)n;) {
            const struct inotify_event *ev = (const void *)(w->buf + off);
            seen |= vg_devwatch_event(w, ev);
            off += sizeof(*ev) + ev->len;
        }
    }
    if (n < 0)
        return (int)n;
    int fan = vg_devwatch_fan_read(w, err);
    if (fan < 0)
        return fan;
    seen |= fan;
    if (w->nopeners) {
        qsort(w->openers, w->nopeners, sizeof(*w->openers), vg_array_cmp_pid);
        size_t k = 1;
        for (size_t i = 1; i < w->nopeners; i++)
            if (w->openers[i] != w->openers[k - 1])
                w->openers[k++] = w->openers[i];
        w->nopeners = k;
        seen |= VG_PROC_DEVWATCH_NAMED;
    }
    if (seen & VG_PROC_DEVWATCH_CHANGED) {
        int rc = vg_devwatch_build(w, err);
        if (rc)
            return rc;
    }
    return seen;
}
