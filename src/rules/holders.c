/*
 * Rules about who a holder really is: stale-pid (the driver lists a PID whose process now is
 * someone else), unmatched-node (processes hold a node of no GPU the driver reports) and
 * allocator-cache (a live process keeps memory it does no work with: its framework's cache,
 * not a leak).
 */
#include <stdio.h>
#include <string.h>

#include "rules/internal.h"
#include "util/sat.h"

void vg_rule_stale_pid(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (!h->stale || !h->stale_proc || h->gpu == VG_SNAP_NO_GPU)
            continue;
        char label[VG_LABEL_MAX], glabel[VG_LABEL_MAX], size[32];
        vg_rule_proc_label(h->pid, h->stale_proc, label, sizeof(label));
        vg_rule_gpu_label(snap, h->gpu, glabel, sizeof(glabel));
        vg_rule_size(h->used_known, h->used_bytes, size, sizeof(size));
        bool mem = h->used_known && h->used_bytes > 0;
        struct vg_finding *f = vg_finding_add(out, "stale-pid", mem ? VG_SEV_WARNING : VG_SEV_INFO);
        if (!f)
            return;
        vg_finding_gpu(out, f, h->gpu);
        vg_finding_pid(out, f, h->pid);
        f->bytes_known = h->used_known;
        f->bytes = h->used_bytes;
        vg_finding_title(out, f,
                         "the driver lists PID %u with %s on %s, but that PID is now "
                         "another process, which holds no node of the GPU",
                         (unsigned)h->pid, size, glabel);
        vg_finding_evidence(out, f,
                            "%s: its open descriptors and memory mappings were read and "
                            "none is the GPU's device node, which a process keeps open for "
                            "as long as it has a context there",
                            label);
        vg_finding_evidence(out, f,
                            "the driver keeps a PID listed for a while after its process "
                            "exits, and PIDs are reused: this entry belongs to a process "
                            "that is gone");
        vg_finding_fix(out, f,
                       "do not stop PID %u for this: it is not the holder, and "
                       "vramguard clean never signals it on the driver's word",
                       (unsigned)h->pid);
        vg_finding_fix(out, f,
                       "the memory should come back once the driver tears the old "
                       "context down: look again in a minute (vramguard doctor)");
        vg_finding_fix(out, f,
                       "if the entry stays, the context is stuck: a GPU reset once "
                       "nothing holds the GPU (vramguard clean --reset)");
    }
}

void vg_rule_unmatched_node(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    /* Without the driver every holder is unmatched, and doctor says so once. */
    if (!snap->driver_ok)
        return;
    size_t first, count;
    vg_snap_gpu_holdings(snap, VG_SNAP_NO_GPU, &first, &count);
    if (!count)
        return;
    struct vg_finding *f = vg_finding_add(out, "unmatched-node", VG_SEV_WARNING);
    if (!f)
        return;
    size_t nproc = 0;
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        char label[VG_LABEL_MAX];
        vg_rule_proc_label(h->pid, h->proc, label, sizeof(label));
        vg_finding_evidence(out, f, "%s holds %s/nvidia%u, the node of minor %u", label,
                            snap->dev_dir, h->minor, h->minor);
        if (!vg_finding_names_pid(f, h->pid)) {
            vg_finding_pid(out, f, h->pid);
            nproc++;
        }
    }
    vg_finding_title(out, f,
                     "%zu process%s hold%s the device node of a GPU the driver does not "
                     "report by that minor number",
                     nproc, nproc == 1 ? "" : "es", nproc == 1 ? "s" : "");
    size_t unknown_minor = 0;
    for (size_t g = 0; g < snap->gpus.ngpus; g++) {
        const struct vg_gpu *gp = &snap->gpus.gpus[g];
        if (gp->known & VG_GPU_K_MINOR)
            continue;
        unknown_minor++;
        char glabel[VG_LABEL_MAX];
        vg_rule_gpu_label(snap, g, glabel, sizeof(glabel));
        vg_finding_gpu(out, f, g);
        vg_finding_evidence(out, f,
                            "%s%s: its minor number is unknown, so these may be its "
                            "holders",
                            glabel, gp->lost ? " is lost" : "");
    }
    if (!unknown_minor)
        vg_finding_evidence(out, f,
                            "every GPU the driver reports has another minor number: the "
                            "node belongs to a GPU the driver does not list (fallen off "
                            "the bus, or hidden from this driver view)");
    vg_finding_fix(out, f,
                   "these processes keep the GPU's memory and stop it from being reset: "
                   "look at each one (vramguard doctor --pid %d)",
                   (int)f->pids[0]);
    vg_finding_fix(out, f,
                   "a lost GPU comes back only with a reset or a reboot, once nothing "
                   "holds its node (check dmesg for Xid errors)");
}

/* Whether an earlier finding of these rules already explains pid. */
static bool vg_cache_explained(const struct vg_findings *out, pid_t pid)
{
    static const char *const rules[] = {"orphan-holder", "zombie-holder", "d-state-holder",
                                        "preallocation", "idle-holder"};
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (vg_findings_has_pid(out, rules[i], pid, VG_SNAP_NO_GPU))
            return true;
    return false;
}

/* The driver's utilisation samples for pid on GPU g: 1 it worked, 0 it did not, -1 unknown. No
 * sample is unknown, not 0%; and 0% samples are not believed while the GPU's own utilisation
 * shows work that no listed process's samples account for (it may be this one's). */
static int vg_cache_worked(const struct vg_snapshot *snap, const struct vg_holding *h)
{
    const struct vg_gpu *g = &snap->gpus.gpus[h->gpu];
    if (h->mig >= 0 || !(g->known & VG_GPU_K_PROC_UTIL))
        return -1;
    const struct vg_gpu_proc *me = NULL;
    bool other_works = false;
    for (size_t k = 0; k < g->nprocs; k++) {
        const struct vg_gpu_proc *gp = &g->procs[k];
        if (!gp->util_known)
            continue;
        if (gp->pid == (uint32_t)h->pid && !me)
            me = gp;
        else if (gp->pid != (uint32_t)h->pid && gp->sm_util > 0)
            other_works = true;
    }
    if (!me)
        return -1;
    if (me->sm_util > 0)
        return 1;
    if ((g->known & VG_GPU_K_UTIL) && g->util_gpu > 0 && !other_works)
        return -1;
    return 0;
}

/* Whether the process is the one the driver's entry means, as far as can be told: not a kernel
 * thread (a reused PID of a stale entry, which no descriptor check could rule out when its
 * descriptors cannot be read), and holding the GPU's node or mapping CUDA, not only named by
 * the driver. */
static bool vg_cache_real_holder(const struct vg_holding *h, const struct vg_proc *p)
{
    if (p->flags & VG_PROC_PF_KTHREAD)
        return false;
    return (h->seen & VG_SEEN_NODE) || ((p->known & VG_PROC_K_MAPS) && (p->libs & VG_LIB_CUDA));
}

static void vg_cache_fixes(struct vg_findings *out, struct vg_finding *f, const struct vg_proc *p)
{
    unsigned libs = (p->known & VG_PROC_K_MAPS) ? p->libs : 0;
    bool known = libs & (VG_LIB_TORCH_CUDA | VG_LIB_TENSORFLOW | VG_LIB_JAX);
    if (libs & VG_LIB_TORCH_CUDA) {
        vg_finding_evidence(out, f,
                            "PyTorch is loaded: its caching allocator keeps the memory "
                            "of freed tensors reserved for reuse, and nvidia-smi counts "
                            "it as used");
        vg_finding_fix(out, f,
                       "PyTorch: del the tensors you no longer need, then "
                       "torch.cuda.empty_cache() returns the cached blocks "
                       "(torch.cuda.memory_summary() shows what is cached)");
        vg_finding_fix(out, f,
                       "PyTorch: PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6"
                       " or expandable_segments:True makes the cache give memory back "
                       "sooner");
    }
    if (libs & VG_LIB_TENSORFLOW) {
        vg_finding_evidence(out, f,
                            "TensorFlow is loaded: it keeps what it reserved until the "
                            "process exits");
        vg_finding_fix(out, f,
                       "TensorFlow: export TF_FORCE_GPU_ALLOW_GROWTH=true before it "
                       "starts (or tf.config.experimental.set_memory_growth)");
    }
    if (libs & VG_LIB_JAX) {
        vg_finding_evidence(out, f,
                            "JAX is loaded: it preallocates most of the GPU and keeps "
                            "it");
        vg_finding_fix(out, f,
                       "JAX: export XLA_PYTHON_CLIENT_PREALLOCATE=false, or "
                       "XLA_PYTHON_CLIENT_ALLOCATOR=platform to free memory as arrays "
                       "go");
    }
    if (!known)
        vg_finding_evidence(out, f,
                            "a framework's allocator (PyTorch, TensorFlow, JAX, CuPy) "
                            "keeps freed memory for reuse instead of giving it back");
    vg_finding_fix(out, f,
                   "if it is an idle notebook kernel or a finished script waiting for "
                   "input, shut it down: the memory comes back when the process exits");
}

void vg_rule_allocator_cache(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    uint64_t max = ctx->opts->context_max;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        const struct vg_proc *p = h->proc;
        if (!p || !(h->seen & VG_SEEN_NVML) || h->gpu == VG_SNAP_NO_GPU ||
            !(p->known & VG_PROC_K_STAT) || strchr("ZXDTt", p->state) ||
            !vg_cache_real_holder(h, p) || vg_cache_explained(out, h->pid) ||
            vg_findings_has_pid(out, "allocator-cache", h->pid, VG_SNAP_NO_GPU))
            continue;
        /* Every holding of the process: one that works makes its memory live memory. */
        bool worked = false, any = false;
        uint64_t idle = 0;
        for (size_t k = 0; k < snap->nholdings && !worked; k++) {
            const struct vg_holding *o = &snap->holdings[k];
            if (o->pid != h->pid || !(o->seen & VG_SEEN_NVML) || o->gpu == VG_SNAP_NO_GPU)
                continue;
            int w = vg_cache_worked(snap, o);
            worked = w == 1;
            if (w == 0 && o->used_known && o->used_bytes > max) {
                any = true;
                idle = vg_sat_add(idle, o->used_bytes);
            }
        }
        if (worked || !any)
            continue;
        char label[VG_LABEL_MAX], size[32];
        vg_rule_proc_label(h->pid, p, label, sizeof(label));
        vg_rule_size(true, idle, size, sizeof(size));
        struct vg_finding *f = vg_finding_add(out, "allocator-cache", VG_SEV_INFO);
        if (!f)
            return;
        f->confidence = VG_CONF_MEDIUM;
        f->bytes_known = true;
        f->bytes = idle;
        vg_finding_pid(out, f, h->pid);
        vg_finding_title(out, f,
                         "%s holds %s but did no GPU work in the driver's recent "
                         "samples: memory its framework keeps, not a leak",
                         label, size);
        for (size_t k = 0; k < snap->nholdings; k++) {
            const struct vg_holding *o = &snap->holdings[k];
            if (o->pid != h->pid || !(o->seen & VG_SEEN_NVML) || o->gpu == VG_SNAP_NO_GPU ||
                vg_cache_worked(snap, o) != 0 || !o->used_known || o->used_bytes <= max)
                continue;
            char glabel[VG_LABEL_MAX], osize[32];
            vg_rule_gpu_label(snap, o->gpu, glabel, sizeof(glabel));
            vg_rule_size(true, o->used_bytes, osize, sizeof(osize));
            vg_finding_gpu(out, f, o->gpu);
            vg_finding_evidence(out, f,
                                "%s on %s: 0%% in every utilisation sample the driver "
                                "keeps for it (its last few seconds)",
                                osize, glabel);
        }
        vg_finding_evidence(out, f,
                            "the process is alive and nothing is lost: the memory comes "
                            "back when it exits");
        vg_cache_fixes(out, f, p);
    }
}
