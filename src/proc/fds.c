/*
 * Phase one of the scan: which NVIDIA device nodes a process holds open, from the link
 * targets in /proc/PID/fd. This runs for every process on the host, so it does the least
 * possible: open fd/, read its entries into the context's buffer, readlinkat() each entry into
 * a stack buffer, compare a prefix. Nothing is allocated unless a target is longer than the
 * stack buffer and could still be an NVIDIA node.
 *
 * Targets are matched against DIR/nvidia* (DIR = --dev-dir, default /dev): DIR/nvidiaN with N
 * plain decimal is a GPU with minor N; nvidiactl; nvidia-uvm and nvidia-uvm-tools; anything
 * else under that name (nvidia-modeset, nvidia-caps/..., nvidia01) is some other NVIDIA node.
 * A target ending in " (deleted)" is a node that has since been removed: not a match.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Minor numbers are 20 bits on Linux. */
#define VG_MINOR_MAX ((1u << 20) - 1)
#define VG_LINK_HEAP_MAX ((size_t)1 << 20)

static bool vg_lit(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

size_t vg_proc_dev_dir_len(const char *dev_dir)
{
    size_t d = strlen(dev_dir);
    while (d > 1 && dev_dir[d - 1] == '/')
        d--;
    return d == 1 && dev_dir[0] == '/' ? 0 : d;
}

/* Does target start with DIR "/nvidia"? Sets *rest past that prefix. */
static bool vg_fd_prefix(const char *target, size_t len, const char *dir, size_t dlen, size_t *rest)
{
    if (len < dlen + 7 || memcmp(target, dir, dlen) != 0 ||
        memcmp(target + dlen, "/nvidia", 7) != 0)
        return false;
    *rest = dlen + 7;
    return true;
}

static int vg_fd_classify(const char *target, size_t len, const char *dir, size_t dlen,
                          enum vg_dev_kind *kind, unsigned *minor)
{
    static const char deleted[] = " (deleted)";
    size_t off;
    *kind = VG_DEV_NONE;
    *minor = 0;
    if (!target || !vg_fd_prefix(target, len, dir, dlen, &off))
        return 0;
    if (len >= sizeof(deleted) - 1 &&
        memcmp(target + len - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0)
        return 0;
    const char *r = target + off;
    size_t n = len - off;

    *kind = VG_DEV_OTHER;
    if (n > 0 && r[0] >= '0' && r[0] <= '9' && (r[0] != '0' || n == 1)) {
        unsigned long v = 0;
        size_t i = 0;
        while (i < n && r[i] >= '0' && r[i] <= '9' && v <= VG_MINOR_MAX)
            v = v * 10 + (unsigned long)(r[i++] - '0');
        if (i == n && v <= VG_MINOR_MAX) {
            *kind = VG_DEV_GPU;
            *minor = (unsigned)v;
        }
    } else if (vg_lit(r, n, "ctl")) {
        *kind = VG_DEV_CTL;
    } else if (vg_lit(r, n, "-uvm") || vg_lit(r, n, "-uvm-tools")) {
        *kind = VG_DEV_UVM;
    }
    return 1;
}

int vg_proc_parse_fd_target(const char *target, size_t len, const char *dev_dir,
                            enum vg_dev_kind *kind, unsigned *minor)
{
    if (!dev_dir || !*dev_dir)
        dev_dir = "/dev";
    return vg_fd_classify(target, len, dev_dir, vg_proc_dev_dir_len(dev_dir), kind, minor);
}

static int vg_fd_add_minor(struct vg_proc_ctx *c, unsigned m)
{
    for (size_t i = 0; i < c->nminors; i++)
        if (c->minors[i] == m)
            return 0;
    if (c->nminors == c->minors_cap) {
        size_t cap = c->minors_cap ? c->minors_cap * 2 : 16;
        unsigned *n = realloc(c->minors, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        c->minors = n;
        c->minors_cap = cap;
    }
    c->minors[c->nminors++] = m;
    return 0;
}

/* A target too long for the stack buffer that still starts like an NVIDIA node: read it whole
 * to classify it honestly. Returns the classification or a negative errno. */
static int vg_fd_long_target(struct vg_proc_ctx *c, int fdd, const char *name,
                             enum vg_dev_kind *kind, unsigned *minor)
{
    size_t cap = 2 * PATH_MAX;
    for (;;) {
        char *big = malloc(cap);
        if (!big)
            return -ENOMEM;
        ssize_t n = readlinkat(fdd, name, big, cap);
        if (n < 0) {
            int rc = -errno;
            free(big);
            return rc;
        }
        if ((size_t)n < cap) {
            int rc = vg_fd_classify(big, (size_t)n, c->dev_dir, c->dev_dir_len, kind, minor);
            free(big);
            return rc;
        }
        free(big);
        if (cap >= VG_LINK_HEAP_MAX)
            return 0; /* longer than any device path could be */
        cap *= 2;
    }
}

struct vg_fd_counts {
    unsigned total, ndev;
    bool ctl, uvm;
};

/* Walk one fd/ directory, classifying each link; minors accumulate in c. */
static int vg_fd_walk(struct vg_proc_ctx *c, int fdd, char *dents, size_t dents_cap,
                      struct vg_fd_counts *k)
{
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, fdd, dents, dents_cap);
    const char *name;
    int rc;
    char link[PATH_MAX];
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0) {
        k->total++;
        ssize_t n = readlinkat(fdd, name, link, sizeof(link));
        if (n < 0) {
            if (errno == ENOENT)
                continue; /* closed since the listing */
            return -errno;
        }
        enum vg_dev_kind kind;
        unsigned minor;
        int hit;
        size_t rest;
        if ((size_t)n < sizeof(link))
            hit = vg_fd_classify(link, (size_t)n, c->dev_dir, c->dev_dir_len, &kind, &minor);
        else if (vg_fd_prefix(link, (size_t)n, c->dev_dir, c->dev_dir_len, &rest))
            hit = vg_fd_long_target(c, fdd, name, &kind, &minor);
        else
            hit = 0;
        if (hit < 0) {
            if (hit == -ENOENT)
                continue;
            return hit;
        }
        if (!hit)
            continue;
        k->ndev++;
        if (kind == VG_DEV_CTL)
            k->ctl = true;
        else if (kind == VG_DEV_UVM)
            k->uvm = true;
        else if (kind == VG_DEV_GPU && (rc = vg_fd_add_minor(c, minor)) < 0)
            return rc;
    }
    return rc;
}

/* A thread-group leader that exited while other threads run (state Z) shows an empty fd/;
 * its descriptors, shared by all threads, are visible through any live thread's task entry.
 * Only reached for processes whose fd/ is empty, so the common path pays nothing. */
static int vg_fd_walk_threads(struct vg_proc_ctx *c, int pid_fd, struct vg_fd_counts *k)
{
    int taskd = openat(pid_fd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (taskd < 0)
        return vg_proc_err_gone(-errno) ? 0 : -errno;
    /* The task listing needs its own buffer: the fd walk reuses c->dents. */
    char tbuf[4096];
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, taskd, tbuf, sizeof(tbuf));
    const char *name;
    int rc;
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0 && k->total == 0) {
        char path[64];
        snprintf(path, sizeof(path), "%s/fd", name);
        int fdd = openat(taskd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fdd < 0)
            continue; /* that thread exited, or is the defunct leader */
        rc = vg_fd_walk(c, fdd, c->dents, c->dents_cap, k);
        close(fdd);
        if (rc < 0 && !vg_proc_err_gone(rc))
            break;
        rc = 1;
    }
    close(taskd);
    return rc < 0 ? rc : 0;
}

int vg_proc_read_fds(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    c->nminors = 0;
    int fdd = openat(pid_fd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdd < 0)
        return -errno;
    struct vg_fd_counts k = {0};
    int rc = vg_fd_walk(c, fdd, c->dents, c->dents_cap, &k);
    close(fdd);
    if (rc >= 0 && k.total == 0)
        rc = vg_fd_walk_threads(c, pid_fd, &k);
    if (rc < 0) {
        c->nminors = 0;
        return rc;
    }
    p->fd_total = k.total;
    p->dev_fd_count = k.ndev;
    p->has_ctl = k.ctl;
    p->has_uvm = k.uvm;
    p->known |= VG_PROC_K_FDS;
    return 0;
}

bool vg_proc_is_holder(const struct vg_proc *p)
{
    return (p->known & VG_PROC_K_FDS) && p->dev_fd_count > 0;
}

static int vg_cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

int vg_proc_fds_commit(struct vg_proc_ctx *c, struct vg_proc *p)
{
    free(p->dev_minors);
    p->dev_minors = NULL;
    p->ndev_minors = 0;
    if (c->nminors == 0 || !(p->known & VG_PROC_K_FDS))
        return 0;
    qsort(c->minors, c->nminors, sizeof(*c->minors), vg_cmp_unsigned);
    p->dev_minors = malloc(c->nminors * sizeof(*p->dev_minors));
    if (!p->dev_minors)
        return -ENOMEM;
    memcpy(p->dev_minors, c->minors, c->nminors * sizeof(*p->dev_minors));
    p->ndev_minors = c->nminors;
    return 0;
}
