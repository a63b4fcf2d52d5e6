/*
 * `vramguard watch`: the long-running monitor. Samples every interval through the sampler
 * (NVML kept open on a worker with a deadline, stable process details cached), turns each
 * sample into events with the watch engine (src/model/watch.h), prints them as lines or JSON
 * objects, and runs the alert command for each alert without waiting for it.
 *
 * One thread does everything but the driver calls: signals (TERM, INT, HUP, CHLD) are blocked
 * before the sampler's worker starts, so they all arrive through one signalfd that the loop
 * polls between samples, together with the alert commands' timeouts. A hung driver costs one
 * --nvml-timeout wait; later samples do not wait for it again (see sampler.h).
 *
 * Every way out is bounded: alert commands still running at exit are stopped (SIGTERM to their
 * process group, SIGKILL a second later), a driver worker stuck in nvmlShutdown is left behind
 * after --nvml-timeout, and the config file is read without ever blocking (regular files only).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "act/alert.h"
#include "cmd/cmd.h"
#include "cmd/watch_config.h"
#include "model/watch.h"
#include "model/sampler.h"
#include "proc/proc.h"
#include "render/event.h"
#include "render/json.h"
#include "render/text.h"
#include "rules/health.h"
#include "rules/rules.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/parse.h"
#include "util/priv.h"
#include "util/sdnotify.h"

static const char vg_watch_help[] =
    "usage: vramguard watch [options]\n"
    "\n"
    "Sample every interval and print one line per event: a GPU or holder appears or goes, a\n"
    "holder's memory moves by more than the threshold, a finding opens or closes, the driver\n"
    "hangs or recovers, an expectation is broken (alert). Nothing is printed while nothing\n"
    "changes; the first sample reports what is there ('present' events).\n"
    "\n"
    "Options:\n";

static const char vg_watch_help_tail[] =
    "\n"
    "SIGTERM and SIGINT stop it (exit 0), and with it every alert command still running\n"
    "(SIGTERM to its process group, SIGKILL a second later). SIGHUP reads --config again.\n"
    "Exit status: 0 stopped; 3 /proc could not be read; 64 bad usage or configuration;\n"
    "70 internal error.\n"
    "\n";

struct vg_watch {
    struct vg_global *g;
    const char *config_path;
    struct vg_watch_config flags; /* what the command line said */
    struct vg_watch_config cfg;   /* in effect: the file, then the flags */
    bool once;
    bool color;
    struct vg_sampler *sampler;
    unsigned full_scan_ms; /* the full_scan the sampler was built with */
    struct vg_alert *exec; /* NULL until a command is configured */
    bool exec_on;          /* a reload may turn it off while children still run */
    struct vg_watch_view *view;
    char *problem_shown;
    uint64_t samples;
    char host[256];
    bool journal;             /* stdout is systemd's journal stream: "<N>" before each event */
    struct vg_sd_watchdog wd; /* the service manager's watchdog, pinged from the loop */
    bool notify_failed;       /* told once, not at every ping */
};

static double vg_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void vg_watch_report(void *ctx, const char *msg)
{
    (void)ctx;
    vg_cmd_error("watch", "%s", msg);
}

/* The settings in effect: the config file (if any) under the command line's flags. */
static int vg_watch_effective(const struct vg_watch *w, struct vg_watch_config *out,
                              struct vg_err *err)
{
    struct vg_watch_config file;
    vg_watch_config_init(&file);
    int rc =
        w->config_path ? vg_watch_config_load(&file, w->config_path, VG_WCFG_LOAD_STRICT, err) : 0;
    if (rc == 0 && (rc = vg_watch_config_merge(out, &file, &w->flags)) != 0)
        vg_err_set(err, rc, "out of memory");
    vg_watch_config_release(&file);
    if (rc)
        return rc;
    if (w->g->json && !(w->flags.set & VG_WCFG_FORMAT))
        out->format = VG_WATCH_JSON;
    if (out->exec && vg_priv_elevated())
        return vg_err_set(err, -EPERM,
                          "alert commands (exec) are refused in a setuid or file-capability "
                          "copy: they would run with its privileges and your environment; run "
                          "watch as a service (contrib/systemd) for them");
    if (out->exec) {
        /* check the command splits, so a bad one is a usage error now, not at the first alert */
        struct vg_alert *x = NULL;
        rc = vg_alert_new(out->exec, out->shell, out->exec_timeout_ms, 0, &x, err);
        vg_alert_free(x);
    }
    return rc;
}

/* Put the configuration in effect into the alert command runner. */
static int vg_watch_apply_exec(struct vg_watch *w, struct vg_err *err)
{
    const struct vg_watch_config *c = &w->cfg;
    w->exec_on = c->exec != NULL;
    if (!c->exec)
        return 0;
    if (w->exec)
        return vg_alert_configure(w->exec, c->exec, c->shell, c->exec_timeout_ms, err);
    return vg_alert_new(c->exec, c->shell, c->exec_timeout_ms, VG_ALERT_MAX_RUNNING, &w->exec, err);
}

static void vg_watch_reload(struct vg_watch *w)
{
    if (!w->config_path) {
        vg_cmd_error("watch", "SIGHUP: there is no --config file to read again");
        return;
    }
    struct vg_watch_config next;
    vg_watch_config_init(&next);
    struct vg_err err = VG_ERR_INIT;
    if (vg_watch_effective(w, &next, &err) != 0) {
        vg_cmd_error("watch", "SIGHUP: %s; keeping the configuration in effect", vg_err_msg(&err));
        vg_err_release(&err);
        vg_watch_config_release(&next);
        return;
    }
    vg_watch_config_release(&w->cfg);
    w->cfg = next;
    if (vg_watch_apply_exec(w, &err) != 0) {
        vg_cmd_error("watch", "SIGHUP: %s", vg_err_msg(&err));
        w->exec_on = false;
    }
    vg_err_release(&err);
    /* The sampler's settings are fixed when it is built; rebuilding it would mean a second
     * NVML session beside a worker that may be stuck in the driver, so they wait for a
     * restart, and the log says so. */
    bool nvml = w->g->nvml_timeout_ms == 0 && (w->cfg.set & VG_WCFG_NVML_TIMEOUT);
    bool full = w->cfg.full_scan_ms != w->full_scan_ms;
    const char *later = nvml && full ? " (nvml_timeout and full_scan take effect at the next start)"
                        : nvml       ? " (nvml_timeout takes effect at the next start)"
                        : full       ? " (full_scan takes effect at the next start)"
                                     : "";
    vg_cmd_notice("watch", "SIGHUP: configuration read again from '%s'%s", w->config_path, later);
}

/* Does the process still exist (for holders carried while the driver's view is missing)? */
static bool vg_watch_alive(void *ctx, pid_t pid, bool start_known, uint64_t start_ticks)
{
    const struct vg_watch *w = ctx;
    /* cannot tell (< 0): keep it rather than invent a departure */
    return vg_proc_alive(w->g->proc_root, pid, start_known, start_ticks) != 0;
}

/* Run the alert command for one alert event. */
static void vg_watch_exec(struct vg_watch *w, const struct vg_event *ev, const char *json,
                          size_t jlen, const struct timespec *when)
{
    char **env = NULL;
    size_t nenv = 0;
    int env_err = vg_render_event_env(ev, w->host[0] ? w->host : NULL, when, &env, &nenv);
    struct vg_err err = VG_ERR_INIT;
    int rc;
    if (env_err)
        rc = vg_err_set(&err, env_err, "alert command not run: its VRAMGUARD_* variables: %s",
                        strerror(-env_err));
    else
        rc = vg_alert_run(w->exec, (const char *const *)env, nenv, json, jlen, vg_clock_ms(), &err);
    if (rc == 1) {
        struct vg_alert_stats st;
        vg_alert_stats(w->exec, &st);
        vg_cmd_error("watch", "alert command not run: %zu already running (%llu dropped so far)",
                     vg_alert_running(w->exec), (unsigned long long)st.dropped);
    } else if (rc < 0) {
        vg_cmd_error("watch", "%s", vg_err_msg(&err));
    }
    vg_err_release(&err);
    vg_render_event_env_free(env, nenv);
}

/* Print the events and run the alert commands. 0, or a negative errno from writing. */
static int vg_watch_emit(struct vg_watch *w, const struct vg_event_list *evs,
                         const struct timespec *when)
{
    struct vg_style st;
    vg_style_init(&st, w->color);
    struct vg_buf out, line;
    vg_buf_init(&out, 0);
    vg_buf_init(&line, 0);
    for (size_t i = 0; i < evs->n; i++) {
        const struct vg_event *ev = &evs->v[i];
        bool alert = ev->type == VG_EV_ALERT && w->exec_on && w->exec;
        if (w->journal)
            vg_buf_printf(&out, "<%d>", vg_render_event_priority(ev));
        if (w->cfg.format == VG_WATCH_JSON || alert) {
            vg_buf_reset(&line);
            vg_render_event_json(ev, when, w->samples, &line);
        }
        if (w->cfg.format == VG_WATCH_JSON)
            vg_buf_add(&out, line.data ? line.data : "", line.len);
        else
            vg_render_event_text(ev, when, &st, &out);
        if (alert && !line.err)
            vg_watch_exec(w, ev, vg_buf_str(&line), line.len, when);
    }
    int rc = out.err ? out.err : vg_cmd_write_out(&out);
    vg_buf_release(&out);
    vg_buf_release(&line);
    return rc;
}

static void vg_watch_problem(struct vg_watch *w)
{
    const char *p =
        vg_watch_view_frozen(w->view) ? w->problem_shown : vg_watch_view_problem(w->view);
    if ((!p && !w->problem_shown) || (p && w->problem_shown && strcmp(p, w->problem_shown) == 0))
        return;
    if (p)
        vg_cmd_error("watch", "%s", p);
    else
        vg_cmd_notice("watch", "every expectation can be checked again");
    free(w->problem_shown);
    w->problem_shown = p ? strdup(p) : NULL;
}

/* One sample: snapshot, events, output, alert commands. Returns 0 to go on, or an exit status
 * (a first sample that fails, a write that fails). */
static int vg_watch_sample(struct vg_watch *w)
{
    double cpu0 = w->g->verbose ? vg_cpu_seconds() : 0;
    struct vg_snapshot *snap = NULL;
    bool hung = false;
    struct vg_err err = VG_ERR_INIT;
    if (vg_sampler_sample(w->sampler, &snap, &hung, &err) != 0) {
        return vg_cmd_fail("watch", &err, w->samples == 0 ? VG_EXIT_UNKNOWN : 0, NULL);
    }
    w->samples++;
    /* As serve does: possible leftovers new since the last sample are measured now. */
    if (vg_leftovers_measure(snap, VG_SNAP_ACTIVITY_MS) != 0) {
        vg_cmd_error("watch", "out of memory");
        vg_snap_free(snap);
        return VG_EXIT_SOFTWARE;
    }
    struct vg_health_watch judge = {
        .expect = &w->cfg.expect,
        .threshold = w->cfg.threshold,
        .idle_after_ms = w->cfg.idle_after_ms,
    };
    struct vg_watch_opts o = {
        .threshold = w->cfg.threshold,
        .judge = vg_health_watch_judge,
        .judge_ctx = &judge,
        .alive = vg_watch_alive,
        .alive_ctx = w,
    };
    struct vg_event_list evs;
    vg_event_list_init(&evs);
    struct vg_watch_view *next = NULL;
    int status = 0;
    if (vg_watch_step(&o, snap, hung, vg_clock_ms(), w->view, &next, &evs, &err) != 0) {
        vg_cmd_error("watch", "%s", vg_err_msg(&err));
        status = VG_EXIT_SOFTWARE;
    } else {
        vg_watch_view_free(w->view);
        w->view = next;
        int rc = vg_watch_emit(w, &evs, &snap->taken_at);
        if (rc == -EPIPE) {
            status = VG_EXIT_OK; /* the reader went away: nothing left to do */
            w->once = true;
        } else if (rc) {
            vg_cmd_error("watch", "cannot write the events: %s", strerror(-rc));
            status = VG_EXIT_SOFTWARE;
        }
        vg_watch_problem(w);
    }
    if (w->g->verbose) {
        struct vg_sampler_stats ss;
        vg_sampler_stats(w->sampler, &ss);
        fprintf(stderr,
                "vramguard: watch: sample %llu: %.1f ms, %.2f ms CPU, %zu holdings, %zu events; ",
                (unsigned long long)w->samples, ss.last_sample_seconds * 1e3,
                (vg_cpu_seconds() - cpu0) * 1e3, snap->nholdings, evs.n);
        if (ss.last_full_reason)
            fprintf(stderr, "full scan (%s%s)", ss.last_full_reason,
                    snap->procs.kernel_scan ? ", in the kernel" : "");
        else
            fprintf(stderr,
                    "incremental scan (%zu of %zu processes carried over, %zu named openers read)",
                    ss.last_carried, ss.last_listed, ss.last_openers);
        fprintf(stderr, "; cache %llu hits, %llu misses; %llu driver hangs",
                (unsigned long long)ss.cache_hits, (unsigned long long)ss.cache_misses,
                (unsigned long long)ss.driver_hangs);
        if (ss.kprog_loads)
            fprintf(stderr, "; kernel scan program loaded %u time%s", ss.kprog_loads,
                    ss.kprog_loads == 1 ? "" : "s");
        fputc('\n', stderr);
        if (w->samples == 1)
            vg_cmd_say_scan(w->g, "watch", snap);
    }
    vg_event_list_release(&evs);
    vg_err_release(&err);
    vg_snap_free(snap);
    return status;
}

/* Tell the service manager (a no-op outside a Type=notify service); a failure is said once. */
static void vg_watch_notify(struct vg_watch *w, const char *state)
{
    struct vg_err err = VG_ERR_INIT;
    if (vg_sd_notify(state, &err) < 0 && !w->notify_failed) {
        vg_cmd_error("watch", "%s", vg_err_msg(&err));
        w->notify_failed = true;
    }
    vg_err_release(&err);
}

/* Drain the signalfd. Returns true when asked to stop. */
static bool vg_watch_signals(struct vg_watch *w, int sfd)
{
    bool stop = false, hup = false;
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            stop = true;
        else if (si.ssi_signo == SIGHUP)
            hup = true;
    }
    if (hup && !stop)
        vg_watch_reload(w);
    return stop;
}

static int vg_watch_loop(struct vg_watch *w, int sfd)
{
    uint64_t next = vg_clock_ms();
    int out_fd = STDOUT_FILENO;
    vg_sd_watchdog_init(&w->wd, next);
    for (;;) {
        uint64_t now = vg_clock_ms();
        if (now >= next) {
            int status = vg_watch_sample(w);
            if (status || w->once)
                return status;
            if (w->samples == 1)
                vg_watch_notify(w, "READY=1");
            uint64_t after = vg_clock_ms();
            next += w->cfg.interval_ms;
            if (next < after)
                next = after; /* a slow sample (a hung driver): no burst to catch up */
            now = after;
        }
        uint64_t wait = next - now;
        uint64_t ex = w->exec ? vg_alert_next_ms(w->exec, now) : UINT64_MAX;
        if (ex < wait)
            wait = ex;
        /* The watchdog is pinged here, between samples, and nowhere else: a loop stuck in a
         * sample (or anywhere) stops the pings, and the manager restarts the service. */
        struct vg_err err = VG_ERR_INIT;
        if (vg_sd_watchdog_tick(&w->wd, now, &err) < 0 && !w->notify_failed) {
            vg_cmd_error("watch", "%s", vg_err_msg(&err));
            w->notify_failed = true;
        }
        vg_err_release(&err);
        uint64_t wd = vg_sd_watchdog_wait_ms(&w->wd, now);
        if (wd < wait)
            wait = wd;
        /* stdout too, for nothing but errors: a pipe whose reader went away (watch | head)
         * ends the watch now rather than at the next event. */
        struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN}, {.fd = out_fd}};
        int pr = poll(pfd, 2, wait > 60000 ? 60000 : (int)wait);
        if (pr < 0 && errno != EINTR) {
            vg_cmd_error("watch", "poll: %s", strerror(errno));
            return VG_EXIT_SOFTWARE;
        }
        if (pr > 0 && (pfd[0].revents & POLLIN) && vg_watch_signals(w, sfd))
            return VG_EXIT_OK;
        if (pr > 0 && (pfd[1].revents & (POLLERR | POLLHUP)))
            return VG_EXIT_OK;
        if (pfd[1].revents & POLLNVAL)
            out_fd = -1; /* no stdout at all: nothing to watch there */
        if (w->exec)
            vg_alert_poll(w->exec, vg_clock_ms(), vg_watch_report, NULL);
    }
}

/* --once: the alert commands of the one sample may finish (each bounded by its timeout), but a
 * SIGTERM or SIGINT meanwhile cuts that short; the caller stops what is left. */
static void vg_watch_drain(struct vg_watch *w, int sfd)
{
    while (vg_alert_running(w->exec)) {
        uint64_t now = vg_clock_ms();
        vg_alert_poll(w->exec, now, vg_watch_report, NULL);
        if (!vg_alert_running(w->exec))
            return;
        uint64_t wait = vg_alert_next_ms(w->exec, now);
        /* A short slice too: SIGCHLD may have been taken by an earlier read of the signalfd. */
        struct pollfd pfd = {.fd = sfd, .events = POLLIN};
        int pr = poll(&pfd, 1, wait > 100 ? 100 : (int)wait);
        if (pr > 0 && (pfd.revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                    return;
        }
    }
}

static int vg_watch_flag(struct vg_watch *w, const struct vg_opt *o, const char *value)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_watch_config_set(&w->flags, o->config_key, value, &err);
    if (rc)
        vg_cmd_error("watch", "--%s: %s", o->name, vg_err_msg(&err));
    vg_err_release(&err);
    return rc;
}

static int vg_watch_parse(struct vg_watch *w, int argc, char **argv)
{
    struct vg_cmd_parse p = {VG_CMD_PARSE(watch), .g = w->g, .argc = argc, .argv = argv,
                             .dst = {&w->config_path, &w->once}};
    int c;
    /* What comes back are settings: the row names the config key each one sets. */
    while ((c = vg_cmd_next_opt(&p)) >= 0)
        if (vg_watch_flag(w, p.row, p.row->arg == VG_OPT_ARG_NONE ? "true" : optarg))
            return VG_EXIT_USAGE;
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? -1 : VG_EXIT_USAGE;
    return 0;
}

static int vg_watch_start(struct vg_watch *w, int *sfd)
{
    struct vg_err err = VG_ERR_INIT;
    if (vg_watch_effective(w, &w->cfg, &err) != 0 || vg_watch_apply_exec(w, &err) != 0) {
        return vg_cmd_fail("watch", &err, VG_EXIT_USAGE, NULL);
    }
    /* The capabilities a service unit grants to read other users' /proc (ambient, so they
     * survive our exec) must not pass on to alert commands: clear the ambient set, which
     * leaves our own permitted and effective sets as they are. */
#ifdef PR_CAP_AMBIENT
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
#endif
    if (gethostname(w->host, sizeof(w->host)) != 0)
        w->host[0] = '\0';
    w->host[sizeof(w->host) - 1] = '\0';
    w->color = w->cfg.format == VG_WATCH_TEXT && vg_cmd_use_color(w->g);
    w->journal = vg_sd_journal_stream(STDOUT_FILENO);

    /* Blocked before the sampler's worker exists, so it inherits the mask and every one of
     * these arrives through the signalfd. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
        (*sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        vg_cmd_error("watch", "cannot set up signal handling: %s", strerror(errno));
        return VG_EXIT_SOFTWARE;
    }
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is an EPIPE we handle */

    unsigned timeout = w->g->nvml_timeout_ms ? w->g->nvml_timeout_ms : w->cfg.nvml_timeout_ms;
    struct vg_sampler_opts so = {
        .nvml_path = w->g->nvml_path,
        .nvml_timeout_ms = timeout,
        .proc_root = w->g->proc_root,
        .dev_dir = w->g->dev_dir,
        .scan = w->g->scan,
        .full_scan_ms = w->cfg.full_scan_ms,
        .full_scans_only = w->cfg.full_scan_ms == 0,
    };
    w->full_scan_ms = w->cfg.full_scan_ms;
    if (vg_sampler_new(&so, &w->sampler, &err) != 0) {
        return vg_cmd_fail("watch", &err, VG_EXIT_SOFTWARE, NULL);
    }
    if (w->g->verbose)
        fprintf(stderr, "vramguard: watch: device-node opens: %s\n",
                vg_sampler_watch_kind(w->sampler));
    return 0;
}

int vg_cmd_watch(struct vg_global *g, int argc, char **argv)
{
    struct vg_watch w = {.g = g};
    vg_watch_config_init(&w.flags);
    vg_watch_config_init(&w.cfg);
    int sfd = -1;
    int status = vg_watch_parse(&w, argc, argv);
    if (status == 0)
        status = vg_watch_start(&w, &sfd);
    if (status == 0) {
        status = vg_watch_loop(&w, sfd);
        vg_watch_notify(&w, "STOPPING=1");
    } else if (status < 0)
        status = VG_EXIT_OK; /* --help */
    if (w.once && w.exec)
        vg_watch_drain(&w, sfd);
    /* No alert command outlives the watch: what still runs is stopped (bounded). */
    vg_alert_stop_all(w.exec, vg_watch_report, NULL);
    vg_sampler_free(w.sampler);
    vg_alert_free(w.exec);
    vg_watch_view_free(w.view);
    free(w.problem_shown);
    vg_watch_config_release(&w.flags);
    vg_watch_config_release(&w.cfg);
    if (sfd >= 0)
        close(sfd);
    return status;
}
