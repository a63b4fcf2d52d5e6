/*
 * Stop and settle (see settle.h): the hand-off's loop, made the one procedure. Look, stop the
 * targets, look again until every GPU is settled or the timeout passes, and judge each GPU
 * from the last look and from what was done.
 */
#include "act/settle.h"
#include "rules/reason.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/sat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *vg_settle_state_id(enum vg_settle_state s)
{
    static const char *const ids[] = {"free", "freed",        "unknown", "unexplained",
                                      "held", "not-released", "stuck",   "wedged"};
    return (unsigned)s < sizeof(ids) / sizeof(ids[0]) ? ids[s] : "unknown";
}

void vg_settle_result_init(struct vg_settle_result *r)
{
    memset(r, 0, sizeof(*r));
}

static void vg_settle_gpu_release(struct vg_settle_gpu *g)
{
    for (size_t i = 0; i < g->nholders; i++) {
        free(g->holders[i].user);
        free(g->holders[i].comm);
    }
    free(g->holders);
    free(g->uuid);
    free(g->name);
}

void vg_settle_result_release(struct vg_settle_result *r)
{
    for (size_t i = 0; r->gpus && i < r->ngpus; i++)
        vg_settle_gpu_release(&r->gpus[i]);
    free(r->gpus);
    for (size_t i = 0; r->kills && i < r->nkills; i++)
        vg_kill_release(&r->kills[i]);
    for (size_t i = 0; r->ids && i < r->nkills; i++)
        vg_kill_identity_release(&r->ids[i]);
    free(r->kills);
    free(r->ids);
    free(r->driver_error);
    vg_snap_free(r->last);
    vg_settle_result_init(r);
}

const struct vg_settle_gpu *vg_settle_gpu_of(const struct vg_settle_result *res, size_t ref)
{
    for (size_t i = 0; i < res->ngpus; i++)
        if (res->gpus[i].ref == ref)
            return &res->gpus[i];
    return NULL;
}

const struct vg_kill *vg_settle_kill_of(const struct vg_settle_result *res, pid_t pid)
{
    for (size_t i = 0; i < res->nkills; i++)
        if (res->kills[i].id->pid == pid)
            return &res->kills[i];
    return NULL;
}

int vg_settle_targets_from_plan(const struct vg_plan *plan, const bool *chosen,
                                struct vg_settle_target **out, size_t *n)
{
    *out = calloc(plan->n ? plan->n : 1, sizeof(**out));
    *n = 0;
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < plan->n; i++) {
        if (chosen && !chosen[i])
            continue;
        const struct vg_plan_entry *e = &plan->v[i];
        (*out)[(*n)++] =
            (struct vg_settle_target){.id = &e->id, .signal = e->signal, .refusal = e->refusal};
    }
    return 0;
}

/* ---- the GPUs ------------------------------------------------------------------------------- */

static int vg_settle_gpus(const struct vg_settle_req *req, const struct vg_snapshot *snap,
                          struct vg_settle_result *res)
{
    res->gpus = calloc(req->ngpus ? req->ngpus : 1, sizeof(*res->gpus));
    if (!res->gpus)
        return -ENOMEM;
    res->ngpus = req->ngpus;
    for (size_t i = 0; i < req->ngpus; i++) {
        struct vg_settle_gpu *g = &res->gpus[i];
        g->ref = req->gpus[i].ref;
        size_t gi = req->gpus[i].gpu;
        if (gi == VG_SETTLE_NO_GPU || gi >= snap->gpus.ngpus)
            continue;
        const struct vg_gpu *d = &snap->gpus.gpus[gi];
        g->found = true;
        g->index = d->index;
        g->minor = d->minor;
        g->minor_known = (d->known & VG_GPU_K_MINOR) != 0;
        g->before_known = (d->known & VG_GPU_K_MEM) && !d->lost && !d->hung;
        g->before = g->before_known ? d->mem_used : 0;
        if (((d->known & VG_GPU_K_UUID) && !(g->uuid = strdup(d->uuid))) ||
            ((d->known & VG_GPU_K_NAME) && !(g->name = strdup(d->name))))
            return -ENOMEM;
    }
    return 0;
}

/* Where a GPU is in a later look: by UUID when it has one, else by index. */
static bool vg_settle_find(const struct vg_settle_gpu *g, const struct vg_snapshot *snap,
                           size_t *gi)
{
    if (!g->found)
        return false;
    if (g->uuid)
        return vg_gpu_list_by_uuid(&snap->gpus, g->uuid, gi);
    for (size_t i = 0; i < snap->gpus.ngpus; i++)
        if (snap->gpus.gpus[i].index == g->index) {
            *gi = i;
            return true;
        }
    return false;
}

/* ---- holders -------------------------------------------------------------------------------- */

/* The fixed targets' classifier: a planned target by identity, infrastructure as act/kill.h
 * never signals it (proven, or named so and unproven: act/infra.h; clean, run and top settle
 * what they may signal, and every refusal is listed, so nothing is hidden by it), anyone
 * else's otherwise. A target the plan refused for who it is (another user's, not a sure
 * leftover) holds as another's; one refused for its state (a zombie, D state) is a target that
 * cannot be stopped. */
static enum vg_settle_owner vg_settle_fixed_whose(const struct vg_settle_req *req,
                                                  const struct vg_proc *p, struct vg_infra *infra)
{
    vg_infra_judge(p, infra);
    if (infra->kind == VG_INFRA_PROVEN || infra->kind == VG_INFRA_UNPROVEN)
        return VG_SETTLE_INFRA;
    if (vg_kill_is_system(p, &req->who))
        return VG_SETTLE_INFRA;
    for (size_t i = 0; i < req->ntargets; i++) {
        const struct vg_settle_target *t = &req->targets[i];
        if (t->id->pid != p->pid || t->id->start_ticks != p->start_ticks)
            continue;
        if (t->signal || t->stopped || t->refusal == VG_KILL_ZOMBIE || t->refusal == VG_KILL_DSTATE)
            return VG_SETTLE_TARGET;
        return VG_SETTLE_OTHER;
    }
    return VG_SETTLE_OTHER;
}

static struct vg_settle_holder *vg_settle_holder_get(struct vg_settle_gpu *g, pid_t pid,
                                                     uint64_t start, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < g->nholders; i++)
        if (g->holders[i].pid == pid && g->holders[i].start_ticks == start)
            return &g->holders[i];
    struct vg_settle_holder *h = VG_ARRAY_PUSH(g->holders, g->nholders, g->holders_cap);
    if (!h)
        return NULL;
    h->pid = pid;
    h->start_ticks = start;
    h->state = '?';
    *fresh = true;
    return h;
}

/* Whether kill k reached its process with a signal. */
static bool vg_settle_sent(const struct vg_kill *k)
{
    return k->outcome == VG_KILL_TERMINATED || k->outcome == VG_KILL_KILLED ||
           (k->outcome == VG_KILL_FAILED && k->stop.sent_term);
}

/* Copy what became of h's process, when it was picked, to h. */
static void vg_settle_holder_sync(const struct vg_settle_req *req,
                                  const struct vg_settle_result *res, struct vg_settle_holder *h)
{
    for (size_t k = 0; k < res->nkills; k++) {
        const struct vg_kill *kl = &res->kills[k];
        if (h->pid != kl->id->pid || h->start_ticks != kl->id->start_ticks)
            continue;
        const struct vg_settle_target *t = req->whose ? NULL : &req->targets[k];
        /* A target the caller stopped was signalled when its record says a signal reached it. */
        h->signalled = !t || t->signal || (t->stopped && vg_settle_sent(kl));
        h->outcome = kl->outcome;
        h->refusal = kl->refusal;
        h->error = kl->error;
        return;
    }
}

static int vg_settle_holder_fill(const struct vg_settle_req *req,
                                 const struct vg_settle_result *res, struct vg_settle_holder *h,
                                 const struct vg_holding *hd, bool fresh)
{
    const struct vg_proc *p = hd->proc;
    h->present = true;
    h->seen |= hd->seen;
    if (hd->used_known) {
        h->mem_known = true;
        h->mem_bytes = vg_sat_add(h->mem_bytes, hd->used_bytes);
    }
    if (!p) {
        h->owner = VG_SETTLE_UNSEEN;
        return 0;
    }
    h->state = (p->known & VG_PROC_K_STAT) ? p->state : '?';
    if (p->threads_d > 0)
        h->state = 'D';
    h->uid_known = (p->known & VG_PROC_K_STATUS) != 0;
    h->uid = p->uid;
    unsigned ev = 0;
    struct vg_infra inf = {VG_INFRA_NONE, NULL, 0};
    enum vg_settle_owner owner =
        req->whose ? req->whose(req->whose_ctx, p, &ev, &inf) : vg_settle_fixed_whose(req, p, &inf);
    /* Same pid and start time, same process: once a target it stays one, when it has become a
     * zombie whose environment is gone too. */
    if (fresh || h->owner != VG_SETTLE_TARGET) {
        h->owner = owner;
        h->evidence = ev;
        h->infra = inf;
        h->protected_name =
            owner == VG_SETTLE_INFRA && inf.kind != VG_INFRA_NONE && inf.kind != VG_INFRA_IMPOSTOR
                ? inf.name
                : NULL;
    }
    if (fresh) {
        vg_settle_holder_sync(req, res, h);
        if ((p->user && !(h->user = strdup(p->user))) || (p->comm && !(h->comm = strdup(p->comm))))
            return -ENOMEM;
    }
    return 0;
}

/* Record GPU g's holders as this look shows them. */
static int vg_settle_update(const struct vg_settle_req *req, const struct vg_settle_result *res,
                            struct vg_settle_gpu *g, const struct vg_snapshot *snap, size_t gi)
{
    for (size_t i = 0; i < g->nholders; i++)
        g->holders[i].present = false;
    /* The memory figures of this look only: a holder on several MIG devices sums them. */
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *hd = &snap->holdings[i];
        uint64_t start = hd->proc ? hd->proc->start_ticks : 0;
        bool fresh;
        struct vg_settle_holder *h = vg_settle_holder_get(g, hd->pid, start, &fresh);
        if (!h)
            return -ENOMEM;
        if (!h->present) {
            h->mem_known = false;
            h->mem_bytes = 0;
        }
        if (vg_settle_holder_fill(req, res, h, hd, fresh))
            return -ENOMEM;
    }
    return 0;
}

int vg_settle_record(const struct vg_settle_req *req, const struct vg_snapshot *first,
                     struct vg_settle_result *res, struct vg_err *err)
{
    res->looks = 1;
    res->driver_ok = first->driver_ok;
    res->driver_hung = first->driver_hung;
    res->may_hide = vg_snap_holders_may_hide(first);
    res->hidepid = (first->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    if (vg_settle_gpus(req, first, res))
        return vg_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < res->ngpus; i++) {
        size_t gi;
        if (vg_settle_find(&res->gpus[i], first, &gi) &&
            vg_settle_update(req, res, &res->gpus[i], first, gi))
            return vg_err_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* ---- stopping ------------------------------------------------------------------------------- */

/* Room for one more picked process in kills and ids, which share *cap; the kills point into
 * ids, so they follow a move. kills grows first: when ids then cannot, nothing points to freed
 * memory, and *cap (the smaller of the two) makes the next call try again. */
static int vg_settle_grow(struct vg_settle_result *res, size_t *cap)
{
    size_t kcap = *cap, icap = *cap;
    if (VG_ARRAY_GROW(res->kills, kcap, res->nkills + 1) ||
        VG_ARRAY_GROW(res->ids, icap, res->nkills + 1))
        return -ENOMEM;
    for (size_t i = 0; i < res->nkills; i++)
        res->kills[i].id = &res->ids[i];
    *cap = kcap < icap ? kcap : icap;
    return 0;
}

static bool vg_settle_picked(const struct vg_settle_result *res, pid_t pid, uint64_t start)
{
    for (size_t i = 0; i < res->nkills; i++)
        if (res->kills[i].id->pid == pid && res->kills[i].id->start_ticks == start)
            return true;
    return false;
}

static int vg_settle_pick_one(struct vg_settle_result *res, size_t *cap,
                              const struct vg_snapshot *snap, const struct vg_proc *p)
{
    if (vg_settle_grow(res, cap))
        return -ENOMEM;
    struct vg_kill_identity *id = &res->ids[res->nkills];
    memset(id, 0, sizeof(*id));
    id->pid = p->pid;
    id->start_ticks = p->start_ticks;
    id->uid = p->uid;
    if (p->ndev_minors) {
        id->minors = malloc(p->ndev_minors * sizeof(*id->minors));
        if (!id->minors)
            return -ENOMEM;
        memcpy(id->minors, p->dev_minors, p->ndev_minors * sizeof(*id->minors));
        id->nminors = p->ndev_minors;
    }
    for (size_t i = 0; i < snap->nholdings; i++)
        id->nvml |= snap->holdings[i].pid == p->pid && (snap->holdings[i].seen & VG_SEEN_NVML);
    vg_kill_init(&res->kills[res->nkills], id);
    res->nkills++;
    return 0;
}

/* Whether the driver answered for the GPU at the last look (not lost, hung or missing). */
static bool vg_settle_seen(const struct vg_settle_gpu *g)
{
    return !g->why || (strcmp(g->why, "lost") != 0 && strcmp(g->why, "hung") != 0 &&
                       strcmp(g->why, "missing") != 0);
}

/* By owner: the targets present at this look, not picked yet: allowed ones join the round;
 * the others keep the reason they may not be signalled. */
static int vg_settle_pick(struct vg_settle_result *res, size_t *cap, const struct vg_snapshot *snap,
                          const struct vg_settle_req *req)
{
    for (size_t g = 0; g < res->ngpus; g++)
        for (size_t i = 0; i < res->gpus[g].nholders; i++) {
            struct vg_settle_holder *h = &res->gpus[g].holders[i];
            /* Without the driver's view of a GPU nothing is done about it. */
            if (!vg_settle_seen(&res->gpus[g]))
                break;
            if (!h->present || h->owner != VG_SETTLE_TARGET || h->signalled ||
                vg_settle_picked(res, h->pid, h->start_ticks))
                continue;
            const struct vg_proc *p = vg_proc_table_find(&snap->procs, h->pid);
            if (!p)
                continue;
            h->refusal = vg_kill_check(p, &req->who, NULL);
            if (h->refusal == VG_KILL_ALLOWED && vg_settle_pick_one(res, cap, snap, p))
                return -ENOMEM;
        }
    return 0;
}

/* The fixed targets, all at once in the first round: a kill record each, in their order. */
static int vg_settle_pick_fixed(struct vg_settle_result *res, const struct vg_settle_req *req)
{
    res->kills = calloc(req->ntargets ? req->ntargets : 1, sizeof(*res->kills));
    if (!res->kills)
        return -ENOMEM;
    for (size_t i = 0; i < req->ntargets; i++) {
        const struct vg_settle_target *t = &req->targets[i];
        struct vg_kill *k = &res->kills[i];
        vg_kill_init(k, t->id);
        k->refusal = t->signal || t->stopped ? VG_KILL_ALLOWED : t->refusal;
        if (t->stopped) {
            /* The caller's record of what it did, as vg_kill_finish() would have left it. */
            k->outcome = t->outcome;
            k->error = t->error;
            k->stop.sent_term = t->outcome != VG_KILL_GONE;
            k->stop.sent_kill = t->outcome == VG_KILL_KILLED || t->outcome == VG_KILL_FAILED;
        }
    }
    res->nkills = req->ntargets;
    return 0;
}

/* Copy what became of each process of the round to every GPU's record of it. */
static void vg_settle_note(const struct vg_settle_req *req, struct vg_settle_result *res,
                           size_t from)
{
    for (size_t k = from; k < res->nkills; k++) {
        const struct vg_kill *kl = &res->kills[k];
        bool sent = vg_settle_sent(kl);
        res->nsignalled += sent;
        for (size_t g = 0; g < res->ngpus; g++)
            for (size_t i = 0; i < res->gpus[g].nholders; i++) {
                struct vg_settle_holder *h = &res->gpus[g].holders[i];
                if (h->pid != kl->id->pid || h->start_ticks != kl->id->start_ticks)
                    continue;
                vg_settle_holder_sync(req, res, h);
                res->gpus[g].nstopped += sent;
            }
    }
}

/* One round of signals as the look shows the host: 1 when some were started (look again), 0
 * when none, -ENOMEM. */
static int vg_settle_stop(const struct vg_settle_req *req, struct vg_settle_result *res,
                          size_t *cap, const struct vg_snapshot *snap, uint64_t grace_ms,
                          struct vg_err *err)
{
    size_t from = res->nkills;
    int rc = 0;
    if (req->whose)
        rc = vg_settle_pick(res, cap, snap, req);
    else if (!res->kills)
        rc = vg_settle_pick_fixed(res, req);
    else
        return 0; /* the fixed targets had their round */
    if (rc)
        return vg_err_set(err, -ENOMEM, "out of memory");
    size_t started = 0;
    const char *dev = req->dev_dir ? req->dev_dir : snap->dev_dir;
    for (size_t i = from; i < res->nkills; i++) {
        if (!req->whose && !req->targets[i].signal)
            continue;
        started++;
        if (vg_kill_start(&res->kills[i], req->proc_root_fd, dev, &req->who, req->nvml,
                          req->nvml_arg, err))
            return -ENOMEM;
    }
    if (started)
        vg_kill_finish(&res->kills[from], res->nkills - from, (unsigned)grace_ms,
                       req->kill_wait_ms ? (unsigned)req->kill_wait_ms : VG_SETTLE_KILL_WAIT_MS);
    /* the refusals too: the holders keep why they were not signalled */
    vg_settle_note(req, res, from);
    return started ? 1 : 0;
}

/* ---- judging -------------------------------------------------------------------------------- */

struct vg_settle_tally {
    bool dstate, target, survived_kill, other, unseen, unreleased;
    uint64_t infra_bytes;
};

/* Whether an unseen PID is a target that has exited: the driver not caught up yet. */
static bool vg_settle_exited_target(const struct vg_settle_result *res, pid_t pid)
{
    for (size_t k = 0; k < res->nkills; k++) {
        const struct vg_kill *kl = &res->kills[k];
        if (kl->id->pid == pid && (kl->outcome == VG_KILL_TERMINATED ||
                                   kl->outcome == VG_KILL_KILLED || kl->outcome == VG_KILL_GONE))
            return true;
    }
    return false;
}

static void vg_settle_tally(const struct vg_settle_result *res, const struct vg_settle_gpu *g,
                            struct vg_settle_tally *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < g->nholders; i++) {
        const struct vg_settle_holder *h = &g->holders[i];
        if (!h->present)
            continue;
        t->dstate |= h->state == 'D' && h->owner != VG_SETTLE_INFRA;
        switch (h->owner) {
        case VG_SETTLE_TARGET:
            t->target = true;
            t->survived_kill |=
                h->signalled && h->outcome == VG_KILL_FAILED && h->error == -ETIMEDOUT;
            break;
        case VG_SETTLE_INFRA:
            if (h->mem_known)
                t->infra_bytes = vg_sat_add(t->infra_bytes, h->mem_bytes);
            break;
        case VG_SETTLE_OTHER:
        case VG_SETTLE_LEFTOVER:
            t->other = true;
            break;
        case VG_SETTLE_UNSEEN:
            if (vg_settle_exited_target(res, h->pid))
                t->unreleased = true;
            else
                t->unseen = true;
            break;
        }
    }
}

/* Judge GPU g as the look shows it; *settled: waiting longer cannot change the verdict.
 * long: one verdict per branch, worst first; the order is the decision and reads best whole. */
static void vg_settle_judge(const struct vg_settle_req *req, const struct vg_settle_result *res,
                            struct vg_settle_gpu *g, const struct vg_snapshot *snap, size_t gi,
                            bool *settled)
{
    const struct vg_gpu *d = &snap->gpus.gpus[gi];
    struct vg_settle_tally t;
    vg_settle_tally(res, g, &t);
    g->mem_known = (d->known & VG_GPU_K_MEM) && !d->lost && !d->hung;
    g->used = g->mem_known ? d->mem_used : 0;
    g->baseline = vg_sat_add(req->tolerance, t.infra_bytes);
    if (snap->gpus.mem_api && strcmp(snap->gpus.mem_api, "v1") == 0)
        g->baseline = vg_sat_add(g->baseline, VG_REASON_V1_RESERVED);
    bool excess = g->mem_known && g->used > g->baseline;
    g->reset_needed = false;
    *settled = true;
#define VG_VERDICT(st, w)                                                                          \
    do {                                                                                           \
        g->state = (st);                                                                           \
        g->why = (w);                                                                              \
    } while (0)
    if (d->lost) {
        VG_VERDICT(VG_SETTLE_WEDGED, "lost");
    } else if (d->hung) {
        VG_VERDICT(VG_SETTLE_WEDGED, "hung");
    } else if (t.dstate) {
        VG_VERDICT(VG_SETTLE_WEDGED, "d-state");
        g->reset_needed = true;
        *settled = false; /* it may come out of the driver */
    } else if (t.target) {
        /* Signalled and still there, or a target that may not be signalled (a zombie) */
        VG_VERDICT(VG_SETTLE_WEDGED, "survived");
        g->reset_needed = t.survived_kill;
        *settled = false;
    } else if (t.other || t.unseen) {
        VG_VERDICT(VG_SETTLE_HELD, "holder");
        /* A PID the driver still lists may be a target, gone a moment ago. */
        *settled = !t.unseen && !t.unreleased;
    } else if (t.unreleased) {
        VG_VERDICT(VG_SETTLE_NOT_RELEASED, "holder");
        *settled = false;
    } else if (!g->mem_known) {
        VG_VERDICT(VG_SETTLE_UNKNOWN, "memory-unknown");
    } else if (excess) {
        /* No holder left: the driver may still be freeing what the targets held. */
        if (g->nstopped > 0)
            VG_VERDICT(VG_SETTLE_STUCK, "stuck");
        else
            VG_VERDICT(VG_SETTLE_UNEXPLAINED, "unexplained");
        g->reset_needed = vg_plan_reset_needed(snap, gi, req->tolerance);
        /* Waited on in any case: memory the driver is still freeing comes back. */
        *settled = false;
    } else if (g->nstopped > 0) {
        VG_VERDICT(VG_SETTLE_FREED, "stopped");
    } else {
        VG_VERDICT(VG_SETTLE_FREE, "free");
    }
#undef VG_VERDICT
}

/* Update and judge every GPU from snap; *all: every one is settled. */
static int vg_settle_assess(const struct vg_settle_req *req, struct vg_settle_result *res,
                            const struct vg_snapshot *snap, uint64_t elapsed, bool *all)
{
    *all = true;
    for (size_t i = 0; i < res->ngpus; i++) {
        struct vg_settle_gpu *g = &res->gpus[i];
        size_t gi;
        bool settled = true;
        if (!vg_settle_find(g, snap, &gi)) {
            g->state = VG_SETTLE_WEDGED;
            g->why = "missing";
            g->reset_needed = false;
            for (size_t h = 0; h < g->nholders; h++)
                g->holders[h].present = false;
        } else {
            if (vg_settle_update(req, res, g, snap, gi))
                return -ENOMEM;
            vg_settle_judge(req, res, g, snap, gi, &settled);
        }
        if (!settled)
            g->settled_ms = 0;
        else if (!g->settled_ms)
            g->settled_ms = elapsed ? elapsed : 1;
        *all &= settled;
    }
    return 0;
}

/* A later look could not read the host: what was done stays on record; what it would have
 * shown is not known. */
static void vg_settle_look_failed(struct vg_settle_result *res)
{
    for (size_t i = 0; i < res->ngpus; i++)
        if (res->gpus[i].state < VG_SETTLE_UNKNOWN) {
            res->gpus[i].state = VG_SETTLE_UNKNOWN;
            res->gpus[i].why = "look-failed";
        }
}

/* The driver stopped answering between looks: nothing can be said of any GPU but that. */
static int vg_settle_driver_gone(struct vg_settle_result *res, const struct vg_snapshot *snap)
{
    for (size_t i = 0; i < res->ngpus; i++) {
        res->gpus[i].state = VG_SETTLE_WEDGED;
        res->gpus[i].why = "hung";
    }
    if (!res->driver_error && snap->driver_error &&
        !(res->driver_error = strdup(snap->driver_error)))
        return -ENOMEM;
    return 0;
}

/* Sleep up to ms, in slices, ending early when the caller cancels; true when it did. */
static bool vg_settle_sleep(const struct vg_settle_req *req, uint64_t ms)
{
    if (req->sleep)
        return req->sleep(req->sleep_ctx, (unsigned)ms) != 0;
    uint64_t until = vg_clock_ms() + ms;
    for (;;) {
        uint64_t now = vg_clock_ms();
        if (req->cancel && *req->cancel)
            return true;
        if (now >= until)
            return false;
        uint64_t step = until - now < 50 ? until - now : 50;
        vg_clock_sleep_until(now + step);
    }
}

/* long: the procedure itself, one loop over look, stop and judge with its deadline; split, its
 * exits would be spread over several functions. */
int vg_settle_run(const struct vg_settle_req *req, const struct vg_snapshot *first,
                  vg_settle_look_fn look, void *ctx, struct vg_settle_result *res,
                  struct vg_err *err)
{
    uint64_t start = vg_clock_ms();
    unsigned poll = req->poll_ms ? req->poll_ms : VG_SETTLE_POLL_MS;
    size_t cap = 0;
    const struct vg_snapshot *snap = first;
    res->looks = 1;
    res->driver_ok = first->driver_ok;
    res->driver_hung = first->driver_hung;
    res->may_hide = vg_snap_holders_may_hide(first);
    res->hidepid = (first->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    int rc = 0;
    if (!first->driver_ok) {
        /* Nothing is judged without the driver's view; fixed targets seen through their device
         * nodes are still stopped (nothing is picked by owner blind). */
        if (first->driver_error && !(res->driver_error = strdup(first->driver_error)))
            rc = vg_err_set(err, -ENOMEM, "out of memory");
        else if (req->stop && !req->whose)
            rc = vg_settle_stop(req, res, &cap, first, req->grace_ms, err);
        if (rc > 0)
            rc = 0;
        goto out;
    }
    if (vg_settle_gpus(req, first, res)) {
        rc = vg_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    bool final = false, cut = false; /* cut: a sleep callback was cut short */
    bool quiet = false;              /* this look is the quiet period's, after a settle */
    for (;;) {
        bool all;
        uint64_t elapsed = vg_clock_ms() - start;
        if (vg_settle_assess(req, res, snap, elapsed, &all) != 0) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        if (!req->stop)
            break;
        if (final) {
            res->timed_out = !all;
            break;
        }
        uint64_t left = elapsed < req->timeout_ms ? req->timeout_ms - elapsed : 0;
        rc = vg_settle_stop(req, res, &cap, snap, req->grace_ms < left ? req->grace_ms : left, err);
        if (rc < 0)
            goto out;
        bool again = false; /* settled after signals: look once more after the quiet period */
        if (rc == 0 && all && !(req->look_after && res->looks == 1)) {
            if (!req->quiet_ms || res->nsignalled == 0 || quiet)
                break;
            again = true;
        }
        quiet = again;
        /* Past the timeout: one more look only to see what a last round of signals did. */
        elapsed = vg_clock_ms() - start;
        bool cancelled = cut || (req->cancel && *req->cancel);
        if (elapsed >= req->timeout_ms || cancelled) {
            if (rc == 0 && !(req->look_after && res->looks == 1)) {
                res->timed_out = !all;
                break;
            }
            final = true;
        } else if (again) {
            uint64_t rest = req->timeout_ms - elapsed;
            cut |= vg_settle_sleep(req, rest < req->quiet_ms ? (unsigned)rest : req->quiet_ms);
        } else if (rc == 0 && !(req->look_after && res->looks == 1)) {
            uint64_t rest = req->timeout_ms - elapsed;
            cut |= vg_settle_sleep(req, rest < poll ? rest : poll);
        }
        vg_snap_free(res->last);
        res->last = NULL;
        snap = NULL;
        res->looks++;
        if (look(ctx, &res->last) != 0) {
            res->last = NULL;
            vg_settle_look_failed(res);
            break;
        }
        snap = res->last;
        if (!snap->driver_ok) {
            if (vg_settle_driver_gone(res, snap))
                rc = vg_err_set(err, -ENOMEM, "out of memory");
            break;
        }
        res->may_hide |= vg_snap_holders_may_hide(snap);
        res->hidepid |= (snap->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    }
    if (rc > 0)
        rc = 0;
out:
    res->elapsed_ms = vg_clock_ms() - start;
    return rc;
}
