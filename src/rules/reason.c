/*
 * Memory by reason (see reason.h): which findings name a holder decides its reason. Pure:
 * snapshot and findings in, figures out.
 */
#include "rules/reason.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/sat.h"

static const char *const vg_reason_names[VG_REASON_COUNT] = {
    "outside_visible", "orphan",       "zombie",   "foreign_pid",
    "unattributed",    "context_only", "expected",
};

const char *vg_reason_name(enum vg_reason r)
{
    return (unsigned)r < VG_REASON_COUNT ? vg_reason_names[r] : "unknown";
}

bool vg_reason_holder_known(const struct vg_reason_holder *h)
{
    return h->nvml && !h->nvml_unknown;
}

/* Is pid (on gpu, unless gpu is VG_SNAP_NO_GPU) named by a finding of one of the rules, at
 * least as sure as conf? */
static bool vg_named_conf(const struct vg_findings *fs, const char *const *rules, uint32_t pid,
                          size_t gpu, enum vg_confidence conf)
{
    if (!fs)
        return false;
    for (size_t i = 0; i < fs->n; i++) {
        const struct vg_finding *f = &fs->v[i];
        if (f->confidence < conf)
            continue;
        bool rule = false;
        for (size_t r = 0; rules[r] && !rule; r++)
            rule = strcmp(f->rule, rules[r]) == 0;
        /* the holder's uint32_t PID and the finding's pid_t agree bit for bit */
        if (rule && vg_finding_names_pid(f, (pid_t)pid) &&
            (gpu == VG_SNAP_NO_GPU || vg_finding_names_gpu(f, gpu)))
            return true;
    }
    return false;
}

static bool vg_named(const struct vg_findings *fs, const char *const *rules, uint32_t pid,
                     size_t gpu)
{
    return vg_named_conf(fs, rules, pid, gpu, VG_CONF_LOW);
}

static enum vg_reason vg_reason_of(const struct vg_reason_holder *h, size_t gpu,
                                   const struct vg_findings *fs, uint64_t context_max)
{
    static const char *const zombie[] = {"zombie-holder", NULL};
    static const char *const orphan[] = {"orphan-holder", NULL};
    /* a stale entry's memory belongs, like a foreign PID's, to no process this /proc shows */
    static const char *const foreign[] = {"foreign-pid", "stale-pid", NULL};
    static const char *const outside[] = {"outside-visible", NULL};
    static const char *const context[] = {"ddp-gpu0", "stray-contexts", "nccl-all-gpus", NULL};
    if (h->bogus)
        return VG_REASON_UNATTRIBUTED;
    if (vg_named(fs, zombie, h->pid, VG_SNAP_NO_GPU))
        return VG_REASON_ZOMBIE;
    /* only sure leftovers: one that may be the job itself stays its owner's */
    if (vg_named_conf(fs, orphan, h->pid, VG_SNAP_NO_GPU, VG_CONF_HIGH))
        return VG_REASON_ORPHAN;
    if (vg_named(fs, foreign, h->pid, VG_SNAP_NO_GPU))
        return VG_REASON_FOREIGN;
    if (vg_named(fs, outside, h->pid, gpu))
        return VG_REASON_OUTSIDE;
    if (vg_reason_holder_known(h) && h->bytes <= context_max && vg_named(fs, context, h->pid, gpu))
        return VG_REASON_CONTEXT;
    return VG_REASON_EXPECTED;
}

static int vg_reason_cmp_pid(const void *a, const void *b)
{
    const struct vg_reason_holder *x = a, *y = b;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int vg_reason_gpu_build(const struct vg_snapshot *snap, size_t gi, const struct vg_findings *fs,
                        uint64_t context_max, struct vg_reason_gpu *mg)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    const struct vg_snap_gpu *sg = &snap->per_gpu[gi];
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    memset(mg, 0, sizeof(*mg));
    if (count) {
        mg->h = calloc(count, sizeof(*mg->h));
        if (!mg->h)
            return -ENOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        const struct vg_holding *hd = &snap->holdings[first + i];
        struct vg_reason_holder *h = &mg->h[i];
        h->pid = (uint32_t)hd->pid;
        h->bogus = hd->bogus_pid;
        h->nvml = (hd->seen & VG_SEEN_NVML) != 0;
        h->nvml_unknown = h->nvml && !hd->used_known;
        h->any_known = hd->used_known;
        h->bytes = hd->used_known ? hd->used_bytes : 0;
        h->seen = hd->seen;
        h->proc = hd->proc;
    }
    /* A process on several MIG devices of one GPU is one holder of that GPU. */
    if (count)
        qsort(mg->h, count, sizeof(*mg->h), vg_reason_cmp_pid);
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        if (n && mg->h[n - 1].pid == mg->h[i].pid) {
            struct vg_reason_holder *d = &mg->h[n - 1];
            d->nvml |= mg->h[i].nvml;
            d->nvml_unknown |= mg->h[i].nvml_unknown;
            d->any_known |= mg->h[i].any_known;
            d->bytes = vg_sat_add(d->bytes, mg->h[i].bytes);
            d->seen |= mg->h[i].seen;
            if (!d->proc)
                d->proc = mg->h[i].proc;
            continue;
        }
        mg->h[n++] = mg->h[i];
    }
    mg->n = n;
    mg->known = (g->known & VG_GPU_K_PROCS) != 0;
    /* the driver's figures are not trusted to be sane: sums saturate, never wrap */
    for (size_t i = 0; i < n; i++) {
        mg->h[i].reason = vg_reason_of(&mg->h[i], gi, fs, context_max);
        uint64_t *r = &mg->bytes[mg->h[i].reason];
        *r = vg_sat_add(*r, mg->h[i].bytes);
    }
    mg->unattributed_known = mg->known && sg->unexplained_known;
    if (mg->unattributed_known)
        mg->bytes[VG_REASON_UNATTRIBUTED] =
            vg_sat_add(mg->bytes[VG_REASON_UNATTRIBUTED], sg->unexplained_bytes);
    return 0;
}

void vg_reason_gpu_release(struct vg_reason_gpu *g)
{
    free(g->h);
    g->h = NULL;
    g->n = 0;
}

uint64_t vg_reason_gpu_leftover(const struct vg_reason_gpu *g, bool reserved_in_used)
{
    uint64_t left = vg_sat_add(g->bytes[VG_REASON_ORPHAN], g->bytes[VG_REASON_ZOMBIE]);
    if (!g->unattributed_known)
        return left;
    uint64_t un = g->bytes[VG_REASON_UNATTRIBUTED];
    if (reserved_in_used)
        un = un > VG_REASON_V1_RESERVED ? un - VG_REASON_V1_RESERVED : 0;
    return vg_sat_add(left, un);
}

bool vg_reason_gpu_dirty(const struct vg_reason_gpu *g, bool reserved_in_used, uint64_t tolerance)
{
    return g->known && vg_reason_gpu_leftover(g, reserved_in_used) > tolerance;
}
