/*
 * Driver collection under a deadline (see collect.h).
 *
 * The job struct is shared by the caller and the worker and reference counted: whoever lets go
 * last frees it. The worker signals twice: `done` with the answer, `finished` after nvmlShutdown.
 * On a timeout (of the read, or of the shutdown) the caller lets go at once and the worker, if
 * the hung call ever returns, finishes, shuts NVML down and frees the job itself. The thread is
 * detached so an abandoned worker never has to be joined.
 *
 * The worker and the caller share one deadline. The host-wide calls (init, versions, count) run
 * on the worker; each GPU is then read on a thread of its own that the worker waits for only
 * until the deadline (vg_nvml_read_gpus), so a GPU whose call hangs is marked hung and the
 * others keep their figures. Once the worker is past the host-wide calls it makes no driver
 * call before answering, so the caller then gives it a short grace past the deadline instead
 * of calling the whole driver hung because the answer was being put together at that moment.
 */
#include "gpu/collect.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/nvml.h"
#include "util/clock.h"

/* How long past the deadline the caller waits for a worker that is past the host-wide calls:
 * it only has to wake up and hand the list over. */
#define VG_COLLECT_GRACE_MS 2000

struct vg_collect_job {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    int refs;
    bool done;                /* the answer is in rc, err and list */
    bool finished;            /* NVML is shut down too: the worker is about to return */
    bool gpus_phase;          /* past the host-wide calls: reading GPUs under the deadline */
    struct timespec deadline; /* CLOCK_MONOTONIC */
    char *path;
    int rc;
    struct vg_err err;
    struct vg_gpu_list list;
};

static void vg_collect_job_unref(struct vg_collect_job *job)
{
    pthread_mutex_lock(&job->lock);
    int refs = --job->refs;
    pthread_mutex_unlock(&job->lock);
    if (refs > 0)
        return;
    pthread_cond_destroy(&job->done_cond);
    pthread_mutex_destroy(&job->lock);
    vg_gpu_list_release(&job->list);
    vg_err_release(&job->err);
    free(job->path);
    free(job);
}

static void *vg_collect_worker(void *arg)
{
    struct vg_collect_job *job = arg;
    struct vg_nvml *nvml = NULL;
    struct vg_gpu_list list;
    vg_gpu_list_init(&list);
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_nvml_open(job->path, &nvml, &err);
    if (rc == 0)
        rc = vg_nvml_read_host(nvml, &list, &err);
    if (rc == 0) {
        pthread_mutex_lock(&job->lock);
        job->gpus_phase = true;
        pthread_mutex_unlock(&job->lock);
        rc = vg_nvml_read_gpus(nvml, &list, &job->deadline, &err);
    }

    /* The answer goes out before nvmlShutdown: a shutdown that hangs must not cost the
     * figures already read. */
    pthread_mutex_lock(&job->lock);
    job->rc = rc;
    job->list = list;
    job->err = err;
    job->done = true;
    pthread_cond_signal(&job->done_cond);
    pthread_mutex_unlock(&job->lock);

    vg_nvml_free(nvml);
    pthread_mutex_lock(&job->lock);
    job->finished = true;
    pthread_cond_signal(&job->done_cond);
    pthread_mutex_unlock(&job->lock);
    vg_collect_job_unref(job);
    return NULL;
}

static int vg_collect_start(struct vg_collect_job *job, struct vg_err *err)
{
    pthread_attr_t attr;
    pthread_t tid;
    int rc = pthread_attr_init(&attr);
    if (rc)
        return vg_err_set(err, -rc, "cannot start the driver worker: %s", strerror(rc));
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, vg_collect_worker, job);
    pthread_attr_destroy(&attr);
    if (rc)
        return vg_err_set(err, -rc, "cannot start the driver worker: %s", strerror(rc));
    return 0;
}

int vg_gpu_collect(const char *path, unsigned timeout_ms, struct vg_gpu_list *out,
                   struct vg_err *err)
{
    struct vg_collect_job *job = calloc(1, sizeof(*job));
    if (!job)
        return vg_err_set(err, -ENOMEM, "out of memory");
    if (path && !(job->path = strdup(path))) {
        free(job);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&job->done_cond, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_mutex_init(&job->lock, NULL);
    vg_gpu_list_init(&job->list);
    job->refs = 2;
    clock_gettime(CLOCK_MONOTONIC, &job->deadline);
    vg_clock_ts_add_ms(&job->deadline, timeout_ms);
    struct timespec deadline = job->deadline, grace = job->deadline;
    vg_clock_ts_add_ms(&grace, VG_COLLECT_GRACE_MS);

    int rc = vg_collect_start(job, err);
    if (rc) {
        job->refs = 1;
        vg_collect_job_unref(job);
        return rc;
    }

    pthread_mutex_lock(&job->lock);
    int wait_rc = 0;
    while (!job->done && wait_rc != ETIMEDOUT)
        wait_rc = pthread_cond_timedwait(&job->done_cond, &job->lock, &deadline);
    /* Past the host-wide calls the worker only waits for the GPU readers (until the same
     * deadline) and hands the list over: a short grace, not a hung driver. */
    int grace_rc = 0;
    while (!job->done && job->gpus_phase && grace_rc != ETIMEDOUT)
        grace_rc = pthread_cond_timedwait(&job->done_cond, &job->lock, &grace);
    /* Then give the shutdown what is left of the same deadline, so that a normal exit does
     * not cut it short; one that hangs is left behind with the detached thread. */
    while (job->done && !job->finished && wait_rc != ETIMEDOUT)
        wait_rc = pthread_cond_timedwait(&job->done_cond, &job->lock, &deadline);
    bool done = job->done;
    if (done) {
        rc = job->rc;
        if (rc == 0) {
            *out = job->list;
            vg_gpu_list_init(&job->list);
        } else {
            vg_err_set(err, rc, "%s", vg_err_msg(&job->err));
        }
    }
    pthread_mutex_unlock(&job->lock);
    vg_collect_job_unref(job);

    if (!done)
        return vg_err_set(err, -ETIMEDOUT,
                          "the NVIDIA driver did not answer within %u.%03u s (a driver call is "
                          "hung); GPU memory figures are unavailable",
                          timeout_ms / 1000, timeout_ms % 1000);
    return rc;
}
