/*
 * The watch engine: turns each sample (a snapshot) into a *view* of what matters to `watch`
 * (GPUs, holders, findings, alerts, the driver's state) and the *events* that happened since
 * the previous view. Pure: it reads nothing but its arguments (the one question it must ask the
 * system, "does this process still exist?", goes through a callback), so it is unit-tested on
 * hand-made snapshots.
 *
 * Identities, so that an event is reported once per change:
 *  - a GPU by UUID (index when the UUID is unknown);
 *  - a holder by (GPU, MIG device, PID, start time): a reused PID is another holder;
 *  - a finding by (rule, GPUs, PIDs): its title may change (memory grows) without an event;
 *  - an alert (a finding of kind VG_FINDING_ALERT) by (rule, GPU, MIG device, PID, start time).
 * The first view reports what is there as `*-present` events (alerts as `alert`, since they
 * need action whenever they are first seen). A holder's memory is reported when it moved by
 * more than the threshold from the figure last reported, so slow growth is reported too.
 *
 * When the driver's view goes missing (hung or failing) after it was seen, the view is
 * *frozen*: GPUs, findings and alerts are carried over unchanged (nothing is said to close
 * that merely cannot be seen), holders seen through device nodes are still followed (by minor
 * number, against the last GPUs known), and a carried holder whose process has exited leaves.
 * Everything is compared afresh when the driver answers again. One GPU whose driver calls hang
 * (vg_gpu.hung) is frozen the same way on its own: `gpu-hung`, then its holders, findings and
 * alerts held as last seen until it answers (`gpu-back`), while the other GPUs go on as usual.
 *
 * idle-holder: the engine keeps, per holder, since when it has held memory with zero
 * utilisation (per-process SM utilisation from the driver; when the driver has none, the
 * GPU's own utilisation being 0) and hands that to the rules.
 *
 * Events are data: what happened (type), to what (GPU, PID, rule, alert) and the figures; their
 * words are render/event.h's (vg_render_event_message), so the engine writes no English. The
 * texts an event carries are the rules' own: a finding's title, an alert's message.
 *
 * Ownership: views are created by vg_watch_step() and freed with vg_watch_view_free(); they do
 * not point into the snapshot. struct vg_event_list owns its events (vg_event_list_release).
 */
#ifndef VG_MODEL_WATCH_H
#define VG_MODEL_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "model/verdict.h"
#include "util/err.h"

enum vg_event_type {
    VG_EV_DRIVER_HUNG,
    VG_EV_DRIVER_ERROR,
    VG_EV_DRIVER_RECOVERED,
    VG_EV_GPU_PRESENT,
    VG_EV_GPU_APPEARED,
    VG_EV_GPU_LOST,
    VG_EV_GPU_BACK,
    VG_EV_GPU_HUNG,
    VG_EV_HOLDER_PRESENT,
    VG_EV_HOLDER_APPEARED,
    VG_EV_HOLDER_LEFT,
    VG_EV_HOLDER_MEMORY,
    VG_EV_FINDING_PRESENT,
    VG_EV_FINDING_OPENED,
    VG_EV_FINDING_CLOSED,
    VG_EV_ALERT,
    VG_EV_ALERT_CLEARED,
};

/* "holder-appeared", ...: the name in text and JSON output and in $VRAMGUARD_EVENT. */
const char *vg_event_name(enum vg_event_type t);

struct vg_event {
    enum vg_event_type type;
    enum vg_severity severity;
    /* what it is about; unknown fields are NULL, false or empty */
    bool gpu_known;
    unsigned gpu; /* NVML index (the first, for findings) */
    char *gpu_uuid;
    int mig;        /* MIG device, or -1 */
    unsigned *gpus; /* every GPU concerned (findings); NULL when none */
    size_t ngpus;
    bool pid_known;
    pid_t pid; /* the first, for findings */
    pid_t *pids;
    size_t npids;
    char *user, *command;
    bool mem_known;
    uint64_t mem; /* holder memory, alert memory, GPU used memory, finding bytes */
    bool prev_known;
    uint64_t prev;      /* holder-memory: the figure reported before */
    const char *rule;   /* finding events: the rule id (static) */
    const char *alert;  /* alert events: the alert's rule id (static) */
    char *expect;       /* alert events: the expectation */
    char *driver_error; /* driver events */
    /* what only the words of an event need */
    char *gpu_name;   /* GPU events; NULL when unknown */
    uint64_t total;   /* GPU events: the GPU's total memory, when mem_known */
    bool unlisted;    /* gpu-lost: the driver no longer lists it (not "GPU is lost") */
    size_t listed;    /* driver-recovered: GPUs the driver lists */
    bool frozen;      /* driver-hung, driver-error: the view is held as it was */
    bool minor_known; /* holder events: the device node, when the GPU is unknown */
    unsigned minor;
    bool node_only; /* holder events: seen through the device node only */
    bool in_proc;   /* holder events: the process is in this /proc */
    bool stale;     /* holder events: the driver's entry outlived its process */
    char *text;     /* finding events: the title; alert events: the message */
};

struct vg_event_list {
    struct vg_event *v;
    size_t n, cap;
};

void vg_event_list_init(struct vg_event_list *e);
void vg_event_list_release(struct vg_event_list *e);

struct vg_watch_view;

/* The judgement of one view: the findings for snap, diagnoses and alerts (and fs->unchecked),
 * given the idle history (each holding with zero utilisation and for how long). The engine
 * runs no rule itself: the caller supplies this (rules/health.h's vg_health_watch_judge). 0,
 * or -ENOMEM with err set. */
typedef int (*vg_watch_judge_fn)(void *ctx, const struct vg_snapshot *snap,
                                 const struct vg_idle_info *idle, size_t nidle,
                                 struct vg_findings *fs, struct vg_err *err);

struct vg_watch_opts {
    uint64_t threshold;      /* bytes: memory changes */
    vg_watch_judge_fn judge; /* NULL: no findings, no alerts */
    void *judge_ctx;
    /* Does the process (pid, start time when known) still exist? Used only for holders
     * carried over while the driver's view is missing. NULL: assume it does. */
    bool (*alive)(void *ctx, pid_t pid, bool start_known, uint64_t start_ticks);
    void *alive_ctx;
};

/*
 * One step: build the view of snap (hung: the driver did not answer in time) at now_ms (any
 * monotonic clock in milliseconds), run the rules and the expectations on it, and append to
 * events what changed since prev (NULL for the first sample). 0, or -ENOMEM with err set.
 */
int vg_watch_step(const struct vg_watch_opts *o, const struct vg_snapshot *snap, bool hung,
                  uint64_t now_ms, const struct vg_watch_view *prev, struct vg_watch_view **out,
                  struct vg_event_list *events, struct vg_err *err);
void vg_watch_view_free(struct vg_watch_view *v);

/* Why some expectation could not be checked in this view (NULL when all could): `watch`
 * prints it when it changes. Borrowed. */
const char *vg_watch_view_problem(const struct vg_watch_view *v);
/* Whether the view is frozen (the driver's view is missing; see above). */
bool vg_watch_view_frozen(const struct vg_watch_view *v);

#endif
