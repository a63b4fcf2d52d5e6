/*
 * `vramguard handoff prolog|epilog`: the scheduler's gate between jobs (act/handoff.h). It reads
 * the job and its GPUs from Slurm's variables unless options name them, runs the hand-off,
 * prints the one-line reason on stdout (the details on stderr, or one JSON document), runs
 * `scontrol update ... state=drain` when asked to and the node is not ready, and exits 0 when
 * the GPUs are ready for the next job, 1 dirty, 2 wedged, 3 could not check.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "act/alert.h"
#include "act/handoff.h"
#include "cmd/cmd.h"
#include "model/snapshot.h"
#include "proc/signal.h"
#include "render/handoff.h"
#include "rules/reason.h"
#include "rules/rules.h"
#include "util/clock.h"
#include "util/parse.h"

static const char vg_handoff_help[] =
    "usage: vramguard handoff prolog|epilog|node [--gpus LIST] [--job ID] [--uid U]\n"
    "                        [--timeout D] [--grace D] [--tolerance SIZE] [--drain]\n"
    "                        [--node NAME] [options]\n"
    "\n"
    "The gate between scheduler jobs. 'prolog', before a job: are the GPUs it is given empty\n"
    "and healthy? Nothing is touched. 'epilog', after a job: stop what that job left holding\n"
    "its GPUs (processes of the job's uid whose environment or cgroup names the job; never\n"
    "another user's, another job's or infrastructure), with the identity checks of clean\n"
    "--force, then wait until each GPU's memory is back to its baseline. 'node', at any time\n"
    "(Kubernetes' Node Problem Detector, Slurm's HealthCheckProgram): is memory held on any\n"
    "GPU that no running job holds (sure leftovers, zombies, no process at all)? Nothing is\n"
    "touched.\n"
    "\n"
    "Prints one line on stdout, fit for 'scontrol update nodename=N state=drain reason=...':\n"
    "clean, cleaned (leftovers stopped, memory back), dirty (held by someone who is not this\n"
    "job, or memory held with no holder), wedged (lost or hung GPU, a holder stuck in the\n"
    "driver, memory that did not come back). Details go to stderr.\n"
    "\n"
    "Without options the job comes from SLURM_JOB_ID and SLURM_JOB_UID, and its GPUs from\n"
    "SLURM_JOB_GPUS, else SLURM_STEP_GPUS (Slurm's numbers: N of /dev/nvidiaN, as listed in\n"
    "gres.conf), else CUDA_VISIBLE_DEVICES (NVML indices or UUIDs).\n"
    "\n"
    "Options:\n";

static const char vg_handoff_help_tail[] =
    "\n"
    "Exit status: 0 clean or cleaned (ready for the next job); 1 dirty; 2 wedged; 3 could not\n"
    "check (no driver view, /proc unreadable); 64 bad usage; 70 internal error, and with\n"
    "--drain when the node needed draining and scontrol failed. The JSON document (--json) is\n"
    "vramguard.handoff/1,\n"
    "described in docs/json.md; contrib/slurm/ has the prolog and epilog scripts.\n"
    "\n";

/* --job comes back from the parse; the other options are stored by their rows. */
enum { VG_HANDOFF_OPT_JOB = VG_OPT_FIRST_LOCAL };

#define VG_HANDOFF_TIMEOUT_DEFAULT_MS 30000u
#define VG_HANDOFF_GRACE_DEFAULT_MS 5000u
/* scontrol answers at once or the controller is gone; an epilog must not hang on it. */
#define VG_HANDOFF_DRAIN_TIMEOUT_MS 20000u

struct vg_handoff {
    struct vg_global *g;
    struct vg_handoff_req req;
    const char *gpus_arg, *gpus_from, *uid_arg, *node;
    bool drain;
    struct vg_handoff_sels sels;
    struct vg_kill_who who;
};

#define VG_HANDOFF_AT(member) VG_OPT_AT(0, struct vg_handoff, member)
#define VG_HANDOFF_DUR(member)                                                                     \
    VG_OPT_VAL(VG_HANDOFF_AT(member), .kind = VG_OPT_K_DURATION, .max = VG_HOUR_MS,                \
               .takes = "a duration up to 1h (e.g. 500ms, 30s)")

const struct vg_opt vg_handoff_opts[] = {
    {"gpus", 0, VG_OPT_ARG_REQUIRED, "LIST",
     "the job's GPUs: NVML indices or UUIDs, comma-separated\n"
     "(default: from Slurm's variables)",
     0, NULL, VG_OPT_VAL(VG_HANDOFF_AT(gpus_arg), .kind = VG_OPT_K_STR)},
    {"job", 0, VG_OPT_ARG_REQUIRED, "ID", "the job's id (default: $SLURM_JOB_ID)",
     VG_HANDOFF_OPT_JOB, NULL, VG_OPT_CODE},
    {"uid", 0, VG_OPT_ARG_REQUIRED, "U", "the job's user, a name or uid (default: $SLURM_JOB_UID)",
     0, NULL, VG_OPT_VAL(VG_HANDOFF_AT(uid_arg), .kind = VG_OPT_K_STR)},
    {"timeout", 0, VG_OPT_ARG_REQUIRED, "D",
     "epilog: how long to wait for memory to come back (default 30s)", 0, NULL,
     VG_HANDOFF_DUR(req.timeout_ms)},
    {"grace", 0, VG_OPT_ARG_REQUIRED, "D", "wait D after SIGTERM before SIGKILL (default 5s)", 0,
     NULL, VG_HANDOFF_DUR(req.grace_ms)},
    {"tolerance", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "memory above the driver's reservation that still counts\nas free (default 64MiB)", 0, NULL,
     VG_OPT_VAL(VG_HANDOFF_AT(req.tolerance), .kind = VG_OPT_K_SIZE,
                .takes = "a size such as 64MiB or 1GiB")},
    {"drain", 0, VG_OPT_ARG_NONE, NULL,
     "when not ready (dirty, wedged, could not check), run\n"
     "scontrol update nodename=NODE state=drain reason=LINE",
     0, NULL, VG_OPT_VAL(VG_HANDOFF_AT(drain), .kind = VG_OPT_K_SET)},
    {"node", 0, VG_OPT_ARG_REQUIRED, "NAME",
     "the node to drain (default: $SLURMD_NODENAME, else the\nhost name)", 0, NULL,
     VG_OPT_VAL(VG_HANDOFF_AT(node), .kind = VG_OPT_K_STR)},
    VG_OPT_TABLE_END,
};

static int vg_handoff_mode(struct vg_handoff *h, const char *word)
{
    if (strcmp(word, "prolog") == 0)
        h->req.mode = VG_HANDOFF_PROLOG;
    else if (strcmp(word, "epilog") == 0)
        h->req.mode = VG_HANDOFF_EPILOG;
    else if (strcmp(word, "node") == 0)
        h->req.mode = VG_HANDOFF_NODE;
    else {
        vg_cmd_error("handoff", "'%s' is not 'prolog', 'epilog' or 'node'", word);
        return -1;
    }
    return 0;
}

/* `handoff epilog --timeout 1m` and `handoff --timeout 1m epilog` both: the mode word first is
 * taken before the options, as a command name is. */
static int vg_handoff_parse(struct vg_handoff *h, int argc, char **argv)
{
    bool first = argc > 1 && argv[1][0] != '-';
    if (first && vg_handoff_mode(h, argv[1]))
        return VG_EXIT_USAGE;
    struct vg_cmd_parse p = {
        VG_CMD_PARSE(handoff),           .g = h->g,          .argc = first ? argc - 1 : argc,
        .argv = first ? argv + 1 : argv, .operands = !first, .dst = {h}};
    int ch;
    while ((ch = vg_cmd_next_opt(&p)) == VG_HANDOFF_OPT_JOB) {
        if (!*optarg) {
            vg_cmd_error("handoff", "--job takes a job id, not ''");
            return VG_EXIT_USAGE;
        }
        h->req.job.id = optarg;
    }
    if (ch != VG_CMD_OPT_END)
        return ch == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (first)
        return -1;
    if (optind >= argc) {
        vg_cmd_error("handoff", "say which check: 'handoff prolog', 'handoff epilog' or "
                                "'handoff node'");
        return VG_EXIT_USAGE;
    }
    if (vg_handoff_mode(h, argv[optind]))
        return VG_EXIT_USAGE;
    if (optind + 1 < argc) {
        vg_cmd_error("handoff", "unexpected argument '%s'", argv[optind + 1]);
        return VG_EXIT_USAGE;
    }
    return -1;
}

/* ---- the job and its GPUs, from options or Slurm's variables ------------------------------- */

static const char *vg_handoff_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int vg_handoff_job(struct vg_handoff *h)
{
    if (!h->req.job.id)
        h->req.job.id = vg_handoff_env("SLURM_JOB_ID");
    const char *u = h->uid_arg ? h->uid_arg : vg_handoff_env("SLURM_JOB_UID");
    if (u) {
        /* Slurm gives the uid; a name is for people typing --uid */
        int64_t v;
        if (!h->uid_arg && vg_parse_i64(u, 0, (int64_t)UINT32_MAX - 1, &v) == 0)
            h->req.job.uid = (uid_t)v;
        else if (vg_cmd_user(u, &h->req.job.uid) != 0) {
            vg_cmd_error("handoff", "%s takes a user name or uid; no user '%s' here",
                         h->uid_arg ? "--uid" : "SLURM_JOB_UID", u);
            return -1;
        }
        h->req.job.uid_known = true;
    }
    /* Only the job's own processes are ever signalled: both marks are needed to find them. */
    if (h->req.mode == VG_HANDOFF_EPILOG && (!h->req.job.id || !h->req.job.uid_known)) {
        vg_cmd_error("handoff",
                     "an epilog needs the job's id and user: set by Slurm (SLURM_JOB_ID, "
                     "SLURM_JOB_UID), or give --job and --uid");
        return -1;
    }
    return 0;
}

/* Parse the list into h->sels; a message names where it came from. */
static int vg_handoff_sels(struct vg_handoff *h, const char *list, bool slurm)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_handoff_sels_parse(list, slurm, &h->sels, &err);
    if (rc)
        vg_cmd_error("handoff", "%s: %s", h->gpus_from, vg_err_msg(&err));
    vg_err_release(&err);
    return rc ? -1 : 0;
}

static int vg_handoff_gpus(struct vg_handoff *h)
{
    static const char *const slurm[] = {"SLURM_JOB_GPUS", "SLURM_STEP_GPUS"};
    if (h->gpus_arg) {
        h->gpus_from = "--gpus";
        return vg_handoff_sels(h, h->gpus_arg, false);
    }
    for (size_t i = 0; i < sizeof(slurm) / sizeof(slurm[0]); i++) {
        const char *v = vg_handoff_env(slurm[i]);
        if (v) {
            h->gpus_from = slurm[i];
            return vg_handoff_sels(h, v, true);
        }
    }
    const char *cvd = vg_handoff_env("CUDA_VISIBLE_DEVICES");
    if (cvd) {
        h->gpus_from = "CUDA_VISIBLE_DEVICES";
        return vg_handoff_sels(h, cvd, false);
    }
    /* Slurm sets no GPU variable for a job without GPUs: nothing to hand over. */
    if (vg_handoff_env("SLURM_JOB_ID"))
        return 1;
    vg_cmd_error("handoff", "no GPUs named: give --gpus, or run from a Slurm prolog or epilog "
                            "(SLURM_JOB_GPUS)");
    return -1;
}

/* ---- running it ---------------------------------------------------------------------------- */

static int vg_handoff_look(void *ctx, struct vg_snapshot **snap)
{
    const struct vg_handoff *h = ctx;
    return vg_cmd_snapshot(h->g, "handoff", 0, snap);
}

/* Node mode: one look, judged as doctor judges (activity measured), then act/handoff.h. */
static int vg_handoff_node_run(struct vg_handoff *h, struct vg_handoff_result *res,
                               struct vg_err *err)
{
    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(h->g, "handoff", VG_CMD_SNAP_JUDGE, &snap))
        return 1;
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    ro.check_shell = false;
    struct vg_findings fs;
    vg_findings_init(&fs);
    int rc = vg_rules_run(snap, &ro, &fs, err);
    if (rc == 0)
        rc = vg_handoff_node(&h->req, snap, &fs, res, err);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    return rc;
}

/* Who is asking, as this procfs numbers processes: vramguard and its ancestors (slurmd, the
 * epilog script) are never a job's leftovers. */
static int vg_handoff_who(struct vg_handoff *h)
{
    if (vg_cmd_who_open(h->g, "handoff", &h->who) != 0)
        return -1;
    h->req.proc_root_fd = h->who.root_fd;
    h->req.who = vg_kill_who_ctx(&h->who);
    /* A pidfd names a process of our own PID namespace: with another's procfs the numbers
     * would name other processes, so an epilog there may look but not act. */
    if (h->req.mode == VG_HANDOFF_EPILOG && !h->who.own_pidns) {
        vg_cmd_error("handoff",
                     "an epilog needs the procfs of vramguard's own PID namespace; '%s' "
                     "numbers processes differently",
                     h->g->proc_root && *h->g->proc_root ? h->g->proc_root : "/proc");
        return -1;
    }
    return 0;
}

static int vg_handoff_status(const struct vg_handoff_result *r)
{
    switch (r->state) {
    case VG_HANDOFF_CLEAN:
    case VG_HANDOFF_CLEANED:
        return VG_EXIT_OK;
    case VG_HANDOFF_DIRTY:
        return VG_EXIT_WARN;
    case VG_HANDOFF_WEDGED:
        return VG_EXIT_CRIT;
    case VG_HANDOFF_UNKNOWN:
        break;
    }
    return VG_EXIT_UNKNOWN;
}

/* 'word' quoted for vg_alert_split: single quotes, a quote inside as '\''. */
static void vg_handoff_quote(struct vg_buf *b, const char *word)
{
    vg_buf_addc(b, '\'');
    for (const char *s = word; *s; s++) {
        if (*s == '\'')
            vg_buf_adds(b, "'\\''");
        else
            vg_buf_addc(b, *s);
    }
    vg_buf_addc(b, '\'');
}

struct vg_handoff_drain {
    struct vg_buf cmd;
    char *error;
    int status;
    bool ran;
};

static void vg_handoff_drain_report(void *ctx, const char *msg)
{
    struct vg_handoff_drain *d = ctx;
    if (!d->error)
        d->error = strdup(msg);
}

/* --drain: scontrol update nodename=NODE state=drain reason=LINE, bounded. */
static void vg_handoff_drain(const struct vg_handoff *h, const char *reason,
                             struct vg_handoff_drain *d)
{
    char host[256];
    const char *node = h->node ? h->node : vg_handoff_env("SLURMD_NODENAME");
    if (!node && gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        node = host;
    }
    vg_buf_adds(&d->cmd, "scontrol update ");
    struct vg_buf word;
    vg_buf_init(&word, 0);
    vg_buf_printf(&word, "nodename=%s", node ? node : "localhost");
    vg_handoff_quote(&d->cmd, vg_buf_str(&word));
    vg_buf_adds(&d->cmd, " state=drain ");
    vg_buf_reset(&word);
    vg_buf_printf(&word, "reason=%s", reason);
    vg_handoff_quote(&d->cmd, vg_buf_str(&word));
    vg_buf_release(&word);
    struct vg_alert *x = NULL;
    struct vg_err err = VG_ERR_INIT;
    d->status = -1;
    if (d->cmd.err ||
        vg_alert_new(vg_buf_str(&d->cmd), false, VG_HANDOFF_DRAIN_TIMEOUT_MS, 1, &x, &err) != 0 ||
        (vg_alert_set_names(x, "scontrol", "handoff"), 0) ||
        vg_alert_run(x, NULL, 0, NULL, 0, vg_clock_ms(), &err) != 0) {
        d->error = strdup(d->cmd.err ? "out of memory" : vg_err_msg(&err));
        vg_err_release(&err);
        vg_alert_free(x);
        return;
    }
    d->ran = true;
    vg_alert_wait(x, vg_handoff_drain_report, d);
    struct vg_alert_stats st;
    vg_alert_stats(x, &st);
    d->status = st.last_exit; /* -1 when it timed out: the report says so */
    vg_alert_free(x);
}

static int vg_handoff_emit(struct vg_handoff *h, const struct vg_handoff_result *res)
{
    int status = vg_handoff_status(res);
    struct vg_handoff_view v = {.res = res,
                                .mode = h->req.mode,
                                .job_id = h->req.job.id,
                                .uid_known = h->req.job.uid_known,
                                .uid = h->req.job.uid,
                                .gpus_from = h->gpus_from,
                                .timeout_ms = h->req.timeout_ms,
                                .grace_ms = h->req.grace_ms,
                                .tolerance = h->req.tolerance,
                                .exit_status = status,
                                .drain = h->drain,
                                .drain_status = -1};
    clock_gettime(CLOCK_REALTIME, &v.when);
    struct vg_buf reason, out;
    vg_buf_init(&reason, 0);
    vg_buf_init(&out, 0);
    struct vg_handoff_drain d = {.status = -1};
    vg_buf_init(&d.cmd, 0);
    int rc = vg_render_handoff_reason(&v, &reason);
    if (rc == 0 && h->drain && status != VG_EXIT_OK) {
        vg_handoff_drain(h, vg_buf_str(&reason), &d);
        v.drain_ran = d.ran;
        v.drain_cmd = vg_buf_str(&d.cmd);
        v.drain_status = d.status;
        v.drain_error = d.error;
    }
    if (rc == 0 && h->g->json)
        rc = vg_render_handoff_json(&v, &out);
    else if (rc == 0) {
        rc = vg_render_handoff_text(&v, &out);
        fputs(vg_buf_str(&out), stderr);
        vg_buf_reset(&out);
        vg_buf_printf(&out, "%s\n", vg_buf_str(&reason));
        rc = rc ? rc : out.err;
    }
    status = vg_cmd_emit("handoff", rc, &out, status);
    /* The node needed draining and was not: a caller (the contrib epilog) must know, so that
     * the scheduler drains it by its own means. */
    if (rc == 0 && h->drain && status != VG_EXIT_OK && (!d.ran || d.status != 0)) {
        vg_cmd_error("handoff", "--drain failed: %s", d.error ? d.error : "scontrol failed");
        status = VG_EXIT_SOFTWARE;
    }
    free(d.error);
    vg_buf_release(&d.cmd);
    vg_buf_release(&reason);
    vg_buf_release(&out);
    return status;
}

/* The job, its GPUs and who is asking: -1 to go on (*nogpu: the scheduler's job has no GPUs;
 * *blind: /proc could not be read, said already), else the exit status. */
static int vg_handoff_prepare(struct vg_handoff *h, bool *nogpu, bool *blind)
{
    if (h->req.mode == VG_HANDOFF_NODE && (h->gpus_arg || h->req.job.id || h->uid_arg)) {
        vg_cmd_error("handoff", "node checks every GPU and no job: --gpus, --job and --uid are "
                                "for prolog and epilog");
        return VG_EXIT_USAGE;
    }
    if (h->req.mode != VG_HANDOFF_NODE) {
        int rc;
        if (vg_handoff_job(h) || (rc = vg_handoff_gpus(h)) < 0)
            return VG_EXIT_USAGE;
        *nogpu = rc > 0;
    }
    *blind = !*nogpu && vg_handoff_who(h) != 0;
    return -1;
}

int vg_cmd_handoff(struct vg_global *g, int argc, char **argv)
{
    struct vg_handoff h = {.g = g};
    h.req.timeout_ms = VG_HANDOFF_TIMEOUT_DEFAULT_MS;
    h.req.grace_ms = VG_HANDOFF_GRACE_DEFAULT_MS;
    h.req.tolerance = VG_REASON_DIRTY_TOLERANCE;
    h.req.proc_root_fd = -1;
    h.who.root_fd = -1;
    int status = vg_handoff_parse(&h, argc, argv);
    bool nogpu = false, blind = false;
    /* The hand-off stops other users' processes for the scheduler, which runs it as root: a
     * setuid or file-capability copy run by someone else would lend them that. */
    if (status < 0 && getuid() != 0 &&
        vg_cmd_refuse_elevated("handoff", "handoff",
                               "it stops the processes of the job it is told about, whoever "
                               "owns them; the scheduler runs it as root"))
        status = VG_EXIT_USAGE;
    if (status < 0)
        status = vg_handoff_prepare(&h, &nogpu, &blind);
    if (status < 0) {
        struct vg_kill_nvml nvml = {.path = g->nvml_path, .timeout_ms = g->nvml_timeout_ms};
        h.req.sel = h.sels.v;
        h.req.nsel = h.sels.n;
        h.req.nvml = vg_kill_nvml_lists;
        h.req.nvml_arg = &nvml;
        struct vg_handoff_result res;
        vg_handoff_result_init(&res);
        struct vg_err err = VG_ERR_INIT;
        /* A job without GPUs: nothing to look at; clean. */
        res.s.driver_ok = nogpu;
        int rc = nogpu   ? 0
                 : blind ? 1
                 : h.req.mode == VG_HANDOFF_NODE
                     ? vg_handoff_node_run(&h, &res, &err)
                     : vg_handoff_run(&h.req, vg_handoff_look, &h, &res, &err);
        /* Could not look at all (the error is printed): still the reason line, and --drain. */
        if (rc > 0) {
            vg_handoff_result_release(&res);
            res.state = VG_HANDOFF_UNKNOWN;
            res.s.driver_error = strdup("the host's processes could not be read");
            rc = res.s.driver_error ? 0 : vg_err_set(&err, -ENOMEM, "out of memory");
        }
        if (rc < 0) {
            vg_cmd_error("handoff", "%s", vg_err_msg(&err));
            status = VG_EXIT_SOFTWARE;
        } else {
            status = vg_handoff_emit(&h, &res);
        }
        vg_err_release(&err);
        vg_handoff_result_release(&res);
    }
    vg_handoff_sels_release(&h.sels);
    vg_kill_who_release(&h.who);
    return status;
}
