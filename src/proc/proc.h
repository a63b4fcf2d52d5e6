/*
 * The kernel's view of processes, read from a procfs root (default /proc) through directory fds.
 *
 * Scanning is two-phase because a busy host has thousands of processes and only a handful hold
 * a GPU: phase one stats, for every process, each descriptor in its fd directory, to find the
 * NVIDIA device nodes held open, and reads its maps for the nodes held by memory mapping alone
 * (a worker that closed the descriptors it inherited keeps CUDA's mappings); phase two reads the
 * details (stat, status, cmdline, the allow-listed environment variables, cgroup, mapped libraries,
 * threads) only for the processes that hold a device node or that the caller names (the PIDs NVML
 * reported).
 *
 * A descriptor is matched by what it refers to, never by its path (see vg_proc_devset below):
 * a character device of an NVIDIA major by its device number, whatever path or mount namespace
 * it was opened through; any other node of --dev DIR (the stand-ins of tests and the demo) by
 * its inode. A mapping, which names only its file's filesystem and inode, matches DIR's nodes
 * by inode. A file that merely carries a node's name is not a node. Paths are display only.
 *
 * Ownership: struct vg_proc_table owns all its vg_proc entries and everything they point to;
 * release it with vg_proc_table_release(). Strings in vg_proc are NULL when unknown.
 *
 * Failure model: a process that vanishes mid-scan is skipped (counted in n_vanished); a file
 * that may not be read (another user's environ when not root) leaves those fields unknown, its
 * known bit clear, and is counted in n_denied. Only failure to open the procfs root itself, or
 * running out of memory, fails the scan.
 */
#ifndef VG_PROC_PROC_H
#define VG_PROC_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* The environment variables vramguard reasons about. Nothing else from environ is kept. */
enum vg_env_var {
    VG_ENV_CUDA_VISIBLE_DEVICES,
    VG_ENV_CUDA_DEVICE_ORDER,
    VG_ENV_NVIDIA_VISIBLE_DEVICES,
    VG_ENV_LOCAL_RANK,
    VG_ENV_RANK,
    VG_ENV_WORLD_SIZE,
    VG_ENV_LOCAL_WORLD_SIZE,
    VG_ENV_TORCHELASTIC_RUN_ID,
    VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK,
    VG_ENV_SLURM_LOCALID,
    VG_ENV_SLURM_JOB_ID,
    VG_ENV_SLURM_STEP_ID,
    VG_ENV_MASTER_ADDR,
    VG_ENV_MASTER_PORT,
    VG_ENV_PMIX_NAMESPACE,
    VG_ENV_TF_FORCE_GPU_ALLOW_GROWTH,
    VG_ENV_XLA_PYTHON_CLIENT_PREALLOCATE,
    VG_ENV_XLA_PYTHON_CLIENT_MEM_FRACTION,
    VG_ENV_PYTORCH_CUDA_ALLOC_CONF,
    VG_ENV_CUDA_MODULE_LOADING,
    VG_ENV_HOSTNAME,
    VG_ENV_COUNT
};

/* Name of an allow-listed variable ("CUDA_VISIBLE_DEVICES"). */
const char *vg_env_name(enum vg_env_var v);

/* Libraries recognised in /proc/PID/maps, as a bit set. */
enum {
    VG_LIB_CUDA = 1u << 0,       /* libcuda.so.1: the driver API, i.e. a CUDA context is possible */
    VG_LIB_CUDART = 1u << 1,     /* libcudart.so* */
    VG_LIB_NCCL = 1u << 2,       /* libnccl.so.2 */
    VG_LIB_TORCH_CUDA = 1u << 3, /* libtorch_cuda.so */
    VG_LIB_TENSORFLOW = 1u << 4, /* libtensorflow_framework.so.2 / _pywrap_tensorflow_internal.so */
    VG_LIB_JAX = 1u << 5,        /* xla_extension.so, libjax_common.so, jaxlib cuda plugins */
    VG_LIB_NVML = 1u << 6,       /* libnvidia-ml.so.1 */
};

/* Names of the VG_LIB_* bits, for output ("cuda", "cudart", "nccl", "torch", "tensorflow",
 * "jax", "nvml"); bit is a single VG_LIB_* value. */
const char *vg_lib_name(unsigned bit);

/* How a node is held (vg_proc.dev_minors_by): by a descriptor, by a memory mapping, or both. */
enum { VG_PROC_BY_FD = 1u << 0, VG_PROC_BY_MAP = 1u << 1 };

/* Fields that were read; a clear bit means unknown (not read, vanished, or denied). */
enum {
    VG_PROC_K_STAT = 1u << 0,   /* ppid, pgid, sid, state, start time, comm */
    VG_PROC_K_STATUS = 1u << 1, /* uid, nspid */
    VG_PROC_K_CMDLINE = 1u << 2,
    VG_PROC_K_ENV = 1u << 3,
    VG_PROC_K_CGROUP = 1u << 4,
    VG_PROC_K_MAPS = 1u << 5,
    VG_PROC_K_FDS = 1u << 6,
    VG_PROC_K_THREADS = 1u << 7,
    VG_PROC_K_USER = 1u << 8,      /* user name resolved from uid */
    VG_PROC_K_SIGIGN = 1u << 9,    /* sig_ignored ("SigIgn:" of status) */
    VG_PROC_K_EXE = 1u << 10,      /* exe, exe_deleted: the exe link was read */
    VG_PROC_K_EXE_STAT = 1u << 11, /* exe_uid, exe_mode: the file the process runs was stat'ed */
    VG_PROC_K_EXE_PATH = 1u << 12, /* exe_path_same, exe_dirs_trusted: the path was walked */
};

/* PF_KTHREAD from include/linux/sched.h: set in vg_proc.flags on every kernel thread. */
#define VG_PROC_PF_KTHREAD 0x00200000u

struct vg_proc {
    pid_t pid;      /* first: searched with vg_array_cmp_pid */
    unsigned known; /* VG_PROC_K_* */

    /* stat */
    char *comm; /* as the kernel has it (may contain spaces, ')' and newlines) */
    char state; /* 'R', 'S', 'D', 'Z', 'T', ... */
    pid_t ppid, pgid, sid;
    uint64_t start_ticks; /* start time since boot, in clock ticks: with pid, the identity */
    unsigned flags;       /* PF_* from stat; kernel threads have PF_KTHREAD */
    int tty_nr;           /* controlling terminal (0: none, as for a daemon) */
    uint64_t cpu_ticks;   /* utime + stime, in clock ticks, when stat was read */
    bool rss_known;       /* stat had its rss field (24) */
    uint64_t rss_pages;   /* resident set size in pages (sysconf(_SC_PAGESIZE)), as statm's */

    /* status */
    uid_t uid;            /* real uid */
    uint64_t sig_ignored; /* signals set to SIG_IGN, bit N-1 for signal N (VG_PROC_K_SIGIGN):
                           * SIGHUP ignored is how nohup detaches a job from its terminal */
    pid_t *nspid;         /* NSpid chain, outermost first (nspid[0] == pid); NULL with
                           * nnspid 0 when status has no NSpid line (Linux < 4.1) */
    size_t nnspid;
    char *user; /* user name, or the uid as text when it has no name */

    /* cmdline: arguments joined by single spaces; NULL when unreadable. Empty for kernel
     * threads and zombies. */
    char *cmdline;

    /* environ: only the allow-listed variables; env[v] NULL when not set (or not known). */
    char *env[VG_ENV_COUNT];

    /* exe: what the process runs, which it cannot choose after exec as it chooses its name,
     * argv and environment (proc/exe.c). Read fresh at every scan, never cached. */
    char *exe;             /* the link's target, as the process's root names it, with the
                            * kernel's " (deleted)" cut off (VG_PROC_K_EXE) */
    bool exe_deleted;      /* the link said " (deleted)": removed or replaced since exec */
    uid_t exe_uid;         /* the file it runs, stat'ed through the link (VG_PROC_K_EXE_STAT): */
    unsigned exe_mode;     /* its owner and st_mode */
    bool exe_path_same;    /* walked from the process's root (VG_PROC_K_EXE_PATH): the path
                            * still names that very file (same device and inode) */
    bool exe_dirs_trusted; /* and every directory on it, the root included, is owned by root
                            * and writable by neither group nor others */

    /* cgroup */
    char *cgroup;       /* the path naming the container or pod (v2 line first), else the
                         * v2 path, else the first v1 path */
    char *container_id; /* 64 hex digits for docker/containerd/CRI-O/podman; NULL if none */
    char *pod_uid;      /* Kubernetes pod UID with dashes; NULL if none */

    /* maps */
    unsigned libs; /* VG_LIB_* */

    /* fds (VG_PROC_K_FDS): NVIDIA device nodes held, by an open descriptor or a memory
     * mapping (the kernel keeps a mapped file open; CUDA maps its nodes, and a forked worker
     * keeps the mappings after closing the descriptors) */
    unsigned *dev_minors; /* distinct GPU minors held (the N of /dev/nvidiaN), ascending; at
                           * most VG_DEV_GPU_MINOR_MAX + 1 of them */
    size_t ndev_minors;
    unsigned char *dev_minors_by; /* for each of dev_minors, how it is held: VG_PROC_BY_* */
    unsigned dev_fd_count;        /* descriptors referring to any NVIDIA node */
    unsigned dev_map_count;       /* memory mappings of any NVIDIA node (maps) */
    bool has_ctl;                 /* nvidiactl, by descriptor or mapping */
    bool has_uvm;                 /* nvidia-uvm or nvidia-uvm-tools, likewise */
    /* O_PATH descriptors of NVIDIA nodes: a path, not an open file (no open reached the
     * driver, so they hold no context and no memory, and any user may take one of a node it
     * cannot open). Not in dev_minors, dev_fd_count or has_ctl/has_uvm: no holder by them,
     * reported apart ("path only"). path_minors: GPU minors held only so, ascending. */
    unsigned dev_path_count;
    unsigned *path_minors;
    size_t npath_minors;
    unsigned fd_total;  /* descriptors seen in fd/ */
    bool fds_by_kernel; /* /proc refused fd/ and the kernel scan's records gave the
                         * NVIDIA descriptors instead: fd_total counts only those,
                         * paths are NULL */
    /* Display only: the distinct NVIDIA nodes held, in the order first seen, each as the path
     * one of its descriptors names (readlink, as the process sees it: another mount namespace
     * shows its own path; NULL when the descriptor changed while being read). At most
     * VG_PROC_NODES_MAX are listed; dev_nodes_more counts the distinct nodes beyond them. */
    char **dev_paths;
    size_t ndev_paths;
    size_t dev_nodes_more;

    /* threads (task/) */
    unsigned nthreads;
    unsigned threads_d;      /* threads in D state */
    unsigned threads_live;   /* threads not in Z/X state */
    unsigned threads_status; /* "Threads:" of status: threads of the group not yet exited
                              * (0: not read) */

    /* liveness of the job it came from */
    bool parent_alive;   /* ppid's /proc entry exists (ppid 0 counts as alive) */
    bool parent_known;   /* parent_sid, parent_pgid and parent_ns_init were read */
    pid_t parent_sid;    /* the parent's session: another session than the process's own
                          * means it was re-parented to a subreaper (systemd --user) */
    pid_t parent_pgid;   /* the parent's process group: a worker shares its parent's group,
                          * so another group (with the process's own group leader gone)
                          * means a subreaper in the same session adopted it */
    bool parent_ns_init; /* the parent is pid 1 of its PID namespace: init, or a
                          * container's init (tini, dumb-init) that adopted it */
    bool sid_alive;      /* session leader still runs: its entry exists and it is not a
                          * zombie (one that exited and was not reaped has ended its job) */
    bool pgid_alive;     /* process group leader still runs, in the same sense */
    bool sid_zombie;     /* !sid_alive because the leader is a zombie, not because it is gone */
    bool pgid_zombie;

    /* Whether it works: CPU time used over a short window after the scan, measured by the
     * snapshot for the processes whose job may have ended (model/snapshot.h). */
    bool activity_known;
    unsigned activity_ms;     /* the window's length */
    uint64_t activity_cpu_ms; /* CPU time (user + system) used in it */
};

/* What may keep vramguard from reading other processes, as seen at the scan: the causes the
 * "could not read" hint names. */
enum {
    VG_PROC_ACC_NOT_ROOT = 1u << 0,    /* the effective uid is not 0 */
    VG_PROC_ACC_NO_PTRACE = 1u << 1,   /* CAP_SYS_PTRACE is not effective: other users'
                                        * descriptors and environments are denied, even to root */
    VG_PROC_ACC_NO_DAC_READ = 1u << 2, /* CAP_DAC_READ_SEARCH is not effective */
    VG_PROC_ACC_HIDEPID = 1u << 3,     /* the procfs is mounted with hidepid: other users'
                                        * processes are unreadable or not even listed */
    VG_PROC_ACC_USERNS = 1u << 4,      /* a user namespace that does not map every uid */
    VG_PROC_ACC_UNKNOWN = 1u << 5,     /* our own status could not be read */
};

/* Whether the procfs read is the initial PID namespace's, the one the driver numbers processes
 * in (pidns.c): unknown when neither its PID 1's nor our own namespace could tell. */
enum vg_proc_pidns {
    VG_PROC_PIDNS_UNKNOWN = 0,
    VG_PROC_PIDNS_INITIAL, /* the driver's PIDs are this procfs's */
    VG_PROC_PIDNS_NESTED,  /* a PID namespace of its own: the driver's PIDs are not these */
};

/* PF_KTHREAD in stat's flags: a kernel thread (user space cannot set it). */
#define VG_PROC_PF_KTHREAD 0x00200000u

/* One process whose descriptors could not be read, for output to name (uid and comm as far as
 * they could be read: the directory's owner, the comm file). */
struct vg_proc_unread {
    pid_t pid;
    bool wanted; /* the driver lists it (vg_proc_opts.want): named before any other */
    bool uid_known;
    uid_t uid;
    char *user; /* owned: its name, or the uid as text; NULL when the uid is unknown */
    char *comm; /* owned; NULL when unreadable */
};

/* At most this many unread processes are named; n_fd_unread counts them all. */
#define VG_PROC_UNREAD_MAX 32

/* A live process that holds nothing, of the session of a holder whose job may have ended
 * (vg_proc_read_kin): who else is left in that session. */
struct vg_proc_kin {
    pid_t pid, ppid, pgid, sid;
    uint64_t start_ticks;
    char state;
    char *cmdline; /* owned; NULL when unreadable */
};

struct vg_proc_table {
    struct vg_proc *procs; /* sorted by pid */
    size_t n;
    size_t n_scanned;         /* processes listed: read in phase one, or carried over */
    size_t n_carried;         /* of those, carried over unread by an incremental scan */
    bool incremental;         /* the scan was incremental (opts and a primed index) */
    size_t n_vanished;        /* exited between listing and reading */
    size_t n_denied;          /* some file could not be read for lack of permission */
    size_t n_fd_unread;       /* of the processes listed, those whose fd/ could not be read: any
                               * of them may hold an NVIDIA node unseen */
    pid_t self_nspid_depth;   /* our own NSpid length: > 1 means we run in a PID namespace */
    enum vg_proc_pidns pidns; /* the procfs's PID namespace: the initial one or not */
    struct vg_proc_unread *unread; /* owned: some of the n_fd_unread, pid order: those the
                                    * driver lists, then the first others; kernel threads never */
    size_t nunread;                /* <= VG_PROC_UNREAD_MAX and <= n_fd_unread */
    size_t n_unread_kthreads;      /* of n_fd_unread, kernel threads: counted, never listed */
    size_t n_fd_by_kernel;         /* processes whose fd/ /proc refused and the kernel scan
                                    * read: not unread, and not counted in n_fd_unread */
    size_t n_tables_unchecked;     /* processes read whose threads' own descriptor tables (a
                                    * thread that unshared CLONE_FILES) could not be compared
                                    * with the leader's: a --proc view of another PID
                                    * namespace, no kcmp(2), or refused (fds.c) */
    unsigned access;               /* VG_PROC_ACC_*: what may have kept processes from being read */
    struct vg_proc_kin *kin;       /* owned, pid order: the live non-holders of the sessions of
                                    * holders whose job may have ended (none on a healthy host) */
    size_t nkin;
    bool kernel_scan;      /* the holders were found by the in-kernel scan (vg_proc_opts.scan) */
    bool kernel_scan_maps; /* it walked the memory mappings too (else, before Linux 5.12, the
                            * maps of the processes it found nothing in were read from /proc) */
    char *scan_note;       /* owned: why the kernel scan did not run; NULL when it ran or was
                            * not asked for (--scan=proc) */
};

/*
 * What a process cannot change while it lives, kept between scans for long-running commands
 * (the sampler behind `watch` and `serve`): command line, exec-time environment, cgroup,
 * mapped libraries and user name. An entry is keyed by (pid, start time, comm): a reused PID
 * has another start time, and an exec changes comm, so neither is served stale data. stat,
 * status, fds and threads are always read fresh. Mapped libraries are read again when the
 * process's NVIDIA descriptors change (a new context or NCCL opens more), the user name when
 * the uid changes. Entries of processes a scan did not read in full are dropped at its end.
 *
 * Ownership: vg_proc_cache_new() returns a cache freed with vg_proc_cache_free(); a scan
 * borrows it through vg_proc_opts.cache. One scan at a time.
 */
struct vg_proc_cache;

struct vg_proc_cache_stats {
    uint64_t hits;   /* processes whose stable details came from the cache */
    uint64_t misses; /* processes read in full */
    size_t entries;
};

int vg_proc_cache_new(struct vg_proc_cache **out);
void vg_proc_cache_free(struct vg_proc_cache *cache);
void vg_proc_cache_stats(const struct vg_proc_cache *cache, struct vg_proc_cache_stats *out);

/*
 * What the last scan saw of every process, so that the next one can be incremental: for the
 * sampler behind `watch` and `serve`, where a full phase one (every descriptor of every
 * process, nearly all of a scan's cost) on every sample would cost as much as a cold `status`.
 *
 * An incremental scan lists the pids as a full one does and reads in full, as a full one does,
 * the processes that held an NVIDIA node at the last scan, those the caller wants, those whose
 * fd/ could not be read then, and every process it has not seen before. It carries every other
 * process over unread: one that held no NVIDIA node at the last scan. That is sound only while
 * nothing can have given such a process an NVIDIA descriptor since, and it is the caller's to
 * know: no device node was opened (an inotify watch on the nodes, vg_proc_devwatch below),
 * and a full scan every so often for what opens nothing (descriptors passed over a Unix
 * socket, pidfd_getfd).
 *
 * "Seen before" means listed by the last scan under the same pid with the same directory inode
 * number, and not allocated since: procfs gives each new process's directory a new inode
 * number, and on procfs the last pid allocated (loadavg) bounds the pids allocated between two
 * scans, so a pid that was reused in between is read as the new process it is.
 *
 * Ownership: vg_proc_index_new() returns an index freed with vg_proc_index_free(); a scan
 * borrows it through vg_proc_opts.index and rebuilds it (every scan with an index, full or
 * not). A scan that fails leaves it unprimed: the next scan is a full one. One scan at a time.
 */
struct vg_proc_index;

int vg_proc_index_new(struct vg_proc_index **out);
void vg_proc_index_free(struct vg_proc_index *idx);
/* Whether the index holds a completed scan that an incremental scan can build on. */
bool vg_proc_index_primed(const struct vg_proc_index *idx);
/* Processes the last completed scan listed. */
size_t vg_proc_index_size(const struct vg_proc_index *idx);

/*
 * Whether anyone opened an NVIDIA device node between two polls, and who: what tells the
 * sampler that an incremental scan is sound. It watches every DIR/nvidia* node (and the files in
 * nvidia-caps/) with inotify or fanotify, so it sees opens through any path to the same inode, bind
 * mounts into containers included, but not opens of a different inode of the same device (a node a
 * container runtime created with mknod in the container's own /dev): the scan matches those by
 * device number, so the periodic full scan finds them, and the driver's process list shows
 * their CUDA contexts at once. The nodes watched are the ones vg_proc_devset reads from DIR
 * (its nvidia* entries and the files of its nvidia* directories), so every node that counts by
 * inode is watched.
 *
 * poll drains the events queued since the last poll and returns a set of VG_PROC_DEVWATCH_*
 * bits: OPENED, a node was opened by a process it cannot name; NAMED, nodes were opened by the
 * processes vg_proc_devwatch_openers() lists (sorted, unique, valid until the next poll);
 * CHANGED, nodes were created, removed or renamed, or events were lost (queue overflow), and
 * the watches were built anew. OPENED or CHANGED means the next scan must be full; NAMED only
 * that the openers must be read (this time and next: the event precedes the descriptor). 0:
 * nothing. A negative errno when the watch failed (the next poll tries to build it again and
 * reports CHANGED).
 *
 * Openers are named by fanotify, with CAP_SYS_ADMIN and flags VG_PROC_DEVWATCH_NAME_OPENERS
 * (give it only when the scan's procfs numbers processes as this process's PID namespace
 * does: fanotify's PIDs are ours). vg_proc_devwatch_unnamed() says why opens are not named,
 * or NULL when they are.
 *
 * Ownership: vg_proc_devwatch_new() returns a watch freed with vg_proc_devwatch_free(). It
 * fails when inotify is unavailable, DIR cannot be watched, or some node cannot be (not
 * readable, out of inotify watches): a node that cannot be watched could be opened unseen.
 */
struct vg_proc_devwatch;
enum {
    VG_PROC_DEVWATCH_OPENED = 1 << 0,
    VG_PROC_DEVWATCH_CHANGED = 1 << 1,
    VG_PROC_DEVWATCH_NAMED = 1 << 2,
};
enum { VG_PROC_DEVWATCH_NAME_OPENERS = 1u << 0 };
int vg_proc_devwatch_new(const char *dev_dir, unsigned flags, struct vg_proc_devwatch **out,
                         struct vg_err *err);
void vg_proc_devwatch_free(struct vg_proc_devwatch *w);
int vg_proc_devwatch_poll(struct vg_proc_devwatch *w, struct vg_err *err);
const pid_t *vg_proc_devwatch_openers(const struct vg_proc_devwatch *w, size_t *n);
const char *vg_proc_devwatch_unnamed(const struct vg_proc_devwatch *w);
/* Node watches in place (directories such as nvidia-caps count as one). */
size_t vg_proc_devwatch_nodes(const struct vg_proc_devwatch *w);

/* The pid allocated last, from the fifth field of /proc/loadavg's text; 0 or -EINVAL. */
int vg_proc_parse_loadavg_pid(const char *buf, size_t len, pid_t *pid);

/*
 * How a scan finds the holders (--scan). PROC: phase one for every process, as above. KERNEL:
 * the in-kernel scan (BPF task_file and task_vma iterators, src/proc/kscan.c) names the
 * processes whose descriptor tables or memory mappings hold a node, and only those (and the wanted
 * ones) are read through /proc; every other listed process is counted as read and holding nothing.
 * The result is the same table the /proc scan gives. It needs a procfs view of this process's PID
 * namespace or one below it, libbpf.so.1, a kernel with BTF, and root or CAP_BPF + CAP_PERFMON.
 * AUTO: KERNEL when it can run and the listing holds at least VG_PROC_KSCAN_MIN_PROCS processes
 * (loading the program costs about 150 ms of CPU, parsing the kernel's BTF, which the /proc scan of
 * a smaller host does not reach; or whatever the count when opts->kprog holds it loaded already),
 * else PROC (vg_proc_table.scan_note says why); with KERNEL, a scan
 * that cannot run fails. opts->all (every process read in full) always means PROC, and so does an
 * incremental scan (opts->incremental with a primed index), which reads less than the kernel
 * walks; a kernel scan with an index records every process it walked, so the next scan can
 * be incremental.
 */
enum vg_proc_scan_mode { VG_PROC_SCAN_AUTO, VG_PROC_SCAN_KERNEL, VG_PROC_SCAN_PROC };
/* Below this many processes --scan=auto reads /proc: bench/run --kscan puts the two scans even
 * near 1,000 processes of 64 descriptors, and most processes hold fewer. */
#define VG_PROC_KSCAN_MIN_PROCS 1000u

/*
 * The kernel scan's program kept loaded from one scan to the next (watch, serve and top scan
 * again and again: loading costs about 150 ms of CPU each time, an iteration a fraction of it).
 * Given in vg_proc_opts.kprog, a scan reuses the program it holds when the settings it was
 * loaded with (the driver's majors, --dev's nodes, the view's PID namespace) still hold, and
 * loads it again when they changed; AUTO then uses the kernel scan whatever the number of
 * processes, since the cost it weighs against is paid. A reason the program cannot load that
 * trying again would not change (no libbpf, not permitted, no BTF) is kept and said again
 * without another try. vg_proc_kprog_new() returns one freed with vg_proc_kprog_free() (which
 * unloads it); 0 or -ENOMEM. Not for use by two scans at once.
 */
struct vg_proc_kprog;
int vg_proc_kprog_new(struct vg_proc_kprog **out);
void vg_proc_kprog_free(struct vg_proc_kprog *k);
/* How many times the program was loaded; whether it is loaded now. */
unsigned vg_proc_kprog_loads(const struct vg_proc_kprog *k);
bool vg_proc_kprog_loaded(const struct vg_proc_kprog *k);

struct vg_proc_opts {
    const char *proc_root; /* default "/proc" */
    const char *dev_dir;   /* default "/dev": whose nvidia* nodes count by inode (see
                            * vg_proc_devset); NVIDIA character devices count anywhere */
    const pid_t *want;     /* PIDs to read in full even without device fds (NVML's) */
    size_t nwant;
    bool all;                    /* read every process in full, holders or not */
    struct vg_proc_cache *cache; /* optional: reuse stable details between scans */
    struct vg_proc_index *index; /* optional: record what this scan saw, for the next one */
    bool incremental;            /* with a primed index: carry unchanged non-holders over unread */
    const pid_t *rewalk;         /* with incremental: processes known to have opened a node since
                                  * the last scan, whose whole table is read again (see scan.c) */
    size_t nrewalk;
    enum vg_proc_scan_mode scan; /* how holders are found (AUTO when zeroed) */
    struct vg_proc_kprog *kprog; /* optional: keep the kernel scan's program loaded */
};

void vg_proc_table_init(struct vg_proc_table *t);
void vg_proc_table_release(struct vg_proc_table *t);
const struct vg_proc *vg_proc_table_find(const struct vg_proc_table *t, pid_t pid);

/* The PID namespace of the procfs at root_fd (see pidns.c); self_depth: our NSpid length as
 * that procfs shows it (0 when unknown). */
enum vg_proc_pidns vg_proc_pidns_read(int root_fd, pid_t self_depth);
/* "initial", "nested", or NULL for unknown. */
const char *vg_proc_pidns_id(enum vg_proc_pidns ns);

/* Scan the procfs root per opts. t must be initialised and empty. */
int vg_proc_scan(const struct vg_proc_opts *opts, struct vg_proc_table *t, struct vg_err *err);

/* Read one process in full; -ENOENT when it does not exist, -ESRCH when it exited while being
 * read. p is overwritten (zeroed first, even on failure) and must be released with
 * vg_proc_release(). dev_dir as in vg_proc_opts (NULL for "/dev"). */
int vg_proc_read(int proc_root_fd, pid_t pid, const char *dev_dir, struct vg_proc *p,
                 struct vg_err *err);
void vg_proc_release(struct vg_proc *p);

/* CPU time (utime + stime, in clock ticks) pid has used until now, from its stat under the
 * procfs root: for telling a process that works from one that only waits. -ESRCH when it has
 * exited or its pid now names a process with another start time; other errors as a file read. */
int vg_proc_read_cpu(int proc_root_fd, pid_t pid, uint64_t start_ticks, uint64_t *cpu_ticks);

/* Does pid still exist under the procfs root (a path; NULL or "" for /proc), with start_ticks
 * when start_known? 1 yes, 0 no (gone, or the PID now names another process), a negative
 * errno when it cannot be told (stat unreadable or malformed): the caller decides. */
int vg_proc_alive(const char *proc_root, pid_t pid, bool start_known, uint64_t start_ticks);

/* Longest cmdline kept; a longer one is -E2BIG and leaves the cmdline unknown. */
#define VG_PROC_CMDLINE_MAX ((size_t)1 << 20)

/* The individual parsers, exposed for unit tests and fuzzing. Each takes the file's bytes
 * (not necessarily NUL-terminated) and fills part of p, replacing (and freeing) what those
 * fields held, and sets the matching known bit; -EINVAL on malformed content and -ENOMEM, in
 * which case p is unchanged. vg_proc_parse_stat sets p->pid only when it is 0;
 * vg_proc_parse_cmdline returns -E2BIG past VG_PROC_CMDLINE_MAX; vg_proc_parse_maps counts
 * a mapping whose path ends in " (deleted)" (the library is still loaded). */
int vg_proc_parse_stat(const char *buf, size_t len, struct vg_proc *p);

/* The open flags of a descriptor from its /proc/PID/fdinfo/N text ("flags:\t02100000", octal):
 * 0, or -EINVAL when there is no such line or it is malformed. */
int vg_proc_parse_fdinfo_flags(const char *buf, size_t len, uint64_t *flags);

/* An io_uring's registered files from its fdinfo text ("UserFiles:\t2" then one "%5u: PATH"
 * line each; empty slots "<none>" skipped): fn(arg, path, len) for each, in slot order, path
 * not NUL-terminated; a non-zero return from fn stops and is returned. 0 when the text lists
 * none (no ring), -EINVAL when malformed. */
typedef int (*vg_proc_uring_file_fn)(void *arg, const char *path, size_t len);
int vg_proc_parse_uring_files(const char *buf, size_t len, vg_proc_uring_file_fn fn, void *arg);
int vg_proc_parse_status(const char *buf, size_t len, struct vg_proc *p);
int vg_proc_parse_cmdline(const char *buf, size_t len, struct vg_proc *p);
int vg_proc_parse_environ(const char *buf, size_t len, struct vg_proc *p);
int vg_proc_parse_cgroup(const char *buf, size_t len, struct vg_proc *p);
int vg_proc_parse_maps(const char *buf, size_t len, struct vg_proc *p);

/* One line of /proc/PID/maps: the mapped file's filesystem (dev, hex "MAJ:MIN") and inode, with
 * id_ok false when those fields are malformed, and the path (borrowed from the text, possibly
 * empty, "[heap]", or ending in " (deleted)"). vg_proc_maps_next reads the next non-empty
 * line from [*at, end): 1 with *m set, 0 at the end, -EINVAL for a line of fewer than five
 * fields. */
struct vg_proc_map_ent {
    uint32_t dev_major, dev_minor;
    uint64_t ino; /* 0: anonymous */
    bool id_ok;
    const char *path;
    size_t path_len;
};
int vg_proc_maps_next(const char **at, const char *end, struct vg_proc_map_ent *m);

/*
 * NVIDIA device nodes. What a descriptor refers to is read with statx() through
 * /proc/PID/fd/N and classified against a per-scan set, struct vg_proc_devset:
 *
 * - a character device of an NVIDIA major counts by its device number, so every path to it
 *   matches (a container's own mknod, a bind mount, another mount namespace, a node deleted
 *   since it was opened). The majors come from <procfs>/devices: "nvidia-frontend" or "nvidia"
 *   (VG_DEV_NVIDIA_MAJOR, 195, when neither is listed): minor 0..253 a GPU, 254 nvidia-modeset,
 *   255 nvidiactl; "nvidia-uvm" (minor 0 nvidia-uvm, 1 nvidia-uvm-tools); "nvidia-caps",
 *   "nvidia-caps-imex-channels", "nvidia-nvlink", "nvidia-nvswitch": other NVIDIA nodes.
 * - any other node of --dev DIR (every non-directory, non-symlink nvidia* entry, and the
 *   entries of its nvidia* directories such as nvidia-caps/) counts by its inode identity
 *   (st_dev, st_ino), as its name says: DIR/nvidiaN a GPU, nvidiactl, nvidia-uvm(-tools), the
 *   rest other nodes. These are the plain-file stand-ins of the tests and the demo, or a real
 *   node whose major the procfs does not list.
 *
 * Nothing else is a node: not a file named like one elsewhere (a private tmpfs over /dev in a
 * user namespace), not a symlink in DIR (only what it points to, if that is a node).
 *
 * Ownership: vg_proc_devset_new() returns a set freed with vg_proc_devset_free(); immutable.
 */
enum vg_dev_kind { VG_DEV_NONE, VG_DEV_GPU, VG_DEV_CTL, VG_DEV_UVM, VG_DEV_OTHER };

/* GPU minors, as the driver numbers them; 254 is nvidia-modeset, 255 nvidiactl. */
#define VG_DEV_GPU_MINOR_MAX 253u
#define VG_DEV_MODESET_MINOR 254u
#define VG_DEV_CTL_MINOR 255u
/* The NVIDIA major when /proc/devices does not list it (the number registered for it). */
#define VG_DEV_NVIDIA_MAJOR 195u
/* Distinct nodes per process whose paths are kept (vg_proc.dev_paths); the rest are counted. */
#define VG_PROC_NODES_MAX 64

/* The character-device majors of the NVIDIA driver; 0 when /proc/devices does not list one. */
#define VG_DEV_OTHER_MAJORS 4
struct vg_dev_majors {
    unsigned nvidia;                     /* "nvidia-frontend", else "nvidia" */
    unsigned uvm;                        /* "nvidia-uvm" */
    unsigned other[VG_DEV_OTHER_MAJORS]; /* nvidia-caps, -caps-imex-channels, -nvlink, -nvswitch */
};

/* What statx says a file is. dev is the filesystem's device (major, minor), rdev the device a
 * character or block node stands for. */
struct vg_dev_id {
    uint32_t mode; /* S_IFMT bits (and permissions) */
    uint32_t rdev_major, rdev_minor;
    uint32_t dev_major, dev_minor;
    uint64_t ino;
};

/* The result of a match: the node's kind, its GPU minor (GPU only; else 0), and a number that
 * is the same for every descriptor of one node and differs between nodes of one set. */
struct vg_dev_match {
    enum vg_dev_kind kind;
    unsigned minor;
    uint64_t node;
};

struct vg_proc_devset;

/* Read the majors from proc_root_fd's "devices" (missing or unreadable: only the default
 * NVIDIA major) and stat DIR's nodes (dev_dir NULL or "": /dev; a DIR that cannot be read
 * adds none). 0 or -ENOMEM. */
int vg_proc_devset_new(int proc_root_fd, const char *dev_dir, struct vg_proc_devset **out);
void vg_proc_devset_free(struct vg_proc_devset *s);
/* Whether id is an NVIDIA node of the set; fills *m when it is. */
bool vg_proc_devset_match(const struct vg_proc_devset *s, const struct vg_dev_id *id,
                          struct vg_dev_match *m);
/* Whether the file of a memory mapping, as /proc/PID/maps names it (its filesystem's device
 * and its inode: no device number), is an NVIDIA node of the set; fills *m as
 * vg_proc_devset_match does for a descriptor of the same node. A node of the driver's majors
 * is known here only by the inode it has under DIR: a mapping of a container's own mknod of it
 * is not seen. */
bool vg_proc_devset_match_file(const struct vg_proc_devset *s, uint32_t dev_major,
                               uint32_t dev_minor, uint64_t ino, struct vg_dev_match *m);
/* The mappings of NVIDIA nodes of set ds in a maps text: fn is called for each, in order, with
 * the match and the path the line names; a nonzero return stops and is returned. 0, or -EINVAL
 * for a line whose file cannot be told (a mapping that may be a node is never taken as none). */
typedef int (*vg_proc_map_fn)(void *arg, const struct vg_dev_match *m, const char *path,
                              size_t len);
int vg_proc_parse_map_nodes(const char *buf, size_t len, const struct vg_proc_devset *ds,
                            vg_proc_map_fn fn, void *arg);
/* The majors in use (the default NVIDIA major filled in), and how many DIR nodes count by
 * inode. */
const struct vg_dev_majors *vg_proc_devset_majors(const struct vg_proc_devset *s);
size_t vg_proc_devset_size(const struct vg_proc_devset *s);

/* /proc/devices' text: the majors of its "Character devices:" section that belong to the
 * NVIDIA driver, 0 for those not listed. Lines it does not understand are skipped. 0, or
 * -EINVAL when there is no "Character devices:" section. */
int vg_proc_parse_devices(const char *buf, size_t len, struct vg_dev_majors *m);
/* The name of an entry of --dev DIR ("nvidia3"; not NUL-terminated necessarily): 1 with *kind
 * and *minor set for an nvidia* name (nvidiaN with N plain decimal 0..253: GPU N; nvidiactl;
 * nvidia-uvm, nvidia-uvm-tools; any other nvidia* name: OTHER), 0 and VG_DEV_NONE otherwise. */
int vg_proc_parse_node_name(const char *name, size_t len, enum vg_dev_kind *kind, unsigned *minor);

/* Who listens on TCP port (any address, IPv4 or IPv6) in the reader's network namespace
 * (sockets.c): 1 when something does, with *pid and *comm (malloc'ed, the caller frees; NULL
 * when unreadable) of the process holding the socket, *pid 0 when that process is not visible
 * (another user's, without privileges); 0 when nothing listens there; negative errno with err
 * when the procfs root cannot be opened. */
int vg_proc_port_listener(const char *proc_root, uint16_t port, pid_t *pid, char **comm,
                          struct vg_err *err);
/* The inodes of the sockets in LISTEN state on port, from net/tcp or net/tcp6 text (the header
 * line first); at most cap, -E2BIG beyond. */
int vg_proc_parse_tcp_listen(const char *buf, size_t len, uint16_t port, uint64_t *inodes,
                             size_t cap, size_t *n);

/* The in-kernel scan's records (src/proc/kscan_rec.h), as its BPF iterator wrote them: the
 * processes (distinct, ascending, *pids owned by the caller) with a descriptor that ds matches.
 * Records flagged as the reading process's own whose descriptor number is one of cal's are its
 * check descriptors instead: cal[k].seen is set when one names cal[k].id, differs when one
 * names another file. 0, -EINVAL (a partial or malformed record: nothing is returned) or
 * -ENOMEM. */
struct vg_proc_kcal {
    int fd;              /* an O_PATH descriptor of the node, or -1 */
    struct vg_dev_id id; /* what statx says of it (dev and ino) */
    bool seen, differs;
};
int vg_proc_parse_krecs(const char *buf, size_t len, const struct vg_proc_devset *ds,
                        struct vg_proc_kcal *cal, size_t ncal, pid_t **pids, size_t *npids);

#endif
