/*
 * The hand-off between jobs (see handoff.h): look, stop this job's holders (epilog), look
 * again until every GPU is settled or the timeout passes, then judge each GPU from the last
 * look and from what was done.
 */
#include "act/handoff.h"
#include "rules/reason.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/parse.h"
#include "util/sat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VG_HANDOFF_POLL_DEFAULT_MS 250u
/* After SIGKILL a process normally goes at once; one stuck in the kernel never does. */
#define VG_HANDOFF_KILL_WAIT_MS 5000u
/* After the leftovers are stopped and the GPU looks free, one more look this much later before
 * "cleaned": a leftover that re-opens the GPU a second after SIGTERM (a handler, a parent that
 * starts another) would otherwise hand the next job a held GPU (issue 27). */
#define VG_HANDOFF_QUIET_MS 1500u

const char *vg_handoff_state_id(enum vg_handoff_state s)
{
    static const char *const ids[] = {"clean", "cleaned", "unknown", "dirty", "wedged"};
    return (unsigned)s < sizeof(ids) / sizeof(ids[0]) ? ids[s] : "unknown";
}

const char *vg_handoff_owner_id(enum vg_settle_owner o)
{
    static const char *const ids[] = {"job", "infrastructure", "other", "unseen", "leftover"};
    return (unsigned)o < sizeof(ids) / sizeof(ids[0]) ? ids[o] : "other";
}

const char *vg_handoff_evidence_id(unsigned bit)
{
    switch (bit) {
    case VG_HANDOFF_EV_UID:
        return "uid";
    case VG_HANDOFF_EV_ENV:
        return "environment";
    case VG_HANDOFF_EV_CGROUP:
        return "cgroup";
    case VG_HANDOFF_EV_OTHER_UID:
        return "other-uid";
    case VG_HANDOFF_EV_OTHER_JOB:
        return "other-job";
    case VG_HANDOFF_EV_ENV_UNKNOWN:
        return "environment-unreadable";
    }
    return "unknown";
}

bool vg_handoff_cgroup_names(const char *cg, const char *id)
{
    /* An id with a '/' would match across components: no job is named so. */
    if (strchr(id, '/'))
        return false;
    size_t n = strlen(id);
    for (const char *s = cg;; s++) {
        size_t len = strcspn(s, "/");
        if (len == n + 4 && strncmp(s, "job_", 4) == 0 && strncmp(s + 4, id, n) == 0)
            return true;
        s += len;
        if (!*s)
            return false;
    }
}

static unsigned vg_handoff_evidence(const struct vg_proc *p, const struct vg_handoff_job *job)
{
    unsigned ev = 0;
    if ((p->known & VG_PROC_K_STATUS) && job->uid_known)
        ev |= p->uid == job->uid ? VG_HANDOFF_EV_UID : VG_HANDOFF_EV_OTHER_UID;
    if (!(p->known & VG_PROC_K_ENV)) {
        ev |= VG_HANDOFF_EV_ENV_UNKNOWN;
    } else {
        const char *v = p->env[VG_ENV_SLURM_JOB_ID];
        if (v && job->id)
            ev |= strcmp(v, job->id) == 0 ? VG_HANDOFF_EV_ENV : VG_HANDOFF_EV_OTHER_JOB;
        else if (v)
            ev |= VG_HANDOFF_EV_OTHER_JOB;
    }
    if (job->id && (p->known & VG_PROC_K_CGROUP) && p->cgroup &&
        vg_handoff_cgroup_names(p->cgroup, job->id))
        ev |= VG_HANDOFF_EV_CGROUP;
    return ev;
}

enum vg_settle_owner vg_handoff_owner_of(const struct vg_proc *p, const struct vg_handoff_job *job,
                                         const struct vg_kill_ctx *who, unsigned *evidence,
                                         struct vg_infra *infra)
{
    *evidence = vg_handoff_evidence(p, job);
    vg_infra_judge(p, infra);
    /* vramguard, its ancestors, init and kernel threads: by PID and kernel flags, not names */
    if (vg_kill_is_system(p, who))
        return VG_SETTLE_INFRA;
    /* Infrastructure only proven, and never the job's uid (act/infra.h): unproven, what it
     * holds would pass as the baseline and a dirty GPU as clean. */
    if (infra->kind != VG_INFRA_NONE && vg_infra_baseline(p, job->uid_known, job->uid, infra))
        return VG_SETTLE_INFRA;
    /* The job's only with its uid (never another user's process) and a mark of the job itself,
     * and no mark of another: a process of the same user may belong to that user's next job. */
    unsigned ev = *evidence;
    if (job->id && (ev & VG_HANDOFF_EV_UID) && (ev & (VG_HANDOFF_EV_ENV | VG_HANDOFF_EV_CGROUP)) &&
        !(ev & VG_HANDOFF_EV_OTHER_JOB))
        return VG_SETTLE_TARGET;
    return VG_SETTLE_OTHER;
}

void vg_handoff_result_init(struct vg_handoff_result *r)
{
    memset(r, 0, sizeof(*r));
    vg_settle_result_init(&r->s);
}

void vg_handoff_result_release(struct vg_handoff_result *r)
{
    vg_settle_result_release(&r->s);
    vg_handoff_result_init(r);
}

enum vg_handoff_state vg_handoff_gpu_state(const struct vg_settle_gpu *g)
{
    switch (g->state) {
    case VG_SETTLE_FREE:
        return VG_HANDOFF_CLEAN;
    case VG_SETTLE_FREED:
        return VG_HANDOFF_CLEANED;
    case VG_SETTLE_UNKNOWN:
        return VG_HANDOFF_UNKNOWN;
    case VG_SETTLE_UNEXPLAINED:
    case VG_SETTLE_HELD:
    case VG_SETTLE_NOT_RELEASED:
        return VG_HANDOFF_DIRTY;
    case VG_SETTLE_STUCK:
    case VG_SETTLE_WEDGED:
        return VG_HANDOFF_WEDGED;
    }
    return VG_HANDOFF_UNKNOWN;
}

const struct vg_handoff_sel *vg_handoff_gpu_sel(const struct vg_handoff_result *r,
                                                const struct vg_settle_gpu *g)
{
    return r->sel ? &r->sel[g->ref] : NULL;
}

/* ---- which GPU ------------------------------------------------------------------------------ */

void vg_handoff_sels_release(struct vg_handoff_sels *s)
{
    free(s->v);
    free(s->copy);
    memset(s, 0, sizeof(*s));
}

static bool vg_handoff_sels_has(const struct vg_handoff_sels *s, const struct vg_handoff_sel *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].kind == x->kind &&
            (x->kind == VG_HANDOFF_SEL_UUID ? strcmp(s->v[i].text, x->text) == 0
                                            : s->v[i].number == x->number))
            return true;
    return false;
}

/* One word: a number, a Slurm range, or (not slurm) a UUID. */
static int vg_handoff_sels_word(struct vg_handoff_sels *s, const char *word, bool slurm,
                                struct vg_err *err)
{
    uint64_t a, b;
    enum vg_handoff_sel_kind kind = slurm ? VG_HANDOFF_SEL_MINOR : VG_HANDOFF_SEL_INDEX;
    const char *dash = strchr(word, '-');
    if (vg_parse_u64(word, &a) == 0 && a < UINT32_MAX)
        b = a;
    else if (slurm && dash && vg_parse_u64n(word, (size_t)(dash - word), &a) == 0 &&
             vg_parse_u64(dash + 1, &b) == 0 && a <= b && b < UINT32_MAX)
        ;
    else if (!slurm && *word)
        kind = VG_HANDOFF_SEL_UUID, a = b = 0;
    else
        return vg_err_set(err, -EINVAL, "'%s' is not a GPU (%s)", word,
                          slurm ? "Slurm numbers GPUs 0, 1, ... or as ranges 0-3"
                                : "an NVML index or a UUID");
    for (uint64_t x = a; x <= b; x++) {
        struct vg_handoff_sel sel = {kind, (unsigned)x, word};
        if (vg_handoff_sels_has(s, &sel))
            continue;
        if (s->n == VG_HANDOFF_SEL_MAX)
            return vg_err_set(err, -E2BIG, "names more than %u GPUs", VG_HANDOFF_SEL_MAX);
        struct vg_handoff_sel *v = VG_ARRAY_PUSH(s->v, s->n, s->cap);
        if (!v)
            return vg_err_set(err, -ENOMEM, "out of memory");
        *v = sel;
    }
    return 0;
}

int vg_handoff_sels_parse(const char *list, bool slurm, struct vg_handoff_sels *out,
                          struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!(out->copy = strdup(list)))
        return vg_err_set(err, -ENOMEM, "out of memory");
    int rc = 0;
    const char *pos = out->copy, *w;
    size_t len;
    /* Empty entries ("0,,1", a trailing comma) name no GPU more. Each word ends at its comma,
     * cut in copy, where the selectors point. */
    while (rc == 0 && vg_parse_list_next(&pos, NULL, &w, &len)) {
        if (!len)
            continue;
        out->copy[w - out->copy + len] = '\0';
        rc = vg_handoff_sels_word(out, w, slurm, err);
    }
    if (rc == 0 && out->n == 0)
        rc = vg_err_set(err, -EINVAL, "names no GPU");
    if (rc)
        vg_handoff_sels_release(out);
    return rc;
}

static bool vg_handoff_sel_match(const struct vg_handoff_sel *s, const struct vg_gpu_list *l,
                                 size_t *gi)
{
    switch (s->kind) {
    case VG_HANDOFF_SEL_MINOR: {
        const struct vg_gpu *g = vg_gpu_list_by_minor(l, s->number);
        if (!g)
            return false;
        *gi = (size_t)(g - l->gpus);
        return true;
    }
    case VG_HANDOFF_SEL_INDEX:
        for (size_t i = 0; i < l->ngpus; i++)
            if (l->gpus[i].index == s->number) {
                *gi = i;
                return true;
            }
        return false;
    case VG_HANDOFF_SEL_UUID:
        return vg_gpu_list_lookup(l, s->text, gi) == VG_GPU_LOOKUP_OK;
    }
    return false;
}

/* ---- the procedure -------------------------------------------------------------------------- */

/* Whose is a holder, for act/settle.h: this job's are its targets. In a prolog (and a node
 * check) the job has not started: whoever holds its GPUs is someone else. */
static enum vg_settle_owner vg_handoff_whose(void *ctx, const struct vg_proc *p, unsigned *evidence,
                                             struct vg_infra *infra)
{
    const struct vg_handoff_req *req = ctx;
    struct vg_handoff_job none = {.id = NULL, .uid_known = false};
    return vg_handoff_owner_of(p, req->mode == VG_HANDOFF_EPILOG ? &req->job : &none, &req->who,
                               evidence, infra);
}

static void vg_handoff_finish(struct vg_handoff_result *res)
{
    res->state = VG_HANDOFF_CLEAN;
    for (size_t i = 0; i < res->s.ngpus; i++) {
        enum vg_handoff_state st = vg_handoff_gpu_state(&res->s.gpus[i]);
        if (st > res->state)
            res->state = st;
    }
}

/* Without the driver's view: unknown, or wedged when the driver hung (a hung driver never frees
 * anything by itself). True when so; -ENOMEM as a negative *rc. */
static bool vg_handoff_no_driver(struct vg_handoff_result *res, const struct vg_snapshot *snap,
                                 int *rc)
{
    *rc = 0;
    res->s.looks = 1;
    res->s.may_hide = vg_snap_holders_may_hide(snap);
    res->s.hidepid = (snap->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    res->s.driver_ok = snap->driver_ok;
    if (snap->driver_ok)
        return false;
    res->s.driver_hung = snap->driver_hung;
    res->state = snap->driver_hung ? VG_HANDOFF_WEDGED : VG_HANDOFF_UNKNOWN;
    if (snap->driver_error && !(res->s.driver_error = strdup(snap->driver_error)))
        *rc = -ENOMEM;
    return true;
}

/* The request as act/settle.h takes it. */
static struct vg_settle_req vg_handoff_settle_req(const struct vg_handoff_req *req,
                                                  const struct vg_settle_want *wants, size_t n)
{
    struct vg_kill_ctx who = req->who;
    /* the job's own processes are never infrastructure: the epilog stops them whatever they run */
    if (req->mode == VG_HANDOFF_EPILOG && req->job.uid_known) {
        who.job_uid_known = true;
        who.job_uid = req->job.uid;
    }
    return (struct vg_settle_req){
        .whose = vg_handoff_whose,
        .whose_ctx = (void *)req,
        .gpus = wants,
        .ngpus = n,
        .grace_ms = req->grace_ms,
        .kill_wait_ms = VG_HANDOFF_KILL_WAIT_MS,
        .quiet_ms = VG_HANDOFF_QUIET_MS,
        .timeout_ms = req->timeout_ms,
        .poll_ms = req->poll_ms ? req->poll_ms : VG_HANDOFF_POLL_DEFAULT_MS,
        .tolerance = req->tolerance,
        .stop = req->mode == VG_HANDOFF_EPILOG,
        .proc_root_fd = req->proc_root_fd,
        .who = who,
        .nvml = req->nvml,
        .nvml_arg = req->nvml_arg,
    };
}

int vg_handoff_run(const struct vg_handoff_req *req, vg_handoff_look_fn look, void *ctx,
                   struct vg_handoff_result *res, struct vg_err *err)
{
    uint64_t start = vg_clock_ms();
    struct vg_snapshot *snap = NULL;
    int rc = look(ctx, &snap);
    res->s.looks = 1;
    if (rc)
        return rc;
    res->sel = req->sel;
    struct vg_settle_want *wants = NULL;
    if (vg_handoff_no_driver(res, snap, &rc)) {
        /* Nothing is judged and nothing signalled without the driver's view. */
        if (rc)
            vg_err_set(err, rc, "out of memory");
        goto out;
    }
    if (!(wants = calloc(req->nsel ? req->nsel : 1, sizeof(*wants)))) {
        rc = vg_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < req->nsel; i++) {
        wants[i].ref = i;
        if (!vg_handoff_sel_match(&req->sel[i], &snap->gpus, &wants[i].gpu))
            wants[i].gpu = VG_SETTLE_NO_GPU;
    }
    struct vg_settle_req sr = vg_handoff_settle_req(req, wants, req->nsel);
    rc = vg_settle_run(&sr, snap, look, ctx, &res->s, err);
    vg_handoff_finish(res);
out:
    free(wants);
    vg_snap_free(snap);
    res->s.elapsed_ms = vg_clock_ms() - start;
    return rc;
}

/* ---- node mode ------------------------------------------------------------------------------ */

static void vg_handoff_node_gpu(struct vg_settle_gpu *g, const struct vg_snapshot *snap, size_t gi,
                                const struct vg_reason_gpu *rg, uint64_t tolerance)
{
    const struct vg_gpu *d = &snap->gpus.gpus[gi];
    bool dstate = false, leftover = false;
    /* The reasons name the leftovers: orphan (a sure one) and zombie. */
    for (size_t i = 0; i < g->nholders; i++) {
        struct vg_settle_holder *h = &g->holders[i];
        for (size_t k = 0; k < rg->n; k++)
            if ((pid_t)rg->h[k].pid == h->pid && h->owner != VG_SETTLE_INFRA &&
                (rg->h[k].reason == VG_REASON_ORPHAN || rg->h[k].reason == VG_REASON_ZOMBIE))
                h->owner = VG_SETTLE_LEFTOVER;
        if (h->present) {
            dstate |= h->state == 'D' && h->owner != VG_SETTLE_INFRA;
            leftover |= h->owner == VG_SETTLE_LEFTOVER;
        }
    }
    g->mem_known = (d->known & VG_GPU_K_MEM) && !d->lost && !d->hung;
    g->used = g->mem_known ? d->mem_used : 0;
    bool reserved = snap->per_gpu[gi].unexplained_has_reserved;
    g->baseline = vg_sat_add(tolerance, reserved ? VG_REASON_V1_RESERVED : 0);
    if (d->lost) {
        g->state = VG_SETTLE_WEDGED, g->why = "lost";
    } else if (d->hung) {
        g->state = VG_SETTLE_WEDGED, g->why = "hung";
    } else if (dstate) {
        g->state = VG_SETTLE_WEDGED, g->why = "d-state";
    } else if (vg_reason_gpu_dirty(rg, reserved, tolerance)) {
        g->state = leftover ? VG_SETTLE_HELD : VG_SETTLE_UNEXPLAINED;
        g->why = leftover ? "leftover" : "unexplained";
    } else if (!g->mem_known || !rg->known) {
        g->state = VG_SETTLE_UNKNOWN, g->why = "memory-unknown";
    } else {
        g->state = VG_SETTLE_FREE, g->why = "free";
    }
}

int vg_handoff_node(const struct vg_handoff_req *req, const struct vg_snapshot *snap,
                    const struct vg_findings *fs, struct vg_handoff_result *res, struct vg_err *err)
{
    uint64_t start = vg_clock_ms();
    int rc;
    if (vg_handoff_no_driver(res, snap, &rc))
        return rc ? vg_err_set(err, rc, "out of memory") : 0;
    size_t n = snap->gpus.ngpus;
    struct vg_settle_want *wants = calloc(n ? n : 1, sizeof(*wants));
    if (!wants)
        return vg_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        wants[i] = (struct vg_settle_want){.gpu = i, .ref = i};
    struct vg_settle_req sr = vg_handoff_settle_req(req, wants, n);
    rc = vg_settle_record(&sr, snap, &res->s, err);
    for (size_t i = 0; rc == 0 && i < res->s.ngpus; i++) {
        struct vg_reason_gpu rg = {0};
        if (vg_reason_gpu_build(snap, i, fs, VG_RULE_CONTEXT_MAX_DEFAULT, &rg))
            rc = vg_err_set(err, -ENOMEM, "out of memory");
        else
            vg_handoff_node_gpu(&res->s.gpus[i], snap, i, &rg, req->tolerance);
        vg_reason_gpu_release(&rg);
    }
    free(wants);
    vg_handoff_finish(res);
    res->s.elapsed_ms = vg_clock_ms() - start;
    return rc;
}
