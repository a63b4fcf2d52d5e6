/*
 * `vramguard visible [VALUE]`: how a CUDA_VISIBLE_DEVICES value (default: this shell's) and
 * CUDA_DEVICE_ORDER resolve to physical GPUs on this host, before a job finds out the hard way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "model/snapshot.h"
#include "model/visible.h"
#include "render/render.h"
#include "render/text.h"

static const char vg_visible_help[] =
    "usage: vramguard visible [VALUE] [--order ORDER] [--unset]\n"
    "\n"
    "Show which physical GPUs a CUDA program would see as cuda:0, cuda:1, ... given a\n"
    "CUDA_VISIBLE_DEVICES value (default: this shell's) and CUDA_DEVICE_ORDER: where CUDA\n"
    "stops reading the list and why, duplicates, unknown UUIDs, MIG devices, and whether CUDA\n"
    "and nvidia-smi number the GPUs differently here.\n"
    "\n"
    "Options:\n"
    "  --order ORDER        CUDA_DEVICE_ORDER to assume (default: this shell's)\n"
    "  --unset              resolve as if CUDA_VISIBLE_DEVICES were unset\n"
    "\n"
    "Exit status: 0 the value is fine; 1 it has an entry CUDA stops at or ignores;\n"
    "3 the driver's view was unavailable; 64 bad usage.\n"
    "\n";

enum { VG_OPT_ORDER = VG_OPT_FIRST_LOCAL, VG_OPT_UNSET };

int vg_cmd_visible(struct vg_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        VG_GLOBAL_LONGOPTS,
        {"order", required_argument, NULL, VG_OPT_ORDER},
        {"unset", no_argument, NULL, VG_OPT_UNSET},
        {NULL, 0, NULL, 0},
    };
    const char *order = getenv("CUDA_DEVICE_ORDER");
    const char *value = getenv("CUDA_VISIBLE_DEVICES");
    bool unset = false;
    /* The value may stand anywhere among the options and may itself start with '-' ("-1",
     * "-1,0"), which getopt would take for an option, so it is picked out first and getopt
     * parses the rest. */
    char **opts = calloc((size_t)argc + 1, sizeof(*opts));
    if (!opts) {
        vg_cmd_error("visible", "out of memory");
        return VG_EXIT_SOFTWARE;
    }
    int nopts = 0;
    const char *picked = NULL;
    opts[nopts++] = argv[0];
    bool operands = false; /* after "--": every word is a value, none an option */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!operands && strcmp(a, "--") == 0) {
            operands = true;
            continue;
        }
        bool is_value = operands || a[0] != '-' || (a[1] >= '0' && a[1] <= '9');
        if (!is_value) {
            opts[nopts++] = argv[i];
            /* An option that takes its value as the next word keeps it. */
            static const char *const with_arg[] = {"--order", "--proc", "--dev", "--nvml",
                                                   "--nvml-timeout"};
            for (size_t k = 0; k < sizeof(with_arg) / sizeof(with_arg[0]); k++)
                if (strcmp(argv[i], with_arg[k]) == 0 && i + 1 < argc)
                    opts[nopts++] = argv[++i];
            continue;
        }
        if (picked) {
            vg_cmd_error("visible", "one value at a time; unexpected '%s' (quote a value with "
                                    "spaces)", a);
            free(opts);
            return VG_EXIT_USAGE;
        }
        picked = a;
    }
    /* .operands: the values were set apart above; what is left over gets visible's own message. */
    struct vg_cmd_parse p = {.g = g, .cmd = "visible", .help = vg_visible_help,
                             .longopts = longopts, .argc = nopts, .argv = opts, .operands = true};
    int c;
    while ((c = vg_cmd_next_opt(&p)) >= 0) {
        switch (c) {
        case VG_OPT_ORDER:
            order = optarg;
            break;
        case VG_OPT_UNSET:
            unset = true;
            break;
        }
    }
    int status = c == VG_CMD_OPT_HELP ? VG_EXIT_OK : c == VG_CMD_OPT_USAGE ? VG_EXIT_USAGE : -1;
    if (status < 0 && optind < nopts) {
        vg_cmd_error("visible", "unexpected argument '%s'", opts[optind]);
        status = VG_EXIT_USAGE;
    }
    free(opts);
    if (status >= 0)
        return status;
    if (picked)
        value = picked;
    if (unset)
        value = NULL;

    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(g, "visible", VG_CMD_SNAP_GPUS_ONLY, &snap))
        return VG_EXIT_UNKNOWN;
    if (!snap->driver_ok) {
        vg_cmd_error("visible", "cannot resolve without the driver's list of GPUs: %s",
                     snap->driver_error ? snap->driver_error : "unknown reason");
        vg_snap_free(snap);
        return VG_EXIT_UNKNOWN;
    }
    /* A GPU whose calls hang is listed with what was read before the hang: its UUID or compute
     * capability (CUDA's order) may be missing, so the answer may be incomplete; with every GPU
     * hung there is nothing to resolve against. */
    size_t nhung = 0;
    for (size_t i = 0; i < snap->gpus.ngpus; i++) {
        const struct vg_gpu *hg = &snap->gpus.gpus[i];
        if (!hg->hung)
            continue;
        nhung++;
        struct vg_buf m;
        vg_buf_init(&m, 0);
        if (hg->nerrors)
            vg_text_escape(&m, hg->errors[0].msg, strlen(hg->errors[0].msg), 0, NULL);
        vg_cmd_error("visible", "%s: %s", nhung == snap->gpus.ngpus ? "cannot resolve" : "warning",
                     m.err || !m.len ? "a driver call hangs" : vg_buf_str(&m));
        vg_buf_release(&m);
    }
    if (nhung && nhung == snap->gpus.ngpus) {
        vg_snap_free(snap);
        return VG_EXIT_UNKNOWN;
    }
    struct vg_visible v;
    struct vg_err err = VG_ERR_INIT;
    if (vg_visible_resolve(value, order, &snap->gpus, &v, &err)) {
        vg_cmd_error("visible", "%s", vg_err_msg(&err));
        vg_err_release(&err);
        vg_snap_free(snap);
        return VG_EXIT_SOFTWARE;
    }
    bool problem = v.corrected != NULL || v.order_invalid;
    struct vg_render_opts ro = {.color = !g->json && vg_cmd_use_color(g),
                                .width = vg_cmd_term_width()};
    struct vg_buf out;
    vg_buf_init(&out, 0);
    int rc = g->json ? vg_render_visible_json(snap, &v, value, order, &out)
                     : vg_render_visible_text(snap, &v, value, order, &ro, &out);
    status = vg_cmd_emit("visible", rc, &out, problem ? VG_EXIT_WARN : VG_EXIT_OK);
    vg_buf_release(&out);
    vg_visible_release(&v);
    vg_snap_free(snap);
    return status;
}
