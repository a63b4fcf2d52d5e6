/*
 * The leftover model (rules.h; docs/diagnoses.md has the facts, their weights and the cases):
 * is a process that holds a GPU what is left of a job that ended, and how sure is that?
 *
 * Being adopted with its job's leader gone is how a leftover looks, and also how a job looks
 * that was detached on purpose (nohup, setsid, a daemon, a pane whose shell exited). No shape
 * tells them apart on its own: a DataLoader worker of a main process that led its own session
 * and crashed has exactly a double-forked daemon's lineage. What does tell them apart holds
 * whatever the lineage:
 *   - the driver frees a context only when the last file or mapping that refers to it is
 *     gone, so memory it still charges to a dead leader, on a GPU this process holds, is that
 *     leader's context kept alive by this process's inherited files;
 *   - a process forked after CUDA started inherits the device nodes without a context of its
 *     own, while a daemon or a job that runs CUDA itself has its own;
 *   - forked workers share their command line, and several of them share the dead session;
 *   - leading a session or group, ignoring SIGHUP, a service's cgroup, working: a job meant to
 *     run, unless a launcher made it so (torchrun starts each rank in a session of its own).
 * Each is a fact with a weight; the sum decides, and what could not be read keeps it from
 * being sure. Names, command lines and environments are things a process chooses: hints, of
 * small weight, that can only make the process itself look more like a leftover.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/internal.h"
#include "util/sat.h"

/* CPU use over the window below which a process counts as idle, in per mille of one CPU: a
 * waiting worker wakes now and then (a watchdog polling its parent), a working one far more. */
#define VG_LEFT_BUSY_PERMILLE 50u

/* The weight of each fact (docs/diagnoses.md's table says why each is what it is). */
static const struct vg_left_fact_def {
    const char *name;
    int weight;
    const char *why_not; /* the sentence clean's plan gives when this fact weighs most against */
} vg_left_defs[VG_LF_COUNT] = {
    [VG_LF_ADOPTED] = {"adopted", 1, NULL},
    [VG_LF_GROUP_GONE] = {"group-leader-gone", 2, NULL},
    [VG_LF_SESSION_GONE] = {"session-leader-gone", 1, NULL},
    [VG_LF_CHARGES_LEADER] = {"driver-charges-dead-leader", 3, NULL},
    [VG_LF_CHARGES_DEAD] = {"driver-charges-dead-pid", 2, NULL},
    [VG_LF_INHERITED] = {"inherited-nodes", 2, NULL},
    [VG_LF_SIBLINGS] = {"sibling-workers", 1, NULL},
    [VG_LF_PARENT_LEFTOVER] = {"parent-leftover", 3, NULL},
    [VG_LF_LAUNCHER_GONE] = {"launcher-gone", 3, NULL},
    [VG_LF_MP_CMDLINE] = {"multiprocessing-cmdline", 2, NULL},
    [VG_LF_WORKER_NAME] = {"worker-name", 2, NULL},
    [VG_LF_LEADS_SESSION] = {"leads-session", -3,
                             "it leads its own session: a daemon, a service or a job started "
                             "with setsid, not what is left of one"},
    [VG_LF_LEADS_GROUP] = {"leads-group", -2,
                           "it leads its own process group: it is a job itself (started with "
                           "nohup, with & or in a terminal multiplexer)"},
    [VG_LF_SIGHUP_IGNORED] = {"sighup-ignored", -2,
                              "it ignores SIGHUP (nohup): it was detached from its terminal "
                              "on purpose"},
    [VG_LF_OWN_CONTEXT] = {"own-context", -1,
                           "it holds a CUDA context of its own: it started CUDA itself"},
    [VG_LF_MAIN] = {"main-with-workers", -2,
                    "it has a CUDA context of its own and its children hold its device nodes: "
                    "a job's main process with workers of its own, not a worker"},
    [VG_LF_ALONE] = {"alone-in-session", -3,
                     "it runs alone in a session whose leader is gone, with no sibling: a "
                     "daemon's shape (forked to run on its own)"},
    [VG_LF_NVML_MONITOR] = {"nvml-monitor", -3,
                            "it maps NVML and no CUDA: a monitor that opened the device nodes "
                            "itself"},
    [VG_LF_NO_CUDA] = {"no-cuda-mapped", -1,
                       "it maps no CUDA library: the device nodes may be its own rather than "
                       "inherited from a CUDA program"},
    [VG_LF_OLDER_CONTEXT] = {"context-older-than-session", -2,
                             "the context it keeps alive is older than its session: it left "
                             "the session of the process that made it, as a daemon does"},
    [VG_LF_LIVE_CONTEXT] = {"live-context-in-session", -3,
                            "a live process of its session has a context on a GPU it holds "
                            "without one: its job may still run"},
    [VG_LF_LIVE_KIN] = {"live-kin-in-session", -3,
                        "an older live process of its session that was not adopted runs its "
                        "command line: the job it was forked from may still run"},
    [VG_LF_SERVICE] = {"service-cgroup", -2, "it runs in a service's cgroup: a supervised service"},
    [VG_LF_WORKS] = {"works", -2,
                     "it is working (CPU time or GPU utilisation): a leftover that works may "
                     "still be finishing something"},
    [VG_LF_STOPPED] = {"stopped", -3,
                       "it is stopped (T): suspended by its owner or a debugger, not finished"},
    [VG_LF_UNMEASURED] = {"activity-unmeasured", 0, "whether it works could not be measured"},
    [VG_LF_GPU_UNKNOWN] = {"gpu-utilisation-unknown", 0,
                           "the driver gives no per-process utilisation, so GPU work cannot be "
                           "ruled out"},
    [VG_LF_LISTS_UNKNOWN] = {"driver-lists-unknown", 0,
                             "a process list of the driver could not be read: whether the "
                             "driver charges its memory to this process or to a dead one, and "
                             "whether it works on the GPU, are unknown"},
    [VG_LF_PIDS_FOREIGN] = {"driver-pids-unverified", 0,
                            "the driver's PIDs may be another PID namespace's, so what it "
                            "charges to dead PIDs could not be weighed"},
    [VG_LF_PARENT_UNSURE] = {"parent-unsure", 0,
                             "it hangs from a process that is itself not a sure leftover"},
};

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

const struct vg_left_fact *vg_leftover_fact(const struct vg_leftover *l, enum vg_left_fact_id id)
{
    for (size_t i = 0; l && i < l->nfacts; i++)
        if (l->facts[i].id == id)
            return &l->facts[i];
    return NULL;
}

const char *vg_left_fact_name(enum vg_left_fact_id id)
{
    return (unsigned)id < VG_LF_COUNT ? vg_left_defs[id].name : "unknown";
}

const char *vg_left_verdict_name(enum vg_left_verdict v)
{
    return v == VG_LEFT_YES ? "leftover" : v == VG_LEFT_NOT ? "not a leftover" : "not considered";
}

/* "init", "its container's init", "a subreaper": who the new parent is. */
static const char *vg_left_parent_kind(const struct vg_proc *p)
{
    if (p->ppid == 1)
        return " (init)";
    if (!p->parent_alive)
        return ", which has exited";
    if (p->parent_known && p->parent_ns_init)
        return " (its container's init)";
    if (p->parent_known && p->parent_sid != p->sid)
        return " (a subreaper in another session)";
    return " (a subreaper in its own session, such as the launching shell)";
}

/* long: one case per fact that names processes, GPUs or figures; the switch is the list of
 * sentences, read best whole. */
void vg_left_fact_text(const struct vg_snapshot *snap, const struct vg_leftover *l,
                       const struct vg_left_fact *f, char *out, size_t n)
{
    const struct vg_proc *p = l->proc;
    char size[32], gpu[VG_LABEL_MAX];
    vg_rule_size(f->bytes_known, f->bytes, size, sizeof(size));
    if (f->id == VG_LF_CHARGES_LEADER || f->id == VG_LF_CHARGES_DEAD ||
        f->id == VG_LF_OLDER_CONTEXT)
        vg_rule_gpu_label(snap, f->gpu, gpu, sizeof(gpu));
    const char *gone = f->zombie ? "is a zombie (exited, not reaped)" : "has exited";
    switch (f->id) {
    case VG_LF_ADOPTED:
        snprintf(out, n, "parent is now PID %d%s", (int)p->ppid, vg_left_parent_kind(p));
        return;
    case VG_LF_GROUP_GONE:
        snprintf(out, n, "its process group leader (PID %d) %s", (int)f->pid, gone);
        return;
    case VG_LF_SESSION_GONE:
        snprintf(out, n, "its session leader (PID %d) %s", (int)f->pid, gone);
        return;
    case VG_LF_CHARGES_LEADER:
        snprintf(out, n,
                 "the driver still charges %s on %s to PID %d, its dead %s leader: a "
                 "context lives while a file or mapping refers to it, and it holds that GPU",
                 size, gpu, (int)f->pid, f->pid == p->pgid ? "process group" : "session");
        return;
    case VG_LF_CHARGES_DEAD:
        snprintf(out, n,
                 "the driver charges %s on %s to PID %d, which has exited, and it holds that "
                 "GPU without a context of its own",
                 size, gpu, (int)f->pid);
        return;
    case VG_LF_INHERITED:
        snprintf(out, n, "holds the device node only, inherited: no context of its own");
        return;
    case VG_LF_SIBLINGS:
        snprintf(out, n, "%u other holder%s of the same ended job run%s the same command line",
                 f->count, f->count == 1 ? "" : "s", f->count == 1 ? "s" : "");
        return;
    case VG_LF_OLDER_CONTEXT:
        snprintf(out, n,
                 "the context of PID %d on %s, whose node it holds, is older than its session: "
                 "it left the session of the process that made it, as a daemon does (PID "
                 "order)",
                 (int)f->pid, gpu);
        return;
    case VG_LF_LIVE_CONTEXT:
        vg_rule_gpu_label(snap, f->gpu, gpu, sizeof(gpu));
        snprintf(out, n,
                 "PID %d, a live process of its session, has a context on %s, whose node it "
                 "holds without one: its job may still run",
                 (int)f->pid, gpu);
        return;
    case VG_LF_LIVE_KIN:
        snprintf(out, n,
                 "PID %d, an older live process of its session that was not adopted, runs its "
                 "command line: the job it was forked from may still run",
                 (int)f->pid);
        return;
    case VG_LF_PARENT_LEFTOVER:
        snprintf(out, n, "a worker of leftover PID %d", (int)f->pid);
        return;
    case VG_LF_LAUNCHER_GONE: {
        static const enum vg_env_var vars[] = {VG_ENV_LOCAL_RANK, VG_ENV_RANK,
                                               VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK,
                                               VG_ENV_SLURM_LOCALID};
        const char *var = "", *val = "";
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]) && !*var; i++)
            if (p->env[vars[i]]) {
                var = vg_env_name(vars[i]);
                val = p->env[vars[i]];
            }
        snprintf(out, n, "a launcher's rank (%s=%.20s), adopted: its launcher is gone", var, val);
        return;
    }
    case VG_LF_MP_CMDLINE:
        snprintf(out, n, "a multiprocessing worker by its command line (a hint)");
        return;
    case VG_LF_WORKER_NAME:
        snprintf(out, n, "named as a PyTorch DataLoader worker (a hint)");
        return;
    case VG_LF_WORKS:
        if (p->activity_known && f->count)
            snprintf(out, n,
                     "works: %llu ms of CPU time in the last %u ms, %u%% GPU in the "
                     "driver's recent samples",
                     (unsigned long long)p->activity_cpu_ms, p->activity_ms, f->count);
        else if (p->activity_known)
            snprintf(out, n, "works: %llu ms of CPU time in the last %u ms",
                     (unsigned long long)p->activity_cpu_ms, p->activity_ms);
        else
            snprintf(out, n, "works: %u%% GPU in the driver's recent samples", f->count);
        return;
    default:
        snprintf(out, n, "%s", vg_left_defs[f->id].why_not);
        return;
    }
}

/* Add a fact with its default weight (once: a second call for the same id changes nothing). */
static struct vg_left_fact *vg_left_add(struct vg_leftover *l, enum vg_left_fact_id id)
{
    struct vg_left_fact *f = (struct vg_left_fact *)vg_leftover_fact(l, id);
    if (f)
        return f;
    f = &l->facts[l->nfacts++];
    memset(f, 0, sizeof(*f));
    f->id = id;
    f->weight = vg_left_defs[id].weight;
    return f;
}

static void vg_left_drop(struct vg_leftover *l, enum vg_left_fact_id id)
{
    for (size_t i = 0; i < l->nfacts; i++)
        if (l->facts[i].id == id) {
            memmove(&l->facts[i], &l->facts[i + 1], (l->nfacts - i - 1) * sizeof(l->facts[0]));
            l->nfacts--;
            return;
        }
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

static bool vg_left_same_cmdline(const struct vg_proc *x, const struct vg_proc *y)
{
    return (x->known & VG_PROC_K_CMDLINE) && (y->known & VG_PROC_K_CMDLINE) && x->cmdline &&
           y->cmdline && x->cmdline[0] && strcmp(x->cmdline, y->cmdline) == 0;
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

/* The driver's utilisation samples for pid: the highest, and whether every GPU it has a
 * context on gave one (*all false: unknown somewhere). */
static bool vg_left_gpu_samples(const struct vg_snapshot *snap, pid_t pid, unsigned *max)
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
    return any && all;
}

/* Whether pid holds gpu through a descriptor or a mapping. */
static bool vg_left_holds_gpu(const struct vg_snapshot *snap, pid_t pid, size_t gpu)
{
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid == pid && h->gpu == gpu && (h->seen & ~VG_SEEN_NVML))
            return true;
    }
    return false;
}

/* Whether the driver lists pid with a context on gpu. */
static bool vg_left_context_on(const struct vg_snapshot *snap, pid_t pid, size_t gpu)
{
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid == pid && h->gpu == gpu && (h->seen & VG_SEEN_NVML))
            return true;
    }
    return false;
}

/* How many live processes other than pid and its children (which hold what it holds) hold
 * gpu's node, through a descriptor or a mapping. */
static size_t vg_left_node_holders(const struct vg_snapshot *snap, size_t gpu, pid_t pid)
{
    size_t n = 0;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *q = h->proc;
        n += h->gpu == gpu && (h->seen & ~VG_SEEN_NVML) && q && h->pid != pid && q->ppid != pid &&
             q->state != 'Z' && q->state != 'X';
    }
    return n;
}

/* Whether a driver entry names a process that has ended: this procfs shows no such PID (and
 * hides none), shows another process under it (stale), or shows a zombie with no live
 * thread. */
static bool vg_left_driver_dead(const struct vg_snapshot *snap, const struct vg_holding *h)
{
    if (!(h->seen & VG_SEEN_NVML) || h->bogus_pid || h->gpu == VG_SNAP_NO_GPU)
        return false;
    if (h->stale)
        return true;
    const struct vg_proc *p = h->proc;
    /* an unreadable descriptor table hides what a process holds, not that it exists: only
     * hidepid makes a live PID look absent */
    if (!p)
        return !(snap->procs.access & VG_PROC_ACC_HIDEPID);
    return (p->known & VG_PROC_K_STAT) && (p->state == 'Z' || p->state == 'X') &&
           (!(p->known & VG_PROC_K_THREADS) || p->threads_live == 0);
}

/* Where a context's PID d lies against a process's session and its own PID: PIDs are handed
 * out in order (a wrap is rare), so a context made in its session before it lies between the
 * session's leader and it, and one older than its session was carried out of another. */
enum vg_left_order { VG_ORDER_IN_SESSION, VG_ORDER_OLDER, VG_ORDER_YOUNGER, VG_ORDER_UNKNOWN };

static enum vg_left_order vg_left_order(const struct vg_proc *p, pid_t d)
{
    /* younger than it (unless the PIDs wrapped since its session began): not a context a
     * fork could have handed it */
    if (d > p->pid && p->sid <= p->pid)
        return VG_ORDER_YOUNGER;
    if (p->sid == p->pid)
        return d < p->pid ? VG_ORDER_OLDER : VG_ORDER_UNKNOWN;
    if (d < p->sid && p->sid < p->pid)
        return VG_ORDER_OLDER;
    if (d > p->sid && d < p->pid)
        return VG_ORDER_IN_SESSION;
    return VG_ORDER_UNKNOWN;
}

/* The fact one driver entry h makes for l, in *id and *weight; false when it makes none. */
static bool vg_left_charge_fact(const struct vg_snapshot *snap, const struct vg_leftover *l,
                                const struct vg_holding *h, enum vg_left_fact_id *id, int *weight)
{
    const struct vg_proc *p = l->proc;
    enum vg_left_order order = vg_left_order(p, h->pid);
    if (!vg_left_driver_dead(snap, h)) {
        /* a live context older than its session, on a GPU it holds without one of its own:
         * its files may be that process's, carried out of its session as a daemon does */
        /* (a fork keeps the command line: another program on a shared GPU is not it) */
        if (!h->proc || order != VG_ORDER_OLDER || vg_left_context_on(snap, l->pid, h->gpu) ||
            !vg_left_same_cmdline(h->proc, p))
            return false;
        *id = VG_LF_OLDER_CONTEXT;
        *weight = vg_left_defs[*id].weight;
        return true;
    }
    if ((h->pid == p->pgid && p->pgid != p->pid) || (h->pid == p->sid && p->sid != p->pid)) {
        *id = VG_LF_CHARGES_LEADER;
        *weight = vg_left_defs[*id].weight;
        return true;
    }
    if (order == VG_ORDER_YOUNGER)
        return false;
    *id = order == VG_ORDER_OLDER ? VG_LF_OLDER_CONTEXT : VG_LF_CHARGES_DEAD;
    *weight = vg_left_defs[*id].weight;
    if (order == VG_ORDER_UNKNOWN)
        *weight = 1;
    else if (order == VG_ORDER_IN_SESSION && vg_left_node_holders(snap, h->gpu, l->pid) == 0)
        *weight = 3; /* no other process could keep that context */
    return true;
}

/*
 * What the driver still charges on the GPUs this process holds. A dead leader of its group or
 * session is the strongest link there is: its context lives because something still refers to
 * it, and this process, which inherited its files, does. Another dead PID made in its session
 * before it is a strong one too (its parent's, most likely); a context older than its session,
 * dead or alive, says it left the session of the process that made it, as a daemon does. The
 * strongest link found is kept. Compared only when the driver's PIDs are this procfs's.
 */
static void vg_left_charges(const struct vg_snapshot *snap, struct vg_leftover *l)
{
    bool pids_ours = snap->procs.pidns == VG_PROC_PIDNS_INITIAL;
    const struct vg_holding *best = NULL;
    enum vg_left_fact_id best_id = VG_LF_COUNT;
    int best_w = 0;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        enum vg_left_fact_id id;
        int w;
        if (h->pid == l->pid || !(h->seen & VG_SEEN_NVML) || h->bogus_pid ||
            h->gpu == VG_SNAP_NO_GPU || !vg_left_holds_gpu(snap, l->pid, h->gpu) ||
            !vg_left_charge_fact(snap, l, h, &id, &w))
            continue;
        if (!pids_ours) {
            if (id == VG_LF_CHARGES_LEADER)
                vg_left_add(l, VG_LF_PIDS_FOREIGN)->pid = h->pid;
            continue;
        }
        /* a link to a dead context outweighs one to a live context, the leader any other */
        bool better = !best || (id == VG_LF_CHARGES_LEADER && best_id != id) ||
                      (best_id != VG_LF_CHARGES_LEADER && w > best_w);
        if (better) {
            best = h;
            best_id = id;
            best_w = w;
        }
    }
    if (!best)
        return;
    struct vg_left_fact *f = vg_left_add(l, best_id);
    f->weight = best_w;
    f->pid = best->pid;
    f->gpu = best->gpu;
    f->bytes_known = best->used_known;
    f->bytes = best->used_bytes;
    /* sitting on a dead process's context, its own context says nothing of being a root */
    if (best_w > 0) {
        vg_left_drop(l, VG_LF_OWN_CONTEXT);
        vg_left_drop(l, VG_LF_MAIN);
    }
}

/*
 * The other side of the same link: a live process of its session, older than it, with a
 * context on a GPU whose node it holds without one of its own. Then the context its files may
 * refer to is a live job's (a worker whose own parent died while the main runs on), and
 * stopping it may break that job.
 */
static void vg_left_live_context(const struct vg_snapshot *snap, struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *q = h->proc;
        /* a forked worker runs its main's command line: another one is another program */
        if (h->pid == l->pid || !(h->seen & VG_SEEN_NVML) || h->gpu == VG_SNAP_NO_GPU || !q ||
            !(q->known & VG_PROC_K_STAT) || q->state == 'Z' || q->state == 'X' ||
            q->sid != p->sid || h->pid > l->pid || !vg_left_holds_gpu(snap, l->pid, h->gpu) ||
            vg_left_context_on(snap, l->pid, h->gpu) || !vg_left_same_cmdline(p, q))
            continue;
        struct vg_left_fact *f = vg_left_add(l, VG_LF_LIVE_CONTEXT);
        f->pid = h->pid;
        f->gpu = h->gpu;
        return;
    }
}

/* How it came to be adopted: the parent facts. Returns false when it was not adopted. */
static bool vg_left_adopted(const struct vg_proc *p)
{
    if (p->ppid == 1 || !p->parent_alive)
        return true;
    if (!p->parent_known)
        return false;
    if (p->parent_ns_init)
        return true;
    /* a subreaper in another session (a session leader's parent is in another session by its
     * own doing, which says nothing) */
    if (p->parent_sid != p->sid && p->sid != p->pid)
        return true;
    /* a subreaper in its own session that is not of its group, whose leader is gone (a shell
     * that adopts orphans) */
    return p->parent_pgid != p->pgid && p->pgid != p->pid && !p->pgid_alive;
}

/* Lineage: who adopted it, which leaders are gone, which it leads. */
static void vg_left_lineage(struct vg_leftover *l, bool launched)
{
    const struct vg_proc *p = l->proc;
    vg_left_add(l, VG_LF_ADOPTED)->pid = p->ppid;
    if (p->pgid != p->pid && !p->pgid_alive) {
        struct vg_left_fact *f = vg_left_add(l, VG_LF_GROUP_GONE);
        f->pid = p->pgid;
        f->zombie = p->pgid_zombie;
    }
    /* the same dead process leading both counts once */
    if (p->sid != p->pid && !p->sid_alive && p->sid != p->pgid) {
        struct vg_left_fact *f = vg_left_add(l, VG_LF_SESSION_GONE);
        f->pid = p->sid;
        f->zombie = p->sid_zombie;
    }
    /* A launcher that starts its workers in sessions of their own explains their leading:
     * then leading says little, and being adopted says the launcher is gone. */
    if (launched) {
        vg_left_add(l, VG_LF_LAUNCHER_GONE);
    } else if (p->sid == p->pid) {
        vg_left_add(l, VG_LF_LEADS_SESSION);
    } else if (p->pgid == p->pid) {
        vg_left_add(l, VG_LF_LEADS_GROUP);
    }
    /* A worker inherits this from a nohup'd main too: what the driver charges to that main
     * is what outweighs it then. */
    if ((p->known & VG_PROC_K_SIGIGN) && (p->sig_ignored & 1u))
        vg_left_add(l, VG_LF_SIGHUP_IGNORED);
    if (p->state == 'T' || p->state == 't')
        vg_left_add(l, VG_LF_STOPPED);
    if ((p->known & VG_PROC_K_CGROUP) && p->cgroup && strstr(p->cgroup, ".service") &&
        !strstr(p->cgroup, "/user@"))
        vg_left_add(l, VG_LF_SERVICE);
}

/* Whether it works, from CPU time over the window and the driver's samples. */
static void vg_left_activity(const struct vg_snapshot *snap, struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    bool busy = false;
    if (p->activity_known && p->activity_ms > 0)
        busy = p->activity_cpu_ms * 1000u >= (uint64_t)p->activity_ms * VG_LEFT_BUSY_PERMILLE;
    else
        vg_left_add(l, VG_LF_UNMEASURED);
    unsigned max = 0;
    if (l->nvml) {
        bool sampled = vg_left_gpu_samples(snap, l->pid, &max);
        if (max > 0)
            busy = true;
        else if (!sampled)
            vg_left_add(l, VG_LF_GPU_UNKNOWN);
    }
    if (busy)
        vg_left_add(l, VG_LF_WORKS)->count = max;
}

/* Whether a child of pid holds one of the nodes of a GPU pid has a context on. */
static bool vg_left_has_workers(const struct vg_snapshot *snap, pid_t pid)
{
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->proc && h->proc->ppid == pid && (h->seen & ~VG_SEEN_NVML) &&
            vg_left_context_on(snap, pid, h->gpu))
            return true;
    }
    return false;
}

/* Everything the verdict rests on, from what the snapshot read of one holder. */
static void vg_left_facts(const struct vg_snapshot *snap, bool lists_complete,
                          struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    bool nodes = false;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid != l->pid)
            continue;
        nodes |= (h->seen & ~VG_SEEN_NVML) != 0;
        if (h->seen & VG_SEEN_NVML) {
            l->nvml = true;
            if (h->used_known) {
                l->bytes_known = true;
                l->bytes = vg_sat_add(l->bytes, h->used_bytes);
            }
        }
    }
    l->job_pgid = p->pgid;
    l->job_sid = p->sid;
    /* A rank of a launcher that is itself the job (torchrun's agent, mpirun) is a worker of
     * it; a Slurm task (SLURM_LOCALID alone) is the job itself, which slurmstepd, a daemon of
     * the scheduler's, only started: its death leaves the job running, not over. */
    bool rank = vg_rule_has_rank(p) && (p->env[VG_ENV_LOCAL_RANK] || p->env[VG_ENV_RANK] ||
                                        p->env[VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK]);
    vg_left_lineage(l, rank);

    /* A monitor that uses NVML (no CUDA) opens the nodes itself; a worker forked from a CUDA
     * program inherits them together with its parent's mapped CUDA. */
    bool nvml_monitor = (p->known & VG_PROC_K_MAPS) && (p->libs & VG_LIB_NVML) &&
                        !(p->libs & (VG_LIB_CUDA | VG_LIB_CUDART | VG_LIB_TORCH_CUDA));
    bool cuda = (p->libs & (VG_LIB_CUDA | VG_LIB_CUDART | VG_LIB_TORCH_CUDA)) != 0;
    if (nodes && !l->nvml && nvml_monitor) {
        vg_left_add(l, VG_LF_NVML_MONITOR);
    } else if (nodes && !l->nvml && lists_complete) {
        vg_left_add(l, VG_LF_INHERITED);
        if ((p->known & VG_PROC_K_MAPS) && !cuda)
            vg_left_add(l, VG_LF_NO_CUDA);
    } else if (nodes && !l->nvml) {
        /* in no list that was read: the driver side (a context of its own or none, what it
         * charges to a dead PID, GPU work) is unread, not absent (lab: jobctl-nolist) */
        vg_left_add(l, VG_LF_LISTS_UNKNOWN);
    }
    bool mp = (p->known & VG_PROC_K_CMDLINE) && vg_left_mp_cmdline(p->cmdline);
    bool named = p->comm && strncmp(p->comm, "pt_data_worker", 14) == 0;
    if (mp)
        vg_left_add(l, VG_LF_MP_CMDLINE);
    if (named)
        vg_left_add(l, VG_LF_WORKER_NAME);
    /* a spawned worker or a rank starts CUDA itself: then that says nothing against it; one
     * whose own children hold its nodes is a job's main, with workers of its own */
    if (l->nvml && !rank && !mp && !named)
        vg_left_add(l, vg_left_has_workers(snap, l->pid) ? VG_LF_MAIN : VG_LF_OWN_CONTEXT);
    vg_left_charges(snap, l);
    vg_left_live_context(snap, l);
    vg_left_activity(snap, l);
}

/* Whether an older process of pid's session, started at `start`, with that command line, is
 * what a forked process of pid's job would show: a fork keeps the command line. */
static bool vg_left_kin_of(const struct vg_proc *p, pid_t pid, uint64_t start, const char *cmd)
{
    bool older = start < p->start_ticks || (start == p->start_ticks && pid < p->pid);
    return pid != p->pid && older && (p->known & VG_PROC_K_CMDLINE) && p->cmdline && cmd &&
           p->cmdline[0] && strcmp(p->cmdline, cmd) == 0;
}

/* The parent, group and session of pid, from the table or the kin; false when neither has it. */
static bool vg_left_lineage_of(const struct vg_snapshot *snap, pid_t pid, pid_t *ppid, pid_t *pgid,
                               pid_t *sid)
{
    const struct vg_proc *q = vg_proc_table_find(&snap->procs, pid);
    if (q && (q->known & VG_PROC_K_STAT)) {
        *ppid = q->ppid;
        *pgid = q->pgid;
        *sid = q->sid;
        return true;
    }
    for (size_t k = 0; k < snap->procs.nkin; k++)
        if (snap->procs.kin[k].pid == pid) {
            *ppid = snap->procs.kin[k].ppid;
            *pgid = snap->procs.kin[k].pgid;
            *sid = snap->procs.kin[k].sid;
            return true;
        }
    return false;
}

/* Whether pid descends from anc, as far as the table and the kin know its parents. */
static bool vg_left_descends(const struct vg_snapshot *snap, pid_t pid, pid_t anc)
{
    for (int depth = 0; depth < 64; depth++) {
        pid_t ppid, pgid, sid;
        if (!vg_left_lineage_of(snap, pid, &ppid, &pgid, &sid) || ppid <= 1)
            return false;
        if (ppid == anc)
            return true;
        pid = ppid;
    }
    return false;
}

/*
 * Whether pid is part of a live job of l's session rather than of an orphaned subtree: up its
 * parents, through live processes of that session, it reaches the session's leader or the
 * leader of l's own process group (a job that lives, adopted or not: a nohup'd job whose shell
 * exited). One that stops at an adopted process short of those is what some process's death
 * left: a sibling of l, not its job. Bounded: a racy parentage is not trusted past the bound.
 */
static bool vg_left_rooted(const struct vg_snapshot *snap, pid_t pid, const struct vg_proc *p)
{
    for (int depth = 0; depth < 64; depth++) {
        pid_t ppid, pgid, psid;
        if (pid == p->sid || pid == p->pgid)
            return true;
        if (!vg_left_lineage_of(snap, pid, &ppid, &pgid, &psid) || psid != p->sid || ppid <= 1)
            return false;
        pid = ppid;
    }
    return false;
}

/*
 * A live process of its session, older than it and not adopted itself, running its command
 * line: most likely what it was forked from (its job's main, with a worker between them that
 * died), still running. Holders in the table and the session's other members (kin) alike;
 * the adopted ones are its siblings, not its job.
 */
static void vg_left_live_kin(const struct vg_snapshot *snap, struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    if (vg_leftover_fact(l, VG_LF_LIVE_CONTEXT))
        return;
    pid_t who = 0;
    for (size_t k = 0; k < snap->procs.n && !who; k++) {
        const struct vg_proc *q = &snap->procs.procs[k];
        if ((q->known & VG_PROC_K_STAT) && q->sid == p->sid && q->state != 'Z' && q->state != 'X' &&
            (q->known & VG_PROC_K_CMDLINE) &&
            vg_left_kin_of(p, q->pid, q->start_ticks, q->cmdline) &&
            vg_left_rooted(snap, q->pid, p) && !vg_left_descends(snap, q->pid, p->pid))
            who = q->pid;
    }
    for (size_t k = 0; k < snap->procs.nkin && !who; k++) {
        const struct vg_proc_kin *q = &snap->procs.kin[k];
        if (q->sid == p->sid && q->state != 'Z' && q->state != 'X' &&
            vg_left_kin_of(p, q->pid, q->start_ticks, q->cmdline) &&
            vg_left_rooted(snap, q->pid, p) && !vg_left_descends(snap, q->pid, p->pid))
            who = q->pid;
    }
    if (who)
        vg_left_add(l, VG_LF_LIVE_KIN)->pid = who;
}

/* Whether a and b were forked from the same ended job: adopted, of the same group and session
 * that neither leads, running the same command line. */
static bool vg_left_siblings(const struct vg_leftover *a, const struct vg_leftover *b)
{
    const struct vg_proc *x = a->proc, *y = b->proc;
    return a != b && vg_leftover_fact(b, VG_LF_ADOPTED) && x->pgid == y->pgid && x->sid == y->sid &&
           x->pgid != x->pid && y->pgid != y->pid && vg_left_same_cmdline(x, y);
}

/* Facts that compare holders: siblings of one ended job, and being alone in a session. */
static void vg_left_relations(const struct vg_snapshot *snap, struct vg_leftovers *ls,
                              struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    unsigned sib = 0;
    bool shared = false;
    for (size_t k = 0; k < ls->n; k++) {
        const struct vg_leftover *o = &ls->v[k];
        if (o == l)
            continue;
        sib += vg_left_siblings(l, o);
    }
    /* (its own workers share its session too: they are not company) */
    for (size_t k = 0; k < snap->procs.n && !shared; k++) {
        const struct vg_proc *q = &snap->procs.procs[k];
        shared = q->pid != p->pid && (q->known & VG_PROC_K_STAT) && q->sid == p->sid &&
                 q->state != 'Z' && q->state != 'X' && !vg_left_descends(snap, q->pid, p->pid);
    }
    for (size_t k = 0; k < snap->procs.nkin && !shared; k++) {
        const struct vg_proc_kin *q = &snap->procs.kin[k];
        shared = q->sid == p->sid && q->state != 'Z' && q->state != 'X' &&
                 !vg_left_descends(snap, q->pid, p->pid);
    }
    vg_left_live_kin(snap, l);
    /* (one of them with the live context it may hold is that context's owner, not a sibling) */
    if (sib && !vg_leftover_fact(l, VG_LF_LIVE_CONTEXT) &&
        (vg_leftover_fact(l, VG_LF_GROUP_GONE) || vg_leftover_fact(l, VG_LF_SESSION_GONE)))
        vg_left_add(l, VG_LF_SIBLINGS)->count = sib;
    /* A daemon forks so as to run alone, in a session nobody else is left in, whose leader
     * (the process that forked it) is gone. Forked workers seldom come alone; what the driver
     * still charges to a dead leader outweighs this when one does. */
    /* ... and a leader the driver still charges was a CUDA program, not the fork-and-exit
     * step of a daemon; nor is it alone where a dead process of its session, made before it,
     * is charged: that one was its company */
    const struct vg_left_fact *dead = vg_leftover_fact(l, VG_LF_CHARGES_DEAD);
    if (!shared && !sib && p->sid != p->pid && p->pgid == p->sid && !p->sid_alive &&
        !vg_leftover_fact(l, VG_LF_CHARGES_LEADER) && !(dead && dead->weight >= 2)) {
        vg_left_drop(l, VG_LF_OWN_CONTEXT);
        vg_left_drop(l, VG_LF_MAIN);
        struct vg_left_fact *f = vg_left_add(l, VG_LF_ALONE);
        /* a worker's marks say what a lone process is: a worker left alone, not a daemon */
        if (vg_leftover_fact(l, VG_LF_MP_CMDLINE) || vg_leftover_fact(l, VG_LF_WORKER_NAME) ||
            vg_leftover_fact(l, VG_LF_LAUNCHER_GONE))
            f->weight = -1;
    }
}

/* The verdict from the facts; cap is the highest confidence allowed (a worker's worker is
 * never surer than the leftover it hangs from). */
static void vg_left_judge(struct vg_leftover *l, enum vg_confidence cap)
{
    if (cap < VG_CONF_HIGH)
        vg_left_add(l, VG_LF_PARENT_UNSURE);
    else
        vg_left_drop(l, VG_LF_PARENT_UNSURE);
    int score = 0, worst = 0;
    const char *against = NULL, *unknown = NULL;
    bool ended = false;
    for (size_t i = 0; i < l->nfacts; i++) {
        const struct vg_left_fact *f = &l->facts[i];
        score += f->weight;
        ended |= f->weight > 0 && f->id != VG_LF_ADOPTED;
        if (f->weight < worst) {
            worst = f->weight;
            against = vg_left_defs[f->id].why_not;
        }
        /* a supporting fact that could not be checked weakens nothing the others show; only
         * what could speak against it (work, a parent's doubt) keeps it from high */
        if (f->weight == 0 && f->id != VG_LF_PIDS_FOREIGN && !unknown)
            unknown = vg_left_defs[f->id].why_not;
    }
    l->score = score;
    l->confidence = VG_CONF_LOW;
    l->why_not = NULL;
    if (score < VG_LEFT_SCORE_MEDIUM) {
        l->verdict = ended ? VG_LEFT_NOT : VG_LEFT_NONE;
        l->why_not =
            against ? against : "the evidence that its job ended is too weak to call it a leftover";
        return;
    }
    l->verdict = VG_LEFT_YES;
    l->confidence = VG_CONF_MEDIUM;
    const struct vg_left_fact *works = vg_leftover_fact(l, VG_LF_WORKS);
    const struct vg_left_fact *stopped = vg_leftover_fact(l, VG_LF_STOPPED);
    if (stopped || works)
        l->why_not = vg_left_defs[stopped ? VG_LF_STOPPED : VG_LF_WORKS].why_not;
    else if (unknown)
        l->why_not = unknown;
    else if (score < VG_LEFT_SCORE_HIGH)
        l->why_not = "nothing marks it as a worker of that job strongly enough: it may be "
                     "the job itself, left running in the background";
    else
        l->confidence = VG_CONF_HIGH;
}

/* Whether the facts were read: a zombie or a process whose stat is unknown is never judged. */
static bool vg_left_judged(const struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    return (p->known & VG_PROC_K_STAT) && p->state != 'Z' && p->state != 'X';
}

/* Workers of a leftover are part of the same ended job even though their own parent is alive:
 * join them through their parent until no more join (each pass adds at least one, so at most
 * n passes), then lower any that hang from one less sure than themselves. */
static void vg_left_join_workers(const struct vg_snapshot *snap, struct vg_leftovers *out,
                                 bool lists)
{
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < out->n; i++) {
            struct vg_leftover *l = &out->v[i];
            if (!vg_left_judged(l) || vg_leftover_fact(l, VG_LF_PARENT_LEFTOVER))
                continue;
            const struct vg_leftover *par = vg_leftovers_find(out, l->proc->ppid);
            if (!par || par == l || par->verdict != VG_LEFT_YES)
                continue;
            if (l->verdict == VG_LEFT_NONE) {
                /* never adopted, so its own facts were not gathered */
                l->nfacts = 0;
                vg_left_facts(snap, lists, l);
                vg_left_drop(l, VG_LF_ADOPTED);
                vg_left_drop(l, VG_LF_GROUP_GONE);
                vg_left_drop(l, VG_LF_SESSION_GONE);
            }
            vg_left_add(l, VG_LF_PARENT_LEFTOVER)->pid = par->pid;
            const struct vg_left_fact *lc = vg_leftover_fact(l, VG_LF_LIVE_CONTEXT);
            const struct vg_leftover *owner = lc ? vg_leftovers_find(out, lc->pid) : NULL;
            if (owner && owner->verdict == VG_LEFT_YES)
                vg_left_drop(l, VG_LF_LIVE_CONTEXT);
            l->via = par->pid;
            l->job_pgid = par->job_pgid;
            l->job_sid = par->job_sid;
            vg_left_judge(l, par->confidence);
            grew = true;
        }
    }
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
        /* unread or a zombie (zombie-holder's): VG_LEFT_NONE; a child of a live parent that
         * adopted nothing: not considered, unless it hangs from a leftover (below) */
        if (vg_left_judged(l) && vg_left_adopted(p))
            vg_left_facts(snap, lists, l);
    }
    for (size_t i = 0; i < out->n; i++)
        if (out->v[i].nfacts)
            vg_left_relations(snap, out, &out->v[i]);
    for (size_t i = 0; i < out->n; i++)
        if (out->v[i].nfacts)
            vg_left_judge(&out->v[i], VG_CONF_HIGH);
    vg_left_join_workers(snap, out, lists);
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
        /* what measuring could make a leftover, or surer of being one */
        if (l->proc->activity_known || l->nfacts == 0 || l->score < VG_LEFT_SCORE_MEDIUM)
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
