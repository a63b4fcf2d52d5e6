/*
 * `check` output: a Nagios-style report of one sample's findings and expectation alerts. The
 * text starts with the one summary line monitoring systems show ("VRAMGUARD CRITICAL - ...",
 * with performance data after '|'), then one line per alert and finding, worst first. JSON is
 * a vramguard.check/1 document (docs/json.md). Renderers only; the command decides the status.
 */
#ifndef VG_WATCH_CHECK_H
#define VG_WATCH_CHECK_H

#include "model/snapshot.h"
#include "rules/rules.h"
#include "util/buf.h"
#include "watch/expect.h"

#define VG_JSON_SCHEMA_CHECK "vramguard.check/1"

/* Nagios states, in exit-status order. */
enum vg_check_state { VG_CHECK_OK, VG_CHECK_WARNING, VG_CHECK_CRITICAL, VG_CHECK_UNKNOWN };

const char *vg_check_state_name(enum vg_check_state s); /* "OK", "WARNING", ... */
/* GPUs the driver answered GPU_IS_LOST for (or gave no handle): critical for `check`. */
size_t vg_check_lost(const struct vg_snapshot *snap);
/* GPUs a driver call for which did not return in time (vg_gpu.hung): critical too. */
size_t vg_check_hung(const struct vg_snapshot *snap);

int vg_check_render_text(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         const struct vg_alerts *as, enum vg_check_state state, bool color,
                         struct vg_buf *out);
int vg_check_render_json(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         const struct vg_alerts *as, enum vg_check_state state,
                         struct vg_buf *out);

#endif
