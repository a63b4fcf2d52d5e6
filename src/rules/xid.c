/*
 * The rule xid: per GPU, the Xid errors the driver wrote to the kernel log since boot, with
 * each code's meaning, NVIDIA's recommended action and the class vramguard gives it
 * (rules/xid_table.h), the process and job each Xid names when that process still runs, and
 * the fix: restart the application, reset the GPU (with the holders that block a reset), or
 * reboot the node. Severity: critical for a wedged code, warning for a dirty one, info for a
 * noted one. A log that could not be read is said by doctor (render/doctor.c), not here.
 */
#include <stdio.h>
#include <string.h>

#include "rules/internal.h"
#include "rules/xid_table.h"
#include "util/pci.h"

static enum vg_severity vg_xid_sev(enum vg_xid_class c)
{
    return c == VG_XID_WEDGED ? VG_SEV_CRITICAL : c == VG_XID_DIRTY ? VG_SEV_WARNING : VG_SEV_INFO;
}

/* The worst code of a device: its class and entry. */
static unsigned vg_xid_worst(const struct vg_rule_ctx *ctx, const struct vg_kmsg_xid_dev *d,
                             enum vg_xid_class *cls)
{
    unsigned worst = d->ncodes ? d->codes[0].code : 0;
    bool over;
    *cls = VG_XID_NOTED;
    for (size_t c = 0; c < d->ncodes; c++) {
        enum vg_xid_class k = vg_xid_class_of(ctx->opts, d->codes[c].code, &over);
        if (c == 0 || k > *cls) {
            *cls = k;
            worst = d->codes[c].code;
        }
    }
    return worst;
}

/* One evidence line per code: how many, when last, what it means, its class and why. */
static void vg_xid_code_lines(const struct vg_rule_ctx *ctx, struct vg_findings *out,
                              struct vg_finding *f, const struct vg_kmsg_xid_dev *d)
{
    for (size_t c = 0; c < d->ncodes; c++) {
        const struct vg_kmsg_code *k = &d->codes[c];
        const struct vg_xid_info *x = vg_xid_find(k->code);
        bool over;
        enum vg_xid_class cls = vg_xid_class_of(ctx->opts, k->code, &over);
        vg_finding_evidence(
            out, f,
            "Xid %u, %llu time%s (the last %llu.%03llu s after boot): %s; NVIDIA's "
            "action: %s; %s (%s)",
            k->code, (unsigned long long)k->count, k->count == 1 ? "" : "s",
            (unsigned long long)(k->last_ts_us / 1000000),
            (unsigned long long)(k->last_ts_us / 1000 % 1000),
            x ? x->meaning : "a code vramguard's table lacks (see NVIDIA's Xid catalogue)",
            x ? vg_xid_action_text(x->action) : "see the catalogue", vg_xid_class_str(cls),
            over ? "set by the command line"
            : x  ? "vramguard's table"
                 : "unknown codes are dirty");
    }
    if (d->n_other_codes)
        vg_finding_evidence(out, f,
                            "%llu more Xid%s of other codes (only %d codes are counted "
                            "apart)",
                            (unsigned long long)d->n_other_codes, d->n_other_codes == 1 ? "" : "s",
                            VG_KMSG_CODES_MAX);
}

/* Who the process an Xid names is: its user, cgroup and Slurm job when it runs. */
static void vg_xid_event_line(struct vg_findings *out, struct vg_finding *f,
                              const struct vg_snap_xid_dev *j, size_t k)
{
    const struct vg_kmsg_xid *x = &j->dev->xid[k];
    const struct vg_proc *p = j->proc[k];
    char who[2 * VG_LABEL_MAX];
    if (!x->pid_known) {
        snprintf(who, sizeof(who), "the driver named no process");
    } else if (p) {
        char label[VG_LABEL_MAX];
        vg_rule_proc_label(x->pid, p, label, sizeof(label));
        const char *job = p->env[VG_ENV_SLURM_JOB_ID];
        int n = snprintf(who, sizeof(who), "%s%s, user %s%s%s%s%s", label,
                         p->state == 'Z' ? " (a zombie)" : ", still running",
                         p->user ? p->user : "unknown", job ? ", Slurm job " : "", job ? job : "",
                         p->cgroup ? ", cgroup " : "", p->cgroup ? p->cgroup : "");
        if (n < 0)
            who[0] = '\0';
    } else {
        snprintf(who, sizeof(who), "PID %d (%s), %s", (int)x->pid, x->name ? x->name : "no name",
                 j->stale[k] ? "whose number now names another process" : "no longer running");
    }
    vg_finding_evidence(out, f,
                        "at %llu.%03llu s after boot (kernel log record %llu): Xid %u: "
                        "%s; %s",
                        (unsigned long long)(x->ts_us / 1000000),
                        (unsigned long long)(x->ts_us / 1000 % 1000), (unsigned long long)x->seq,
                        x->code, x->msg[0] ? x->msg : "(no message)", who);
}

/* The fix for the worst code, and for a reset the holders that block it. */
static void vg_xid_fix(const struct vg_rule_ctx *ctx, struct vg_findings *out, struct vg_finding *f,
                       const struct vg_snap_xid_dev *j, unsigned code, enum vg_xid_class cls)
{
    const struct vg_snapshot *snap = ctx->snap;
    const struct vg_xid_info *x = vg_xid_find(code);
    enum vg_xid_action act = x ? x->action : VG_XID_ACT_CHECK_HW;
    unsigned idx = j->gpu != VG_SNAP_NO_GPU ? snap->gpus.gpus[j->gpu].index : 0;
    if (cls == VG_XID_NOTED) {
        vg_finding_fix(out, f,
                       "nothing on the GPU: Xid %u is the application's own fault; fix or "
                       "restart the job it names",
                       code);
        return;
    }
    if (act == VG_XID_ACT_REBOOT || j->gpu == VG_SNAP_NO_GPU) {
        vg_finding_fix(out, f,
                       "drain the node and reboot it (Slurm: scontrol update nodename=$(hostname "
                       "-s) state=drain reason=\"Xid %u\"); if it repeats, check the GPU's "
                       "seating, power and cooling",
                       code);
        return;
    }
    if (act == VG_XID_ACT_RECOVERY)
        vg_finding_fix(out, f,
                       "read the recovery action the driver asks for (nvidia-smi -q -i %u, "
                       "\"Recovery Action\"): none, a GPU reset or a node reboot",
                       idx);
    if (act == VG_XID_ACT_RESTART_APP)
        vg_finding_fix(out, f, "restart the application it names; the GPU itself goes on");
    if (act == VG_XID_ACT_RESET_GPU || act == VG_XID_ACT_CHECK_HW || cls == VG_XID_WEDGED)
        vg_finding_fix(out, f,
                       "drain the GPU, then reset it once nothing holds it (vramguard clean "
                       "--gpu %u --reset, or nvidia-smi -r -i %u)%s",
                       idx, idx,
                       act == VG_XID_ACT_CHECK_HW ? "; have its hardware checked if it repeats"
                                                  : "");
    size_t first, count;
    vg_snap_gpu_holdings(snap, j->gpu, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        char label[VG_LABEL_MAX];
        vg_rule_proc_label(h->pid, h->proc, label, sizeof(label));
        vg_finding_fix(out, f, "%s holds the GPU and blocks a reset: stop it first%s", label,
                       h->proc && h->proc->comm && !strcmp(h->proc->comm, "nvidia-persistenced")
                           ? " (systemctl stop nvidia-persistenced; start it again after)"
                           : " (vramguard clean --gpu N)");
    }
}

static void vg_xid_device(const struct vg_rule_ctx *ctx, struct vg_findings *out,
                          const struct vg_snap_xid_dev *j)
{
    const struct vg_snapshot *snap = ctx->snap;
    const struct vg_kmsg_xid_dev *d = j->dev;
    enum vg_xid_class cls;
    unsigned worst = vg_xid_worst(ctx, d, &cls);
    struct vg_finding *f = vg_finding_add(out, "xid", vg_xid_sev(cls));
    if (!f)
        return;
    char glabel[VG_LABEL_MAX], bus[VG_PCI_TEXT_MAX];
    vg_pci_format(&d->pci, bus, sizeof(bus));
    if (j->gpu != VG_SNAP_NO_GPU) {
        vg_finding_gpu(out, f, j->gpu);
        vg_rule_gpu_label(snap, j->gpu, glabel, sizeof(glabel));
    } else {
        snprintf(glabel, sizeof(glabel), "the GPU at PCI %s", bus);
    }
    const struct vg_xid_info *wx = vg_xid_find(worst);
    vg_finding_title(out, f,
                     "%s: %llu Xid error%s since boot; the worst, Xid %u (%s), leaves it %s",
                     glabel, (unsigned long long)d->count, d->count == 1 ? "" : "s", worst,
                     wx ? wx->meaning : "not in vramguard's table", vg_xid_class_str(cls));
    vg_xid_code_lines(ctx, out, f, d);
    for (size_t k = d->nxid; k-- > 0;) {
        vg_xid_event_line(out, f, j, k);
        if (j->proc[k] && !vg_finding_names_pid(f, j->proc[k]->pid))
            vg_finding_pid(out, f, j->proc[k]->pid);
    }
    if (d->count > d->nxid)
        vg_finding_evidence(out, f, "%llu earlier Xid%s of this GPU not shown (the last %zu are)",
                            (unsigned long long)(d->count - d->nxid),
                            d->count - d->nxid == 1 ? "" : "s", d->nxid);
    if (j->gpu == VG_SNAP_NO_GPU)
        vg_finding_evidence(out, f,
                            "%s: the driver lists no GPU at PCI %s (fallen off the bus, or "
                            "hidden from this driver view)",
                            snap->driver_ok ? "no GPU matches" : "the driver's view is unavailable",
                            bus);
    if (snap->kmsg.lost)
        vg_finding_evidence(out, f,
                            "the kernel log overwrote %llu record%s before they were read: "
                            "earlier Xids may be missing",
                            (unsigned long long)snap->kmsg.n_lost,
                            snap->kmsg.n_lost == 1 ? "" : "s");
    vg_xid_fix(ctx, out, f, j, worst, cls);
}

void vg_rule_xid(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    /* GPUs in the driver's order first, then the devices it does not list */
    for (size_t g = 0; g < snap->gpus.ngpus; g++) {
        const struct vg_snap_xid_dev *j = vg_snap_gpu_xids(snap, g);
        if (j)
            vg_xid_device(ctx, out, j);
    }
    for (size_t i = 0; i < snap->nxid_devs; i++)
        if (snap->xid_devs[i].gpu == VG_SNAP_NO_GPU)
            vg_xid_device(ctx, out, &snap->xid_devs[i]);
}
