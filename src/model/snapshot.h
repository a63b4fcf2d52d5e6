/*
 * The snapshot: one consistent picture of the host, joining the driver's view (NVML: which PIDs
 * have contexts on which GPU, and how much memory each holds) with the kernel's view (/proc:
 * which processes hold which /dev/nvidia<minor> open, and who they are).
 *
 * A holding is one (GPU, PID) pair, or (GPU, MIG device, PID) on a MIG-enabled GPU, seen by
 * NVML, by an open device node, or both. Holdings seen by only one source are kept and marked:
 * fd-only holders are typically orphaned workers keeping a dead job's memory; NVML-only PIDs live
 * in another PID namespace or are gone while the driver still holds their memory.
 *
 * Ownership: vg_snap_build() returns a snapshot the caller frees with vg_snap_free(). It owns the
 * GPU list, the process table and the holdings; pointers between them (holding->proc) stay valid
 * for the snapshot's life. Once built it is immutable: rules and renderers only read it.
 */
#ifndef VG_MODEL_SNAPSHOT_H
#define VG_MODEL_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "gpu/gpu.h"
#include "proc/pci.h"
#include "proc/kmsg.h"
#include "proc/proc.h"
#include "util/err.h"

#define VG_SNAP_NO_GPU ((size_t)-1)

enum vg_seen {
    VG_SEEN_NVML = 1u << 0, /* in one of NVML's process lists */
    VG_SEEN_FD = 1u << 1,   /* holds /dev/nvidia<minor> open */
    VG_SEEN_MAP = 1u << 2,  /* maps /dev/nvidia<minor> (the kernel keeps it open for that) */
};
/* Held through the device node, by descriptor or mapping: what "the node" means elsewhere. */
#define VG_SEEN_NODE (VG_SEEN_FD | VG_SEEN_MAP)
/* Seen through the device node only (a descriptor or a mapping), without a context the driver
 * lists: the "device node only" holder. */
#define VG_SEEN_NODE_ONLY(seen) (((seen)&VG_SEEN_NODE) && !((seen)&VG_SEEN_NVML))

struct vg_holding {
    size_t gpu;     /* index into snap->gpus.gpus, or VG_SNAP_NO_GPU (minor unknown
                     * to NVML, or no driver) */
    int mig;        /* index into that GPU's mig[], or -1 */
    unsigned minor; /* device minor the fd pointed at (fd-seen), else the GPU's */
    bool minor_known;
    pid_t pid;
    const struct vg_proc *proc; /* NULL when this procfs does not show the PID, or when the
                                 * process it shows is not the one the driver means (stale) */
    /* The driver lists the PID, but the process this procfs shows under it holds no node of
     * the GPU although its descriptors could be read: the driver's entry outlived its process
     * (it keeps dead PIDs listed for a while) and the number now names another process, which
     * is kept here for display only and never acted on. proc is NULL. */
    bool stale;
    const struct vg_proc *stale_proc;
    unsigned seen;  /* VG_SEEN_* */
    unsigned types; /* VG_PTYPE_* from NVML; 0 when fd-only */
    bool used_known;
    uint64_t used_bytes;
    bool bogus_pid; /* NVML reported PID 0 or UINT32_MAX */
};

/* Per-GPU sums derived from the holdings. */
struct vg_snap_gpu {
    size_t nholders;         /* holdings on this GPU (MIG devices included) */
    size_t nholders_unknown; /* of those, with memory unknown */
    uint64_t held_bytes;     /* sum of known holder memory */
    /* used memory no holder accounts for. With the v1 memory API the driver's reservation is
     * inside "used", so it is inside this figure too (unexplained_has_reserved). When some
     * holder's memory is unknown this is an upper bound (unexplained_upper_bound). */
    bool unexplained_known;
    uint64_t unexplained_bytes;
    bool unexplained_has_reserved;
    bool unexplained_upper_bound;
};

/* One device of the kernel log's Xid reports (snap->kmsg.devs[i]) joined to the snapshot
 * (model/snap_xid.c): the GPU it is, by PCI bus id, and the process each Xid kept names. */
struct vg_snap_xid_dev {
    const struct vg_kmsg_xid_dev *dev; /* in snap->kmsg */
    size_t gpu; /* index into snap->gpus.gpus; VG_SNAP_NO_GPU when the driver lists no GPU
                 * there (one that fell off the bus, or no driver view) */
    /* For each of dev->xid[]: the process it names when this procfs shows it and it is that
     * process (started before the Xid, its name the one the driver gave); NULL when it is
     * gone, unknown, or its PID now names another process (stale[k]). */
    const struct vg_proc *proc[VG_KMSG_XID_KEEP];
    bool stale[VG_KMSG_XID_KEEP];
};

struct vg_snapshot {
    struct timespec taken_at; /* CLOCK_REALTIME */
    uint64_t scanned_ms;      /* vg_clock_ms() when /proc had been read: where an activity
                               * window starts */
    char *proc_root;
    char *dev_dir;
    char *replay; /* the record file this snapshot was read from (model/record.h), NULL when
                   * it was read from this host: what every output labels as a replay */

    bool driver_ok;     /* NVML answered: gpus is meaningful */
    char *driver_error; /* why not, one line; NULL when driver_ok */
    bool driver_hung;   /* why not: the driver did not answer within the deadline */
    struct vg_gpu_list gpus;
    struct vg_snap_gpu *per_gpu; /* gpus.ngpus entries */

    struct vg_proc_table procs;

    /* The NVIDIA GPUs on the PCI bus (sysfs), read with the driver's view; known false when
     * not read (a replay, a sampler, no sysfs). */
    struct vg_proc_pci pci;

    struct vg_holding *holdings; /* sorted by gpu (NO_GPU last), mig, pid */
    size_t nholdings;

    /* The kernel log's Xid reports since boot (state VG_KMSG_NOT_ASKED unless the builder was
     * asked to read it), and their join (one entry per kmsg.devs[i], same order). */
    struct vg_kmsg_log kmsg;
    struct vg_snap_xid_dev *xid_devs;
    size_t nxid_devs;
};

/* The parts a snapshot is built from; a command asks only for what it uses (`visible` needs the
 * driver's GPUs and reads no /proc). */
enum vg_snap_part {
    VG_SNAP_PART_GPUS = 1u << 0,  /* NVML: GPUs, their memory and process lists */
    VG_SNAP_PART_PROCS = 1u << 1, /* /proc: processes, device fds; the holdings join both */
    VG_SNAP_PART_ALL = VG_SNAP_PART_GPUS | VG_SNAP_PART_PROCS,
};

struct vg_snap_opts {
    unsigned parts;           /* VG_SNAP_PART_*; 0: all. Without PROCS the process table and
                               * the fd side of the holdings are empty, and no /proc is read */
    const char *nvml_path;    /* NULL: $VRAMGUARD_NVML or libnvidia-ml.so.1 */
    unsigned nvml_timeout_ms; /* 0: VG_SNAP_NVML_TIMEOUT_MS */
    const char *proc_root;    /* NULL: /proc */
    const char *dev_dir;      /* NULL: /dev */
    bool skip_nvml;           /* build from /proc alone */
    bool all_procs;           /* read every process in full, not only holders */
    int scan;                 /* enum vg_proc_scan_mode: how holders are found (--scan) */
    const char *sys_root;     /* sysfs, for the GPUs on the PCI bus; NULL: /sys */
    bool read_kmsg;           /* read the kernel log's Xid reports (one-shot commands) */
    const char *kmsg_path;    /* NULL: /dev/kmsg (--kmsg, a stand-in file in tests) */
};

/* The window the commands that judge leftovers (doctor, check, clean) measure activity over. */
#define VG_SNAP_ACTIVITY_MS 500u

/* A driver that does not answer within this is reported as hung; the command goes on with
 * what /proc shows. */
#define VG_SNAP_NVML_TIMEOUT_MS 10000u

/* Whether p is reported apart as holding nodes through O_PATH descriptors only ("path only":
 * paths, not open files; they hold no context and no memory, and any user may take one):
 * GPU nodes held no other way, or nothing but such descriptors. Never a holder. */
bool vg_snap_path_only(const struct vg_proc *p);

/* Build a snapshot. Fails only when /proc cannot be read at all or memory runs out; a missing
 * or failing driver gives driver_ok == false with driver_error set. */
int vg_snap_build(const struct vg_snap_opts *opts, struct vg_snapshot **out, struct vg_err *err);
void vg_snap_free(struct vg_snapshot *snap);

/* Holdings of one GPU are contiguous: [*first, *first + *count). */
void vg_snap_gpu_holdings(const struct vg_snapshot *snap, size_t gpu, size_t *first, size_t *count);

/* The join, separated from the reading so it can be unit-tested on hand-made inputs: takes
 * ownership of gpus and procs (their contents are moved into snap, the arguments left empty). */
int vg_snap_assemble(struct vg_snapshot *snap, struct vg_gpu_list *gpus, bool driver_ok,
                     struct vg_proc_table *procs, struct vg_err *err);

/* The PIDs NVML reported (bogus ones left out), so /proc can read them in full even without
 * device fds. *out is heap (NULL when there are none); 0 or -ENOMEM. */
int vg_snap_nvml_pids(const struct vg_gpu_list *gpus, pid_t **out, size_t *n);

/* What a builder of snapshots (vg_snap_build(), model/sampler.c) reads before joining it with
 * vg_snap_assemble(), which moves gpus and procs out. */
struct vg_snap_parts {
    struct vg_gpu_list gpus;
    struct vg_proc_table procs;
    pid_t *want; /* vg_snap_nvml_pids(): the processes to read in full */
    size_t nwant;
};

/* A builder's start: an empty snapshot of the host whose procfs is at proc_root and device
 * nodes in dev_dir, and empty parts. 0, or -ENOMEM (err set) with nothing to release. */
int vg_snap_begin(const char *proc_root, const char *dev_dir, struct vg_snapshot **snap,
                  struct vg_snap_parts *parts, struct vg_err *err);
/* Free what parts still hold (after vg_snap_assemble(): only want). */
void vg_snap_parts_release(struct vg_snap_parts *parts);

/* Why a GPU was not fully checked, as bits: what doctor and check say instead of letting
 * "nothing wrong found" read as "all clear". 0: fully checked. */
enum {
    VG_SNAP_UNCHECKED_DRIVER = 1u << 0,      /* no driver view at all */
    VG_SNAP_UNCHECKED_LOST = 1u << 1,        /* the GPU is lost */
    VG_SNAP_UNCHECKED_MEMORY = 1u << 2,      /* its memory figures could not be read */
    VG_SNAP_UNCHECKED_PROCESSES = 1u << 3,   /* one of its process lists failed */
    VG_SNAP_UNCHECKED_MINOR = 1u << 4,       /* its minor number is unknown: who holds its
                                              * device node cannot be told */
    VG_SNAP_UNCHECKED_DESCRIPTORS = 1u << 5, /* some processes' descriptors could not be read:
                                              * any of them may hold it */
    VG_SNAP_UNCHECKED_HUNG = 1u << 6,        /* a driver call for it did not return in time:
                                              * its figures and process lists are unknown */
};
#define VG_SNAP_UNCHECKED_ALL 0x7fu
unsigned vg_snap_gpu_unchecked(const struct vg_snapshot *snap, size_t gpu);
/* A stable id for one VG_SNAP_UNCHECKED_* bit ("driver", "lost", "memory", "processes",
 * "minor", "descriptors", "hung"), for JSON. */
const char *vg_snap_unchecked_id(unsigned bit);

/* Whether a holder could be hiding from this snapshot: some process's descriptors could not be
 * read, or the procfs hides other users' processes altogether (hidepid). What forbids calling
 * a GPU free or offering a reset. */
bool vg_snap_holders_may_hide(const struct vg_snapshot *snap);

/* Holders whose environment could not be read (zombies, whose environment is gone, not
 * counted): the variables the rules judge by are unknown for them. */
size_t vg_snap_unread_envs(const struct vg_snapshot *snap);

/* Whether each of pids works: sleeps until window_ms after the scan, then reads the CPU time
 * of those processes again from the snapshot's procfs, filling their vg_proc.activity_*.
 * Finishing a snapshot before it is used, like the build; who is worth the wait is the
 * caller's to say (rules.h: vg_leftovers_unmeasured). A process that exited, whose pid now
 * names another process, or that cannot be read stays unmeasured. */
void vg_snap_measure_activity(struct vg_snapshot *snap, const pid_t *pids, size_t n,
                              unsigned window_ms);

/* The same from the sample before, for long-running commands (the sampler): what each process
 * of a snapshot had used, kept between samples, sorted by pid. A process the marks show under
 * the same pid and start time gets the CPU time it used between the two scans: no waiting, no
 * reads. Ownership: vg_snap_cpu_marks_release() frees what take filled. */
struct vg_snap_cpu_mark {
    pid_t pid;
    uint64_t start_ticks, cpu_ticks;
};
struct vg_snap_cpu_marks {
    struct vg_snap_cpu_mark *v;
    size_t n;
    uint64_t at_ms; /* the snapshot's scanned_ms */
};
void vg_snap_activity_since(struct vg_snapshot *snap, const struct vg_snap_cpu_marks *prev);
/* Replace m with snap's processes. 0 or -ENOMEM (m is then empty). */
int vg_snap_cpu_marks_take(const struct vg_snapshot *snap, struct vg_snap_cpu_marks *m);
void vg_snap_cpu_marks_release(struct vg_snap_cpu_marks *m);

/* Join the kernel log's Xids (snap->kmsg, filled) to the GPUs by PCI bus id and to the
 * processes they name, filling xid_devs; run after vg_snap_assemble(), again after any change
 * of the log. 0 or -ENOMEM (err set). model/snap_xid.c. */
int vg_snap_join_xids(struct vg_snapshot *snap, struct vg_err *err);
/* The joined device of GPU gpu, or NULL when the log names none there. */
const struct vg_snap_xid_dev *vg_snap_gpu_xids(const struct vg_snapshot *snap, size_t gpu);
/* Append to *want (heap, *nwant entries) the PIDs the log's Xids name, so that /proc reads
 * them in full. 0 or -ENOMEM. */
int vg_snap_xid_pids(const struct vg_kmsg_log *log, pid_t **want, size_t *nwant);

/* Allocate an empty snapshot (for vg_snap_assemble). */
struct vg_snapshot *vg_snap_new(void);

#endif
