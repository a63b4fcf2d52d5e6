/*
 * `check` output: a Nagios-style report of one sample's findings and expectation alerts. The
 * text starts with the one summary line monitoring systems show ("VRAMGUARD CRITICAL - ...",
 * with performance data after '|'), then one line per alert and finding, worst first. JSON is
 * a vramguard.check/1 document (docs/json.md). Renderers only: the state is computed by
 * rules/health.h.
 */
#ifndef VG_RENDER_CHECK_H
#define VG_RENDER_CHECK_H

#include "model/snapshot.h"
#include "rules/health.h"
#include "rules/rules.h"
#include "util/buf.h"

#define VG_JSON_SCHEMA_CHECK "vramguard.check/1"

/* "OK", "WARNING", "CRITICAL", "UNKNOWN": the word of the summary line. */
const char *vg_render_check_state_name(enum vg_health_state s);

/* fs: the rules' diagnoses and the expectations' alerts, as vg_health_judge gives them; the
 * output lists them apart (alert lines, check's "alerts" array) by their kind. */
int vg_render_check_text(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         enum vg_health_state state, bool color, struct vg_buf *out);
int vg_render_check_json(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         enum vg_health_state state, struct vg_buf *out);

#endif
