/*
 * Verdicts as data: the findings the rules produce (rules/rules.h) and the alerts of `watch`'s
 * expectations (rules/expect.h), with their severity and confidence, and the idle history the
 * watch engine hands the rules. They live here, below rules/, because the watch engine
 * (model/engine.h) follows them from sample to sample without running or knowing any rule;
 * what fills them is rules/'s business.
 *
 * Ownership: struct vg_findings owns every finding and its strings and arrays (release with
 * vg_findings_release); struct vg_alerts owns its alerts' strings and problem
 * (vg_alerts_release). Rule ids and alert kinds are static strings.
 */
#ifndef VG_MODEL_VERDICT_H
#define VG_MODEL_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum vg_severity { VG_SEV_INFO, VG_SEV_WARNING, VG_SEV_CRITICAL };

/* How sure a finding is. Most rules see facts (a zombie is a zombie) and are high; a verdict
 * built from circumstantial evidence (orphan-holder) says how strong that evidence was, and
 * what acts on findings (clean's default targets) takes only the high ones. */
enum vg_confidence { VG_CONF_LOW, VG_CONF_MEDIUM, VG_CONF_HIGH };

struct vg_finding {
    const char *rule; /* static id, e.g. "orphan-holder" */
    enum vg_severity severity;
    enum vg_confidence confidence; /* VG_CONF_HIGH unless the rule says otherwise */
    char *title;                   /* one line: what is wrong, with numbers */
    size_t *gpus;                  /* indices into snap->gpus.gpus */
    size_t ngpus;
    pid_t *pids;
    size_t npids;
    char **evidence; /* the facts it saw */
    size_t nevidence;
    char **fix; /* what to do: commands, variables, lines of code */
    size_t nfix;
    bool bytes_known; /* the memory the finding concerns */
    uint64_t bytes;
};

struct vg_findings {
    struct vg_finding *v;
    size_t n;
    int err; /* first failure while building (sticky): out of memory */
};

void vg_findings_init(struct vg_findings *f);
void vg_findings_release(struct vg_findings *f);

/* Per-process idle history, supplied by `watch` (NULL elsewhere: idle-holder then says
 * nothing, because one sample cannot tell idle from between two kernels). */
struct vg_idle_info {
    pid_t pid;
    size_t gpu;
    uint64_t idle_ms; /* how long this holding has shown zero utilisation */
};

/* Alert kinds (static strings, part of the JSON interface). */
#define VG_ALERT_UNEXPECTED_HOLDER "unexpected-holder"
#define VG_ALERT_GPU_NOT_EMPTY "gpu-not-empty"

struct vg_alert {
    const char *kind; /* VG_ALERT_* */
    enum vg_severity severity;
    size_t gpu;   /* index into the snapshot's GPU list */
    int mig;      /* MIG device of the holding, or -1 */
    bool has_pid; /* unexpected-holder */
    pid_t pid;
    bool start_known;
    uint64_t start_ticks;
    char *user;    /* NULL when unknown */
    char *command; /* NULL when unknown */
    bool bytes_known;
    uint64_t bytes; /* the holder's memory, or the GPU's used memory */
    char *expect;   /* the expectation(s) for the GPU, "0=alice,bob" */
    char *message;  /* one line, without severity */
};

struct vg_alerts {
    struct vg_alert *v;
    size_t n;
    char *problem; /* why some expectation could not be checked (no such GPU,
                    * no driver view); NULL when all could */
};

void vg_alerts_init(struct vg_alerts *a);
void vg_alerts_release(struct vg_alerts *a);

#endif
