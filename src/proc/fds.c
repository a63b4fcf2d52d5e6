/*
 * Phase one of the scan: which NVIDIA device nodes a process holds open, from the link
 * targets in /proc/PID/fd. This runs for every process on the host, so it does the least
 * possible: open fd/, readlinkat() each descriptor into a stack buffer, compare a prefix. On
 * procfs since Linux 6.2, fstat() of fd/ gives the descriptor count and the links are read as
 * 0, 1, 2... without listing the directory (see vg_fd_probe); otherwise fd/ is listed into the
 * context's buffer. Nothing is allocated unless a target is longer than the stack buffer and
 * could still be an NVIDIA node. docs/performance.md has the measurements.
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
#include <sys/stat.h>
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

/* Read and classify one link of an fd/ directory. 0 (counted), -ENOENT (closed, or never
 * open), or another negative errno. */
static int vg_fd_link(struct vg_proc_ctx *c, int fdd, const char *name, struct vg_fd_counts *k)
{
    char link[PATH_MAX];
    ssize_t n = readlinkat(fdd, name, link, sizeof(link));
    if (n < 0)
        return -errno;
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
    if (hit <= 0)
        return hit;
    k->ndev++;
    if (kind == VG_DEV_CTL)
        k->ctl = true;
    else if (kind == VG_DEV_UVM)
        k->uvm = true;
    else if (kind == VG_DEV_GPU)
        return vg_fd_add_minor(c, minor);
    return 0;
}

/* Decimal text of a descriptor number (no allocation; out has room for any unsigned). */
static const char *vg_fd_name(unsigned fd, char out[16])
{
    char *e = out + 15;
    *e = '\0';
    do
        *--e = (char)('0' + fd % 10);
    while ((fd /= 10) && e > out);
    return e;
}

/* An fd/ entry name as a number; UINT_MAX when it is not one (only under a test root). */
static unsigned vg_fd_number(const char *name)
{
    unsigned long v = 0;
    if (!*name)
        return UINT_MAX;
    for (; *name; name++) {
        if (*name < '0' || *name > '9' || v >= UINT_MAX / 10)
            return UINT_MAX;
        v = v * 10 + (unsigned long)(*name - '0');
    }
    return v < UINT_MAX ? (unsigned)v : UINT_MAX;
}

/* Walk one fd/ directory by listing it, classifying each link; minors accumulate in c.
 * Entries numbered below `from` were already read by vg_fd_probe and are skipped. */
static int vg_fd_walk(struct vg_proc_ctx *c, int fdd, char *dents, size_t dents_cap, unsigned from,
                      struct vg_fd_counts *k)
{
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, fdd, dents, dents_cap);
    const char *name;
    int rc;
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0) {
        if (from && vg_fd_number(name) < from)
            continue;
        k->total++;
        int r = vg_fd_link(c, fdd, name, k);
        if (r < 0 && r != -ENOENT) /* ENOENT: closed since the listing */
            return r;
    }
    return rc;
}

/*
 * Read the links of an fd/ directory that holds `count` descriptors without listing it: try
 * 0, 1, 2... until `count` links were read. Listing fd/ makes the kernel build and tear down
 * a dentry for every entry, which readlinkat then looks up again, so skipping the listing
 * takes about a fifth off phase one; descriptors are nearly always dense from 0. A table with
 * holes costs a few failed lookups: after a quarter of the count of them (at least 4, at most
 * 16: a shell's 0-2 and 255 give up soon, a large table with a few holes does not), or a count
 * the numbers do not reach (a descriptor closed meanwhile), the rest is listed as usual from
 * the first number not tried. Returns 0 when done, 1 with *next set when the listing must
 * finish the job, or a negative errno.
 *
 * Like a listing, this is one pass in increasing descriptor order, so a process that opens or
 * closes descriptors meanwhile is seen as of some moment during the pass, never double counted.
 */
static int vg_fd_probe(struct vg_proc_ctx *c, int fdd, unsigned count, struct vg_fd_counts *k,
                       unsigned *next)
{
    unsigned misses = 0, fd = 0;
    unsigned budget = count / 4 < 4 ? 4 : count / 4 > 16 ? 16 : count / 4;
    for (; k->total < count; fd++) {
        if (misses == budget) {
            *next = fd;
            return 1;
        }
        char buf[16];
        int rc = vg_fd_link(c, fdd, vg_fd_name(fd, buf), k);
        if (rc == -ENOENT) {
            misses++;
            continue;
        }
        if (rc < 0)
            return rc;
        k->total++;
    }
    return 0;
}

/* A thread-group leader that exited while other threads run (state Z) shows an empty fd/;
 * its descriptors, shared by all threads, are visible through any live thread's task entry.
 * Only reached for processes whose fd/ is empty: kernel threads, mostly, hundreds of them on a
 * large host, so on procfs task/'s link count (2 + threads) settles the one-thread case in one
 * call, and the leader's own entry, whose fd/ was just read, is skipped. */
static int vg_fd_walk_threads(struct vg_proc_ctx *c, int pid_fd, pid_t pid, struct vg_fd_counts *k)
{
    struct stat st;
    if (c->procfs && fstatat(pid_fd, "task", &st, 0) == 0 && st.st_nlink <= 3)
        return 0;
    char self[16];
    vg_proc_pid_str(pid, self);
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
        if (c->procfs && strcmp(name, self) == 0)
            continue;
        char path[64];
        snprintf(path, sizeof(path), "%s/fd", name);
        int fdd = openat(taskd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fdd < 0)
            continue; /* that thread exited, or is the defunct leader */
        rc = vg_fd_walk(c, fdd, c->dents, c->dents_cap, 0, k);
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
    int rc = 1;
    unsigned from = 0;
    struct stat st;
    bool said_empty = false;
    if (c->fd_count_ok && fstat(fdd, &st) == 0) {
        said_empty = st.st_size == 0;
        if (st.st_size > 0 && st.st_size < UINT_MAX)
            rc = vg_fd_probe(c, fdd, (unsigned)st.st_size, &k, &from);
    }
    if (rc > 0)
        rc = vg_fd_walk(c, fdd, c->dents, c->dents_cap, from, &k);
    close(fdd);
    /* A kernel before 6.2 says 0 for every fd/: stop asking once a listing proves it wrong. */
    if (said_empty && rc >= 0 && k.total > 0)
        c->fd_count_ok = false;
    if (rc >= 0 && k.total == 0)
        rc = vg_fd_walk_threads(c, pid_fd, p->pid, &k);
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
