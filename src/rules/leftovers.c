/*
 * Rules about memory nobody is using any more: orphan-holder (workers that outlived their
 * job), zombie-holder and d-state-holder (processes that cannot let go), foreign-pid (PIDs this
 * /proc does not show), unattributed (memory no holder explains) and idle-holder (memory held
 * for hours with no work, which needs watch's history).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/visible.h"
#include "rules/internal.h"
#include "util/buf.h"
#include "util/sat.h"

/* Holder facts for one PID over all its holdings. */
struct vg_pid_hold {
    uint64_t bytes; /* NVML memory, known part */
    bool nvml, fd;
    size_t first; /* first holding index */
};

static void vg_pid_hold(const struct vg_snapshot *snap, pid_t pid, struct vg_pid_hold *ph)
{
    memset(ph, 0, sizeof(*ph));
    ph->first = (size_t)-1;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->pid != pid)
            continue;
        if (ph->first == (size_t)-1)
            ph->first = i;
        ph->nvml |= (h->seen & VG_SEEN_NVML) != 0;
        ph->fd |= (h->seen & VG_SEEN_NODE) != 0; /* by descriptor or mapping */
        if (h->used_known)
            ph->bytes = vg_sat_add(ph->bytes, h->used_bytes);
    }
}

static bool vg_first_holding_of(const struct vg_snapshot *snap, size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (snap->holdings[k].pid == snap->holdings[i].pid)
            return false;
    return true;
}

static void vg_add_gpus_of(struct vg_findings *out, struct vg_finding *f,
                           const struct vg_snapshot *snap, pid_t pid)
{
    for (size_t i = 0; i < snap->nholdings; i++)
        if (snap->holdings[i].pid == pid && snap->holdings[i].gpu != VG_SNAP_NO_GPU)
            vg_finding_gpu(out, f, snap->holdings[i].gpu);
}

/* Where the parent of a leftover is, as evidence. */
static void vg_orphan_parent(struct vg_buf *b, const struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    unsigned ev = l->ev;
    if (ev & VG_LEV_PARENT_LEFTOVER) {
        vg_buf_printf(b, "a worker of leftover PID %d", (int)l->via);
        return;
    }
    vg_buf_printf(b, "parent is now PID %d", (int)p->ppid);
    if (ev & VG_LEV_PARENT_INIT)
        vg_buf_adds(b, " (init)");
    else if (ev & VG_LEV_PARENT_NS_INIT)
        vg_buf_adds(b, " (its container's init)");
    else if (ev & VG_LEV_PARENT_REAPER)
        vg_buf_adds(b, " (a subreaper in another session)");
    else if (ev & VG_LEV_PARENT_SHELL)
        vg_buf_adds(b, " (a subreaper in its own session, such as the launching shell)");
    else if (ev & VG_LEV_PARENT_DEAD)
        vg_buf_adds(b, ", which has exited");
    if ((ev & VG_LEV_GROUP_GONE) && (ev & VG_LEV_SESSION_GONE) && p->pgid == p->sid)
        vg_buf_printf(b, "; its process group and session leader (PID %d) has exited",
                      (int)p->pgid);
    else if ((ev & VG_LEV_GROUP_GONE) && (ev & VG_LEV_SESSION_GONE))
        vg_buf_printf(b,
                      "; its process group leader (PID %d) and session leader (PID %d) have "
                      "exited",
                      (int)p->pgid, (int)p->sid);
    else if (ev & VG_LEV_GROUP_GONE)
        vg_buf_printf(b, "; its process group leader (PID %d) has exited", (int)p->pgid);
    else if (ev & VG_LEV_SESSION_GONE)
        vg_buf_printf(b, "; its session leader (PID %d) has exited", (int)p->sid);
}

/* What it holds, what marks it as a worker, whether it works: one evidence line. */
static void vg_orphan_line(struct vg_findings *out, struct vg_finding *f,
                           const struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    unsigned ev = l->ev;
    char label[VG_LABEL_MAX], size[32];
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_MAX_DEFAULT);
    vg_rule_proc_label(l->pid, p, label, sizeof(label));
    vg_buf_printf(&b, "%s: ", label);
    vg_orphan_parent(&b, l);
    if (l->nvml) {
        vg_rule_size(l->bytes_known, l->bytes, size, sizeof(size));
        vg_buf_printf(&b, "; holds %s", size);
    } else if (ev & VG_LEV_INHERITED) {
        vg_buf_adds(&b, "; holds the device node only, inherited: no context of its own");
    } else {
        vg_buf_adds(&b, "; holds the GPU's device node open");
    }
    if (ev & VG_LEV_WORKER_NAME)
        vg_buf_adds(&b, "; named as a PyTorch DataLoader worker");
    if (ev & VG_LEV_MP_CHILD)
        vg_buf_adds(&b, "; a multiprocessing worker by its command line");
    if (ev & VG_LEV_RANK) {
        static const enum vg_env_var vars[] = {VG_ENV_LOCAL_RANK, VG_ENV_RANK,
                                               VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK,
                                               VG_ENV_SLURM_LOCALID};
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
            if (p->env[vars[i]]) {
                vg_buf_printf(&b, "; a launcher's rank (%s=%.20s)", vg_env_name(vars[i]),
                              p->env[vars[i]]);
                break;
            }
    }
    if (p->activity_known)
        vg_buf_printf(&b, "; %llu ms of CPU time in the last %u ms",
                      (unsigned long long)p->activity_cpu_ms, p->activity_ms);
    else
        vg_buf_adds(&b, "; CPU time not measured");
    if (ev & VG_LEV_GPU_BUSY)
        vg_buf_printf(&b, ", %u%% GPU in the driver's recent samples", l->gpu_util);
    else if (ev & VG_LEV_GPU_IDLE)
        vg_buf_adds(&b, ", 0% GPU in the driver's recent samples");
    else if (l->nvml)
        vg_buf_adds(&b, ", GPU utilisation not given by the driver");
    if (b.err)
        vg_finding_evidence(out, f, "%s", label);
    else
        vg_finding_evidence(out, f, "%s", vg_buf_str(&b));
    vg_buf_release(&b);
}

/* "kill -TERM 1 2 3": every PID, however many (a list cut short would leave leftovers). */
static void vg_orphan_kill_fix(struct vg_findings *out, struct vg_finding *f)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_MAX_DEFAULT);
    for (size_t k = 0; k < f->npids; k++)
        vg_buf_printf(&b, " %d", (int)f->pids[k]);
    if (b.err && !out->err)
        out->err = b.err;
    else
        vg_finding_fix(out, f, "stop them: kill -TERM%s (then kill -KILL if they stay)",
                       vg_buf_str(&b));
    vg_buf_release(&b);
}

static bool vg_orphan_same_job(const struct vg_leftover *a, const struct vg_leftover *b)
{
    return a->job_pgid == b->job_pgid && a->job_sid == b->job_sid && a->confidence == b->confidence;
}

/* The title of an orphan-holder finding: how many, of which job, holding how much. */
static void vg_orphan_title(struct vg_findings *out, struct vg_finding *f,
                            const struct vg_leftover *first, size_t count, uint64_t total,
                            bool any_nvml)
{
    bool high = first->confidence == VG_CONF_HIGH;
    char size[32];
    vg_rule_size(true, total, size, sizeof(size));
    const char *es = count == 1 ? "" : "es", *s = count == 1 ? "s" : "";
    if (high && total)
        vg_finding_title(out, f,
                         "%zu leftover process%s of a finished job (process group %d) "
                         "still hold%s %s of GPU memory",
                         count, es, (int)first->job_pgid, s, size);
    else if (high)
        vg_finding_title(out, f,
                         "%zu leftover process%s of a finished job (process group %d) "
                         "still hold%s NVIDIA device nodes open",
                         count, es, (int)first->job_pgid, s);
    else
        vg_finding_title(out, f,
                         "%zu process%s may be left over from a finished job (process "
                         "group %d) and hold%s %s; not sure enough to stop by default",
                         count, es, (int)first->job_pgid, s,
                         any_nvml ? size : "NVIDIA device nodes open");
}

/* Memory nobody accounts for on a GPU these processes hold is most likely theirs. */
static void vg_orphan_unexplained(const struct vg_rule_ctx *ctx, struct vg_findings *out,
                                  struct vg_finding *f, bool high)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t k = 0; k < f->ngpus; k++) {
        const struct vg_snap_gpu *sg = &snap->per_gpu[f->gpus[k]];
        if (!sg->unexplained_known || sg->unexplained_bytes <= ctx->opts->unattributed_min)
            continue;
        char un[32], glabel[VG_LABEL_MAX];
        vg_rule_size(true, sg->unexplained_bytes, un, sizeof(un));
        vg_rule_gpu_label(snap, f->gpus[k], glabel, sizeof(glabel));
        vg_finding_evidence(out, f,
                            "%s on %s is held by no process the driver lists: most "
                            "likely what these processes keep",
                            un, glabel);
        if (high)
            f->severity = VG_SEV_CRITICAL;
    }
}

/* How to stop them (when sure), or look first (when not), and how to prevent it. */
static void vg_orphan_fixes(struct vg_findings *out, struct vg_finding *f, bool high)
{
    if (high) {
        vg_orphan_kill_fix(out, f);
        vg_finding_fix(out, f,
                       "or let vramguard stop them, re-checking each one first: "
                       "vramguard clean --orphans --force");
    } else {
        vg_finding_fix(out, f, "look before acting: vramguard doctor --pid %d", (int)f->pids[0]);
        vg_finding_fix(out, f,
                       "if it is a leftover after all, name it: vramguard clean --pid %d "
                       "--force (clean leaves it alone by default)",
                       (int)f->pids[0]);
    }
    vg_finding_fix(out, f,
                   "prevent it: start jobs with 'vramguard run', which reaps every "
                   "descendant when the job ends");
    vg_finding_fix(out, f,
                   "in PyTorch, DataLoader workers forked after CUDA started inherit "
                   "its device files: use multiprocessing_context='spawn' or make "
                   "the main process exit cleanly");
}

/* One finding for the leftovers of one ended job at one confidence, starting at ls->v[i]. */
static void vg_orphan_finding(const struct vg_rule_ctx *ctx, struct vg_findings *out,
                              const struct vg_leftovers *ls, size_t i, bool *done)
{
    const struct vg_snapshot *snap = ctx->snap;
    const struct vg_leftover *first = &ls->v[i];
    bool high = first->confidence == VG_CONF_HIGH;
    struct vg_finding *f = vg_finding_add(out, "orphan-holder", VG_SEV_WARNING);
    if (!f)
        return;
    f->confidence = first->confidence;
    uint64_t total = 0;
    size_t count = 0;
    bool any_nvml = false, inherited = false;
    for (size_t k = i; k < ls->n; k++) {
        const struct vg_leftover *l = &ls->v[k];
        if (done[k] || l->verdict != VG_LEFT_YES || !vg_orphan_same_job(l, first))
            continue;
        done[k] = true;
        vg_orphan_line(out, f, l);
        vg_finding_pid(out, f, l->pid);
        for (size_t h = 0; h < snap->nholdings; h++)
            if (snap->holdings[h].pid == l->pid && snap->holdings[h].gpu != VG_SNAP_NO_GPU)
                vg_finding_gpu(out, f, snap->holdings[h].gpu);
        if (l->bytes_known)
            total = vg_sat_add(total, l->bytes);
        any_nvml |= l->nvml;
        inherited |= (l->ev & VG_LEV_INHERITED) != 0;
        count++;
    }
    vg_orphan_title(out, f, first, count, total, any_nvml);
    /* Only NVML gives figures: a group seen through device nodes alone has an unknown amount,
     * not 0. */
    f->bytes_known = any_nvml;
    f->bytes = total;
    if (high && total)
        f->severity = VG_SEV_CRITICAL;
    if (high)
        vg_finding_evidence(out, f,
                            "confidence high: adopted after its job's leader exited, a "
                            "worker of that job by its marks, and idle");
    else
        vg_finding_evidence(out, f, "confidence medium: %s", first->why_not);
    if (inherited)
        vg_finding_evidence(out, f,
                            "a worker that inherited the device file keeps the dead "
                            "job's GPU memory allocated even when the driver lists "
                            "no process for it");
    vg_orphan_unexplained(ctx, out, f, high);
    vg_orphan_fixes(out, f, high);
}

void vg_rule_orphan_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    struct vg_leftovers ls;
    if (vg_leftovers_assess(ctx->snap, &ls) != 0) {
        if (!out->err)
            out->err = -ENOMEM;
        return;
    }
    bool *done = calloc(ls.n ? ls.n : 1, sizeof(*done));
    if (!done) {
        vg_leftovers_release(&ls);
        if (!out->err)
            out->err = -ENOMEM;
        return;
    }
    /* sure ones first, so that the findings read worst first */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < ls.n; i++)
            if (!done[i] && ls.v[i].verdict == VG_LEFT_YES &&
                (ls.v[i].confidence == VG_CONF_HIGH) == (pass == 0))
                vg_orphan_finding(ctx, out, &ls, i, done);
    free(done);
    vg_leftovers_release(&ls);
}

void vg_rule_zombie_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *p = h->proc;
        if (!p || !(p->known & VG_PROC_K_STAT) || p->state != 'Z' || !vg_first_holding_of(snap, i))
            continue;
        struct vg_pid_hold ph;
        vg_pid_hold(snap, h->pid, &ph);
        char label[VG_LABEL_MAX], size[32];
        vg_rule_proc_label(h->pid, p, label, sizeof(label));
        vg_rule_size(ph.nvml, ph.bytes, size, sizeof(size));
        struct vg_finding *f = vg_finding_add(out, "zombie-holder", VG_SEV_CRITICAL);
        vg_finding_pid(out, f, h->pid);
        vg_add_gpus_of(out, f, snap, h->pid);
        bool live = (p->known & VG_PROC_K_THREADS) && p->threads_live > 0;
        if (live) {
            vg_finding_title(out, f,
                             "%s is defunct, but %u of its threads still run%s and "
                             "hold%s the GPU (%s)",
                             label, p->threads_live, p->threads_live == 1 ? "s" : "",
                             p->threads_live == 1 ? "s" : "", ph.nvml ? size : "device node open");
            vg_finding_evidence(out, f,
                                "its main thread exited (state Z) while other threads "
                                "kept going: the process is alive and keeps its GPU "
                                "memory and device files");
            vg_finding_fix(out, f, "end the whole process: kill -KILL %d", (int)h->pid);
        } else {
            vg_finding_title(out, f, "%s is a zombie still listed on the GPU (%s)", label,
                             ph.nvml ? size : "device node open");
            vg_finding_evidence(out, f, "it has exited; its parent, PID %d, has not reaped it",
                                (int)p->ppid);
            vg_finding_fix(out, f,
                           "act on the parent, PID %d: it must wait() for its child; "
                           "if it is stuck, stop the parent and init reaps the zombie",
                           (int)p->ppid);
            vg_finding_fix(out, f,
                           "signalling the zombie itself does nothing: it has already "
                           "exited");
        }
        if (f) {
            f->bytes_known = ph.nvml;
            f->bytes = ph.bytes;
        }
    }
}

void vg_rule_d_state_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *p = h->proc;
        if (!p || !vg_first_holding_of(snap, i))
            continue;
        unsigned d = (p->known & VG_PROC_K_THREADS) ? p->threads_d : 0;
        if (d == 0 && (p->known & VG_PROC_K_STAT) && p->state == 'D')
            d = 1;
        if (d == 0)
            continue;
        char label[VG_LABEL_MAX];
        vg_rule_proc_label(h->pid, p, label, sizeof(label));
        struct vg_finding *f = vg_finding_add(out, "d-state-holder", VG_SEV_WARNING);
        vg_finding_pid(out, f, h->pid);
        vg_add_gpus_of(out, f, snap, h->pid);
        vg_finding_title(out, f,
                         "%s has %u thread%s in uninterruptible sleep (D) while holding "
                         "the GPU",
                         label, d, d == 1 ? "" : "s");
        vg_finding_evidence(out, f,
                            "a thread in D state waits inside the kernel, usually the "
                            "NVIDIA driver; no signal reaches it until the call returns");
        if (p->state == 'Z')
            vg_finding_evidence(out, f, "the process is also defunct: it is stuck exiting");
        vg_finding_fix(out, f,
                       "D can be brief: look again in a minute (vramguard doctor --pid "
                       "%d)",
                       (int)h->pid);
        vg_finding_fix(out, f,
                       "if it stays: check 'dmesg' for NVRM Xid errors; only a GPU "
                       "reset (when nothing else uses the GPU) or a reboot frees it");
    }
}

/* Is this procfs path "/proc" itself, however it was spelled ("/proc/", "//proc")? Compared
 * as text: rules never read the system. */
static bool vg_is_default_proc(const char *root)
{
    const char *want = "/proc";
    for (const char *p = root;; p++) {
        if (*p == '/' && p[1] == '/')
            continue; /* repeated slashes count once */
        if (*p == '/' && *want == '\0') {
            while (*p == '/')
                p++;
            return *p == '\0';
        }
        if (*p != *want)
            return false;
        if (*p == '\0')
            return true;
        want++;
    }
}

void vg_rule_foreign_pid(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->proc || h->stale || h->bogus_pid || !(h->seen & VG_SEEN_NVML) ||
            !vg_first_holding_of(snap, i))
            continue;
        struct vg_pid_hold ph;
        vg_pid_hold(snap, h->pid, &ph);
        char size[32];
        vg_rule_size(true, ph.bytes, size, sizeof(size));
        struct vg_finding *f = vg_finding_add(out, "foreign-pid", VG_SEV_WARNING);
        vg_finding_pid(out, f, h->pid);
        vg_add_gpus_of(out, f, snap, h->pid);
        if (f) {
            f->bytes_known = true;
            f->bytes = ph.bytes;
        }
        vg_finding_title(out, f,
                         "the driver reports PID %u holding %s, but %s shows no such "
                         "process",
                         (unsigned)h->pid, size, snap->proc_root);
        pid_t depth = snap->procs.self_nspid_depth;
        if (depth > 1) {
            vg_finding_evidence(out, f,
                                "vramguard runs inside a PID namespace (NSpid depth %d): "
                                "the driver speaks in the host's PIDs, which this /proc "
                                "cannot show",
                                (int)depth);
            vg_finding_fix(out, f,
                           "run vramguard on the host, or give it the host's /proc: "
                           "mount it read-only (e.g. -v /proc:/host/proc:ro) and pass "
                           "--proc /host/proc");
        } else if (!vg_is_default_proc(snap->proc_root)) {
            vg_finding_evidence(out, f,
                                "%s is another procfs: the process may live in a PID "
                                "namespace it does not cover",
                                snap->proc_root);
            vg_finding_fix(out, f, "point --proc at the host's procfs");
        } else {
            /* NSpid has one level both in the root namespace and in a container that mounted
             * its own /proc, so this cannot tell those two apart: say both. */
            vg_finding_evidence(out, f,
                                "/proc shows vramguard in no nested PID namespace: "
                                "the process lives in a namespace this /proc does not "
                                "show (another container, or vramguard itself runs in "
                                "one with its own /proc), or has exited while the "
                                "driver still holds its memory");
            vg_finding_fix(out, f,
                           "if vramguard runs in a container, run it on the host or "
                           "give it the host's /proc (--proc)");
            vg_finding_fix(out, f,
                           "if it is gone, the memory should return once the driver "
                           "tears the context down; if it stays, a GPU reset when "
                           "nothing else holds the GPU");
        }
    }
}

/* What the figures say, and which processes hold the device node without a context (the likely
 * holders); returns how many of those. */
static size_t vg_unattributed_evidence(const struct vg_snapshot *snap, size_t gi,
                                       struct vg_findings *out, struct vg_finding *f)
{
    const struct vg_snap_gpu *s = &snap->per_gpu[gi];
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    char used[32], held[32], res[32];
    vg_rule_size(true, g->mem_used, used, sizeof(used));
    vg_rule_size(true, s->held_bytes, held, sizeof(held));
    if (g->known & VG_GPU_K_RESERVED) {
        vg_rule_size(true, g->mem_reserved, res, sizeof(res));
        vg_finding_evidence(out, f,
                            "used %s, of which holders account for %s; the driver's "
                            "reservation (%s) is counted apart",
                            used, held, res);
    } else {
        vg_finding_evidence(out, f,
                            "used %s, of which holders account for %s; this driver "
                            "counts its own reservation as used",
                            used, held);
    }
    if (s->unexplained_upper_bound)
        vg_finding_evidence(out, f,
                            "%zu listed process%s report%s no figure, so part of "
                            "this may be theirs",
                            s->nholders_unknown, s->nholders_unknown == 1 ? "" : "es",
                            s->nholders_unknown == 1 ? "s" : "");
    size_t first, count, fd_only = 0;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (VG_SEEN_NODE_ONLY(h->seen)) {
            char label[VG_LABEL_MAX];
            vg_rule_proc_label(h->pid, h->proc, label, sizeof(label));
            vg_finding_evidence(out, f,
                                "%s holds the device node without a context the "
                                "driver lists: the likely holder",
                                label);
            vg_finding_pid(out, f, h->pid);
            fd_only++;
        }
    }
    return fd_only;
}

/* What to do: reset now (nothing holds it), look further (nothing seen, but not everything
 * could be), or stop the holders first. reset_id names the GPU for nvidia-smi -i. */
static void vg_unattributed_fixes(const struct vg_snapshot *snap, size_t gi,
                                  struct vg_findings *out, struct vg_finding *f,
                                  const char *reset_id, size_t fd_only)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    size_t hidden = snap->procs.n_fd_unread;
    bool hiding = vg_snap_holders_may_hide(snap);
    bool minor = g->known & VG_GPU_K_MINOR;
    if (count == 0 && !hiding && minor) {
        vg_finding_evidence(out, f, "no process holds this GPU: a reset is possible now");
        vg_finding_fix(out, f,
                       "as root, with nothing using the GPU: nvidia-smi --gpu-reset "
                       "-i %s (vramguard never runs this for you here)",
                       reset_id);
        vg_finding_fix(out, f,
                       "if the memory comes back after a reset, suspect processes in "
                       "other containers: run vramguard on the host");
    } else if (count == 0) {
        /* Nothing seen is not nothing there: say what could not be seen. */
        if (hidden)
            vg_finding_evidence(out, f,
                                "no process vramguard could read holds this GPU, but "
                                "the descriptors of %zu process%s could not be read: "
                                "any of them may hold it",
                                hidden, hidden == 1 ? "" : "es");
        else if (hiding)
            vg_finding_evidence(out, f,
                                "no process vramguard can see holds this GPU, but "
                                "other users' processes are hidden (hidepid): any of "
                                "them may hold it");
        if (!minor)
            vg_finding_evidence(out, f,
                                "its minor number is unknown, so which processes hold "
                                "its device node cannot be told");
        vg_finding_fix(out, f, "%s, and look again before any reset",
                       hiding ? "run vramguard as root (with CAP_SYS_PTRACE) to see every "
                                "holder"
                              : "find the GPU's minor number (nvidia-smi -q | grep Minor)");
    } else {
        vg_finding_evidence(out, f,
                            "%zu process%s still hold%s the GPU, so a reset is not "
                            "possible yet",
                            count, count == 1 ? "" : "es", count == 1 ? "s" : "");
        if (fd_only)
            vg_finding_fix(out, f,
                           "stop the processes that hold only the device node "
                           "(PIDs above), then look again");
        vg_finding_fix(out, f, "once nothing holds the GPU: nvidia-smi --gpu-reset -i %s",
                       reset_id);
    }
}

void vg_rule_unattributed(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_snap_gpu *s = &snap->per_gpu[gi];
        const struct vg_gpu *g = &snap->gpus.gpus[gi];
        /* With the v1 memory call the driver's own reservation (a few hundred MiB) is part of
         * "used", so allow for it before calling anything unexplained. */
        uint64_t min =
            ctx->opts->unattributed_min + (s->unexplained_has_reserved ? 512ull << 20 : 0);
        if (!s->unexplained_known || s->unexplained_bytes <= min)
            continue;
        char glabel[VG_LABEL_MAX], un[32];
        vg_rule_gpu_label(snap, gi, glabel, sizeof(glabel));
        vg_rule_size(true, s->unexplained_bytes, un, sizeof(un));
        struct vg_finding *f = vg_finding_add(out, "unattributed", VG_SEV_WARNING);
        vg_finding_gpu(out, f, gi);
        if (f) {
            f->bytes_known = true;
            f->bytes = s->unexplained_bytes;
        }
        vg_finding_title(out, f, "%s%s of memory on %s is held by no process the driver lists",
                         s->unexplained_upper_bound ? "up to " : "", un, glabel);
        size_t fd_only = vg_unattributed_evidence(snap, gi, out, f);
        /* nvidia-smi -i takes a UUID, a PCI bus id or an index: the most stable one known. It
         * also takes a comma-separated list, so a UUID that is not well-formed is not used: a
         * command pasted from here must never reset another GPU. */
        char idx[16];
        snprintf(idx, sizeof(idx), "%u", g->index);
        bool uuid_known = (g->known & VG_GPU_K_UUID) && g->uuid;
        const char *uuid = uuid_known && vg_visible_uuid_ok(g->uuid) ? g->uuid
                           : !uuid_known && (g->known & VG_GPU_K_PCI) && g->pci_bus_id
                               ? g->pci_bus_id
                               : idx;
        vg_unattributed_fixes(snap, gi, out, f, uuid, fd_only);
    }
}

void vg_rule_idle_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t i = 0; i < ctx->opts->nidle; i++) {
        const struct vg_idle_info *id = &ctx->opts->idle[i];
        if (id->idle_ms < ctx->opts->idle_min_ms || id->gpu >= snap->gpus.ngpus)
            continue;
        const struct vg_holding *h = NULL;
        for (size_t k = 0; k < snap->nholdings && !h; k++)
            if (snap->holdings[k].pid == id->pid && snap->holdings[k].gpu == id->gpu)
                h = &snap->holdings[k];
        if (!h || !h->used_known || h->used_bytes == 0)
            continue;
        char label[VG_LABEL_MAX], glabel[VG_LABEL_MAX], size[32];
        vg_rule_proc_label(h->pid, h->proc, label, sizeof(label));
        vg_rule_gpu_label(snap, h->gpu, glabel, sizeof(glabel));
        vg_rule_size(true, h->used_bytes, size, sizeof(size));
        struct vg_finding *f = vg_finding_add(out, "idle-holder", VG_SEV_INFO);
        vg_finding_pid(out, f, h->pid);
        vg_finding_gpu(out, f, h->gpu);
        if (f) {
            f->bytes_known = true;
            f->bytes = h->used_bytes;
        }
        vg_finding_title(out, f, "%s has held %s on %s for %llu min with no GPU utilisation", label,
                         size, glabel, (unsigned long long)(id->idle_ms / 60000));
        vg_finding_evidence(out, f,
                            "typical of a forgotten notebook kernel or an interactive "
                            "session left open");
        vg_finding_fix(out, f, "ask its owner (%s) to release it",
                       h->proc && h->proc->user ? h->proc->user : "see 'vramguard status'");
    }
}
