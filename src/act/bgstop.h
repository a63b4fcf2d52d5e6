/*
 * A stop in the background: top's k and K. The plan (act/plan.h, `clean`'s) is made from the
 * frame on screen and shown; once confirmed, a thread of its own looks at the host afresh,
 * finds the plan's GPUs again by UUID (indices may differ from one look to the next), stops
 * the chosen entries and settles through act/settle.h, and leaves what came of it as data
 * (struct vg_bgstop_result) for the caller to take and word (render/settle.h). Nothing here
 * prints; the thread takes no signals.
 *
 * One stop at a time per struct vg_bgstop. The caller's look options and kill context are
 * borrowed for the object's life (a stop under way reads them: the caller keeps them until
 * vg_bgstop_join() has returned).
 *
 * Ownership: vg_bgstop_start() takes the plan and its choice (on success and on failure); a
 * result taken with vg_bgstop_take() is the caller's (vg_bgstop_result_free), and owns the
 * plan, the targets (which borrow the plan's identities) and the settle result.
 */
#ifndef VG_ACT_BGSTOP_H
#define VG_ACT_BGSTOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "act/kill.h"
#include "act/plan.h"
#include "act/settle.h"
#include "model/snapshot.h"
#include "rules/rules.h"
#include "util/err.h"

struct vg_bgstop_opts {
    /* how the thread looks at the host (a quiet snapshot, model/snapshot.h) */
    const char *nvml_path;
    unsigned nvml_timeout_ms;
    const char *proc_root;
    const char *dev_dir;
    int scan;
    int proc_root_fd; /* the procfs, open, numbering PIDs as this process does */
    struct vg_kill_ctx who;
    uint64_t grace_ms;     /* SIGTERM -> SIGKILL */
    uint64_t kill_wait_ms; /* after SIGKILL */
    uint64_t settle_ms;    /* how long to look again while the driver catches up */
    unsigned poll_ms;      /* between looks; 0: act/settle.h's */
    /* optional (tests): the look instead of a snapshot from the options above, and the
     * driver's answer before a signal instead of the driver at nvml_path */
    vg_settle_look_fn look;
    void *look_ctx;
    vg_kill_nvml_fn nvml;
    void *nvml_arg;
    /* optional: called on the stop's thread once its result is ready (e.g. to redraw) */
    void (*done)(void *arg);
    void *done_arg;
};

/* What a stop came to. error 0: plan, targets and res say what was done; else err says why
 * nothing (or not all) could be done ("cannot look at the host to stop anything", "out of
 * memory while stopping"). */
struct vg_bgstop_result {
    int error;
    struct vg_err err;
    struct vg_plan plan;
    bool *chosen;
    struct vg_settle_target *targets;
    size_t ntargets;
    struct vg_settle_result res;
};

void vg_bgstop_result_free(struct vg_bgstop_result *r);

struct vg_bgstop {
    const struct vg_bgstop_opts *o;
    pthread_mutex_t mu;
    bool acting;  /* a stop is under way (under mu) */
    bool started; /* a thread was started and not yet joined */
    pthread_t th;
    struct vg_bgstop_result *done; /* the finished stop's, until taken (under mu) */
};

/* k (pid > 0: that holder) or K (fd: every leftover the finding names): clean's plan of the
 * leftovers in snap (with its findings fs), into *plan and *chosen (one flag per entry: the
 * ones the key picked). pidns_trusted follows snap's PID namespace. 0, or a negative errno
 * with a message (*plan released, *chosen NULL). */
int vg_bgstop_plan(const struct vg_snapshot *snap, const struct vg_findings *fs, pid_t pid,
                   const struct vg_finding *fd, struct vg_kill_ctx who, struct vg_plan *plan,
                   bool **chosen, struct vg_err *err);

/* How many of the plan's entries are chosen and to be signalled. */
size_t vg_bgstop_count(const struct vg_plan *plan, const bool *chosen);

/* 0 or a negative errno (no thread, nothing else to release). */
int vg_bgstop_init(struct vg_bgstop *s, const struct vg_bgstop_opts *o);

/* Whether a stop is under way. */
bool vg_bgstop_busy(struct vg_bgstop *s);

/* Start stopping plan's chosen entries (taken over, whatever the result), planned on snap
 * (read here only: the GPUs of the plan's scope, by UUID). Waits for the previous stop's
 * thread first. 0, or a negative errno with a message (nothing started). */
int vg_bgstop_start(struct vg_bgstop *s, const struct vg_snapshot *snap, struct vg_plan *plan,
                    bool *chosen, struct vg_err *err);

/* The finished stop's result, once (the caller's); NULL while one runs or none finished. */
struct vg_bgstop_result *vg_bgstop_take(struct vg_bgstop *s);

/* Wait for the stop's thread, if one was started: it has ended unless a stop is under way,
 * then this waits for its SIGKILL round and its last look, each bounded. */
void vg_bgstop_join(struct vg_bgstop *s);

/* Join, and free a result not taken. */
void vg_bgstop_release(struct vg_bgstop *s);

#endif
