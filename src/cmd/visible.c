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
    "Options:\n";

static const char vg_visible_help_tail[] =
    "\n"
    "Exit status: 0 the value is fine; 1 it has an entry CUDA stops at or ignores;\n"
    "3 the driver's view was unavailable; 64 bad usage.\n"
    "\n";

/* The parse's targets: 0 the --order text, 1 whether --unset was given. */
const struct vg_opt vg_visible_opts[] = {
    {"order", 0, VG_OPT_ARG_REQUIRED, "ORDER",
     "CUDA_DEVICE_ORDER to assume (default: this shell's)", 0, NULL,
     VG_OPT_VAL(VG_OPT_VAR(0, const char *), .kind = VG_OPT_K_STR,
                .words = "FASTEST_FIRST|PCI_BUS_ID")},
    {"unset", 0, VG_OPT_ARG_NONE, NULL, "resolve as if CUDA_VISIBLE_DEVICES were unset", 0, NULL,
     VG_OPT_VAL(VG_OPT_VAR(1, bool), .kind = VG_OPT_K_SET)},
    VG_OPT_TABLE_END,
};

/* Whether word is an option that takes its value as the next word ("--order ORDER"), as the
 * option tables say. */
static bool vg_visible_takes_next(const char *word)
{
    if (strncmp(word, "--", 2) != 0 || strchr(word, '='))
        return false;
    const struct vg_opt *o = vg_opt_find_long(vg_visible_opts, word);
    if (!o)
        o = vg_opt_find_long(vg_global_opts, word);
    return o && o->arg == VG_OPT_ARG_REQUIRED;
}

/* The value may stand anywhere among the options and may itself start with '-' ("-1",
 * "-1,0"), which getopt would take for an option, so it is picked out first (into *picked)
 * and the options go to opts (argv[0] first) for getopt. -1 to go on, else an exit status. */
static int vg_visible_split(int argc, char **argv, char **opts, int *nopts, const char **picked)
{
    opts[(*nopts)++] = argv[0];
    bool operands = false; /* after "--": every word is a value, none an option */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!operands && strcmp(a, "--") == 0) {
            operands = true;
            continue;
        }
        bool is_value = operands || a[0] != '-' || (a[1] >= '0' && a[1] <= '9');
        if (!is_value) {
            opts[(*nopts)++] = argv[i];
            /* An option that takes its value as the next word keeps it. */
            if (vg_visible_takes_next(a) && i + 1 < argc)
                opts[(*nopts)++] = argv[++i];
            continue;
        }
        if (*picked) {
            vg_cmd_error("visible",
                         "one value at a time; unexpected '%s' (quote a value with "
                         "spaces)",
                         a);
            return VG_EXIT_USAGE;
        }
        *picked = a;
    }
    return -1;
}

/* The command line into *value and *order. -1 to go on, else an exit status. */
static int vg_visible_parse(struct vg_global *g, int argc, char **argv, const char **value,
                            const char **order)
{
    char **opts = calloc((size_t)argc + 1, sizeof(*opts));
    if (!opts) {
        vg_cmd_error("visible", "out of memory");
        return VG_EXIT_SOFTWARE;
    }
    int nopts = 0;
    const char *picked = NULL;
    bool unset = false;
    int status = vg_visible_split(argc, argv, opts, &nopts, &picked);
    if (status >= 0) {
        free(opts);
        return status;
    }
    /* .operands: the values were set apart above; what is left over gets visible's own message. */
    struct vg_cmd_parse p = {VG_CMD_PARSE(visible), .g = g,           .argc = nopts,
                             .argv = opts,          .operands = true, .dst = {order, &unset},
                             .replay_ok = true};
    int c = vg_cmd_next_opt(&p);
    status = c == VG_CMD_OPT_HELP ? VG_EXIT_OK : c == VG_CMD_OPT_USAGE ? VG_EXIT_USAGE : -1;
    if (status < 0 && optind < nopts) {
        vg_cmd_error("visible", "unexpected argument '%s'", opts[optind]);
        status = VG_EXIT_USAGE;
    }
    free(opts);
    if (picked)
        *value = picked;
    if (unset)
        *value = NULL;
    return status;
}

/* A GPU whose calls hang is listed with what was read before the hang: its UUID or compute
 * capability (CUDA's order) may be missing, so the answer may be incomplete; with every GPU
 * hung there is nothing to resolve against. Warns about each; false when all hang. */
static bool vg_visible_check_hung(const struct vg_snapshot *snap)
{
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
    return !(nhung && nhung == snap->gpus.ngpus);
}

int vg_cmd_visible(struct vg_global *g, int argc, char **argv)
{
    const char *order = getenv("CUDA_DEVICE_ORDER");
    const char *value = getenv("CUDA_VISIBLE_DEVICES");
    int status = vg_visible_parse(g, argc, argv, &value, &order);
    if (status >= 0)
        return status;

    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(g, "visible", VG_CMD_SNAP_GPUS_ONLY | VG_CMD_SNAP_DIAGNOSED, &snap))
        return VG_EXIT_UNKNOWN;
    if (!snap->driver_ok) {
        vg_cmd_error("visible", "cannot resolve without the driver's list of GPUs: %s",
                     snap->driver_error ? snap->driver_error : "unknown reason");
        vg_snap_free(snap);
        return VG_EXIT_UNKNOWN;
    }
    if (!vg_visible_check_hung(snap)) {
        vg_snap_free(snap);
        return VG_EXIT_UNKNOWN;
    }
    struct vg_visible v;
    struct vg_err err = VG_ERR_INIT;
    if (vg_visible_resolve(value, order, &snap->gpus, &v, &err)) {
        vg_snap_free(snap);
        return vg_cmd_fail("visible", &err, VG_EXIT_SOFTWARE, NULL);
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
