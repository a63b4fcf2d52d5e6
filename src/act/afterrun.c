/*
 * The last look on a run's GPUs (see afterrun.h): the job's processes as settle's targets,
 * stopped already; then what only run says, the other holders and the growth.
 */
#include "act/afterrun.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/sat.h"

/* What the cleanup did to member p, as a kill record's outcome. */
static void vg_afterrun_outcome(const struct vg_job_cleanup_report *rep,
                                const struct vg_job_proc *p, struct vg_settle_target *t)
{
    t->stopped = true;
    t->outcome = VG_KILL_GONE; /* exited before the cleanup: nothing was sent */
    if (!rep)
        return;
    if (vg_job_procs_has(&rep->survivors, p->pid, p->start)) {
        t->outcome = VG_KILL_FAILED;
        t->error = -ETIMEDOUT;
    } else if (vg_job_procs_has(&rep->killed, p->pid, p->start)) {
        t->outcome = VG_KILL_KILLED;
    } else if (vg_job_procs_has(&rep->termed, p->pid, p->start)) {
        t->outcome = VG_KILL_TERMINATED;
    }
}

/* The job's processes as settle's fixed targets; their identities into a->ids. */
static int vg_afterrun_targets(const struct vg_afterrun_req *req, struct vg_afterrun *a,
                               struct vg_settle_target **out)
{
    size_t n = req->members ? req->members->n : 0;
    a->ids = calloc(n ? n : 1, sizeof(*a->ids));
    *out = calloc(n ? n : 1, sizeof(**out));
    if (!a->ids || !*out)
        return -ENOMEM;
    a->nids = n;
    for (size_t i = 0; i < n; i++) {
        const struct vg_job_proc *p = &req->members->v[i];
        a->ids[i] = (struct vg_kill_identity){.pid = p->pid, .start_ticks = p->start};
        (*out)[i].id = &a->ids[i];
        vg_afterrun_outcome(req->rep, p, &(*out)[i]);
    }
    return 0;
}

/* Where each of the job's GPUs is in the first look (by UUID). */
static int vg_afterrun_wants(const struct vg_afterrun_req *req, const struct vg_snapshot *first,
                             struct vg_settle_want **out)
{
    *out = calloc(req->n ? req->n : 1, sizeof(**out));
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < req->n; i++) {
        const char *uuid = req->gpus[i].before->uuid;
        size_t gi;
        if (!uuid || !vg_gpu_list_by_uuid(&first->gpus, uuid, &gi))
            gi = VG_SETTLE_NO_GPU;
        (*out)[i] = (struct vg_settle_want){.gpu = gi, .ref = i};
    }
    return 0;
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

/* Whether pid holds GPU uuid in snap where a job given MIG instance mig would see it: on that
 * instance, on the whole GPU, or anywhere when the job had the whole GPU. */
static bool vg_afterrun_on_ours(const struct vg_snapshot *snap, const char *uuid, int mig,
                                pid_t pid)
{
    size_t gi, first, count;
    if (!uuid || !vg_gpu_list_by_uuid(&snap->gpus, uuid, &gi))
        return true;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    for (size_t k = first; k < first + count; k++) {
        const struct vg_holding *hd = &snap->holdings[k];
        if (hd->pid == pid && (hd->mig < 0 || mig < 0 || hd->mig == mig))
            return true;
    }
    return false;
}

/* The other holders of each GPU, and what memory grew there with no holder at all. */
static int vg_afterrun_notes(const struct vg_afterrun_req *req, struct vg_afterrun *a)
{
    const struct vg_snapshot *last = vg_afterrun_last(a);
    size_t cap = 0;
    for (size_t i = 0; i < a->s.ngpus; i++)
        cap += a->s.gpus[i].nholders;
    a->v = calloc(cap ? cap : 1, sizeof(*a->v));
    a->grew = calloc(req->n ? req->n : 1, sizeof(*a->grew));
    if (!a->v || !a->grew)
        return -ENOMEM;
    for (size_t i = 0; i < a->s.ngpus; i++) {
        const struct vg_settle_gpu *g = &a->s.gpus[i];
        const struct vg_afterrun_gpu *jg = &req->gpus[g->ref];
        size_t present = 0;
        for (size_t k = 0; k < g->nholders; k++) {
            const struct vg_settle_holder *h = &g->holders[k];
            present += h->present;
            if (!h->present || h->owner == VG_SETTLE_TARGET ||
                (req->members && vg_job_procs_has(req->members, h->pid, 0)) ||
                !vg_afterrun_on_ours(last, g->uuid, jg->mig, h->pid))
                continue;
            a->v[a->n++] = (struct vg_afterrun_note){
                .gpu = g->ref,
                .h = h,
                .proc =
                    h->owner == VG_SETTLE_UNSEEN ? NULL : vg_proc_table_find(&last->procs, h->pid),
                .before = vg_afterrun_held_before(jg->before, h->pid),
            };
        }
        if (!present && g->mem_known && (jg->before->known & VG_GPU_K_MEM) &&
            g->used > vg_sat_add(jg->before->mem_used, VG_AFTERRUN_GROWTH_BYTES))
            a->grew[g->ref] = g->used - jg->before->mem_used;
    }
    return 0;
}

int vg_afterrun_check(const struct vg_afterrun_req *req, vg_settle_look_fn look, void *ctx,
                      struct vg_afterrun *out, struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    vg_settle_result_init(&out->s);
    if (look(ctx, &out->first) != 0) {
        out->first = NULL;
        return vg_err_set(err, -EIO, "could not look at the GPUs");
    }
    struct vg_settle_target *targets = NULL;
    struct vg_settle_want *wants = NULL;
    int rc = 0;
    if (vg_afterrun_targets(req, out, &targets) || vg_afterrun_wants(req, out->first, &wants)) {
        rc = vg_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    struct vg_settle_req sr = {
        .targets = targets,
        .ntargets = out->nids,
        .gpus = wants,
        .ngpus = req->n,
        .timeout_ms = req->timeout_ms ? req->timeout_ms : VG_AFTERRUN_SETTLE_MS,
        .poll_ms = req->poll_ms,
        .tolerance = VG_AFTERRUN_GROWTH_BYTES,
        .stop = true, /* nothing to send: every target is stopped; it makes settle look again */
        .proc_root_fd = -1,
        .who = req->who,
        .sleep = req->sleep,
        .sleep_ctx = req->sleep_ctx,
    };
    rc = vg_settle_run(&sr, out->first, look, ctx, &out->s, err);
    if (!rc && vg_afterrun_notes(req, out))
        rc = vg_err_set(err, -ENOMEM, "out of memory");
out:
    free(targets);
    free(wants);
    if (rc)
        vg_afterrun_release(out);
    return rc;
}

const struct vg_snapshot *vg_afterrun_last(const struct vg_afterrun *a)
{
    return a->s.last ? a->s.last : a->first;
}

void vg_afterrun_release(struct vg_afterrun *a)
{
    vg_settle_result_release(&a->s);
    vg_snap_free(a->first);
    free(a->v);
    free(a->grew);
    free(a->ids);
    memset(a, 0, sizeof(*a));
}
