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
#include "cmd/watch_config.h"

static int vg_main_help_command(struct vg_global *g, int argc, char **argv);
static int vg_main_completion(struct vg_global *g, int argc, char **argv);

/* A command of cmd/: its function vg_cmd_NAME and option table vg_NAME_opts. */
#define VG_CMD(cmd_name, text)                                                                     \
    .name = #cmd_name, .run = vg_cmd_##cmd_name, .summary = (text), .opts = vg_##cmd_name##_opts

static const struct vg_cmd_def vg_commands[] = {
    {VG_CMD(status, "each GPU and every process holding its memory (default)")},
    {VG_CMD(doctor, "why memory is held, and what to do about it")},
    {VG_CMD(visible, "how CUDA_VISIBLE_DEVICES resolves to GPUs on this host")},
    {VG_CMD(watch, "log holders, findings and alerts as they change; alert commands")},
    {VG_CMD(check, "one sample against expectations and rules; Nagios exit status")},
    {VG_CMD(demo, "a simulated host in the classic bad states, diagnosed (no GPU needed)")},
    {VG_CMD(run, "start a job on reserved GPUs, tracked, and clean up after it"),
     .operand_program = true},
    {VG_CMD(pick, "choose free GPUs; print a CUDA_VISIBLE_DEVICES value")},
    {VG_CMD(clean, "free memory held by leftovers, safely (a plan unless --force)")},
    {VG_CMD(serve, "Prometheus exporter: GPU memory by holder and by reason")},
    {VG_CMD(top, "the live view: memory by reason, holders, findings; safe stop keys")},
    {VG_CMD(handoff, "the scheduler's gate between jobs (prolog, epilog) and node checks"),
     .operands = "prolog|epilog|node"},
    {.name = "help",
     .run = vg_main_help_command,
     .summary = "a command's help: the same as 'vramguard COMMAND --help'",
     .operand_commands = true},
    /* Hidden from the help: the scripts that make install puts where the shells look. */
    {.name = "completion", .run = vg_main_completion, .operands = "bash|zsh|fish"},
};

#define VG_NCOMMANDS (sizeof(vg_commands) / sizeof(vg_commands[0]))

static int vg_main_help_command(struct vg_global *g, int argc, char **argv)
{
    return vg_cmd_help_command(g, argc, argv, vg_commands, VG_NCOMMANDS);
}

static int vg_main_completion(struct vg_global *g, int argc, char **argv)
{
    return vg_cmd_completion(g, argc, argv, vg_commands, VG_NCOMMANDS);
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
            vg_cmd_main_help(stdout, vg_commands, VG_NCOMMANDS);
            return VG_EXIT_OK;
        case 'V':
        case VG_OPT_VERSION:
            vg_cmd_version();
            return VG_EXIT_OK;
        case ':':
            vg_cmd_usage_error(NULL, c, argc, argv, longopts);
            return VG_EXIT_USAGE;
        case '?':
            /* An abbreviation of several options is refused here, whatever the command. */
            if (optind > 0 && vg_cmd_opt_ambiguous(longopts, argv[optind - 1])) {
                vg_cmd_usage_error(NULL, c, argc, argv, longopts);
                return VG_EXIT_USAGE;
            }
            /* fall through */
        default:
            /* Not a global option: it may be one of the default command's
             * (`vramguard --no-nvml`), so let status parse the whole line and complain. */
            return vg_cmd_status(&g, argc, argv);
        }
    }

    const char *name = optind < argc ? argv[optind] : "status";
    for (size_t i = 0; i < VG_NCOMMANDS; i++) {
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
