/*
 * The verdict on one sample, shared by `check` and `watch` so that both judge a host the same
 * way: the rules' findings and the expectations' alerts come from one call (vg_health_judge), in
 * one list,
 * and `check`'s Nagios state is computed from them here, not by a renderer.
 *
 * The state: CRITICAL for a critical finding or alert, or a GPU lost or hung; otherwise
 * UNKNOWN when the driver's view is missing or some expectation could not be checked;
 * otherwise WARNING for a warning, else OK. The values are the exit statuses.
 */
#ifndef VG_RULES_HEALTH_H
#define VG_RULES_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "model/snapshot.h"
#include "rules/expect.h"
#include "rules/rules.h"
#include "util/err.h"

/* Nagios states, in exit-status order. */
enum vg_health_state {
    VG_HEALTH_OK,
    VG_HEALTH_WARNING,
    VG_HEALTH_CRITICAL,
    VG_HEALTH_UNKNOWN,
};

/* Run the rules (ro) and check the expectations (set, may be NULL or empty; threshold in
 * bytes) on snap, appending the diagnoses then the alerts to fs. 0, or a negative errno with
 * err set. */
int vg_health_judge(const struct vg_snapshot *snap, const struct vg_rule_opts *ro,
                    const struct vg_expect_set *set, uint64_t threshold, struct vg_findings *fs,
                    struct vg_err *err);

/* What `watch` judges each view by: expectations, threshold and the idle-holder delay. */
struct vg_health_watch {
    const struct vg_expect_set *expect; /* may be NULL */
    uint64_t threshold;                 /* bytes, for the expectations */
    uint64_t idle_after_ms;             /* idle-holder after this long (0: the rules' default) */
};

/* The watch engine's judge (model/watch.h's vg_watch_judge_fn; ctx: a struct
 * vg_health_watch): vg_health_judge with the rules' defaults, the given idle history, and
 * without the shell's environment, which says nothing about a monitored host. */
int vg_health_watch_judge(void *ctx, const struct vg_snapshot *snap,
                          const struct vg_idle_info *idle, size_t nidle, struct vg_findings *fs,
                          struct vg_err *err);

/* GPUs the driver answered GPU_IS_LOST for (or gave no handle). */
size_t vg_health_lost(const struct vg_snapshot *snap);
/* GPUs a driver call for which did not return in time (vg_gpu.hung). */
size_t vg_health_hung(const struct vg_snapshot *snap);

/* Whether the driver's view is there: it answered, and for some GPU (or there are no GPUs). */
bool vg_health_driver_view(const struct vg_snapshot *snap);

/* The state of a sample from its findings, alerts among them (see above). */
enum vg_health_state vg_health_state(const struct vg_snapshot *snap, const struct vg_findings *fs);

#endif
