/*
 * The words of a stop (act/settle.h), once, for every command that stops processes: what
 * became of one process (its kill outcome, or why it was not signalled) and what one GPU ended
 * as (free, freed, held by another, not released, stuck, unexplained, wedged, and whether only
 * a reset frees it). `clean`, `top`, `run` and the hand-off's details say these sentences; the
 * hand-off's reason line keeps its own stable form (render/handoff.h). Nothing here reads the
 * system; nothing is owned.
 */
#ifndef VG_RENDER_SETTLE_H
#define VG_RENDER_SETTLE_H

#include "act/kill.h"
#include "act/plan.h"
#include "act/settle.h"
#include "util/buf.h"

/* What became of the process of plan entry e: "exited after SIGTERM (0.2s)", "still running
 * 10.0s after SIGTERM: killed with SIGKILL", "not signalled: ...". grace_ms: the grace given. */
void vg_render_settle_outcome(struct vg_buf *o, const struct vg_plan_entry *e,
                              const struct vg_kill *k, unsigned grace_ms);

/* What GPU g ended as, one sentence after "GPU N": ": freed 4 GiB, the memory came back". */
void vg_render_settle_gpu(struct vg_buf *o, const struct vg_settle_gpu *g);

/* A whole stop on one line (top's key line): "PID 42 <outcome>; ...; GPU 0<verdict>", the
 * signalled targets (made from plan, vg_settle_targets_from_plan()) and every GPU of res. */
void vg_render_settle_line(struct vg_buf *o, const struct vg_plan *plan,
                           const struct vg_settle_target *targets, size_t ntargets,
                           const struct vg_settle_result *res, unsigned grace_ms);

#endif
