/*
 * The rule table and the runner. Order matters: the specific rules run before the general ones
 * that would otherwise report the same processes again (ddp-gpu0, nccl-all-gpus and
 * preallocation before stray-contexts).
 */
#include <errno.h>

#include "rules/internal.h"
#include "util/parse.h"

static const struct vg_rule_def vg_rule_table[] = {
    /* the GPU's own health first: a board that needs a reset is the first thing to know */
    {"gpu-missing", vg_rule_gpu_missing,
     "fewer GPUs in the driver's view than the host has (--expect-gpus, or the PCI bus)"},
    {"recovery-action", vg_rule_recovery_action,
     "the driver asks for a GPU reset, a reboot or a drain (its recovery action field)"},
    {"ecc-uncorrected", vg_rule_ecc_uncorrected, "uncorrected ECC errors since the driver loaded"},
    {"remap-failed", vg_rule_remap_failed, "a row remap of the GPU's memory failed"},
    {"remap-pending", vg_rule_remap_pending, "a row remap waits for the next GPU reset"},
    {"retirement-pending", vg_rule_retirement_pending,
     "a page retirement waits for the next GPU reset"},
    {"throttled", vg_rule_throttled,
     "clocks held down by a hardware slowdown, a thermal slowdown or a power brake"},
    {"xid", vg_rule_xid,
     "Xid errors in the kernel log since boot, per GPU, with the process and job they name"},
    {"invalid-visible", vg_rule_invalid_visible,
     "a CUDA_VISIBLE_DEVICES entry CUDA stops at (bad index, unknown UUID, duplicate)"},
    {"outside-visible", vg_rule_outside_visible,
     "memory on a GPU outside what the process's CUDA_VISIBLE_DEVICES allows"},
    {"order-mismatch", vg_rule_order_mismatch,
     "mixed GPU models and integer indices without CUDA_DEVICE_ORDER=PCI_BUS_ID"},
    {"ddp-gpu0", vg_rule_ddp_gpu0,
     "several ranks of one job each hold a context on the same GPU besides their own"},
    {"nccl-all-gpus", vg_rule_nccl_all_gpus, "NCCL loaded and contexts on every visible GPU"},
    {"preallocation", vg_rule_preallocation,
     "TensorFlow or JAX holding most of a GPU, or every visible GPU"},
    {"stray-contexts", vg_rule_stray_contexts,
     "context-sized memory on GPUs a process does not work on"},
    {"orphan-holder", vg_rule_orphan_holder,
     "GPU memory or device nodes held by leftovers of a job that ended (with a confidence)"},
    {"zombie-holder", vg_rule_zombie_holder,
     "a defunct process (or one with live threads) listed on a GPU"},
    {"d-state-holder", vg_rule_d_state_holder,
     "a holder with a thread stuck in uninterruptible sleep, usually in the driver"},
    {"foreign-pid", vg_rule_foreign_pid, "the driver reports a PID this /proc does not show"},
    {"stale-pid", vg_rule_stale_pid,
     "the driver lists a PID whose process now holds no node of the GPU (a reused PID)"},
    {"unmatched-node", vg_rule_unmatched_node,
     "processes hold the device node of a GPU the driver does not report by that minor"},
    {"unattributed", vg_rule_unattributed,
     "used memory well beyond what the holders and the driver's reservation explain"},
    {"idle-holder", vg_rule_idle_holder,
     "memory held for a long time with zero utilisation (watch only)"},
    {"allocator-cache", vg_rule_allocator_cache,
     "a live process holding memory with no GPU work in the driver's recent samples"},
};

const struct vg_rule_def *vg_rules_table(size_t *n)
{
    *n = sizeof(vg_rule_table) / sizeof(vg_rule_table[0]);
    return vg_rule_table;
}

void vg_rule_opts_init(struct vg_rule_opts *o)
{
    *o = (struct vg_rule_opts){
        .context_max = VG_RULE_CONTEXT_MAX_DEFAULT,
        .unattributed_min = VG_RULE_UNATTRIBUTED_MIN_DEFAULT,
        .prealloc_fraction = 0.7,
        .idle_min_ms = VG_HOUR_MS,
    };
}

int vg_rules_run(const struct vg_snapshot *snap, const struct vg_rule_opts *opts,
                 struct vg_findings *out, struct vg_err *err)
{
    struct vg_leftovers ls;
    if (vg_leftovers_assess(snap, &ls) != 0)
        return vg_err_set(err, -ENOMEM, "out of memory while diagnosing");
    struct vg_rule_ctx ctx = {snap, opts, &ls};
    size_t n;
    const struct vg_rule_def *t = vg_rules_table(&n);
    for (size_t i = 0; i < n && !out->err; i++)
        t[i].fn(&ctx, out);
    vg_leftovers_release(&ls);
    if (out->err)
        return vg_err_set(err, out->err, "out of memory while diagnosing");
    return 0;
}
