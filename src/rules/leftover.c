/*
 * The leftover model (rules.h; docs/diagnoses.md has the cases): is a process that holds a GPU
 * what is left of a job that ended, and how sure is that?
 *
 * Being re-parented with its process group's or session's leader gone is how a leftover looks,
 * but it is also how a job looks that was detached on purpose: a nohup job whose login shell
 * exited, a daemon, a job in a tmux pane whose shell exited. So the verdict weighs more:
 *   - a process that leads its own group or session IS a job (or a daemon), never a remnant;
 *   - one that ignores SIGHUP, or has a double-forked daemon's shape, detached on purpose,
 *     unless something marks it as a worker of the job (then it only inherited that);
 *   - a stopped process was suspended by its owner;
 *   - worker marks (device nodes inherited without a context of its own, a multiprocessing
 *     command line, a launcher's rank variables, a worker's name, a parent that is itself a
 *     leftover) say it served a job rather than being one;
 *   - activity: CPU time over a short window and the driver's per-process utilisation samples
 *     tell a leftover that waits from one that still works.
 * A leftover is of high confidence only with a worker mark and no sign of work; every other
 * leftover is medium, reported but never a default target.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rules/internal.h"

/* CPU use over the window below which a process counts as idle, in per mille of one CPU: a
 * waiting worker wakes now and then (a watchdog polling its parent), a working one far more. */
#define VG_LEFT_BUSY_PERMILLE 50u

void vg_leftovers_release(struct vg_leftovers *l)
{
    free(l->v);
    memset(l, 0, sizeof(*l));
}

const struct vg_leftover *vg_leftovers_find(const struct vg_leftovers *l, pid_t pid)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (l->v[i].pid == pid)
            return &l->v[i];
    return NULL;
}

static bool vg_left_mp_cmdline(const char *cmd)
{
    static const char *const marks[] = {"multiprocessing.spawn", "multiprocessing-fork",
                                        "multiprocessing.forkserver", "loky.backend"};
    for (size_t i = 0; cmd && i < sizeof(marks) / sizeof(marks[0]); i++)
        if (strstr(cmd, marks[i]))
            return true;
    return false;
}

/* Whether the driver's process lists are complete on every GPU, so that "the driver lists it
 * nowhere" means something. */
static bool vg_left_lists_complete(const struct vg_snapshot *snap)
{
    if (!snap->driver_ok)
        return false;
    for (size_t g = 0; g < snap->gpus.ngpus; g++)
        if (!(snap->gpus.gpus[g].known & VG_GPU_K_PROCS))
            return false;
    return true;
}

/* The driver's utilisation samples for pid: bits GPU_BUSY / GPU_IDLE (neither: unknown). */
static unsigned vg_left_gpu_activity(const struct vg_snapshot *snap, pid_t pid, unsigned *max)
{
    bool any = false, all = true;
    *max = 0;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid != pid || !(h->seen & VG_SEEN_NVML) || h->gpu == VG_SNAP_NO_GPU)
            continue;
        const struct vg_gpu *g = &snap->gpus.gpus[h->gpu];
        const struct vg_gpu_proc *gp = NULL;
        for (size_t k = 0; h->mig < 0 && (g->known & VG_GPU_K_PROC_UTIL) && k < g->nprocs; k++)
            if (g->procs[k].pid == (uint32_t)pid && g->procs[k].util_known)
                gp = &g->procs[k];
        if (!gp) {
            all = false;
            continue;
        }
        any = true;
        if (gp->sm_util > *max)
            *max = gp->sm_util;
    }
    if (*max > 0)
        return VG_LEV_GPU_BUSY;
    return any && all ? VG_LEV_GPU_IDLE : 0;
}

/* Everything the verdict rests on, from what the snapshot read of one holder. */
static void vg_left_facts(const struct vg_snapshot *snap, bool lists_complete,
                          struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    unsigned ev = 0;
    bool fd = false;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid != l->pid)
            continue;
        fd |= (h->seen & VG_SEEN_NODE) != 0; /* by descriptor or mapping */
        if (h->seen & VG_SEEN_NVML) {
            l->nvml = true;
            if (h->used_known) {
                l->bytes_known = true;
                l->bytes =
                    h->used_bytes > UINT64_MAX - l->bytes ? UINT64_MAX : l->bytes + h->used_bytes;
            }
        }
    }
    l->job_pgid = p->pgid;
    l->job_sid = p->sid;

    if (p->ppid == 1)
        ev |= VG_LEV_PARENT_INIT;
    else if (!p->parent_alive)
        ev |= VG_LEV_PARENT_DEAD;
    else if (p->parent_known && p->parent_ns_init)
        ev |= VG_LEV_PARENT_NS_INIT;
    else if (p->parent_known && p->parent_sid != p->sid && p->sid != p->pid)
        ev |= VG_LEV_PARENT_REAPER; /* (a session leader's parent is in another session anyway) */
    else if (p->parent_known && p->parent_pgid != p->pgid && p->pgid != p->pid && !p->pgid_alive)
        ev |= VG_LEV_PARENT_SHELL;
    if (p->pgid != p->pid && !p->pgid_alive)
        ev |= VG_LEV_GROUP_GONE;
    if (p->sid != p->pid && !p->sid_alive)
        ev |= VG_LEV_SESSION_GONE;
    if (p->pgid == p->pid)
        ev |= VG_LEV_LEADS_GROUP;
    if (p->sid == p->pid)
        ev |= VG_LEV_LEADS_SESSION;
    if ((p->known & VG_PROC_K_SIGIGN) && (p->sig_ignored & 1u))
        ev |= VG_LEV_SIGHUP_IGNORED;
    if (p->pgid == p->sid && (ev & VG_LEV_GROUP_GONE) && (ev & VG_LEV_SESSION_GONE) &&
        p->tty_nr == 0)
        ev |= VG_LEV_DAEMON;
    if (p->state == 'T' || p->state == 't')
        ev |= VG_LEV_STOPPED;

    /* A monitor that uses NVML (no CUDA) opens the nodes itself; a worker forked from a CUDA
     * program inherits them together with its parent's mapped CUDA. */
    bool nvml_monitor = (p->known & VG_PROC_K_MAPS) && (p->libs & VG_LIB_NVML) &&
                        !(p->libs & (VG_LIB_CUDA | VG_LIB_CUDART | VG_LIB_TORCH_CUDA));
    if (fd && !l->nvml && lists_complete && !nvml_monitor)
        ev |= VG_LEV_INHERITED;
    if ((p->known & VG_PROC_K_CMDLINE) && vg_left_mp_cmdline(p->cmdline))
        ev |= VG_LEV_MP_CHILD;
    if (vg_rule_has_rank(p))
        ev |= VG_LEV_RANK;
    if (p->comm && strncmp(p->comm, "pt_data_worker", 14) == 0)
        ev |= VG_LEV_WORKER_NAME;

    if (p->activity_known && p->activity_ms > 0)
        ev |= p->activity_cpu_ms * 1000u >= (uint64_t)p->activity_ms * VG_LEFT_BUSY_PERMILLE
                  ? VG_LEV_CPU_BUSY
                  : VG_LEV_CPU_IDLE;
    if (l->nvml)
        ev |= vg_left_gpu_activity(snap, l->pid, &l->gpu_util);
    l->ev = ev;
}

#define VG_LEV_ADOPTED                                                                             \
    (VG_LEV_PARENT_INIT | VG_LEV_PARENT_NS_INIT | VG_LEV_PARENT_REAPER | VG_LEV_PARENT_SHELL |     \
     VG_LEV_PARENT_DEAD | VG_LEV_PARENT_LEFTOVER)

/* The verdict from the facts; cap is the highest confidence allowed (a worker's worker is
 * never surer than the leftover it hangs from). */
static void vg_left_judge(struct vg_leftover *l, enum vg_confidence cap)
{
    unsigned ev = l->ev;
    l->why_not = NULL;
    l->confidence = VG_CONF_LOW;
    if (!(ev & VG_LEV_ADOPTED)) {
        l->verdict = VG_LEFT_NONE;
        return;
    }
    /* A process a launcher started as a worker or rank (torchrun starts each rank in a session
     * of its own) ended with its launcher: being adopted says the launcher is gone. */
    bool launched = ev & VG_LEV_WORKER_STRONG;
    bool leads = ev & (VG_LEV_LEADS_SESSION | VG_LEV_LEADS_GROUP);
    bool ended = (ev & (VG_LEV_GROUP_GONE | VG_LEV_SESSION_GONE | VG_LEV_PARENT_LEFTOVER)) ||
                 (leads && launched);
    l->verdict = VG_LEFT_NOT;
    if (ev & VG_LEV_STOPPED) {
        l->why_not = "it is stopped (T): suspended by its owner or a debugger, not finished";
    } else if ((ev & VG_LEV_LEADS_SESSION) && !launched) {
        l->why_not = "it leads its own session: a daemon, a service or a container's main "
                     "process, not what is left of a job";
    } else if ((ev & VG_LEV_LEADS_GROUP) && !launched) {
        l->why_not = "it leads its own process group: it is a job itself (started with nohup, "
                     "with & or in a terminal multiplexer), not what is left of one";
    } else if (!ended) {
        /* adopted while its job's leaders run (started with `(cmd &)` in a live shell, or by a
         * desktop session): nothing says its job ended, so it is not even a candidate */
        l->verdict = VG_LEFT_NONE;
        return;
    } else if (!(ev & VG_LEV_WORKER) && (ev & VG_LEV_SIGHUP_IGNORED)) {
        l->why_not = "it ignores SIGHUP (nohup): it was detached from its terminal on purpose";
    } else if (!launched && (ev & VG_LEV_DAEMON)) {
        l->why_not = "it has a daemon's shape (forked twice, alone in a session whose leader "
                     "exited, no terminal): detached on purpose";
    } else {
        l->verdict = VG_LEFT_YES;
    }
    if (l->verdict != VG_LEFT_YES)
        return;
    l->confidence = VG_CONF_MEDIUM;
    if (ev & (VG_LEV_CPU_BUSY | VG_LEV_GPU_BUSY))
        l->why_not = "it is working (CPU time or GPU utilisation): a leftover that works may "
                     "still be finishing something";
    else if (!(ev & VG_LEV_WORKER))
        l->why_not = "nothing marks it as a worker of that job: it may be the job itself, left "
                     "running in the background";
    else if (!(ev & VG_LEV_CPU_IDLE))
        l->why_not = "whether it works could not be measured";
    else if (l->nvml && !(ev & (VG_LEV_GPU_IDLE | VG_LEV_INHERITED)))
        l->why_not = "the driver gives no per-process utilisation, so GPU work cannot be ruled "
                     "out";
    else if (cap < VG_CONF_HIGH)
        l->why_not = "it hangs from a process that is itself not a sure leftover";
    else
        l->confidence = VG_CONF_HIGH;
}

/* Whether the facts were read: a zombie or a process whose stat is unknown is never judged. */
static bool vg_left_judged(const struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    return (p->known & VG_PROC_K_STAT) && p->state != 'Z' && p->state != 'X';
}

int vg_leftovers_assess(const struct vg_snapshot *snap, struct vg_leftovers *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; i < snap->nholdings; i++)
        n += snap->holdings[i].proc != NULL;
    if (!n)
        return 0;
    out->v = calloc(n, sizeof(*out->v));
    if (!out->v)
        return -ENOMEM;
    bool lists = vg_left_lists_complete(snap);
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *p = h->proc;
        if (!p || vg_leftovers_find(out, h->pid))
            continue;
        struct vg_leftover *l = &out->v[out->n++];
        l->pid = h->pid;
        l->proc = p;
        if (!vg_left_judged(l))
            continue; /* VG_LEFT_NONE: zombie-holder's, or unreadable */
        vg_left_facts(snap, lists, l);
        vg_left_judge(l, VG_CONF_HIGH);
    }
    /* Workers of a leftover are part of the same ended job even though their own parent is
     * alive: join them through their parent, until no more join (each pass adds at least one,
     * so at most n passes). */
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < out->n; i++) {
            struct vg_leftover *l = &out->v[i];
            if (!vg_left_judged(l) || (l->ev & VG_LEV_PARENT_LEFTOVER))
                continue;
            const struct vg_leftover *par = vg_leftovers_find(out, l->proc->ppid);
            if (!par || par == l || par->verdict != VG_LEFT_YES)
                continue;
            l->ev |= VG_LEV_PARENT_LEFTOVER;
            l->via = par->pid;
            l->job_pgid = par->job_pgid;
            l->job_sid = par->job_sid;
            vg_left_judge(l, par->confidence);
            grew = true;
        }
    }
    /* A leftover that joined its own parent's job after its workers joined it may have lost
     * confidence since: no worker stays surer than the process it hangs from. */
    for (bool lowered = true; lowered;) {
        lowered = false;
        for (size_t i = 0; i < out->n; i++) {
            struct vg_leftover *l = &out->v[i];
            const struct vg_leftover *par = l->via ? vg_leftovers_find(out, l->via) : NULL;
            if (par && l->verdict == VG_LEFT_YES && par->confidence < l->confidence) {
                vg_left_judge(l, par->confidence);
                lowered = true;
            }
        }
    }
    return 0;
}

int vg_leftovers_unmeasured(const struct vg_snapshot *snap, pid_t **pids, size_t *n)
{
    *pids = NULL;
    *n = 0;
    struct vg_leftovers ls;
    int rc = vg_leftovers_assess(snap, &ls);
    if (rc)
        return rc;
    for (size_t i = 0; i < ls.n; i++) {
        const struct vg_leftover *l = &ls.v[i];
        if (l->verdict != VG_LEFT_YES || l->proc->activity_known)
            continue;
        if (!*pids && !(*pids = malloc(ls.n * sizeof(**pids)))) {
            rc = -ENOMEM;
            break;
        }
        (*pids)[(*n)++] = l->pid;
    }
    vg_leftovers_release(&ls);
    return rc;
}

int vg_leftovers_measure(struct vg_snapshot *snap, unsigned window_ms)
{
    pid_t *pids = NULL;
    size_t n = 0;
    int rc = vg_leftovers_unmeasured(snap, &pids, &n);
    if (rc == 0 && n)
        vg_snap_measure_activity(snap, pids, n, window_ms);
    free(pids);
    return rc;
}
