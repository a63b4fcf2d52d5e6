/*
 * Rules about memory nobody is using any more: orphan-holder (workers that outlived their
 * job), zombie-holder and d-state-holder (processes that cannot let go), foreign-pid (PIDs this
 * /proc does not show), unattributed (memory no holder explains) and idle-holder (memory held
 * for hours with no work, which needs watch's history). The verdict on whether a process is a
 * leftover is the model's (leftover_model.c); these rules turn its verdicts into findings.
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

/* One process's verdict: an evidence line with every fact and its weight ("PID 5458 (python
 * train.py): leftover at high confidence, weight +7: +1 parent is now PID 1 (init); ..."), and
 * the same facts as data for JSON. */
static void vg_orphan_line(const struct vg_snapshot *snap, struct vg_findings *out,
                           struct vg_finding *f, const struct vg_leftover *l)
{
    const struct vg_proc *p = l->proc;
    char label[VG_LABEL_MAX], size[32], text[2 * VG_LABEL_MAX];
    struct vg_verdict *v = vg_finding_verdict(out, f, l->pid, vg_left_verdict_name(l->verdict),
                                              l->confidence, l->score);
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_MAX_DEFAULT);
    vg_rule_proc_label(l->pid, p, label, sizeof(label));
    vg_buf_printf(&b, "%s: leftover at %s confidence, weight %+d", label,
                  vg_confidence_str(l->confidence), l->score);
    if (l->nvml) {
        vg_rule_size(l->bytes_known, l->bytes, size, sizeof(size));
        vg_buf_printf(&b, "; holds %s", size);
    }
    for (size_t i = 0; i < l->nfacts; i++) {
        const struct vg_left_fact *lf = &l->facts[i];
        vg_left_fact_text(snap, l, lf, text, sizeof(text));
        if (lf->weight)
            vg_buf_printf(&b, "; %+d %s", lf->weight, text);
        else
            vg_buf_printf(&b, "; not known: %s", text);
        vg_finding_verdict_fact(out, v, vg_left_fact_name(lf->id), lf->weight, text);
    }
    if (!vg_leftover_fact(l, VG_LF_WORKS)) {
        if (p->activity_known)
            vg_buf_printf(&b, "; %llu ms of CPU time in the last %u ms",
                          (unsigned long long)p->activity_cpu_ms, p->activity_ms);
        if (l->nvml && !vg_leftover_fact(l, VG_LF_GPU_UNKNOWN))
            vg_buf_adds(&b, ", 0% GPU in the driver's recent samples");
    }
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

/* Whether a leftover of this finding before k already counted the memory that fact names. */
static bool vg_orphan_charged_before(const struct vg_leftovers *ls, const bool *done, size_t k,
                                     const struct vg_left_fact *lf)
{
    for (size_t j = 0; j < k; j++) {
        const struct vg_left_fact *o =
            done[j] ? vg_leftover_fact(&ls->v[j], VG_LF_CHARGES_LEADER) : NULL;
        if (o && o->pid == lf->pid && o->gpu == lf->gpu)
            return true;
    }
    return false;
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
        vg_orphan_line(snap, out, f, l);
        vg_finding_pid(out, f, l->pid);
        for (size_t h = 0; h < snap->nholdings; h++)
            if (snap->holdings[h].pid == l->pid && snap->holdings[h].gpu != VG_SNAP_NO_GPU)
                vg_finding_gpu(out, f, snap->holdings[h].gpu);
        if (l->bytes_known)
            total = vg_sat_add(total, l->bytes);
        any_nvml |= l->nvml;
        inherited |= vg_leftover_fact(l, VG_LF_INHERITED) != NULL;
        /* what the driver still charges to the dead leader is theirs: its context lives
         * because they hold its files (counted once, however many of them hold it) */
        const struct vg_left_fact *lf = vg_leftover_fact(l, VG_LF_CHARGES_LEADER);
        if (lf && lf->bytes_known && !vg_orphan_charged_before(ls, done, k, lf)) {
            total = vg_sat_add(total, lf->bytes);
            any_nvml = true;
        }
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
                            "confidence high: the facts of each weigh %+d or more, nothing "
                            "they rest on was left unknown, and none of them works",
                            VG_LEFT_SCORE_HIGH);
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
    const struct vg_leftovers *ls = ctx->leftovers;
    bool *done = calloc(ls->n ? ls->n : 1, sizeof(*done));
    if (!done) {
        if (!out->err)
            out->err = -ENOMEM;
        return;
    }
    /* sure ones first, so that the findings read worst first */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < ls->n; i++)
            if (!done[i] && ls->v[i].verdict == VG_LEFT_YES &&
                (ls->v[i].confidence == VG_CONF_HIGH) == (pass == 0))
                vg_orphan_finding(ctx, out, ls, i, done);
    free(done);
}

/* The leftovers whose verdict rests on the driver charging pid ("101 102"), or NULL; heap. */
static char *vg_keepers(const struct vg_leftovers *ls, pid_t pid)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_MAX_DEFAULT);
    size_t n = 0;
    for (size_t i = 0; ls && i < ls->n; i++) {
        const struct vg_leftover *l = &ls->v[i];
        const struct vg_left_fact *c = vg_leftover_fact(l, VG_LF_CHARGES_LEADER);
        if (!c)
            c = vg_leftover_fact(l, VG_LF_CHARGES_DEAD);
        if (l->verdict != VG_LEFT_YES || !c || c->pid != pid)
            continue;
        vg_buf_printf(&b, "%s%d", n++ ? " " : "", (int)l->pid);
    }
    char *s = n && !b.err ? strdup(vg_buf_str(&b)) : NULL;
    vg_buf_release(&b);
    return s;
}

/* What keeps a dead process's memory, when its leftovers do: an evidence line and the fix.
 * Returns whether any does. */
static bool vg_keepers_say(struct vg_findings *out, struct vg_finding *f,
                           const struct vg_leftovers *ls, pid_t pid, const char *tail)
{
    char *keepers = vg_keepers(ls, pid);
    if (!keepers)
        return false;
    bool many = strchr(keepers, ' ') != NULL;
    vg_finding_evidence(out, f,
                        "its context lives on because PID%s %s, left over from its job, "
                        "hold%s its files (orphan-holder)%s",
                        many ? "s" : "", keepers, many ? "" : "s", tail);
    vg_finding_fix(out, f,
                   "stop what keeps it (vramguard clean shows the plan, --force carries it "
                   "out): the memory returns when the last of them exits");
    free(keepers);
    return true;
}

void vg_rule_zombie_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    const struct vg_leftovers *ls = ctx->leftovers;
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
            /* a zombie's files are closed: what the driver still charges it is kept by the
             * processes that inherited them, and reaping it frees none of it */
            if (ph.nvml)
                vg_keepers_say(out, f, ls, h->pid, ": reaping it frees none of it");
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

/* hidepid hides other users' processes from this reader: a PID it does not show may well be
 * working. Said first, and before any other reading, since it changes what the rest means. */
static void vg_foreign_hidden(const struct vg_snapshot *snap, struct vg_findings *out,
                              struct vg_finding *f, pid_t pid)
{
    vg_finding_evidence(out, f,
                        "%s is mounted with hidepid and vramguard is not root: other users' "
                        "processes are hidden from it, so PID %u is most likely another "
                        "user's, hidden, not gone",
                        snap->proc_root, (unsigned)pid);
    vg_finding_fix(out, f,
                   "run vramguard as root (or with CAP_SYS_PTRACE), or as a member of the "
                   "group the procfs exempts (its gid= mount option), to see the process");
}

/* The procfs is the initial PID namespace's, the one the driver numbers processes in: every
 * process has a PID there, so unless hidepid hides it, one it does not show is gone. This holds
 * whatever our own NSpid depth (a host's /proc given with --proc inside a container). */
static void vg_foreign_initial(const struct vg_snapshot *snap, struct vg_findings *out,
                               struct vg_finding *f, bool hidden, const struct vg_leftovers *ls,
                               pid_t pid)
{
    vg_finding_evidence(out, f,
                        "%s is the initial PID namespace's, in which every process has a "
                        "PID: %s",
                        snap->proc_root,
                        hidden ? "a process it does not show is hidden, or has exited; "
                                 "which of the two cannot be told without seeing it"
                               : "the process has exited while the driver still holds "
                                 "its memory");
    /* the driver frees a context when the last file or mapping that refers to it goes: the
     * leftovers that hold its files keep it, so it returns only when they exit */
    if (!vg_keepers_say(out, f, ls, pid, "") && !hidden) {
        vg_finding_fix(out, f,
                       "the memory should return once the driver tears the context "
                       "down; if it stays, a GPU reset when nothing else holds the GPU");
    }
}

/* What the PID namespace of the procfs read says: the driver numbers processes in the initial
 * one, so in any other its PIDs are not this /proc's. hidden: hidepid is in force, so nothing
 * here may call the process gone or advise a reset. */
static void vg_foreign_ns(const struct vg_snapshot *snap, struct vg_findings *out,
                          struct vg_finding *f, bool hidden, const struct vg_leftovers *ls,
                          pid_t pid)
{
    static const char host_proc[] = "run vramguard on the host, or give it the host's /proc: "
                                    "mount it read-only (e.g. -v /proc:/host/proc:ro) and pass "
                                    "--proc /host/proc";
    pid_t depth = snap->procs.self_nspid_depth;
    bool dflt = vg_is_default_proc(snap->proc_root);
    if (snap->procs.pidns == VG_PROC_PIDNS_INITIAL) {
        vg_foreign_initial(snap, out, f, hidden, ls, pid);
    } else if (depth > 1) {
        vg_finding_evidence(out, f,
                            "vramguard runs inside a PID namespace (NSpid depth %d) below "
                            "that of %s: the driver speaks in the host's PIDs, which this "
                            "/proc may not show",
                            (int)depth, snap->proc_root);
        vg_finding_fix(out, f, "%s", host_proc);
    } else if (snap->procs.pidns == VG_PROC_PIDNS_NESTED) {
        if (dflt)
            vg_finding_evidence(out, f,
                                "vramguard runs in a PID namespace of its own, with its own "
                                "/proc (not the initial namespace): the driver speaks in the "
                                "host's PIDs, which this /proc cannot show");
        else
            vg_finding_evidence(out, f,
                                "%s is the procfs of a PID namespace other than the initial "
                                "one: the driver speaks in the host's PIDs, which it cannot "
                                "show",
                                snap->proc_root);
        vg_finding_fix(out, f, "%s", host_proc);
    } else if (!dflt) {
        vg_finding_evidence(out, f,
                            "%s is another procfs: the process may live in a PID "
                            "namespace it does not cover",
                            snap->proc_root);
        vg_finding_fix(out, f, "point --proc at the host's procfs");
    } else {
        /* NSpid has one level both in the initial namespace and in a container that mounted
         * its own /proc, and the namespace's inode could not be read: say both. */
        vg_finding_evidence(out, f,
                            "whether /proc is the initial PID namespace's could not be told: "
                            "the process lives in a namespace this /proc does not show "
                            "(another container, or vramguard itself runs in one with its "
                            "own /proc)%s",
                            hidden ? ""
                                   : ", or has exited while the driver still holds its memory");
        vg_finding_fix(out, f,
                       "if vramguard runs in a container, run it on the host or "
                       "give it the host's /proc (--proc)");
        if (!hidden)
            vg_finding_fix(out, f,
                           "if it is gone, the memory should return once the driver "
                           "tears the context down; if it stays, a GPU reset when "
                           "nothing else holds the GPU");
    }
}

void vg_rule_foreign_pid(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    bool hidden = snap->procs.access & VG_PROC_ACC_HIDEPID;
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
                         "process%s",
                         (unsigned)h->pid, size, snap->proc_root,
                         hidden ? " (hidepid hides other users' processes)" : "");
        if (hidden)
            vg_foreign_hidden(snap, out, f, h->pid);
        vg_foreign_ns(snap, out, f, hidden, ctx->leftovers, h->pid);
    }
}

/*
 * unattributed: used memory that no holder explains. A process that holds the GPU's device node
 * without a context the driver lists may be keeping it (a worker that inherited the node from a
 * job that died keeps that job's memory), but the node alone says little: CUDA opens the node of
 * every GPU a process can see, and forked workers inherit them. So each such process is weighed:
 * a leftover of an ended job is the likely holder; one that is not part of a live job may be;
 * one with a context on another GPU, an NVML-only monitor, or a process of a live job (its
 * parent, which started it, runs) is not blamed, and the finding says why. Healthy processes are
 * never named in the finding's PIDs nor in a fix that says to stop them.
 */

enum vg_un_blame {
    VG_UN_LEFTOVER, /* a leftover of an ended job (the leftover model): the likely holder */
    VG_UN_MAYBE,    /* not part of a live job: it may hold it */
    VG_UN_WORKS,    /* has a context on another GPU: a CUDA process that sees this one */
    VG_UN_MONITOR,  /* maps NVML and not CUDA: reads GPUs, holds no memory */
    VG_UN_LIVE_JOB, /* a process of a live job: its parent, which started it, runs */
};

/* How the fd-only holders of one GPU were weighed. */
struct vg_un_count {
    size_t blamed; /* VG_UN_LEFTOVER and VG_UN_MAYBE: named in the finding's PIDs */
    size_t spared;
};

/* Adopted by a subreaper in its own session (the shell), which vg_rule_parent_is_launcher cannot
 * tell from the process that started it: a worker shares its parent's group, so a parent in
 * another group while its own group's leader has exited is an adopter. */
static bool vg_unattributed_shell_adopted(const struct vg_proc *p)
{
    return p->parent_known && p->parent_pgid != p->pgid && !p->pgid_alive;
}

static enum vg_un_blame vg_unattributed_blame(const struct vg_snapshot *snap,
                                              const struct vg_leftovers *ls,
                                              const struct vg_holding *h, size_t *other_gpu)
{
    const struct vg_proc *p = h->proc;
    const struct vg_leftover *l = vg_leftovers_find(ls, h->pid);
    if (l && l->verdict == VG_LEFT_YES)
        return VG_UN_LEFTOVER;
    for (size_t k = 0; k < snap->nholdings; k++) {
        const struct vg_holding *o = &snap->holdings[k];
        if (o->pid == h->pid && (o->seen & VG_SEEN_NVML) && o->gpu != VG_SNAP_NO_GPU &&
            o->gpu != h->gpu) {
            *other_gpu = o->gpu;
            return VG_UN_WORKS;
        }
    }
    if ((p->known & VG_PROC_K_MAPS) && (p->libs & VG_LIB_NVML) && !(p->libs & VG_LIB_CUDA))
        return VG_UN_MONITOR;
    if (vg_rule_parent_is_launcher(p) && !vg_unattributed_shell_adopted(p))
        return VG_UN_LIVE_JOB;
    return VG_UN_MAYBE;
}

/* Why a process that is not a sure leftover is not part of a live job either, as words. */
static void vg_unattributed_why_maybe(struct vg_buf *b, const struct vg_proc *p,
                                      const struct vg_leftover *l)
{
    if (!(p->known & VG_PROC_K_STAT))
        vg_buf_adds(b, "its parentage could not be read");
    else if (!p->parent_alive)
        vg_buf_printf(b, "its parent PID %d has exited", (int)p->ppid);
    else if (p->ppid <= 1 || (p->parent_known && p->parent_ns_init))
        vg_buf_printf(b, "it was adopted by PID %d, its PID namespace's init", (int)p->ppid);
    else if (vg_unattributed_shell_adopted(p))
        vg_buf_printf(b, "it was adopted by PID %d after its group's leader exited", (int)p->ppid);
    else
        vg_buf_printf(b, "it was adopted by PID %d, not the process that started it", (int)p->ppid);
    if (l && l->verdict == VG_LEFT_NOT && l->why_not)
        vg_buf_printf(b, "; not a sure leftover: %s", l->why_not);
}

/* One evidence line for one fd-only holder, and its PID in the finding when it is blamed. */
static void vg_unattributed_holder(const struct vg_snapshot *snap, const struct vg_leftovers *ls,
                                   const struct vg_holding *h, struct vg_findings *out,
                                   struct vg_finding *f, struct vg_un_count *c)
{
    char label[VG_LABEL_MAX], glabel[VG_LABEL_MAX];
    vg_rule_proc_label(h->pid, h->proc, label, sizeof(label));
    size_t other = VG_SNAP_NO_GPU;
    enum vg_un_blame why = vg_unattributed_blame(snap, ls, h, &other);
    struct vg_buf b;
    vg_buf_init(&b, 1024);
    switch (why) {
    case VG_UN_LEFTOVER: {
        const struct vg_leftover *l = vg_leftovers_find(ls, h->pid);
        bool sure = l && l->confidence == VG_CONF_HIGH;
        vg_buf_printf(&b,
                      "%s holds the device node without a context the driver lists and %s "
                      "left over from a job that ended (orphan-holder, %s confidence): the "
                      "likely holder",
                      label, sure ? "is" : "may be", sure ? "high" : "medium");
        break;
    }
    case VG_UN_MAYBE:
        vg_buf_printf(&b,
                      "%s holds the device node without a context the driver lists and is not "
                      "part of a live job (",
                      label);
        vg_unattributed_why_maybe(&b, h->proc, vg_leftovers_find(ls, h->pid));
        vg_buf_adds(&b, "): it may hold it");
        break;
    case VG_UN_WORKS:
        vg_rule_gpu_label(snap, other, glabel, sizeof(glabel));
        vg_buf_printf(&b,
                      "%s has the device node open but its context is on %s: CUDA opens the "
                      "node of every GPU a process can see, so it is not blamed",
                      label, glabel);
        break;
    case VG_UN_MONITOR:
        vg_buf_printf(&b,
                      "%s has the device node open but maps NVML and not CUDA: a monitor "
                      "reading the GPU, which holds no memory, so it is not blamed",
                      label);
        break;
    case VG_UN_LIVE_JOB:
        vg_buf_printf(&b,
                      "%s has the device node open as a process of a live job (its parent "
                      "PID %d, which started it, runs): CUDA opens the node of every visible "
                      "GPU and forked workers inherit it, so it is not blamed",
                      label, (int)h->proc->ppid);
        break;
    }
    if (!b.err)
        vg_finding_evidence(out, f, "%s", b.data);
    else if (!out->err)
        out->err = b.err;
    vg_buf_release(&b);
    if (why == VG_UN_LEFTOVER || why == VG_UN_MAYBE) {
        vg_finding_pid(out, f, h->pid);
        c->blamed++;
    } else {
        c->spared++;
    }
}

/* What the figures say, and how each process that holds the device node without a context was
 * weighed (vg_unattributed_holder). */
static void vg_unattributed_evidence(const struct vg_snapshot *snap, const struct vg_leftovers *ls,
                                     size_t gi, struct vg_findings *out, struct vg_finding *f,
                                     struct vg_un_count *c)
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
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    for (size_t i = first; i < first + count; i++)
        if (VG_SEEN_NODE_ONLY(snap->holdings[i].seen) && snap->holdings[i].proc)
            vg_unattributed_holder(snap, ls, &snap->holdings[i], out, f, c);
}

/* The fix for blamed holders: stop them by PID (the finding's own, so never a spared one); or,
 * when every node holder was spared, where else the memory may be. */
static void vg_unattributed_stop_fix(struct vg_findings *out, struct vg_finding *f,
                                     const struct vg_un_count *c)
{
    if (!f)
        return;
    if (c->blamed && f->npids) {
        struct vg_buf b;
        vg_buf_init(&b, 512);
        for (size_t i = 0; i < f->npids && i < 8; i++)
            vg_buf_printf(&b, "%sPID %d", i ? ", " : "", (int)f->pids[i]);
        if (f->npids > 8)
            vg_buf_printf(&b, " and %zu more", f->npids - 8);
        if (!b.err)
            vg_finding_fix(out, f,
                           "stop %s (holding only the device node, not part of a live job), "
                           "then look again",
                           b.data);
        else if (!out->err)
            out->err = b.err;
        vg_buf_release(&b);
    } else if (c->spared) {
        vg_finding_evidence(out, f,
                            "no process that holds its node explains it: do not stop them "
                            "for this");
        vg_finding_fix(out, f,
                       "a job that ended may have left it for the driver to tear down: look "
                       "again in a minute; if it stays, a process in another container or PID "
                       "namespace may hold it (run vramguard on the host, with its /proc)");
    }
}

/* What to do: reset now (nothing holds it), look further (nothing seen, but not everything
 * could be), or stop the holders that are blamed first. reset_id names the GPU for nvidia-smi
 * -i. */
static void vg_unattributed_fixes(const struct vg_snapshot *snap, size_t gi,
                                  struct vg_findings *out, struct vg_finding *f,
                                  const char *reset_id, const struct vg_un_count *c)
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
        vg_unattributed_stop_fix(out, f, c);
        vg_finding_fix(out, f, "once nothing holds the GPU: nvidia-smi --gpu-reset -i %s",
                       reset_id);
    }
}

static void vg_unattributed_gpu(const struct vg_rule_ctx *ctx, const struct vg_leftovers *ls,
                                size_t gi, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    const struct vg_snap_gpu *s = &snap->per_gpu[gi];
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    /* With the v1 memory call the driver's own reservation (a few hundred MiB) is part of
     * "used", so allow for it before calling anything unexplained. */
    uint64_t min = ctx->opts->unattributed_min + (s->unexplained_has_reserved ? 512ull << 20 : 0);
    if (!s->unexplained_known || s->unexplained_bytes <= min)
        return;
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
    struct vg_un_count c = {0, 0};
    vg_unattributed_evidence(snap, ls, gi, out, f, &c);
    /* nvidia-smi -i takes a UUID, a PCI bus id or an index: the most stable one known. It also
     * takes a comma-separated list, so a UUID that is not well-formed is not used: a command
     * pasted from here must never reset another GPU. */
    char idx[16];
    snprintf(idx, sizeof(idx), "%u", g->index);
    bool uuid_known = (g->known & VG_GPU_K_UUID) && g->uuid;
    const char *uuid = uuid_known && vg_visible_uuid_ok(g->uuid)                   ? g->uuid
                       : !uuid_known && (g->known & VG_GPU_K_PCI) && g->pci_bus_id ? g->pci_bus_id
                                                                                   : idx;
    vg_unattributed_fixes(snap, gi, out, f, uuid, &c);
}

void vg_rule_unattributed(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    for (size_t gi = 0; gi < ctx->snap->gpus.ngpus; gi++)
        vg_unattributed_gpu(ctx, ctx->leftovers, gi, out);
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
