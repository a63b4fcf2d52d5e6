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

#include "act/bgstop.h"
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

/* Why a holder the stop meant to end still holds the GPU, as a clause after its PID (", which
 * outlived SIGKILL", ", which was not signalled: its PID now names another process"): what
 * happened to it, never a signal it did not get. */
void vg_render_settle_survivor(struct vg_buf *o, const struct vg_settle_holder *h);

/* What a process claims to be as infrastructure and the facts (act/infra.h), as JSON under key:
 * {"claims": "Xorg", "verdict": "proven"|"unproven"|"impostor", "facts": [...]}, or null when
 * it claims nothing. j is struct vg_json (render/json.h). */
struct vg_json;
void vg_render_json_infra(struct vg_json *j, const char *key, const struct vg_infra *inf);

/* Why a process named like infrastructure is not taken for it, or is only unproven, in a few
 * words after "named like Xorg, but ": "it runs /tmp/x", "its executable was deleted or
 * replaced since it started"...; nothing for NONE and PROVEN. exe: the path (NULL: unknown). */
void vg_render_infra_why(struct vg_buf *o, const struct vg_infra *inf, const char *exe);

/* A whole stop on one line (top's key line): "PID 42 <outcome>; ...; GPU 0<verdict>", the
 * signalled targets (made from plan, vg_settle_targets_from_plan()) and every GPU of res. */
void vg_render_settle_line(struct vg_buf *o, const struct vg_plan *plan,
                           const struct vg_settle_target *targets, size_t ntargets,
                           const struct vg_settle_result *res, unsigned grace_ms);

/* What a finished background stop (act/bgstop.h, top's k and K) did: its error, or
 * vg_render_settle_line() of its plan, targets and result. */
void vg_render_settle_bgstop(struct vg_buf *o, const struct vg_bgstop_result *r, unsigned grace_ms);

#endif
