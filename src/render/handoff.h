/*
 * `handoff` output: the one-line reason (what a site passes to `scontrol update ...
 * state=drain reason=...`), the per-GPU details for people, and the versioned JSON document
 * "vramguard.handoff/1" (docs/json.md). The reason line and the JSON's reasons keep their
 * stable form ("GPU 2 held by pid 9223 (root, python), not job 42, 3 GiB"); the details say a
 * prolog's or epilog's GPU in render/settle.h's sentences, as clean, run and top do. Nothing
 * here reads the system: everything comes from the view, which borrows all it points to.
 */
#ifndef VG_RENDER_HANDOFF_H
#define VG_RENDER_HANDOFF_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "act/handoff.h"
#include "util/buf.h"

#define VG_JSON_SCHEMA_HANDOFF "vramguard.handoff/1"

struct vg_handoff_view {
    const struct vg_handoff_result *res;
    enum vg_handoff_mode mode;
    const char *job_id; /* NULL: none */
    bool uid_known;
    uid_t uid;
    const char *gpus_from; /* where the GPU list came from: "--gpus", "SLURM_JOB_GPUS", ... */
    uint64_t timeout_ms, grace_ms, tolerance;
    struct timespec when;
    int exit_status;
    /* --drain */
    bool drain;              /* asked for */
    bool drain_ran;          /* the command was started */
    const char *drain_cmd;   /* as run, for the record; NULL when not run */
    int drain_status;        /* its exit status; -1 when it did not exit normally */
    const char *drain_error; /* why it could not run; NULL */
};

/* "prolog", "epilog" */
const char *vg_render_handoff_mode(enum vg_handoff_mode m);

/* The reason line, without a newline: "vramguard: STATE: what, where, who", untrusted text
 * escaped, so it is always one line. */
int vg_render_handoff_reason(const struct vg_handoff_view *v, struct vg_buf *out);
/* Per GPU: its state and why, memory against the baseline, each holder and what was done. */
int vg_render_handoff_text(const struct vg_handoff_view *v, struct vg_buf *out);
int vg_render_handoff_json(const struct vg_handoff_view *v, struct vg_buf *out);

#endif
