/*
 * The Prometheus text exposition of one collection (`vramguard serve`): per-GPU memory, per-
 * holder memory with bounded label cardinality, memory by reason, findings by rule, and the
 * state of the collection itself. Metric names and labels are an interface, documented in
 * docs/metrics.md; never rename one.
 *
 * Pure: everything comes from the arguments, nothing is read from the system, so the same
 * input always renders the same text (unit tests and fuzzing rely on it).
 *
 * Unknown is never 0: a value the driver or /proc could not give is an absent sample.
 *
 * Ownership: struct vg_collector_gpu_ids owns its strings (vg_metrics_gpu_ids_release()); the
 * renderer borrows everything and appends to the caller's buffer.
 */
#ifndef VG_RENDER_METRICS_H
#define VG_RENDER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/collector.h"
#include "model/snapshot.h"
#include "rules/rules.h"
#include "util/buf.h"

#define VG_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* How many holders get their own series (--per-process). */
enum vg_metrics_pp {
    VG_METRICS_PP_TOP,  /* the top_n holders of each GPU by memory; the rest in pid="other" */
    VG_METRICS_PP_ALL,  /* every holder */
    VG_METRICS_PP_NONE, /* no per-holder series */
};

#define VG_METRICS_TOP_DEFAULT 10

struct vg_metrics_opts {
    enum vg_metrics_pp per_process;
    size_t top_n;         /* for VG_METRICS_PP_TOP; at least 1 */
    uint64_t context_max; /* reason "context_only": a holding up to this size */
    const char *version;  /* vramguard_build_info{version} */
};

void vg_metrics_opts_init(struct vg_metrics_opts *o);

/* Parse a --per-process value: "top:N" (N 1..100000), "all" or "none". -EINVAL when it is
 * none of these; o is unchanged then. */
int vg_metrics_parse_pp(const char *s, struct vg_metrics_opts *o);

/* Render the exposition into out.
 *   snap: the collection's snapshot; NULL when not even /proc could be read. Its GPU series
 *         are rendered only when snap->driver_ok.
 *   fs:   the findings over snap (NULL: none).
 *   last_good: GPUs of the last successful collection, rendered as vramguard_gpu_info when
 *         snap has no driver view (may be NULL).
 * Returns 0, or the buffer's error (-ENOMEM, -E2BIG). */
int vg_metrics_render(const struct vg_snapshot *snap, const struct vg_findings *fs,
                      const struct vg_collector_gpu_ids *last_good,
                      const struct vg_collector_stats *st, const struct vg_metrics_opts *o,
                      struct vg_buf *out);

/* Append s (n bytes) escaped as the inside of a label value: backslash, double quote and
 * newline escaped as the format says; other control characters and bytes that are not valid
 * UTF-8 become U+FFFD, so the exposition is always valid whatever a process is called. */
int vg_metrics_escape(struct vg_buf *out, const char *s, size_t n);

#endif
