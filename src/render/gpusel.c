/*
 * The words of GPU selection (see gpusel.h): names, holders, and the reasons a pick or run
 * could not have the GPUs it asked for, from act/gpusel.h's state and model/pick.h's verdicts.
 */
#include "render/gpusel.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/parse.h"

void vg_render_gpusel_dev(const struct vg_gpusel *s, size_t gpu, int mig, struct vg_buf *b)
{
    const struct vg_gpu *g = &s->gpus.gpus[gpu], *d = vg_gpusel_dev(s, gpu, mig);
    if (mig >= 0)
        vg_buf_printf(b, "MIG %u/%d", g->index, mig);
    else
        vg_buf_printf(b, "GPU %u", g->index);
    vg_buf_printf(b, " (%s%s%s)", d->name ? d->name : "", d->name && d->uuid ? ", " : "",
                  d->uuid ? d->uuid : "");
}

void vg_render_gpusel_name(const struct vg_gpusel *s, size_t i, struct vg_buf *b)
{
    vg_render_gpusel_dev(s, s->v[i].gpu, s->v[i].mig, b);
}

void vg_render_gpusel_holder(const struct vg_gpusel *s, size_t gpu, struct vg_buf *b)
{
    if (!s->holder || s->holder[gpu] <= 0)
        return;
    const struct vg_lock_who *w = &s->who[gpu];
    if (w->run_alive != 0) {
        vg_buf_printf(b, " (pid %ld)", (long)s->holder[gpu]);
        return;
    }
    vg_buf_printf(b, " (pid %ld, gone; its job still holds it", (long)s->holder[gpu]);
    for (size_t k = 0; k < w->nholders; k++)
        vg_buf_printf(b, "%s %ld (%s)", k ? "," : ":", (long)w->holders[k].pid,
                      w->holders[k].comm[0] ? w->holders[k].comm : "?");
    if (w->more)
        vg_buf_printf(b, " and %zu more", w->more);
    if (w->nholders == 0 && w->unreadable)
        vg_buf_adds(b, ", in processes we may not look at");
    vg_buf_adds(b, ")");
}

void vg_render_gpusel_short(const struct vg_gpusel *s, const struct vg_pick_criteria *c,
                            unsigned want, struct vg_buf *b)
{
    size_t have = s->neligible < want ? s->neligible : want;
    vg_buf_printf(b, "asked for %u GPU%s, %zu free enough (", want, want == 1 ? "" : "s", have);
    for (size_t k = s->neligible; k < s->gpus.ngpus; k++) {
        const struct vg_pick_cand *cand = &s->ranked[k];
        vg_buf_printf(b, "%sGPU %u: ", k > s->neligible ? "; " : "", s->gpus.gpus[cand->gpu].index);
        vg_pick_describe(&s->gpus, cand, c, b);
        if (cand->reason == VG_PICK_RESERVED)
            vg_render_gpusel_holder(s, cand->gpu, b);
    }
    vg_buf_adds(b, ")");
}

void vg_render_gpusel_unfit(const struct vg_gpusel *s, const struct vg_pick_cand *cand,
                            const struct vg_pick_criteria *c, struct vg_buf *b)
{
    vg_render_gpusel_dev(s, cand->gpu, -1, b);
    vg_buf_adds(b, ": ");
    vg_pick_describe(&s->gpus, cand, c, b);
}

void vg_render_gpusel_reserved(const struct vg_gpusel *s, size_t gpu, int mig, struct vg_buf *b)
{
    vg_render_gpusel_dev(s, gpu, mig, b);
    vg_buf_adds(b, " is reserved by another vramguard run");
    if (mig < 0)
        vg_render_gpusel_holder(s, gpu, b);
}

void vg_render_gpusel_ranked(const struct vg_gpusel *s, size_t k, const struct vg_pick_criteria *c,
                             struct vg_buf *b)
{
    const struct vg_pick_cand *cand = &s->ranked[k];
    vg_render_gpusel_unfit(s, cand, c, b);
    if (cand->reason == VG_PICK_RESERVED)
        vg_render_gpusel_holder(s, cand->gpu, b);
    for (size_t j = 0; j < s->n; j++)
        if (s->v[j].gpu == cand->gpu)
            vg_buf_adds(b, ": chosen");
}

void vg_render_duration_ms(uint64_t ms, char *out, size_t n)
{
    unsigned long long v = ms;
    if (v && v % VG_HOUR_MS == 0)
        snprintf(out, n, "%lluh", v / VG_HOUR_MS);
    else if (v && v % 60000 == 0)
        snprintf(out, n, "%llum", v / 60000);
    else if (v % 1000 == 0)
        snprintf(out, n, "%llus", v / 1000);
    else
        snprintf(out, n, "%llums", v);
}
