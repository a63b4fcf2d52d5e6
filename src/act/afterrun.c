/*
 * The last look on a run's GPUs (see afterrun.h).
 */
#include "act/afterrun.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/sat.h"

/* The time between two looks while the view settles. */
#define VG_AFTERRUN_STEP_MS 250u

/* The snapshot's GPU with this UUID, or VG_SNAP_NO_GPU. */
static size_t vg_afterrun_snap_gpu(const struct vg_snapshot *snap, const char *uuid)
{
    for (size_t i = 0; uuid && i < snap->gpus.ngpus; i++)
        if (snap->gpus.gpus[i].uuid && strcmp(snap->gpus.gpus[i].uuid, uuid) == 0)
            return i;
    return VG_SNAP_NO_GPU;
}

/* Memory in use on after that was not before, while nothing holds it (count holders). */
static bool vg_afterrun_grew(const struct vg_gpu *before, const struct vg_gpu *after, size_t count)
{
    return count == 0 && (before->known & after->known & VG_GPU_K_MEM) &&
           after->mem_used > vg_sat_add(before->mem_used, VG_AFTERRUN_GROWTH_BYTES);
}

/* Whether what the snapshot shows on the job's GPUs may still be the driver catching up: a
 * process of the job that is gone but still listed, or memory in use and no holder at all. */
static bool vg_afterrun_unsettled(const struct vg_snapshot *snap,
                                  const struct vg_afterrun_gpu *gpus, size_t n,
                                  const struct vg_job *job)
{
    for (size_t i = 0; i < n; i++) {
        const struct vg_gpu *before = gpus[i].before;
        size_t gi = vg_afterrun_snap_gpu(snap, before->uuid);
        if (gi == VG_SNAP_NO_GPU)
            continue;
        size_t first, count;
        vg_snap_gpu_holdings(snap, gi, &first, &count);
        for (size_t k = first; k < first + count; k++) {
            const struct vg_holding *h = &snap->holdings[k];
            if (!h->proc && vg_job_was_member(job, h->pid))
                return true;
        }
        if (vg_afterrun_grew(before, &snap->gpus.gpus[gi], count))
            return true;
    }
    return false;
}

/* Whether the driver listed pid on this GPU (or its MIG devices) before the job started. */
static bool vg_afterrun_held_before(const struct vg_gpu *before, pid_t pid)
{
    for (size_t i = 0; i < before->nprocs; i++)
        if ((pid_t)before->procs[i].pid == pid)
            return true;
    for (size_t m = 0; m < before->nmig; m++)
        if (vg_afterrun_held_before(&before->mig[m], pid))
            return true;
    return false;
}

/* Classify what a->snap shows on the job's GPUs. */
static int vg_afterrun_classify(struct vg_afterrun *a, const struct vg_afterrun_gpu *gpus, size_t n,
                                const struct vg_job *job)
{
    const struct vg_snapshot *snap = a->snap;
    a->grew = calloc(n ? n : 1, sizeof(*a->grew));
    if (!a->grew)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct vg_gpu *before = gpus[i].before;
        size_t gi = vg_afterrun_snap_gpu(snap, before->uuid);
        if (gi == VG_SNAP_NO_GPU)
            continue;
        size_t first, count;
        vg_snap_gpu_holdings(snap, gi, &first, &count);
        for (size_t k = first; k < first + count; k++) {
            const struct vg_holding *h = &snap->holdings[k];
            if (h->mig >= 0 && gpus[i].mig >= 0 && h->mig != gpus[i].mig)
                continue;
            bool ours = vg_job_was_member(job, h->pid);
            enum vg_afterrun_what what = ours && h->proc ? VG_AFTERRUN_STUCK
                                         : ours          ? VG_AFTERRUN_UNRELEASED
                                         : vg_afterrun_held_before(before, h->pid)
                                             ? VG_AFTERRUN_HELD_BEFORE
                                             : VG_AFTERRUN_OTHER;
            struct vg_afterrun_holder *nv = realloc(a->v, (a->n + 1) * sizeof(*nv));
            if (!nv)
                return -ENOMEM;
            a->v = nv;
            nv[a->n++] = (struct vg_afterrun_holder){.gpu = i, .h = h, .what = what};
        }
        const struct vg_gpu *after = &snap->gpus.gpus[gi];
        if (vg_afterrun_grew(before, after, count))
            a->grew[i] = after->mem_used - before->mem_used;
    }
    return 0;
}

/* Tell the job's log that this look has no driver view. */
static void vg_afterrun_note(const struct vg_job *job, const struct vg_snapshot *snap)
{
    if (snap->driver_ok || !job->log)
        return;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "checking device nodes only: %s",
                  snap->driver_error ? snap->driver_error : "no driver");
    if (!b.err)
        job->log(job->log_ctx, vg_buf_str(&b));
    vg_buf_release(&b);
}

int vg_afterrun_look(const struct vg_snap_opts *so, const struct vg_afterrun_gpu *gpus, size_t n,
                     struct vg_job *job, struct vg_afterrun *out, struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    struct vg_snapshot *snap = NULL;
    unsigned waited = 0;
    for (;;) {
        int rc = vg_snap_build(so, &snap, err);
        if (rc)
            return rc;
        vg_afterrun_note(job, snap);
        if (waited >= VG_AFTERRUN_SETTLE_MS || !vg_afterrun_unsettled(snap, gpus, n, job))
            break;
        vg_snap_free(snap);
        snap = NULL;
        if (vg_job_sleep(job, VG_AFTERRUN_STEP_MS))
            break; /* asked to stop: report what there is, quickly */
        waited += VG_AFTERRUN_STEP_MS;
    }
    if (!snap) {
        /* interrupted between two looks: one more, without waiting */
        struct vg_err lerr = VG_ERR_INIT;
        int rc = vg_snap_build(so, &snap, &lerr);
        vg_err_release(&lerr);
        if (rc)
            return 0;
    }
    out->snap = snap;
    int rc = vg_afterrun_classify(out, gpus, n, job);
    if (rc) {
        vg_afterrun_release(out);
        return vg_err_set(err, rc, "out of memory");
    }
    return 0;
}

void vg_afterrun_release(struct vg_afterrun *a)
{
    vg_snap_free(a->snap);
    free(a->v);
    free(a->grew);
    memset(a, 0, sizeof(*a));
}
