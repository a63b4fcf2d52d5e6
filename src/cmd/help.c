/*
 * `vramguard help [COMMAND]` and the main help. `help COMMAND` runs COMMAND with --help, so its
 * text is the command's own --help and cannot drift from it.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

static const char vg_help_help[] = "usage: vramguard help [COMMAND]\n"
                                   "\n"
                                   "Without COMMAND, the main help (the same as 'vramguard "
                                   "--help'); with one, that command's\n"
                                   "help (the same as 'vramguard COMMAND --help').\n";

static const char vg_help_help_tail[] = "\n"
                                        "Exit status: 0; 64 an unknown command or bad usage.\n"
                                        "\n";

static const struct vg_opt vg_help_opts[] = {
    VG_OPT_TABLE_END,
};

void vg_cmd_main_help(FILE *f, const struct vg_cmd_def *cmds, size_t n)
{
    fputs("usage: vramguard [global options] [COMMAND] [options]\n"
          "\n"
          "Shows who holds memory on which NVIDIA GPU, joined from the driver (NVML) and from\n"
          "the /dev/nvidia* descriptors processes hold open.\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < n; i++)
        if (cmds[i].summary)
            fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
    fputs("\n'vramguard help COMMAND' or 'vramguard COMMAND --help' shows a command's options;\n"
          "'vramguard completion bash|zsh|fish' prints a shell completion script.\n\n",
          f);
    vg_global_help(f);
    fputs("\nExit status: 0 ok; 1 warnings; 2 critical; 3 could not check; 64 bad usage;\n"
          "70 internal error. See vramguard(1).\n",
          f);
}

int vg_cmd_help_command(struct vg_global *g, int argc, char **argv, const struct vg_cmd_def *cmds,
                        size_t n)
{
    struct vg_cmd_parse p = {VG_CMD_PARSE(help), .g = g,           .argc = argc,
                             .argv = argv,       .operands = true, .replay_ok = true};
    int c = vg_cmd_next_opt(&p);
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (optind >= argc) {
        vg_cmd_main_help(stdout, cmds, n);
        return VG_EXIT_OK;
    }
    if (optind + 1 < argc) {
        vg_cmd_error("help", "unexpected argument '%s' (see 'vramguard help --help')",
                     argv[optind + 1]);
        return VG_EXIT_USAGE;
    }
    const char *name = argv[optind];
    for (size_t i = 0; i < n; i++) {
        if (strcmp(cmds[i].name, name) != 0)
            continue;
        char help[] = "--help";
        char *sub_argv[] = {(char *)cmds[i].name, help, NULL};
        return cmds[i].run(g, 2, sub_argv);
    }
    vg_cmd_error("help", "'%s' is not a vramguard command (see 'vramguard --help')", name);
    return VG_EXIT_USAGE;
}
