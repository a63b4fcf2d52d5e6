/*
 * Building the plan of `clean` (see plan.h): select holders from the findings and the filters,
 * then apply the safety rules of act/kill.h to each. Nothing here reads the system.
 */
#include "act/plan.h"
#include "rules/reason.h"
#include "util/array.h"
#include "util/sat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Which finding explains why a holder is in the plan: the most specific first. */
/* A process stuck in D may well be a leftover too, but what decides what can be done about it
 * is that no signal reaches it: that finding comes first. */
static const char *const vg_plan_reason_order[] = {
    "zombie-holder", "d-state-holder", "orphan-holder", "idle-holder", "foreign-pid",
};

static const struct vg_finding *vg_plan_finding(const struct vg_findings *fs, const char *rule,
                                                pid_t pid)
{
    for (size_t i = 0; i < fs->n; i++)
        if ((!rule || strcmp(fs->v[i].rule, rule) == 0) && vg_finding_names_pid(&fs->v[i], pid))
            return &fs->v[i];
    return NULL;
}

static const struct vg_finding *vg_plan_reason(const struct vg_findings *fs, pid_t pid)
{
    for (size_t i = 0; i < sizeof(vg_plan_reason_order) / sizeof(vg_plan_reason_order[0]); i++) {
        const struct vg_finding *f = vg_plan_finding(fs, vg_plan_reason_order[i], pid);
        if (f)
            return f;
    }
    return vg_plan_finding(fs, NULL, pid);
}

void vg_plan_init(struct vg_plan *p)
{
    memset(p, 0, sizeof(*p));
}

static void vg_plan_entry_release(struct vg_plan_entry *e)
{
    vg_kill_identity_release(&e->id);
    free(e->finding);
    free(e->user);
    free(e->comm);
    free(e->cmdline);
    free(e->gpus);
}

void vg_plan_release(struct vg_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        vg_plan_entry_release(&p->v[i]);
    free(p->v);
    free(p->scope);
    vg_plan_init(p);
}

bool vg_plan_in_scope(const struct vg_plan *p, size_t gpu)
{
    for (size_t i = 0; i < p->nscope; i++)
        if (p->scope[i] == gpu)
            return true;
    return false;
}

bool vg_plan_unexplained(const struct vg_snapshot *snap, size_t gpu, uint64_t min)
{
    if (!snap->driver_ok || gpu >= snap->gpus.ngpus || snap->gpus.gpus[gpu].lost)
        return false;
    const struct vg_snap_gpu *s = &snap->per_gpu[gpu];
    /* With the v1 memory call the driver's own reservation is part of "used". */
    if (s->unexplained_has_reserved)
        min += VG_REASON_V1_RESERVED;
    return s->unexplained_known && s->unexplained_bytes > min;
}

bool vg_plan_reset_needed(const struct vg_snapshot *snap, size_t gpu, uint64_t min)
{
    /* Never when a holder could hide: descriptors that could not be read, or a minor number
     * that leaves the GPU's node unknown. */
    if (!vg_plan_unexplained(snap, gpu, min) || vg_snap_holders_may_hide(snap) ||
        !(snap->gpus.gpus[gpu].known & VG_GPU_K_MINOR))
        return false;
    size_t first, count;
    vg_snap_gpu_holdings(snap, gpu, &first, &count);
    return count == 0;
}

static int vg_cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Append v to a sorted-unique array. */
static int vg_add_unique(size_t **arr, size_t *n, size_t *cap, size_t v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return 0;
    if (vg_array_grow(arr, cap, *n + 1, sizeof(**arr)))
        return -ENOMEM;
    (*arr)[(*n)++] = v;
    qsort(*arr, *n, sizeof(**arr), vg_cmp_size);
    return 0;
}

static int vg_dup(const char *s, char **out)
{
    *out = NULL;
    if (s && !(*out = strdup(s)))
        return -ENOMEM;
    return 0;
}

enum vg_plan_sel { VG_SEL_NO, VG_SEL_TAKE, VG_SEL_LEAVE };

static enum vg_plan_sel vg_plan_selected(const struct vg_snapshot *snap,
                                         const struct vg_findings *fs,
                                         const struct vg_leftovers *ls,
                                         const struct vg_plan_opts *o, pid_t pid,
                                         const struct vg_proc *p)
{
    if (o->by_pid && pid != o->pid)
        return VG_SEL_NO;
    if (o->by_gpu) {
        bool hit = false;
        for (size_t i = 0; i < snap->nholdings && !hit; i++)
            hit = snap->holdings[i].pid == pid && snap->holdings[i].gpu == o->gpu;
        if (!hit)
            return VG_SEL_NO;
    }
    if (o->by_user && (!p || !(p->known & VG_PROC_K_STATUS) || p->uid != o->uid))
        return VG_SEL_NO;
    if (o->by_age) {
        if (!p || !(p->known & VG_PROC_K_STAT) || !o->clk_tck || o->now_ticks < p->start_ticks)
            return VG_SEL_NO;
        uint64_t age_ms = (o->now_ticks - p->start_ticks) * 1000u / o->clk_tck;
        if (age_ms < o->older_than_ms)
            return VG_SEL_NO;
    }
    bool narrow = o->by_gpu || o->by_pid || o->by_user || o->by_age;
    if (narrow && !o->orphans)
        return VG_SEL_TAKE;
    /* Orphans only (the default): sure leftovers of finished jobs, and the defunct and stuck
     * holders, which are listed to say why nothing is done about them; what only looks like a
     * leftover is listed to say why it is left alone. */
    const struct vg_leftover *l = vg_leftovers_find(ls, pid);
    if (l && l->verdict == VG_LEFT_YES && l->confidence == VG_CONF_HIGH)
        return VG_SEL_TAKE;
    if (vg_plan_finding(fs, "zombie-holder", pid) || vg_plan_finding(fs, "d-state-holder", pid))
        return VG_SEL_TAKE;
    if (l && l->verdict != VG_LEFT_NONE)
        return VG_SEL_LEAVE;
    return VG_SEL_NO;
}

static int vg_plan_fill(const struct vg_snapshot *snap, const struct vg_findings *fs,
                        const struct vg_leftovers *ls, const struct vg_plan_opts *o, pid_t pid,
                        const struct vg_proc *p, enum vg_plan_sel sel, struct vg_plan_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->id.pid = pid;
    e->state = p && (p->known & VG_PROC_K_STAT) ? p->state : '?';
    bool stale = false;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid != pid)
            continue;
        stale |= h->stale;
        e->seen |= h->seen;
        if (h->seen & VG_SEEN_NVML)
            e->id.nvml = true;
        if (h->used_known) {
            e->mem_known = true;
            e->mem_bytes = vg_sat_add(e->mem_bytes, h->used_bytes);
        }
        if (h->gpu != VG_SNAP_NO_GPU && vg_add_unique(&e->gpus, &e->ngpus, &e->gpus_cap, h->gpu))
            return -ENOMEM;
    }
    if (p) {
        if ((p->known & VG_PROC_K_STAT))
            e->id.start_ticks = p->start_ticks;
        if ((p->known & VG_PROC_K_STATUS))
            e->id.uid = p->uid;
        if ((p->known & VG_PROC_K_FDS) && p->ndev_minors) {
            e->id.minors = malloc(p->ndev_minors * sizeof(*e->id.minors));
            if (!e->id.minors)
                return -ENOMEM;
            memcpy(e->id.minors, p->dev_minors, p->ndev_minors * sizeof(*e->id.minors));
            e->id.nminors = p->ndev_minors;
        }
        vg_infra_judge(p, &e->infra);
        if (vg_dup(p->user, &e->user) || vg_dup(p->comm, &e->comm) ||
            vg_dup(p->cmdline, &e->cmdline))
            return -ENOMEM;
        if ((p->known & VG_PROC_K_STAT) && o->clk_tck && o->now_ticks >= p->start_ticks) {
            e->age_known = true;
            e->age_ms = (o->now_ticks - p->start_ticks) * 1000u / o->clk_tck;
        }
    }
    const struct vg_finding *f = vg_plan_reason(fs, pid);
    if (f) {
        e->reason = f->rule;
        if (vg_dup(f->title, &e->finding))
            return -ENOMEM;
    }

    const struct vg_leftover *l = vg_leftovers_find(ls, pid);
    if (l && l->why_not)
        e->verdict = l->why_not;
    if (e->seen == 0) {
        /* Named with --pid, but neither the driver nor a device node shows it holding. */
        e->refusal = VG_KILL_NOT_HOLDER;
    } else if (!p && stale) {
        e->refusal = VG_KILL_STALE;
    } else if (sel == VG_SEL_LEAVE) {
        /* not a target at all; a policy refusal (infrastructure...) still says more */
        e->leave = true;
        e->refusal = p ? vg_kill_check(p, &o->who, &e->act_on) : VG_KILL_NOT_VISIBLE;
        if (e->refusal == VG_KILL_PROTECTED)
            e->protected_name = vg_kill_protected_name(p);
        if (e->refusal == VG_KILL_ALLOWED)
            e->refusal = l && l->verdict == VG_LEFT_YES ? VG_KILL_UNSURE : VG_KILL_NOT_LEFTOVER;
    } else if (!p) {
        e->refusal = VG_KILL_NOT_VISIBLE;
    } else if (!(e->seen & VG_SEEN_NODE) &&
               (!o->pidns_trusted || snap->procs.self_nspid_depth > 1)) {
        /* The driver speaks in the host's PIDs; here the same number may be someone else. */
        e->refusal = VG_KILL_NAMESPACE;
    } else {
        e->refusal = vg_kill_check(p, &o->who, &e->act_on);
        if (e->refusal == VG_KILL_PROTECTED)
            e->protected_name = vg_kill_protected_name(p);
    }
    e->hidden = e->refusal == VG_KILL_NOT_VISIBLE && (snap->procs.access & VG_PROC_ACC_HIDEPID);
    e->signal = e->refusal == VG_KILL_ALLOWED;
    return 0;
}

/* How many entries are signalled, left alone and refused. */
static void vg_plan_count(struct vg_plan *out)
{
    for (size_t i = 0; i < out->n; i++) {
        if (out->v[i].signal)
            out->nsignal++;
        else if (out->v[i].leave)
            out->nleft++;
        else
            out->nrefused++;
    }
}

/* The GPUs to report on: the one named, else those the entries hold, else (a clean of the
 * whole host) every GPU. */
static int vg_plan_scope(const struct vg_snapshot *snap, const struct vg_plan_opts *o,
                         struct vg_plan *out)
{
    int rc = 0;
    if (o->by_gpu) {
        rc = vg_add_unique(&out->scope, &out->nscope, &out->scope_cap, o->gpu);
    } else if (!o->by_pid && !o->by_user) {
        for (size_t g = 0; g < snap->gpus.ngpus && !rc; g++)
            rc = vg_add_unique(&out->scope, &out->nscope, &out->scope_cap, g);
    }
    for (size_t i = 0; i < out->n && !rc; i++)
        for (size_t k = 0; k < out->v[i].ngpus && !rc; k++)
            if (!o->by_gpu)
                rc = vg_add_unique(&out->scope, &out->nscope, &out->scope_cap, out->v[i].gpus[k]);
    return rc;
}

int vg_plan_build(const struct vg_snapshot *snap, const struct vg_findings *fs,
                  const struct vg_plan_opts *o, struct vg_plan *out, struct vg_err *err)
{
    vg_plan_init(out);
    size_t cap = 0;
    struct vg_leftovers ls;
    int rc = vg_leftovers_assess(snap, &ls);
    if (rc)
        goto fail;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->bogus_pid)
            continue;
        bool dup = false;
        for (size_t k = 0; k < out->n && !dup; k++)
            dup = out->v[k].id.pid == h->pid;
        enum vg_plan_sel sel =
            dup ? VG_SEL_NO : vg_plan_selected(snap, fs, &ls, o, h->pid, h->proc);
        if (sel == VG_SEL_NO)
            continue;
        if (VG_ARRAY_GROW(out->v, cap, out->n + 1)) {
            rc = -ENOMEM;
            goto fail;
        }
        rc = vg_plan_fill(snap, fs, &ls, o, h->pid, h->proc, sel, &out->v[out->n]);
        out->n++;
        if (rc)
            goto fail;
    }
    /* --pid naming something that holds no GPU at all: say so rather than print an empty
     * plan. (One that holds a GPU the other filters exclude simply does not match.) */
    bool holds = false;
    for (size_t i = 0; o->by_pid && i < snap->nholdings && !holds; i++)
        holds = snap->holdings[i].pid == o->pid;
    if (o->by_pid && out->n == 0 && !holds) {
        if (VG_ARRAY_GROW(out->v, cap, out->n + 1)) {
            rc = -ENOMEM;
            goto fail;
        }
        rc = vg_plan_fill(snap, fs, &ls, o, o->pid, vg_proc_table_find(&snap->procs, o->pid),
                          VG_SEL_TAKE, &out->v[out->n]);
        out->n++;
        if (rc)
            goto fail;
    }
    if (out->n)
        qsort(out->v, out->n, sizeof(*out->v), vg_array_cmp_pid); /* id.pid leads an entry */

    vg_plan_count(out);
    rc = vg_plan_scope(snap, o, out);
    if (rc)
        goto fail;
    vg_leftovers_release(&ls);
    return 0;

fail:
    vg_leftovers_release(&ls);
    vg_plan_release(out);
    return vg_err_set(err, rc, "out of memory planning the cleanup");
}
