/*
 * Diagnosis rules: a table of small pure functions over a snapshot, each producing findings
 * (rule id, severity, the GPUs and PIDs concerned, evidence lines with numbers, and a fix a
 * person can act on). Rule ids are part of the JSON interface (docs/json.md) and the catalogue
 * (docs/diagnoses.md); never rename one.
 *
 * Rules run in table order and may read the findings of earlier rules, so that one situation
 * is reported once, by the most specific rule (a DDP rank's stray context is ddp-gpu0, not also
 * stray-contexts).
 *
 * The findings themselves (and expectations' alerts) are data of model/verdict.h, so that the
 * watch engine in model/ can follow them from sample to sample. Rule ids are static strings.
 */
#ifndef VG_RULES_RULES_H
#define VG_RULES_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "model/verdict.h"
#include "util/err.h"

struct vg_rule_opts {
    uint64_t context_max;      /* a holding up to this is "context-sized" (default 1 GiB) */
    uint64_t unattributed_min; /* unexplained memory above this is a finding (default 256 MiB) */
    double prealloc_fraction;  /* TF/JAX holding at least this share of a GPU (default 0.7) */
    /* The environment of the shell vramguard runs in: checked like a process's. */
    const char *shell_cvd;   /* NULL when unset */
    const char *shell_order; /* NULL when unset */
    bool check_shell;
    /* idle-holder */
    const struct vg_idle_info *idle;
    size_t nidle;
    uint64_t idle_min_ms; /* default 1 h */
};

void vg_rule_opts_init(struct vg_rule_opts *o);

#define VG_RULE_CONTEXT_MAX_DEFAULT (1ull << 30)
#define VG_RULE_UNATTRIBUTED_MIN_DEFAULT (256ull << 20)

struct vg_rule_ctx {
    const struct vg_snapshot *snap;
    const struct vg_rule_opts *opts;
};

typedef void (*vg_rule_fn)(const struct vg_rule_ctx *ctx, struct vg_findings *out);

struct vg_rule_def {
    const char *id;
    vg_rule_fn fn;
    const char *sees; /* one line for `doctor --list` and docs */
};

/* The table, in run order. */
const struct vg_rule_def *vg_rules_table(size_t *n);

/* Run every rule. Returns 0, or -ENOMEM with err set (findings so far are kept). */
int vg_rules_run(const struct vg_snapshot *snap, const struct vg_rule_opts *opts,
                 struct vg_findings *out, struct vg_err *err);

/* Highest severity among the findings, or -1 when there are none. */
int vg_findings_max_severity(const struct vg_findings *f);
const char *vg_severity_str(enum vg_severity s);
/* "low", "medium", "high" */
const char *vg_confidence_str(enum vg_confidence c);
/* Does an earlier finding of rule id already name this pid (on this gpu, or any gpu when gpu
 * is VG_SNAP_NO_GPU)? */
bool vg_findings_has_pid(const struct vg_findings *f, const char *rule, pid_t pid, size_t gpu);

/*
 * The leftover model (docs/diagnoses.md, "orphan-holder"): whether a process that holds a GPU
 * is what is left of a job that ended, decided from evidence and given a confidence. Shared by
 * orphan-holder, which reports it, and clean's plan, which acts only on high confidence and
 * says why it leaves the others alone. Pure, over the snapshot.
 */
enum vg_left_verdict {
    VG_LEFT_NONE, /* nothing suggests its job ended (a child of a live parent, or adopted
                   * while its job's leaders run) */
    VG_LEFT_NOT,  /* its lineage looks like an orphan's, but it is not a leftover: why_not */
    VG_LEFT_YES,  /* a leftover, with confidence HIGH or MEDIUM (why_not says why not high) */
};

/* The evidence seen, as bits. */
enum {
    VG_LEV_PARENT_INIT = 1u << 0,     /* re-parented to PID 1 */
    VG_LEV_PARENT_NS_INIT = 1u << 1,  /* ... to its container's init (tini, dumb-init) */
    VG_LEV_PARENT_REAPER = 1u << 2,   /* ... to a subreaper in another session (systemd --user) */
    VG_LEV_PARENT_SHELL = 1u << 3,    /* ... to a subreaper in its own session (the shell) */
    VG_LEV_PARENT_DEAD = 1u << 4,     /* its parent has exited */
    VG_LEV_PARENT_LEFTOVER = 1u << 5, /* its parent is itself a leftover (a worker's worker) */
    VG_LEV_GROUP_GONE = 1u << 6,      /* the leader of its process group has exited */
    VG_LEV_SESSION_GONE = 1u << 7,    /* the leader of its session has exited */
    VG_LEV_LEADS_GROUP = 1u << 8,     /* it leads its own process group: it is a job */
    VG_LEV_LEADS_SESSION = 1u << 9,   /* it leads its own session: a daemon, service, container */
    VG_LEV_SIGHUP_IGNORED = 1u << 10, /* nohup: detached from its terminal on purpose */
    VG_LEV_DAEMON = 1u << 11,         /* double-forked daemon: alone in a dead session's only
                                       * group, with no terminal */
    VG_LEV_STOPPED = 1u << 12,        /* stopped (T): suspended by its owner, not finished */
    VG_LEV_INHERITED = 1u << 13,      /* holds device nodes but no context of its own (and is
                                       * not an NVML-only monitor: it maps CUDA, or its maps
                                       * are unknown) */
    VG_LEV_MP_CHILD = 1u << 14,       /* a multiprocessing / loky worker by its command line */
    VG_LEV_RANK = 1u << 15,           /* a launcher's rank (LOCAL_RANK, RANK, OMPI, SLURM) */
    VG_LEV_WORKER_NAME = 1u << 16,    /* named as a worker (pt_data_worker) */
    VG_LEV_CPU_IDLE = 1u << 17,       /* no CPU time to speak of over the measured window */
    VG_LEV_CPU_BUSY = 1u << 18,
    VG_LEV_GPU_IDLE = 1u << 19, /* 0% in every utilisation sample the driver keeps */
    VG_LEV_GPU_BUSY = 1u << 20,
    VG_LEV_UNEXPLAINED = 1u << 21, /* a GPU it holds carries memory no listed process has */
};
/* A worker of the job rather than the job itself. Holding nodes without a context is the
 * weakest mark (a daemon that opened them itself looks the same), so it does not outweigh a
 * daemon's shape; the others do. */
#define VG_LEV_WORKER_STRONG                                                                       \
    (VG_LEV_MP_CHILD | VG_LEV_RANK | VG_LEV_WORKER_NAME | VG_LEV_PARENT_LEFTOVER)
#define VG_LEV_WORKER (VG_LEV_INHERITED | VG_LEV_WORKER_STRONG)

struct vg_leftover {
    pid_t pid;
    const struct vg_proc *proc;
    enum vg_left_verdict verdict;
    enum vg_confidence confidence; /* VG_LEFT_YES only */
    unsigned ev;                   /* VG_LEV_* */
    const char *why_not;           /* static: why NOT, or why YES is not high; NULL otherwise */
    pid_t via;                     /* VG_LEV_PARENT_LEFTOVER: that parent */
    pid_t job_pgid, job_sid;       /* the ended job: its group and session (a worker's worker
                                    * takes its leftover ancestor's) */
    bool nvml;                     /* the driver lists it */
    bool bytes_known;
    uint64_t bytes;    /* memory the driver attributes to it */
    unsigned gpu_util; /* VG_LEV_GPU_BUSY: the highest sample */
};

struct vg_leftovers {
    struct vg_leftover *v; /* one per holder process, by first holding */
    size_t n;
};

/* Assess every holder. 0 or -ENOMEM (out is then empty). */
int vg_leftovers_assess(const struct vg_snapshot *snap, struct vg_leftovers *out);
/* The holders that would be leftovers if only it were known whether they work: whose activity
 * is worth measuring (vg_snap_measure_activity) before judging. *pids is heap (NULL when none).
 * 0 or -ENOMEM. */
int vg_leftovers_unmeasured(const struct vg_snapshot *snap, pid_t **pids, size_t *n);
/* Finish a snapshot before judging it: measure over window_ms whether those holders work
 * (vg_snap_measure_activity; no wait when there are none). The one step of the rules that
 * reads the system and waits, kept here so every command that judges (doctor, check, clean,
 * watch, serve) measures the same processes. 0 or -ENOMEM. */
int vg_leftovers_measure(struct vg_snapshot *snap, unsigned window_ms);
void vg_leftovers_release(struct vg_leftovers *l);
const struct vg_leftover *vg_leftovers_find(const struct vg_leftovers *l, pid_t pid);

/* Building findings: each call records out-of-memory in out->err and otherwise cannot fail,
 * so rules stay free of error plumbing. */
struct vg_finding *vg_finding_add(struct vg_findings *out, const char *rule, enum vg_severity sev);
void vg_finding_title(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vg_finding_evidence(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vg_finding_fix(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vg_finding_gpu(struct vg_findings *out, struct vg_finding *f, size_t gpu);
void vg_finding_pid(struct vg_findings *out, struct vg_finding *f, pid_t pid);

#endif
