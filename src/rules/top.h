/*
 * What one frame of `vramguard top` shows, as data: per GPU its memory split by reason (the
 * classes `serve` exports, rules/reason.h, plus the driver's reservation), utilisation, a short
 * history of used memory and its findings worst first; per holder process one row with its
 * GPU and host figures and the worst finding that names it. Sorting and filtering the rows and
 * the tree order are presentation: render/top_list.h.
 *
 * Lives in rules/ because a frame is built from the rules' output (findings, memory by reason);
 * it reads nothing from the system.
 *
 * Temperature, power and fan are read by the NVML client only when asked (the sampler's
 * `sensors`, which top sets); the frame's GPUs borrow them with the rest of struct vg_gpu.
 * Host RSS comes from the rss field of /proc/PID/stat, which the sampler reads for every
 * holder anyway (the figure statm's second field gives), so it costs no extra read.
 *
 * Ownership: vg_top_frame_build() takes the snapshot and the findings over (the frame frees
 * them in vg_top_frame_free()); rows and GPUs borrow strings from them. A history
 * (struct vg_top_history) is the caller's, kept between frames (vg_top_history_release()).
 */
#ifndef VG_RULES_TOP_H
#define VG_RULES_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "rules/reason.h"
#include "rules/rules.h"

/* Samples of used memory kept per GPU for the sparkline. */
#define VG_TOP_HIST 64
/* A history sample whose figure was unknown. */
#define VG_TOP_HIST_UNKNOWN 255u

/* Used memory per GPU (by UUID) over the last VG_TOP_HIST frames, in percent of total. */
struct vg_top_hist_gpu {
    char *uuid;
    unsigned char pct[VG_TOP_HIST]; /* oldest first */
    size_t n;
};
struct vg_top_history {
    struct vg_top_hist_gpu *g;
    size_t n, cap;
};
void vg_top_history_release(struct vg_top_history *h);

struct vg_top_gpu {
    size_t gi;              /* index into snap->gpus.gpus */
    const struct vg_gpu *g; /* borrowed */
    bool reasons_known;     /* memory by reason could be told (driver view, lists read) */
    uint64_t bytes[VG_REASON_COUNT];
    bool reserved_known; /* the driver's reservation, apart from used (memory v2) */
    uint64_t reserved;
    unsigned char hist[VG_TOP_HIST]; /* percent used, oldest first (VG_TOP_HIST_UNKNOWN) */
    size_t nhist;
    size_t *findings; /* indices into fs.v, worst first */
    size_t nfindings, findings_cap;
};

struct vg_top_row {
    pid_t pid;                  /* first: searched with vg_array_cmp_pid */
    const struct vg_proc *proc; /* NULL: only the driver sees it */
    const char *user;           /* NULL when unknown */
    size_t gpus[8];             /* snapshot GPU indices it holds, ascending (first 8) */
    size_t ngpus;
    size_t ngpus_more; /* beyond the 8 kept */
    bool mem_known;    /* the driver gave a figure for some holding */
    uint64_t mem;
    bool util_known; /* per-process SM utilisation: the highest over its GPUs */
    unsigned util;
    bool cpu_known; /* CPU % over the last sample interval, in tenths */
    unsigned cpu_tenths;
    bool age_known;
    uint64_t age_ms;
    bool rss_known; /* host resident set size, bytes */
    uint64_t rss;
    char state;            /* '?' unknown */
    unsigned seen;         /* VG_SEEN_* over its holdings */
    const char *container; /* pod UID, else container id; NULL: none known */
    const char *cvd;       /* CUDA_VISIBLE_DEVICES; NULL unset or unknown */
    const char *command;   /* command line, else comm; NULL unknown */
    enum vg_reason reason; /* the class of its largest holding (VG_REASON_COUNT: none) */
    bool has_finding;
    size_t finding; /* index into fs.v of the worst finding naming it */
    enum vg_severity severity;
    pid_t ppid; /* 0 unknown */
};

struct vg_top_frame {
    struct vg_snapshot *snap; /* owned */
    struct vg_findings fs;    /* owned */
    bool hung;                /* the sampler found the driver hung */
    struct vg_top_gpu *gpus;  /* one per driver GPU (none without a driver view) */
    size_t ngpus;
    struct vg_top_row *rows; /* by pid */
    size_t nrows;
};

struct vg_top_build_opts {
    uint64_t context_max;  /* for memory by reason; 0: VG_RULE_CONTEXT_MAX_DEFAULT */
    uint64_t now_ticks;    /* time since boot in clock ticks (0: ages unknown) */
    unsigned long clk_tck; /* sysconf(_SC_CLK_TCK) */
    uint64_t page_size;    /* sysconf(_SC_PAGESIZE), for RSS (0: RSS unknown) */
};

/* Build a frame from snap and fs (both taken over, also on failure: *out is then NULL and
 * they are freed), and append this frame's used memory to hist (which may be NULL).
 * 0 or -ENOMEM. */
int vg_top_frame_build(struct vg_snapshot *snap, struct vg_findings *fs, bool hung,
                       const struct vg_top_build_opts *o, struct vg_top_history *hist,
                       struct vg_top_frame **out);
void vg_top_frame_free(struct vg_top_frame *f);

/* A sample diagnosed as top does it (the new suspects' activity measured, the rules run without
 * the shell check) and made into a frame as vg_top_frame_build(): snap taken over, also on
 * failure. 0, or a negative errno with err set (-ENOMEM may leave it unset). */
int vg_top_frame_diagnose(struct vg_snapshot *snap, bool hung, const struct vg_top_build_opts *o,
                          struct vg_top_history *hist, struct vg_top_frame **out,
                          struct vg_err *err);

/* The row of pid, or NULL. */
const struct vg_top_row *vg_top_frame_row(const struct vg_top_frame *f, pid_t pid);

#endif
