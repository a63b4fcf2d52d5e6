/*
 * `vramguard doctor`: the diagnosis. Builds a snapshot, runs every rule, and prints per GPU
 * who holds it and why, then each finding with its evidence and fix. The exit status follows
 * the worst finding so scripts can act on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "model/snapshot.h"
#include "render/render.h"
#include "rules/rules.h"
#include "rules/xid_table.h"
#include "util/parse.h"

static const char vg_doctor_help[] =
    "usage: vramguard doctor [--gpu G] [--pid P] [options]\n"
    "\n"
    "Diagnose why GPU memory is held: per GPU, who holds it and why; then each finding with\n"
    "the evidence seen, how sure it is, and the fix (the command, variable or line of code to\n"
    "change). What could not be read (other users' processes, a failed driver call) is said,\n"
    "never taken as absent. Leftovers of ended jobs are judged from evidence with a\n"
    "confidence; whether they still work is measured over 0.5 s when there are any.\n"
    "\n"
    "Options:\n";

static const char vg_doctor_help_tail[] =
    "\n"
    "Exit status: 0 no findings (or info only); 1 warnings; 2 critical; 3 could not check\n"
    "(the driver's view was unavailable and nothing critical was found); 64 bad usage.\n"
    "Every rule is described in docs/diagnoses.md.\n"
    "\n";

enum { VG_DOCTOR_LIST = VG_OPT_FIRST_LOCAL };

/* --list: each rule's id and what it sees; with --json, a vramguard.rules/1 document. */
static int vg_doctor_list(const struct vg_global *g)
{
    size_t n;
    const struct vg_rule_def *t = vg_rules_table(&n);
    if (!g->json) {
        for (size_t i = 0; i < n; i++)
            printf("%-18s %s\n", t[i].id, t[i].sees); /* the longest id: retirement-pending */
        return VG_EXIT_OK;
    }
    struct vg_buf out;
    vg_buf_init(&out, 0);
    int status = vg_cmd_emit("doctor", vg_render_rules_json(&out), &out, VG_EXIT_OK);
    vg_buf_release(&out);
    return status;
}

/* The parse's targets: 0 the rule options, 1 the finding filter, 2 the --gpu text, 3 --sysfs. */
#define VG_DOCTOR_RULES(member) VG_OPT_AT(0, struct vg_rule_opts, member)
#define VG_DOCTOR_SIZE "a size such as 512MiB or 1GiB"

const struct vg_opt vg_doctor_opts[] = {
    {"gpu", 0, VG_OPT_ARG_REQUIRED, "G", "only findings about GPU G (index or UUID prefix)", 0,
     NULL, VG_OPT_VAL(VG_OPT_VAR(2, const char *), .kind = VG_OPT_K_STR)},
    {"pid", 0, VG_OPT_ARG_REQUIRED, "P", "only findings about process P", 0, NULL,
     VG_OPT_VAL(VG_OPT_AT(1, struct vg_finding_filter, pid),
                VG_OPT_GIVEN(struct vg_finding_filter, by_pid), .kind = VG_OPT_K_PID,
                .takes = "a process id")},
    {"context-max", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "largest amount that counts as a bare CUDA context (default 1GiB)", 0, NULL,
     VG_OPT_VAL(VG_DOCTOR_RULES(context_max), .kind = VG_OPT_K_SIZE, .takes = VG_DOCTOR_SIZE)},
    {"unattributed-min", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "unexplained memory reported above this (default 256MiB)", 0, NULL,
     VG_OPT_VAL(VG_DOCTOR_RULES(unattributed_min), .kind = VG_OPT_K_SIZE, .takes = VG_DOCTOR_SIZE)},
    {"xid-fatal", 0, VG_OPT_ARG_REQUIRED, "CODES",
     "Xid codes that leave a GPU wedged, whatever the table says\n"
     "(e.g. 13,31; docs/diagnoses.md, \"xid\")",
     0, NULL, VG_OPT_VAL(VG_DOCTOR_RULES(xid_wedged), .kind = VG_OPT_K_STR)},
    {"xid-dirty", 0, VG_OPT_ARG_REQUIRED, "CODES", "Xid codes that leave a GPU dirty", 0, NULL,
     VG_OPT_VAL(VG_DOCTOR_RULES(xid_dirty), .kind = VG_OPT_K_STR)},
    {"xid-noted", 0, VG_OPT_ARG_REQUIRED, "CODES", "Xid codes that are only noted", 0, NULL,
     VG_OPT_VAL(VG_DOCTOR_RULES(xid_noted), .kind = VG_OPT_K_STR)},
    {"no-shell", 0, VG_OPT_ARG_NONE, NULL,
     "do not check this shell's CUDA_VISIBLE_DEVICES and\n"
     "CUDA_DEVICE_ORDER",
     0, NULL, VG_OPT_VAL(VG_DOCTOR_RULES(check_shell), .kind = VG_OPT_K_CLEAR)},
    {"expect-gpus", 0, VG_OPT_ARG_REQUIRED, "N",
     "the host has N GPUs: fewer in the driver's view is gpu-missing\n"
     "(default: the NVIDIA GPUs on the PCI bus)",
     0, NULL,
     VG_OPT_VAL(VG_DOCTOR_RULES(expect_gpus), VG_OPT_GIVEN(struct vg_rule_opts, expect_gpus_set),
                .kind = VG_OPT_K_NUM, .min = 0, .max = 1024, .takes = "a number of GPUs")},
    {"sysfs", 0, VG_OPT_ARG_REQUIRED, "DIR", "sysfs to count the PCI bus's GPUs in (default /sys)",
     0, NULL, VG_OPT_VAL(VG_OPT_VAR(3, const char *), .kind = VG_OPT_K_STR)},
    {"list", 0, VG_OPT_ARG_NONE, NULL, "list the rules and exit (--json: vramguard.rules/1)",
     VG_DOCTOR_LIST, NULL, VG_OPT_CODE},
    VG_OPT_TABLE_END,
};

/* The command line into ropts, *gpu_arg and flt. -1 to go on, else an exit status (--list
 * prints the rules and ends the command). */
static int vg_doctor_parse(struct vg_global *g, int argc, char **argv, struct vg_rule_opts *ropts,
                           const char **gpu_arg, struct vg_finding_filter *flt)
{
    struct vg_cmd_parse p = {VG_CMD_PARSE(doctor),
                             .g = g,
                             .argc = argc,
                             .argv = argv,
                             .dst = {ropts, flt, gpu_arg, &g->sys_root},
                             .replay_ok = true};
    int c = vg_cmd_next_opt(&p);
    /* the rest of the line first: a --json after --list counts too */
    if (c == VG_DOCTOR_LIST) {
        while ((c = vg_cmd_next_opt(&p)) >= 0)
            ;
        if (c != VG_CMD_OPT_END)
            return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
        return vg_doctor_list(g);
    }
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    const char *lists[] = {ropts->xid_wedged, ropts->xid_dirty, ropts->xid_noted};
    const char *names[] = {"--xid-fatal", "--xid-dirty", "--xid-noted"};
    for (size_t i = 0; i < 3; i++) {
        struct vg_err err = VG_ERR_INIT;
        if (lists[i] && vg_xid_list_check(lists[i], &err) != 0) {
            vg_cmd_error("doctor", "%s: %s", names[i], vg_err_msg(&err));
            vg_err_release(&err);
            return VG_EXIT_USAGE;
        }
    }
    return -1;
}

/* The exit status the selected findings call for. */
static int vg_doctor_status(const struct vg_snapshot *snap, const struct vg_findings *fs,
                            const struct vg_finding_filter *flt)
{
    int worst = -1;
    for (size_t i = 0; i < fs->n; i++)
        if (vg_render_finding_selected(&fs->v[i], flt) && (int)fs->v[i].severity > worst)
            worst = (int)fs->v[i].severity;
    if (worst == VG_SEV_CRITICAL)
        return VG_EXIT_CRIT;
    if (!vg_cmd_driver_view(snap))
        return VG_EXIT_UNKNOWN;
    if (worst == VG_SEV_WARNING)
        return VG_EXIT_WARN;
    return VG_EXIT_OK;
}

static int vg_doctor_run(const struct vg_global *g, struct vg_rule_opts ropts, const char *gpu_arg,
                         struct vg_finding_filter flt);

int vg_cmd_doctor(struct vg_global *g, int argc, char **argv)
{
    struct vg_rule_opts ropts;
    vg_rule_opts_init(&ropts);
    ropts.check_shell = true;
    const char *gpu_arg = NULL;
    struct vg_finding_filter flt = {0};
    int status = vg_doctor_parse(g, argc, argv, &ropts, &gpu_arg, &flt);
    if (status >= 0)
        return status;
    return vg_doctor_run(g, ropts, gpu_arg, flt);
}

int vg_cmd_doctor_show(const struct vg_global *g, const struct vg_cmd_doctor_req *req)
{
    struct vg_rule_opts ropts;
    vg_rule_opts_init(&ropts);
    ropts.check_shell = req->check_shell;
    return vg_doctor_run(g, ropts, NULL, (struct vg_finding_filter){0});
}

/* The diagnosis of the host g names, with those rule options and that selection. */
static int vg_doctor_run(const struct vg_global *g, struct vg_rule_opts ropts, const char *gpu_arg,
                         struct vg_finding_filter flt)
{
    int status;
    if (ropts.check_shell) {
        ropts.shell_cvd = getenv("CUDA_VISIBLE_DEVICES");
        ropts.shell_order = getenv("CUDA_DEVICE_ORDER");
    }

    struct vg_snapshot *snap = NULL;
    if (vg_cmd_snapshot(g, "doctor", VG_CMD_SNAP_JUDGE | VG_CMD_SNAP_DIAGNOSED, &snap))
        return VG_EXIT_UNKNOWN;
    if (gpu_arg) {
        if (!snap->driver_ok) {
            vg_cmd_error("doctor", "--gpu needs the driver's view, which is unavailable: %s",
                         snap->driver_error ? snap->driver_error : "unknown reason");
            vg_snap_free(snap);
            return VG_EXIT_UNKNOWN;
        }
        if (vg_cmd_find_gpu(snap, "doctor", gpu_arg, &flt.gpu)) {
            vg_snap_free(snap);
            return VG_EXIT_USAGE;
        }
        flt.by_gpu = true;
    }

    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_err err = VG_ERR_INIT;
    if (vg_rules_run(snap, &ropts, &fs, &err)) {
        vg_findings_release(&fs);
        vg_snap_free(snap);
        return vg_cmd_fail("doctor", &err, VG_EXIT_SOFTWARE, NULL);
    }

    status = vg_doctor_status(snap, &fs, &flt);
    struct vg_render_opts ro = {.color = !g->json && vg_cmd_use_color(g),
                                .width = vg_cmd_term_width(),
                                .verbose = g->verbose};
    struct vg_buf out;
    vg_buf_init(&out, 0);
    int rc = g->json ? vg_render_doctor_json(snap, &fs, &flt, &out)
                     : vg_render_doctor_text(snap, &fs, &flt, &ro, &out);
    status = vg_cmd_emit("doctor", rc, &out, status);
    vg_buf_release(&out);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    return status;
}
