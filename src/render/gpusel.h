/*
 * The words of GPU selection for `pick` and `run` (act/gpusel.h): a device's name, who holds a
 * reserved GPU, why there are not enough GPUs ("asked for 2 GPUs, 1 free enough (GPU 1: ...)"),
 * the per-GPU lines of --verbose, and a duration for people. Everything is appended to a
 * caller's buffer, without the "vramguard: run: " the command puts before a line; nothing here
 * reads the system; nothing is owned.
 */
#ifndef VG_RENDER_GPUSEL_H
#define VG_RENDER_GPUSEL_H

#include <stddef.h>
#include <stdint.h>

#include "act/gpusel.h"
#include "model/pick.h"
#include "util/buf.h"

/* "GPU 2 (NVIDIA H100 80GB HBM3, GPU-2222...)" or "MIG 1/0 (MIG-...)": GPU gpu of s, or its
 * MIG device mig (>= 0). */
void vg_render_gpusel_dev(const struct vg_gpusel *s, size_t gpu, int mig, struct vg_buf *b);
/* The same for the i-th chosen device. */
void vg_render_gpusel_name(const struct vg_gpusel *s, size_t i, struct vg_buf *b);

/* " (pid 42)" after a reserved GPU, or, when run 42 is gone and its job keeps the reservation,
 * who does: " (pid 42, gone; its job still holds it: 43 (python))". Nothing when the holder
 * is not known. */
void vg_render_gpusel_holder(const struct vg_gpusel *s, size_t gpu, struct vg_buf *b);

/* Why auto:want found too few: "asked for 2 GPUs, 1 free enough (GPU 1: reserved by another
 * vramguard run (pid 42); GPU 2: 3 GiB free of 80 GiB, needs 40 GiB)", over s->ranked. */
void vg_render_gpusel_short(const struct vg_gpusel *s, const struct vg_pick_criteria *c,
                            unsigned want, struct vg_buf *b);

/* Why a GPU named in a list cannot be given: "GPU 1 (A, GPU-...): 3 GiB free of 80 GiB, needs
 * 40 GiB" for a GPU that does not meet c; "GPU 1 (A, GPU-...) is reserved by another vramguard
 * run (pid 42)" for one another run holds. */
void vg_render_gpusel_unfit(const struct vg_gpusel *s, const struct vg_pick_cand *cand,
                            const struct vg_pick_criteria *c, struct vg_buf *b);
void vg_render_gpusel_reserved(const struct vg_gpusel *s, size_t gpu, int mig, struct vg_buf *b);

/* --verbose: the k-th ranked GPU and why it was (not) chosen, ": chosen" when it was. */
void vg_render_gpusel_ranked(const struct vg_gpusel *s, size_t k, const struct vg_pick_criteria *c,
                             struct vg_buf *b);

/* A duration for people: "500ms", "10s", "5m", "2h" (the largest unit that divides it). */
void vg_render_duration_ms(uint64_t ms, char *out, size_t n);

#endif
