/*
 * The hand-off between scheduler jobs (`vramguard handoff prolog|epilog|node`): is a job's set
 * of GPUs ready for the next job, and, after a job, stopping what that job left holding them;
 * node: is any GPU holding memory no running job holds.
 *
 * Whose is a holder (enum vg_handoff_owner): this job's when its real uid is the job's and its
 * environment names the job (SLURM_JOB_ID) or its cgroup does (a path component "job_ID", as
 * Slurm's cgroup plugins name it); infrastructure (counted into the baseline) only when it is
 * vramguard itself or its ancestors (by PID), or proven by its executable, run by root or a
 * system uid that is not the job's, in no job's cgroup (act/infra.h, vg_infra_baseline): a
 * process that merely calls itself Xorg is a holder like any other, and so is a real daemon
 * whose binary was replaced since it started;
 * anyone else's otherwise, including a process of the same user that carries no mark of the
 * job (it may be another job's) and one whose environment could not be read. Only this job's
 * holders are ever signalled, through act/kill.h's pidfd and identity re-check, and only after
 * a job (the epilog); a prolog only looks.
 *
 * What each GPU ends as (enum vg_handoff_state, worst first):
 * - wedged: lost, hung (a driver call did not return within the deadline; the whole driver
 *   hung is every GPU wedged), missing from the
 *   driver's list, a holder stuck in the driver (D state) or one that outlived SIGKILL, or
 *   memory that did not come back once this job's holders were gone;
 * - dirty: held by a process that is not this job's, or memory above the baseline with no
 *   holder that was stopped (someone not visible holds it);
 * - unknown: its memory could not be read (and the whole verdict, without the driver's view);
 * - cleaned: this job's leftovers were stopped and the memory came back;
 * - clean: nothing held it.
 * The baseline is the tolerance, plus the driver's reservation where the driver counts it as
 * used (the v1 memory call: taken as 512 MiB, as clean does), plus what infrastructure holds.
 *
 * The stop, the looks after it until each GPU is settled or the timeout passes, and the
 * verdict per GPU are act/settle.h's, with this job's holders as its targets; this file says
 * whose a holder is, names the GPUs and turns the settled GPUs into the scheduler's words.
 *
 * Ownership: struct vg_handoff_result owns everything it points to except sel
 * (vg_handoff_result_release); reason ids and protected names are static strings.
 */
#ifndef VG_ACT_HANDOFF_H
#define VG_ACT_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "act/kill.h"
#include "act/settle.h"
#include "model/snapshot.h"
#include "util/err.h"

/* node: every GPU, no job, nothing touched: is memory held that no running job holds (the
 * periodic check of a node, e.g. Kubernetes' Node Problem Detector or Slurm's
 * HealthCheckProgram)? */
enum vg_handoff_mode { VG_HANDOFF_PROLOG, VG_HANDOFF_EPILOG, VG_HANDOFF_NODE };

/* Ordered from best to worst; the overall state is the worst of the GPUs'. */
enum vg_handoff_state {
    VG_HANDOFF_CLEAN,
    VG_HANDOFF_CLEANED,
    VG_HANDOFF_UNKNOWN,
    VG_HANDOFF_DIRTY,
    VG_HANDOFF_WEDGED,
};

/* "clean", "cleaned", "unknown", "dirty", "wedged" */
const char *vg_handoff_state_id(enum vg_handoff_state s);

/* Whose is a holder: act/settle.h's owners, the job's holders its targets (VG_SETTLE_TARGET),
 * a sure leftover or a zombie of an ended job VG_SETTLE_LEFTOVER (node mode). */
/* "job", "infrastructure", "other", "unseen", "leftover" */
const char *vg_handoff_owner_id(enum vg_settle_owner o);

/* Why a process is (or is not) the job's, as bits. */
enum {
    VG_HANDOFF_EV_UID = 1u << 0,         /* its real uid is the job's */
    VG_HANDOFF_EV_ENV = 1u << 1,         /* SLURM_JOB_ID in its environment names the job */
    VG_HANDOFF_EV_CGROUP = 1u << 2,      /* its cgroup path has the job's component */
    VG_HANDOFF_EV_OTHER_UID = 1u << 3,   /* its uid is another */
    VG_HANDOFF_EV_OTHER_JOB = 1u << 4,   /* SLURM_JOB_ID names another job */
    VG_HANDOFF_EV_ENV_UNKNOWN = 1u << 5, /* its environment could not be read */
};

/* Names of the VG_HANDOFF_EV_* bits for JSON ("uid", "environment", "cgroup", "other-uid",
 * "other-job", "environment-unreadable"); bit is one of them. */
const char *vg_handoff_evidence_id(unsigned bit);

/* The job, as the scheduler names it. */
struct vg_handoff_job {
    const char *id; /* SLURM_JOB_ID; NULL: none known (only a prolog may go without) */
    bool uid_known;
    uid_t uid;
};

/* Whose is p (the pure part, for tests): sets *evidence to VG_HANDOFF_EV_* bits and *infra to
 * what p is as infrastructure (act/infra.h; with vg_infra_baseline's facts when it claims a
 * name). Infrastructure (VG_SETTLE_INFRA) is vramguard, its ancestors, init and kernel threads
 * by PID, and a program vg_infra_baseline accepts: proven by its executable, run by root or a
 * system uid that is not the job's. */
enum vg_settle_owner vg_handoff_owner_of(const struct vg_proc *p, const struct vg_handoff_job *job,
                                         const struct vg_kill_ctx *who, unsigned *evidence,
                                         struct vg_infra *infra);

/* A GPU as the scheduler names it. */
enum vg_handoff_sel_kind {
    VG_HANDOFF_SEL_MINOR, /* Slurm's number: the N of /dev/nvidiaN in gres.conf */
    VG_HANDOFF_SEL_INDEX, /* NVML's index, as nvidia-smi numbers GPUs */
    VG_HANDOFF_SEL_UUID,  /* a UUID or a unique prefix of one */
};

struct vg_handoff_sel {
    enum vg_handoff_sel_kind kind;
    unsigned number;  /* MINOR, INDEX */
    const char *text; /* UUID; also what the user wrote, for messages */
};

/* A list of GPUs as the scheduler or a person writes it: comma-separated; with slurm, Slurm's
 * numbers and ranges ("0,2-3"), else NVML indices and UUIDs (or unique prefixes). Repeats are
 * dropped. Ownership: the selectors point into copy; vg_handoff_sels_release frees both. */
struct vg_handoff_sels {
    struct vg_handoff_sel *v;
    size_t n, cap;
    char *copy;
};

/* More GPUs than any node has: a list naming more is refused rather than expanded. */
#define VG_HANDOFF_SEL_MAX 1024u

/* 0; -EINVAL (a word that names no GPU, or an empty list) or -E2BIG (more than
 * VG_HANDOFF_SEL_MAX) with err saying why; -ENOMEM. out is empty on failure. */
int vg_handoff_sels_parse(const char *list, bool slurm, struct vg_handoff_sels *out,
                          struct vg_err *err);
void vg_handoff_sels_release(struct vg_handoff_sels *s);

/* Does the cgroup path have the component "job_ID" (Slurm: .../job_42/step_0/...)? */
bool vg_handoff_cgroup_names(const char *cgroup, const char *id);

struct vg_handoff_req {
    enum vg_handoff_mode mode;
    struct vg_handoff_job job;
    const struct vg_handoff_sel *sel; /* borrowed; nsel > 0 */
    size_t nsel;
    uint64_t timeout_ms; /* how long the epilog waits for memory to come back */
    uint64_t grace_ms;   /* SIGTERM -> SIGKILL */
    uint64_t tolerance;  /* bytes above the baseline that still count as free */
    unsigned poll_ms;    /* between looks while waiting; 0: 250 */
    int proc_root_fd;    /* the procfs, numbering PIDs as this process does */
    struct vg_kill_ctx who;
    vg_kill_nvml_fn nvml; /* the driver asked afresh before a signal; NULL: fds only */
    void *nvml_arg;
};

/* The verdict: the GPUs, their holders and what was done are act/settle.h's result (each GPU's
 * ref is the index of the selector that named it; every GPU in node mode, ref its index). */
struct vg_handoff_result {
    enum vg_handoff_state state;
    struct vg_settle_result s;
    const struct vg_handoff_sel *sel; /* borrowed from the request; NULL in node mode */
};

/* What a settled GPU is to the scheduler: free clean, freed cleaned, unknown, held, unexplained
 * and not released dirty, stuck and wedged wedged. */
enum vg_handoff_state vg_handoff_gpu_state(const struct vg_settle_gpu *g);
/* The selector that named g, or NULL (node mode). */
const struct vg_handoff_sel *vg_handoff_gpu_sel(const struct vg_handoff_result *r,
                                                const struct vg_settle_gpu *g);

void vg_handoff_result_init(struct vg_handoff_result *r);
void vg_handoff_result_release(struct vg_handoff_result *r);

/* A fresh look at the host (act/settle.h's look). */
typedef vg_settle_look_fn vg_handoff_look_fn;

/* Run the hand-off. Returns 0 with res filled (its state is the verdict, UNKNOWN included: a
 * later look that failed leaves the GPUs not judged worse "look-failed"), a positive value
 * when the first look failed (res empty), or -ENOMEM (err set). */
int vg_handoff_run(const struct vg_handoff_req *req, vg_handoff_look_fn look, void *ctx,
                   struct vg_handoff_result *res, struct vg_err *err);

/* Node mode, from one snapshot and its findings (judged with activity measured): every GPU of
 * snap, each clean, dirty (memory no running job holds beyond req->tolerance: rules/reason.h's
 * leftover memory), unknown or wedged (lost, hung, a holder in D state). Nothing is signalled.
 * 0, or -ENOMEM (err set). */
struct vg_findings;
int vg_handoff_node(const struct vg_handoff_req *req, const struct vg_snapshot *snap,
                    const struct vg_findings *fs, struct vg_handoff_result *res,
                    struct vg_err *err);

#endif
