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
    "Options:\n";

static const char vg_status_help_tail[] =
    "\n"
    "Exit status: 0 shown in full; 3 the driver's view was unavailable (what /proc shows is\n"
    "still printed); 64 bad usage; 70 internal error.\n"
    "\n";

const struct vg_opt vg_status_opts[] = {
    {"no-nvml", 0, VG_OPT_ARG_NONE, NULL, "do not load the driver; show device-node holders only",
     0, NULL, VG_OPT_VAL(VG_OPT_VAR(0, bool), .kind = VG_OPT_K_SET)},
    VG_OPT_TABLE_END,
};

int vg_cmd_status(struct vg_global *g, int argc, char **argv)
{
    struct vg_cmd_status_req req = {0};
    struct vg_cmd_parse p = {VG_CMD_PARSE(status),  .g = g,           .argc = argc, .argv = argv,
                             .dst = {&req.no_nvml}, .replay_ok = true};
    int c = vg_cmd_next_opt(&p);
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    return vg_cmd_status_show(g, &req);
}

int vg_cmd_status_show(const struct vg_global *g, const struct vg_cmd_status_req *req)
{
    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(g, "status",
                        VG_CMD_SNAP_DIAGNOSED | (req->no_nvml ? VG_CMD_SNAP_NO_NVML : 0), &snap))
        return VG_EXIT_UNKNOWN;

    struct vg_render_opts ro = {
        .color = !g->json && vg_cmd_use_color(g),
        .width = vg_cmd_term_width(),
        .verbose = g->verbose,
    };
    struct vg_buf out;
    vg_buf_init(&out, 0);
    int rc =
        g->json ? vg_render_status_json(snap, &ro, &out) : vg_render_status_text(snap, &ro, &out);
    int status =
        vg_cmd_emit("status", rc, &out, vg_cmd_driver_view(snap) ? VG_EXIT_OK : VG_EXIT_UNKNOWN);
    vg_buf_release(&out);
    vg_snap_free(snap);
    return status;
}
