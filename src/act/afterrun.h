/*
 * After a `run` job has ended and its leftovers were stopped: what is still on its GPUs. A
 * snapshot (NVML + the fd scan) is taken, and taken again for a moment while what it shows
 * may be the driver catching up (a process of the job gone but still listed, memory in use
 * with no holder at all); then each holder of the job's GPUs is classified: a process of the
 * job that could not be stopped, one that exited but whose memory the driver has not
 * released, a process that held the GPU before the job too, or another one. Memory that grew
 * during the job with no holder left is measured. Nothing here prints: the command words it.
 *
 * Ownership: struct vg_afterrun owns its snapshot and arrays (vg_afterrun_release()); the
 * holders point into its snapshot. The GPUs given are borrowed.
 */
#ifndef VG_ACT_AFTERRUN_H
#define VG_ACT_AFTERRUN_H

#include <stddef.h>
#include <stdint.h>

#include "act/job.h"
#include "model/snapshot.h"
#include "util/err.h"

/* The driver frees a context's memory shortly after the process is gone: look again for up
 * to this long before calling memory still held. */
#define VG_AFTERRUN_SETTLE_MS 2000u
/* Growth in used memory worth reporting when no process holds the GPU any more. */
#define VG_AFTERRUN_GROWTH_BYTES ((uint64_t)256 << 20)

/* One GPU the job had: the driver's view of it before the job, and the MIG instance it was
 * given (-1: the whole GPU). */
struct vg_afterrun_gpu {
    const struct vg_gpu *before;
    int mig;
};

enum vg_afterrun_what {
    VG_AFTERRUN_STUCK,       /* a process of the job still running: it could not be stopped */
    VG_AFTERRUN_UNRELEASED,  /* a process of the job that has exited; the driver still has it */
    VG_AFTERRUN_HELD_BEFORE, /* not the job's: it held the GPU before the job too */
    VG_AFTERRUN_OTHER,       /* not started by the job */
};

struct vg_afterrun_holder {
    size_t gpu;                 /* index into the GPUs given */
    const struct vg_holding *h; /* in the snapshot */
    enum vg_afterrun_what what;
};

struct vg_afterrun {
    struct vg_snapshot *snap;     /* NULL when the last look could not be taken */
    struct vg_afterrun_holder *v; /* by GPU, in the snapshot's order within one */
    size_t n;
    uint64_t *grew; /* per GPU given: memory in use beyond what it was before the job while no
                     * process holds it, when above VG_AFTERRUN_GROWTH_BYTES; else 0 */
};

/* Look at the job's n GPUs through so, waiting while the view may be unsettled (up to
 * VG_AFTERRUN_SETTLE_MS; a terminating signal through vg_job_sleep() cuts it short). Each look
 * whose driver view is unavailable is told to job->log. 0 with *out filled (out->snap NULL
 * when interrupted and the last look failed), or a negative errno with err set when the first
 * look failed. */
int vg_afterrun_look(const struct vg_snap_opts *so, const struct vg_afterrun_gpu *gpus, size_t n,
                     struct vg_job *job, struct vg_afterrun *out, struct vg_err *err);
void vg_afterrun_release(struct vg_afterrun *a);

#endif
