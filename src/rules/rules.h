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
 * Ownership: struct vg_findings owns every finding and its strings and arrays; release it with
 * vg_findings_release(). Rule ids are static strings.
 */
#ifndef VG_RULES_RULES_H
#define VG_RULES_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "util/err.h"

enum vg_severity { VG_SEV_INFO, VG_SEV_WARNING, VG_SEV_CRITICAL };

struct vg_finding {
    const char *rule;        /* static id, e.g. "orphan-holder" */
    enum vg_severity severity;
    char *title;             /* one line: what is wrong, with numbers */
    size_t *gpus;            /* indices into snap->gpus.gpus */
    size_t ngpus;
    pid_t *pids;
    size_t npids;
    char **evidence;         /* the facts it saw */
    size_t nevidence;
    char **fix;              /* what to do: commands, variables, lines of code */
    size_t nfix;
    bool bytes_known;        /* the memory the finding concerns */
    uint64_t bytes;
};

struct vg_findings {
    struct vg_finding *v;
    size_t n;
    int err;                 /* first failure while building (sticky): out of memory */
};

/* Per-process idle history, supplied by `watch` (NULL elsewhere: idle-holder then says
 * nothing, because one sample cannot tell idle from between two kernels). */
struct vg_idle_info {
    pid_t pid;
    size_t gpu;
    uint64_t idle_ms;        /* how long this holding has shown zero utilisation */
};

struct vg_rule_opts {
    uint64_t context_max;     /* a holding up to this is "context-sized" (default 1 GiB) */
    uint64_t unattributed_min;/* unexplained memory above this is a finding (default 256 MiB) */
    double prealloc_fraction; /* TF/JAX holding at least this share of a GPU (default 0.7) */
    /* The environment of the shell vramguard runs in: checked like a process's. */
    const char *shell_cvd;    /* NULL when unset */
    const char *shell_order;  /* NULL when unset */
    bool check_shell;
    /* idle-holder */
    const struct vg_idle_info *idle;
    size_t nidle;
    uint64_t idle_min_ms;     /* default 1 h */
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
    const char *sees;        /* one line for `doctor --list` and docs */
};

/* The table, in run order. */
const struct vg_rule_def *vg_rules_table(size_t *n);

/* Run every rule. Returns 0, or -ENOMEM with err set (findings so far are kept). */
int vg_rules_run(const struct vg_snapshot *snap, const struct vg_rule_opts *opts,
                 struct vg_findings *out, struct vg_err *err);

void vg_findings_init(struct vg_findings *f);
void vg_findings_release(struct vg_findings *f);
/* Highest severity among the findings, or -1 when there are none. */
int vg_findings_max_severity(const struct vg_findings *f);
const char *vg_severity_str(enum vg_severity s);
/* Does an earlier finding of rule id already name this pid (on this gpu, or any gpu when gpu
 * is VG_SNAP_NO_GPU)? */
bool vg_findings_has_pid(const struct vg_findings *f, const char *rule, pid_t pid, size_t gpu);

/* Building findings: each call records out-of-memory in out->err and otherwise cannot fail,
 * so rules stay free of error plumbing. */
struct vg_finding *vg_finding_add(struct vg_findings *out, const char *rule,
                                  enum vg_severity sev);
void vg_finding_title(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vg_finding_evidence(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vg_finding_fix(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vg_finding_gpu(struct vg_findings *out, struct vg_finding *f, size_t gpu);
void vg_finding_pid(struct vg_findings *out, struct vg_finding *f, pid_t pid);

#endif
