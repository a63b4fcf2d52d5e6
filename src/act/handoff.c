/*
 * The hand-off between jobs (see handoff.h): look, stop this job's holders (epilog), look
 * again until every GPU is settled or the timeout passes, then judge each GPU from the last
 * look and from what was done.
 */
#include "act/handoff.h"
#include "rules/reason.h"
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

const char *vg_handoff_state_id(enum vg_handoff_state s)
{
    static const char *const ids[] = {"clean", "cleaned", "unknown", "dirty", "wedged"};
    return (unsigned)s < sizeof(ids) / sizeof(ids[0]) ? ids[s] : "unknown";
}

const char *vg_handoff_owner_id(enum vg_handoff_owner o)
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

enum vg_handoff_owner vg_handoff_owner_of(const struct vg_proc *p, const struct vg_handoff_job *job,
                                          const struct vg_kill_ctx *who, unsigned *evidence,
                                          const char **protected_name)
{
    *protected_name = vg_kill_protected_name(p);
    *evidence = vg_handoff_evidence(p, job);
    if (*protected_name)
        return VG_HANDOFF_INFRA;
    switch (vg_kill_check(p, who, NULL)) {
    case VG_KILL_INIT:
    case VG_KILL_SELF:
    case VG_KILL_ANCESTOR:
    case VG_KILL_KTHREAD:
        return VG_HANDOFF_INFRA;
    default:
        break;
    }
    /* The job's only with its uid (never another user's process) and a mark of the job itself,
     * and no mark of another: a process of the same user may belong to that user's next job. */
    unsigned ev = *evidence;
    if (job->id && (ev & VG_HANDOFF_EV_UID) && (ev & (VG_HANDOFF_EV_ENV | VG_HANDOFF_EV_CGROUP)) &&
        !(ev & VG_HANDOFF_EV_OTHER_JOB))
        return VG_HANDOFF_JOB;
    return VG_HANDOFF_OTHER;
}

void vg_handoff_result_init(struct vg_handoff_result *r)
{
    memset(r, 0, sizeof(*r));
}

static void vg_handoff_gpu_release(struct vg_handoff_gpu *g)
{
    for (size_t i = 0; i < g->nholders; i++) {
        free(g->holders[i].user);
        free(g->holders[i].comm);
    }
    free(g->holders);
    free(g->uuid);
    free(g->name);
}

void vg_handoff_result_release(struct vg_handoff_result *r)
{
    for (size_t i = 0; r->gpus && i < r->ngpus; i++)
        vg_handoff_gpu_release(&r->gpus[i]);
    free(r->gpus);
    free(r->driver_error);
    vg_handoff_result_init(r);
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
        struct vg_handoff_sel *v = realloc(s->v, (s->n + 1) * sizeof(*v));
        if (!v)
            return vg_err_set(err, -ENOMEM, "out of memory");
        s->v = v;
        v[s->n++] = sel;
    }
    return 0;
}

int vg_handoff_sels_parse(const char *list, bool slurm, struct vg_handoff_sels *out,
                          struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!(out->copy = strdup(list)))
        return vg_err_set(err, -ENOMEM, "out of memory");
    char *save = NULL;
    int rc = 0;
    for (char *w = strtok_r(out->copy, ",", &save); w && rc == 0; w = strtok_r(NULL, ",", &save))
        rc = vg_handoff_sels_word(out, w, slurm, err);
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

static char *vg_handoff_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Fill res->gpus from the selectors against the first look. */
static int vg_handoff_resolve(const struct vg_handoff_req *req, const struct vg_snapshot *snap,
                              struct vg_handoff_result *res, struct vg_err *err)
{
    res->gpus = calloc(req->nsel, sizeof(*res->gpus));
    if (!res->gpus)
        return vg_err_set(err, -ENOMEM, "out of memory");
    res->ngpus = req->nsel;
    for (size_t i = 0; i < req->nsel; i++) {
        struct vg_handoff_gpu *g = &res->gpus[i];
        g->sel = &req->sel[i];
        size_t gi;
        if (!vg_handoff_sel_match(g->sel, &snap->gpus, &gi))
            continue;
        const struct vg_gpu *d = &snap->gpus.gpus[gi];
        g->found = true;
        g->index = d->index;
        g->minor = d->minor;
        g->minor_known = (d->known & VG_GPU_K_MINOR) != 0;
        if (((d->known & VG_GPU_K_UUID) && !(g->uuid = strdup(d->uuid))) ||
            ((d->known & VG_GPU_K_NAME) && !(g->name = strdup(d->name))))
            return vg_err_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* Where a resolved GPU is in a later look: by UUID when it has one, else by index. */
static bool vg_handoff_find(const struct vg_handoff_gpu *g, const struct vg_snapshot *snap,
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

static struct vg_handoff_holder *vg_handoff_holder_get(struct vg_handoff_gpu *g, pid_t pid,
                                                       uint64_t start, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < g->nholders; i++)
        if (g->holders[i].pid == pid && g->holders[i].start_ticks == start)
            return &g->holders[i];
    struct vg_handoff_holder *v = realloc(g->holders, (g->nholders + 1) * sizeof(*v));
    if (!v)
        return NULL;
    g->holders = v;
    struct vg_handoff_holder *h = &v[g->nholders++];
    memset(h, 0, sizeof(*h));
    h->pid = pid;
    h->start_ticks = start;
    h->state = '?';
    *fresh = true;
    return h;
}

static int vg_handoff_holder_fill(struct vg_handoff_holder *h, const struct vg_holding *hd,
                                  const struct vg_handoff_req *req, bool fresh)
{
    const struct vg_proc *p = hd->proc;
    h->present = true;
    h->seen |= hd->seen;
    if (hd->used_known) {
        h->mem_known = true;
        h->mem_bytes = vg_sat_add(h->mem_bytes, hd->used_bytes);
    }
    if (!p) {
        h->owner = VG_HANDOFF_UNSEEN;
        return 0;
    }
    h->state = (p->known & VG_PROC_K_STAT) ? p->state : '?';
    if (p->threads_d > 0)
        h->state = 'D';
    h->uid_known = (p->known & VG_PROC_K_STATUS) != 0;
    h->uid = p->uid;
    /* In a prolog the job has not started: whoever holds its GPUs is someone else. */
    struct vg_handoff_job none = {.id = NULL, .uid_known = false};
    unsigned ev;
    const char *pname;
    enum vg_handoff_owner owner = vg_handoff_owner_of(
        p, req->mode == VG_HANDOFF_EPILOG ? &req->job : &none, &req->who, &ev, &pname);
    /* Same pid and start time, same process: once seen as the job's it stays so, when it has
     * become a zombie whose environment is gone too. */
    if (fresh || h->owner != VG_HANDOFF_JOB) {
        h->owner = owner;
        h->evidence = ev;
        h->protected_name = pname;
    }
    if (fresh &&
        ((p->user && !(h->user = strdup(p->user))) || (p->comm && !(h->comm = strdup(p->comm)))))
        return -ENOMEM;
    return 0;
}

/* Record GPU g's holders as this look shows them. */
static int vg_handoff_update(struct vg_handoff_gpu *g, const struct vg_snapshot *snap, size_t gi,
                             const struct vg_handoff_req *req)
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
        struct vg_handoff_holder *h = vg_handoff_holder_get(g, hd->pid, start, &fresh);
        if (!h)
            return -ENOMEM;
        if (!h->present) {
            h->mem_known = false;
            h->mem_bytes = 0;
        }
        if (vg_handoff_holder_fill(h, hd, req, fresh))
            return -ENOMEM;
    }
    return 0;
}

/* ---- stopping this job's holders (epilog) -------------------------------------------------- */

struct vg_handoff_round {
    struct vg_kill_identity *ids;
    struct vg_kill *kills;
    size_t n, cap;
};

static bool vg_handoff_signalled(const struct vg_handoff_result *res, pid_t pid, uint64_t start)
{
    for (size_t g = 0; g < res->ngpus; g++)
        for (size_t i = 0; i < res->gpus[g].nholders; i++) {
            const struct vg_handoff_holder *h = &res->gpus[g].holders[i];
            if (h->pid == pid && h->start_ticks == start && h->signalled)
                return true;
        }
    return false;
}

static bool vg_handoff_in_round(const struct vg_handoff_round *r, pid_t pid)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->ids[i].pid == pid)
            return true;
    return false;
}

static int vg_handoff_round_add(struct vg_handoff_round *r, const struct vg_snapshot *snap,
                                const struct vg_proc *p)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        struct vg_kill_identity *ids = realloc(r->ids, cap * sizeof(*ids));
        if (!ids)
            return -ENOMEM;
        r->ids = ids;
        r->cap = cap;
    }
    struct vg_kill_identity *id = &r->ids[r->n];
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
    r->n++;
    return 0;
}

static void vg_handoff_round_release(struct vg_handoff_round *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->kills)
            vg_kill_release(&r->kills[i]);
        vg_kill_identity_release(&r->ids[i]);
    }
    free(r->kills);
    free(r->ids);
}

/* Whether the driver answered for the GPU at the last look (not lost, hung or missing). */
static bool vg_handoff_seen(const struct vg_handoff_gpu *g)
{
    return !g->why || (strcmp(g->why, "lost") != 0 && strcmp(g->why, "hung") != 0 &&
                       strcmp(g->why, "missing") != 0);
}

/* This job's holders, present at this look, not signalled yet: allowed ones join the round;
 * the others keep the reason they may not be signalled. */
static int vg_handoff_pick(struct vg_handoff_result *res, const struct vg_snapshot *snap,
                           const struct vg_handoff_req *req, struct vg_handoff_round *r)
{
    for (size_t g = 0; g < res->ngpus; g++)
        for (size_t i = 0; i < res->gpus[g].nholders; i++) {
            struct vg_handoff_holder *h = &res->gpus[g].holders[i];
            /* Without the driver's view of a GPU nothing is done about it. */
            if (!vg_handoff_seen(&res->gpus[g]))
                break;
            if (!h->present || h->owner != VG_HANDOFF_JOB || h->signalled ||
                vg_handoff_signalled(res, h->pid, h->start_ticks) || vg_handoff_in_round(r, h->pid))
                continue;
            const struct vg_proc *p = vg_proc_table_find(&snap->procs, h->pid);
            if (!p)
                continue;
            h->refusal = vg_kill_check(p, &req->who, NULL);
            if (h->refusal == VG_KILL_ALLOWED && vg_handoff_round_add(r, snap, p))
                return -ENOMEM;
        }
    return 0;
}

/* Copy what became of each target to every GPU's record of it. */
static void vg_handoff_note(struct vg_handoff_result *res, const struct vg_handoff_round *r)
{
    for (size_t k = 0; k < r->n; k++) {
        const struct vg_kill *kl = &r->kills[k];
        bool sent = kl->outcome == VG_KILL_TERMINATED || kl->outcome == VG_KILL_KILLED ||
                    (kl->outcome == VG_KILL_FAILED && kl->stop.sent_term);
        if (sent)
            res->nsignalled++;
        for (size_t g = 0; g < res->ngpus; g++)
            for (size_t i = 0; i < res->gpus[g].nholders; i++) {
                struct vg_handoff_holder *h = &res->gpus[g].holders[i];
                if (h->pid != r->ids[k].pid || h->start_ticks != r->ids[k].start_ticks)
                    continue;
                h->signalled = true;
                h->outcome = kl->outcome;
                h->refusal = kl->refusal;
                h->error = kl->error;
                if (sent)
                    res->gpus[g].nstopped++;
            }
    }
}

/* Stop this job's holders as the look shows them: 1 when some were signalled (look again),
 * 0 when none, -ENOMEM. */
static int vg_handoff_stop(struct vg_handoff_result *res, const struct vg_snapshot *snap,
                           const struct vg_handoff_req *req, uint64_t grace_ms, struct vg_err *err)
{
    struct vg_handoff_round r = {0};
    int rc = vg_handoff_pick(res, snap, req, &r);
    if (rc == 0 && r.n > 0 && !(r.kills = calloc(r.n, sizeof(*r.kills))))
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < r.n; i++) {
        vg_kill_init(&r.kills[i], &r.ids[i]);
        rc = vg_kill_start(&r.kills[i], req->proc_root_fd, snap->dev_dir, &req->who, req->nvml,
                           req->nvml_arg, err);
    }
    if (rc == 0 && r.n > 0) {
        vg_kill_finish(r.kills, r.n, (unsigned)grace_ms, VG_HANDOFF_KILL_WAIT_MS);
        vg_handoff_note(res, &r);
        rc = 1;
    }
    vg_handoff_round_release(&r);
    if (rc == -ENOMEM)
        vg_err_set(err, -ENOMEM, "out of memory");
    return rc;
}

/* ---- judging -------------------------------------------------------------------------------- */

struct vg_handoff_tally {
    bool dstate, survived, other, unseen, job, leftover;
    uint64_t infra_bytes;
};

static void vg_handoff_tally(const struct vg_handoff_gpu *g, struct vg_handoff_tally *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < g->nholders; i++) {
        const struct vg_handoff_holder *h = &g->holders[i];
        if (!h->present)
            continue;
        t->dstate |= h->state == 'D' && h->owner != VG_HANDOFF_INFRA;
        switch (h->owner) {
        case VG_HANDOFF_JOB:
            t->job = true;
            t->survived |= h->signalled;
            break;
        case VG_HANDOFF_INFRA:
            if (h->mem_known)
                t->infra_bytes = vg_sat_add(t->infra_bytes, h->mem_bytes);
            break;
        case VG_HANDOFF_OTHER:
            t->other = true;
            break;
        case VG_HANDOFF_UNSEEN:
            t->unseen = true;
            break;
        case VG_HANDOFF_LEFTOVER:
            t->leftover = true;
            break;
        }
    }
}

/* Judge GPU g as the look shows it; *settled: waiting longer cannot change the verdict. */
static void vg_handoff_judge(struct vg_handoff_gpu *g, const struct vg_snapshot *snap, size_t gi,
                             const struct vg_handoff_req *req, bool *settled)
{
    const struct vg_gpu *d = &snap->gpus.gpus[gi];
    struct vg_handoff_tally t;
    vg_handoff_tally(g, &t);
    g->mem_known = (d->known & VG_GPU_K_MEM) && !d->lost && !d->hung;
    g->used = g->mem_known ? d->mem_used : 0;
    g->baseline = vg_sat_add(req->tolerance, t.infra_bytes);
    if (snap->gpus.mem_api && strcmp(snap->gpus.mem_api, "v1") == 0)
        g->baseline = vg_sat_add(g->baseline, VG_REASON_V1_RESERVED);
    bool excess = g->mem_known && g->used > g->baseline;
    *settled = true;
#define VG_VERDICT(st, w)                                                                          \
    do {                                                                                           \
        g->state = (st);                                                                           \
        g->why = (w);                                                                              \
    } while (0)
    if (d->lost)
        VG_VERDICT(VG_HANDOFF_WEDGED, "lost");
    else if (d->hung)
        VG_VERDICT(VG_HANDOFF_WEDGED, "hung");
    else if (t.dstate) {
        VG_VERDICT(VG_HANDOFF_WEDGED, "d-state");
        *settled = false; /* it may come out of the driver */
    } else if (t.job) {
        /* Signalled and still there, or this job's and not signallable (a zombie, unreadable) */
        VG_VERDICT(VG_HANDOFF_WEDGED, "survived");
        *settled = false;
    } else if (t.other || t.unseen) {
        VG_VERDICT(VG_HANDOFF_DIRTY, "holder");
        /* A PID the driver still lists may be this job's, gone a moment ago. */
        *settled = !t.unseen;
    } else if (!g->mem_known) {
        VG_VERDICT(VG_HANDOFF_UNKNOWN, "memory-unknown");
    } else if (excess) {
        /* No holder left: the driver may still be freeing what the job's processes held. */
        if (g->nstopped > 0)
            VG_VERDICT(VG_HANDOFF_WEDGED, "stuck");
        else
            VG_VERDICT(VG_HANDOFF_DIRTY, "unexplained");
        /* Waited on in any case: memory the driver is still freeing comes back. */
        *settled = false;
    } else if (g->nstopped > 0) {
        VG_VERDICT(VG_HANDOFF_CLEANED, "stopped");
    } else {
        VG_VERDICT(VG_HANDOFF_CLEAN, "free");
    }
#undef VG_VERDICT
}

/* ---- the procedure -------------------------------------------------------------------------- */

/* Update and judge every GPU from snap: true when all are settled. */
static int vg_handoff_assess(struct vg_handoff_result *res, const struct vg_snapshot *snap,
                             const struct vg_handoff_req *req, uint64_t elapsed, bool *all)
{
    *all = true;
    for (size_t i = 0; i < res->ngpus; i++) {
        struct vg_handoff_gpu *g = &res->gpus[i];
        size_t gi;
        bool settled = true;
        if (!vg_handoff_find(g, snap, &gi)) {
            g->state = VG_HANDOFF_WEDGED;
            g->why = "missing";
            for (size_t h = 0; h < g->nholders; h++)
                g->holders[h].present = false;
        } else {
            if (vg_handoff_update(g, snap, gi, req))
                return -ENOMEM;
            vg_handoff_judge(g, snap, gi, req, &settled);
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
static void vg_handoff_look_failed(struct vg_handoff_result *res)
{
    for (size_t i = 0; i < res->ngpus; i++)
        if (res->gpus[i].state < VG_HANDOFF_UNKNOWN) {
            res->gpus[i].state = VG_HANDOFF_UNKNOWN;
            res->gpus[i].why = "look-failed";
        }
}

/* The driver stopped answering between looks: nothing can be said of any GPU but that. */
static void vg_handoff_driver_gone(struct vg_handoff_result *res, const struct vg_snapshot *snap)
{
    for (size_t i = 0; i < res->ngpus; i++) {
        res->gpus[i].state = VG_HANDOFF_WEDGED;
        res->gpus[i].why = "hung";
    }
    if (!res->driver_error && snap->driver_error)
        res->driver_error = strdup(snap->driver_error);
}

static void vg_handoff_finish(struct vg_handoff_result *res, uint64_t start)
{

    res->state = VG_HANDOFF_CLEAN;
    for (size_t i = 0; i < res->ngpus; i++)
        if (res->gpus[i].state > res->state)
            res->state = res->gpus[i].state;
    res->elapsed_ms = vg_clock_ms() - start;
}

/* Without the driver's view: unknown, or wedged when the driver hung (a hung driver never frees
 * anything by itself). True when so. */
static bool vg_handoff_no_driver(struct vg_handoff_result *res, const struct vg_snapshot *snap)
{
    res->driver_ok = snap->driver_ok;
    if (snap->driver_ok)
        return false;
    res->driver_hung = snap->driver_hung;
    res->state = snap->driver_hung ? VG_HANDOFF_WEDGED : VG_HANDOFF_UNKNOWN;
    res->driver_error = vg_handoff_dup(snap->driver_error);
    return true;
}

int vg_handoff_run(const struct vg_handoff_req *req, vg_handoff_look_fn look, void *ctx,
                   struct vg_handoff_result *res, struct vg_err *err)
{
    uint64_t start = vg_clock_ms();
    unsigned poll = req->poll_ms ? req->poll_ms : VG_HANDOFF_POLL_DEFAULT_MS;
    struct vg_snapshot *snap = NULL;
    int rc = look(ctx, &snap);
    res->looks = 1;
    if (rc)
        return rc;
    res->may_hide = vg_snap_holders_may_hide(snap);
    res->hidepid = (snap->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    if (vg_handoff_no_driver(res, snap)) {
        /* Nothing is judged and nothing signalled without the driver's view. */
        vg_snap_free(snap);
        res->elapsed_ms = vg_clock_ms() - start;
        return 0;
    }
    if ((rc = vg_handoff_resolve(req, snap, res, err)) != 0)
        goto out;
    bool final = false;
    for (;;) {
        bool all;
        uint64_t elapsed = vg_clock_ms() - start;
        if ((rc = vg_handoff_assess(res, snap, req, elapsed, &all)) != 0) {
            vg_err_set(err, rc, "out of memory");
            goto out;
        }
        if (req->mode == VG_HANDOFF_PROLOG)
            break;
        if (final) {
            res->timed_out = !all;
            break;
        }
        uint64_t left = elapsed < req->timeout_ms ? req->timeout_ms - elapsed : 0;
        rc = vg_handoff_stop(res, snap, req, req->grace_ms < left ? req->grace_ms : left, err);
        if (rc < 0)
            goto out;
        if (rc == 0 && all)
            break;
        /* Past the timeout: one more look only to see what a last round of signals did. */
        elapsed = vg_clock_ms() - start;
        if (elapsed >= req->timeout_ms) {
            if (rc == 0) {
                res->timed_out = true;
                break;
            }
            final = true;
        } else if (rc == 0) {
            uint64_t rest = req->timeout_ms - elapsed;
            vg_clock_sleep_until(vg_clock_ms() + (rest < poll ? rest : poll));
        }
        vg_snap_free(snap);
        snap = NULL;
        res->looks++;
        if (look(ctx, &snap) != 0) {
            vg_handoff_look_failed(res);
            break;
        }
        if (!snap->driver_ok) {
            vg_handoff_driver_gone(res, snap);
            break;
        }
        res->may_hide |= vg_snap_holders_may_hide(snap);
        res->hidepid |= (snap->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    }
    rc = 0;
out:
    vg_handoff_finish(res, start);
    vg_snap_free(snap);
    return rc;
}

/* ---- node mode ------------------------------------------------------------------------------ */

static void vg_handoff_node_gpu(struct vg_handoff_gpu *g, const struct vg_snapshot *snap, size_t gi,
                                const struct vg_reason_gpu *rg, uint64_t tolerance)
{
    const struct vg_gpu *d = &snap->gpus.gpus[gi];
    struct vg_handoff_tally t;
    /* The reasons name the leftovers: orphan (a sure one) and zombie. */
    for (size_t i = 0; i < g->nholders; i++)
        for (size_t k = 0; k < rg->n; k++)
            if ((pid_t)rg->h[k].pid == g->holders[i].pid &&
                g->holders[i].owner != VG_HANDOFF_INFRA &&
                (rg->h[k].reason == VG_REASON_ORPHAN || rg->h[k].reason == VG_REASON_ZOMBIE))
                g->holders[i].owner = VG_HANDOFF_LEFTOVER;
    vg_handoff_tally(g, &t);
    g->mem_known = (d->known & VG_GPU_K_MEM) && !d->lost && !d->hung;
    g->used = g->mem_known ? d->mem_used : 0;
    g->baseline = vg_sat_add(
        tolerance, snap->per_gpu[gi].unexplained_has_reserved ? VG_REASON_V1_RESERVED : 0);
    bool reserved = snap->per_gpu[gi].unexplained_has_reserved;
    if (d->lost) {
        g->state = VG_HANDOFF_WEDGED, g->why = "lost";
    } else if (d->hung) {
        g->state = VG_HANDOFF_WEDGED, g->why = "hung";
    } else if (t.dstate) {
        g->state = VG_HANDOFF_WEDGED, g->why = "d-state";
    } else if (vg_reason_gpu_dirty(rg, reserved, tolerance)) {
        g->state = VG_HANDOFF_DIRTY, g->why = t.leftover ? "leftover" : "unexplained";
    } else if (!g->mem_known || !rg->known) {
        g->state = VG_HANDOFF_UNKNOWN, g->why = "memory-unknown";
    } else {
        g->state = VG_HANDOFF_CLEAN, g->why = "free";
    }
}

int vg_handoff_node(const struct vg_handoff_req *req, const struct vg_snapshot *snap,
                    const struct vg_findings *fs, struct vg_handoff_result *res, struct vg_err *err)
{
    uint64_t start = vg_clock_ms();
    res->looks = 1;
    res->may_hide = vg_snap_holders_may_hide(snap);
    res->hidepid = (snap->procs.access & VG_PROC_ACC_HIDEPID) != 0;
    if (vg_handoff_no_driver(res, snap))
        return 0;
    size_t n = snap->gpus.ngpus;
    if (n && !(res->gpus = calloc(n, sizeof(*res->gpus))))
        return vg_err_set(err, -ENOMEM, "out of memory");
    res->ngpus = n;
    for (size_t i = 0; i < n; i++) {
        struct vg_handoff_gpu *g = &res->gpus[i];
        const struct vg_gpu *d = &snap->gpus.gpus[i];
        struct vg_reason_gpu rg = {0};
        g->found = true;
        g->index = d->index;
        g->minor = d->minor;
        g->minor_known = (d->known & VG_GPU_K_MINOR) != 0;
        if (((d->known & VG_GPU_K_UUID) && !(g->uuid = strdup(d->uuid))) ||
            ((d->known & VG_GPU_K_NAME) && !(g->name = strdup(d->name))) ||
            vg_handoff_update(g, snap, i, req) ||
            vg_reason_gpu_build(snap, i, fs, VG_RULE_CONTEXT_MAX_DEFAULT, &rg)) {
            vg_reason_gpu_release(&rg);
            return vg_err_set(err, -ENOMEM, "out of memory");
        }
        vg_handoff_node_gpu(g, snap, i, &rg, req->tolerance);
        vg_reason_gpu_release(&rg);
    }
    vg_handoff_finish(res, start);
    return 0;
}
