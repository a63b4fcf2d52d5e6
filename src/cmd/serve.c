/*
 * `vramguard serve`: a Prometheus exporter. A collector thread samples the host every
 * --interval (with the sampler's driver-hang protection), diagnoses it and renders the
 * exposition; libmicrohttpd threads answer GET /metrics with a copy of the latest one and
 * GET /healthz with whether collection is alive. The main thread only waits for SIGTERM or
 * SIGINT (SIGHUP is logged and ignored, as by watch without --config) and, four times a second,
 * ends connections that have spent too long on one request or are over the connection limits.
 *
 * Loopback only unless --allow-remote: the metrics name users, processes and containers.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/serve_http.h"
#include "cmd/serve_route.h"
#include "model/collector.h"
#include "proc/proc.h"
#include "render/metrics.h"
#include "rules/rules.h"
#include "util/clock.h"
#include "util/parse.h"
#include "util/sdnotify.h"

static const char vg_serve_help[] =
    "usage: vramguard serve [--listen ADDR] [--interval DUR] [--per-process top:N|all|none]\n"
    "                       [--allow-remote] [options]\n"
    "\n"
    "A Prometheus exporter: per-GPU memory, per-process memory (bounded), memory by reason\n"
    "(orphan, zombie, foreign PID, outside the visible set, context only, unattributed),\n"
    "findings by rule, and whether the last collection succeeded. Metrics are documented in\n"
    "docs/metrics.md; alert rules are in contrib/prometheus/alerts.yml.\n"
    "\n"
    "Serves GET /metrics and GET /healthz; any other path is 404, any other method 405.\n"
    "Collection runs every --interval whatever the number of scrapers; a hung driver is given\n"
    "up on after --nvml-timeout and reported as vramguard_last_collect_success 0.\n"
    "\n"
    "Options:\n";

static const char vg_serve_help_tail[] =
    "\n"
    "Runs until SIGTERM or SIGINT, then exits 0; SIGHUP is logged and otherwise ignored (there\n"
    "is no configuration file to read again). Exit status 64 for bad usage, 70 when it\n"
    "cannot start (address in use, /proc unreadable, out of memory).\n"
    "\n";

/* What comes back from the parse; the other options are stored by their rows. */
enum { VG_SERVE_PER_PROCESS = VG_OPT_FIRST_LOCAL, VG_SERVE_CONTEXT_MAX };

static void vg_serve_log(void *arg, const char *msg)
{
    (void)arg;
    vg_cmd_error("serve", "%s", msg);
}

/* What the collector's callbacks share: the options, and the findings of the collection. */
struct vg_serve_diag {
    struct vg_rule_opts rules; /* idle and shell checks are not used */
    struct vg_metrics_opts metrics;
    struct vg_findings fs;
};

/* The collector's diagnosis: the rules over the sample (none when there is no sample). */
static int vg_serve_diagnose(void *arg, struct vg_snapshot *snap, struct vg_err *err)
{
    struct vg_serve_diag *d = arg;
    vg_findings_release(&d->fs);
    vg_findings_init(&d->fs);
    if (!snap)
        return 0;
    /* Processes new since the last sample may be leftovers whose activity is still unknown:
     * measured now (the rest comes from the sampler's previous sample). Only new suspects
     * make a collection wait. */
    if (vg_leftovers_measure(snap, VG_SNAP_ACTIVITY_MS) != 0)
        return vg_err_set(err, -ENOMEM, "out of memory");
    if (vg_rules_run(snap, &d->rules, &d->fs, err) != 0)
        return err && err->code ? err->code : -ENOMEM;
    return 0;
}

/* The collector's renderer: the Prometheus exposition with the command line's options. */
static int vg_serve_render(void *arg, const struct vg_snapshot *snap,
                           const struct vg_collector_gpu_ids *last_good,
                           const struct vg_collector_stats *st, struct vg_buf *out)
{
    const struct vg_serve_diag *d = arg;
    return vg_metrics_render(snap, &d->fs, last_good, st, &d->metrics, out);
}

/* A listening socket for addr; -errno on failure. */
static int vg_serve_listen(const struct vg_serve_addr *addr)
{
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, 511) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* What serve's options set besides the diagnosis' settings. */
struct vg_serve_cfg {
    const char *listen_arg;
    bool allow_remote;
    uint64_t interval_ms, conn_timeout_ms, max_conn, max_per_client, full_scan_ms;
};

/* The failure to listen; for a port already taken, who has it (net/tcp and the fds of
 * --proc's processes): "port 9400 is in use by pid 1234 (dcgm-exporter)". */
static void vg_serve_listen_error(const struct vg_global *g, const struct vg_serve_cfg *sc,
                                  const struct vg_serve_addr *addr, int e)
{
    const struct sockaddr *sa = (const struct sockaddr *)&addr->ss;
    uint16_t port = sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                              : ntohs(((const struct sockaddr_in *)sa)->sin_port);
    pid_t pid = 0;
    char *comm = NULL;
    if (e != EADDRINUSE || port == 0 ||
        vg_proc_port_listener(g->proc_root, port, &pid, &comm, NULL) <= 0)
        vg_cmd_error("serve", "cannot listen on %s: %s", sc->listen_arg, strerror(e));
    else if (pid > 0)
        vg_cmd_error("serve",
                     "cannot listen on %s: port %u is in use by pid %d (%s); choose another "
                     "port with --listen",
                     sc->listen_arg, (unsigned)port, (int)pid, comm ? comm : "?");
    else
        vg_cmd_error("serve",
                     "cannot listen on %s: port %u is in use by a process this user cannot "
                     "see (ss -ltnp as root names it); choose another port with --listen",
                     sc->listen_arg, (unsigned)port);
    free(comm);
}

/* The parse's targets: 0 the struct vg_serve_cfg, 1 the struct vg_serve_diag. */
#define VG_SERVE_AT(member) VG_OPT_AT(0, struct vg_serve_cfg, member)
#define VG_SERVE_DIAG(member) VG_OPT_AT(1, struct vg_serve_diag, member)
#define VG_SERVE_DUR(member, lo, hi, range)                                                        \
    VG_OPT_VAL(VG_SERVE_AT(member), .kind = VG_OPT_K_DURATION, .min = (lo), .max = (hi),           \
               .takes = "a duration between " range " (e.g. 5s, 500ms)")
#define VG_SERVE_CONNS(member)                                                                     \
    VG_OPT_VAL(VG_SERVE_AT(member), .kind = VG_OPT_K_NUM, .min = 1, .max = 10000,                  \
               .takes = "a number from 1 to 10000")
#define VG_SERVE_SIZE "a size such as 512MiB or 1GiB"

const struct vg_opt vg_serve_opts[] = {
    {"listen", 0, VG_OPT_ARG_REQUIRED, "ADDR",
     "HOST:PORT to listen on (default " VG_SERVE_LISTEN_DEFAULT ");\n"
     "HOST is an IPv4 address, [IPv6] or localhost; :PORT means every\n"
     "address; port 0 picks a free port (printed at start)",
     0, NULL, VG_OPT_VAL(VG_SERVE_AT(listen_arg), .kind = VG_OPT_K_STR)},
    {"allow-remote", 0, VG_OPT_ARG_NONE, NULL,
     "allow a non-loopback address: the metrics name users, commands\n"
     "and containers, so expose them only to your Prometheus",
     0, NULL, VG_OPT_VAL(VG_SERVE_AT(allow_remote), .kind = VG_OPT_K_SET)},
    {"interval", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "time between collections (default 5s; 100ms to 1h)", 0, NULL,
     VG_SERVE_DUR(interval_ms, 100, VG_HOUR_MS, "100ms and 1h")},
    {"full-scan", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "longest time between full /proc scans (default 60s; 0: every\n"
     "collection is one); in between, only the known holders, the\n"
     "PIDs the driver reports and new processes are read",
     0, NULL, VG_SERVE_DUR(full_scan_ms, 0, VG_DAY_MS, "0 and 1d")},
    {"per-process", 0, VG_OPT_ARG_REQUIRED, "MODE",
     "per-process series: top:N per GPU by memory, the rest summed in\n"
     "pid=\"other\" (default top:10); all; or none",
     VG_SERVE_PER_PROCESS, NULL, VG_OPT_CODE},
    {"conn-timeout", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "longest a connection may idle or spend on one request\n"
     "(default 10s; 1s to 10m)",
     0, NULL, VG_SERVE_DUR(conn_timeout_ms, 1000, 600000, "1s and 10m")},
    {"max-connections", 0, VG_OPT_ARG_REQUIRED, "N",
     "connections kept open at once (default 256); a new one beyond\n"
     "that closes the one waiting longest without a request",
     0, NULL, VG_SERVE_CONNS(max_conn)},
    {"max-per-client", 0, VG_OPT_ARG_REQUIRED, "N",
     "connections one client address (an IPv6 /64) may hold\n"
     "(default 32): its new one closes its own longest-waiting one;\n"
     "refused while N of its requests are being answered",
     0, NULL, VG_SERVE_CONNS(max_per_client)},
    {"context-max", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "largest amount that counts as a bare CUDA context (default 1GiB)", VG_SERVE_CONTEXT_MAX, NULL,
     VG_OPT_VAL(VG_SERVE_DIAG(rules.context_max), .kind = VG_OPT_K_SIZE, .takes = VG_SERVE_SIZE,
                .then_code = true)},
    {"unattributed-min", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "unexplained memory reported as a finding above this\n"
     "(default 256MiB)",
     0, NULL,
     VG_OPT_VAL(VG_SERVE_DIAG(rules.unattributed_min), .kind = VG_OPT_K_SIZE,
                .takes = VG_SERVE_SIZE)},
    VG_OPT_TABLE_END,
};

/* The --listen address into *addr, refused when it is not loopback without --allow-remote.
 * -1 to go on, else an exit status. */
static int vg_serve_check_listen(const struct vg_serve_cfg *sc, struct vg_serve_addr *addr)
{
    struct vg_err err = VG_ERR_INIT;
    if (vg_serve_parse_listen(sc->listen_arg, addr, &err) != 0) {
        return vg_cmd_fail("serve", &err, VG_EXIT_USAGE, NULL);
    }
    if (!addr->loopback && !sc->allow_remote) {
        vg_cmd_error("serve",
                     "'%s' is not a loopback address: the metrics name users, "
                     "processes and containers; add --allow-remote to serve them "
                     "beyond this host",
                     sc->listen_arg);
        return VG_EXIT_USAGE;
    }
    return -1;
}

/* The command line into sc, diag and *addr. -1 to go on, else an exit status. */
static int vg_serve_parse(struct vg_global *g, int argc, char **argv, struct vg_serve_cfg *sc,
                          struct vg_serve_diag *diag, struct vg_serve_addr *addr)
{
    struct vg_cmd_parse p = {
        VG_CMD_PARSE(serve), .g = g, .argc = argc, .argv = argv, .help_col = 22, .dst = {sc, diag},
    };
    int c;
    while ((c = vg_cmd_next_opt(&p)) >= 0) {
        if (c == VG_SERVE_CONTEXT_MAX) {
            diag->metrics.context_max = diag->rules.context_max;
        } else if (vg_metrics_parse_pp(optarg, &diag->metrics) != 0) {
            vg_cmd_error("serve",
                         "--per-process takes top:N (N from 1 to 100000), all or "
                         "none, not '%s'",
                         optarg);
            return VG_EXIT_USAGE;
        }
    }
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (vg_cmd_refuse_json(g, "serve",
                           "serve answers Prometheus' text format on /metrics, not a document: "
                           "use 'vramguard status --json' or 'vramguard doctor --json'"))
        return VG_EXIT_USAGE;
    return vg_serve_check_listen(sc, addr);
}

/* Block the stop signals (every thread started later inherits the mask, so they reach only
 * the sigtimedwait() of vg_serve_wait) and listen; where: the address bound. The socket, or a
 * negative errno. */
static int vg_serve_open(const struct vg_serve_addr *addr, sigset_t *stop_set, char *where,
                         size_t wn)
{
    sigemptyset(stop_set);
    sigaddset(stop_set, SIGTERM);
    sigaddset(stop_set, SIGINT);
    sigaddset(stop_set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int fd = vg_serve_listen(addr);
    if (fd < 0)
        return fd;
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        vg_serve_addr_format((struct sockaddr *)&bound, blen, where, wn);
    return fd;
}

/* Tell the service manager (a no-op outside a Type=notify service); a failure is said once. */
static void vg_serve_notify(const char *state, bool *failed)
{
    struct vg_err err = VG_ERR_INIT;
    if (vg_sd_notify(state, &err) < 0 && !*failed) {
        vg_cmd_error("serve", "%s", vg_err_msg(&err));
        *failed = true;
    }
    vg_err_release(&err);
}

/* Serve until SIGTERM or SIGINT. The service manager's watchdog is pinged from here while the
 * collector is alive (its /healthz is 200): a collection thread stuck past what its schedule
 * allows, like this loop itself stuck, stops the pings and the manager restarts the service. */
static void vg_serve_wait(const sigset_t *stop_set, struct vg_http *http, struct vg_collector *coll)
{
    bool failed = false;
    vg_serve_notify("READY=1", &failed);
    struct vg_sd_watchdog wd;
    vg_sd_watchdog_init(&wd, vg_clock_ms());
    for (;;) {
        struct vg_collector_health hl;
        vg_collector_health(coll, &hl);
        struct vg_err err = VG_ERR_INIT;
        if (!hl.stalled && vg_sd_watchdog_tick(&wd, vg_clock_ms(), &err) < 0 && !failed) {
            vg_cmd_error("serve", "%s", vg_err_msg(&err));
            failed = true;
        }
        vg_err_release(&err);
        struct timespec tick = {0, 250 * 1000000L};
        int sig = sigtimedwait(stop_set, NULL, &tick);
        if (sig == SIGHUP) {
            /* What watch does without --config: a service manager's reload (or a closed
             * terminal) must not stop the exporter. */
            vg_cmd_notice("serve", "SIGHUP: there is no configuration file to read again; "
                                   "going on");
        } else if (sig > 0) {
            vg_cmd_notice("serve", "stopping on %s", strsignal(sig));
            break;
        }
        vg_http_reap(http);
    }
    vg_serve_notify("STOPPING=1", &failed);
}

int vg_cmd_serve(struct vg_global *g, int argc, char **argv)
{
    struct vg_serve_cfg sc = {.listen_arg = VG_SERVE_LISTEN_DEFAULT,
                              .interval_ms = 5000,
                              .conn_timeout_ms = 10000,
                              .max_conn = 256,
                              .max_per_client = VG_HTTP_MAX_PER_CLIENT,
                              .full_scan_ms = VG_SAMPLER_FULL_SCAN_MS};
    struct vg_collector_opts co;
    memset(&co, 0, sizeof(co));
    struct vg_serve_diag diag;
    vg_rule_opts_init(&diag.rules);
    diag.rules.check_shell = false;
    vg_metrics_opts_init(&diag.metrics);
    diag.metrics.version = VG_VERSION;
    vg_findings_init(&diag.fs);
    co.diagnose = vg_serve_diagnose;
    co.render = vg_serve_render;
    co.arg = &diag;
    struct vg_serve_addr addr;
    int status = vg_serve_parse(g, argc, argv, &sc, &diag, &addr);
    if (status >= 0)
        return status;
    sigset_t stop_set;
    char where[96] = "?";
    int fd = vg_serve_open(&addr, &stop_set, where, sizeof(where));
    if (fd < 0) {
        vg_serve_listen_error(g, &sc, &addr, -fd);
        return VG_EXIT_SOFTWARE;
    }

    co.sampler.nvml_path = g->nvml_path;
    co.sampler.nvml_timeout_ms = g->nvml_timeout_ms;
    co.sampler.proc_root = g->proc_root;
    co.sampler.dev_dir = g->dev_dir;
    co.sampler.scan = g->scan;
    co.sampler.full_scan_ms = (unsigned)sc.full_scan_ms;
    co.sampler.full_scans_only = sc.full_scan_ms == 0;
    co.interval_ms = sc.interval_ms;
    co.log = vg_serve_log;
    struct vg_collector *coll = NULL;
    struct vg_http *http = NULL;
    struct vg_err err = VG_ERR_INIT;
    status = VG_EXIT_SOFTWARE;
    if (vg_collector_new(&co, &coll, &err) != 0 || vg_collector_start(coll, &err) != 0) {
        vg_cmd_error("serve", "%s", vg_err_msg(&err));
        close(fd);
        goto out;
    }
    struct vg_http_opts ho = {
        .listen_fd = fd,
        .max_connections = (unsigned)sc.max_conn,
        .max_per_client = (unsigned)sc.max_per_client,
        .conn_timeout_s = (unsigned)((sc.conn_timeout_ms + 999) / 1000),
        .collector = coll,
        .log = g->verbose ? vg_serve_log : NULL,
        .notice = vg_serve_log,
    };
    if (vg_http_start(&ho, &http, &err) != 0) {
        vg_cmd_error("serve", "%s", vg_err_msg(&err));
        goto out;
    }
    vg_cmd_notice("serve", "listening on http://%s/metrics (every %llu ms)", where,
                  (unsigned long long)sc.interval_ms);

    vg_serve_wait(&stop_set, http, coll);
    status = VG_EXIT_OK;
out:
    vg_http_stop(http);
    vg_collector_free(coll);
    vg_findings_release(&diag.fs);
    vg_err_release(&err);
    return status;
}
