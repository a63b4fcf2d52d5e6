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

/* Memory in use on after that was not before, while nothing holds it (count holders). */
static bool vg_afterrun_grew(const struct vg_gpu *before, const struct vg_gpu *after, size_t count)
{
    return count == 0 && (before->known & after->known & VG_GPU_K_MEM) &&
           after->mem_used > vg_sat_add(before->mem_used, VG_AFTERRUN_GROWTH_BYTES);
}

/* What a walk over the job's GPUs is told of each that the snapshot shows: i (in gpus), what the
 * GPU looks like now, and its holdings (count of them from hs on). Nonzero stops the walk. */
typedef int (*vg_afterrun_visit)(void *ctx, size_t i, const struct vg_gpu *after,
                                 const struct vg_holding *hs, size_t count);

/* The one walk over the job's GPUs as snap shows them (found by UUID); a GPU it does not show
 * is passed over. The first nonzero visit's value, or 0. */
static int vg_afterrun_walk(const struct vg_snapshot *snap, const struct vg_afterrun_gpu *gpus,
                            size_t n, vg_afterrun_visit visit, void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        const char *uuid = gpus[i].before->uuid;
        for (size_t gi = 0; uuid && gi < snap->gpus.ngpus; gi++) {
            if (!snap->gpus.gpus[gi].uuid || strcmp(snap->gpus.gpus[gi].uuid, uuid) != 0)
                continue;
            size_t first, count;
            vg_snap_gpu_holdings(snap, gi, &first, &count);
            int rc =
                visit(ctx, i, &snap->gpus.gpus[gi], count ? &snap->holdings[first] : NULL, count);
            if (rc)
                return rc;
            break;
        }
    }
    return 0;
}

struct vg_afterrun_ctx {
    const struct vg_afterrun_gpu *gpus;
    const struct vg_job *job;
    struct vg_afterrun *a; /* classify only */
};

/* 1 when this GPU may still be the driver catching up: a process of the job that is gone but
 * still listed, or memory in use and no holder at all. */
static int vg_afterrun_unsettled_gpu(void *ctx, size_t i, const struct vg_gpu *after,
                                     const struct vg_holding *hs, size_t count)
{
    const struct vg_afterrun_ctx *c = ctx;
    for (size_t k = 0; k < count; k++)
        if (!hs[k].proc && vg_job_was_member(c->job, hs[k].pid))
            return 1;
    return vg_afterrun_grew(c->gpus[i].before, after, count);
}

/* Whether what the snapshot shows on the job's GPUs may still be the driver catching up. */
static bool vg_afterrun_unsettled(const struct vg_snapshot *snap,
                                  const struct vg_afterrun_gpu *gpus, size_t n,
                                  const struct vg_job *job)
{
    struct vg_afterrun_ctx c = {.gpus = gpus, .job = job};
    return vg_afterrun_walk(snap, gpus, n, vg_afterrun_unsettled_gpu, &c) != 0;
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

/* Classify the holders of one of the job's GPUs (those of its MIG device, when it is one) into
 * c->a, and what memory grew there; -ENOMEM stops the walk. */
static int vg_afterrun_classify_gpu(void *ctx, size_t i, const struct vg_gpu *after,
                                    const struct vg_holding *hs, size_t count)
{
    const struct vg_afterrun_ctx *c = ctx;
    struct vg_afterrun *a = c->a;
    const struct vg_gpu *before = c->gpus[i].before;
    int mig = c->gpus[i].mig;
    for (size_t k = 0; k < count; k++) {
        const struct vg_holding *h = &hs[k];
        if (h->mig >= 0 && mig >= 0 && h->mig != mig)
            continue;
        bool ours = vg_job_was_member(c->job, h->pid);
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
    if (vg_afterrun_grew(before, after, count))
        a->grew[i] = after->mem_used - before->mem_used;
    return 0;
}

/* Classify what a->snap shows on the job's GPUs. */
static int vg_afterrun_classify(struct vg_afterrun *a, const struct vg_afterrun_gpu *gpus, size_t n,
                                const struct vg_job *job)
{
    a->grew = calloc(n ? n : 1, sizeof(*a->grew));
    if (!a->grew)
        return -ENOMEM;
    struct vg_afterrun_ctx c = {.gpus = gpus, .job = job, .a = a};
    return vg_afterrun_walk(a->snap, gpus, n, vg_afterrun_classify_gpu, &c);
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
