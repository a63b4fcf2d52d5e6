/*
 * The collector of `vramguard serve` and `vramguard top`: samples the host on its own schedule
 * (every interval, on a thread of its own, which takes no signals), has the caller diagnose
 * each sample and make what it shows of it, and keeps the latest result under a mutex. Two
 * kinds of result:
 *
 * - serve's exposition (diagnose + render: the rules and render/metrics.h, from cmd/serve.c;
 *   this layer names neither), a buffer that scrapes only copy, so any number of scrapers
 *   costs no extra collection, and a slow scraper cannot delay one;
 * - top's frame (make: the sample is taken over and made into an object the collector does not
 *   look into), which the UI takes (vg_collector_take()), with the failures since it last took
 *   one. The UI can change the interval, ask for a collection at once (after a stop), and see
 *   whether one is under way and for how long (a driver slow to answer).
 *
 * The driver-hang protection is the sampler's (model/sampler.h): a sample waits for NVML at
 * most nvml_timeout_ms and then goes on without the driver's view, which shows as
 * vramguard_last_collect_success 0.
 *
 * Ownership: vg_collector_new() returns a collector (its first collection already done) that
 * vg_collector_free() stops and frees. vg_collector_copy() and vg_collector_health() may be
 * called from any thread at any time between the two.
 */
#ifndef VG_MODEL_COLLECTOR_H
#define VG_MODEL_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/sampler.h"
#include "util/buf.h"
#include "util/err.h"

/* Messages for the operator ("the NVIDIA driver did not answer ..."), one line each, without
 * the program name; called from the collector's thread. */
/* The collection itself, as the collector saw it (the exposition's vramguard_* self-metrics). */
struct vg_collector_stats {
    bool success;                /* the driver answered and /proc was read */
    double duration_seconds;     /* how long the last attempt took */
    double timestamp_seconds;    /* wall-clock time the last attempt finished */
    bool last_success_known;     /* some attempt has succeeded */
    double last_success_seconds; /* wall-clock time the last successful attempt finished */
    uint64_t collections;        /* attempts so far */
    uint64_t failures;           /* of those, unsuccessful */
    uint64_t driver_hangs;       /* of those, with the driver not answering in time */
    uint64_t full_scans;         /* /proc scans that read every process's descriptors */
    uint64_t incremental_scans;  /* /proc scans that read only holders, driver PIDs, new PIDs */
};

/* The identity of the GPUs of a successful collection, kept by the collector so that a failed
 * collection still lists the GPUs the host had (vramguard_gpu_info) instead of none. */
struct vg_collector_gpu_id {
    unsigned index;
    char *uuid; /* NULL when unknown */
    char *name;
    char *pci_bus_id;
    bool minor_known;
    unsigned minor;
};

struct vg_collector_gpu_ids {
    struct vg_collector_gpu_id *v;
    size_t n;
};

void vg_collector_gpu_ids_init(struct vg_collector_gpu_ids *ids);
void vg_collector_gpu_ids_release(struct vg_collector_gpu_ids *ids);
/* Replace ids with the GPUs of snap (which must have driver_ok). 0 or -ENOMEM (ids then
 * unchanged). */
int vg_collector_gpu_ids_set(struct vg_collector_gpu_ids *ids, const struct vg_snapshot *snap);

/* Diagnose a collection's sample before it is timed (snap NULL when not even /proc could be
 * read: forget the last diagnosis), keeping what render needs in arg. 0, or a negative errno
 * with err set, which fails the collection. */
typedef int (*vg_collector_diagnose_fn)(void *arg, struct vg_snapshot *snap, struct vg_err *err);
/* Render the collection into out (the exposition): snap as for diagnose, last_good and st as
 * above. 0, or the buffer's error. */
typedef int (*vg_collector_render_fn)(void *arg, const struct vg_snapshot *snap,
                                      const struct vg_collector_gpu_ids *last_good,
                                      const struct vg_collector_stats *st, struct vg_buf *out);

/* Instead of diagnose and render: make the collection's object from snap, which is taken over
 * (freed also on failure), hung as the sampler said. 0 with *out set, or a negative errno with
 * err set (its message, or "out of memory" without one, is the collection's failure). */
typedef int (*vg_collector_make_fn)(void *arg, struct vg_snapshot *snap, bool hung, void **out,
                                    struct vg_err *err);

typedef void (*vg_serve_log_fn)(void *arg, const char *msg);

struct vg_collector_opts {
    struct vg_sampler_opts sampler;
    vg_collector_diagnose_fn diagnose;
    vg_collector_render_fn render;
    vg_collector_make_fn make; /* set: make mode (diagnose and render unused) */
    void (*drop)(void *obj);   /* frees an object of make's nobody took */
    void *arg;                 /* of diagnose, render and make, called from one thread at a time */
    uint64_t interval_ms;      /* between the starts of two collections */
    bool first_in_thread;      /* the first collection on the thread too: new() returns at once */
    vg_serve_log_fn log;
    void *log_arg;
};

struct vg_collector;

/* Set up the sampler and run the first collection in the calling thread (unless
 * first_in_thread), so the exposition is complete before the first scrape; a failing driver is
 * not an error here (it shows in the metrics), only running out of memory or /proc being
 * unreadable at start is. */
int vg_collector_new(const struct vg_collector_opts *o, struct vg_collector **out,
                     struct vg_err *err);
/* Start the collection thread. */
int vg_collector_start(struct vg_collector *c, struct vg_err *err);
/* Stop the thread (waiting for a collection in progress, which the sampler bounds) and free. */
void vg_collector_free(struct vg_collector *c);
/* The same, waiting at most wait_ms for the thread: one still stuck then (in a read the sampler
 * cannot bound) is left running and the collector not freed, for the process's exit to take.
 * Returns whether it was freed. */
bool vg_collector_free_within(struct vg_collector *c, unsigned wait_ms);

/* Make mode: the newest object not yet taken (the caller's now; NULL: none since), and in
 * *error (when not NULL) the first failure since the last take, malloc'ed (NULL: none). */
void *vg_collector_take(struct vg_collector *c, char **error);
/* Collect again at once (then on schedule from there). */
void vg_collector_poke(struct vg_collector *c);
/* The interval from the next wait on. */
void vg_collector_set_interval(struct vg_collector *c, uint64_t interval_ms);

/* A malloc'ed copy of the latest exposition (the caller frees it), its length in *len; NULL
 * when out of memory. */
char *vg_collector_copy(struct vg_collector *c, size_t *len);

struct vg_collector_health {
    bool success;       /* the last collection succeeded */
    bool stalled;       /* no collection has finished for far longer than the schedule
                         * allows (2 intervals + the driver timeout + 10 s) */
    double age_seconds; /* since the last collection finished */
    uint64_t collections;
    bool busy;        /* a collection is under way */
    uint64_t busy_ms; /* for so long */
};

void vg_collector_health(struct vg_collector *c, struct vg_collector_health *h);

#endif
