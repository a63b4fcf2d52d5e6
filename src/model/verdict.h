/*
 * Verdicts as data: the findings of one sample, with their severity and confidence, and the idle
 * history the watch engine hands the rules. A finding is either a diagnosis of the rules
 * (rules/rules.h) or an alert: an expectation (`--expect`, rules/expect.h) the host breaks.
 * Both travel in one list; what tells them apart is the kind, which outputs use to list them
 * apart (check's "alerts" and "findings"). They live here, below rules/, because the watch
 * engine (model/watch.h) follows them from sample to sample without running or knowing any
 * rule; what fills them is rules/'s business.
 *
 * Ownership: struct vg_findings owns every finding, its strings and arrays, and the
 * unchecked note (release with vg_findings_release). Rule ids are static strings.
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

/* One fact a weighed verdict rests on, and its weight (docs/diagnoses.md lists them). */
struct vg_verdict_fact {
    const char *fact; /* static id, e.g. "group-leader-gone" */
    int weight;       /* positive for the verdict, negative against, 0 for "not known" */
    char *text;       /* what it says, for people */
};

/* A weighed verdict about one process of a finding (orphan-holder's leftovers). */
struct vg_verdict {
    pid_t pid;
    const char *verdict; /* static: "leftover", "not a leftover" */
    enum vg_confidence confidence;
    int score; /* the sum of the weights */
    struct vg_verdict_fact *facts;
    size_t nfacts, facts_cap;
};

/* A diagnosis of the rules, or an alert raised by an expectation. */
enum vg_finding_kind { VG_FINDING_DIAGNOSIS, VG_FINDING_ALERT };

struct vg_finding {
    enum vg_finding_kind kind;
    const char *rule; /* static id, e.g. "orphan-holder", "unexpected-holder" */
    enum vg_severity severity;
    enum vg_confidence confidence; /* VG_CONF_HIGH unless the rule says otherwise */
    char *title;                   /* one line: what is wrong, with numbers */
    size_t *gpus;                  /* indices into snap->gpus.gpus */
    size_t ngpus, gpus_cap;
    pid_t *pids;
    size_t npids, pids_cap;
    char **evidence; /* the facts it saw */
    size_t nevidence, evidence_cap;
    char **fix; /* what to do: commands, variables, lines of code */
    size_t nfix, fix_cap;
    bool bytes_known; /* the memory the finding concerns */
    uint64_t bytes;
    struct vg_verdict *verdicts; /* per process, for rules that weigh facts; else none */
    size_t nverdicts, verdicts_cap;
    /* Alerts only (diagnoses leave them -1, false and NULL): the one holding an alert is
     * about, when it is about one, and the expectation it breaks. */
    int mig; /* MIG device of the holding, or -1 */
    bool start_known;
    uint64_t start_ticks; /* the holder's start time: a reused PID is another alert */
    char *user;           /* NULL when unknown */
    char *command;        /* NULL when unknown */
    char *expect;         /* the expectation(s) for the GPU, "0=alice,bob" */
};

struct vg_findings {
    struct vg_finding *v;
    size_t n, cap;
    int err;         /* first failure while building (sticky): out of memory */
    char *unchecked; /* why some expectation could not be checked (no such GPU, no driver
                      * view); NULL when all could */
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

#endif
