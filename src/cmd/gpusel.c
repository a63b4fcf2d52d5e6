/*
 * GPU selection shared by `pick` and `run` (see gpusel.h): one attempt reads the driver's view,
 * resolves the lists, ranks the GPUs and looks at or takes the locks; the loop around it waits
 * (bounded, interruptible) when asked to and otherwise says in one line why there are not
 * enough GPUs.
 *
 * Choosing and reserving are race-free between runs: candidates are tried in pick order with a
 * non-blocking flock, and a GPU whose lock another run holds is skipped, so eight concurrent
 * `run --gpus auto:1` on four GPUs end with four distinct reservations.
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
#include "util/clock.h"
#include "util/parse.h"

/* How often a waiting pick or run looks again. */
#define VG_GPUSEL_POLL_MS 500u

/* Outcome of one attempt besides exit statuses. */
#define VG_GPUSEL_AGAIN (-1)

static void vg_gpusel_unlock(struct vg_gpusel *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].lock_fd >= 0)
            close(s->v[i].lock_fd);
        s->v[i].lock_fd = -1;
    }
}

/* Forget the previous attempt, keeping the lock directory. */
static void vg_gpusel_reset(struct vg_gpusel *s)
{
    vg_gpusel_unlock(s);
    free(s->v);
    free(s->reserved);
    free(s->holder);
    free(s->who);
    free(s->ranked);
    s->v = NULL;
    s->reserved = NULL;
    s->holder = NULL;
    s->who = NULL;
    s->ranked = NULL;
    s->n = s->neligible = 0;
    vg_gpu_list_release(&s->gpus);
    vg_gpu_list_init(&s->gpus);
}

void vg_gpusel_release(struct vg_gpusel *s)
{
    vg_gpusel_reset(s);
    vg_gpu_list_release(&s->gpus);
    if (s->dir_open || s->dir.path)
        vg_lock_dir_release(&s->dir);
    s->dir_open = false;
}

static const struct vg_gpu *vg_gpusel_dev(const struct vg_gpusel *s, size_t gpu, int mig)
{
    const struct vg_gpu *g = &s->gpus.gpus[gpu];
    return mig >= 0 ? &g->mig[mig] : g;
}

static void vg_gpusel_name_dev(const struct vg_gpusel *s, size_t gpu, int mig, struct vg_buf *b)
{
    const struct vg_gpu *g = &s->gpus.gpus[gpu], *d = vg_gpusel_dev(s, gpu, mig);
    if (mig >= 0)
        vg_buf_printf(b, "MIG %u/%d", g->index, mig);
    else
        vg_buf_printf(b, "GPU %u", g->index);
    vg_buf_printf(b, " (%s%s%s)", d->name ? d->name : "", d->name && d->uuid ? ", " : "",
                  d->uuid ? d->uuid : "");
}

void vg_gpusel_name(const struct vg_gpusel *s, size_t i, struct vg_buf *b)
{
    vg_gpusel_name_dev(s, s->v[i].gpu, s->v[i].mig, b);
}

/* " (pid 42)", or, when run 42 is gone and its job keeps the reservation, who does. */
static void vg_gpusel_holder_note(const struct vg_gpusel *s, size_t gpu, struct vg_buf *b)
{
    if (!s->holder || s->holder[gpu] <= 0)
        return;
    const struct vg_lock_who *w = &s->who[gpu];
    if (w->run_alive != 0) {
        vg_buf_printf(b, " (pid %ld)", (long)s->holder[gpu]);
        return;
    }
    vg_buf_printf(b, " (pid %ld, gone; its job still holds it", (long)s->holder[gpu]);
    for (size_t k = 0; k < w->nholders; k++)
        vg_buf_printf(b, "%s %ld (%s)", k ? "," : ":", (long)w->holders[k].pid,
                      w->holders[k].comm[0] ? w->holders[k].comm : "?");
    if (w->more)
        vg_buf_printf(b, " and %zu more", w->more);
    if (w->nholders == 0 && w->unreadable)
        vg_buf_adds(b, ", in processes we may not look at");
    vg_buf_adds(b, ")");
}

/* Remember who holds a GPU's lock: the run that took it (/proc/locks), and whether it is still
 * there; a reservation outlives its run while the job it started lives (act/lock.h). */
static void vg_gpusel_note_holder(struct vg_gpusel *s, size_t gpu, const char *uuid, pid_t holder)
{
    s->reserved[gpu] = true;
    s->holder[gpu] = holder;
    if (holder > 0 && vg_lock_who(&s->dir, uuid, holder, &s->who[gpu], NULL) != 0)
        s->who[gpu].run_alive = -1;
}

/* Look at a GPU's lock without taking it. */
static void vg_gpusel_probe(struct vg_gpusel *s, size_t i)
{
    const struct vg_gpu *g = &s->gpus.gpus[i];
    if (!s->dir_open || !g->uuid || !vg_lock_name_ok(g->uuid))
        return;
    pid_t holder = 0;
    if (vg_lock_probe(&s->dir, g->uuid, &holder, NULL) == 1)
        vg_gpusel_note_holder(s, i, g->uuid, holder);
}

/* Take the lock on one device: 0, VG_GPUSEL_AGAIN when another run has it, or an exit status
 * after printing. */
static int vg_gpusel_take(const struct vg_gpusel_opts *o, struct vg_gpusel *s, size_t gpu, int mig,
                          int *fd)
{
    const struct vg_gpu *d = vg_gpusel_dev(s, gpu, mig);
    *fd = -1;
    if (!d->uuid || !vg_lock_name_ok(d->uuid)) {
        vg_cmd_error(o->cmd, "GPU %u has no usable UUID to reserve it by ('%s')",
                     s->gpus.gpus[gpu].index, d->uuid ? d->uuid : "unknown");
        return VG_EXIT_WARN;
    }
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_lock_acquire(&s->dir, d->uuid, fd, &err);
    if (rc == -EBUSY) {
        if (mig < 0) {
            pid_t holder = 0;
            vg_lock_probe(&s->dir, d->uuid, &holder, NULL);
            vg_gpusel_note_holder(s, gpu, d->uuid, holder);
        }
        return VG_GPUSEL_AGAIN;
    }
    if (rc) {
        return vg_cmd_fail(o->cmd, &err, VG_EXIT_WARN, NULL);
    }
    return 0;
}

/* "GPU 1: reserved by another vramguard run (pid 42); GPU 2: 3 GiB free of 80 GiB, needs
 * 40 GiB" for every GPU that is not eligible. */
static void vg_gpusel_why(const struct vg_gpusel *s, const struct vg_pick_criteria *c,
                          struct vg_buf *b)
{
    bool first = true;
    for (size_t k = s->neligible; k < s->gpus.ngpus; k++) {
        const struct vg_pick_cand *cand = &s->ranked[k];
        vg_buf_printf(b, "%sGPU %u: ", first ? "" : "; ", s->gpus.gpus[cand->gpu].index);
        vg_pick_describe(&s->gpus, cand, c, b);
        if (cand->reason == VG_PICK_RESERVED)
            vg_gpusel_holder_note(s, cand->gpu, b);
        first = false;
    }
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
    if (!o->lock)
        for (size_t i = 0; i < s->gpus.ngpus; i++)
            vg_gpusel_probe(s, i);
    s->neligible = vg_pick_rank(&s->gpus, c, s->ranked);
    if (o->lock) {
        /* Try the candidates in order; one another run holds is skipped. */
        for (size_t k = 0; k < s->neligible && s->n < want; k++) {
            int fd;
            size_t gpu = s->ranked[k].gpu;
            int rc = vg_gpusel_take(o, s, gpu, -1, &fd);
            if (rc == VG_GPUSEL_AGAIN)
                continue;
            if (rc)
                return rc;
            s->v[s->n++] = (struct vg_gpusel_gpu){gpu, -1, s->gpus.gpus[gpu].uuid, fd};
        }
        if (s->n < want) {
            vg_gpusel_unlock(s);
            s->n = 0;
            s->neligible = vg_pick_rank(&s->gpus, c, s->ranked); /* with what we learnt */
        }
    } else if (s->neligible >= want) {
        for (size_t k = 0; k < want; k++) {
            size_t gpu = s->ranked[k].gpu;
            s->v[s->n++] = (struct vg_gpusel_gpu){gpu, -1, s->gpus.gpus[gpu].uuid, -1};
        }
    }
    if (s->n == want)
        return 0;
    size_t have = s->neligible < want ? s->neligible : want;
    vg_buf_printf(why, "asked for %u GPU%s, %zu free enough (", want, want == 1 ? "" : "s", have);
    vg_gpusel_why(s, c, why);
    vg_buf_adds(why, ")");
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
            vg_gpusel_name_dev(s, gpu, mig, &name);
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
                vg_gpusel_name_dev(s, gpu, -1, why);
                vg_buf_adds(why, ": ");
                vg_pick_describe(&s->gpus, &cand, &c, why);
                rc = VG_GPUSEL_AGAIN;
                break;
            }
        }
        int fd = -1;
        if (o->lock) {
            rc = vg_gpusel_take(o, s, gpu, mig, &fd);
            if (rc == VG_GPUSEL_AGAIN) {
                vg_gpusel_name_dev(s, gpu, mig, why);
                vg_buf_adds(why, " is reserved by another vramguard run");
                if (mig < 0)
                    vg_gpusel_holder_note(s, gpu, why);
            }
            if (rc)
                break;
        }
        s->v[s->n++] = (struct vg_gpusel_gpu){gpu, mig, vg_gpusel_dev(s, gpu, mig)->uuid, fd};
    }
    free(sel);
    if (rc) {
        vg_gpusel_unlock(s);
        s->n = 0;
    }
    return rc;
}

static int vg_gpusel_open_dir(const struct vg_gpusel_opts *o, struct vg_gpusel *s)
{
    struct vg_lock_env env;
    struct vg_err err = VG_ERR_INIT;
    vg_lock_env_get(&env);
    int rc = vg_lock_dir_choose(&env, &s->dir, &err);
    if (rc == 0)
        rc = vg_lock_dir_open(&s->dir, o->lock, &err);
    if (rc == -ENOENT && !o->lock) {
        if (o->g->verbose)
            vg_cmd_error(o->cmd, "no reservations: '%s' does not exist", s->dir.path);
        return 0;
    }
    if (rc) {
        return vg_cmd_fail(o->cmd, &err, VG_EXIT_WARN, NULL);
    }
    s->dir_open = true;
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
    size_t cap = n > VG_PICK_MAX_GPUS ? n : VG_PICK_MAX_GPUS;
    s->reserved = calloc(n, sizeof(*s->reserved));
    s->holder = calloc(n, sizeof(*s->holder));
    s->who = calloc(n, sizeof(*s->who));
    s->ranked = calloc(n, sizeof(*s->ranked));
    s->v = calloc(cap, sizeof(*s->v));
    bool *excluded = calloc(n, sizeof(*excluded));
    if (!s->reserved || !s->holder || !s->who || !s->ranked || !s->v || !excluded) {
        free(excluded);
        vg_cmd_error(o->cmd, "out of memory");
        return VG_EXIT_SOFTWARE;
    }
    for (size_t i = 0; i < n; i++)
        s->who[i].run_alive = -1;
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
    if (!s->dir_open && !s->dir.path && (rc = vg_gpusel_open_dir(o, s)) != 0) {
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
            vg_gpusel_name_dev(s, s->ranked[k].gpu, -1, &line);
            vg_buf_adds(&line, ": ");
            vg_pick_describe(&s->gpus, &s->ranked[k], &c, &line);
            if (s->ranked[k].reason == VG_PICK_RESERVED)
                vg_gpusel_holder_note(s, s->ranked[k].gpu, &line);
            for (size_t j = 0; j < s->n; j++)
                if (s->v[j].gpu == s->ranked[k].gpu)
                    vg_buf_adds(&line, ": chosen");
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

void vg_gpusel_fmt_ms(uint64_t ms, char *out, size_t n)
{
    unsigned long long v = ms;
    if (v && v % VG_HOUR_MS == 0)
        snprintf(out, n, "%lluh", v / VG_HOUR_MS);
    else if (v && v % 60000 == 0)
        snprintf(out, n, "%llum", v / 60000);
    else if (v % 1000 == 0)
        snprintf(out, n, "%llus", v / 1000);
    else
        snprintf(out, n, "%llums", v);
}

int vg_gpusel_acquire(const struct vg_gpusel_opts *o, struct vg_gpusel *s)
{
    memset(s, 0, sizeof(*s));
    s->dir.fd = -1;
    vg_gpu_list_init(&s->gpus);
    uint64_t deadline = vg_clock_ms() + o->wait_ms;
    bool announced = false;
    char dur[32];
    vg_gpusel_fmt_ms(o->wait_ms, dur, sizeof(dur));
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
