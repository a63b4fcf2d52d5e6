/*
 * `vramguard check`: one sample judged against the same rules and expectations as `watch`,
 * reported the way Nagios, Icinga, cron and health checks want it: a summary line first and an
 * exit status (0 ok, 1 warning, 2 critical, 3 could not check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/watch_config.h"
#include "model/snapshot.h"
#include "render/check.h"
#include "rules/expect.h"
#include "rules/health.h"
#include "rules/rules.h"

static const char vg_check_help[] =
    "usage: vramguard check [--expect GPU=WHO ...] [--threshold SIZE] [--config FILE] [options]\n"
    "\n"
    "Take one sample, run every rule and check the expectations (as 'watch' does), and print\n"
    "a summary line (VRAMGUARD OK|WARNING|CRITICAL|UNKNOWN - ...) then one line per alert and\n"
    "finding, worst first. For cron, CI, Nagios/Icinga and container health checks.\n"
    "\n"
    "Options:\n";

static const char vg_check_help_tail[] =
    "\n"
    "Exit status: 0 ok (nothing, or info only); 1 warnings; 2 critical (a critical finding or\n"
    "alert, or a GPU lost or hung); 3 could not check (no driver view, /proc unreadable, or an\n"
    "expectation names no GPU here) and nothing critical was found; 64 bad usage.\n"
    "\n";

/* --expect and --threshold are the watch config keys of the same name; --config is stored
 * into the parse's target 0. */
const struct vg_opt vg_check_opts[] = {
    {"expect", 0, VG_OPT_ARG_REQUIRED, "GPU=WHO",
     "what GPU (index or UUID) may carry: none, PIDs, uid:N or user\n"
     "names, comma-separated; repeatable (see 'vramguard watch --help')",
     VG_WATCH_OPT_SETTING, "expect", VG_OPT_CODE},
    {"threshold", 0, VG_OPT_ARG_REQUIRED, "SIZE", "alerts for memory above this (default 10MiB)",
     VG_WATCH_OPT_SETTING, "threshold", VG_OPT_CODE},
    {"config", 0, VG_OPT_ARG_REQUIRED, "FILE",
     "take expect, threshold and nvml_timeout from a watch config file", 0, NULL,
     VG_OPT_VAL(VG_OPT_VAR(0, const char *), .kind = VG_OPT_K_STR)},
    VG_OPT_TABLE_END,
};

static int vg_check_flag(struct vg_watch_config *c, const char *key, const char *value)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_watch_config_set(c, key, value, &err);
    if (rc)
        vg_cmd_error("check", "--%s: %s", key, vg_err_msg(&err));
    vg_err_release(&err);
    return rc;
}

/* Parse the command line and the config file into cfg. 0, -1 after --help, or an exit status. */
static int vg_check_parse(struct vg_global *g, int argc, char **argv, struct vg_watch_config *cfg)
{
    struct vg_watch_config flags;
    vg_watch_config_init(&flags);
    const char *config = NULL;
    struct vg_cmd_parse p = {VG_CMD_PARSE(check), .g = g,           .argc = argc,
                             .argv = argv,        .dst = {&config}, .replay_ok = true};
    int status = 0, c;
    while (status == 0 && (c = vg_cmd_next_opt(&p)) >= 0)
        if (vg_check_flag(&flags, p.row->config_key, optarg))
            status = VG_EXIT_USAGE;
    if (status == 0 && c != VG_CMD_OPT_END)
        status = c == VG_CMD_OPT_HELP ? -1 : VG_EXIT_USAGE;
    if (status == 0) {
        struct vg_watch_config file;
        vg_watch_config_init(&file);
        struct vg_err err = VG_ERR_INIT;
        if (config && vg_watch_config_load(&file, config, 0, &err) != 0) {
            vg_cmd_error("check", "%s", vg_err_msg(&err));
            status = VG_EXIT_USAGE;
        } else if (vg_watch_config_merge(cfg, &file, &flags) != 0) {
            vg_cmd_error("check", "out of memory");
            status = VG_EXIT_SOFTWARE;
        }
        vg_err_release(&err);
        vg_watch_config_release(&file);
    }
    vg_watch_config_release(&flags);
    return status;
}

int vg_cmd_check(struct vg_global *g, int argc, char **argv)
{
    struct vg_watch_config cfg;
    vg_watch_config_init(&cfg);
    int status = vg_check_parse(g, argc, argv, &cfg);
    if (status) {
        vg_watch_config_release(&cfg);
        return status < 0 ? VG_EXIT_OK : status;
    }
    struct vg_global gg = *g;
    if (!gg.nvml_timeout_ms)
        gg.nvml_timeout_ms = cfg.nvml_timeout_ms;

    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(&gg, "check", VG_CMD_SNAP_JUDGE | VG_CMD_SNAP_DIAGNOSED, &snap)) {
        printf("VRAMGUARD UNKNOWN - cannot read processes\n");
        vg_watch_config_release(&cfg);
        return VG_EXIT_UNKNOWN;
    }
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    ro.check_shell = false; /* a health check's own environment says nothing about the host */
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_err err = VG_ERR_INIT;
    if (vg_health_judge(snap, &ro, &cfg.expect, cfg.threshold, &fs, &err) != 0) {
        vg_cmd_error("check", "%s", vg_err_msg(&err));
        status = VG_EXIT_SOFTWARE;
    } else {
        enum vg_health_state state = vg_health_state(snap, &fs);
        struct vg_buf out;
        vg_buf_init(&out, 0);
        int rc = g->json ? vg_render_check_json(snap, &fs, state, &out)
                         : vg_render_check_text(snap, &fs, state, vg_cmd_use_color(g), &out);
        status = vg_cmd_emit("check", rc, &out, (int)state);
        vg_buf_release(&out);
    }
    vg_err_release(&err);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    vg_watch_config_release(&cfg);
    return status;
}
