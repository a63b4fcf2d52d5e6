/*
 * `vramguard clean`: free memory held by leftovers, safely. By default it only prints the plan
 * (act/plan.h): which processes it would stop and why, which it refuses to touch and why, and
 * the memory at stake. With --force it acts through act/kill.h (pidfd, identity re-check,
 * SIGTERM, grace period, SIGKILL), samples again, and reports per GPU what came back, the
 * findings left and, when memory is held with no process left, the GPU reset that alone can
 * free it, which it runs only with --reset --force, as root, after checking again that nothing
 * holds the GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "act/kill.h"
#include "act/plan.h"
#include "act/reset.h"
#include "act/settle.h"
#include "cmd/cmd.h"
#include "model/snapshot.h"
#include "proc/signal.h"
#include "render/clean.h"
#include "rules/rules.h"
#include "util/parse.h"

static const char vg_clean_help[] =
    "usage: vramguard clean [--gpu G] [--pid P] [--orphans] [--user U] [--older-than T]\n"
    "                       [--grace D] [--force] [--reset] [options]\n"
    "\n"
    "Free GPU memory held by leftovers. Without --force, print the plan: each process it would\n"
    "signal, why (the finding), the memory it would free, and what it refuses to touch and why.\n"
    "Without filters it targets only leftovers of finished jobs that orphan-holder is highly\n"
    "confident of, never everything; processes that look orphaned but are no sure leftover (a\n"
    "nohup job, a daemon, a working or stopped process) are listed as left alone, with the\n"
    "reason: name one with --pid to stop it. A stale driver entry is never signalled.\n"
    "\n"
    "With --force, for each target: open a pidfd, re-check that it is the same process (start\n"
    "time, owner) and still holds the GPU, send SIGTERM, wait up to the grace period, then\n"
    "SIGKILL. Then sample again and report per GPU the memory freed and what is left.\n"
    "Never signalled: PID 1, vramguard and its ancestors, kernel threads, infrastructure (X\n"
    "servers and compositors, nvidia-persistenced, nv-hostengine, dcgm-exporter, the fabric\n"
    "manager, MPS, nvidia-smi), another user's process unless you are root, a zombie (its\n"
    "parent is the one to act on), a process stuck in the driver (D state).\n"
    "\n"
    "Options:\n";

static const char vg_clean_help_tail[] =
    "\n"
    "Exit status: 0 plan printed, or everything freed; 1 something still held or refused;\n"
    "2 signalling failed; 3 could not check (no driver view); 64 bad usage.\n"
    "The JSON document (--json) is vramguard.clean/1, described in docs/json.md.\n"
    "\n";

/* What comes back from the parse: the selecting options, kept for the report (--user is
 * also looked up there). The others are stored by their rows. */
enum { VG_CLEAN_FILTER = VG_OPT_FIRST_LOCAL, VG_CLEAN_USER };

#define VG_CLEAN_GRACE_DEFAULT_MS 10000u
/* After SIGKILL a process normally goes at once; one stuck in the kernel never does. */
#define VG_CLEAN_KILL_WAIT_MS 5000u
/* After the stop, how long to look again while the driver catches up (a stopped process still
 * listed, memory still being freed). */
#define VG_CLEAN_SETTLE_MS 2000u

struct vg_clean {
    struct vg_global *g;
    const char *gpu_arg;
    bool force, reset;
    unsigned grace_ms;
    struct vg_plan_opts po;
    struct vg_buf filters; /* the selecting options as given, for the report */
    struct vg_kill_who who;
    struct vg_rule_opts ropts;
    /* What one run looks at and does. */
    struct vg_snapshot *before, *after;
    struct vg_findings fs_before, fs_after;
    struct vg_plan plan;
    struct vg_settle_result settle; /* with --force: the stop and its verdict */
    const struct vg_kill *kills;    /* plan.n entries with --force (in settle) */
    struct vg_reset *resets;
    size_t nresets;
};

static void vg_clean_filter(struct vg_clean *c, const char *opt, const char *val)
{
    /* unbounded (argv is): a failure to grow is checked once, after parsing */
    vg_buf_printf(&c->filters, "%s--%s%s%s", c->filters.len ? " " : "", opt, val ? " " : "",
                  val ? val : "");
}

#define VG_CLEAN_AT(member) VG_OPT_AT(0, struct vg_clean, member)
#define VG_CLEAN_GIVEN(member) VG_OPT_GIVEN(struct vg_clean, member)

const struct vg_opt vg_clean_opts[] = {
    {"gpu", 0, VG_OPT_ARG_REQUIRED, "G", "holders of GPU G (index or UUID prefix)", VG_CLEAN_FILTER,
     NULL, VG_OPT_VAL(VG_CLEAN_AT(gpu_arg), .kind = VG_OPT_K_STR, .then_code = true)},
    {"pid", 0, VG_OPT_ARG_REQUIRED, "P", "process P", VG_CLEAN_FILTER, NULL,
     VG_OPT_VAL(VG_CLEAN_AT(po.pid), VG_CLEAN_GIVEN(po.by_pid), .kind = VG_OPT_K_PID,
                .takes = "a process id", .then_code = true)},
    {"user", 0, VG_OPT_ARG_REQUIRED, "U", "holders owned by user U (name or uid)", VG_CLEAN_USER,
     NULL, VG_OPT_CODE},
    {"older-than", 0, VG_OPT_ARG_REQUIRED, "T", "holders started more than T ago (30m, 2h, 1d)",
     VG_CLEAN_FILTER, NULL,
     VG_OPT_VAL(VG_CLEAN_AT(po.older_than_ms), VG_CLEAN_GIVEN(po.by_age), .kind = VG_OPT_K_DURATION,
                .max = UINT64_MAX, .takes = "a duration such as 30m, 2h or 1d", .then_code = true)},
    {"orphans", 0, VG_OPT_ARG_NONE, NULL,
     "only sure leftovers of finished jobs (the default without filters)", VG_CLEAN_FILTER, NULL,
     VG_OPT_VAL(VG_CLEAN_AT(po.orphans), .kind = VG_OPT_K_SET, .then_code = true)},
    {"grace", 0, VG_OPT_ARG_REQUIRED, "D", "wait D after SIGTERM before SIGKILL (default 10s)", 0,
     NULL,
     VG_OPT_VAL(VG_CLEAN_AT(grace_ms), .kind = VG_OPT_K_DURATION, .max = VG_HOUR_MS,
                .takes = "a duration up to 1h (e.g. 500ms, 10s)")},
    {"force", 0, VG_OPT_ARG_NONE, NULL, "act on the plan", 0, NULL,
     VG_OPT_VAL(VG_CLEAN_AT(force), .kind = VG_OPT_K_SET)},
    {"reset", 0, VG_OPT_ARG_NONE, NULL,
     "when memory is held with no process left, reset the GPU with\n"
     "nvidia-smi --gpu-reset (only with --force, as root)",
     0, NULL, VG_OPT_VAL(VG_CLEAN_AT(reset), .kind = VG_OPT_K_SET)},
    VG_OPT_TABLE_END,
};

static int vg_clean_parse(struct vg_clean *c, int argc, char **argv)
{
    struct vg_cmd_parse p = {VG_CMD_PARSE(clean), .g = c->g,  .argc = argc,
                             .argv = argv,        .dst = {c}, .replay_ok = true};
    int ch;
    while ((ch = vg_cmd_next_opt(&p)) >= 0) {
        if (ch == VG_CLEAN_USER) {
            if (vg_cmd_user(optarg, &c->po.uid) != 0) {
                vg_cmd_error("clean", "--user takes a user name or uid; no user '%s' here", optarg);
                return VG_EXIT_USAGE;
            }
            c->po.by_user = true;
        }
        vg_clean_filter(c, p.row->name, optarg);
    }
    if (ch != VG_CMD_OPT_END)
        return ch == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (c->filters.err) {
        vg_cmd_error("clean", "cannot keep the filters given: %s", strerror(-c->filters.err));
        return VG_EXIT_SOFTWARE;
    }
    /* A record is what a host was: its plan can be shown, not carried out, and the ages of
     * its processes are not known without the clock of the host that recorded it. */
    if (c->g->replay && (c->force || c->reset || c->po.by_age)) {
        vg_cmd_error("clean", "--%s cannot work on a replay ('%s' is a record, not this host)",
                     c->force   ? "force"
                     : c->reset ? "reset"
                                : "older-than",
                     c->g->replay);
        return VG_EXIT_USAGE;
    }
    return -1;
}

/* Who is asking, and the clock the plan ages processes by. */
static int vg_clean_who(struct vg_clean *c, const struct vg_snapshot *snap)
{
    c->po.pidns_trusted =
        snap->procs.self_nspid_depth <= 1 && snap->procs.pidns == VG_PROC_PIDNS_INITIAL;
    if (c->g->replay) {
        /* the record's processes are not ours nor our ancestors; no age is known */
        c->po.who = (struct vg_kill_ctx){.self = 0, .ruid = getuid()};
        return 0;
    }
    if (vg_cmd_who_open(c->g, "clean", &c->who) != 0)
        return -1;
    c->po.who = vg_kill_who_ctx(&c->who);
    long tck = sysconf(_SC_CLK_TCK);
    struct timespec ts;
    if (tck > 0 && clock_gettime(CLOCK_BOOTTIME, &ts) == 0) {
        c->po.clk_tck = (unsigned long)tck;
        c->po.now_ticks = (uint64_t)ts.tv_sec * (uint64_t)tck +
                          (uint64_t)ts.tv_nsec * (uint64_t)tck / 1000000000u;
    }
    return 0;
}

static int vg_clean_sample(struct vg_clean *c, struct vg_snapshot **snap, struct vg_findings *fs,
                           unsigned flags)
{
    if (vg_cmd_snapshot(c->g, "clean", VG_CMD_SNAP_JUDGE | flags, snap))
        return VG_EXIT_UNKNOWN;
    vg_findings_init(fs);
    struct vg_err err = VG_ERR_INIT;
    if (vg_rules_run(*snap, &c->ropts, fs, &err)) {
        return vg_cmd_fail("clean", &err, VG_EXIT_SOFTWARE, NULL);
    }
    return 0;
}

/* The fresh look before a reset (act/reset.h). */
static int vg_clean_look(void *ctx, struct vg_snapshot **snap)
{
    const struct vg_clean *c = ctx;
    return vg_cmd_snapshot(c->g, "clean", 0, snap);
}

/* Sample, resolve --gpu, learn who we are, and plan. -1 to go on, else the exit status. */
static int vg_clean_prepare(struct vg_clean *c)
{
    int status;
    if ((status = vg_clean_sample(c, &c->before, &c->fs_before, VG_CMD_SNAP_DIAGNOSED)) != 0)
        return status;
    if (c->gpu_arg) {
        if (!c->before->driver_ok) {
            vg_cmd_error("clean", "--gpu needs the driver's view, which is unavailable: %s",
                         c->before->driver_error ? c->before->driver_error : "unknown reason");
            return VG_EXIT_UNKNOWN;
        }
        if (vg_cmd_find_gpu(c->before, "clean", c->gpu_arg, &c->po.gpu))
            return VG_EXIT_USAGE;
        c->po.by_gpu = true;
    }
    if (vg_clean_who(c, c->before))
        return VG_EXIT_UNKNOWN;
    struct vg_err err = VG_ERR_INIT;
    if (vg_plan_build(c->before, &c->fs_before, &c->po, &c->plan, &err)) {
        return vg_cmd_fail("clean", &err, VG_EXIT_SOFTWARE, NULL);
    }
    return -1;
}

/* --force: stop the plan's targets and settle (act/settle.h), sample again, and with --reset run
 * the resets still needed and sample once more. -1 to go on, else the exit status. */
static int vg_clean_act(struct vg_clean *c)
{
    /* A pidfd names a process of OUR PID namespace: with another namespace's procfs the
     * numbers in the plan would name other processes. */
    if (!c->who.own_pidns) {
        vg_cmd_error("clean",
                     "--force needs the procfs of vramguard's own PID namespace; "
                     "'%s' numbers processes differently (run clean where those "
                     "processes live)",
                     c->before->proc_root);
        return VG_EXIT_UNKNOWN;
    }
    const struct vg_plan *plan = &c->plan;
    struct vg_settle_target *targets = NULL;
    size_t ntargets = 0;
    struct vg_settle_want *wants = calloc(plan->nscope ? plan->nscope : 1, sizeof(*wants));
    if (!wants || vg_settle_targets_from_plan(plan, NULL, &targets, &ntargets)) {
        free(wants);
        vg_cmd_error("clean", "out of memory");
        return VG_EXIT_SOFTWARE;
    }
    for (size_t i = 0; i < plan->nscope; i++)
        wants[i] = (struct vg_settle_want){.gpu = plan->scope[i], .ref = plan->scope[i]};
    struct vg_kill_nvml nvml = {.path = c->g->nvml_path, .timeout_ms = c->g->nvml_timeout_ms};
    struct vg_settle_req req = {
        .targets = targets,
        .ntargets = ntargets,
        .gpus = wants,
        .ngpus = plan->nscope,
        .grace_ms = c->grace_ms,
        .kill_wait_ms = VG_CLEAN_KILL_WAIT_MS,
        .timeout_ms = VG_CLEAN_SETTLE_MS,
        .tolerance = c->ropts.unattributed_min,
        .stop = true,
        .look_after = true,
        .proc_root_fd = c->who.root_fd,
        .dev_dir = c->before->dev_dir,
        .who = c->po.who,
        .nvml = vg_kill_nvml_lists,
        .nvml_arg = &nvml,
    };
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_settle_run(&req, c->before, vg_clean_look, c, &c->settle, &err);
    free(wants);
    free(targets);
    if (rc) {
        return vg_cmd_fail("clean", &err, VG_EXIT_SOFTWARE, NULL);
    }
    c->kills = c->settle.kills;

    int status;
    if ((status = vg_clean_sample(c, &c->after, &c->fs_after, 0)) != 0)
        return status;
    if (vg_reset_needed(plan, c->before, c->after, c->ropts.unattributed_min, &c->resets,
                        &c->nresets)) {
        vg_cmd_error("clean", "out of memory");
        return VG_EXIT_SOFTWARE;
    }
    if (!c->reset || !c->nresets)
        return -1;
    vg_reset_run(c->resets, c->nresets, vg_clean_look, c);
    bool ran = false;
    for (size_t i = 0; i < c->nresets; i++)
        ran |= c->resets[i].attempted;
    if (ran) {
        /* Report what the reset achieved. */
        vg_findings_release(&c->fs_after);
        vg_snap_free(c->after);
        c->after = NULL;
        if ((status = vg_clean_sample(c, &c->after, &c->fs_after, 0)) != 0)
            return status;
    }
    return -1;
}

/* The exit status of a run: after --force, whether a signal failed (critical) or something is
 * still unsettled: a refusal, a stopped process that still holds, memory still unexplained. */
static int vg_clean_status(const struct vg_clean *c)
{
    if (!c->force)
        return c->before->driver_ok ? VG_EXIT_OK : VG_EXIT_UNKNOWN;
    const struct vg_plan *plan = &c->plan;
    const struct vg_snapshot *after = c->after;
    bool failed = false, unsettled = plan->nrefused > 0;
    for (size_t i = 0; i < plan->n; i++) {
        if (!plan->v[i].signal)
            continue;
        const struct vg_kill *k = &c->kills[i];
        failed |= k->outcome == VG_KILL_FAILED;
        unsettled |= k->outcome == VG_KILL_REFUSED && k->refusal != VG_KILL_RELEASED;
        for (size_t h = 0; h < after->nholdings; h++)
            unsettled |= after->holdings[h].pid == plan->v[i].id.pid &&
                         (k->outcome == VG_KILL_TERMINATED || k->outcome == VG_KILL_KILLED);
    }
    for (size_t i = 0; i < plan->nscope; i++) {
        const struct vg_gpu *bg = &c->before->gpus.gpus[plan->scope[i]];
        for (size_t k = 0; (bg->known & VG_GPU_K_UUID) && k < after->gpus.ngpus; k++)
            if ((after->gpus.gpus[k].known & VG_GPU_K_UUID) &&
                strcmp(after->gpus.gpus[k].uuid, bg->uuid) == 0)
                unsettled |= vg_plan_unexplained(after, k, c->ropts.unattributed_min);
    }
    if (failed)
        return VG_EXIT_CRIT;
    if (unsettled)
        return VG_EXIT_WARN;
    if (!c->before->driver_ok || !after->driver_ok)
        return VG_EXIT_UNKNOWN;
    return VG_EXIT_OK;
}

static int vg_clean_emit(const struct vg_clean *c, int status)
{
    struct vg_clean_view view = {
        .before = c->before,
        .plan = &c->plan,
        .opts = &c->po,
        .filters = vg_buf_str(&c->filters),
        .force = c->force,
        .reset = c->reset,
        .grace_ms = c->grace_ms,
        .kills = c->kills,
        .settle = c->force ? &c->settle : NULL,
        .after = c->after,
        .after_findings = c->force ? &c->fs_after : NULL,
        .resets = c->resets,
        .nresets = c->nresets,
    };
    struct vg_render_opts ro = {.color = !c->g->json && vg_cmd_use_color(c->g),
                                .width = vg_cmd_term_width(),
                                .verbose = c->g->verbose};
    struct vg_buf out;
    vg_buf_init(&out, 0);
    int rc =
        c->g->json ? vg_render_clean_json(&view, &out) : vg_render_clean_text(&view, &ro, &out);
    status = vg_cmd_emit("clean", rc, &out, status);
    vg_buf_release(&out);
    return status;
}

static void vg_clean_release(struct vg_clean *c)
{
    vg_settle_result_release(&c->settle);
    free(c->resets);
    vg_plan_release(&c->plan);
    vg_findings_release(&c->fs_after);
    vg_findings_release(&c->fs_before);
    vg_snap_free(c->after);
    vg_snap_free(c->before);
    vg_kill_who_release(&c->who);
    vg_buf_release(&c->filters);
}

int vg_cmd_clean(struct vg_global *g, int argc, char **argv)
{
    struct vg_clean c = {.g = g, .grace_ms = VG_CLEAN_GRACE_DEFAULT_MS, .who.root_fd = -1};
    vg_settle_result_init(&c.settle);
    vg_rule_opts_init(&c.ropts);
    c.ropts.check_shell = false;
    vg_buf_init(&c.filters, 0);
    int status = vg_clean_parse(&c, argc, argv);
    if (status >= 0) {
        vg_buf_release(&c.filters);
        return status;
    }
    vg_findings_init(&c.fs_before);
    vg_findings_init(&c.fs_after);
    vg_plan_init(&c.plan);

    if ((status = vg_clean_prepare(&c)) < 0) {
        if (c.force)
            status = vg_clean_act(&c);
        else if (vg_reset_needed(&c.plan, c.before, c.before, c.ropts.unattributed_min, &c.resets,
                                 &c.nresets)) {
            vg_cmd_error("clean", "out of memory");
            status = VG_EXIT_SOFTWARE;
        }
    }
    if (status < 0)
        status = vg_clean_emit(&c, vg_clean_status(&c));
    vg_clean_release(&c);
    return status;
}
