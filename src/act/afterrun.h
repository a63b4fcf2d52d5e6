/*
 * After a `run` job has ended and act/job.h has stopped and reaped what it left: what is still
 * on its GPUs. The job's processes are act/settle.h's fixed targets, stopped already (each
 * with what the cleanup did to it: exited on its own, after SIGTERM, after SIGKILL, or
 * outlived SIGKILL); settle looks again for a moment while what it shows may be the driver
 * catching up (a process of the job gone but still listed, memory in use with no holder), and
 * judges each GPU as it does for `clean` and `handoff` (render/settle.h words it). What only
 * run knows is added: which other holders held the GPU before the job too, and how much memory
 * grew during the job while no process holds it. Nothing here prints: the command words it.
 *
 * Ownership: struct vg_afterrun owns its settle result, its first look and its arrays
 * (vg_afterrun_release()); the notes point into its settle result and snapshots. The request's
 * GPUs and processes are borrowed.
 */
#ifndef VG_ACT_AFTERRUN_H
#define VG_ACT_AFTERRUN_H

#include <stddef.h>
#include <stdint.h>

#include "act/job.h"
#include "act/settle.h"
#include "model/snapshot.h"
#include "util/err.h"

/* The driver frees a context's memory shortly after the process is gone: look again for up
 * to this long before calling memory still held. */
#define VG_AFTERRUN_SETTLE_MS 2000u
/* Growth in used memory worth reporting when no process holds the GPU any more; also the
 * tolerance of settle's verdict. */
#define VG_AFTERRUN_GROWTH_BYTES ((uint64_t)256 << 20)

/* One GPU the job had: the driver's view of it before the job, and the MIG instance it was
 * given (-1: the whole GPU). */
struct vg_afterrun_gpu {
    const struct vg_gpu *before;
    int mig;
};

struct vg_afterrun_req {
    const struct vg_afterrun_gpu *gpus; /* the settle result's ref is the index in this */
    size_t n;
    const struct vg_job_procs *members;      /* every process of the job (job->seen) */
    const struct vg_job_cleanup_report *rep; /* what the cleanup did; NULL: nothing */
    struct vg_kill_ctx who;                  /* vramguard itself, as the procfs numbers it */
    uint64_t timeout_ms;                     /* 0: VG_AFTERRUN_SETTLE_MS */
    unsigned poll_ms;                        /* 0: act/settle.h's */
    /* optional: the wait between looks (run: vg_job_sleep(), which a terminating signal cuts
     * short; then one more look is taken, without waiting) */
    int (*sleep)(void *ctx, unsigned ms);
    void *sleep_ctx;
};

/* A holder of one of the job's GPUs that is not the job's: said apart from the verdict. */
struct vg_afterrun_note {
    size_t gpu;                       /* index into the request's GPUs */
    const struct vg_settle_holder *h; /* in s */
    const struct vg_proc *proc;       /* in the last look; NULL: /proc does not show it */
    bool before;                      /* the driver listed it on this GPU before the job too */
};

struct vg_afterrun {
    struct vg_settle_result s;  /* per GPU of the request, in its order (ref: the index) */
    struct vg_snapshot *first;  /* the first look (s.last is the last, when later) */
    struct vg_afterrun_note *v; /* by GPU, in the order settle saw them within one */
    size_t n;
    uint64_t *grew; /* per GPU given: memory in use beyond what it was before the job while no
                     * process holds it, when above VG_AFTERRUN_GROWTH_BYTES; else 0 */
    struct vg_kill_identity *ids; /* the targets' identities (s.kills point to them) */
    size_t nids;
};

/* The last look at the job's n GPUs through look (the first look too), settled as act/settle.h
 * does. 0 with *out filled; a negative errno with err set when the first look failed (look has
 * said why) or memory ran out. */
int vg_afterrun_check(const struct vg_afterrun_req *req, vg_settle_look_fn look, void *ctx,
                      struct vg_afterrun *out, struct vg_err *err);
void vg_afterrun_release(struct vg_afterrun *a);

/* The last look the check took (NULL before a check). */
const struct vg_snapshot *vg_afterrun_last(const struct vg_afterrun *a);

#endif
