/*
 * Memory by reason: why each byte a GPU's driver reports as used is held. The reasons
 * partition the used memory: every holder's known memory goes to exactly one reason (the
 * first that applies, in the order zombie, orphan, foreign_pid, outside_visible,
 * context_only, expected), decided from the findings that name it, and "unattributed" is the
 * used memory no holder accounts for plus what NVML attributes to PIDs that are not processes
 * (0, 2^32-1). The names are an interface (the `reason` label of
 * vramguard_gpu_memory_held_bytes, docs/metrics.md); never rename one.
 *
 * A holder here is one process on one GPU: its holdings on the GPU's MIG devices merged.
 *
 * Ownership: struct vg_reason_gpu owns its holder array (vg_reason_gpu_release); holders
 * borrow their process from the snapshot.
 */
#ifndef VG_RULES_REASON_H
#define VG_RULES_REASON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/snapshot.h"
#include "rules/rules.h"

enum vg_reason {
    VG_REASON_OUTSIDE,
    VG_REASON_ORPHAN,
    VG_REASON_ZOMBIE,
    VG_REASON_FOREIGN,
    VG_REASON_UNATTRIBUTED,
    VG_REASON_CONTEXT,
    VG_REASON_EXPECTED,
    VG_REASON_COUNT
};

/* "outside_visible", "orphan", ... */
const char *vg_reason_name(enum vg_reason r);

struct vg_reason_holder {
    uint32_t pid;
    bool bogus;        /* a PID NVML reports that is no process (0, 2^32-1) */
    bool nvml_unknown; /* NVML lists it but some figure of it is not available */
    bool nvml;         /* NVML lists it */
    bool any_known;    /* some figure of it is known */
    uint64_t bytes;    /* the known figures, summed (saturating) */
    unsigned seen;     /* VG_SEEN_* */
    const struct vg_proc *proc;
    enum vg_reason reason;
};

/* Whether the holder's memory is known: NVML lists it with every figure. */
bool vg_reason_holder_known(const struct vg_reason_holder *h);

struct vg_reason_gpu {
    struct vg_reason_holder *h; /* by PID */
    size_t n;
    bool known; /* the process lists could be read */
    uint64_t bytes[VG_REASON_COUNT];
    bool unattributed_known; /* bytes[VG_REASON_UNATTRIBUTED] includes the unexplained rest */
};

/* Classify the memory of GPU gi of snap (which must have driver_ok) with the findings fs over
 * it (NULL: none); context_max: a context_only holding is at most this big. out is
 * overwritten. 0 or -ENOMEM. */
int vg_reason_gpu_build(const struct vg_snapshot *snap, size_t gi, const struct vg_findings *fs,
                        uint64_t context_max, struct vg_reason_gpu *out);
void vg_reason_gpu_release(struct vg_reason_gpu *g);

/* Memory above the driver's reservation that still counts as a free GPU: `handoff`'s default
 * --tolerance, and what `serve` calls dirty beyond. */
#define VG_REASON_DIRTY_TOLERANCE (64ull << 20)
/* The driver's reservation where the v1 memory call counts it as used (v1 does not report it):
 * the figure clean and handoff take too. */
#define VG_REASON_V1_RESERVED (512ull << 20)

/* Leftover memory on the GPU: what no running job's process holds, that is sure leftovers of
 * ended jobs (orphan), zombies, and memory no process accounts for (unattributed, less the
 * driver's reservation when reserved_in_used: the v1 memory call). Memory of another PID
 * namespace (foreign_pid) is not counted: it may be a running job elsewhere. */
uint64_t vg_reason_gpu_leftover(const struct vg_reason_gpu *g, bool reserved_in_used);
/* Dirty: the process lists were read and the leftover memory exceeds tolerance. */
bool vg_reason_gpu_dirty(const struct vg_reason_gpu *g, bool reserved_in_used, uint64_t tolerance);

#endif
