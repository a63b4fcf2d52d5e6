/*
 * Reserving GPUs (see gpusel.h): the state of one attempt, and the lock steps on it: looking
 * at a GPU's lock and who holds it, taking one, and taking the first free ones in pick order.
 */
#include "act/gpusel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vg_gpusel_init(struct vg_gpusel *s)
{
    memset(s, 0, sizeof(*s));
    s->dir.fd = -1;
    vg_gpu_list_init(&s->gpus);
}

void vg_gpusel_unlock(struct vg_gpusel *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].lock_fd >= 0)
            close(s->v[i].lock_fd);
        s->v[i].lock_fd = -1;
    }
    s->n = 0;
}

void vg_gpusel_reset(struct vg_gpusel *s)
{
    vg_gpusel_unlock(s);
    free(s->v);
    free(s->reserved);
    free(s->holder);
    free(s->who);
    free(s->ranked);
    s->v = NULL;
    s->reserved = NULL;
    s->holder = NULL;
    s->who = NULL;
    s->ranked = NULL;
    s->n = s->neligible = 0;
    vg_gpu_list_release(&s->gpus);
    vg_gpu_list_init(&s->gpus);
}

int vg_gpusel_alloc(struct vg_gpusel *s)
{
    size_t n = s->gpus.ngpus;
    size_t cap = n > VG_PICK_MAX_GPUS ? n : VG_PICK_MAX_GPUS;
    s->reserved = calloc(n, sizeof(*s->reserved));
    s->holder = calloc(n, sizeof(*s->holder));
    s->who = calloc(n, sizeof(*s->who));
    s->ranked = calloc(n, sizeof(*s->ranked));
    s->v = calloc(cap, sizeof(*s->v));
    if (!s->reserved || !s->holder || !s->who || !s->ranked || !s->v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        s->who[i].run_alive = -1;
    return 0;
}

void vg_gpusel_release(struct vg_gpusel *s)
{
    vg_gpusel_reset(s);
    vg_gpu_list_release(&s->gpus);
    if (s->dir_open || s->dir.path)
        vg_lock_dir_release(&s->dir);
    s->dir_open = false;
}

int vg_gpusel_open_dir(struct vg_gpusel *s, bool lock, struct vg_err *err)
{
    struct vg_lock_env env;
    vg_lock_env_get(&env);
    int rc = vg_lock_dir_choose(&env, &s->dir, err);
    if (rc == 0)
        rc = vg_lock_dir_open(&s->dir, lock, err);
    if (rc == 0)
        s->dir_open = true;
    return rc;
}

const struct vg_gpu *vg_gpusel_dev(const struct vg_gpusel *s, size_t gpu, int mig)
{
    const struct vg_gpu *g = &s->gpus.gpus[gpu];
    return mig >= 0 ? &g->mig[mig] : g;
}

/* Remember who holds a GPU's lock: the run that took it (/proc/locks), and whether it is still
 * there; a reservation outlives its run while the job it started lives (act/lock.h). */
static void vg_gpusel_note_holder(struct vg_gpusel *s, size_t gpu, const char *uuid, pid_t holder)
{
    s->reserved[gpu] = true;
    s->holder[gpu] = holder;
    if (holder > 0 && vg_lock_who(&s->dir, uuid, holder, &s->who[gpu], NULL) != 0)
        s->who[gpu].run_alive = -1;
}

/* Look at a GPU's lock without taking it. */
static void vg_gpusel_probe(struct vg_gpusel *s, size_t i)
{
    const struct vg_gpu *g = &s->gpus.gpus[i];
    if (!s->dir_open || !g->uuid || !vg_lock_name_ok(g->uuid))
        return;
    pid_t holder = 0;
    if (vg_lock_probe(&s->dir, g->uuid, &holder, NULL) == 1)
        vg_gpusel_note_holder(s, i, g->uuid, holder);
}

int vg_gpusel_take(struct vg_gpusel *s, size_t gpu, int mig, int *fd, struct vg_err *err)
{
    const struct vg_gpu *d = vg_gpusel_dev(s, gpu, mig);
    *fd = -1;
    if (!d->uuid || !vg_lock_name_ok(d->uuid))
        return vg_err_set(err, -EINVAL, "GPU %u has no usable UUID to reserve it by ('%s')",
                          s->gpus.gpus[gpu].index, d->uuid ? d->uuid : "unknown");
    int rc = vg_lock_acquire(&s->dir, d->uuid, fd, err);
    if (rc == -EBUSY && mig < 0) {
        pid_t holder = 0;
        vg_lock_probe(&s->dir, d->uuid, &holder, NULL);
        vg_gpusel_note_holder(s, gpu, d->uuid, holder);
    }
    return rc;
}

int vg_gpusel_choose(struct vg_gpusel *s, const struct vg_pick_criteria *c, unsigned want,
                     bool lock, struct vg_err *err)
{
    if (!lock)
        for (size_t i = 0; i < s->gpus.ngpus; i++)
            vg_gpusel_probe(s, i);
    s->neligible = vg_pick_rank(&s->gpus, c, s->ranked);
    if (!lock) {
        for (size_t k = 0; s->neligible >= want && k < want; k++) {
            size_t gpu = s->ranked[k].gpu;
            s->v[s->n++] = (struct vg_gpusel_gpu){gpu, -1, s->gpus.gpus[gpu].uuid, -1};
        }
        return 0;
    }
    /* Try the candidates in order; one another run holds is skipped. */
    for (size_t k = 0; k < s->neligible && s->n < want; k++) {
        int fd;
        size_t gpu = s->ranked[k].gpu;
        int rc = vg_gpusel_take(s, gpu, -1, &fd, err);
        if (rc == -EBUSY) {
            vg_err_clear(err);
            continue;
        }
        if (rc) {
            vg_gpusel_unlock(s);
            return rc;
        }
        s->v[s->n++] = (struct vg_gpusel_gpu){gpu, -1, s->gpus.gpus[gpu].uuid, fd};
    }
    if (s->n < want) {
        vg_gpusel_unlock(s);
        s->neligible = vg_pick_rank(&s->gpus, c, s->ranked); /* with what we learnt */
    }
    return 0;
}
