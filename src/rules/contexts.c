/*
 * Rules about contexts in the wrong place: ddp-gpu0 (every rank of a job touching one GPU),
 * nccl-all-gpus, preallocation (TensorFlow and JAX taking most of a GPU, or all of them) and
 * stray-contexts (a context-sized amount on GPUs a process does not work on).
 *
 * "Context-sized" is an amount up to opts->context_max (default 1 GiB): a CUDA context with the
 * kernels of a framework costs a few hundred MiB, while real work on a GPU costs more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/visible.h"
#include "rules/internal.h"
#include "util/sat.h"

/* Iterate over one process's NVML holdings on known GPUs:
 *   for (size_t k = 0; vg_next_of(snap, pid, &k); k++) ... snap->holdings[k] ...
 * No per-process array, so no limit on how many GPUs a process may hold. */
static bool vg_next_of(const struct vg_snapshot *snap, pid_t pid, size_t *k)
{
    for (; *k < snap->nholdings; (*k)++) {
        const struct vg_holding *h = &snap->holdings[*k];
        if (h->pid == pid && h->gpu != VG_SNAP_NO_GPU && (h->seen & VG_SEEN_NVML))
            return true;
    }
    return false;
}

/* Whether holding i is the first NVML holding of a process we could read. */
static bool vg_first_of_pid(const struct vg_snapshot *snap, size_t i)
{
    const struct vg_holding *h = &snap->holdings[i];
    if (!h->proc || !(h->seen & VG_SEEN_NVML) || h->gpu == VG_SNAP_NO_GPU)
        return false;
    for (size_t k = 0; k < i; k++)
        if (snap->holdings[k].pid == h->pid && (snap->holdings[k].seen & VG_SEEN_NVML))
            return false;
    return true;
}

/* The rules below visit each process with NVML holdings once: the next such process from
 * holding *i on, as its first holding (with *i at it), or NULL when none is left. */
static const struct vg_holding *vg_next_process(const struct vg_snapshot *snap, size_t *i)
{
    for (; *i < snap->nholdings; (*i)++)
        if (vg_first_of_pid(snap, *i))
            return &snap->holdings[*i];
    return NULL;
}

static bool vg_small(const struct vg_holding *h, uint64_t max)
{
    return h->used_known && h->used_bytes > 0 && h->used_bytes <= max;
}

static bool vg_big(const struct vg_holding *h, uint64_t max)
{
    return h->used_known && h->used_bytes > max;
}

/* The variable that says which rank a process is, most local first; VG_ENV_COUNT if none. */
static enum vg_env_var vg_rank_var(const struct vg_proc *p)
{
    static const enum vg_env_var order[] = {VG_ENV_LOCAL_RANK, VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK,
                                            VG_ENV_SLURM_LOCALID, VG_ENV_RANK};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
        if (p->env[order[i]])
            return order[i];
    return VG_ENV_COUNT;
}

struct vg_ddp_cand {
    size_t hold;   /* the small holding */
    size_t own;    /* the rank's own (big) holding */
    char key[640]; /* vg_rule_job_key: ids are cut at 100 bytes each */
    char label[128];
    bool done;
};

/* The ranks holding a small context on one GPU besides a big holding of their own elsewhere,
 * with their job keys, into c (room for every holding). Returns how many. */
static size_t vg_ddp_candidates(const struct vg_snapshot *snap, uint64_t max, struct vg_ddp_cand *c)
{
    size_t nc = 0;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (!h->proc || !(h->seen & VG_SEEN_NVML) || !vg_small(h, max) ||
            !vg_rule_has_rank(h->proc))
            continue;
        for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
            const struct vg_holding *o = &snap->holdings[k];
            if (o->gpu != h->gpu && vg_big(o, max)) {
                c[nc].hold = i;
                c[nc].own = k;
                vg_rule_job_key(h->proc, c[nc].key, sizeof(c[nc].key), c[nc].label,
                                sizeof(c[nc].label));
                nc++;
                break;
            }
        }
    }
    return nc;
}

void vg_rule_ddp_gpu0(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    uint64_t max = ctx->opts->context_max;
    struct vg_ddp_cand *c = calloc(snap->nholdings ? snap->nholdings : 1, sizeof(*c));
    if (!c) {
        out->err = out->err ? out->err : -ENOMEM;
        return;
    }
    size_t nc = vg_ddp_candidates(snap, max, c);
    for (size_t a = 0; a < nc; a++) {
        if (c[a].done)
            continue;
        const struct vg_holding *ha = &snap->holdings[c[a].hold];
        size_t members = 0;
        for (size_t b = a; b < nc; b++)
            members += !c[b].done && snap->holdings[c[b].hold].gpu == ha->gpu &&
                       strcmp(c[b].key, c[a].key) == 0;
        if (members < 2)
            continue;
        char glabel[VG_LABEL_MAX], size[32];
        vg_rule_gpu_label(snap, ha->gpu, glabel, sizeof(glabel));
        struct vg_finding *f = vg_finding_add(out, "ddp-gpu0", VG_SEV_WARNING);
        vg_finding_gpu(out, f, ha->gpu);
        uint64_t total = 0;
        for (size_t b = a; b < nc; b++) {
            const struct vg_holding *hb = &snap->holdings[c[b].hold];
            if (c[b].done || hb->gpu != ha->gpu || strcmp(c[b].key, c[a].key) != 0)
                continue;
            c[b].done = true;
            const struct vg_holding *own = &snap->holdings[c[b].own];
            char osize[32], olabel[VG_LABEL_MAX];
            vg_rule_size(true, hb->used_bytes, size, sizeof(size));
            vg_rule_size(own->used_known, own->used_bytes, osize, sizeof(osize));
            vg_rule_gpu_label(snap, own->gpu, olabel, sizeof(olabel));
            enum vg_env_var rv = vg_rank_var(hb->proc);
            vg_finding_evidence(out, f, "PID %u (%s=%s) holds %s here and %s on its own %s",
                                (unsigned)hb->pid, rv < VG_ENV_COUNT ? vg_env_name(rv) : "rank",
                                rv < VG_ENV_COUNT ? hb->proc->env[rv] : "?", size, osize, olabel);
            vg_finding_pid(out, f, hb->pid);
            total = vg_sat_add(total, hb->used_bytes);
        }
        vg_rule_size(true, total, size, sizeof(size));
        vg_finding_title(out, f,
                         "%zu ranks of one job (%s) each hold a stray context on %s, "
                         "%s in all",
                         members, c[a].label, glabel, size);
        if (f) {
            f->bytes_known = true;
            f->bytes = total;
        }
        vg_finding_evidence(out, f,
                            "every rank created a context on this GPU before selecting "
                            "its own: typically a CUDA call (or torch.load of CUDA "
                            "tensors) before torch.cuda.set_device(local_rank)");
        vg_finding_fix(out, f,
                       "call torch.cuda.set_device(local_rank) before any CUDA call, "
                       "and pass device_id=torch.device('cuda', local_rank) to "
                       "init_process_group");
        vg_finding_fix(out, f,
                       "load checkpoints with torch.load(path, map_location=f'cuda:"
                       "{local_rank}') (or 'cpu')");
        vg_finding_fix(out, f,
                       "or give each rank only its GPU: CUDA_VISIBLE_DEVICES per rank, "
                       "e.g. through 'vramguard run --gpus'");
    }
    free(c);
}

void vg_rule_nccl_all_gpus(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    uint64_t max = ctx->opts->context_max;
    const struct vg_holding *h;
    for (size_t i = 0; (h = vg_next_process(snap, &i)) != NULL; i++) {
        const struct vg_proc *p = h->proc;
        if (!(p->known & VG_PROC_K_MAPS) || !(p->libs & VG_LIB_NCCL) ||
            vg_findings_has_pid(out, "ddp-gpu0", h->pid, VG_SNAP_NO_GPU))
            continue;
        struct vg_proc_visible pv;
        bool judged = vg_rule_proc_visible(snap, p, &pv);
        size_t nvis = 0, held = 0, small = 0;
        for (size_t g = 0; g < snap->gpus.ngpus; g++) {
            if (judged && !pv.allowed[g])
                continue;
            nvis++;
            for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
                const struct vg_holding *o = &snap->holdings[k];
                if (o->gpu == g) {
                    held++;
                    small += vg_small(o, max);
                    break;
                }
            }
        }
        if (judged)
            vg_rule_proc_visible_release(&pv);
        if (nvis < 2 || held != nvis || small == 0)
            continue;
        char label[VG_LABEL_MAX];
        vg_rule_proc_label(h->pid, p, label, sizeof(label));
        struct vg_finding *f = vg_finding_add(out, "nccl-all-gpus", VG_SEV_WARNING);
        vg_finding_title(out, f,
                         "%s has NCCL loaded and a context on every one of its %zu "
                         "visible GPUs, %zu of them context-sized",
                         label, nvis, small);
        vg_finding_pid(out, f, h->pid);
        for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
            const struct vg_holding *o = &snap->holdings[k];
            char glabel[VG_LABEL_MAX], size[32];
            vg_rule_gpu_label(snap, o->gpu, glabel, sizeof(glabel));
            vg_rule_size(o->used_known, o->used_bytes, size, sizeof(size));
            vg_finding_gpu(out, f, o->gpu);
            vg_finding_evidence(out, f, "%s on %s", size, glabel);
        }
        vg_finding_evidence(out, f,
                            "libnccl is mapped: distributed initialisation or a "
                            "collective touched every visible GPU");
        vg_finding_fix(out, f,
                       "one GPU per rank: torch.cuda.set_device(local_rank) before "
                       "init_process_group(..., device_id=torch.device('cuda', "
                       "local_rank))");
        vg_finding_fix(out, f, "call torch.distributed.destroy_process_group() when done");
        vg_finding_fix(out, f,
                       "or restrict each rank with CUDA_VISIBLE_DEVICES "
                       "('vramguard run --gpus')");
    }
}

static void vg_prealloc_env(struct vg_findings *out, struct vg_finding *f, const struct vg_proc *p)
{
    if (!(p->known & VG_PROC_K_ENV))
        return;
    static const enum vg_env_var vars[] = {VG_ENV_TF_FORCE_GPU_ALLOW_GROWTH,
                                           VG_ENV_XLA_PYTHON_CLIENT_PREALLOCATE,
                                           VG_ENV_XLA_PYTHON_CLIENT_MEM_FRACTION};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (p->env[vars[i]])
            vg_finding_evidence(out, f,
                                "it already has %s=%s, yet holds this much (set after "
                                "the framework started, or overridden in code?)",
                                vg_env_name(vars[i]), p->env[vars[i]]);
}

/* The framework's own settings that stop preallocation. */
static void vg_prealloc_fixes(struct vg_findings *out, struct vg_finding *f, bool tf, bool jax)
{
    if (tf) {
        vg_finding_fix(out, f,
                       "TensorFlow: export TF_FORCE_GPU_ALLOW_GROWTH=true (or "
                       "tf.config.experimental.set_memory_growth(gpu, True))");
        vg_finding_fix(out, f,
                       "TensorFlow: tf.config.set_visible_devices(gpus[i], 'GPU') "
                       "before any op, to use only the GPU it needs");
    }
    if (jax) {
        vg_finding_fix(out, f,
                       "JAX: export XLA_PYTHON_CLIENT_PREALLOCATE=false (or "
                       "XLA_PYTHON_CLIENT_MEM_FRACTION=.30)");
        vg_finding_fix(out, f,
                       "JAX: export CUDA_VISIBLE_DEVICES to the GPU it should use "
                       "before starting Python");
    }
}

void vg_rule_preallocation(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    const struct vg_holding *h;
    for (size_t i = 0; (h = vg_next_process(snap, &i)) != NULL; i++) {
        const struct vg_proc *p = h->proc;
        bool tf = p->libs & VG_LIB_TENSORFLOW, jax = p->libs & VG_LIB_JAX;
        if (!(p->known & VG_PROC_K_MAPS) || (!tf && !jax))
            continue;
        size_t most = 0;
        for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
            const struct vg_holding *o = &snap->holdings[k];
            const struct vg_gpu *g = &snap->gpus.gpus[o->gpu];
            if (o->used_known && (g->known & VG_GPU_K_MEM) && g->mem_total &&
                (double)o->used_bytes >= ctx->opts->prealloc_fraction * (double)g->mem_total)
                most++;
        }
        struct vg_proc_visible pv;
        bool judged = vg_rule_proc_visible(snap, p, &pv);
        size_t nvis = 0, held = 0;
        for (size_t g = 0; judged && g < snap->gpus.ngpus; g++) {
            if (!pv.allowed[g])
                continue;
            nvis++;
            for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++)
                if (snap->holdings[k].gpu == g) {
                    held++;
                    break;
                }
        }
        if (judged)
            vg_rule_proc_visible_release(&pv);
        bool all = nvis >= 2 && held == nvis;
        if (!most && !all)
            continue;
        char label[VG_LABEL_MAX];
        vg_rule_proc_label(h->pid, p, label, sizeof(label));
        const char *fw = tf && jax ? "TensorFlow and JAX" : tf ? "TensorFlow" : "JAX";
        struct vg_finding *f = vg_finding_add(out, "preallocation", VG_SEV_WARNING);
        if (all)
            vg_finding_title(out, f, "%s (%s) holds memory on every one of its %zu visible GPUs",
                             label, fw, nvis);
        else
            vg_finding_title(out, f, "%s (%s) holds at least %.0f%% of %zu GPU%s", label, fw,
                             ctx->opts->prealloc_fraction * 100.0, most, most == 1 ? "" : "s");
        vg_finding_pid(out, f, h->pid);
        uint64_t total = 0;
        for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
            const struct vg_holding *o = &snap->holdings[k];
            const struct vg_gpu *g = &snap->gpus.gpus[o->gpu];
            char glabel[VG_LABEL_MAX], size[32], tot[32];
            vg_rule_gpu_label(snap, o->gpu, glabel, sizeof(glabel));
            vg_rule_size(o->used_known, o->used_bytes, size, sizeof(size));
            vg_rule_size(g->known & VG_GPU_K_MEM, g->mem_total, tot, sizeof(tot));
            vg_finding_gpu(out, f, o->gpu);
            vg_finding_evidence(out, f, "%s of %s on %s", size, tot, glabel);
            total = vg_sat_add(total, o->used_known ? o->used_bytes : 0);
        }
        if (f) {
            f->bytes_known = true;
            f->bytes = total;
        }
        vg_finding_evidence(out, f,
                            "%s reserves most of each GPU it sees at start-up by default, "
                            "whether the model needs it or not",
                            fw);
        vg_prealloc_env(out, f, p);
        vg_prealloc_fixes(out, f, tf, jax);
    }
}

/* Whether the process works on exactly one GPU (big) and holds context-sized memory on others
 * (small), counting only the GPUs its CUDA_VISIBLE_DEVICES lets it see: GPUs outside the
 * visible set are outside-visible's to report. *judged says whether that set was known. */
static bool vg_stray_shape(const struct vg_snapshot *snap, const struct vg_holding *h, uint64_t max,
                           bool *judged, size_t *small, size_t *work)
{
    struct vg_proc_visible pv;
    *judged = vg_rule_proc_visible(snap, h->proc, &pv);
    size_t big = 0;
    *small = 0;
    *work = 0;
    for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
        const struct vg_holding *o = &snap->holdings[k];
        if (*judged && !pv.allowed[o->gpu])
            continue;
        if (vg_big(o, max)) {
            big++;
            *work = k;
        } else if (vg_small(o, max)) {
            (*small)++;
        }
    }
    if (*judged)
        vg_rule_proc_visible_release(&pv);
    return big == 1 && *small != 0;
}

/* What its environment said, only as far as it was read. */
static void vg_stray_env_evidence(struct vg_findings *out, struct vg_finding *f,
                                  const struct vg_proc *p, bool judged)
{
    if (!judged && !(p->known & VG_PROC_K_ENV))
        vg_finding_evidence(out, f,
                            "the framework initialised every GPU it could see before "
                            "the job chose one; its environment could not be read, "
                            "so whether CUDA_VISIBLE_DEVICES was set is unknown");
    else if (!p->env[VG_ENV_CUDA_VISIBLE_DEVICES])
        vg_finding_evidence(out, f,
                            "the framework initialised every GPU it could see before "
                            "the job chose one: CUDA_VISIBLE_DEVICES is unset in its "
                            "environment");
    else
        vg_finding_evidence(out, f,
                            "the framework initialised every GPU it could see before "
                            "the job chose one: its CUDA_VISIBLE_DEVICES='%s' lets it "
                            "see these GPUs (or was set after CUDA started)",
                            p->env[VG_ENV_CUDA_VISIBLE_DEVICES]);
}

/* The stray-contexts finding for a process that works on holdings[work]. */
static void vg_stray_finding(struct vg_findings *out, const struct vg_snapshot *snap,
                             const struct vg_holding *h, uint64_t max, bool judged, size_t small,
                             size_t work)
{
    const struct vg_proc *p = h->proc;
    char label[VG_LABEL_MAX], wlabel[VG_LABEL_MAX], size[32];
    vg_rule_proc_label(h->pid, p, label, sizeof(label));
    const struct vg_holding *w = &snap->holdings[work];
    vg_rule_gpu_label(snap, w->gpu, wlabel, sizeof(wlabel));
    struct vg_finding *f = vg_finding_add(out, "stray-contexts", VG_SEV_WARNING);
    vg_finding_pid(out, f, h->pid);
    uint64_t stray = 0;
    for (size_t k = 0; vg_next_of(snap, h->pid, &k); k++) {
        const struct vg_holding *o = &snap->holdings[k];
        if (!vg_small(o, max))
            continue;
        char glabel[VG_LABEL_MAX];
        vg_rule_gpu_label(snap, o->gpu, glabel, sizeof(glabel));
        vg_rule_size(true, o->used_bytes, size, sizeof(size));
        vg_finding_gpu(out, f, o->gpu);
        vg_finding_evidence(out, f, "%s on %s: context-sized", size, glabel);
        stray = vg_sat_add(stray, o->used_bytes);
    }
    vg_rule_size(w->used_known, w->used_bytes, size, sizeof(size));
    vg_finding_evidence(out, f, "%s on %s: where it works", size, wlabel);
    vg_stray_env_evidence(out, f, p, judged);
    char ssize[32];
    vg_rule_size(true, stray, ssize, sizeof(ssize));
    vg_finding_title(out, f, "%s works on one GPU but holds contexts on %zu more (%s)", label,
                     small, ssize);
    if (f) {
        f->bytes_known = true;
        f->bytes = stray;
    }
    const struct vg_gpu *wg = &snap->gpus.gpus[w->gpu];
    /* a value to paste: only a well-formed UUID (a comma in it would be several entries) */
    vg_finding_fix(out, f,
                   "start it with CUDA_VISIBLE_DEVICES=%s (set before the process "
                   "starts, or before importing the framework)",
                   (wg->known & VG_GPU_K_UUID) && vg_visible_uuid_ok(wg->uuid)
                       ? wg->uuid
                       : "<the GPU's UUID>");
    if (p->libs & VG_LIB_TORCH_CUDA)
        vg_finding_fix(out, f,
                       "PyTorch: torch.cuda.set_device(N) before any CUDA call; "
                       "torch.load(..., map_location='cuda:N'); avoid bare "
                       ".cuda() and 'cuda' without an index");
    vg_finding_fix(out, f, "vramguard run --gpus <GPU> -- <command>");
}

void vg_rule_stray_contexts(const struct vg_rule_ctx *ctx, struct vg_findings *out)
{
    const struct vg_snapshot *snap = ctx->snap;
    uint64_t max = ctx->opts->context_max;
    const struct vg_holding *h;
    for (size_t i = 0; (h = vg_next_process(snap, &i)) != NULL; i++) {
        /* Reported already by a more specific rule: DDP ranks, NCCL, or TensorFlow/JAX
         * (whose finding lists every GPU the process holds, stray contexts included). */
        if (vg_findings_has_pid(out, "ddp-gpu0", h->pid, VG_SNAP_NO_GPU) ||
            vg_findings_has_pid(out, "nccl-all-gpus", h->pid, VG_SNAP_NO_GPU) ||
            vg_findings_has_pid(out, "preallocation", h->pid, VG_SNAP_NO_GPU))
            continue;
        bool judged;
        size_t small, work;
        if (vg_stray_shape(snap, h, max, &judged, &small, &work))
            vg_stray_finding(out, snap, h, max, judged, small, work);
    }
}
