/*
 * The two-phase walk over a procfs root (see proc.h), after htop: the root is opened once,
 * its numeric entries listed with getdents64, and each process read through its own pid
 * directory fd. Phase one (what each fd/ entry refers to, fds.c, then the nodes its maps show
 * mapped, maps.c) runs for every process and allocates nothing for one that holds none; phase
 * two (detail.c) follows at once, on the same directory fd, only for holders of an NVIDIA node,
 * the PIDs the caller wants, or everyone with opts->all. Keeping the pid directory open across both
 * phases means the details belong to the very process whose fds were read: a procfs pid directory
 * fd stops resolving once its process is reaped, so a PID reused in between cannot mix two
 * processes in one entry.
 *
 * Processes that exit mid-scan are skipped and counted; denied files are counted; only
 * failing to open the root or running out of memory fails the scan. With opts->cache, phase two
 * takes what a process cannot change from the cache (detail.c), and the scan's end drops the
 * cache entries of processes it did not read in full.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/array.h"
#include "util/file.h"

#define VG_PROC_ROOT_DENTS ((size_t)32 << 10)

/* A listed pid directory and its inode number (see proc.h on incremental scans). The pid
 * first: sorted with vg_array_cmp_pid. */
struct vg_scan_ent {
    pid_t pid;
    uint64_t ino;
};

/* Every pid directory under the root, sorted and distinct. */
static int vg_scan_list(int root_fd, struct vg_scan_ent **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    char *dents = malloc(VG_PROC_ROOT_DENTS);
    if (!dents)
        return -ENOMEM;
    /* getdents64 on a dup, so the root fd's own offset stays at 0 for the next caller */
    int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        free(dents);
        return rc;
    }
    struct vg_scan_ent *ents = NULL;
    size_t n = 0, cap = 0;
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, fd, dents, VG_PROC_ROOT_DENTS);
    const char *name;
    int rc;
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0) {
        pid_t pid;
        if (!vg_proc_name_pid(name, &pid))
            continue;
        if (VG_ARRAY_GROW(ents, cap, n + 1)) {
            rc = -ENOMEM;
            break;
        }
        ents[n++] = (struct vg_scan_ent){.pid = pid, .ino = it.ino};
    }
    close(fd);
    free(dents);
    if (rc < 0) {
        free(ents);
        return rc;
    }
    if (n > 1)
        qsort(ents, n, sizeof(*ents), vg_array_cmp_pid);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ents[k - 1].pid != ents[i].pid)
            ents[k++] = ents[i];
    *out = ents;
    *nout = k;
    return 0;
}

/* The pid allocated last, on a real procfs (a test tree has no meaningful loadavg). */
static bool vg_scan_last_pid(struct vg_proc_ctx *c, pid_t *last)
{
    return c->procfs && vg_proc_ctx_read(c, c->root_fd, "loadavg", VG_PROC_STAT_MAX) == 0 &&
           vg_proc_parse_loadavg_pid(vg_buf_str(&c->file), c->file.len, last) == 0;
}

/* Our own NSpid depth, from <root>/self/status; 0 when unknown. */
static pid_t vg_scan_self_depth(struct vg_proc_ctx *c)
{
    struct vg_proc self = {0};
    pid_t depth = 0;
    if (vg_proc_ctx_read(c, c->root_fd, "self/status", VG_PROC_STATUS_MAX) == 0 &&
        vg_proc_parse_status(vg_buf_str(&c->file), c->file.len, &self) == 0)
        depth = (pid_t)self.nnspid;
    vg_proc_release(&self);
    return depth;
}

enum vg_one { VG_ONE_KEEP, VG_ONE_SKIP, VG_ONE_VANISHED };

/* Whether phase one may skip p's maps: c->skip_maps (a known holder read by the index's
 * numbers, whose maps held no node beyond its descriptors last time) and every one of those
 * numbers still a node. A node closed since may still be mapped: then the maps are read. */
static bool vg_scan_maps_skip(const struct vg_proc_ctx *c, const struct vg_proc *p)
{
    return c->skip_maps && c->kfds && vg_proc_is_holder(p) && !c->held_over &&
           c->nheld_fds == c->nkfds;
}

/* Phase one's mappings, after the descriptors were read: 0, or the error of a process gone or
 * out of memory. Maps that could not be read or told (denied, malformed, too large) leave
 * what the process maps unknown: its table counts as unread (*fds_read false), so the scan
 * says some process may hold a node unseen, and the denial is counted. */
static int vg_scan_maps(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p, bool *fds_read)
{
    int rc = vg_proc_read_map_nodes(c, pid_fd, p);
    if (rc == 0 || rc == -ENOMEM || vg_proc_err_gone(rc))
        return rc;
    c->file.len = 0;
    *fds_read = false;
    if (vg_proc_err_denied(rc))
        c->denied = true;
    return 0;
}

/* Both phases for one process whose directory is open as pid_fd. p is filled when the result is
 * VG_ONE_KEEP and empty otherwise; -ENOMEM is the only error. *maps_read: its maps were read
 * and told (not skipped, see c->skip_maps). */
static int vg_scan_one(struct vg_proc_ctx *c, int pid_fd, pid_t pid, bool wanted, struct vg_proc *p,
                       bool *denied, bool *fds_read, bool *maps_read)
{
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    c->denied = false;
    c->wanted = wanted;
    *denied = false;
    int rc = vg_proc_read_fds(c, pid_fd, p);
    /* A process on its way out has released its files before its entry goes: fd/ is gone
     * while stat is still there. It holds nothing; that is not a descriptor table unread. */
    *fds_read = rc == 0 || vg_proc_err_gone(rc);
    *maps_read = false;
    if (rc == 0 && !vg_scan_maps_skip(c, p)) {
        rc = vg_scan_maps(c, pid_fd, p, fds_read);
        *maps_read = rc == 0 && *fds_read;
    }
    if (rc == -ENOMEM)
        return rc;
    if (vg_proc_err_gone(rc) && vg_proc_gone(pid_fd)) {
        memset(p, 0, sizeof(*p)); /* nothing is allocated before the commit */
        return VG_ONE_VANISHED;
    }
    if (vg_proc_err_denied(rc))
        c->denied = true;
    /* an O_PATH descriptor of a node holds nothing, but is kept to be reported apart */
    if (!wanted && !vg_proc_is_holder(p) && p->dev_path_count == 0) {
        *denied = c->denied;
        return VG_ONE_SKIP;
    }
    /* the maps text just read names the libraries too: phase two need not read it again */
    if (*maps_read && c->file.len > 0 &&
        (rc = vg_proc_parse_maps(vg_buf_str(&c->file), c->file.len, p)) == -ENOMEM)
        return rc;
    rc = vg_proc_fds_commit(c, p);
    if (rc == 0)
        rc = vg_proc_read_details(c, pid_fd, p);
    *denied = c->denied;
    if (rc < 0) {
        vg_proc_release(p);
        return rc == -ENOENT ? VG_ONE_VANISHED : rc;
    }
    return VG_ONE_KEEP;
}

static bool vg_scan_wanted(const pid_t *want, size_t nwant, pid_t pid)
{
    return nwant && bsearch(&pid, want, nwant, sizeof(*want), vg_array_cmp_pid) != NULL;
}

/* Whether an incremental scan may carry this process over unread: it was listed last time
 * under the same inode, held nothing, had a readable fd/, and its pid was not allocated since. */
static bool vg_scan_carry(struct vg_proc_index *idx, const struct vg_scan_ent *e, bool have_last,
                          pid_t last)
{
    const struct vg_proc_index_entry *prev = vg_proc_index_prev(idx, e->pid);
    return prev && prev->ino == e->ino &&
           !(prev->flags & (VG_PROC_IX_HOLDER | VG_PROC_IX_UNREAD)) &&
           !vg_proc_index_new_pid(idx, have_last, last, e->pid);
}

/* A sorted copy of n pids (NULL when none). -ENOMEM only. */
static int vg_scan_sorted(const pid_t *pids, size_t n, pid_t **out)
{
    *out = NULL;
    if (!n || !pids)
        return 0;
    *out = malloc(n * sizeof(**out));
    if (!*out)
        return -ENOMEM;
    memcpy(*out, pids, n * sizeof(**out));
    qsort(*out, n, sizeof(**out), vg_array_cmp_pid);
    return 0;
}

/*
 * In an incremental scan, point c at the NVIDIA descriptors the index kept for a known holder
 * (same pid directory inode, not named in rewalk), so that phase one reads it by those numbers,
 * and its count from fd/'s size, instead of statx'ing its whole table again (fds.c). What that
 * sees: a node closed (the number no longer refers to one; with none left the table is walked),
 * the process gone or its pid reused (another inode). What it does not need to see: a holder
 * that opens a node is named by fanotify (rewalk), or, unnamed, makes the sample a full scan;
 * a child it forks is a new process, read in full. What waits for the next full scan, as a
 * non-holder's node gained without an open does: a node descriptor gained through dup() or
 * SCM_RIGHTS changes only the holder's counts, not what it holds. Its maps are skipped as well
 * when they held no node beyond its descriptors last time and every number is still a node
 * (vg_scan_maps_skip): a mapping needs a descriptor to be made, so a new one comes with an open
 * the watch sees, or a new process (a descriptor received through SCM_RIGHTS, mapped and
 * closed, waits for the next full scan, as above).
 */
static void vg_scan_ix_kfds(struct vg_proc_ctx *c, struct vg_proc_index *idx,
                            const struct vg_scan_ent *e, const pid_t *rewalk, size_t nrewalk)
{
    const struct vg_proc_index_entry *prev = idx ? vg_proc_index_prev(idx, e->pid) : NULL;
    if (!prev || prev->ino != e->ino || !(prev->flags & VG_PROC_IX_HOLDER) ||
        vg_scan_wanted(rewalk, nrewalk, e->pid))
        return;
    size_t n;
    const unsigned *fds = vg_proc_index_fds(idx, prev, &n);
    for (size_t i = 0; i < n && i < VG_PROC_IX_FDS_MAX; i++)
        c->ix_kfds[i] = (struct vg_proc_kfd){.pid = e->pid, .fd = fds[i]};
    c->kfds = n && n <= VG_PROC_IX_FDS_MAX ? c->ix_kfds : NULL;
    c->nkfds = c->kfds ? n : 0;
    c->skip_maps = c->kfds && !(prev->flags & VG_PROC_IX_MAPS);
}

/* A full list makes room for a process the driver lists (the likeliest holder among the
 * unread) by dropping its last entry the driver does not list, keeping pid order; false when
 * every entry is one the driver lists. */
static bool vg_scan_unread_evict(struct vg_proc_table *t)
{
    for (size_t i = t->nunread; i-- > 0;) {
        if (t->unread[i].wanted)
            continue;
        free(t->unread[i].user);
        free(t->unread[i].comm);
        memmove(&t->unread[i], &t->unread[i + 1], (t->nunread - i - 1) * sizeof(*t->unread));
        t->nunread--;
        return true;
    }
    return false;
}

/* Name one more process whose descriptors could not be read, up to VG_PROC_UNREAD_MAX (the
 * count goes on past it): its owner from the directory (pid_fd, or name under the root when
 * the directory could not be opened; root for a process that is not dumpable) and its comm
 * from stat, where procfs lets either be read. Kernel threads (by stat's PF_KTHREAD, which user
 * space cannot set) are counted apart, not named: they run no user program, and on a host
 * where vramguard is not root they would fill the list before any user's process. wanted: the
 * driver lists it (kept in the list before others). 0 or -ENOMEM. */
static int vg_scan_note_unread(struct vg_proc_ctx *c, struct vg_proc_table *t, int pid_fd,
                               pid_t pid, bool wanted)
{
    char name[16], path[32], buf[1024];
    vg_proc_pid_str(pid, name);
    int n = snprintf(path, sizeof(path), "%s/stat", name);
    size_t len;
    struct vg_proc p = {0};
    int dirfd = pid_fd >= 0 ? pid_fd : c->root_fd;
    const char *at = pid_fd >= 0 ? "stat" : path;
    bool st_ok = n > 0 && (size_t)n < sizeof(path) &&
                 vg_file_read_small(dirfd, at, buf, sizeof(buf), &len) == 0 &&
                 vg_proc_parse_stat(buf, len, &p) == 0;
    int rc = 0;
    if (st_ok && (p.flags & VG_PROC_PF_KTHREAD)) {
        t->n_unread_kthreads++;
    } else if (t->nunread < VG_PROC_UNREAD_MAX || (wanted && vg_scan_unread_evict(t))) {
        if (!t->unread && !(t->unread = calloc(VG_PROC_UNREAD_MAX, sizeof(*t->unread)))) {
            rc = -ENOMEM;
            goto out;
        }
        struct vg_proc_unread *u = &t->unread[t->nunread++];
        *u = (struct vg_proc_unread){.pid = pid, .wanted = wanted, .comm = st_ok ? p.comm : NULL};
        if (st_ok)
            p.comm = NULL; /* taken over */
        struct stat st;
        if (pid_fd >= 0 ? fstat(pid_fd, &st) == 0 : fstatat(c->root_fd, name, &st, 0) == 0) {
            u->uid_known = true;
            u->uid = st.st_uid;
            rc = vg_proc_user_name(c, st.st_uid, &u->user) == -ENOMEM ? -ENOMEM : 0;
        }
    }
out:
    vg_proc_release(&p);
    return rc;
}

/* A /proc/PID directory that could not be opened: count why, and index it as unread unless
 * the process is gone. */
static int vg_scan_open_failed(struct vg_proc_ctx *c, struct vg_proc_table *t,
                               struct vg_proc_index *idx, const struct vg_scan_ent *e, int err,
                               bool wanted)
{
    if (err == ENOENT || err == ESRCH)
        t->n_vanished++;
    else if (err == EACCES || err == EPERM) {
        t->n_denied++;
        t->n_fd_unread++;
        if (vg_scan_note_unread(c, t, -1, e->pid, wanted) != 0)
            return -ENOMEM;
    } else if (err == ENOMEM) {
        return -ENOMEM;
    }
    if (!vg_proc_err_gone(-err) && idx)
        return vg_proc_index_add(idx, e->pid, e->ino, VG_PROC_IX_UNREAD);
    return 0;
}

/* Whether the in-kernel scan finds the holders this time (see proc.h, vg_proc_scan_mode): on
 * success *kpids holds the processes it found. Only -ENOMEM, or a kernel scan asked for
 * (--scan=kernel) that cannot run, fail; otherwise t->scan_note says why /proc is read.
 * nlisted: the processes the listing holds (auto keeps small hosts on /proc). The choice is
 * made after the listing: a holder listed is in the kernel's tables by then, unless it exited;
 * an incremental scan reads less than the kernel's would walk and stays on /proc. */
static int vg_scan_choose(struct vg_proc_ctx *c, const struct vg_proc_opts *opts,
                          struct vg_proc_table *t, size_t nlisted, pid_t **kpids, size_t *nk,
                          struct vg_proc_kfd **kfds, size_t *nkfds, struct vg_err *err)
{
    *kpids = NULL;
    *nk = 0;
    *kfds = NULL;
    *nkfds = 0;
    t->kernel_scan = false;
    t->kernel_scan_maps = false;
    if (opts->scan == VG_PROC_SCAN_PROC)
        return 0;
    struct vg_err why = VG_ERR_INIT;
    int rc;
    if (opts->all)
        rc = vg_err_set(&why, -ENOTSUP, "every process is read in full");
    else if (opts->scan == VG_PROC_SCAN_AUTO && nlisted < VG_PROC_KSCAN_MIN_PROCS &&
             !(opts->kprog && vg_proc_kprog_loaded(opts->kprog)))
        rc = vg_err_set(&why, -ENOTSUP,
                        "%zu processes: below %u the /proc scan costs less than loading the "
                        "kernel's",
                        nlisted, VG_PROC_KSCAN_MIN_PROCS);
    else
        rc = vg_proc_kscan(c, opts->dev_dir, opts->kprog, kpids, nk, kfds, nkfds, &why);
    if (rc == 0) {
        t->kernel_scan = true;
        t->kernel_scan_maps = c->kscan_maps;
        return 0;
    }
    if (rc == -ENOMEM) {
        vg_err_release(&why);
        return rc;
    }
    if (opts->scan == VG_PROC_SCAN_KERNEL)
        rc = vg_err_set(err, rc, "the kernel scan cannot run: %s", vg_err_msg(&why));
    else if (!(t->scan_note = vg_proc_strndup(vg_err_msg(&why), strlen(vg_err_msg(&why)))))
        rc = -ENOMEM;
    else
        rc = 0;
    vg_err_release(&why);
    return rc;
}

/* Point c at the kernel scan's descriptors of pid (kfds sorted by pid; NULL: no kernel scan),
 * for phase one to read by number; unset when it has none or some come from a table other than
 * its leader's (phase one then walks fd/ and, if need be, task/ as the /proc scan does). */
static void vg_scan_kfds(struct vg_proc_ctx *c, const struct vg_proc_kfd *kfds, size_t n, pid_t pid)
{
    c->kfds = NULL;
    c->nkfds = 0;
    c->skip_maps = false;
    if (!kfds)
        return;
    size_t lo = vg_array_lower_bound(&pid, kfds, n, sizeof(*kfds), vg_array_cmp_pid);
    size_t end = lo;
    while (end < n && kfds[end].pid == pid)
        if (kfds[end++].other)
            return;
    if (end > lo) {
        c->kfds = &kfds[lo];
        c->nkfds = end - lo;
    }
}

/* Whether a process the kernel scan found no node descriptor in maps none either, for a kernel
 * whose scan could not walk the mappings (no iter/task_vma): its maps are read from /proc. True
 * when they show no node (or it is gone); false when they do, or cannot be read or told: then
 * it is read in full, as the /proc scan would. -ENOMEM only. */
static int vg_scan_maps_none(struct vg_proc_ctx *c, pid_t pid)
{
    char name[16];
    vg_proc_pid_str(pid, name);
    int pid_fd = openat(c->root_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pid_fd < 0)
        return !vg_proc_err_denied(-errno);
    struct vg_proc p = {.pid = pid};
    vg_proc_fds_reset(c);
    int rc = vg_proc_read_map_nodes(c, pid_fd, &p);
    close(pid_fd);
    vg_proc_fds_reset(c);
    if (rc == -ENOMEM)
        return rc;
    return (rc == 0 && p.dev_map_count == 0) || vg_proc_err_gone(rc);
}

/* A listed process that is not read: the kernel scan walked its descriptors and memory
 * mappings (or, without the mappings' iterator, its maps show none) and found no node (it
 * counts as read, holding nothing), or an incremental scan carries it over. 1 when it is not
 * read (and indexed), 0 when it must be, -ENOMEM. */
static int vg_scan_unread(struct vg_proc_ctx *c, struct vg_proc_table *t, struct vg_proc_index *idx,
                          const struct vg_scan_ent *e, const pid_t *kpids, size_t nk,
                          bool have_last, pid_t last)
{
    bool walked = t->kernel_scan && !vg_scan_wanted(kpids, nk, e->pid);
    if (walked && !t->kernel_scan_maps) {
        int rc = vg_scan_maps_none(c, e->pid);
        if (rc <= 0)
            return rc;
    }
    bool carried = !walked && t->incremental && vg_scan_carry(idx, e, have_last, last);
    if (!walked && !carried)
        return 0;
    t->n_carried += carried;
    if (idx) {
        int rc = vg_proc_index_add(idx, e->pid, e->ino, 0);
        if (rc)
            return rc;
    }
    return 1;
}

/* Read one listed process into the table (kept, skipped or vanished) and index it. Returns 0
 * or a negative errno. */
static int vg_scan_read_ent(struct vg_proc_ctx *c, int root_fd, const struct vg_scan_ent *e,
                            bool wanted, struct vg_proc_table *t, size_t *cap,
                            struct vg_proc_index *idx)
{
    char name[16];
    vg_proc_pid_str(e->pid, name);
    int pid_fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pid_fd < 0)
        return vg_scan_open_failed(c, t, idx, e, errno, wanted);
    if (VG_ARRAY_GROW(t->procs, *cap, t->n + 1)) {
        close(pid_fd);
        return -ENOMEM;
    }
    bool denied, fds_read, maps_read;
    struct vg_proc *p = &t->procs[t->n];
    int rc = vg_scan_one(c, pid_fd, e->pid, wanted, p, &denied, &fds_read, &maps_read);
    if (rc >= 0 && rc != VG_ONE_VANISHED && !fds_read &&
        vg_scan_note_unread(c, t, pid_fd, e->pid, wanted) != 0) {
        vg_proc_release(p); /* filled when kept, empty otherwise */
        rc = -ENOMEM;
    }
    close(pid_fd);
    if (rc < 0)
        return rc;
    t->n_denied += denied;
    if (rc == VG_ONE_VANISHED) {
        t->n_vanished++;
        return 0;
    }
    t->n_fd_unread += !fds_read;
    t->n_fd_by_kernel += rc == VG_ONE_KEEP && p->fds_by_kernel;
    t->n_tables_unchecked += fds_read && c->tables_unchecked;
    /* phase one's outcome: a skipped process was read too, and held nothing */
    unsigned flags = !fds_read                                   ? VG_PROC_IX_UNREAD
                     : rc == VG_ONE_KEEP && vg_proc_is_holder(p) ? VG_PROC_IX_HOLDER
                                                                 : 0;
    /* maps that held nothing beyond the descriptors may be skipped next time (see ix_kfds) */
    if ((flags & VG_PROC_IX_HOLDER) && (c->map_extra || (!maps_read && !c->skip_maps)))
        flags |= VG_PROC_IX_MAPS;
    if (rc == VG_ONE_KEEP)
        t->n++;
    if (!idx)
        return 0;
    if ((rc = vg_proc_index_add(idx, e->pid, e->ino, flags)) != 0)
        return rc;
    /* the holder's node descriptors, by which the next incremental scan reads it */
    if ((flags & VG_PROC_IX_HOLDER) && !c->held_over)
        return vg_proc_index_add_fds(idx, c->held_fds, c->nheld_fds);
    return 0;
}

/* The census of session kin over the listing (kin.c). */
static int vg_scan_kin(struct vg_proc_ctx *c, const struct vg_scan_ent *ents, size_t n,
                       struct vg_proc_table *t)
{
    pid_t *pids = n ? malloc(n * sizeof(*pids)) : NULL;
    if (n && !pids)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        pids[i] = ents[i].pid;
    int rc = vg_proc_read_kin(c, pids, n, t);
    free(pids);
    return rc;
}

/* A scan read to its end: what the cache and the index keep of it becomes theirs. */
static void vg_scan_commit(struct vg_proc_ctx *c, struct vg_proc_index *idx, bool have_last,
                           pid_t last_pid)
{
    if (c->cache)
        vg_proc_cache_end(c->cache);
    if (idx)
        vg_proc_index_commit(idx, have_last, last_pid);
}

int vg_proc_scan(const struct vg_proc_opts *opts, struct vg_proc_table *t, struct vg_err *err)
{
    static const struct vg_proc_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    const char *root = opts->proc_root && *opts->proc_root ? opts->proc_root : "/proc";
    int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        int e = errno;
        if (opts->index)
            vg_proc_index_abort(opts->index);
        return vg_err_set(err, -e, "cannot open '%s': %s", root, strerror(e));
    }

    struct vg_proc_ctx c;
    struct vg_scan_ent *ents = NULL;
    pid_t *want = NULL, *rewalk = NULL, *kpids = NULL;
    struct vg_proc_kfd *kfds = NULL;
    size_t nents = 0, cap = 0, nk = 0, nkfds = 0;
    struct vg_proc_index *idx = opts->index;
    int rc = vg_proc_ctx_init(&c, root_fd, opts->dev_dir);
    if ((c.cache = opts->cache) != NULL)
        vg_proc_cache_begin(c.cache);
    if (rc || (rc = vg_scan_sorted(opts->want, opts->nwant, &want)) != 0 ||
        (rc = vg_scan_sorted(opts->rewalk, opts->nrewalk, &rewalk)) != 0)
        goto out;
    t->self_nspid_depth = vg_scan_self_depth(&c);
    t->pidns = vg_proc_pidns_read(root_fd, t->self_nspid_depth);
    t->access = vg_proc_access_read(&c);
    /* The last pid is read before the listing: a process started after this read is either
     * above the mark (so new next time too) or missing from the last index, never carried. */
    pid_t last_pid = 0;
    bool have_last = idx && vg_scan_last_pid(&c, &last_pid);
    t->incremental = idx && opts->incremental && vg_proc_index_primed(idx);
    if (idx)
        vg_proc_index_begin(idx);
    if ((rc = vg_scan_list(root_fd, &ents, &nents)) < 0) {
        if (rc != -ENOMEM)
            vg_err_set(err, rc, "cannot list '%s': %s", root, strerror(-rc));
        goto out;
    }
    /* After the listing (a holder listed is in the kernel's tables now); incremental: /proc */
    if (!t->incremental &&
        (rc = vg_scan_choose(&c, opts, t, nents, &kpids, &nk, &kfds, &nkfds, err)) != 0)
        goto out;

    for (size_t i = 0; i < nents; i++) {
        const struct vg_scan_ent *e = &ents[i];
        bool wanted = opts->all || vg_scan_wanted(want, opts->nwant, e->pid);
        t->n_scanned++;
        if (!wanted && (rc = vg_scan_unread(&c, t, idx, e, kpids, nk, have_last, last_pid)) != 0) {
            if (rc < 0)
                goto out;
            rc = 0;
            continue;
        }
        vg_scan_kfds(&c, t->kernel_scan ? kfds : NULL, nkfds, e->pid);
        vg_scan_ix_kfds(&c, t->incremental ? idx : NULL, e, rewalk, opts->nrewalk);
        if ((rc = vg_scan_read_ent(&c, root_fd, e, wanted, t, &cap, idx)) != 0)
            goto out;
    }
    if ((rc = vg_scan_kin(&c, ents, nents, t)) != 0)
        goto out;
    vg_scan_commit(&c, idx, have_last, last_pid);

out:
    if (rc == -ENOMEM)
        vg_err_set(err, rc, "out of memory while reading '%s'", root);
    if (rc < 0) {
        vg_proc_table_release(t);
        if (idx)
            vg_proc_index_abort(idx);
    }
    free(ents);
    free(want);
    free(rewalk);
    free(kpids);
    free(kfds);
    vg_proc_ctx_release(&c);
    close(root_fd);
    return rc;
}

int vg_proc_read(int proc_root_fd, pid_t pid, const char *dev_dir, struct vg_proc *p,
                 struct vg_err *err)
{
    memset(p, 0, sizeof(*p));
    if (pid <= 0)
        return vg_err_set(err, -ENOENT, "no process %d", (int)pid);
    struct vg_proc_ctx c;
    int rc = vg_proc_ctx_init(&c, proc_root_fd, dev_dir);
    if (rc) {
        vg_proc_ctx_release(&c);
        return vg_err_set(err, rc, "out of memory reading process %d", (int)pid);
    }
    char name[16];
    vg_proc_pid_str(pid, name);
    int pid_fd = openat(proc_root_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pid_fd < 0) {
        int e = errno;
        vg_proc_ctx_release(&c);
        if (e == ENOENT || e == ESRCH)
            return vg_err_set(err, -e, "no process %d", (int)pid);
        return vg_err_set(err, -e, "cannot read process %d: %s", (int)pid, strerror(e));
    }
    bool denied, fds_read, maps_read;
    rc = vg_scan_one(&c, pid_fd, pid, true, p, &denied, &fds_read, &maps_read);
    close(pid_fd);
    vg_proc_ctx_release(&c);
    if (rc == -ENOMEM)
        return vg_err_set(err, rc, "out of memory reading process %d", (int)pid);
    if (rc == VG_ONE_VANISHED)
        return vg_err_set(err, -ESRCH, "process %d exited while being read", (int)pid);
    return 0;
}
