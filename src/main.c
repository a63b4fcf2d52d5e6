/*
 * vramguard: who holds memory on which GPU, why, and what to do about it.
 *
 * A thin main over the layers below (jq-style): parse the global options up to the command
 * name, look the command up in a table, and hand it the rest of the command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"

struct vg_command {
    const char *name;
    int (*run)(struct vg_global *g, int argc, char **argv);
    const char *summary;
};

static const struct vg_command vg_commands[] = {
    {"status", vg_cmd_status, "each GPU and every process holding its memory (default)"},
    {"doctor", vg_cmd_doctor, "why memory is held, and what to do about it"},
    {"visible", vg_cmd_visible, "how CUDA_VISIBLE_DEVICES resolves to GPUs on this host"},
    {"watch", vg_cmd_watch, "log holders, findings and alerts as they change; alert commands"},
    {"check", vg_cmd_check, "one sample against expectations and rules; Nagios exit status"},
    {"demo", vg_cmd_demo, "a simulated host in the classic bad states, diagnosed (no GPU needed)"},
    {"run", vg_cmd_run, "start a job on reserved GPUs, tracked, and clean up after it"},
    {"pick", vg_cmd_pick, "choose free GPUs; print a CUDA_VISIBLE_DEVICES value"},
    {"clean", vg_cmd_clean, "free memory held by leftovers, safely (a plan unless --force)"},
    {"serve", vg_cmd_serve, "Prometheus exporter: GPU memory by holder and by reason"},
    {"top", vg_cmd_top, "the live view: memory by reason, holders, findings; safe stop keys"},
    {"handoff", vg_cmd_handoff,
     "the scheduler's gate between jobs (prolog, epilog) and node checks"},
};

static void vg_main_help(FILE *f)
{
    fputs("usage: vramguard [global options] [COMMAND] [options]\n"
          "\n"
          "Shows who holds memory on which NVIDIA GPU, joined from the driver (NVML) and from\n"
          "the /dev/nvidia* descriptors processes hold open.\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < sizeof(vg_commands) / sizeof(vg_commands[0]); i++)
        fprintf(f, "  %-10s %s\n", vg_commands[i].name, vg_commands[i].summary);
    fputs("\n'vramguard COMMAND --help' shows a command's options.\n\n", f);
    vg_global_help(f);
    fputs("\nExit status: 0 ok; 1 warnings; 2 critical; 3 could not check; 64 bad usage;\n"
          "70 internal error. See vramguard(1).\n",
          f);
}

int main(int argc, char **argv)
{
    static const struct vg_opt opts[] = {
        {"version", 'V', VG_OPT_ARG_NONE, NULL, NULL, 'V', NULL, VG_OPT_CODE},
        VG_OPT_TABLE_END,
    };
    struct option longopts[VG_OPT_MAX];
    /* '+': stop at the command name; the command parses the rest. Messages are ours. */
    char optstring[8] = "+:h";
    if (vg_cmd_opt_arrays(opts, longopts, VG_OPT_MAX, optstring, sizeof(optstring))) {
        vg_cmd_error(NULL, "internal error: too many options");
        return VG_EXIT_SOFTWARE;
    }
    struct vg_global g = {0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
        int r = vg_global_opt(&g, c, optarg, NULL);
        if (r < 0)
            return VG_EXIT_USAGE;
        if (r > 0)
            continue;
        switch (c) {
        case 'h':
        case VG_OPT_HELP:
            vg_main_help(stdout);
            return VG_EXIT_OK;
        case 'V':
            printf("vramguard %s\n", VG_VERSION);
            return VG_EXIT_OK;
        case ':':
            vg_cmd_usage_error(NULL, c, argc, argv);
            return VG_EXIT_USAGE;
        default:
            /* Not a global option: it may be one of the default command's
             * (`vramguard --no-nvml`), so let status parse the whole line and complain. */
            return vg_cmd_status(&g, argc, argv);
        }
    }

    const char *name = optind < argc ? argv[optind] : "status";
    for (size_t i = 0; i < sizeof(vg_commands) / sizeof(vg_commands[0]); i++) {
        if (strcmp(vg_commands[i].name, name) != 0)
            continue;
        /* The command sees argv[0] = its name, then its own arguments. */
        int sub_argc = optind < argc ? argc - optind : 1;
        char *dflt[] = {(char *)name, NULL};
        char **sub_argv = optind < argc ? argv + optind : dflt;
        return vg_commands[i].run(&g, sub_argc, sub_argv);
    }
    vg_cmd_error(NULL, "'%s' is not a vramguard command (see 'vramguard --help')", name);
    return VG_EXIT_USAGE;
}
