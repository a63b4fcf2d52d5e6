/*
 * `clean` output: the plan (what would be signalled and why, what is refused and why, the
 * memory at stake per GPU), and after --force what happened to each process, per GPU the
 * memory freed and still held, the findings left (doctor's words) and the reset step.
 * Text for people, and the versioned JSON document "vramguard.clean/1" (docs/json.md).
 *
 * Everything comes from the view; nothing here reads the system. The view borrows all it
 * points to.
 */
#ifndef VG_RENDER_CLEAN_H
#define VG_RENDER_CLEAN_H

#include <stdbool.h>
#include <stddef.h>

#include "act/kill.h"
#include "act/plan.h"
#include "act/reset.h"
#include "act/settle.h"
#include "model/snapshot.h"
#include "render/render.h"
#include "rules/rules.h"
#include "util/buf.h"

#define VG_JSON_SCHEMA_CLEAN "vramguard.clean/1"

struct vg_clean_view {
    const struct vg_snapshot *before; /* the snapshot the plan was made from */
    const struct vg_plan *plan;
    const struct vg_plan_opts *opts;
    const char *filters; /* the selecting options as given ("--gpu 0 --orphans"),
                          * for display; "" when none */
    bool force, reset;
    unsigned grace_ms;
    const struct vg_kill *kills;           /* plan->n entries, same order; NULL in a dry run */
    const struct vg_settle_result *settle; /* the stop's verdict per GPU (ref: the before
                                            * snapshot's index); NULL in a dry run */
    const struct vg_snapshot *after;       /* after --force; NULL in a dry run */
    const struct vg_findings *after_findings;
    const struct vg_reset *resets;
    size_t nresets;
};

int vg_render_clean_text(const struct vg_clean_view *v, const struct vg_render_opts *ro,
                         struct vg_buf *out);
int vg_render_clean_json(const struct vg_clean_view *v, struct vg_buf *out);

/* The preconditions of `nvidia-smi --gpu-reset`, one per line, shared by text and JSON. */
extern const char *const vg_clean_reset_preconditions[];

/* Why entry e is refused (r), one sentence as clean's plan words it; k: the signalling, when
 * the refusal came at signal time (NULL otherwise). Shared with top's plan view. */
void vg_render_clean_refusal(struct vg_buf *o, const struct vg_plan_entry *e,
                             enum vg_kill_refusal r, const struct vg_kill *k);

#endif
