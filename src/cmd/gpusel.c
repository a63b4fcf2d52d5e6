/*
 * GPU selection shared by `pick` and `run` (see gpusel.h): one attempt reads the driver's view,
 * resolves the lists and has act/gpusel.h rank the GPUs and look at or take the locks (race-free
 * between runs: see there); the loop around it waits (bounded, interruptible) when asked to and
 * otherwise says in one line, in render/gpusel.h's words, why there are not enough GPUs.
 */
#include "cmd/gpusel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/collect.h"
#include "model/visible.h"
#include "render/gpusel.h"
#include "util/clock.h"
#include "util/parse.h"

/* How often a waiting pick or run looks again. */
#define VG_GPUSEL_POLL_MS 500u

/* Outcome of one attempt besides exit statuses. */
#define VG_GPUSEL_AGAIN (-1)

/* Take the lock on one device: 0, VG_GPUSEL_AGAIN when another run has it, or an exit status
 * after printing. */
static int vg_gpusel_lock_one(const struct vg_gpusel_opts *o, struct vg_gpusel *s, size_t gpu,
                              int mig, int *fd)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_gpusel_take(s, gpu, mig, fd, &err);
    if (rc == -EBUSY) {
        vg_err_release(&err);
        return VG_GPUSEL_AGAIN;
    }
    return rc ? vg_cmd_fail(o->cmd, &err, VG_EXIT_WARN, NULL) : 0;
}

static int vg_gpusel_auto(const struct vg_gpusel_opts *o, struct vg_gpusel *s,
                          struct vg_pick_criteria *c, struct vg_buf *why)
{
    unsigned want = o->spec.count;
    if (want > s->gpus.ngpus) {
        vg_cmd_error(o->cmd, "asked for %u GPU%s but this host has %zu", want, want == 1 ? "" : "s",
                     s->gpus.ngpus);
        return VG_EXIT_USAGE;
    }
    struct vg_err err = VG_ERR_INIT;
    if (vg_gpusel_choose(s, c, want, o->lock, &err) != 0)
        return vg_cmd_fail(o->cmd, &err, VG_EXIT_WARN, NULL);
    if (s->n == want)
        return 0;
    vg_render_gpusel_short(s, c, want, why);
    return VG_GPUSEL_AGAIN;
}

/* The devices a kept CUDA_VISIBLE_DEVICES value gives the job, as CUDA resolves it: entries
 * from the first invalid one on are ignored by CUDA, so they are reserved by nobody either. */
static int vg_gpusel_cvd(const struct vg_gpusel_opts *o, struct vg_gpusel *s,
                         struct vg_pick_sel **out, size_t *n, struct vg_err *err)
{
    struct vg_visible v;
    int rc = vg_visible_resolve(o->spec.list, o->cvd_order, &s->gpus, &v, err);
    if (rc)
        return rc;
    *n = 0;
    *out = calloc(v.nentries ? v.nentries : 1, sizeof(**out));
    if (!*out) {
        vg_visible_release(&v);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < v.nentries && i < v.cut; i++) {
        const struct vg_vis_entry *e = &v.entries[i];
        if (e->problem != VG_VIS_OK)
            continue;
        int mig = strncmp(e->text, "MIG-", 4) == 0 ? e->mig : -1;
        (*out)[(*n)++] = (struct vg_pick_sel){.gpu = e->gpu, .mig = mig};
    }
    if (v.cut < v.nentries && !o->quiet)
        vg_cmd_error(o->cmd, "warning: CUDA_VISIBLE_DEVICES='%s': CUDA stops at '%s' (%s)",
                     o->spec.list, v.entries[v.cut].text,
                     vg_vis_problem_str(v.entries[v.cut].problem));
    vg_visible_release(&v);
    return 0;
}

static int vg_gpusel_list(const struct vg_gpusel_opts *o, struct vg_gpusel *s, struct vg_buf *why)
{
    struct vg_pick_sel *sel = NULL;
    size_t n = 0;
    struct vg_err err = VG_ERR_INIT;
    int rc = o->list_is_cvd
                 ? vg_gpusel_cvd(o, s, &sel, &n, &err)
                 : vg_pick_resolve_list("--gpus", o->spec.list, &s->gpus, &sel, &n, &err);
    if (rc) {
        vg_cmd_error(o->cmd, "%s", vg_err_msg(&err));
        rc = err.code == -ENOMEM ? VG_EXIT_SOFTWARE : VG_EXIT_USAGE;
        vg_err_release(&err);
        return rc;
    }
    /* An explicit choice is checked only against the limits given on the command line. */
    struct vg_pick_criteria c = {
        .min_free_set = o->min_free_given,
        .min_free_is_fraction = o->crit.min_free_is_fraction,
        .min_free_bytes = o->crit.min_free_bytes,
        .min_free_fraction = o->crit.min_free_fraction,
        .max_util = o->crit.max_util_explicit ? o->crit.max_util : 100,
        .max_util_explicit = o->crit.max_util_explicit,
    };
    for (size_t k = 0; k < n; k++) {
        size_t gpu = sel[k].gpu;
        int mig = sel[k].mig;
        /* The UUID goes into the job's CUDA_VISIBLE_DEVICES as it is: one that is not a
         * well-formed UUID (a comma in it is several entries) is refused, not waited for. */
        const struct vg_gpu *d = vg_gpusel_dev(s, gpu, mig);
        if (d->uuid && !vg_visible_uuid_ok(d->uuid)) {
            struct vg_buf name;
            vg_buf_init(&name, 4096);
            vg_render_gpusel_dev(s, gpu, mig, &name);
            vg_cmd_error(o->cmd,
                         "%s: the driver's UUID is not a well-formed UUID, so it cannot go into "
                         "CUDA_VISIBLE_DEVICES",
                         vg_buf_str(&name));
            vg_buf_release(&name);
            rc = VG_EXIT_WARN;
            break;
        }
        if (mig < 0) {
            struct vg_pick_cand cand = {.gpu = gpu};
            cand.reason = vg_pick_judge(&s->gpus, gpu, &c, &cand.need_bytes);
            /* Naming a GPU in MIG mode is the user's call: CUDA gets its UUID. */
            if (cand.reason != VG_PICK_OK && cand.reason != VG_PICK_MIG) {
                vg_render_gpusel_unfit(s, &cand, &c, why);
                rc = VG_GPUSEL_AGAIN;
                break;
            }
        }
        int fd = -1;
        if (o->lock) {
            rc = vg_gpusel_lock_one(o, s, gpu, mig, &fd);
            if (rc == VG_GPUSEL_AGAIN)
                vg_render_gpusel_reserved(s, gpu, mig, why);
            if (rc)
                break;
        }
        s->v[s->n++] = (struct vg_gpusel_gpu){gpu, mig, vg_gpusel_dev(s, gpu, mig)->uuid, fd};
    }
    free(sel);
    if (rc)
        vg_gpusel_unlock(s);
    return rc;
}

static int vg_gpusel_dir(const struct vg_gpusel_opts *o, struct vg_gpusel *s)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_gpusel_open_dir(s, o->lock, &err);
    if (rc == -ENOENT && !o->lock) {
        vg_err_release(&err);
        if (o->g->verbose)
            vg_cmd_error(o->cmd, "no reservations: '%s' does not exist", s->dir.path);
        return 0;
    }
    if (rc)
        return vg_cmd_fail(o->cmd, &err, VG_EXIT_WARN, NULL);
    if (o->g->verbose)
        vg_cmd_error(o->cmd, "reservations in %s (%s)", s->dir.path, s->dir.why);
    return 0;
}

static int vg_gpusel_attempt(const struct vg_gpusel_opts *o, struct vg_gpusel *s,
                             struct vg_buf *why)
{
    vg_gpusel_reset(s);
    struct vg_err err = VG_ERR_INIT;
    unsigned timeout = o->g->nvml_timeout_ms ? o->g->nvml_timeout_ms : 10000u;
    int rc = vg_gpu_collect(o->g->nvml_path, timeout, &s->gpus, &err);
    if (rc) {
        return vg_cmd_fail(o->cmd, &err, VG_EXIT_UNKNOWN, "cannot read the GPUs");
    }
    size_t n = s->gpus.ngpus;
    if (n == 0) {
        vg_cmd_error(o->cmd, "the driver reports no GPU on this host");
        return VG_EXIT_WARN;
    }
    bool *excluded = calloc(n, sizeof(*excluded));
    if (vg_gpusel_alloc(s) != 0 || !excluded) {
        free(excluded);
        vg_cmd_error(o->cmd, "out of memory");
        return VG_EXIT_SOFTWARE;
    }
    if (o->exclude) {
        struct vg_pick_sel *sel;
        size_t ns;
        if (vg_pick_resolve_list("--exclude", o->exclude, &s->gpus, &sel, &ns, &err)) {
            free(excluded);
            return vg_cmd_fail(o->cmd, &err, VG_EXIT_USAGE, NULL);
        }
        for (size_t i = 0; i < ns; i++)
            excluded[sel[i].gpu] = true;
        free(sel);
    }
    if (!s->dir_open && !s->dir.path && (rc = vg_gpusel_dir(o, s)) != 0) {
        free(excluded);
        return rc;
    }
    struct vg_pick_criteria c = o->crit;
    c.excluded = excluded;
    c.reserved = s->reserved;
    rc = o->spec.is_auto ? vg_gpusel_auto(o, s, &c, why) : vg_gpusel_list(o, s, why);
    if (rc == 0 && o->g->verbose && o->spec.is_auto) {
        for (size_t k = 0; k < n; k++) {
            struct vg_buf line;
            vg_buf_init(&line, 4096);
            vg_render_gpusel_ranked(s, k, &c, &line);
            vg_cmd_error(o->cmd, "%s", vg_buf_str(&line));
            vg_buf_release(&line);
        }
    }
    free(excluded);
    return rc;
}

void vg_gpusel_opts_init(struct vg_gpusel_opts *o, const char *cmd, const struct vg_global *g)
{
    *o = (struct vg_gpusel_opts){
        .cmd = cmd,
        .g = g,
        .spec = {.is_auto = true, .count = 1},
        .crit = {.min_free_set = true,
                 .min_free_is_fraction = true,
                 .min_free_fraction = VG_PICK_DEFAULT_MIN_FREE,
                 .max_util = VG_PICK_DEFAULT_MAX_UTIL},
    };
}

int vg_gpusel_opt(struct vg_gpusel_opts *o, int c, const char *arg, struct vg_err *err)
{
    int rc;
    switch (c) {
    case VG_GPUSEL_OPT_MIN_FREE:
        if ((rc = vg_pick_parse_min_free(arg, &o->crit, err)) != 0)
            return rc;
        o->min_free_given = true;
        return 1;
    case VG_GPUSEL_OPT_MAX_UTIL:
        if ((rc = vg_pick_parse_util(arg, &o->crit.max_util, err)) != 0)
            return rc;
        o->crit.max_util_explicit = true;
        return 1;
    }
    return 0;
}

int vg_gpusel_acquire(const struct vg_gpusel_opts *o, struct vg_gpusel *s)
{
    vg_gpusel_init(s);
    uint64_t deadline = vg_clock_ms() + o->wait_ms;
    bool announced = false;
    char dur[32];
    vg_render_duration_ms(o->wait_ms, dur, sizeof(dur));
    for (;;) {
        struct vg_buf why;
        vg_buf_init(&why, 1 << 16);
        int rc = vg_gpusel_attempt(o, s, &why);
        if (rc != VG_GPUSEL_AGAIN) {
            vg_buf_release(&why);
            return rc;
        }
        uint64_t now = vg_clock_ms();
        if (!o->wait || now >= deadline) {
            vg_cmd_error(o->cmd, "not enough free GPUs: %s%s", vg_buf_str(&why),
                         o->wait ? "; gave up waiting" : "; --wait TIMEOUT waits for them");
            vg_buf_release(&why);
            return VG_EXIT_WARN;
        }
        if (!announced && !o->quiet)
            vg_cmd_error(o->cmd, "waiting up to %s: %s", dur, vg_buf_str(&why));
        announced = true;
        vg_buf_release(&why);
        uint64_t left = deadline - now;
        unsigned ms = left < VG_GPUSEL_POLL_MS ? (unsigned)left : VG_GPUSEL_POLL_MS;
        if (o->job) {
            int sig = vg_job_sleep(o->job, ms);
            if (sig) {
                vg_cmd_error(o->cmd, "interrupted (%s) while waiting for GPUs", strsignal(sig));
                return 128 + sig;
            }
        } else {
            struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}
