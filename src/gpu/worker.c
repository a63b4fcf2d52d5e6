/*
 * The driver worker (see worker.h).
 *
 * The worker and its owner share one reference-counted struct: requests are numbered, the
 * worker answers the latest one and records which it answered, so the owner can tell "still
 * busy with an earlier request" (the driver is hung: do not queue more) from "idle". When the
 * owner lets go while the worker is stuck in the driver, or its nvmlShutdown does not return
 * by the stop deadline, it drops its reference and detaches the thread; the worker frees
 * everything if the call ever returns.
 */
#include "gpu/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/nvml.h"
#include "util/clock.h"

struct vg_gpu_worker_state {
    pthread_mutex_t lock;
    pthread_cond_t wake;     /* the worker waits here for a request or stop */
    pthread_cond_t answered; /* the owner waits here (CLOCK_MONOTONIC) for the answer */
    int refs;
    bool stop;
    bool finished; /* the worker has shut NVML down and is about to return */
    enum vg_gpu_worker_session session;
    bool sensors;                 /* vg_gpu_worker_want_sensors: passed to each session opened */
    uint64_t asked, answered_seq; /* request numbers */
    struct timespec deadline;     /* of request `asked` (CLOCK_MONOTONIC) */
    uint64_t gpus_phase; /* the request whose GPUs are being read: no host-wide call left */
    char *path;
    /* the answer to request answered_seq, until the owner takes it */
    int rc;
    struct vg_err err;
    struct vg_gpu_list list;
};

struct vg_gpu_worker {
    struct vg_gpu_worker_state *st;
    pthread_t thread;
};

static void vg_gpu_worker_unref(struct vg_gpu_worker_state *w)
{
    pthread_mutex_lock(&w->lock);
    int refs = --w->refs;
    pthread_mutex_unlock(&w->lock);
    if (refs > 0)
        return;
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->answered);
    pthread_mutex_destroy(&w->lock);
    vg_gpu_list_release(&w->list);
    vg_err_release(&w->err);
    free(w->path);
    free(w);
}

/* One read, on the worker thread. A kept session is closed after a failure, to be opened
 * afresh next time (a restarted driver answers UNINITIALIZED to the old session). */
static int vg_gpu_worker_do_read(struct vg_gpu_worker_state *w, struct vg_nvml **nvml,
                                 struct vg_gpu_list *list, uint64_t seq,
                                 const struct timespec *deadline, struct vg_err *err)
{
    int rc = 0;
    if (!*nvml) {
        rc = vg_nvml_open(w->path, nvml, err);
        pthread_mutex_lock(&w->lock);
        bool sensors = w->sensors;
        pthread_mutex_unlock(&w->lock);
        if (rc == 0)
            vg_nvml_want_sensors(*nvml, sensors);
    }
    if (rc == 0)
        rc = vg_nvml_read_host(*nvml, list, err);
    if (rc == 0) {
        pthread_mutex_lock(&w->lock);
        w->gpus_phase = seq;
        pthread_mutex_unlock(&w->lock);
        rc = vg_nvml_read_gpus(*nvml, list, deadline, err);
    }
    if (rc != 0 && w->session == VG_GPU_WORKER_KEEP) {
        vg_gpu_list_release(list);
        vg_nvml_free(*nvml);
        *nvml = NULL;
    }
    return rc;
}

static void *vg_gpu_worker_main(void *arg)
{
    struct vg_gpu_worker_state *w = arg;
    struct vg_nvml *nvml = NULL;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && w->answered_seq == w->asked)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->stop)
            break;
        uint64_t seq = w->asked;
        struct timespec deadline = w->deadline;
        pthread_mutex_unlock(&w->lock);

        struct vg_gpu_list list;
        vg_gpu_list_init(&list);
        struct vg_err err = VG_ERR_INIT;
        int rc = vg_gpu_worker_do_read(w, &nvml, &list, seq, &deadline, &err);

        pthread_mutex_lock(&w->lock);
        vg_gpu_list_release(&w->list);
        vg_err_release(&w->err);
        w->list = list;
        w->err = err;
        w->rc = rc;
        w->answered_seq = seq;
        pthread_cond_broadcast(&w->answered);
    }
    pthread_mutex_unlock(&w->lock);
    /* nvmlShutdown can hang like any other call: the owner waits for this only until its stop
     * deadline (see vg_gpu_worker_free), then leaves the thread to finish alone. */
    vg_nvml_free(nvml);
    pthread_mutex_lock(&w->lock);
    w->finished = true;
    pthread_cond_broadcast(&w->answered);
    pthread_mutex_unlock(&w->lock);
    vg_gpu_worker_unref(w);
    return NULL;
}

int vg_gpu_worker_new(const char *path, enum vg_gpu_worker_session session,
                      struct vg_gpu_worker **out, struct vg_err *err)
{
    *out = NULL;
    struct vg_gpu_worker *h = calloc(1, sizeof(*h));
    struct vg_gpu_worker_state *w = calloc(1, sizeof(*w));
    if (!h || !w || (path && !(w->path = strdup(path)))) {
        free(h);
        free(w);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->answered, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_cond_init(&w->wake, NULL);
    pthread_mutex_init(&w->lock, NULL);
    vg_gpu_list_init(&w->list);
    w->session = session;
    w->refs = 2;
    int rc = pthread_create(&h->thread, NULL, vg_gpu_worker_main, w);
    if (rc) {
        w->refs = 1;
        vg_gpu_worker_unref(w);
        free(h);
        return vg_err_set(err, -rc, "cannot start the driver worker: %s", strerror(rc));
    }
    h->st = w;
    *out = h;
    return 0;
}

void vg_gpu_worker_want_sensors(struct vg_gpu_worker *h)
{
    pthread_mutex_lock(&h->st->lock);
    h->st->sensors = true;
    pthread_mutex_unlock(&h->st->lock);
}

int vg_gpu_worker_read(struct vg_gpu_worker *h, const struct timespec *deadline,
                       struct vg_gpu_list *out, enum vg_gpu_worker_answer *answer,
                       struct vg_err *err)
{
    struct vg_gpu_worker_state *w = h->st;
    *answer = VG_GPU_WORKER_STILL_HUNG;
    pthread_mutex_lock(&w->lock);
    bool busy = w->answered_seq != w->asked;
    if (!busy) {
        struct timespec grace = *deadline;
        vg_clock_ts_add_ms(&grace, VG_GPU_WORKER_GRACE_MS);
        w->asked++;
        w->deadline = *deadline;
        *answer = VG_GPU_WORKER_HUNG_NOW;
        pthread_cond_signal(&w->wake);
        int wrc = 0;
        while (w->answered_seq != w->asked && wrc != ETIMEDOUT)
            wrc = pthread_cond_timedwait(&w->answered, &w->lock, deadline);
        /* Past the host-wide calls the worker only waits for the GPU readers (until the same
         * deadline) and hands the list over: a short grace, not a hung driver. */
        wrc = 0;
        while (w->answered_seq != w->asked && w->gpus_phase == w->asked && wrc != ETIMEDOUT)
            wrc = pthread_cond_timedwait(&w->answered, &w->lock, &grace);
        busy = w->answered_seq != w->asked;
    }
    int rc = -ETIMEDOUT;
    if (!busy) {
        *answer = VG_GPU_WORKER_ANSWERED;
        rc = w->rc;
        if (rc == 0) {
            *out = w->list;
            vg_gpu_list_init(&w->list);
        } else {
            vg_err_set(err, rc, "%s", vg_err_msg(&w->err));
        }
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void vg_gpu_worker_free(struct vg_gpu_worker *h, const struct timespec *deadline)
{
    if (!h)
        return;
    struct vg_gpu_worker_state *w = h->st;
    /* An idle worker shuts NVML down and exits; one stuck in a driver call, or whose
     * nvmlShutdown hangs past the deadline, is detached and left to finish alone. Joining it
     * could wait forever, with the command's stop signals already taken. */
    pthread_mutex_lock(&w->lock);
    bool stuck = w->answered_seq != w->asked;
    w->stop = true;
    pthread_cond_signal(&w->wake);
    int wrc = 0;
    while (!stuck && !w->finished && wrc != ETIMEDOUT)
        wrc = pthread_cond_timedwait(&w->answered, &w->lock, deadline);
    bool finished = w->finished;
    pthread_mutex_unlock(&w->lock);
    if (finished)
        pthread_join(h->thread, NULL);
    else
        pthread_detach(h->thread);
    vg_gpu_worker_unref(w);
    free(h);
}
