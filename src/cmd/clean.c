/*
 * `vramguard clean`: free memory held by leftovers, safely. By default it only prints the plan
 * (rules/plan.h): which processes it would stop and why, which it refuses to touch and why, and
 * the memory at stake. With --force it acts through model/kill.h (pidfd, identity re-check,
 * SIGTERM, grace period, SIGKILL), samples again, and reports per GPU what came back, the
 * findings left and, when memory is held with no process left, the GPU reset that alone can
 * free it, which it runs only with --reset --force, as root, after checking again that nothing
 * holds the GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "gpu/collect.h"
#include "model/kill.h"
#include "model/snapshot.h"
#include "model/visible.h"
#include "proc/signal.h"
#include "render/clean.h"
#include "rules/plan.h"
#include "rules/rules.h"
#include "util/parse.h"

extern char **environ;

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
    "Options:\n"
    "  --gpu G              holders of GPU G (index or UUID prefix)\n"
    "  --pid P              process P\n"
    "  --user U             holders owned by user U (name or uid)\n"
    "  --older-than T       holders started more than T ago (30m, 2h, 1d)\n"
    "  --orphans            only sure leftovers of finished jobs (the default without filters)\n"
    "  --grace D            wait D after SIGTERM before SIGKILL (default 10s)\n"
    "  --force              act on the plan\n"
    "  --reset              when memory is held with no process left, reset the GPU with\n"
    "                       nvidia-smi --gpu-reset (only with --force, as root)\n"
    "\n"
    "Exit status: 0 plan printed, or everything freed; 1 something still held or refused;\n"
    "2 signalling failed; 3 could not check (no driver view); 64 bad usage.\n"
    "The JSON document (--json) is vramguard.clean/1, described in docs/json.md.\n"
    "\n";

enum {
    VG_OPT_GPU = VG_OPT_FIRST_LOCAL,
    VG_OPT_PID,
    VG_OPT_USER,
    VG_OPT_OLDER,
    VG_OPT_ORPHANS,
    VG_OPT_GRACE,
    VG_OPT_FORCE,
    VG_OPT_RESET,
};

#define VG_CLEAN_GRACE_DEFAULT_MS 10000u
/* After SIGKILL a process normally goes at once; one stuck in the kernel never does. */
#define VG_CLEAN_KILL_WAIT_MS 5000u
/* A reset takes seconds; a wedged one is reported, never killed half-way. */
#define VG_CLEAN_RESET_WAIT_MS 300000u

struct vg_clean {
    struct vg_global *g;
    const char *gpu_arg;
    bool force, reset;
    unsigned grace_ms;
    struct vg_plan_opts po;
    struct vg_buf filters; /* the selecting options as given, for the report */
    int root_fd;
    pid_t *ancestors;
    size_t nancestors;
    struct vg_rule_opts ropts;
};

static int vg_clean_user(const char *arg, uid_t *uid)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwnam_r(arg, &pw, buf, sizeof(buf), &res) == 0 && res) {
        *uid = res->pw_uid;
        return 0;
    }
    int64_t v;
    if (vg_parse_i64(arg, 0, VG_PID_MAX, &v) == 0) {
        *uid = (uid_t)v;
        return 0;
    }
    return -1;
}

static void vg_clean_filter(struct vg_clean *c, const char *opt, const char *val)
{
    /* unbounded (argv is): a failure to grow is checked once, after parsing */
    vg_buf_printf(&c->filters, "%s%s%s%s", c->filters.len ? " " : "", opt, val ? " " : "",
                  val ? val : "");
}

static int vg_clean_parse(struct vg_clean *c, int argc, char **argv)
{
    static const struct option longopts[] = {
        VG_GLOBAL_LONGOPTS,
        {"gpu", required_argument, NULL, VG_OPT_GPU},
        {"pid", required_argument, NULL, VG_OPT_PID},
        {"user", required_argument, NULL, VG_OPT_USER},
        {"older-than", required_argument, NULL, VG_OPT_OLDER},
        {"orphans", no_argument, NULL, VG_OPT_ORPHANS},
        {"grace", required_argument, NULL, VG_OPT_GRACE},
        {"force", no_argument, NULL, VG_OPT_FORCE},
        {"reset", no_argument, NULL, VG_OPT_RESET},
        {NULL, 0, NULL, 0},
    };
    struct vg_cmd_parse p = {.g = c->g, .cmd = "clean", .help = vg_clean_help,
                             .longopts = longopts, .argc = argc, .argv = argv};
    int ch;
    while ((ch = vg_cmd_next_opt(&p)) >= 0) {
        switch (ch) {
        case VG_OPT_GPU:
            c->gpu_arg = optarg;
            vg_clean_filter(c, "--gpu", optarg);
            break;
        case VG_OPT_PID: {
            int64_t pid;
            if (vg_parse_i64(optarg, 1, VG_PID_MAX, &pid) != 0) {
                vg_cmd_error("clean", "--pid takes a process id, not '%s'", optarg);
                return VG_EXIT_USAGE;
            }
            c->po.by_pid = true;
            c->po.pid = (pid_t)pid;
            vg_clean_filter(c, "--pid", optarg);
            break;
        }
        case VG_OPT_USER:
            if (vg_clean_user(optarg, &c->po.uid) != 0) {
                vg_cmd_error("clean", "--user takes a user name or uid; no user '%s' here", optarg);
                return VG_EXIT_USAGE;
            }
            c->po.by_user = true;
            vg_clean_filter(c, "--user", optarg);
            break;
        case VG_OPT_OLDER: {
            uint64_t ms;
            if (vg_parse_duration_ms(optarg, &ms) != 0) {
                vg_cmd_error("clean",
                             "--older-than takes a duration such as 30m, 2h or 1d, "
                             "not '%s'",
                             optarg);
                return VG_EXIT_USAGE;
            }
            c->po.by_age = true;
            c->po.older_than_ms = ms;
            vg_clean_filter(c, "--older-than", optarg);
            break;
        }
        case VG_OPT_ORPHANS:
            c->po.orphans = true;
            vg_clean_filter(c, "--orphans", NULL);
            break;
        case VG_OPT_GRACE: {
            uint64_t ms;
            if (vg_parse_duration_ms(optarg, &ms) != 0 || ms > VG_HOUR_MS) {
                vg_cmd_error("clean",
                             "--grace takes a duration up to 1h (e.g. 500ms, 10s), "
                             "not '%s'",
                             optarg);
                return VG_EXIT_USAGE;
            }
            c->grace_ms = (unsigned)ms;
            break;
        }
        case VG_OPT_FORCE:
            c->force = true;
            break;
        case VG_OPT_RESET:
            c->reset = true;
            break;
        }
    }
    if (ch != VG_CMD_OPT_END)
        return ch == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (c->filters.err) {
        vg_cmd_error("clean", "cannot keep the filters given: %s", strerror(-c->filters.err));
        return VG_EXIT_SOFTWARE;
    }
    return -1;
}

/* Who is asking, as this procfs numbers processes. */
static int vg_clean_who(struct vg_clean *c, const struct vg_snapshot *snap)
{
    const char *root = c->g->proc_root && *c->g->proc_root ? c->g->proc_root : "/proc";
    c->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->root_fd < 0) {
        vg_cmd_error("clean", "cannot open '%s': %s", root, strerror(errno));
        return -1;
    }
    pid_t self;
    if (vg_proc_self_pid(c->root_fd, &self) != 0)
        self = getpid();
    struct vg_err err = VG_ERR_INIT;
    if (vg_proc_ancestors(c->root_fd, self, &c->ancestors, &c->nancestors, &err) != 0) {
        vg_cmd_error("clean", "%s", vg_err_msg(&err));
        vg_err_release(&err);
        return -1;
    }
    c->po.who.self = self;
    c->po.who.ancestors = c->ancestors;
    c->po.who.nancestors = c->nancestors;
    c->po.who.ruid = getuid();
    c->po.pidns_trusted = snap->procs.self_nspid_depth <= 1 && vg_proc_is_host_pidns(c->root_fd);
    long tck = sysconf(_SC_CLK_TCK);
    struct timespec ts;
    if (tck > 0 && clock_gettime(CLOCK_BOOTTIME, &ts) == 0) {
        c->po.clk_tck = (unsigned long)tck;
        c->po.now_ticks = (uint64_t)ts.tv_sec * (uint64_t)tck +
                          (uint64_t)ts.tv_nsec * (uint64_t)tck / 1000000000u;
    }
    return 0;
}

static int vg_clean_sample(struct vg_clean *c, struct vg_snapshot **snap, struct vg_findings *fs)
{
    if (vg_cmd_snapshot(c->g, "clean", VG_CMD_SNAP_JUDGE, snap))
        return VG_EXIT_UNKNOWN;
    vg_findings_init(fs);
    struct vg_err err = VG_ERR_INIT;
    if (vg_rules_run(*snap, &c->ropts, fs, &err)) {
        vg_cmd_error("clean", "%s", vg_err_msg(&err));
        vg_err_release(&err);
        return VG_EXIT_SOFTWARE;
    }
    return 0;
}

/* Does the driver list pid right now? Asked only for a target whose device fds show nothing. */
static int vg_clean_nvml_lists(void *arg, pid_t pid)
{
    const struct vg_global *g = arg;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_gpu_collect(
        g->nvml_path, g->nvml_timeout_ms ? g->nvml_timeout_ms : VG_SNAP_NVML_TIMEOUT_MS, &l, &err);
    vg_err_release(&err);
    int found = rc ? -1 : 0;
    for (size_t i = 0; !rc && i < l.ngpus && !found; i++) {
        const struct vg_gpu *d = &l.gpus[i];
        for (size_t k = 0; k < d->nprocs && !found; k++)
            found = d->procs[k].pid == (uint32_t)pid;
        for (size_t m = 0; m < d->nmig && !found; m++)
            for (size_t k = 0; k < d->mig[m].nprocs && !found; k++)
                found = d->mig[m].procs[k].pid == (uint32_t)pid;
    }
    vg_gpu_list_release(&l);
    return found;
}

/* GPUs of the plan's scope (before-snapshot indices) that snap shows needing a reset. */
static int vg_clean_resets(const struct vg_clean *c, const struct vg_plan *plan,
                           const struct vg_snapshot *before, const struct vg_snapshot *snap,
                           struct vg_clean_reset **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < plan->nscope; i++) {
        const struct vg_gpu *bg = &before->gpus.gpus[plan->scope[i]];
        if (!(bg->known & VG_GPU_K_UUID))
            continue;
        for (size_t k = 0; k < snap->gpus.ngpus; k++) {
            const struct vg_gpu *g = &snap->gpus.gpus[k];
            if (!(g->known & VG_GPU_K_UUID) || strcmp(g->uuid, bg->uuid) != 0 ||
                !vg_plan_reset_needed(snap, k, c->ropts.unattributed_min))
                continue;
            struct vg_clean_reset *nv = realloc(*out, (*n + 1) * sizeof(*nv));
            if (!nv)
                return -ENOMEM;
            *out = nv;
            nv[*n] = (struct vg_clean_reset){
                .uuid = bg->uuid, .index = g->index, .held = snap->per_gpu[k].unexplained_bytes};
            (*n)++;
        }
    }
    return 0;
}

/* The nvidia-smi PATH would run, or NULL. */
static char *vg_clean_find_smi(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char *cand = NULL;
        if (n && asprintf(&cand, "%.*s/nvidia-smi", (int)n, path) > 0) {
            struct stat stt;
            if (stat(cand, &stt) == 0 && S_ISREG(stt.st_mode) && access(cand, X_OK) == 0)
                return cand;
        }
        free(cand);
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}

/* Run nvidia-smi --gpu-reset -i UUID, its output on our stderr (stdout may carry JSON), and
 * record its exit status (-SIG when a signal ended it) or why it could not be run. */
static void vg_clean_run_reset(struct vg_clean_reset *r, const char *smi)
{
    char *argv[] = {(char *)"nvidia-smi", (char *)"--gpu-reset", (char *)"-i", (char *)r->uuid,
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    pid_t pid;
    fflush(NULL);
    int rc = posix_spawn(&pid, smi, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        r->refused = "nvidia-smi could not be started";
        return;
    }
    int fd, exited = 0;
    if (vg_proc_pidfd_open(pid, &fd) == 0) {
        exited = vg_proc_pidfd_exited(fd, VG_CLEAN_RESET_WAIT_MS);
        close(fd);
    } else {
        exited = 1; /* no pidfd (old kernel): wait plainly */
    }
    if (exited != 1) {
        r->refused = "nvidia-smi did not finish within 5 minutes; it is left running";
        return;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->attempted = true;
    r->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
}

/* --reset --force: run the resets that are allowed, each after a fresh look that nothing
 * holds the GPU (the look is a full snapshot whose NVML session is closed before it returns,
 * so vramguard itself holds nothing while the reset runs). */
static void vg_clean_do_resets(struct vg_clean *c, struct vg_clean_reset *rs, size_t n)
{
    if (!n)
        return;
    char *smi = NULL;
    for (size_t i = 0; i < n; i++) {
        struct vg_clean_reset *r = &rs[i];
        if (getuid() != 0 || geteuid() != 0) {
            r->refused = "a GPU reset needs root";
            continue;
        }
        /* nvidia-smi -i takes a comma-separated list: a driver's UUID with a comma in it would
         * reset other GPUs than this one. */
        if (!vg_visible_uuid_ok(r->uuid)) {
            r->refused = "its UUID is not a well-formed UUID: nvidia-smi -i could read it as "
                         "other GPUs";
            continue;
        }
        if (!smi && !(smi = vg_clean_find_smi())) {
            r->refused = "nvidia-smi is not in PATH";
            continue;
        }
        struct vg_snapshot *now = NULL;
        if (vg_cmd_snapshot(c->g, "clean", 0, &now)) {
            r->refused = "could not look again before the reset";
            continue;
        }
        bool ok = now->driver_ok, found = false;
        for (size_t k = 0; ok && k < now->gpus.ngpus; k++) {
            const struct vg_gpu *g = &now->gpus.gpus[k];
            if (!(g->known & VG_GPU_K_UUID) || strcmp(g->uuid, r->uuid) != 0)
                continue;
            found = true;
            size_t first, count;
            vg_snap_gpu_holdings(now, k, &first, &count);
            if (count) {
                r->refused = "a process holds the GPU again: not reset";
                ok = false;
            }
        }
        if (!now->driver_ok)
            r->refused = "the driver's view is unavailable: cannot check that the GPU is free";
        else if (!found)
            r->refused = "the GPU is gone from the driver's list";
        vg_snap_free(now);
        if (ok && found)
            vg_clean_run_reset(r, smi);
    }
    free(smi);
}

int vg_cmd_clean(struct vg_global *g, int argc, char **argv)
{
    struct vg_clean c = {.g = g, .grace_ms = VG_CLEAN_GRACE_DEFAULT_MS, .root_fd = -1};
    vg_rule_opts_init(&c.ropts);
    c.ropts.check_shell = false;
    vg_buf_init(&c.filters, 0);
    int status = vg_clean_parse(&c, argc, argv);
    if (status >= 0) {
        vg_buf_release(&c.filters);
        return status;
    }

    struct vg_snapshot *before = NULL, *after = NULL;
    struct vg_findings fs_before, fs_after;
    vg_findings_init(&fs_before);
    vg_findings_init(&fs_after);
    struct vg_plan plan;
    vg_plan_init(&plan);
    struct vg_kill *kills = NULL;
    struct vg_clean_reset *resets = NULL;
    size_t nresets = 0;
    struct vg_err err = VG_ERR_INIT;
    struct vg_buf out;
    vg_buf_init(&out, 0);

    if ((status = vg_clean_sample(&c, &before, &fs_before)) != 0)
        goto done;
    if (c.gpu_arg) {
        if (!before->driver_ok) {
            vg_cmd_error("clean", "--gpu needs the driver's view, which is unavailable: %s",
                         before->driver_error ? before->driver_error : "unknown reason");
            status = VG_EXIT_UNKNOWN;
            goto done;
        }
        if (vg_cmd_find_gpu(before, "clean", c.gpu_arg, &c.po.gpu)) {
            status = VG_EXIT_USAGE;
            goto done;
        }
        c.po.by_gpu = true;
    }
    if (vg_clean_who(&c, before)) {
        status = VG_EXIT_UNKNOWN;
        goto done;
    }
    if (vg_plan_build(before, &fs_before, &c.po, &plan, &err)) {
        vg_cmd_error("clean", "%s", vg_err_msg(&err));
        status = VG_EXIT_SOFTWARE;
        goto done;
    }

    bool failed = false, unsettled = plan.nrefused > 0;
    if (c.force) {
        /* A pidfd names a process of OUR PID namespace: with another namespace's procfs the
         * numbers in the plan would name other processes. */
        pid_t self;
        if (vg_proc_self_pid(c.root_fd, &self) != 0 || self != getpid()) {
            vg_cmd_error("clean",
                         "--force needs the procfs of vramguard's own PID namespace; "
                         "'%s' numbers processes differently (run clean where those "
                         "processes live)",
                         before->proc_root);
            status = VG_EXIT_UNKNOWN;
            goto done;
        }
        kills = calloc(plan.n ? plan.n : 1, sizeof(*kills));
        if (!kills) {
            vg_cmd_error("clean", "out of memory");
            status = VG_EXIT_SOFTWARE;
            goto done;
        }
        for (size_t i = 0; i < plan.n; i++) {
            vg_kill_init(&kills[i], &plan.v[i].id);
            if (!plan.v[i].signal)
                continue;
            if (vg_kill_start(&kills[i], c.root_fd, before->dev_dir, &c.po.who, vg_clean_nvml_lists,
                              g, &err)) {
                vg_cmd_error("clean", "%s", vg_err_msg(&err));
                status = VG_EXIT_SOFTWARE;
                goto done;
            }
        }
        vg_kill_finish(kills, plan.n, c.grace_ms, VG_CLEAN_KILL_WAIT_MS);

        if ((status = vg_clean_sample(&c, &after, &fs_after)) != 0)
            goto done;
        if (vg_clean_resets(&c, &plan, before, after, &resets, &nresets)) {
            vg_cmd_error("clean", "out of memory");
            status = VG_EXIT_SOFTWARE;
            goto done;
        }
        if (c.reset && nresets) {
            vg_clean_do_resets(&c, resets, nresets);
            bool ran = false;
            for (size_t i = 0; i < nresets; i++)
                ran |= resets[i].attempted;
            if (ran) {
                /* Report what the reset achieved. */
                vg_findings_release(&fs_after);
                vg_snap_free(after);
                after = NULL;
                if ((status = vg_clean_sample(&c, &after, &fs_after)) != 0)
                    goto done;
            }
        }
        for (size_t i = 0; i < plan.n; i++) {
            if (!plan.v[i].signal)
                continue;
            const struct vg_kill *k = &kills[i];
            failed |= k->outcome == VG_KILL_FAILED;
            unsettled |= k->outcome == VG_KILL_REFUSED && k->refusal != VG_KILL_RELEASED;
            for (size_t h = 0; h < after->nholdings; h++)
                unsettled |= after->holdings[h].pid == plan.v[i].id.pid &&
                             (k->outcome == VG_KILL_TERMINATED || k->outcome == VG_KILL_KILLED);
        }
        for (size_t i = 0; i < plan.nscope; i++) {
            const struct vg_gpu *bg = &before->gpus.gpus[plan.scope[i]];
            for (size_t k = 0; (bg->known & VG_GPU_K_UUID) && k < after->gpus.ngpus; k++)
                if ((after->gpus.gpus[k].known & VG_GPU_K_UUID) &&
                    strcmp(after->gpus.gpus[k].uuid, bg->uuid) == 0)
                    unsettled |= vg_plan_unexplained(after, k, c.ropts.unattributed_min);
        }
    } else if (vg_clean_resets(&c, &plan, before, before, &resets, &nresets)) {
        vg_cmd_error("clean", "out of memory");
        status = VG_EXIT_SOFTWARE;
        goto done;
    }

    if (!c.force)
        status = before->driver_ok ? VG_EXIT_OK : VG_EXIT_UNKNOWN;
    else if (failed)
        status = VG_EXIT_CRIT;
    else if (unsettled)
        status = VG_EXIT_WARN;
    else if (!before->driver_ok || !after->driver_ok)
        status = VG_EXIT_UNKNOWN;
    else
        status = VG_EXIT_OK;

    struct vg_clean_view view = {
        .before = before,
        .plan = &plan,
        .opts = &c.po,
        .filters = vg_buf_str(&c.filters),
        .force = c.force,
        .reset = c.reset,
        .grace_ms = c.grace_ms,
        .kills = kills,
        .after = after,
        .after_findings = c.force ? &fs_after : NULL,
        .resets = resets,
        .nresets = nresets,
    };
    struct vg_render_opts ro = {.color = !g->json && vg_cmd_use_color(g),
                                .width = vg_cmd_term_width()};
    int rc = g->json ? vg_render_clean_json(&view, &out) : vg_render_clean_text(&view, &ro, &out);
    status = vg_cmd_emit("clean", rc, &out, status);

done:
    for (size_t i = 0; kills && i < plan.n; i++)
        vg_kill_release(&kills[i]);
    free(kills);
    free(resets);
    vg_buf_release(&out);
    vg_err_release(&err);
    vg_plan_release(&plan);
    vg_findings_release(&fs_after);
    vg_findings_release(&fs_before);
    vg_snap_free(after);
    vg_snap_free(before);
    free(c.ancestors);
    vg_buf_release(&c.filters);
    if (c.root_fd >= 0)
        close(c.root_fd);
    return status;
}
