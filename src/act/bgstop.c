/*
 * A stop in the background (top's k and K): the plan, then a thread that looks again, stops
 * and settles through act/settle.h, and leaves its result as data. See act/bgstop.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "act/bgstop.h"
#include "rules/reason.h"
#include "util/buf.h"

/* One stop on its thread: what it was given. */
struct vg_bgstop_job {
    struct vg_bgstop *s;
    struct vg_plan plan;
    bool *chosen;
    char **uuids; /* the plan's GPUs (its scope), by UUID; NULL where unknown */
    size_t nuuids;
};

void vg_bgstop_result_free(struct vg_bgstop_result *r)
{
    if (!r)
        return;
    vg_err_release(&r->err);
    vg_plan_release(&r->plan);
    free(r->chosen);
    free(r->targets);
    vg_settle_result_release(&r->res);
    free(r);
}

int vg_bgstop_plan(const struct vg_snapshot *snap, const struct vg_findings *fs, pid_t pid,
                   const struct vg_finding *fd, struct vg_kill_ctx who, struct vg_plan *plan,
                   bool **chosen, struct vg_err *err)
{
    struct vg_plan_opts po = {.orphans = true, .by_pid = pid > 0, .pid = pid};
    po.who = who;
    po.pidns_trusted =
        snap->procs.self_nspid_depth <= 1 && snap->procs.pidns == VG_PROC_PIDNS_INITIAL;
    *chosen = NULL;
    int rc = vg_plan_build(snap, fs, &po, plan, err);
    if (rc == 0 && !(*chosen = calloc(plan->n ? plan->n : 1, sizeof(bool))))
        rc = vg_err_set(err, -ENOMEM, "out of memory");
    if (rc) {
        vg_plan_release(plan);
        return rc;
    }
    for (size_t i = 0; i < plan->n; i++)
        (*chosen)[i] = pid > 0 || (fd && vg_finding_names_pid(fd, plan->v[i].id.pid));
    return 0;
}

size_t vg_bgstop_count(const struct vg_plan *plan, const bool *chosen)
{
    size_t n = 0;
    for (size_t i = 0; chosen && i < plan->n; i++)
        n += chosen[i] && plan->v[i].signal;
    return n;
}

int vg_bgstop_init(struct vg_bgstop *s, const struct vg_bgstop_opts *o)
{
    memset(s, 0, sizeof(*s));
    s->o = o;
    return -pthread_mutex_init(&s->mu, NULL);
}

bool vg_bgstop_busy(struct vg_bgstop *s)
{
    pthread_mutex_lock(&s->mu);
    bool busy = s->acting;
    pthread_mutex_unlock(&s->mu);
    return busy;
}

/* The thread's look at the host, quiet (the caller's terminal is not ours). */
static int vg_bgstop_look(void *ctx, struct vg_snapshot **snap)
{
    const struct vg_bgstop_opts *o = ctx;
    if (o->look)
        return o->look(o->look_ctx, snap);
    struct vg_snap_opts so = {
        .nvml_path = o->nvml_path,
        .nvml_timeout_ms = o->nvml_timeout_ms,
        .proc_root = o->proc_root,
        .dev_dir = o->dev_dir,
        .scan = o->scan,
    };
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_snap_build(&so, snap, &err);
    vg_err_release(&err);
    return rc ? 1 : 0;
}

/* The GPUs of the plan (by UUID, from the look it was made on) as the first look has them. */
static struct vg_settle_want *vg_bgstop_wants(const struct vg_bgstop_job *j,
                                              const struct vg_snapshot *first, size_t *n)
{
    struct vg_settle_want *w = calloc(j->nuuids ? j->nuuids : 1, sizeof(*w));
    *n = 0;
    for (size_t i = 0; w && i < j->nuuids; i++) {
        size_t gi;
        if (j->uuids[i] && vg_gpu_list_by_uuid(&first->gpus, j->uuids[i], &gi))
            w[(*n)++] = (struct vg_settle_want){.gpu = gi, .ref = i};
    }
    return w;
}

/* The stop, through act/settle.h, into r (which owns the plan by then). */
static void vg_bgstop_settle(const struct vg_bgstop_job *j, struct vg_bgstop_result *r)
{
    const struct vg_bgstop_opts *o = j->s->o;
    struct vg_snapshot *first = NULL;
    struct vg_settle_want *wants = NULL;
    size_t nwants = 0;
    struct vg_kill_nvml nvml = {.path = o->nvml_path, .timeout_ms = o->nvml_timeout_ms};
    if (vg_bgstop_look((void *)o, &first) != 0) {
        r->error = vg_err_set(&r->err, -EIO, "cannot look at the host to stop anything");
        return;
    }
    if (vg_settle_targets_from_plan(&r->plan, r->chosen, &r->targets, &r->ntargets) ||
        !(wants = vg_bgstop_wants(j, first, &nwants))) {
        r->error = vg_err_set(&r->err, -ENOMEM, "out of memory while stopping");
        goto out;
    }
    struct vg_settle_req req = {
        .targets = r->targets,
        .ntargets = r->ntargets,
        .gpus = wants,
        .ngpus = nwants,
        .grace_ms = o->grace_ms,
        .kill_wait_ms = o->kill_wait_ms,
        .timeout_ms = o->settle_ms,
        .tolerance = VG_REASON_DIRTY_TOLERANCE,
        .stop = true,
        .look_after = true,
        .proc_root_fd = o->proc_root_fd,
        .dev_dir = o->dev_dir,
        .who = o->who,
        .poll_ms = o->poll_ms,
        .nvml = o->nvml ? o->nvml : vg_kill_nvml_lists,
        .nvml_arg = o->nvml ? o->nvml_arg : &nvml,
    };
    struct vg_err err = VG_ERR_INIT;
    if (vg_settle_run(&req, first, vg_bgstop_look, (void *)o, &r->res, &err) != 0)
        r->error = vg_err_set(&r->err, -ENOMEM, "out of memory while stopping");
    vg_err_release(&err);
out:
    vg_snap_free(first);
    free(wants);
}

static void vg_bgstop_job_free(struct vg_bgstop_job *j)
{
    for (size_t i = 0; i < j->nuuids; i++)
        free(j->uuids[i]);
    free(j->uuids);
    vg_plan_release(&j->plan);
    free(j->chosen);
    free(j);
}

/* The thread: the stop, its result left for vg_bgstop_take (none when even that could not be
 * allocated). */
static void *vg_bgstop_main(void *arg)
{
    struct vg_bgstop_job *j = arg;
    struct vg_bgstop *s = j->s;
    struct vg_bgstop_result *r = calloc(1, sizeof(*r));
    if (r) {
        r->err = (struct vg_err)VG_ERR_INIT;
        vg_settle_result_init(&r->res);
        r->plan = j->plan; /* the targets borrow its identities: the result keeps it */
        r->chosen = j->chosen;
        vg_plan_init(&j->plan);
        j->chosen = NULL;
        vg_bgstop_settle(j, r);
    }
    vg_bgstop_job_free(j);
    pthread_mutex_lock(&s->mu);
    vg_bgstop_result_free(s->done);
    s->done = r;
    s->acting = false;
    pthread_mutex_unlock(&s->mu);
    if (s->o->done)
        s->o->done(s->o->done_arg);
    return NULL;
}

void vg_bgstop_join(struct vg_bgstop *s)
{
    if (!s->started)
        return;
    pthread_join(s->th, NULL);
    s->started = false;
}

int vg_bgstop_start(struct vg_bgstop *s, const struct vg_snapshot *snap, struct vg_plan *plan,
                    bool *chosen, struct vg_err *err)
{
    struct vg_bgstop_job *j = calloc(1, sizeof(*j));
    if (!j) {
        vg_plan_release(plan);
        free(chosen);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    j->s = s;
    /* the plan's GPUs by UUID: the stop looks at the host afresh, where indices may differ */
    j->uuids = calloc(plan->nscope ? plan->nscope : 1, sizeof(*j->uuids));
    for (size_t i = 0; j->uuids && i < plan->nscope; i++) {
        const struct vg_gpu *d = &snap->gpus.gpus[plan->scope[i]];
        j->uuids[j->nuuids++] = (d->known & VG_GPU_K_UUID) && d->uuid ? strdup(d->uuid) : NULL;
    }
    j->plan = *plan;
    j->chosen = chosen;
    vg_plan_init(plan);
    vg_bgstop_join(s);
    pthread_mutex_lock(&s->mu);
    s->acting = true;
    pthread_mutex_unlock(&s->mu);
    /* every signal blocked on the thread: the caller's thread alone takes them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->th, NULL, vg_bgstop_main, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_mutex_lock(&s->mu);
        s->acting = false;
        pthread_mutex_unlock(&s->mu);
        vg_bgstop_job_free(j);
        return vg_err_set(err, -rc, "cannot start the stop: %s", strerror(rc));
    }
    s->started = true;
    return 0;
}

struct vg_bgstop_result *vg_bgstop_take(struct vg_bgstop *s)
{
    pthread_mutex_lock(&s->mu);
    struct vg_bgstop_result *r = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->mu);
    return r;
}

void vg_bgstop_release(struct vg_bgstop *s)
{
    vg_bgstop_join(s);
    vg_bgstop_result_free(s->done);
    s->done = NULL;
    pthread_mutex_destroy(&s->mu);
}
