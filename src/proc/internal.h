/*
 * Private to src/proc/: the scan context shared by the per-file readers, and the helpers the
 * files of this module call in one another. Nothing here is part of the module's interface.
 *
 * A struct vg_proc_ctx lives for one scan (or one vg_proc_read): it borrows the procfs root fd,
 * owns the device-node set descriptors are matched against (built once, at init) and reusable
 * buffers (directory entries, file contents, the nodes of the process being read) so that
 * reading a process that holds nothing allocates nothing, plus the uid -> name cache.
 */
#ifndef VG_PROC_INTERNAL_H
#define VG_PROC_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/proc.h"
#include "util/buf.h"

/* Bounds on what is read per file; a longer file leaves its fields unknown (-E2BIG). */
#define VG_PROC_ENVIRON_MAX ((size_t)16 << 20)
#define VG_PROC_CGROUP_MAX ((size_t)1 << 20)
#define VG_PROC_MAPS_MAX ((size_t)256 << 20)
#define VG_PROC_STATUS_MAX ((size_t)1 << 20)
#define VG_PROC_STAT_MAX ((size_t)64 << 10)

struct vg_proc_uname {
    uid_t uid;
    char *name;
};

/* One slot of the per-process set of distinct nodes (fds.c): valid when gen is the set's. */
struct vg_proc_node_slot {
    uint64_t node;
    uint32_t gen;
};

/* A descriptor known to hold an NVIDIA node: from the kernel scan (kscan.c), or from the index
 * of the last scan (a known holder, re-read by an incremental scan). */
struct vg_proc_kfd {
    pid_t pid; /* first: searched with vg_array_cmp_pid */
    unsigned fd;
    bool other;          /* from a table that is not its thread group leader's */
    bool path;           /* an O_PATH descriptor (the kernel scan's VG_KREC_PATH) */
    bool id_known;       /* id is the file the kernel saw (the kernel scan's; not the index's) */
    struct vg_dev_id id; /* with id_known: for when /proc refuses the descriptor */
};

/* The NVIDIA descriptors of a holder the index keeps, for an incremental scan to read it by
 * number; a holder with more is walked in full every time. */
#define VG_PROC_IX_FDS_MAX 16

/* Anonymous-inode descriptors of one process noted for the io_uring check. */
#define VG_PROC_ANON_MAX 64

struct vg_proc_ctx {
    int root_fd;                   /* borrowed */
    const char *dev_dir;           /* borrowed: the nodes' directory ("/dev") */
    struct vg_proc_devset *devset; /* owned: the NVIDIA nodes of this scan */
    /* The root is a real procfs (not a test tree or a copy), whose directory sizes and link
     * counts mean something: fd/'s size is its descriptor count (since Linux 6.2), task/'s
     * link count is 2 + threads. fd_count_ok starts as procfs and is cleared when a process
     * shows that this kernel does not count (fds.c). */
    bool procfs;
    bool fd_count_ok;
    /* kcmp(2) can compare the view's tasks: a procfs of our own PID namespace (it numbers
     * tasks as kcmp does) on a kernel that has it. tables_unchecked: the process being read has
     * threads whose descriptor tables could not be compared with its leader's (fds.c). */
    bool kcmp_ok;
    bool tables_unchecked;
    bool wanted; /* the driver lists the process being read (vg_proc_opts.want) */
    /* Descriptors of the process being read that are anonymous inodes (no file type: epoll,
     * eventfd, io_uring...), the first VG_PROC_ANON_MAX of them by number (anon_over: more),
     * for the io_uring check (fds.c). */
    unsigned anon_fds[VG_PROC_ANON_MAX];
    size_t nanon;
    bool anon_over;

    char *dents; /* getdents64 buffer for fd/ and task/ */
    size_t dents_cap;
    struct vg_buf file; /* contents of the file being parsed */

    /* The NVIDIA nodes of the process whose fd/ is being walked (and then its maps read), reset
     * per process: GPU minors as bits (by descriptor, by mapping), the distinct nodes as an
     * open-addressing set (cleared by bumping gen), the paths of the first VG_PROC_NODES_MAX of
     * them (owned until vg_proc_fds_commit hands them to the process) and how many more there
     * were. */
    uint64_t gpu_bits[(VG_DEV_GPU_MINOR_MAX + 64) / 64];
    uint64_t map_bits[(VG_DEV_GPU_MINOR_MAX + 64) / 64];  /* the GPU minors held by mapping */
    uint64_t path_bits[(VG_DEV_GPU_MINOR_MAX + 64) / 64]; /* by O_PATH descriptor */
    struct vg_proc_node_slot *slots;
    size_t slots_cap, slots_n;
    uint32_t slots_gen;
    char *paths[VG_PROC_NODES_MAX];
    size_t npaths;
    size_t nodes_more;

    struct vg_proc_uname *unames; /* uid -> name cache for this scan */
    size_t nunames, unames_cap;

    bool denied; /* some file of the current process was denied */

    /* The kernel scan's word on the process being read (scan.c sets it, NULL otherwise): the
     * numbers of its NVIDIA descriptors in its leader's table, which phase one then reads by
     * number instead of statx'ing every descriptor (fds.c). */
    const struct vg_proc_kfd *kfds;
    size_t nkfds;
    struct vg_proc_kfd ix_kfds[VG_PROC_IX_FDS_MAX]; /* kfds from the index (scan.c) */

    /* The numbers of the NVIDIA descriptors phase one matched in the leader's fd/ of the
     * process being read, for the index; held_over: more than VG_PROC_IX_FDS_MAX, a name that
     * is no number, or a table read through task/, so the index keeps none. */
    unsigned held_fds[VG_PROC_IX_FDS_MAX];
    size_t nheld_fds;
    bool held_over;
    /* Of the nodes the maps showed, those no descriptor held (fds.c); and whether this read may
     * skip the maps: a known holder read by the index's numbers whose maps held nothing beyond
     * its descriptors last time (scan.c). */
    size_t map_extra;
    bool skip_maps;

    struct vg_proc_cache *cache; /* borrowed, optional: stable details between scans */

    /* Set by the kernel scan (kscan.c): it walked the memory mappings too (iter/task_vma). When
     * the kernel lacks that iterator, false: the processes it names no node of have their maps
     * read from /proc instead (scan.c). */
    bool kscan_maps;
};

/* 0 or -ENOMEM (c must still be released). dev_dir as in vg_proc_opts. */
int vg_proc_ctx_init(struct vg_proc_ctx *c, int root_fd, const char *dev_dir);
void vg_proc_ctx_release(struct vg_proc_ctx *c);

/* Iterate the entries of a directory fd with getdents64 into c's buffer (no allocation).
 * next returns 1 with *name set, 0 at the end, or a negative errno. "." and ".." are skipped. */
struct vg_proc_dirit {
    int fd;
    char *buf;
    size_t cap, pos, end;
    uint64_t ino; /* d_ino of the entry next returned last */
};
void vg_proc_dirit_init(struct vg_proc_dirit *it, int fd, char *buf, size_t cap);
int vg_proc_dirit_next(struct vg_proc_dirit *it, const char **name);

/* A directory entry name that is a pid: all digits, no leading zero, fits pid_t. */
bool vg_proc_name_pid(const char *name, pid_t *pid);
/* Decimal text of a non-negative pid into out (at least 16 bytes). */
void vg_proc_pid_str(pid_t pid, char out[16]);

/* After phase two: the census of session kin (proc.h, struct vg_proc_kin) over the listed
 * pids (ascending), into t->kin. 0 or -ENOMEM. */
int vg_proc_read_kin(struct vg_proc_ctx *c, const pid_t *pids, size_t npids,
                     struct vg_proc_table *t);

/* Errors from reading a per-process file, by what they mean to the scan. */
static inline bool vg_proc_err_gone(int rc)
{
    return rc == -ENOENT || rc == -ESRCH;
}
static inline bool vg_proc_err_denied(int rc)
{
    return rc == -EACCES || rc == -EPERM;
}

/* Whether the process behind a pid directory fd is gone. The fd is pinned to the process it
 * was opened for: once that process is reaped, every lookup in it fails with ENOENT or ESRCH.
 * Used after a missing file, to tell a process that exited from a procfs that lacks the file. */
bool vg_proc_gone(int pid_fd);

/* Read dirfd/name into c->file, at most max bytes. */
int vg_proc_ctx_read(struct vg_proc_ctx *c, int dirfd, const char *name, size_t max);

/* Phase one: walk pid_fd's fd/ directory, counting descriptors and NVIDIA nodes into p and the
 * GPU minors and node paths into c. 0, -ENOENT/-ESRCH (gone), -EACCES/-EPERM, -ENOMEM or
 * another errno. */
int vg_proc_read_fds(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p);
/* Phase one's other half, after vg_proc_read_fds: the NVIDIA nodes pid_fd's maps show mapped,
 * noted in c and counted in p (dev_map_count) as vg_proc_map_held says. Leaves the maps text in
 * c->file (empty after a failure), for the libraries. 0 (a file a test tree lacks counts as
 * nothing mapped), -ENOENT/-ESRCH (gone), -EACCES/-EPERM, -EINVAL (a line that cannot be
 * told), -E2BIG, -ENOMEM. */
int vg_proc_read_map_nodes(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p);
/* One mapping of node m by the process being read (path: what its maps line names): counted,
 * its GPU minor noted as held by mapping, and the node added to the distinct nodes and their
 * paths as a descriptor's is. 0 or -ENOMEM. */
int vg_proc_map_held(struct vg_proc_ctx *c, const struct vg_dev_match *m, const char *path,
                     size_t len, struct vg_proc *p);
/* Whether what vg_proc_read_fds and vg_proc_read_map_nodes found makes p a holder of an NVIDIA
 * node. */
bool vg_proc_is_holder(const struct vg_proc *p);
/* Move what the last vg_proc_read_fds collected in c into p: the GPU minors (ascending), the
 * node paths and the count of nodes beyond them. 0 or -ENOMEM. */
int vg_proc_fds_commit(struct vg_proc_ctx *c, struct vg_proc *p);
/* Forget (and free) what the last vg_proc_read_fds collected in c. */
void vg_proc_fds_reset(struct vg_proc_ctx *c);

/* Phase two: everything but fds. 0, -ENOENT (the process is gone: skip it) or -ENOMEM. Denied
 * files set c->denied and leave their fields unknown. */
int vg_proc_read_details(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p);

/* exe (exe.c): the link, the file it names and the path to it, each under its known bit; what
 * is denied sets *denied. 0, or -ENOMEM: nothing else fails, an unread fact stays unknown. */
int vg_proc_read_exe(int pid_fd, struct vg_proc *p, bool *denied);

/* task/: thread count and states. Same return convention as one file read. */
int vg_proc_read_threads(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p);

/* The state letter of a stat line (process or thread), found after the last ')'. */
int vg_proc_parse_stat_state(const char *buf, size_t len, char *state);

/* The user name for uid, cached in c; numeric text when the uid has no name. *out is a new
 * string. 0 or -ENOMEM. */
int vg_proc_user_name(struct vg_proc_ctx *c, uid_t uid, char **out);

/* The cross-scan cache (cache.c). begin/end bracket one scan; end drops the entries the scan
 * did not use. fill: on a hit for p's (pid, start time, comm), with stat and status already
 * read, copy the stable fields into p and return 1 (*denied: some of those files were denied;
 * *maps_stale: p's NVIDIA descriptors differ from when the maps were read, read them again);
 * 0 on a miss; -ENOMEM. store: remember p's stable fields (replacing an entry for its pid). */
void vg_proc_cache_begin(struct vg_proc_cache *cache);
void vg_proc_cache_end(struct vg_proc_cache *cache);
int vg_proc_cache_fill(struct vg_proc_cache *cache, struct vg_proc *p, bool *denied,
                       bool *maps_stale);
int vg_proc_cache_store(struct vg_proc_cache *cache, const struct vg_proc *p, bool denied);

/* The index behind incremental scans (index.c). begin starts the next index; prev finds pid in
 * the last completed scan (pids must be asked in ascending order between begin and commit);
 * new_pid says whether pid may have been allocated since that scan, given the pid allocated
 * last now (have_last false: unknown, say no); add appends the next index's record (ascending
 * pids); commit makes it current and primed, with the last pid read before its listing; abort
 * forgets everything (the next scan is full). */
enum {
    VG_PROC_IX_HOLDER = 1u << 0, /* held an NVIDIA node */
    VG_PROC_IX_UNREAD = 1u << 1, /* fd/ could not be read (denied, error): holder unknown */
    VG_PROC_IX_MAPS = 1u << 2,   /* a holder whose maps held a node its descriptors did not, or
                                  * were not read: an incremental scan reads them again */
};
struct vg_proc_index_entry {
    pid_t pid;
    unsigned flags;         /* VG_PROC_IX_* */
    uint64_t ino;           /* the pid directory's inode number, as the listing gave it */
    uint32_t fds_off, nfds; /* a holder's NVIDIA descriptors, in the index's pool (see fds) */
};
void vg_proc_index_begin(struct vg_proc_index *idx);
const struct vg_proc_index_entry *vg_proc_index_prev(struct vg_proc_index *idx, pid_t pid);
bool vg_proc_index_new_pid(const struct vg_proc_index *idx, bool have_last, pid_t last, pid_t pid);
int vg_proc_index_add(struct vg_proc_index *idx, pid_t pid, uint64_t ino, unsigned flags);
/* The numbers of the NVIDIA descriptors of the process add recorded last (a holder read from
 * its leader's fd/; at most VG_PROC_IX_FDS_MAX); fds gives them back from an entry of the last
 * completed scan (borrowed until the next commit). 0 or -ENOMEM. */
int vg_proc_index_add_fds(struct vg_proc_index *idx, const unsigned *fds, size_t n);
const unsigned *vg_proc_index_fds(const struct vg_proc_index *idx,
                                  const struct vg_proc_index_entry *e, size_t *n);
void vg_proc_index_commit(struct vg_proc_index *idx, bool have_last, pid_t last);
void vg_proc_index_abort(struct vg_proc_index *idx);

/* What may keep this process from reading others under the procfs root (access.c):
 * VG_PROC_ACC_* bits, or VG_PROC_ACC_UNKNOWN. */
unsigned vg_proc_access_read(struct vg_proc_ctx *c);

/* The in-kernel holder scan (kscan.c) over c's procfs root and device set: the processes, in
 * the view's numbering, distinct and ascending (*pids owned by the caller), whose descriptor
 * tables hold a node c->devset matches, and those descriptors (*kfds, owned by the caller),
 * sorted by pid and number. 0, -ENOMEM, or another negative errno with why set to the reason
 * it cannot run here (no libbpf, not permitted, no BTF, a view it does not cover...). keep: the
 * program kept loaded between scans (see vg_proc_kprog), or NULL to load it for this scan only. */
int vg_proc_kscan(struct vg_proc_ctx *c, const char *dev_dir, struct vg_proc_kprog *keep,
                  pid_t **pids, size_t *npids, struct vg_proc_kfd **kfds, size_t *nkfds,
                  struct vg_err *why);

/* The path under DIR of the set's node i (i < vg_proc_devset_size), with its filesystem and
 * inode in id (dev_major, dev_minor, ino; the rest zero). Borrowed. */
const char *vg_proc_devset_node(const struct vg_proc_devset *s, size_t i, struct vg_dev_id *id);

/* A copy of n bytes as a NUL-terminated string, or NULL when out of memory. */
char *vg_proc_strndup(const char *s, size_t n);

#endif
