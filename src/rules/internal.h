/*
 * Helpers shared by the rule files: how to name a GPU or a process in evidence, and what a
 * process's environment says it may use. Not part of the rules' public interface.
 */
#ifndef VG_RULES_INTERNAL_H
#define VG_RULES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "model/visible.h"
#include "rules/rules.h"

/* Labels are written into caller buffers of at least this size; longer text is cut with "...",
 * which is fine for a label that only has to identify. */
#define VG_LABEL_MAX 160

/* "GPU 0 (NVIDIA H100, GPU-8a1b2c3d)" */
void vg_rule_gpu_label(const struct vg_snapshot *snap, size_t gpu, char *out, size_t n);
/* "PID 4182 (python train.py --lr 3e-4)" */
void vg_rule_proc_label(pid_t pid, const struct vg_proc *p, char *out, size_t n);
/* "1.5 GiB", or "an unknown amount" */
void vg_rule_size(bool known, uint64_t bytes, char *out, size_t n);

/* What a process may use according to its environment at exec time.
 * Returns false when that cannot be judged (environment unreadable, no driver). On true,
 * allowed[g] says whether GPU g (index into the snapshot's list) is visible, *value the
 * CUDA_VISIBLE_DEVICES value (NULL when unset), and vis the full resolution (release it), its
 * GPU indices all host indices. Inside a container whose NVIDIA_VISIBLE_DEVICES names a subset,
 * CUDA numbers the GPUs it was given as on any host: in PCI bus order (the host's index order),
 * then CUDA_DEVICE_ORDER; subset lists them so (host indices) and nunknown counts entries of
 * the variable that named no device here. */
struct vg_proc_visible {
    bool *allowed; /* snap->gpus.ngpus entries */
    const char *value;
    const char *order;
    struct vg_visible vis;
    size_t *subset; /* host GPU index of each GPU the container sees, in bus order */
    size_t nsubset;
    size_t nunknown;
};
bool vg_rule_proc_visible(const struct vg_snapshot *snap, const struct vg_proc *p,
                          struct vg_proc_visible *pv);
void vg_rule_proc_visible_release(struct vg_proc_visible *pv);

/* One evidence line on how the process's CUDA_VISIBLE_DEVICES was resolved: in which order
 * CUDA numbers the GPUs it can see (a container's own, or the host's) and which GPU each cuda:N
 * is. */
void vg_rule_visible_evidence(struct vg_findings *out, struct vg_finding *f,
                              const struct vg_snapshot *snap, const struct vg_proc *p,
                              const struct vg_proc_visible *pv);

/* Resolve a value for the whole host (the shell's environment). */
bool vg_rule_host_visible(const struct vg_snapshot *snap, const char *value, const char *order,
                          struct vg_proc_visible *pv);

/* Does the process carry a rank variable (LOCAL_RANK, RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * SLURM_LOCALID)? */
bool vg_rule_has_rank(const struct vg_proc *p);
/* Whether the process's parent is what started it (not init, a container's init or a subreaper
 * that adopted it). */
bool vg_rule_parent_is_launcher(const struct vg_proc *p);

/* The job a process belongs to, for grouping ranks so that two jobs are never one: the
 * launcher that started it (its parent, while it has not been re-parented), else its session
 * and process group, refined by the job ids launchers set (TORCHELASTIC_RUN_ID unless it is
 * torchrun's default "none", SLURM_JOB_ID and SLURM_STEP_ID, PMIX_NAMESPACE, MASTER_ADDR and
 * MASTER_PORT). key is compared as text; label names the job for people ("launcher PID 4100",
 * "Slurm job 812", "run id 7f3a"). Both are cut to their buffers, which hold any real id. */
void vg_rule_job_key(const struct vg_proc *p, char *key, size_t n, char *label, size_t ln);

/* The rules, one function each (table.c lists them in run order). */
void vg_rule_invalid_visible(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_outside_visible(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_order_mismatch(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_ddp_gpu0(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_nccl_all_gpus(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_preallocation(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_stray_contexts(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_orphan_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_zombie_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_d_state_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_foreign_pid(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_unattributed(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_idle_holder(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_stale_pid(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_unmatched_node(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_allocator_cache(const struct vg_rule_ctx *ctx, struct vg_findings *out);
/* gpu_health.c: the GPU's own health */
void vg_rule_ecc_uncorrected(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_retirement_pending(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_remap_pending(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_remap_failed(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_recovery_action(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_throttled(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_gpu_missing(const struct vg_rule_ctx *ctx, struct vg_findings *out);
void vg_rule_xid(const struct vg_rule_ctx *ctx, struct vg_findings *out);

#endif
