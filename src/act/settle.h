/*
 * Stop and settle: the one procedure `clean`, `run`, `handoff` and `top` share. Stop a set of
 * processes (act/kill.h: pidfd, identity re-check, SIGTERM -> grace -> SIGKILL), look again
 * through the caller's callback until the driver has caught up or the timeout passes, and say
 * per GPU whether the memory came back, and per process what became of it.
 *
 * Who is stopped, two ways (one per call):
 * - fixed targets (`clean`, `top`, `run`): req->targets, identities planned beforehand
 *   (act/plan.h); those with signal set are signalled once, in the first round; the others are
 *   listed (a zombie, a process in D state: no signal frees their memory) and judged, never
 *   signalled; those the caller stopped itself (stopped: `run`'s job, which act/job.h stopped
 *   and reaped) are judged as stopped targets, with the outcome the caller gives;
 * - by owner (`handoff`): req->whose classifies every holder a look shows; a holder it calls
 *   VG_SETTLE_TARGET is signalled in the next round, so a process that appears between looks
 *   is stopped too.
 * Holders are otherwise infrastructure (expected: counted into the baseline, never acted on),
 * another's (held by another), or unseen (only the driver lists the PID).
 *
 * What each GPU ends as (enum vg_settle_state, best first) and its cause (why, a static id:
 * "free", "stopped", "memory-unknown", "look-failed", "unexplained", "holder", "stuck",
 * "survived", "d-state", "lost", "hung", "missing"):
 * - free: nothing held it beyond the baseline, nothing was stopped on it;
 * - freed: targets were stopped on it and the memory came back;
 * - unknown: its memory could not be read, or a later look failed;
 * - unexplained: memory above the baseline with no holder, nothing stopped on it;
 * - held: a holder that is not a target (or a PID only the driver lists);
 * - not released: a target has exited, but the driver still lists its PID;
 * - stuck: the targets are gone but the memory did not come back;
 * - wedged: lost, hung, missing, a holder in D state, a target that outlived SIGKILL or may not
 *   be signalled (a zombie).
 * reset_needed says that only a GPU reset (or a reboot) frees what is held: memory stuck with
 * no process left and nothing that could hide one, a holder in D state, a target that outlived
 * SIGKILL.
 *
 * The look callback is the caller's (cmd/ builds snapshots), so every wait on the driver is
 * bounded by the snapshot's own deadline worker. Nothing here prints; render/settle.h words
 * the result.
 *
 * Ownership: struct vg_settle_result owns everything it points to (vg_settle_result_release),
 * including the last look (last, NULL when the first look was the last); the identities of
 * fixed targets are borrowed from the request and must outlive the result; why and
 * protected_name are static strings.
 */
#ifndef VG_ACT_SETTLE_H
#define VG_ACT_SETTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "act/infra.h"
#include "act/kill.h"
#include "act/plan.h"
#include "model/snapshot.h"
#include "util/err.h"

/* Ordered from best to worst. */
enum vg_settle_state {
    VG_SETTLE_FREE,
    VG_SETTLE_FREED,
    VG_SETTLE_UNKNOWN,
    VG_SETTLE_UNEXPLAINED,
    VG_SETTLE_HELD,
    VG_SETTLE_NOT_RELEASED,
    VG_SETTLE_STUCK,
    VG_SETTLE_WEDGED,
};

/* "free", "freed", "unknown", "unexplained", "held", "not-released", "stuck", "wedged" */
const char *vg_settle_state_id(enum vg_settle_state s);

enum vg_settle_owner {
    VG_SETTLE_TARGET,   /* to be stopped */
    VG_SETTLE_INFRA,    /* infrastructure, vramguard, its ancestors: expected, never acted on */
    VG_SETTLE_OTHER,    /* another's: never acted on */
    VG_SETTLE_UNSEEN,   /* the driver lists a PID this /proc does not show */
    VG_SETTLE_LEFTOVER, /* a leftover not acted on here (the hand-off's node check) */
};

/* Whose is p (a holder a look shows): evidence gets the caller's bits (kept with the holder),
 * infra what p is as infrastructure (act/infra.h: the name it claims and the facts, whatever
 * the owner decided). Called at every look; a holder once a target stays one (its environment
 * may be gone once it is a zombie). */
typedef enum vg_settle_owner (*vg_settle_whose_fn)(void *ctx, const struct vg_proc *p,
                                                   unsigned *evidence, struct vg_infra *infra);

/* A fresh look at the host: 0 with *snap set (freed with vg_snap_free), or non-zero when even
 * /proc could not be read (the callee has said why). */
typedef int (*vg_settle_look_fn)(void *ctx, struct vg_snapshot **snap);

/* A process planned beforehand. */
struct vg_settle_target {
    const struct vg_kill_identity *id; /* borrowed */
    bool signal;                       /* false: judged, never signalled (refusal says why) */
    enum vg_kill_refusal refusal;
    /* Stopped by the caller before (signal false): what became of it, as its kill record says
     * (VG_KILL_TERMINATED, VG_KILL_KILLED, VG_KILL_GONE: it exited unsignalled, VG_KILL_FAILED
     * with error -ETIMEDOUT: it outlived SIGKILL). */
    bool stopped;
    enum vg_kill_outcome outcome;
    int error;
};

/* A GPU to judge, as the first look shows it: its index there, or VG_SETTLE_NO_GPU for one
 * the caller could not find (it is "missing"). ref is the caller's (e.g. which selector). */
#define VG_SETTLE_NO_GPU ((size_t)-1)
struct vg_settle_want {
    size_t gpu;
    size_t ref;
};

struct vg_settle_req {
    const struct vg_settle_target *targets; /* fixed targets; with whose NULL */
    size_t ntargets;
    vg_settle_whose_fn whose; /* by owner; NULL: fixed targets */
    void *whose_ctx;
    const struct vg_settle_want *gpus; /* the GPUs to judge */
    size_t ngpus;
    uint64_t grace_ms;     /* SIGTERM -> SIGKILL */
    uint64_t kill_wait_ms; /* after SIGKILL; 0: VG_SETTLE_KILL_WAIT_MS */
    uint64_t timeout_ms;   /* how long to look again for the memory to come back */
    unsigned poll_ms;      /* between looks; 0: VG_SETTLE_POLL_MS */
    uint64_t tolerance;    /* bytes above the baseline that still count as free */
    bool stop;             /* false: only look (a prolog): nothing is signalled, one look */
    bool look_after;       /* look at least once after the stop, even when nothing was sent */
    /* Settled right after signals were sent: wait this long and look once more before saying
     * so (within timeout_ms), since a leftover that re-opens the GPU a moment after SIGTERM, or
     * a parent that starts a new one, holds it again; 0: no such look. */
    unsigned quiet_ms;
    int proc_root_fd;    /* the procfs, numbering PIDs as this process does */
    const char *dev_dir; /* NULL: the snapshot's */
    struct vg_kill_ctx who;
    vg_kill_nvml_fn nvml; /* the driver asked afresh before a signal; NULL: fds only */
    void *nvml_arg;
    volatile const int *cancel; /* optional: non-zero ends the wait between looks early */
    /* optional: the wait between looks (instead of the clock's), e.g. one that a signal ends
     * (act/job.h's); non-zero: it was cut short, and that ends the wait as cancel does */
    int (*sleep)(void *ctx, unsigned ms);
    void *sleep_ctx;
};

#define VG_SETTLE_POLL_MS 250u
/* After SIGKILL a process normally goes at once; one stuck in the kernel never does. */
#define VG_SETTLE_KILL_WAIT_MS 5000u

/* One process on one GPU, as last seen, and what was done to it. */
struct vg_settle_holder {
    pid_t pid;
    uint64_t start_ticks;
    bool uid_known;
    uid_t uid;
    char *user, *comm; /* owned copies; NULL when unknown */
    char state;        /* '?' when unknown */
    enum vg_settle_owner owner;
    unsigned evidence;          /* the whose callback's bits */
    const char *protected_name; /* owner INFRA by its executable: the program; NULL else */
    struct vg_infra infra;      /* what it claims to be and the facts (act/infra.h) */
    unsigned seen;              /* VG_SEEN_* */
    bool mem_known;
    uint64_t mem_bytes;
    bool present; /* still holds the GPU at the last look */
    bool signalled;
    enum vg_kill_outcome outcome; /* signalled: what became of it */
    enum vg_kill_refusal refusal; /* a target not signalled (or refused at signal time) */
    int error;                    /* VG_KILL_FAILED */
};

struct vg_settle_gpu {
    size_t ref;        /* the caller's, from the request */
    bool found;        /* the driver lists it */
    char *uuid, *name; /* owned; NULL when unknown */
    unsigned index, minor;
    bool minor_known;
    enum vg_settle_state state;
    const char *why; /* the state's cause (see above) */
    bool mem_known;
    uint64_t used, baseline; /* bytes; used as the driver reports it at the last look */
    bool before_known;
    uint64_t before; /* used at the first look */
    bool reset_needed;
    struct vg_settle_holder *holders; /* every holder seen, in the order first seen */
    size_t nholders, holders_cap;     /* holders_cap: util/array.h's capacity */
    size_t nstopped;                  /* targets signalled on it */
    uint64_t settled_ms; /* from the start until it was seen settled for good (at least 1);
                          * 0: not settled at the last look */
};

struct vg_settle_result {
    bool driver_ok; /* false: nothing was judged, nothing signalled */
    bool driver_hung;
    char *driver_error; /* owned */
    struct vg_settle_gpu *gpus;
    size_t ngpus;
    /* Per process signalled or refused: with fixed targets, one per target in their order
     * (kills[i].id is targets[i].id); by owner, one per process picked, in the order picked
     * (ids owned here). An unsignalled fixed target is VG_KILL_REFUSED with its refusal. */
    struct vg_kill *kills;
    struct vg_kill_identity *ids; /* by owner: the identities kills point to */
    size_t nkills;
    size_t nsignalled; /* processes a signal reached, over all GPUs (each counted once) */
    unsigned looks;    /* snapshots taken, the first included */
    uint64_t elapsed_ms;
    bool timed_out;           /* some GPU was not settled when the timeout passed */
    bool may_hide;            /* some processes' descriptors could not be read (or hidepid) */
    bool hidepid;             /* the procfs hides other users' processes */
    struct vg_snapshot *last; /* the last look taken after the first; NULL: none */
};

void vg_settle_result_init(struct vg_settle_result *r);
void vg_settle_result_release(struct vg_settle_result *r);

/* Record the GPUs of first (borrowed) into res without stopping or judging anything: the
 * figures and holders, for a caller that judges itself (the hand-off's node check). 0 or
 * -ENOMEM (err set). */
int vg_settle_record(const struct vg_settle_req *req, const struct vg_snapshot *first,
                     struct vg_settle_result *res, struct vg_err *err);

/* Stop and settle, from first (the caller's look, borrowed). Without the driver's view nothing
 * is judged and nobody looked at again: fixed targets are stopped, and that is all. Later looks
 * come from look(ctx). Returns 0 with res filled
 * (a later look that failed leaves the GPUs not judged worse "look-failed"; a later look
 * without the driver leaves every GPU wedged "hung"), or -ENOMEM (err set). */
int vg_settle_run(const struct vg_settle_req *req, const struct vg_snapshot *first,
                  vg_settle_look_fn look, void *ctx, struct vg_settle_result *res,
                  struct vg_err *err);

/* Fixed targets from a plan: every entry, signal as planned (and, with chosen, only the chosen
 * ones; the others are left out). *out is the caller's to free(). 0 or -ENOMEM. */
int vg_settle_targets_from_plan(const struct vg_plan *plan, const bool *chosen,
                                struct vg_settle_target **out, size_t *n);

/* The GPU of res for the first look's GPU index gi, or NULL. */
const struct vg_settle_gpu *vg_settle_gpu_of(const struct vg_settle_result *res, size_t ref);

/* The kill record of pid among res->kills, or NULL. */
const struct vg_kill *vg_settle_kill_of(const struct vg_settle_result *res, pid_t pid);

#endif
