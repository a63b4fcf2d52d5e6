/*
 * The GPU reset of `clean --reset --force`: which GPUs of the plan's scope only a reset can
 * free (memory held with no process left), and running `nvidia-smi --gpu-reset -i UUID` on
 * each, only as root, only for a well-formed UUID, and only after a fresh look shows that
 * nothing holds the GPU again. A wedged reset is reported, never killed half-way.
 *
 * Ownership: the array vg_reset_needed() returns is the caller's (free()); uuid is borrowed from
 * the snapshot the plan was made from, refused is a static string.
 */
#ifndef VG_ACT_RESET_H
#define VG_ACT_RESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/plan.h"
#include "model/snapshot.h"

/* A GPU whose memory only a reset can free, and what became of the reset. */
struct vg_reset {
    const char *uuid; /* the GPU's full UUID */
    unsigned index;
    uint64_t held;       /* memory held with no process left */
    bool attempted;      /* nvidia-smi was run */
    int exit_status;     /* its exit status; -1 when it did not exit normally */
    const char *refused; /* why it was not run although asked (--reset --force); NULL */
};

/* The GPUs of plan's scope (indices into before) that snap shows needing a reset, with
 * unexplained memory above min as the rules count it. 0 or -ENOMEM. */
int vg_reset_needed(const struct vg_plan *plan, const struct vg_snapshot *before,
                    const struct vg_snapshot *snap, uint64_t min, struct vg_reset **out, size_t *n);

/* A fresh snapshot for the look before each reset, its NVML session closed (so that
 * vramguard itself holds nothing while the reset runs): 0, or nonzero when none could be
 * taken. */
typedef int (*vg_reset_look_fn)(void *ctx, struct vg_snapshot **snap);

/* Run the resets that are allowed; each gets attempted + exit_status, or refused. nvidia-smi's
 * output goes to our stderr (stdout may carry JSON). */
void vg_reset_run(struct vg_reset *rs, size_t n, vg_reset_look_fn look, void *ctx);

#endif
