/*
 * What `pick` and `run` share: their selection options, and one call that reads the GPUs,
 * resolves the lists, has act/gpusel.h look at or take the reservation locks, waits for GPUs to
 * come free, and prints, in the house format, why there are not enough (render/gpusel.h's
 * words) and, with --verbose, one line per GPU on why it was (not) chosen.
 *
 * Ownership: the struct vg_gpusel filled by vg_gpusel_acquire() is act/gpusel.h's;
 * vg_gpusel_release() closes it (releasing the reservations).
 */
#ifndef VG_CMD_GPUSEL_H
#define VG_CMD_GPUSEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/gpusel.h"
#include "act/job.h"
#include "cmd/cmd.h"
#include "gpu/gpu.h"
#include "model/pick.h"
#include "util/parse.h"

struct vg_gpusel_opts {
    const char *cmd; /* "pick" or "run", for messages */
    const struct vg_global *g;
    struct vg_pick_spec spec;     /* auto:N, or an explicit list */
    bool list_is_cvd;             /* the list is a kept CUDA_VISIBLE_DEVICES value: resolved
                                   * as CUDA would, with cvd_order, invalid tail dropped */
    const char *cvd_order;        /* CUDA_DEVICE_ORDER for it (NULL: unset) */
    struct vg_pick_criteria crit; /* excluded/reserved filled in here */
    bool min_free_given;          /* explicit lists are checked only against given limits */
    const char *exclude;          /* --exclude list, or NULL */
    bool lock;                    /* take the locks (run) or only look (pick) */
    bool wait;                    /* --wait given */
    uint64_t wait_ms;
    bool quiet;
    struct vg_job *job; /* run: sleeps through its signalfd; NULL: plain sleeps */
};

/* The options pick and run share (--min-free, --max-util, --exclude, --wait): the codes of
 * those that come back from the parse, the table rows, and their handling. --exclude and
 * --wait are stored by their rows into the parse's target VG_GPUSEL_DST, the struct
 * vg_gpusel_opts. */
enum {
    VG_GPUSEL_OPT_MIN_FREE = VG_OPT_FIRST_LOCAL,
    VG_GPUSEL_OPT_MAX_UTIL,
    VG_GPUSEL_OPT_FIRST_LOCAL /* pick and run number their own options from here */
};
#define VG_GPUSEL_DST 1
#define VG_GPUSEL_AT(member) VG_OPT_AT(VG_GPUSEL_DST, struct vg_gpusel_opts, member)

/* Their table rows (cmd/opt.h), defined once: name, value and code; each command words the
 * help for itself (run's apply to auto:N only). */
#define VG_GPUSEL_ROW_MIN_FREE(help)                                                               \
    {                                                                                              \
        "min-free", 0, VG_OPT_ARG_REQUIRED, "SIZE", help, VG_GPUSEL_OPT_MIN_FREE, NULL,            \
            VG_OPT_CODE                                                                            \
    }
#define VG_GPUSEL_ROW_MAX_UTIL(help)                                                               \
    {                                                                                              \
        "max-util", 0, VG_OPT_ARG_REQUIRED, "PCT", help, VG_GPUSEL_OPT_MAX_UTIL, NULL, VG_OPT_CODE \
    }
#define VG_GPUSEL_ROW_EXCLUDE(help)                                                                \
    {                                                                                              \
        "exclude", 0, VG_OPT_ARG_REQUIRED, "GPUS", help, 0, NULL,                                  \
            VG_OPT_VAL(VG_GPUSEL_AT(exclude), .kind = VG_OPT_K_STR)                                \
    }
#define VG_GPUSEL_ROW_WAIT(help)                                                                   \
    {                                                                                              \
        "wait", 0, VG_OPT_ARG_REQUIRED, "TIMEOUT", help, 0, NULL,                                  \
            VG_OPT_VAL(VG_GPUSEL_AT(wait_ms), VG_OPT_GIVEN(struct vg_gpusel_opts, wait),           \
                       .kind = VG_OPT_K_DURATION, .max = 7ull * VG_DAY_MS,                         \
                       .takes = "a duration up to 7d (30s, 10m, 2h)")                              \
    }

/* The defaults both commands start from: one GPU chosen with pick's policy (the default
 * --min-free and --max-util), no waiting, nothing locked. */
void vg_gpusel_opts_init(struct vg_gpusel_opts *o, const char *cmd, const struct vg_global *g);

/* Handle --min-free or --max-util inside a command's getopt loop. Returns 1 when handled, 0
 * when c is neither, or a negative errno with the message in err for a bad value. */
int vg_gpusel_opt(struct vg_gpusel_opts *o, int c, const char *arg, struct vg_err *err);

/* Choose (and with opts->lock, reserve) GPUs, waiting when asked. Returns an exit status:
 * 0 done; 1 not enough GPUs free; 3 the driver's view unavailable; 64 a bad list or count;
 * 70 out of memory; 128+N a signal N ended the wait. Errors are printed. */
int vg_gpusel_acquire(const struct vg_gpusel_opts *opts, struct vg_gpusel *out);

#endif
