/*
 * `vramguard status`: the first screen. Every GPU with its memory (the driver's reservation
 * apart) and every process holding it, joined from NVML and from /dev/nvidia* descriptors.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "model/snapshot.h"
#include "render/render.h"

static const char vg_status_help[] =
    "usage: vramguard [status] [options]\n"
    "\n"
    "Show each GPU (index, minor, UUID, name, memory used/total with the driver's reservation\n"
    "apart, utilisation) and every process holding it: PID, user, memory (n/a when the driver\n"
    "cannot tell), type (C compute, G graphics, M MPS), state, how it was seen (nvml: in the\n"
    "driver's process list; fd: holds /dev/nvidiaN open; both), container and command.\n"
    "\n"
    "Options:\n"
    "  --no-nvml            do not load the driver; show device-node holders only\n"
    "\n"
    "Exit status: 0 shown in full; 3 the driver's view was unavailable (what /proc shows is\n"
    "still printed); 64 bad usage; 70 internal error.\n"
    "\n";

enum { VG_OPT_NO_NVML = VG_OPT_FIRST_LOCAL };

int vg_cmd_status(struct vg_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        VG_GLOBAL_LONGOPTS,
        {"no-nvml", no_argument, NULL, VG_OPT_NO_NVML},
        {NULL, 0, NULL, 0},
    };
    bool no_nvml = false;
    int c;
    optind = 0; /* 0, not 1: glibc then resets its internal state from main's parse */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        int r = vg_global_opt(g, c, optarg, "status");
        if (r < 0)
            return VG_EXIT_USAGE;
        if (r > 0)
            continue;
        switch (c) {
        case 'h':
        case VG_OPT_HELP:
            fputs(vg_status_help, stdout);
            fputs(vg_global_help, stdout);
            return VG_EXIT_OK;
        case VG_OPT_NO_NVML:
            no_nvml = true;
            break;
        default:
            vg_cmd_usage_error("status", c, argc, argv);
            return VG_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        vg_cmd_error("status", "unexpected argument '%s' (see 'vramguard status --help')",
                     argv[optind]);
        return VG_EXIT_USAGE;
    }

    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(g, "status", no_nvml, &snap))
        return VG_EXIT_UNKNOWN;

    struct vg_render_opts ro = {
        .color = !g->json && vg_cmd_use_color(g),
        .width = vg_cmd_term_width(),
    };
    struct vg_buf out;
    vg_buf_init(&out, 0);
    int rc = g->json ? vg_render_status_json(snap, &ro, &out)
                     : vg_render_status_text(snap, &ro, &out);
    int status = vg_cmd_emit("status", rc, &out, vg_cmd_driver_view(snap) ? VG_EXIT_OK : VG_EXIT_UNKNOWN);
    vg_buf_release(&out);
    vg_snap_free(snap);
    return status;
}
