/*
 * The GPU's own health (docs/diagnoses.md, "GPU health"): what the driver says about the board
 * itself, from the facts gpu/ reads (struct vg_gpu_health): uncorrected ECC errors, a page
 * retirement or a row remap waiting for a reset, a failed remap, the recovery action the driver
 * asks for, clocks held down by a hardware brake, and GPUs the host should have but the driver
 * does not show.
 *
 * A fact the driver did not give (its known bit clear) never fires a rule and never reads as
 * healthy either: the JSON and status say it is unknown. Most fixes are a GPU reset, which the
 * driver refuses while any process holds the GPU, so each such fix names the holders that
 * block it (the daemons that keep GPUs open, nvidia-persistenced and nv-hostengine, included)
 * and the exact command.
 */
#include <stdio.h>
#include <string.h>

#include "rules/internal.h"

/* Daemons that hold GPUs open on purpose, with how to stop them for a reset. */
static const struct {
    const char *comm;
    const char *stop;
} vg_gh_daemons[] = {
    {"nvidia-persiste", "systemctl stop nvidia-persistenced"}, /* comm is cut to 15 */
    {"nv-hostengine", "systemctl stop nvidia-dcgm"},
    {"dcgm-exporter", "stop the dcgm-exporter container or service"},
    {"nv-fabricmanag", "systemctl stop nvidia-fabricmanager"},
};

/* How to stop a daemon by its comm, or NULL for an ordinary process. */
static const char *vg_gh_daemon_stop(const char *comm)
{
    for (size_t i = 0; comm && i < sizeof vg_gh_daemons / sizeof vg_gh_daemons[0]; i++)
        if (strncmp(comm, vg_gh_daemons[i].comm, strlen(vg_gh_daemons[i].comm)) == 0)
            return vg_gh_daemons[i].stop;
    return NULL;
}

/* `nvidia-smi -r -i ID` names the GPU by UUID when known, else by index. */
static void vg_gh_gpu_id(const struct vg_gpu *g, char *out, size_t n)
{
    if ((g->known & VG_GPU_K_UUID) && g->uuid)
        snprintf(out, n, "%s", g->uuid);
    else
        snprintf(out, n, "%u", g->index);
}

/* The fix that resets GPU gi: "stop its holders (PIDs ...) then `nvidia-smi -r -i ...`", with
 * the command that stops each daemon among them, and a warning when holders may hide. what
 * says what the reset does ("the remap happens at the next GPU reset"). */
static void vg_gh_fix_reset(const struct vg_snapshot *snap, size_t gi, struct vg_findings *out,
                            struct vg_finding *f, const char *what)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    char id[VG_LABEL_MAX], pids[VG_LABEL_MAX] = "";
    size_t first, count, named = 0;
    vg_gh_gpu_id(g, id, sizeof id);
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->bogus_pid || (i > first && h->pid == snap->holdings[i - 1].pid))
            continue;
        size_t len = strlen(pids);
        if (named < 8 && len + 40 < sizeof pids) {
            const char *comm = h->proc ? h->proc->comm : NULL;
            snprintf(pids + len, sizeof pids - len, "%s%u%s%s%s", named ? ", " : "",
                     (unsigned)h->pid, comm ? " " : "", comm ? comm : "", "");
        }
        named++;
        vg_finding_pid(out, f, h->pid);
        const char *stop = h->proc ? vg_gh_daemon_stop(h->proc->comm) : NULL;
        if (stop)
            vg_finding_fix(out, f,
                           "PID %u (%s) keeps GPUs open on purpose: `%s` for the reset, "
                           "start it again after",
                           (unsigned)h->pid, h->proc->comm, stop);
    }
    if (named > 8) {
        size_t len = strlen(pids);
        snprintf(pids + len, sizeof pids - len, ", +%zu more", named - 8);
    }
    if (named)
        vg_finding_fix(out, f,
                       "%s; a reset needs the GPU free: stop its holders (PIDs %s), then "
                       "`nvidia-smi -r -i %s`",
                       what, pids, id);
    else
        vg_finding_fix(out, f, "%s; no process holds the GPU: `nvidia-smi -r -i %s`", what, id);
    if ((g->known & VG_GPU_K_PERSIST) && g->persistence)
        vg_finding_fix(out, f,
                       "persistence mode is on: if the reset is refused as in use, stop "
                       "nvidia-persistenced (`systemctl stop nvidia-persistenced`) first");
    if (vg_snap_holders_may_hide(snap))
        vg_finding_fix(out, f,
                       "some processes could not be read and may hold it too: run "
                       "`vramguard status` as root before the reset");
}

static struct vg_finding *vg_gh_add(const struct vg_snapshot *snap, size_t gi,
                                    struct vg_findings *out, const char *rule, enum vg_severity sev,
                                    char *label, size_t n)
{
    struct vg_finding *f = vg_finding_add(out, rule, sev);
    vg_finding_gpu(out, f, gi);
    vg_rule_gpu_label(snap, gi, label, n);
    return f;
}

/* Whether GPU gi's health can be judged at all: the driver answered for it. */
static bool vg_gh_readable(const struct vg_snapshot *snap, size_t gi)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    return snap->driver_ok && !g->lost && !g->hung && !g->is_mig;
}

/* A count for evidence: the number, or "n/a" when unknown. */
static const char *vg_gh_count(bool known, uint64_t v, char *out, size_t n)
{
    if (!known)
        return "n/a";
    snprintf(out, n, "%llu", (unsigned long long)v);
    return out;
}

void vg_rule_ecc_uncorrected(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu_health *h = &snap->gpus.gpus[gi].health;
        if (!vg_gh_readable(snap, gi) || !(h->known & VG_GH_K_ECC_VOL_UNCORR) || !h->ecc_vol_uncorr)
            continue;
        char label[VG_LABEL_MAX], a[24], b[24], c[24];
        struct vg_finding *f =
            vg_gh_add(snap, gi, out, "ecc-uncorrected", VG_SEV_CRITICAL, label, sizeof label);
        vg_finding_title(out, f, "%s has %llu uncorrected ECC error%s since the driver loaded",
                         label, (unsigned long long)h->ecc_vol_uncorr,
                         h->ecc_vol_uncorr == 1 ? "" : "s");
        vg_finding_evidence(
            out, f, "since the driver loaded (volatile): %llu uncorrected, %s corrected",
            (unsigned long long)h->ecc_vol_uncorr,
            vg_gh_count(h->known & VG_GH_K_ECC_VOL_CORR, h->ecc_vol_corr, a, sizeof a));
        vg_finding_evidence(
            out, f, "over the board's life (aggregate): %s uncorrected, %s corrected",
            vg_gh_count(h->known & VG_GH_K_ECC_AGG_UNCORR, h->ecc_agg_uncorr, b, sizeof b),
            vg_gh_count(h->known & VG_GH_K_ECC_AGG_CORR, h->ecc_agg_corr, c, sizeof c));
        vg_finding_fix(out, f,
                       "the results of the jobs that ran on it since may be corrupt: stop them "
                       "and check their output");
        vg_gh_fix_reset(snap, gi, out, f,
                        "a reset retires or remaps the failing memory and clears the volatile "
                        "count");
        vg_finding_fix(out, f,
                       "if uncorrected errors come back after the reset, the board needs "
                       "service (RMA): take it out of the scheduler");
    }
}

void vg_rule_retirement_pending(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu_health *h = &snap->gpus.gpus[gi].health;
        if (!vg_gh_readable(snap, gi) || !(h->known & VG_GH_K_RETIRED_PENDING) ||
            !h->retired_pending)
            continue;
        char label[VG_LABEL_MAX], a[24], b[24];
        struct vg_finding *f =
            vg_gh_add(snap, gi, out, "retirement-pending", VG_SEV_CRITICAL, label, sizeof label);
        vg_finding_title(out, f,
                         "%s has a page retirement pending: the page is retired at the next GPU "
                         "reset",
                         label);
        vg_finding_evidence(out, f, "nvmlDeviceGetRetiredPagesPendingStatus: pending");
        vg_finding_evidence(
            out, f, "pages retired so far: %s for multiple single-bit errors, %s for double-bit",
            vg_gh_count(h->known & VG_GH_K_RETIRED_SBE, h->retired_sbe, a, sizeof a),
            vg_gh_count(h->known & VG_GH_K_RETIRED_DBE, h->retired_dbe, b, sizeof b));
        vg_gh_fix_reset(snap, gi, out, f, "the retirement takes effect at the next GPU reset");
    }
}

void vg_rule_remap_pending(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu_health *h = &snap->gpus.gpus[gi].health;
        if (!vg_gh_readable(snap, gi) || !(h->known & VG_GH_K_REMAP) || !h->remap_pending ||
            h->remap_failure)
            continue;
        char label[VG_LABEL_MAX];
        struct vg_finding *f =
            vg_gh_add(snap, gi, out, "remap-pending", VG_SEV_CRITICAL, label, sizeof label);
        vg_finding_title(
            out, f, "%s has a row remap pending: the remap happens at the next GPU reset", label);
        vg_finding_evidence(out, f,
                            "rows remapped: %u for uncorrectable errors, %u for correctable "
                            "ones; a remap is pending",
                            h->remap_uncorr, h->remap_corr);
        vg_gh_fix_reset(snap, gi, out, f, "the remap happens at the next GPU reset");
    }
}

void vg_rule_remap_failed(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu_health *h = &snap->gpus.gpus[gi].health;
        if (!vg_gh_readable(snap, gi) || !(h->known & VG_GH_K_REMAP) || !h->remap_failure)
            continue;
        char label[VG_LABEL_MAX];
        struct vg_finding *f =
            vg_gh_add(snap, gi, out, "remap-failed", VG_SEV_CRITICAL, label, sizeof label);
        vg_finding_title(out, f, "%s failed to remap a row of its memory", label);
        vg_finding_evidence(out, f,
                            "rows remapped: %u for uncorrectable errors, %u for correctable "
                            "ones; a remap failed%s",
                            h->remap_uncorr, h->remap_corr,
                            h->remap_pending ? "; a remap is pending" : "");
        vg_finding_fix(out, f,
                       "take the GPU out of the scheduler: its memory has a row it cannot "
                       "replace");
        vg_gh_fix_reset(snap, gi, out, f, "reset it once to retry the remap");
        vg_finding_fix(out, f,
                       "if the failure remains after the reset, the board needs service "
                       "(RMA)");
    }
}

void vg_rule_recovery_action(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu *g = &snap->gpus.gpus[gi];
        const struct vg_gpu_health *h = &g->health;
        if (!vg_gh_readable(snap, gi) || !(h->known & VG_GH_K_RECOVERY) ||
            h->recovery == VG_RECOVERY_NONE)
            continue;
        char label[VG_LABEL_MAX], id[VG_LABEL_MAX];
        const char *text = vg_gpu_recovery_text(h->recovery);
        enum vg_severity sev =
            h->recovery == VG_RECOVERY_DRAIN_P2P ? VG_SEV_WARNING : VG_SEV_CRITICAL;
        struct vg_finding *f =
            vg_gh_add(snap, gi, out, "recovery-action", sev, label, sizeof label);
        vg_gh_gpu_id(g, id, sizeof id);
        if (text)
            vg_finding_title(out, f, "the driver asks for %s of %s", text, label);
        else
            vg_finding_title(out, f, "the driver asks for recovery action %u of %s", h->recovery,
                             label);
        vg_finding_evidence(out, f, "field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: %u (%s)",
                            h->recovery,
                            vg_gpu_recovery_name(h->recovery) ? vg_gpu_recovery_name(h->recovery)
                                                              : "not known to this vramguard");
        switch (h->recovery) {
        case VG_RECOVERY_GPU_RESET:
            vg_gh_fix_reset(snap, gi, out, f, "the driver needs a GPU reset to recover");
            break;
        case VG_RECOVERY_NODE_REBOOT:
            vg_finding_fix(out, f,
                           "a GPU reset is not enough: drain the node's jobs, then reboot it");
            break;
        case VG_RECOVERY_DRAIN_P2P:
            vg_finding_fix(out, f,
                           "stop the jobs that use GPU %u with its peers (NVLink or PCIe "
                           "peer-to-peer), then run `vramguard doctor` again: the driver then "
                           "names the next step",
                           g->index);
            break;
        case VG_RECOVERY_DRAIN_AND_RESET:
            vg_finding_fix(out, f,
                           "the GPU runs at reduced capacity: schedule no new work on it and "
                           "let what runs finish");
            vg_gh_fix_reset(snap, gi, out, f, "then a reset restores it");
            break;
        case VG_RECOVERY_RECOVER_IMEX:
            vg_finding_fix(out, f,
                           "the multi-node NVLink (IMEX) domain needs recovering: stop the "
                           "jobs that span it and restart the IMEX daemon (nvidia-imex) on its "
                           "nodes, then run `vramguard doctor` again");
            break;
        case VG_RECOVERY_BUS_RESET:
            vg_gh_fix_reset(snap, gi, out, f, "the driver asks for a reset of the GPU's PCIe bus");
            break;
        case VG_RECOVERY_SYSTEM_REBOOT:
            vg_finding_fix(out, f,
                           "drain the node's jobs, then reboot the whole system (a GPU reset "
                           "is not enough)");
            break;
        default:
            vg_finding_fix(out, f,
                           "look the action up in NVIDIA's NVML documentation "
                           "(nvmlDeviceGpuRecoveryAction_t); until then, treat `nvidia-smi -r -i "
                           "%s` or a reboot as needed",
                           id);
        }
    }
}

/* The brakes that are on, for people: "HW slowdown, HW thermal slowdown". */
static void vg_gh_brakes(uint64_t clocks, char *out, size_t n)
{
    static const struct {
        uint64_t bit;
        const char *text;
    } names[] = {
        {VG_CLK_HW_SLOWDOWN, "HW slowdown"},
        {VG_CLK_HW_THERMAL, "HW thermal slowdown"},
        {VG_CLK_SW_THERMAL, "SW thermal slowdown"},
        {VG_CLK_HW_POWER_BRAKE, "HW power brake"},
    };
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = strlen(out);
        if (clocks & names[i].bit)
            snprintf(out + len, n - len, "%s%s", len ? ", " : "", names[i].text);
    }
}

void vg_rule_throttled(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu *g = &snap->gpus.gpus[gi];
        const struct vg_gpu_health *h = &g->health;
        if (!vg_gh_readable(snap, gi) || !(h->known & VG_GH_K_CLOCKS) ||
            !(h->clocks & VG_CLK_BRAKES))
            continue;
        char label[VG_LABEL_MAX], brakes[96];
        vg_gh_brakes(h->clocks, brakes, sizeof brakes);
        struct vg_finding *f =
            vg_gh_add(snap, gi, out, "throttled", VG_SEV_WARNING, label, sizeof label);
        vg_finding_title(out, f, "%s is held back: %s", label, brakes);
        vg_finding_evidence(out, f, "clock event reasons: 0x%llx", (unsigned long long)h->clocks);
        if (g->known & VG_GPU_K_TEMP)
            vg_finding_evidence(out, f, "temperature %u C", g->temp_c);
        if ((g->known & VG_GPU_K_POWER) && (g->known & VG_GPU_K_POWER_LIMIT))
            vg_finding_evidence(out, f, "power %u of %u W", g->power_mw / 1000,
                                g->power_limit_mw / 1000);
        if (h->clocks & (VG_CLK_HW_THERMAL | VG_CLK_SW_THERMAL))
            vg_finding_fix(out, f,
                           "too hot: check the airflow, fans and the room; `nvidia-smi -q -d "
                           "TEMPERATURE` shows the slowdown threshold");
        if (h->clocks & VG_CLK_HW_POWER_BRAKE)
            vg_finding_fix(out, f,
                           "an external power brake (the chassis' power supply or BMC) holds it "
                           "down: check the node's power supplies");
        if (h->clocks & VG_CLK_HW_SLOWDOWN)
            vg_finding_fix(out, f,
                           "the board's own protection slows it (temperature or power draw): "
                           "check its power cables and cooling; `nvidia-smi -q -d PERFORMANCE`");
        vg_finding_fix(out, f, "jobs on it run, only slower; no reset is needed");
    }
}

void vg_rule_gpu_missing(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    unsigned expect = 0;
    bool from_pci = false;
    if (ctx->opts->expect_gpus_set) {
        expect = ctx->opts->expect_gpus;
    } else if (snap->pci.known) {
        expect = (unsigned)snap->pci.n;
        from_pci = true;
    }
    if (!snap->driver_ok || expect <= snap->gpus.ngpus)
        return;
    size_t missing = expect - snap->gpus.ngpus;
    struct vg_finding *f = vg_finding_add(out, "gpu-missing", VG_SEV_CRITICAL);
    if (f && from_pci)
        f->confidence = VG_CONF_MEDIUM;
    vg_finding_title(out, f, "%zu GPU%s missing: the driver shows %zu of %u", missing,
                     missing == 1 ? " is" : "s are", snap->gpus.ngpus, expect);
    if (from_pci) {
        vg_finding_evidence(out, f,
                            "the PCI bus has %u NVIDIA display or 3D controllers (vendor 0x10de, "
                            "class 0x0300 or 0x0302 under /sys/bus/pci/devices)",
                            expect);
        for (size_t i = 0; i < snap->pci.n; i++) {
            const struct vg_pci_dev *d = &snap->pci.devs[i];
            bool seen = false;
            for (size_t gi = 0; gi < snap->gpus.ngpus && !seen; gi++) {
                const struct vg_gpu *g = &snap->gpus.gpus[gi];
                seen = (g->known & VG_GPU_K_PCI) && g->pci_domain == d->domain &&
                       g->pci_bus == d->bus && g->pci_device == d->device;
            }
            if (!seen)
                vg_finding_evidence(out, f,
                                    "%04x:%02x:%02x.%x is on the bus, not in the driver's "
                                    "list",
                                    d->domain, d->bus, d->device, d->function);
        }
        vg_finding_evidence(out, f,
                            "inside a container the driver shows only the GPUs given to it: "
                            "there, say the count with --expect-gpus");
    } else {
        vg_finding_evidence(out, f, "--expect-gpus %u", expect);
    }
    vg_finding_fix(out, f,
                   "find why in the kernel log: `dmesg | grep -e NVRM -e Xid` (Xid 79: the GPU "
                   "fell off the bus)");
    vg_finding_fix(out, f,
                   "drain the node and reboot it; a GPU that stays missing needs reseating or "
                   "service");
}
