/*
 * The verdict on one sample (see health.h): findings and alerts through one path, and the
 * Nagios state computed from them.
 */
#include "rules/health.h"

int vg_health_judge(const struct vg_snapshot *snap, const struct vg_rule_opts *ro,
                    const struct vg_expect_set *set, uint64_t threshold, struct vg_findings *fs,
                    struct vg_err *err)
{
    int rc = vg_rules_run(snap, ro, fs, err);
    if (rc < 0)
        return rc;
    if (!set)
        return 0;
    return vg_expect_check(set, snap, threshold, fs, err);
}

size_t vg_health_lost(const struct vg_snapshot *snap)
{
    size_t n = 0;
    for (size_t i = 0; snap->driver_ok && i < snap->gpus.ngpus; i++)
        n += snap->gpus.gpus[i].lost;
    return n;
}

size_t vg_health_hung(const struct vg_snapshot *snap)
{
    size_t n = 0;
    for (size_t i = 0; snap->driver_ok && i < snap->gpus.ngpus; i++)
        n += snap->gpus.gpus[i].hung;
    return n;
}

bool vg_health_driver_view(const struct vg_snapshot *snap)
{
    if (!snap->driver_ok)
        return false;
    for (size_t i = 0; i < snap->gpus.ngpus; i++)
        if (!snap->gpus.gpus[i].lost && !snap->gpus.gpus[i].hung)
            return true;
    return snap->gpus.ngpus == 0;
}

enum vg_health_state vg_health_state(const struct vg_snapshot *snap, const struct vg_findings *fs)
{
    int worst = vg_findings_max_severity(fs);
    if (worst == VG_SEV_CRITICAL || vg_health_lost(snap) || vg_health_hung(snap))
        return VG_HEALTH_CRITICAL;
    if (!vg_health_driver_view(snap) || fs->unchecked)
        return VG_HEALTH_UNKNOWN;
    return worst == VG_SEV_WARNING ? VG_HEALTH_WARNING : VG_HEALTH_OK;
}

int vg_health_watch_judge(void *ctx, const struct vg_snapshot *snap,
                          const struct vg_idle_info *idle, size_t nidle, struct vg_findings *fs,
                          struct vg_err *err)
{
    const struct vg_health_watch *w = ctx;
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    ro.check_shell = false; /* the monitor's own environment says nothing about the host */
    if (w->idle_after_ms)
        ro.idle_min_ms = w->idle_after_ms;
    ro.idle = idle;
    ro.nidle = nidle;
    return vg_health_judge(snap, &ro, w->expect, w->threshold, fs, err);
}
