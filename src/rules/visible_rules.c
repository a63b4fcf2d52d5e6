/*
 * Rules about what a process was allowed to see: invalid-visible (a CUDA_VISIBLE_DEVICES entry
 * CUDA stops at), outside-visible (memory on a GPU the variable excludes) and order-mismatch
 * (integer indices that mean different GPUs to CUDA and nvidia-smi).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/internal.h"

/* The entries as CUDA read them, one evidence line. */
static void vg_vis_evidence(struct vg_findings *out, struct vg_finding *f,
                            const struct vg_visible *v, const char *who)
{
    for (size_t i = 0; i < v->nentries; i++) {
        const struct vg_vis_entry *e = &v->entries[i];
        if (e->problem == VG_VIS_OK || e->problem == VG_VIS_AFTER_CUT)
            continue;
        vg_finding_evidence(out, f, "%s: entry %zu '%s': %s%s", who, i + 1, e->text,
                            vg_vis_problem_str(e->problem),
                            i == v->cut ? "; CUDA stops reading the list here" : "");
    }
    if (v->cut < v->nentries) {
        size_t ignored = v->nentries - v->cut - 1;
        vg_finding_evidence(out, f, "%s: CUDA sees %zu GPU%s; %zu later entr%s ignored", who,
                            v->ndevices, v->ndevices == 1 ? "" : "s", ignored,
                            ignored == 1 ? "y is" : "ies are");
    }
}

static bool vg_vis_is_problem(const struct vg_visible *v)
{
    return v->corrected != NULL;
}

static void vg_vis_fix(struct vg_findings *out, struct vg_finding *f, const struct vg_visible *v)
{
    if (v->corrected && v->corrected[0])
        vg_finding_fix(out, f, "export CUDA_VISIBLE_DEVICES=%s", v->corrected);
    else
        vg_finding_fix(out, f,
                       "no entry names a GPU on this host: list the GPUs with "
                       "'vramguard visible' and use their UUIDs");
    vg_finding_fix(out, f,
                   "or start the job with 'vramguard run --gpus ...', which sets it by "
                   "UUID");
}

void vg_rule_invalid_visible(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    char label[VG_LABEL_MAX];
    if (ctx->opts->check_shell && ctx->opts->shell_cvd) {
        struct vg_proc_visible pv;
        if (vg_rule_host_visible(snap, ctx->opts->shell_cvd, ctx->opts->shell_order, &pv)) {
            if (vg_vis_is_problem(&pv.vis)) {
                struct vg_finding *f = vg_finding_add(out, "invalid-visible", VG_SEV_WARNING);
                vg_finding_title(out, f,
                                 "CUDA_VISIBLE_DEVICES='%s' in this shell has an entry "
                                 "CUDA stops at",
                                 ctx->opts->shell_cvd);
                vg_vis_evidence(out, f, &pv.vis, "this shell");
                vg_vis_fix(out, f, &pv.vis);
            }
            vg_rule_proc_visible_release(&pv);
        }
    }
    /* Each process once, whatever the number of GPUs it holds. */
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (!h->proc)
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = snap->holdings[k].pid == h->pid;
        if (seen)
            continue;
        struct vg_proc_visible pv;
        if (!vg_rule_proc_visible(snap, h->proc, &pv))
            continue;
        if (pv.value && vg_vis_is_problem(&pv.vis)) {
            struct vg_finding *f = vg_finding_add(out, "invalid-visible", VG_SEV_WARNING);
            vg_rule_proc_label(h->pid, h->proc, label, sizeof(label));
            vg_finding_title(out, f,
                             "%s started with CUDA_VISIBLE_DEVICES='%s', which has an "
                             "entry CUDA stops at",
                             label, pv.value);
            vg_finding_pid(out, f, h->pid);
            vg_vis_evidence(out, f, &pv.vis, "its value");
            vg_vis_fix(out, f, &pv.vis);
        }
        vg_rule_proc_visible_release(&pv);
    }
}

void vg_rule_outside_visible(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (!h->proc || h->gpu == VG_SNAP_NO_GPU || !(h->seen & VG_SEEN_NVML))
            continue;
        struct vg_proc_visible pv;
        if (!vg_rule_proc_visible(snap, h->proc, &pv))
            continue;
        if (pv.value && !pv.allowed[h->gpu]) {
            char plabel[VG_LABEL_MAX], glabel[VG_LABEL_MAX], size[32];
            vg_rule_proc_label(h->pid, h->proc, plabel, sizeof(plabel));
            vg_rule_gpu_label(snap, h->gpu, glabel, sizeof(glabel));
            vg_rule_size(h->used_known, h->used_bytes, size, sizeof(size));
            struct vg_finding *f = vg_finding_add(out, "outside-visible", VG_SEV_WARNING);
            vg_finding_title(out, f, "%s holds %s on %s, outside its CUDA_VISIBLE_DEVICES='%s'",
                             plabel, size, glabel, pv.value);
            vg_finding_gpu(out, f, h->gpu);
            vg_finding_pid(out, f, h->pid);
            if (f) {
                f->bytes_known = h->used_known;
                f->bytes = h->used_bytes;
            }
            vg_finding_evidence(out, f, "the driver reports %s for PID %u on %s", size,
                                (unsigned)h->pid, glabel);
            size_t n = 0;
            for (size_t g = 0; g < snap->gpus.ngpus; g++)
                n += pv.allowed[g];
            vg_finding_evidence(out, f,
                                "its environment at exec time allows %zu GPU%s, not "
                                "this one",
                                n, n == 1 ? "" : "s");
            vg_rule_visible_evidence(out, f, snap, h->proc, &pv);
            vg_finding_evidence(out, f,
                                "/proc/%u/environ shows the environment the process "
                                "was started with: a value changed later inside the "
                                "program (os.environ[...] = ...) is invisible here, and "
                                "comes too late if the framework had already "
                                "initialised CUDA",
                                (unsigned)h->pid);
            vg_finding_fix(out, f,
                           "set CUDA_VISIBLE_DEVICES in the shell or launcher before "
                           "the process starts, or in Python before importing torch, "
                           "tensorflow or jax");
            vg_finding_fix(out, f, "vramguard run --gpus <GPU> -- <command>");
        }
        vg_rule_proc_visible_release(&pv);
    }
}

/* Do the host's GPUs differ in model, so that CUDA's default FASTEST_FIRST numbering and
 * nvidia-smi's PCI order can disagree? */
static bool vg_host_heterogeneous(const struct vg_snapshot *snap)
{
    const struct vg_gpu_list *l = &snap->gpus;
    for (size_t g = 1; g < l->ngpus; g++) {
        const struct vg_gpu *a = &l->gpus[0], *b = &l->gpus[g];
        bool names = (a->known & VG_GPU_K_NAME) && (b->known & VG_GPU_K_NAME);
        bool ccs = (a->known & VG_GPU_K_CC) && (b->known & VG_GPU_K_CC);
        if (names && strcmp(a->name, b->name) != 0)
            return true;
        if (ccs && (a->cc_major != b->cc_major || a->cc_minor != b->cc_minor))
            return true;
    }
    return false;
}

static bool vg_uses_indices(const char *cvd)
{
    return cvd && cvd[strspn(cvd, " \t")] >= '0' && cvd[strspn(cvd, " \t")] <= '9';
}

static void vg_order_evidence(const struct vg_snapshot *snap, const struct vg_proc_visible *pv,
                              struct vg_findings *out, struct vg_finding *f)
{
    const struct vg_visible *v = &pv->vis;
    for (size_t i = 0; i < v->nenum; i++) {
        char label[VG_LABEL_MAX];
        vg_rule_gpu_label(snap, v->enum_order[i], label, sizeof(label));
        /* in bus order (nvidia-smi's, inside a container too) device i is host GPU i, or
         * the i-th GPU the container was given */
        size_t bus = pv->subset ? (i < pv->nsubset ? pv->subset[i] : i) : i;
        if (v->enum_order[i] != bus)
            vg_finding_evidence(out, f,
                                "CUDA's device %zu is %s; nvidia-smi's GPU %zu is "
                                "another GPU",
                                i, label, i);
    }
}

void vg_rule_order_mismatch(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    if (!snap->driver_ok || !vg_host_heterogeneous(snap))
        return;
    const char *fix = "export CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA then numbers GPUs as nvidia-smi "
                      "does), or name GPUs by UUID: vramguard run --gpus <UUID> -- <command>";
    if (ctx->opts->check_shell) {
        const char *order = ctx->opts->shell_order;
        struct vg_proc_visible pv;
        bool pci = order && strcmp(order, "PCI_BUS_ID") == 0;
        if (!pci && vg_rule_host_visible(snap, NULL, order, &pv)) {
            if (pv.vis.order_differs) {
                bool idx = vg_uses_indices(ctx->opts->shell_cvd);
                struct vg_finding *f =
                    vg_finding_add(out, "order-mismatch", idx ? VG_SEV_WARNING : VG_SEV_INFO);
                vg_finding_title(out, f,
                                 "this host mixes GPU models and CUDA_DEVICE_ORDER is "
                                 "%s in this shell: CUDA and nvidia-smi number the GPUs "
                                 "differently",
                                 order ? "not PCI_BUS_ID" : "unset");
                vg_order_evidence(snap, &pv, out, f);
                if (idx)
                    vg_finding_evidence(out, f,
                                        "this shell's CUDA_VISIBLE_DEVICES='%s' uses "
                                        "indices, which CUDA reads in its own order",
                                        ctx->opts->shell_cvd);
                vg_finding_fix(out, f, "%s", fix);
            }
            vg_rule_proc_visible_release(&pv);
        }
    }
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *p = h->proc;
        if (!p || !(p->known & VG_PROC_K_ENV) ||
            vg_findings_has_pid(out, "order-mismatch", h->pid, VG_SNAP_NO_GPU))
            continue;
        const char *cvd = p->env[VG_ENV_CUDA_VISIBLE_DEVICES];
        const char *order = p->env[VG_ENV_CUDA_DEVICE_ORDER];
        if (!vg_uses_indices(cvd) || (order && strcmp(order, "PCI_BUS_ID") == 0))
            continue;
        struct vg_proc_visible pv;
        if (!vg_rule_proc_visible(snap, p, &pv))
            continue;
        if (pv.vis.order_differs) {
            char label[VG_LABEL_MAX];
            vg_rule_proc_label(h->pid, p, label, sizeof(label));
            struct vg_finding *f = vg_finding_add(out, "order-mismatch", VG_SEV_WARNING);
            vg_finding_title(out, f,
                             "%s picks GPUs by index (CUDA_VISIBLE_DEVICES='%s') "
                             "without CUDA_DEVICE_ORDER=PCI_BUS_ID on a host with mixed "
                             "GPU models",
                             label, cvd);
            vg_finding_pid(out, f, h->pid);
            vg_order_evidence(snap, &pv, out, f);
            vg_finding_fix(out, f, "%s", fix);
        }
        vg_rule_proc_visible_release(&pv);
    }
}
