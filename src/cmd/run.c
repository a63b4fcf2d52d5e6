/*
 * `vramguard run`: start a job the way that keeps GPU memory from getting stuck. The GPUs are
 * chosen (explicitly, or auto:N with pick's policy) and reserved with one lock each for the
 * job's life (the job inherits them, so they outlive a run killed under it: act/lock.h,
 * act/guard.c); the job gets CUDA_VISIBLE_DEVICES as UUIDs and CUDA_DEVICE_ORDER=PCI_BUS_ID
 * before it starts; its whole process tree is tracked (act/job.h); when its main process
 * ends, every descendant still alive is stopped and reaped; and a last look through the
 * snapshot (NVML + the fd scan) says whether anything of the job still holds its GPUs. The
 * exit status is the job's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "act/afterrun.h"
#include "act/job.h"
#include "cmd/cmd.h"
#include "cmd/gpusel.h"
#include "model/snapshot.h"
#include "model/visible.h"
#include "render/gpusel.h"
#include "render/run.h"
#include "util/parse.h"

extern char **environ;

static const char vg_run_help[] =
    "usage: vramguard run [options] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD on reserved GPUs: CUDA_VISIBLE_DEVICES set to the GPUs' UUIDs and\n"
    "CUDA_DEVICE_ORDER=PCI_BUS_ID before it starts; each GPU locked for the job's life so\n"
    "concurrent runs never share one; the job's whole process tree tracked (its own cgroup\n"
    "v2 when one can be created, else as child subreaper); SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
    "SIGUSR1 and SIGUSR2 forwarded; the terminal handed to the job. When its main process\n"
    "ends, every descendant still alive gets SIGTERM, SIGKILL after the grace period, and is\n"
    "reaped; then vramguard checks that nothing of the job still holds its GPUs and names any\n"
    "holder left.\n"
    "\n"
    "If vramguard itself is killed (even with SIGKILL), the job gets SIGTERM, and its GPUs\n"
    "stay reserved while it lives: the job inherits one read-only descriptor of each GPU's\n"
    "lock file, and the lock lasts while any process keeps one. With a cgroup, a guard\n"
    "process ('vramguard-guard') also holds the locks, sends SIGKILL to what is left of the\n"
    "job after the grace period, and lets the GPUs go once the cgroup is empty.\n"
    "\n"
    "Options:\n";

static const char vg_run_help_tail[] =
    "\n"
    "Reservations live in $VRAMGUARD_RUNTIME_DIR, else /run/vramguard (root, or when it\n"
    "exists and is writable), else $XDG_RUNTIME_DIR/vramguard, else /tmp/vramguard-UID.\n"
    "The job's cgroup is created under $VRAMGUARD_CGROUP_PARENT (a delegated cgroup2\n"
    "directory), else under the cgroup vramguard runs in.\n"
    "\n"
    "Exit status: the job's (128+N when a signal N killed it); 126 CMD cannot be executed;\n"
    "127 CMD not found; 1 no GPUs to be had (or the run could not start); 3 the driver's view\n"
    "unavailable; 64 bad usage.\n"
    "\n";

/* --gpus comes back from the parse; run's other options are stored by their rows. */
enum { VG_RUN_GPUS = VG_GPUSEL_OPT_FIRST_LOCAL };

#define VG_RUN_DEFAULT_GRACE_MS 10000u

struct vg_run {
    const struct vg_global *g;
    bool quiet;
    uint64_t grace_ms;
    bool gpus_given, keep_env;
    enum vg_job_track track;
};

static void vg_run_log(void *ctx, const char *msg)
{
    const struct vg_run *r = ctx;
    if (r->g->verbose)
        vg_cmd_error("run", "%s", msg);
}

/* The child's environment: ours, with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER replaced
 * (or, kept, left alone). The strings are borrowed from environ except the two we add. */
static char **vg_run_env(const char *cvd, bool keep, bool set_order, char **owned)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        bool is_cvd = strncmp(e, "CUDA_VISIBLE_DEVICES=", 21) == 0;
        bool is_order = strncmp(e, "CUDA_DEVICE_ORDER=", 18) == 0;
        if ((is_cvd && !keep) || (is_order && set_order))
            continue;
        env[k++] = environ[i];
    }
    if (!keep) {
        size_t len = strlen(cvd) + 22;
        owned[0] = malloc(len);
        if (!owned[0]) {
            free(env);
            return NULL;
        }
        snprintf(owned[0], len, "CUDA_VISIBLE_DEVICES=%s", cvd);
        env[k++] = owned[0];
    }
    if (set_order)
        env[k++] = (char *)"CUDA_DEVICE_ORDER=PCI_BUS_ID";
    env[k] = NULL;
    return env;
}

/* A kept value that uses only UUIDs means the same whatever the order; one with indices
 * depends on CUDA_DEVICE_ORDER, which must then stay as the user had it. */
static bool vg_run_uuid_only(const char *v)
{
    const char *tok;
    size_t len;
    while (vg_parse_list_next(&v, " \t", &tok, &len))
        if (len && !vg_parse_starts(tok, len, "GPU-") && !vg_parse_starts(tok, len, "MIG-"))
            return false;
    return true;
}

/* --keep-env with --gpus: does the kept value give the job the GPUs we reserved? */
static void vg_run_compare_kept(const struct vg_run *r, const struct vg_gpusel *s, const char *cvd,
                                const char *order)
{
    struct vg_visible v;
    if (vg_visible_resolve(cvd, order, &s->gpus, &v, NULL))
        return;
    bool same = v.ndevices == s->n;
    for (size_t i = 0; same && i < s->n; i++) {
        bool found = false;
        for (size_t j = 0; j < v.ndevices && !found; j++)
            found = v.devices[j].gpu == s->v[i].gpu &&
                    (s->v[i].mig < 0 || v.devices[j].mig == s->v[i].mig);
        same = found;
    }
    if (!same && !r->quiet) {
        struct vg_buf b;
        vg_buf_init(&b, 1 << 16);
        for (size_t i = 0; i < s->n; i++) {
            vg_buf_adds(&b, i ? ", " : "");
            vg_render_gpusel_name(s, i, &b);
        }
        vg_cmd_error("run",
                     "warning: keeping CUDA_VISIBLE_DEVICES='%s', which is not what "
                     "--gpus reserved (%s): the job may use GPUs it has not reserved",
                     cvd, vg_buf_str(&b));
        vg_buf_release(&b);
    }
    vg_visible_release(&v);
}

static void vg_run_announce(const struct vg_run *r, const struct vg_gpusel *s, bool kept,
                            const char *cvd)
{
    if (r->quiet)
        return;
    struct vg_buf b;
    vg_buf_init(&b, 1 << 16);
    if (s->n == 0)
        vg_buf_adds(&b, "no GPU");
    for (size_t i = 0; i < s->n; i++) {
        vg_buf_adds(&b, i ? ", " : "");
        vg_render_gpusel_name(s, i, &b);
        if (!kept)
            vg_buf_printf(&b, " as cuda:%zu", i);
    }
    if (kept)
        vg_cmd_error("run", "the job keeps CUDA_VISIBLE_DEVICES='%s'; reserved: %s", cvd,
                     vg_buf_str(&b));
    else
        vg_cmd_error("run", "the job gets %s", vg_buf_str(&b));
    vg_buf_release(&b);
}

static void vg_run_procs_line(const struct vg_job_procs *ps, struct vg_buf *b)
{
    for (size_t i = 0; i < ps->n; i++)
        vg_buf_printf(b, "%s%ld (%s)", i ? ", " : "", (long)ps->v[i].pid, ps->v[i].comm);
}

/* Said as it happens, so a user waiting through the grace period knows why. */
static void vg_run_notify(void *ctx, int sig, const struct vg_job_procs *ps,
                          const struct vg_job_cleanup_report *rep)
{
    const struct vg_run *r = ctx;
    if (r->quiet)
        return;
    struct vg_buf b;
    vg_buf_init(&b, 1 << 16);
    vg_run_procs_line(ps, &b);
    char grace[32];
    vg_render_duration_ms(r->grace_ms, grace, sizeof(grace));
    if (sig == SIGTERM && rep->termed.n == ps->n)
        vg_cmd_error("run",
                     "the job left %zu process%s behind: %s; sent SIGTERM (SIGKILL "
                     "after %s)",
                     ps->n, ps->n == 1 ? "" : "es", vg_buf_str(&b), grace);
    else if (sig == SIGTERM)
        vg_cmd_error("run", "more processes of the job: %s; sent SIGTERM", vg_buf_str(&b));
    else if (rep->hurried)
        vg_cmd_error("run", "sent SIGKILL without waiting: %s", vg_buf_str(&b));
    else
        vg_cmd_error("run", "still running after the %s grace period: %s; sent SIGKILL", grace,
                     vg_buf_str(&b));
    vg_buf_release(&b);
}

static void vg_run_report_survivors(const struct vg_job_cleanup_report *rep)
{
    for (size_t i = 0; i < rep->survivors.n; i++) {
        const struct vg_job_proc *p = &rep->survivors.v[i];
        vg_cmd_error("run", "warning: process %ld (%s) of the job survived SIGKILL (state %c%s)",
                     (long)p->pid, p->comm, p->state,
                     p->state == 'D' ? ": stuck in the kernel, likely the GPU driver" : "");
    }
}

struct vg_run_look {
    const struct vg_run *r;
    struct vg_job *job;
};

/* A look for the after-run check (act/settle.h's look): the snapshot, and a --verbose note
 * when it has no driver view. */
static int vg_run_look(void *ctx, struct vg_snapshot **snap)
{
    const struct vg_run_look *l = ctx;
    const struct vg_global *g = l->r->g;
    struct vg_snap_opts so = {
        .nvml_path = g->nvml_path,
        .nvml_timeout_ms = g->nvml_timeout_ms,
        .proc_root = g->proc_root,
        .dev_dir = g->dev_dir,
        .scan = g->scan,
    };
    struct vg_err err = VG_ERR_INIT;
    if (vg_snap_build(&so, snap, &err)) {
        return vg_cmd_fail("run", &err, -1, "cannot check the GPUs after the job");
    }
    if (!(*snap)->driver_ok && g->verbose)
        vg_cmd_error("run", "checking device nodes only: %s",
                     (*snap)->driver_error ? (*snap)->driver_error : "no driver");
    return 0;
}

/* Between the after-run looks: a terminating signal cuts the wait short. */
static int vg_run_sleep(void *ctx, unsigned ms)
{
    const struct vg_run_look *l = ctx;
    return vg_job_sleep(l->job, ms);
}

/* Say what the check found (render/run.h), a line at a time. */
static void vg_run_say_after(const struct vg_run *r, const struct vg_afterrun *a,
                             const struct vg_gpusel *s)
{
    struct vg_buf names, out;
    vg_buf_init(&names, 1 << 16);
    vg_buf_init(&out, 1 << 20);
    const char **v = calloc(s->n, sizeof(*v));
    size_t *at = calloc(s->n, sizeof(*at));
    for (size_t i = 0; v && at && i < s->n; i++) {
        at[i] = names.len;
        vg_render_gpusel_name(s, i, &names);
        vg_buf_addc(&names, '\0');
    }
    if (!v || !at || names.err) {
        vg_cmd_error("run", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < s->n; i++)
        v[i] = names.data + at[i];
    vg_render_run_after(&out, a, v, r->g->verbose, r->quiet);
    if (out.err) {
        vg_cmd_error("run", "out of memory");
        goto out;
    }
    for (char *line = out.data, *nl; line && (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        vg_cmd_error("run", "%s", line);
    }
out:
    free(v);
    free(at);
    vg_buf_release(&names);
    vg_buf_release(&out);
}

/* The last look: does anything still hold the job's GPUs? rep: what the cleanup did. */
static void vg_run_check(const struct vg_run *r, const struct vg_gpusel *s, struct vg_job *job,
                         const struct vg_job_cleanup_report *rep)
{
    if (s->n == 0)
        return;
    struct vg_afterrun_gpu *gpus = calloc(s->n, sizeof(*gpus));
    if (!gpus) {
        vg_cmd_error("run", "cannot check the GPUs after the job: out of memory");
        return;
    }
    for (size_t i = 0; i < s->n; i++)
        gpus[i] = (struct vg_afterrun_gpu){&s->gpus.gpus[s->v[i].gpu], s->v[i].mig};
    struct vg_run_look l = {r, job};
    struct vg_afterrun_req req = {
        .gpus = gpus,
        .n = s->n,
        .members = &job->seen,
        .rep = rep,
        .who = {.self = getpid(), .ruid = getuid()},
        .sleep = vg_run_sleep,
        .sleep_ctx = &l,
    };
    struct vg_afterrun a;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_afterrun_check(&req, vg_run_look, &l, &a, &err);
    free(gpus);
    if (rc == -ENOMEM)
        vg_cmd_error("run", "cannot check the GPUs after the job: %s", vg_err_msg(&err));
    vg_err_release(&err);
    if (rc)
        return; /* a failed look has said why */
    vg_run_say_after(r, &a, s);
    vg_afterrun_release(&a);
    if (r->g->verbose)
        vg_cmd_error("run", "checked the job's GPUs after it ended");
}

/* The parse's targets: 0 the struct vg_run, VG_GPUSEL_DST the shared selection options. */
#define VG_RUN_AT(member) VG_OPT_AT(0, struct vg_run, member)

const struct vg_opt vg_run_opts[] = {
    {"gpus", 0, VG_OPT_ARG_REQUIRED, "GPUS",
     "indices (nvidia-smi's numbering), GPU-/MIG- UUIDs or unique UUID\n"
     "prefixes, comma-separated; or auto:N, N GPUs chosen like\n"
     "'vramguard pick -n N' (default auto:1)",
     VG_RUN_GPUS, NULL, VG_OPT_CODE},
    VG_GPUSEL_ROW_MIN_FREE("auto: free memory each GPU needs (20GiB, 512MiB, or a fraction of\n"
                           "its total like 0.5, the default); explicit GPUs: checked if given"),
    VG_GPUSEL_ROW_MAX_UTIL("auto: highest utilisation accepted (default 50)"),
    VG_GPUSEL_ROW_EXCLUDE("auto: never choose these"),
    VG_GPUSEL_ROW_WAIT("wait up to TIMEOUT for the GPUs to be free instead of failing"),
    {"grace", 0, VG_OPT_ARG_REQUIRED, "DURATION",
     "time leftover processes get between SIGTERM and SIGKILL\n"
     "(default 10s; also the job's, should vramguard die)",
     0, NULL,
     VG_OPT_VAL(VG_RUN_AT(grace_ms), .kind = VG_OPT_K_DURATION, .max = VG_HOUR_MS,
                .takes = "a duration up to 1h (0, 500ms, 10s, 2m)")},
    {"keep-env", 0, VG_OPT_ARG_NONE, NULL,
     "keep an existing CUDA_VISIBLE_DEVICES (and CUDA_DEVICE_ORDER);\n"
     "without --gpus, reserve the GPUs it names; warn when it differs\n"
     "from --gpus",
     0, NULL, VG_OPT_VAL(VG_RUN_AT(keep_env), .kind = VG_OPT_K_SET)},
    {"track", 0, VG_OPT_ARG_REQUIRED, "MODE",
     "auto (default): a cgroup when possible, else subreaper;\n"
     "cgroup: fail without one; subreaper: never create one",
     0, NULL,
     VG_OPT_VAL(VG_RUN_AT(track), .kind = VG_OPT_K_WORD, .words = "auto|cgroup|subreaper",
                .takes = "auto, cgroup or subreaper")},
    {"quiet", 'q', VG_OPT_ARG_NONE, NULL, "say nothing unless something is wrong", 0, NULL,
     VG_OPT_VAL(VG_RUN_AT(quiet), .kind = VG_OPT_K_SET)},
    {"verbose", 0, VG_OPT_ARG_NONE, NULL, "also say how the job is tracked, and what happens to it",
     VG_OPT_VERBOSE, NULL, VG_OPT_CODE},
    VG_OPT_TABLE_END,
};

/* The options; -1 to go on (the command is argv[optind...]), else the exit status. */
static int vg_run_parse(struct vg_global *g, struct vg_run *r, struct vg_gpusel_opts *o, int argc,
                        char **argv)
{
    struct vg_err err = VG_ERR_INIT;
    /* .operands: the words after the options are the command to run. */
    struct vg_cmd_parse p = {VG_CMD_PARSE(run), .g = g,
                             .argc = argc,      .argv = argv,
                             .operands = true,  .dst = {[0] = r, [VG_GPUSEL_DST] = o}};
    int c;
    while ((c = vg_cmd_next_opt(&p)) >= 0) {
        int rv = c == VG_RUN_GPUS ? vg_pick_parse_spec(optarg, &o->spec, &err)
                                  : vg_gpusel_opt(o, c, optarg, &err);
        if (rv < 0)
            goto usage;
        r->gpus_given |= c == VG_RUN_GPUS;
    }
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (vg_cmd_refuse_json(g, "run",
                           "run's output is its job's, not a document: use 'vramguard pick "
                           "--json' to see which GPUs it would take"))
        return VG_EXIT_USAGE;
    if (optind >= argc) {
        vg_cmd_error("run", "missing the command to run: vramguard run [options] -- CMD "
                            "[ARGS...] (see 'vramguard run --help')");
        return VG_EXIT_USAGE;
    }
    if (!o->spec.is_auto && o->exclude) {
        vg_cmd_error("run", "--exclude only applies to --gpus auto:N");
        return VG_EXIT_USAGE;
    }
    o->quiet = r->quiet;
    return -1;

usage:
    return vg_cmd_fail("run", &err, VG_EXIT_USAGE, NULL);
}

/* --verbose: how the job is tracked. */
static void vg_run_say_tracking(const struct vg_job *job)
{
    if (job->use_cgroup)
        vg_cmd_error("run", "tracking the job (pid %ld) with cgroup %s%s", (long)job->pid,
                     job->cgroup_path, job->cgroup_kill ? "" : " (no cgroup.kill)");
    if (job->guard_pid > 0)
        vg_cmd_error("run",
                     "guard pid %ld: should vramguard die, it stops the job (SIGKILL after "
                     "the grace period) and keeps its GPUs reserved until the job is gone",
                     (long)job->guard_pid);
    else
        vg_cmd_error("run", "tracking the job (pid %ld) as child subreaper: no cgroup (%s)",
                     (long)job->pid, job->no_cgroup_why ? job->no_cgroup_why : "?");
    if (job->tty)
        vg_cmd_error("run", "the job has the terminal (process group %ld)", (long)job->pid);
}

/* Start the job, wait for it, stop what it left, and look at its GPUs; the job's status. */
static int vg_run_job(struct vg_run *r, const struct vg_gpusel *s, struct vg_job *job,
                      const struct vg_job_opts *jo)
{
    const struct vg_global *g = r->g;
    struct vg_err err = VG_ERR_INIT;
    if (vg_job_start(job, jo, &err)) {
        return vg_cmd_fail("run", &err, VG_EXIT_WARN, NULL);
    }
    if (g->verbose)
        vg_run_say_tracking(job);
    if (job->exec_errno) {
        vg_cmd_error("run", "cannot run '%s': %s", jo->argv[0], strerror(job->exec_errno));
        return vg_job_exec_status(job->exec_errno);
    }
    int status = vg_job_wait(job);
    if (g->verbose) {
        if (WIFSIGNALED(job->wstatus))
            vg_cmd_error("run", "the job was killed by %s (status %d)",
                         strsignal(WTERMSIG(job->wstatus)), status);
        else
            vg_cmd_error("run", "the job exited with status %d", status);
    }
    struct vg_job_cleanup_report rep;
    if (vg_job_cleanup(job, r->grace_ms, &rep, &err)) {
        vg_cmd_error("run", "cannot clean up after the job: %s", vg_err_msg(&err));
        vg_err_release(&err);
    }
    vg_run_report_survivors(&rep);
    vg_run_check(r, s, job, &rep);
    vg_job_cleanup_report_release(&rep);
    return status;
}

/* With the GPUs reserved: the job's environment and inherited reservations, then the job. */
static int vg_run_with_gpus(struct vg_run *r, const struct vg_gpusel *s, struct vg_job *job,
                            char *const *cmd, const char *old_cvd, const char *old_order, bool kept)
{
    char **env = NULL;
    char *owned[1] = {NULL};
    int *lock_fds = NULL;
    int status = VG_EXIT_SOFTWARE;
    struct vg_buf cvd;
    vg_buf_init(&cvd, 1 << 16);
    for (size_t i = 0; i < s->n; i++)
        vg_buf_printf(&cvd, "%s%s", i ? "," : "", s->v[i].uuid);
    /* Kept: CUDA_DEVICE_ORDER is added only where it cannot change the kept value's meaning. */
    bool set_order = !kept || (!old_order && vg_run_uuid_only(old_cvd));
    env = cvd.err ? NULL : vg_run_env(vg_buf_str(&cvd), kept, set_order, owned);
    /* The job inherits the reservations: they last as long as it does, whatever happens to us. */
    lock_fds = env ? calloc(s->n ? s->n : 1, sizeof(*lock_fds)) : NULL;
    if (!lock_fds) {
        vg_cmd_error("run", "out of memory");
        goto out;
    }
    size_t nlock = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].lock_fd >= 0)
            lock_fds[nlock++] = s->v[i].lock_fd;
    vg_run_announce(r, s, kept, old_cvd);
    if (kept && r->gpus_given)
        vg_run_compare_kept(r, s, old_cvd, old_order);

    struct vg_job_opts jo = {
        .argv = cmd,
        .envp = env,
        .track = r->track,
        .cgroup_base = secure_getenv("VRAMGUARD_CGROUP_PARENT"),
        .lock_fds = lock_fds,
        .nlock_fds = nlock,
        .grace_ms = r->grace_ms,
        .log = vg_run_log,
        .notify = vg_run_notify,
        .log_ctx = r,
    };
    status = vg_run_job(r, s, job, &jo);
out:
    vg_buf_release(&cvd);
    free(env);
    free(owned[0]);
    free(lock_fds);
    return status;
}

int vg_cmd_run(struct vg_global *g, int argc, char **argv)
{
    struct vg_gpusel_opts o;
    vg_gpusel_opts_init(&o, "run", g);
    o.lock = true;
    struct vg_run r = {.g = g, .grace_ms = VG_RUN_DEFAULT_GRACE_MS, .track = VG_JOB_TRACK_AUTO};
    int status = vg_run_parse(g, &r, &o, argc, argv);
    if (status >= 0)
        return status;

    const char *old_cvd = getenv("CUDA_VISIBLE_DEVICES");
    const char *old_order = getenv("CUDA_DEVICE_ORDER");
    bool kept = r.keep_env && old_cvd;
    if (kept && !r.gpus_given) {
        o.spec = (struct vg_pick_spec){.is_auto = false, .list = old_cvd};
        o.list_is_cvd = true;
        o.cvd_order = old_order;
    }

    struct vg_job job;
    struct vg_err err = VG_ERR_INIT;
    if (vg_job_init(&job, &err)) {
        vg_job_release(&job);
        return vg_cmd_fail("run", &err, VG_EXIT_SOFTWARE, NULL);
    }
    o.job = &job;
    struct vg_gpusel s;
    status = vg_gpusel_acquire(&o, &s);
    if (status == VG_EXIT_OK)
        status = vg_run_with_gpus(&r, &s, &job, argv + optind, old_cvd, old_order, kept);
    vg_job_release(&job);
    vg_gpusel_release(&s);
    return status;
}
