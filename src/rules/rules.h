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
    /* gpu-missing: how many GPUs the host should have (--expect-gpus); when not set, the NVIDIA
     * GPUs on the PCI bus (snap->pci) say it */
    bool expect_gpus_set;
    unsigned expect_gpus;
    /* xid: codes given another class than the table's (comma lists, checked with
     * vg_xid_list_check; NULL: none). rules/xid_table.h. */
    const char *xid_wedged; /* --xid-fatal */
    const char *xid_dirty;  /* --xid-dirty */
    const char *xid_noted;  /* --xid-noted */
};

void vg_rule_opts_init(struct vg_rule_opts *o);

#define VG_RULE_CONTEXT_MAX_DEFAULT (1ull << 30)
#define VG_RULE_UNATTRIBUTED_MIN_DEFAULT (256ull << 20)

struct vg_leftovers;

struct vg_rule_ctx {
    const struct vg_snapshot *snap;
    const struct vg_rule_opts *opts;
    const struct vg_leftovers *leftovers; /* the leftover model's verdicts, assessed once a run
                                           * for every rule that reads them */
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
 * The leftover model (leftover_model.c; docs/diagnoses.md, "The leftover model"): whether a
 * process that holds a GPU is what is left of a job that ended, decided by weighing facts and
 * given a confidence.
 * Each fact has a weight: positive says its job ended and it was part of it, negative that it
 * runs on purpose (a job, a daemon, a service of its own). The sum decides; no single fact is a
 * veto. What could not be read is a fact of weight 0 that keeps the verdict from being sure.
 * Shared by orphan-holder, which reports it, and clean's plan, which acts only on high
 * confidence and says why it leaves the others alone. Pure, over the snapshot.
 */
enum vg_left_verdict {
    VG_LEFT_NONE, /* nothing suggests its job ended (a child of a live parent) */
    VG_LEFT_NOT,  /* adopted, but the facts weigh against a leftover: why_not */
    VG_LEFT_YES,  /* a leftover, with confidence HIGH or MEDIUM (why_not says why not high) */
};

/* The facts, each at most once per process. Their ids (vg_left_fact_name) are JSON's. */
enum vg_left_fact_id {
    /* for "its job ended, and it was part of it" */
    VG_LF_ADOPTED,         /* re-parented: to init, a container's init, a subreaper */
    VG_LF_GROUP_GONE,      /* its process group's leader exited or is a zombie */
    VG_LF_SESSION_GONE,    /* its session's leader (another process) exited or is a zombie */
    VG_LF_CHARGES_LEADER,  /* the driver charges memory to that dead leader on a GPU it holds */
    VG_LF_CHARGES_DEAD,    /* ... to another dead PID on a GPU it holds without a context */
    VG_LF_INHERITED,       /* device nodes without a context of its own while mapping CUDA */
    VG_LF_SIBLINGS,        /* other adopted holders of the same ended job, same command line */
    VG_LF_PARENT_LEFTOVER, /* its parent is itself a leftover (a worker's worker) */
    VG_LF_LAUNCHER_GONE,   /* a launcher's rank, adopted: the launcher is gone */
    VG_LF_MP_CMDLINE,      /* a multiprocessing / loky worker's command line (a hint) */
    VG_LF_WORKER_NAME,     /* named as a DataLoader worker (a hint) */
    /* for "it runs on purpose" */
    VG_LF_LEADS_SESSION,  /* it leads its own session: setsid, a daemon, a service */
    VG_LF_LEADS_GROUP,    /* it leads its own process group: a job (nohup, &, a pane) */
    VG_LF_SIGHUP_IGNORED, /* nohup: meant to outlive its terminal */
    VG_LF_OWN_CONTEXT,    /* it holds a context of its own: it started CUDA itself */
    VG_LF_MAIN,           /* ... and its children hold its nodes: a job's main (replaces it) */
    VG_LF_ALONE,          /* no other holder shares a session whose leader is gone, and no
                           * sibling: a daemon's shape (replaces OWN_CONTEXT) */
    VG_LF_NVML_MONITOR,   /* maps NVML and no CUDA: opened the nodes itself to monitor */
    VG_LF_NO_CUDA,        /* holds nodes without a context and maps no CUDA library */
    VG_LF_OLDER_CONTEXT,  /* the dead PID it keeps charged is older than its session */
    VG_LF_LIVE_CONTEXT,   /* a live, older process of its session has a context on a GPU
                           * whose node it holds without one */
    VG_LF_LIVE_KIN,       /* a live, older process of its session that was not adopted runs
                           * its command line: the job it was forked from may run */
    VG_LF_SERVICE,        /* its cgroup is a service unit's */
    VG_LF_WORKS,          /* CPU time or GPU utilisation: it is doing something */
    VG_LF_STOPPED,        /* stopped (T): suspended by its owner or a debugger */
    /* weight 0: what was not known, which keeps the verdict from high */
    VG_LF_UNMEASURED,    /* whether it works could not be measured */
    VG_LF_GPU_UNKNOWN,   /* it has a context and the driver gives no utilisation for it */
    VG_LF_LISTS_UNKNOWN, /* it is in no driver list read, and some list could not be read */
    VG_LF_PIDS_FOREIGN,  /* the driver's PIDs may be another PID namespace's: not compared */
    VG_LF_PARENT_UNSURE, /* it hangs from a leftover that is itself not sure */
    VG_LF_COUNT
};

struct vg_left_fact {
    enum vg_left_fact_id id;
    int weight;
    pid_t pid;        /* the process it names: leader, parent, dead PID; 0 when none */
    size_t gpu;       /* CHARGES_*: the GPU (index into the snapshot's list) */
    bool bytes_known; /* CHARGES_*: what the driver charges there */
    uint64_t bytes;
    unsigned count; /* SIBLINGS: how many; WORKS: GPU utilisation, percent */
    bool zombie;    /* *_GONE: the leader is a zombie rather than gone */
};

/* Scores at and above which a process is a leftover at medium, and at high confidence (high
 * also needs no weight-0 fact and no sign of work). */
#define VG_LEFT_SCORE_MEDIUM 2
#define VG_LEFT_SCORE_HIGH 4

struct vg_leftover {
    pid_t pid;
    const struct vg_proc *proc;
    enum vg_left_verdict verdict;
    enum vg_confidence confidence; /* VG_LEFT_YES only */
    int score;                     /* the sum of the weights */
    struct vg_left_fact facts[VG_LF_COUNT];
    size_t nfacts;
    const char *why_not;     /* static: why NOT, or why YES is not high; NULL otherwise */
    pid_t via;               /* VG_LF_PARENT_LEFTOVER: that parent */
    pid_t job_pgid, job_sid; /* the ended job: its group and session (a worker's worker
                              * takes its leftover ancestor's) */
    bool nvml;               /* the driver lists it */
    bool bytes_known;
    uint64_t bytes; /* memory the driver attributes to it */
};

struct vg_leftovers {
    struct vg_leftover *v; /* one per holder process, by first holding */
    size_t n;
};

/* The fact of that id, or NULL. */
const struct vg_left_fact *vg_leftover_fact(const struct vg_leftover *l, enum vg_left_fact_id id);
/* "group-leader-gone", ...: stable, for JSON and tests. */
const char *vg_left_fact_name(enum vg_left_fact_id id);
/* What the fact says, for people, into out (cut to n, which a label-sized buffer holds). */
void vg_left_fact_text(const struct vg_snapshot *snap, const struct vg_leftover *l,
                       const struct vg_left_fact *f, char *out, size_t n);
/* "leftover", "not a leftover", "not considered" */
const char *vg_left_verdict_name(enum vg_left_verdict v);

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
/* Whether f names this PID, this GPU (a snapshot index). */
bool vg_finding_names_pid(const struct vg_finding *f, pid_t pid);
bool vg_finding_names_gpu(const struct vg_finding *f, size_t gpu);
/* A weighed verdict on one process of f, and its facts (text is copied). NULL for a NULL f or
 * out of memory. */
struct vg_verdict *vg_finding_verdict(struct vg_findings *out, struct vg_finding *f, pid_t pid,
                                      const char *verdict, enum vg_confidence conf, int score);
void vg_finding_verdict_fact(struct vg_findings *out, struct vg_verdict *v, const char *fact,
                             int weight, const char *text);

#endif
