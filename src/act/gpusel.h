/*
 * Reserving GPUs for `run` and looking at reservations for `pick`: the state of one selection
 * attempt (the GPUs read, who holds each GPU's lock, the candidates ranked, the chosen ones
 * with their lock descriptors) and the lock steps on it. Choosing and reserving are race-free
 * between runs: candidates are tried in pick order (model/pick.h) with a non-blocking flock
 * (act/lock.h), and a GPU whose lock another run holds is skipped, so eight concurrent
 * `run --gpus auto:1` on four GPUs end with four distinct reservations.
 *
 * Nothing here prints: failures are negative errno-style codes with a message in struct
 * vg_err; cmd/gpusel.c reads the GPUs, resolves lists, waits and words (render/gpusel.h).
 *
 * Ownership: struct vg_gpusel owns the GPU list it read, the lock directory, the per-GPU
 * arrays and the lock descriptors; vg_gpusel_release() closes them (releasing the
 * reservations). The chosen ones' uuid fields are borrowed from gpus.
 */
#ifndef VG_ACT_GPUSEL_H
#define VG_ACT_GPUSEL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "act/lock.h"
#include "gpu/gpu.h"
#include "model/pick.h"
#include "util/err.h"

struct vg_gpusel_gpu {
    size_t gpu;       /* index into gpus.gpus */
    int mig;          /* MIG device under it, or -1 */
    const char *uuid; /* borrowed from gpus */
    int lock_fd;      /* -1 when not locked */
};

struct vg_gpusel {
    struct vg_gpu_list gpus;
    struct vg_lock_dir dir;
    bool dir_open;
    bool *reserved;              /* per GPU, as last seen */
    pid_t *holder;               /* per GPU: the reserving run's pid when known */
    struct vg_lock_who *who;     /* per GPU with a holder: whether that run is alive, and if
                                  * not, which processes of its job keep the reservation */
    struct vg_pick_cand *ranked; /* every GPU, eligible first (auto only) */
    size_t neligible;
    struct vg_gpusel_gpu *v; /* the chosen ones, in CUDA order */
    size_t n;
};

/* An empty selection: no GPUs, no directory, nothing locked. */
void vg_gpusel_init(struct vg_gpusel *s);
/* Forget the previous attempt (GPUs, holders, choices, locks), keeping the lock directory. */
void vg_gpusel_reset(struct vg_gpusel *s);
/* The per-GPU arrays for s->gpus as just read (no holder known yet). 0 or -ENOMEM. */
int vg_gpusel_alloc(struct vg_gpusel *s);
void vg_gpusel_release(struct vg_gpusel *s);
/* Give back every reservation taken in this attempt and forget the choices. */
void vg_gpusel_unlock(struct vg_gpusel *s);

/* Choose the lock directory (act/lock.h's environment) and open it, creating it when lock.
 * 0, or a negative errno with err set; -ENOENT without lock: there are no reservations (the
 * directory's path is still in s->dir.path). */
int vg_gpusel_open_dir(struct vg_gpusel *s, bool lock, struct vg_err *err);

/* The device a choice names: GPU gpu, or its MIG device mig (>= 0). */
const struct vg_gpu *vg_gpusel_dev(const struct vg_gpusel *s, size_t gpu, int mig);

/* Take the lock on one device into *fd: 0; -EBUSY when another run has it (for a whole GPU,
 * its holder is noted); -EINVAL when the device has no UUID a lock can be named by; another
 * negative errno from the lock. err is set on every failure but -EBUSY. */
int vg_gpusel_take(struct vg_gpusel *s, size_t gpu, int mig, int *fd, struct vg_err *err);

/* Choose want GPUs by c (model/pick.h), c->reserved pointing at s->reserved. With lock, try
 * the eligible ones in pick order and take the first want free locks; without, only look at
 * the locks and choose the first want eligible. 0 with s->n == want, or 0 with s->n == 0 when
 * there are not enough (s->ranked and s->neligible then say why, ranked again with the holders
 * learnt), or a negative errno from vg_gpusel_take() with err set. */
int vg_gpusel_choose(struct vg_gpusel *s, const struct vg_pick_criteria *c, unsigned want,
                     bool lock, struct vg_err *err);

#endif
