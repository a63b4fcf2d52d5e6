/*
 * Phase one of the scan: which NVIDIA device nodes a process holds open, from what each
 * descriptor in /proc/PID/fd refers to. This runs for every process on the host, so it does
 * the least possible: open fd/, statx() each descriptor (the same one procfs lookup a readlink
 * would be) into a stack struct, match it against the scan's device set (devset.c: a few
 * compares). On procfs since Linux 6.2, fstat() of fd/ gives the descriptor count and the
 * descriptors are read as 0, 1, 2... without listing the directory (see vg_fd_probe);
 * otherwise fd/ is listed into the context's buffer. Nothing is allocated for a process that
 * holds no node. docs/performance.md has the measurements.
 *
 * A descriptor is an NVIDIA node by what it refers to (proc.h, vg_proc_devset), never by its
 * path, so a file that only carries a node's name is not one, and a node reached through any
 * path, mount namespace or bind mount is. The statx asks AT_STATX_DONT_SYNC: a descriptor on a
 * hung NFS or FUSE file answers from the cache instead of stalling the scan. Paths are read
 * (readlink) only for the nodes a process holds, for display, and only for the first
 * VG_PROC_NODES_MAX distinct ones: the cost per process is one statx per descriptor and a
 * constant per node, whatever it holds. After the kernel scan (kscan.c), a holder it found is
 * read by the descriptor numbers it reported, not by statx'ing every descriptor again: the
 * count of all comes from fd/'s size. An incremental scan reads a known holder the same way, by
 * the numbers the index kept from the last scan (scan.c says when that is sound). The nodes a
 * process holds by memory mapping (maps.c) are noted here too, in the same per-process set,
 * after its descriptors (vg_proc_map_held).
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/file.h"

/* Longest link target read for display; a longer one (none is, for a device) is left unknown. */
#define VG_LINK_HEAP_MAX ((size_t)1 << 20)
/* kcmp(2)'s "same descriptor table" comparison (<linux/kcmp.h>, not in every libc's headers). */
#define VG_KCMP_FILES 2
/* Distinct descriptor tables of one thread group walked besides the leader's; a process with
 * more (none is known) is counted as not fully checked. */
#define VG_FD_TABLES_MAX 16
/* An io_uring's fdinfo read at most: a line per registered file (a ring may register many). */
#define VG_FD_FDINFO_MAX ((size_t)4 << 20)

static void vg_fd_id(const struct statx *st, struct vg_dev_id *id)
{
    *id = (struct vg_dev_id){
        .mode = st->stx_mode,
        .rdev_major = st->stx_rdev_major,
        .rdev_minor = st->stx_rdev_minor,
        .dev_major = st->stx_dev_major,
        .dev_minor = st->stx_dev_minor,
        .ino = st->stx_ino,
    };
}

static int vg_fd_stat(int fdd, const char *name, struct vg_dev_id *id)
{
    struct statx st;
    if (statx(fdd, name, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &st) < 0)
        return -errno;
    vg_fd_id(&st, id);
    return 0;
}

static bool vg_fd_same(const struct vg_dev_id *a, const struct vg_dev_id *b)
{
    return a->mode == b->mode && a->rdev_major == b->rdev_major && a->rdev_minor == b->rdev_minor &&
           a->dev_major == b->dev_major && a->dev_minor == b->dev_minor && a->ino == b->ino;
}

void vg_proc_fds_reset(struct vg_proc_ctx *c)
{
    memset(c->gpu_bits, 0, sizeof(c->gpu_bits));
    memset(c->map_bits, 0, sizeof(c->map_bits));
    memset(c->path_bits, 0, sizeof(c->path_bits));
    for (size_t i = 0; i < c->npaths; i++)
        free(c->paths[i]);
    c->npaths = 0;
    c->nodes_more = 0;
    c->nheld_fds = 0;
    c->held_over = false;
    c->map_extra = 0;
    c->tables_unchecked = false;
    c->nanon = 0;
    c->anon_over = false;
    c->slots_n = 0;
    if (++c->slots_gen == 0) {
        /* after 2^32 processes: stale slots could look current, so clear them for real */
        if (c->slots)
            memset(c->slots, 0, c->slots_cap * sizeof(*c->slots));
        c->slots_gen = 1;
    }
}

static size_t vg_fd_slot(uint64_t node, size_t cap)
{
    /* MurmurHash3's 64-bit finaliser: device numbers and indices are far from random */
    node ^= node >> 33;
    node *= 0xff51afd7ed558ccdULL;
    node ^= node >> 33;
    node *= 0xc4ceb9fe1a85ec53ULL;
    node ^= node >> 33;
    return (size_t)node & (cap - 1);
}

/* Whether node is new for the current process; adds it. 1 new, 0 seen before, -ENOMEM. */
static int vg_fd_node_add(struct vg_proc_ctx *c, uint64_t node)
{
    if (2 * (c->slots_n + 1) > c->slots_cap) {
        size_t cap = c->slots_cap ? c->slots_cap * 2 : 64;
        struct vg_proc_node_slot *ns = calloc(cap, sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < c->slots_cap; i++) {
            if (c->slots[i].gen != c->slots_gen)
                continue;
            size_t j = vg_fd_slot(c->slots[i].node, cap);
            while (ns[j].gen == c->slots_gen)
                j = (j + 1) & (cap - 1);
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->slots_cap = cap;
    }
    size_t j = vg_fd_slot(node, c->slots_cap);
    while (c->slots[j].gen == c->slots_gen) {
        if (c->slots[j].node == node)
            return 0;
        j = (j + 1) & (c->slots_cap - 1);
    }
    c->slots[j] = (struct vg_proc_node_slot){.node = node, .gen = c->slots_gen};
    c->slots_n++;
    return 1;
}

/* The path a descriptor names, for display: *out NULL when the descriptor no longer refers to
 * what was matched (closed and reused meanwhile) or its target is absurdly long. 0 or -ENOMEM. */
static int vg_fd_path(int fdd, const char *name, const struct vg_dev_id *id, char **out)
{
    *out = NULL;
    char stackbuf[PATH_MAX];
    char *buf = stackbuf;
    size_t cap = sizeof(stackbuf);
    ssize_t n;
    while ((n = readlinkat(fdd, name, buf, cap)) >= 0 && (size_t)n == cap) {
        if (buf != stackbuf)
            free(buf);
        if (cap >= VG_LINK_HEAP_MAX)
            return 0;
        cap *= 2;
        if (!(buf = malloc(cap)))
            return -ENOMEM;
    }
    int rc = 0;
    struct vg_dev_id now;
    if (n >= 0 && vg_fd_stat(fdd, name, &now) == 0 && vg_fd_same(id, &now) &&
        !(*out = vg_proc_strndup(buf, (size_t)n)))
        rc = -ENOMEM;
    if (buf != stackbuf)
        free(buf);
    return rc;
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

struct vg_fd_counts {
    unsigned total, ndev, npath;
    bool ctl, uvm;
};

/*
 * Whether a descriptor that refers to a node is an O_PATH one. procfs gives a descriptor's link
 * the access of its file (r for FMODE_READ, w for FMODE_WRITE), so a link with either is an
 * open file, settled by the one fstatat; one with neither is O_PATH or an open for ioctl only
 * (access mode 3, which does reach the driver), told apart by the flags fdinfo shows. Only under
 * a real procfs; anything unreadable counts as an open file: a holder too many makes a GPU look
 * held, never one too few a held GPU look free.
 */
static bool vg_fd_is_path(const struct vg_proc_ctx *c, int fdd, const char *name)
{
    struct stat st;
    if (!c->procfs || fdd < 0 || fstatat(fdd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISLNK(st.st_mode) || (st.st_mode & (S_IRUSR | S_IWUSR)))
        return false;
    char path[48], buf[256];
    snprintf(path, sizeof(path), "../fdinfo/%s", name);
    size_t len;
    if (vg_file_read_small(fdd, path, buf, sizeof(buf), &len) != 0)
        return false;
    uint64_t flags;
    return vg_proc_parse_fdinfo_flags(buf, len, &flags) == 0 && (flags & O_PATH);
}

/* One descriptor that refers to an NVIDIA node: count it (an O_PATH one apart), and note the
 * node when it is new. */
static int vg_fd_held(struct vg_proc_ctx *c, int fdd, const char *name, const struct vg_dev_id *id,
                      const struct vg_dev_match *m, bool path, struct vg_fd_counts *k)
{
    unsigned fd = vg_fd_number(name);
    if (fd == UINT_MAX || c->nheld_fds == VG_PROC_IX_FDS_MAX)
        c->held_over = true;
    else
        c->held_fds[c->nheld_fds++] = fd;
    if (path) {
        k->npath++;
        if (m->kind == VG_DEV_GPU)
            c->path_bits[m->minor / 64] |= (uint64_t)1 << (m->minor % 64);
    } else {
        k->ndev++;
        if (m->kind == VG_DEV_GPU)
            c->gpu_bits[m->minor / 64] |= (uint64_t)1 << (m->minor % 64);
        else if (m->kind == VG_DEV_CTL)
            k->ctl = true;
        else if (m->kind == VG_DEV_UVM)
            k->uvm = true;
    }
    int rc = vg_fd_node_add(c, m->node);
    if (rc <= 0)
        return rc;
    if (c->npaths == VG_PROC_NODES_MAX) {
        c->nodes_more++;
        return 0;
    }
    rc = vg_fd_path(fdd, name, id, &c->paths[c->npaths]);
    if (rc == 0)
        c->npaths++;
    return rc;
}

/* Stat and match one descriptor of an fd/ directory. 0 (counted), -ENOENT (closed, or never
 * open), -EACCES/-EPERM (denied), -ESRCH (gone), -ENOMEM. Any other failure (only a test tree's
 * plain symlinks, pointing nowhere sensible, give one) is a descriptor that is no node. */
static int vg_fd_link(struct vg_proc_ctx *c, int fdd, const char *name, struct vg_fd_counts *k)
{
    struct vg_dev_id id;
    int rc = vg_fd_stat(fdd, name, &id);
    if (rc == -ENOENT || rc == -EACCES || rc == -EPERM || rc == -ESRCH || rc == -ENOMEM)
        return rc;
    struct vg_dev_match m;
    if (rc == 0 && (id.mode & S_IFMT) == 0) {
        /* an anonymous inode: maybe an io_uring, whose registered files vg_fd_rings reads */
        unsigned fd = vg_fd_number(name);
        if (fd != UINT_MAX && c->nanon < VG_PROC_ANON_MAX)
            c->anon_fds[c->nanon++] = fd;
        else
            c->anon_over = true;
        return 0;
    }
    if (rc < 0 || !vg_proc_devset_match(c->devset, &id, &m))
        return 0;
    return vg_fd_held(c, fdd, name, &id, &m, vg_fd_is_path(c, fdd, name), k);
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

/* Walk one fd/ directory by listing it, matching each descriptor; nodes accumulate in c.
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
 * Read the descriptors of an fd/ directory that holds `count` of them without listing it: try
 * 0, 1, 2... until `count` were read. Listing fd/ makes the kernel build and tear down a
 * dentry for every entry, which the statx of each then looks up again, so skipping the listing
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

/* The kernel scan, or the index of the last scan, named the process's NVIDIA descriptors
 * (c->kfds): read those by number, and the count of all from fd/'s size. Returns 0 when done, 1
 * when fd/ must be walked after all (no count, or none of them is there any more), or a
 * negative errno. */
static int vg_fd_numbered(struct vg_proc_ctx *c, int fdd, const struct stat *st,
                          struct vg_fd_counts *k)
{
    if (st->st_size <= 0 || st->st_size >= UINT_MAX)
        return 1;
    for (size_t i = 0; i < c->nkfds; i++) {
        char buf[16];
        if (c->kfds[i].other)
            continue; /* another thread's table: vg_fd_thread_tables reads it */
        int rc = vg_fd_link(c, fdd, vg_fd_name(c->kfds[i].fd, buf), k);
        if (rc < 0 && rc != -ENOENT) /* ENOENT: closed since the kernel saw it */
            return rc;
    }
    if (k->ndev == 0 && k->npath == 0) {
        vg_proc_fds_reset(c);
        return 1;
    }
    k->total = (unsigned)st->st_size;
    return 0;
}

/* Whether two tasks (numbered in our own PID namespace) share one descriptor table: 1 they
 * do, 0 they do not, or a negative errno (-ESRCH: one is gone; -EPERM: not ours to compare;
 * -ENOSYS: a kernel without kcmp). */
static int vg_fd_same_table(pid_t a, pid_t b)
{
    long r = syscall(SYS_kcmp, a, b, VG_KCMP_FILES, 0UL, 0UL);
    return r < 0 ? -errno : r == 0;
}

/*
 * A thread that called unshare(CLONE_FILES), or was cloned into the group without CLONE_FILES,
 * has a descriptor table of its own, which fd/ (the leader's) does not show: a node only it
 * opened is in no listing of the process, while the driver lists the process's PID. So the
 * threads of a process whose leader's table was read are compared with the leader's by kcmp(2)
 * and every table that differs (each distinct one once) is walked too: for the processes that
 * can hold memory that way, those the driver lists (a context is listed under its process,
 * whichever thread made it), those already holding a node, and those the kernel scan saw a
 * node of in another thread's table. Checking every process would cost a task/ listing and a
 * kcmp per thread of the whole host (a fifth more scan time on 4,000 threads) for nodes that,
 * with no context listed, hold no memory. One fstatat settles a process of one thread (task/'s
 * link count). kcmp numbers tasks in our own PID namespace, so a --proc view
 * of another one (c->kcmp_ok false), a kernel without kcmp or a refusal leaves the process's
 * other tables unchecked: said (c->tables_unchecked, counted by the scan), never taken as
 * empty. The numbers matched are not the leader's, so the index keeps none (held_over).
 */
static int vg_fd_thread_tables(struct vg_proc_ctx *c, int pid_fd, pid_t pid, struct vg_fd_counts *k)
{
    bool other = false;
    for (size_t i = 0; i < c->nkfds && !other; i++)
        other = c->kfds[i].other;
    struct stat st;
    if (!c->procfs || !(c->wanted || k->ndev > 0 || other) ||
        fstatat(pid_fd, "task", &st, 0) != 0 || st.st_nlink <= 3)
        return 0;
    if (!c->kcmp_ok) {
        c->tables_unchecked = true;
        return 0;
    }
    int taskd = openat(pid_fd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (taskd < 0)
        return vg_proc_err_gone(-errno) ? 0 : -errno;
    char tbuf[4096]; /* the fd walks reuse c->dents */
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, taskd, tbuf, sizeof(tbuf));
    pid_t walked[VG_FD_TABLES_MAX];
    size_t nwalked = 0;
    const char *name;
    int rc;
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0) {
        unsigned tid = vg_fd_number(name);
        if (tid == UINT_MAX || tid > INT_MAX || (pid_t)tid == pid)
            continue;
        int same = vg_fd_same_table(pid, (pid_t)tid);
        for (size_t i = 0; same == 0 && i < nwalked; i++)
            same = vg_fd_same_table(walked[i], (pid_t)tid);
        if (same == -ESRCH || same > 0)
            continue; /* exited meanwhile, or a table already read */
        if (same < 0 || nwalked == VG_FD_TABLES_MAX) {
            if (same == -ENOSYS)
                c->kcmp_ok = false;
            c->tables_unchecked = true;
            break;
        }
        walked[nwalked++] = (pid_t)tid;
        char path[32];
        snprintf(path, sizeof(path), "%u/fd", tid);
        int fdd = openat(taskd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fdd < 0) {
            if (!vg_proc_err_gone(-errno))
                c->tables_unchecked = true;
            continue;
        }
        rc = vg_fd_walk(c, fdd, c->dents, c->dents_cap, 0, k);
        close(fdd);
        c->held_over = true;
        if (rc == -ENOMEM)
            break;
        if (rc < 0 && !vg_proc_err_gone(rc))
            c->tables_unchecked = true;
        rc = 1;
    }
    close(taskd);
    return rc == -ENOMEM ? rc : 0;
}

struct vg_fd_ring {
    struct vg_proc_ctx *c;
    struct vg_fd_counts *k;
    const char *fdname; /* the ring's descriptor number, for the index's numbers */
};

/* One file an io_uring holds registered: a node of the scan's set, found by the path the
 * kernel names it by (an older kernel gives the last name only: taken under --dev DIR). Any
 * path at all can name a node, so it is stat'ed and matched by what it is, as a descriptor
 * is; only the path is the kernel's word, and a file renamed or unmounted since is missed. */
static int vg_fd_ring_file(void *arg, const char *path, size_t len)
{
    struct vg_fd_ring *r = arg;
    char buf[PATH_MAX];
    const char *dir = r->c->dev_dir;
    int n = len && path[0] == '/' ? snprintf(buf, sizeof(buf), "%.*s", (int)len, path)
                                  : snprintf(buf, sizeof(buf), "%s/%.*s", dir, (int)len, path);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return 0;
    struct vg_dev_id id;
    struct vg_dev_match m;
    if (vg_fd_stat(AT_FDCWD, buf, &id) != 0 || !vg_proc_devset_match(r->c->devset, &id, &m))
        return 0;
    r->c->held_over = true; /* not a descriptor number: walk it again next time */
    return vg_fd_held(r->c, -1, r->fdname, &id, &m, false, r->k);
}

/*
 * io_uring's registered files (IORING_REGISTER_FILES): the ring holds each file open, so a
 * node registered and then closed is held with no descriptor of it in fd/ (issue 27). The
 * anonymous-inode descriptors the walk noted are looked at, for the processes that can hold
 * memory so (as vg_fd_thread_tables says), by their link ("anon_inode:[io_uring]") and the
 * ring's fdinfo. A ring's own descriptor counts as the node's descriptor.
 */
static int vg_fd_rings(struct vg_proc_ctx *c, int pid_fd, struct vg_fd_counts *k)
{
    if (!c->procfs || !(c->wanted || k->ndev > 0) || (!c->nanon && !c->anon_over))
        return 0;
    if (c->anon_over)
        c->tables_unchecked = true; /* more than noted: said, not read */
    for (size_t i = 0; i < c->nanon; i++) {
        char num[16], path[48], link[64];
        const char *name = vg_fd_name(c->anon_fds[i], num);
        snprintf(path, sizeof(path), "fd/%s", name);
        ssize_t n = readlinkat(pid_fd, path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        if (strcmp(link, "anon_inode:[io_uring]") != 0)
            continue;
        snprintf(path, sizeof(path), "fdinfo/%s", name);
        int rc = vg_proc_ctx_read(c, pid_fd, path, VG_FD_FDINFO_MAX);
        if (rc == -ENOMEM)
            return rc;
        if (rc)
            continue;
        struct vg_fd_ring r = {c, k, name};
        rc = vg_proc_parse_uring_files(vg_buf_str(&c->file), c->file.len, vg_fd_ring_file, &r);
        c->file.len = 0;
        if (rc == -ENOMEM)
            return rc;
    }
    return 0;
}

static void vg_fd_counts_set(struct vg_proc *p, const struct vg_fd_counts *k)
{
    p->fd_total = k->total;
    p->dev_fd_count = k->ndev;
    p->dev_path_count = k->npath;
    p->has_ctl = k->ctl;
    p->has_uvm = k->uvm;
    p->known |= VG_PROC_K_FDS;
}

/* fd/ was denied (denied: its errno). A thread-group leader that exited has an fd/ owned by
 * root whatever its user (the kernel takes the owner from the memory map, which the leader no
 * longer has), while a live thread's task entry is still its user's: as that user the
 * descriptors are read there. Only for processes of our own user: another user's are denied
 * through every thread alike, and are not walked. */
static int vg_fd_denied(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p, int denied)
{
    struct stat st;
    if (!vg_proc_err_denied(denied) || fstat(pid_fd, &st) != 0 || st.st_uid != geteuid())
        return denied;
    struct vg_fd_counts k = {0};
    int rc = vg_fd_walk_threads(c, pid_fd, p->pid, &k);
    if (rc < 0 || k.total == 0) {
        vg_proc_fds_reset(c);
        return rc == -ENOMEM ? rc : denied;
    }
    c->held_over = true;
    vg_fd_counts_set(p, &k);
    return 0;
}

/* /proc refused the descriptors, but the kernel scan saw them (c->kfds, each with the file's
 * identity): count those, matched as a readable fd/ would be. What only /proc gives is left
 * unknown: the paths (NULL) and the descriptors that are no NVIDIA node (fd_total counts only
 * these). 0 when done, 1 when the kernel scan has nothing to give, -ENOMEM. */
static int vg_fd_from_kernel(struct vg_proc_ctx *c, struct vg_proc *p)
{
    if (!c->kfds || c->nkfds == 0)
        return 1;
    for (size_t i = 0; i < c->nkfds; i++)
        if (!c->kfds[i].id_known)
            return 1; /* the index's numbers, not the kernel's files */
    vg_proc_fds_reset(c);
    struct vg_fd_counts k = {0};
    for (size_t i = 0; i < c->nkfds; i++) {
        struct vg_dev_match m;
        if (!vg_proc_devset_match(c->devset, &c->kfds[i].id, &m))
            continue;
        char name[16];
        /* no fd/ to read the link from (-1): vg_fd_held leaves the path NULL */
        int rc = vg_fd_held(c, -1, vg_fd_name(c->kfds[i].fd, name), &c->kfds[i].id, &m,
                            c->kfds[i].path, &k);
        if (rc < 0) {
            vg_proc_fds_reset(c);
            return rc;
        }
    }
    if (k.ndev == 0 && k.npath == 0) {
        vg_proc_fds_reset(c);
        return 1;
    }
    k.total = k.ndev + k.npath;
    c->held_over = true; /* read by /proc's numbers next time it would be refused again */
    vg_fd_counts_set(p, &k);
    p->fds_by_kernel = true;
    return 0;
}

static int vg_fd_read_proc(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p);

int vg_proc_read_fds(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    int rc = vg_fd_read_proc(c, pid_fd, p);
    if (!vg_proc_err_denied(rc))
        return rc;
    int krc = vg_fd_from_kernel(c, p);
    return krc > 0 ? rc : krc;
}

/* The descriptors as /proc shows them: 0, or a negative errno (denied: -EACCES/-EPERM). */
static int vg_fd_read_proc(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    vg_proc_fds_reset(c);
    int fdd = openat(pid_fd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdd < 0)
        return vg_fd_denied(c, pid_fd, p, -errno);
    struct vg_fd_counts k = {0};
    int rc = 1;
    unsigned from = 0;
    struct stat st;
    bool said_empty = false;
    if (c->fd_count_ok && fstat(fdd, &st) == 0) {
        said_empty = st.st_size == 0;
        if (c->kfds)
            rc = vg_fd_numbered(c, fdd, &st, &k);
        if (rc > 0) {
            k = (struct vg_fd_counts){0};
            if (st.st_size > 0 && st.st_size < UINT_MAX)
                rc = vg_fd_probe(c, fdd, (unsigned)st.st_size, &k, &from);
        }
    }
    if (rc > 0)
        rc = vg_fd_walk(c, fdd, c->dents, c->dents_cap, from, &k);
    close(fdd);
    /* A kernel before 6.2 says 0 for every fd/: stop asking once a listing proves it wrong. */
    if (said_empty && rc >= 0 && k.total > 0)
        c->fd_count_ok = false;
    if (rc >= 0 && k.total == 0) {
        rc = vg_fd_walk_threads(c, pid_fd, p->pid, &k);
        c->held_over = true; /* not the leader's numbers: walk it again next time */
    } else if (rc >= 0) {
        rc = vg_fd_thread_tables(c, pid_fd, p->pid, &k);
    }
    if (rc >= 0)
        rc = vg_fd_rings(c, pid_fd, &k);
    if (rc < 0) {
        vg_proc_fds_reset(c);
        return rc;
    }
    vg_fd_counts_set(p, &k);
    return 0;
}

int vg_proc_map_held(struct vg_proc_ctx *c, const struct vg_dev_match *m, const char *path,
                     size_t len, struct vg_proc *p)
{
    p->dev_map_count++;
    if (m->kind == VG_DEV_GPU)
        c->map_bits[m->minor / 64] |= (uint64_t)1 << (m->minor % 64);
    else if (m->kind == VG_DEV_CTL)
        p->has_ctl = true;
    else if (m->kind == VG_DEV_UVM)
        p->has_uvm = true;
    int rc = vg_fd_node_add(c, m->node);
    if (rc <= 0)
        return rc;
    c->map_extra++; /* a node no descriptor holds */
    if (c->npaths == VG_PROC_NODES_MAX) {
        c->nodes_more++;
        return 0;
    }
    if (!(c->paths[c->npaths] = vg_proc_strndup(path, len)))
        return -ENOMEM;
    c->npaths++;
    return 0;
}

bool vg_proc_is_holder(const struct vg_proc *p)
{
    return (p->known & VG_PROC_K_FDS) && (p->dev_fd_count > 0 || p->dev_map_count > 0);
}

static void vg_fd_free_paths(struct vg_proc *p)
{
    for (size_t i = 0; i < p->ndev_paths; i++)
        free(p->dev_paths[i]);
    free(p->dev_paths);
    p->dev_paths = NULL;
    p->ndev_paths = 0;
}

int vg_proc_fds_commit(struct vg_proc_ctx *c, struct vg_proc *p)
{
    free(p->dev_minors);
    free(p->dev_minors_by);
    free(p->path_minors);
    p->dev_minors = NULL;
    p->dev_minors_by = NULL;
    p->path_minors = NULL;
    p->ndev_minors = 0;
    p->npath_minors = 0;
    vg_fd_free_paths(p);
    p->dev_nodes_more = 0;
    if (!(p->known & VG_PROC_K_FDS))
        return 0;
    size_t n = 0;
    for (size_t w = 0; w < sizeof(c->gpu_bits) / sizeof(c->gpu_bits[0]); w++)
        n += (size_t)__builtin_popcountll(c->gpu_bits[w] | c->map_bits[w]);
    if (n) {
        p->dev_minors = malloc(n * sizeof(*p->dev_minors));
        p->dev_minors_by = malloc(n);
        if (!p->dev_minors || !p->dev_minors_by)
            return -ENOMEM; /* both freed with p */
        for (unsigned m = 0; m <= VG_DEV_GPU_MINOR_MAX; m++) {
            uint64_t bit = (uint64_t)1 << (m % 64);
            unsigned by = ((c->gpu_bits[m / 64] & bit) ? VG_PROC_BY_FD : 0) |
                          ((c->map_bits[m / 64] & bit) ? VG_PROC_BY_MAP : 0);
            if (!by)
                continue;
            p->dev_minors_by[p->ndev_minors] = (unsigned char)by;
            p->dev_minors[p->ndev_minors++] = m;
        }
    }
    size_t np = 0;
    for (size_t w = 0; w < sizeof(c->path_bits) / sizeof(c->path_bits[0]); w++)
        np += (size_t)__builtin_popcountll(c->path_bits[w] & ~(c->gpu_bits[w] | c->map_bits[w]));
    if (np) {
        if (!(p->path_minors = malloc(np * sizeof(*p->path_minors))))
            return -ENOMEM;
        for (unsigned m = 0; m <= VG_DEV_GPU_MINOR_MAX; m++) {
            uint64_t bit = (uint64_t)1 << (m % 64);
            if ((c->path_bits[m / 64] & bit) &&
                !((c->gpu_bits[m / 64] | c->map_bits[m / 64]) & bit))
                p->path_minors[p->npath_minors++] = m;
        }
    }
    if (c->npaths) {
        if (!(p->dev_paths = malloc(c->npaths * sizeof(*p->dev_paths))))
            return -ENOMEM;
        memcpy(p->dev_paths, c->paths, c->npaths * sizeof(*p->dev_paths));
        p->ndev_paths = c->npaths;
        c->npaths = 0; /* handed over */
    }
    p->dev_nodes_more = c->nodes_more;
    return 0;
}
