/*
 * What every command shares: global options, error messages in the one house format
 * ("vramguard: status: cannot read ..."), colour and terminal decisions, writing output.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "rules/health.h"
#include "rules/rules.h"
#include "model/snapshot.h"
#include "render/text.h"
#include "util/buf.h"
#include "util/parse.h"

const struct vg_opt vg_global_opts[] = {
    {"json", 0, VG_OPT_ARG_NONE, NULL, "machine-readable output (see docs/json.md)", VG_OPT_JSON,
     NULL},
    {"color", 0, VG_OPT_ARG_OPTIONAL, "WHEN",
     "colour: auto (default, only on a terminal), always, never;\n"
     "NO_COLOR in the environment means never",
     VG_OPT_COLOR, NULL},
    {"colour", 0, VG_OPT_ARG_OPTIONAL, "WHEN", NULL, VG_OPT_COLOR, NULL},
    {"proc", 0, VG_OPT_ARG_REQUIRED, "DIR",
     "procfs to read (default /proc), e.g. a host's /proc in a container", VG_OPT_PROC, NULL},
    {"dev", 0, VG_OPT_ARG_REQUIRED, "DIR", "where NVIDIA device nodes live (default /dev)",
     VG_OPT_DEV, NULL},
    {"nvml", 0, VG_OPT_ARG_REQUIRED, "PATH",
     "NVML library to load (default $VRAMGUARD_NVML or libnvidia-ml.so.1)", VG_OPT_NVML, NULL},
    {"nvml-timeout", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "give up on a hung driver after DUR (default 10s)", VG_OPT_NVML_TIMEOUT, "nvml_timeout"},
    {"verbose", 0, VG_OPT_ARG_NONE, NULL, "say more about what was read and how", VG_OPT_VERBOSE,
     NULL},
    {"help", 0, VG_OPT_ARG_NONE, NULL, "this help", VG_OPT_HELP, NULL},
    VG_OPT_TABLE_END,
};

void vg_global_help(FILE *f)
{
    fputs("Global options (before or after the command):\n", f);
    vg_opt_help(f, vg_global_opts, VG_OPT_HELP_COL);
}

int vg_cmd_opt_arrays(const struct vg_opt *opts, struct option *longopts, size_t cap,
                      char *optstring, size_t optcap)
{
    size_t n = 0;
    if (vg_opt_longopts(vg_global_opts, longopts, &n, cap) ||
        vg_opt_longopts(opts, longopts, &n, cap) || vg_opt_shortopts(opts, optstring, optcap))
        return -ENOSPC;
    return 0;
}

void vg_cmd_help(FILE *f, const char *head, const struct vg_opt *opts, unsigned col,
                 const char *tail)
{
    fputs(head, f);
    vg_opt_help(f, opts, col ? col : VG_OPT_HELP_COL);
    fputs(tail ? tail : "", f);
    vg_global_help(f);
}

void vg_cmd_error(const char *cmd, const char *fmt, ...)
{
    /* Messages carry outside text (command lines, a driver's names, UUIDs and error texts, file
     * names, values given on the command line): escaped like every text output, so each stays
     * one line and no byte a process or a driver chose reaches the terminal as a control
     * sequence. */
    struct vg_buf raw, esc;
    vg_buf_init(&raw, 0);
    vg_buf_init(&esc, 0);
    va_list ap;
    va_start(ap, fmt);
    vg_buf_vprintf(&raw, fmt, ap);
    va_end(ap);
    if (!raw.err)
        vg_text_escape(&esc, raw.data ? raw.data : "", raw.len, 0, NULL);
    fputs("vramguard: ", stderr);
    if (cmd)
        fprintf(stderr, "%s: ", cmd);
    fputs(raw.err || esc.err ? "(the message could not be put together: out of memory)"
                             : vg_buf_str(&esc),
          stderr);
    fputc('\n', stderr);
    vg_buf_release(&raw);
    vg_buf_release(&esc);
}

void vg_cmd_usage_error(const char *cmd, int c, int argc, char **argv)
{
    const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    const char *sp = cmd ? " " : "";
    cmd = cmd ? cmd : "";
    if (c == ':')
        vg_cmd_error(*cmd ? cmd : NULL, "option '%s' needs a value (see 'vramguard %s%s--help')",
                     bad, cmd, sp);
    else if (optopt > 0 && optopt < 0x100)
        vg_cmd_error(*cmd ? cmd : NULL, "unknown option '-%c' (see 'vramguard %s%s--help')", optopt,
                     cmd, sp);
    else
        vg_cmd_error(*cmd ? cmd : NULL, "unknown option '%s' (see 'vramguard %s%s--help')", bad,
                     cmd, sp);
}

int vg_cmd_next_opt(struct vg_cmd_parse *p)
{
    if (!p->started) {
        /* '+': a command's options end at its first operand; ':': a missing value is told
         * apart from an unknown option. Both messages are ours (opterr = 0). */
        snprintf(p->optstring, sizeof(p->optstring), "+:h");
        if (vg_cmd_opt_arrays(p->opts, p->longopts, VG_OPT_MAX, p->optstring,
                              sizeof(p->optstring))) {
            vg_cmd_error(p->cmd, "internal error: too many options");
            return VG_CMD_OPT_USAGE;
        }
        optind = 0; /* 0, not 1: glibc then resets its internal state from main's parse */
        opterr = 0;
        p->started = true;
    }
    int c;
    while ((c = getopt_long(p->argc, p->argv, p->optstring, p->longopts, NULL)) != -1) {
        int r = vg_global_opt(p->g, c, optarg, p->cmd);
        if (r < 0)
            return VG_CMD_OPT_USAGE;
        if (r > 0)
            continue;
        switch (c) {
        case 'h':
        case VG_OPT_HELP:
            vg_cmd_help(stdout, p->help, p->opts, p->help_col, p->help_tail);
            return VG_CMD_OPT_HELP;
        case '?':
        case ':':
            vg_cmd_usage_error(p->cmd, c, p->argc, p->argv);
            return VG_CMD_OPT_USAGE;
        default:
            return c;
        }
    }
    if (!p->operands && optind < p->argc) {
        vg_cmd_error(p->cmd, "unexpected argument '%s' (see 'vramguard %s --help')",
                     p->argv[optind], p->cmd);
        return VG_CMD_OPT_USAGE;
    }
    return VG_CMD_OPT_END;
}

int vg_global_opt(struct vg_global *g, int c, const char *arg, const char *cmd)
{
    switch (c) {
    case VG_OPT_JSON:
        g->json = true;
        return 1;
    case VG_OPT_VERBOSE:
        g->verbose = true;
        return 1;
    case VG_OPT_PROC:
        g->proc_root = arg;
        return 1;
    case VG_OPT_DEV:
        /* Descriptor targets in /proc are canonical absolute paths, so --dev must be one too
         * for them to match: resolve it (".", "..", symlinks), or anchor a path that does not
         * exist (yet) at the current directory. */
        if (!realpath(arg, g->dev_abs)) {
            char cwd[4096];
            int n = arg[0] == '/' ? snprintf(g->dev_abs, sizeof(g->dev_abs), "%s", arg)
                    : getcwd(cwd, sizeof(cwd))
                        ? snprintf(g->dev_abs, sizeof(g->dev_abs), "%s/%s", cwd, arg)
                        : -1;
            if (n < 0 || (size_t)n >= sizeof(g->dev_abs)) {
                vg_cmd_error(cmd, "--dev: cannot make '%s' an absolute path", arg);
                return -1;
            }
        }
        g->dev_dir = g->dev_abs;
        return 1;
    case VG_OPT_NVML:
        g->nvml_path = arg;
        return 1;
    case VG_OPT_COLOR:
        if (!arg || strcmp(arg, "always") == 0) {
            g->color = VG_COLOR_ALWAYS;
        } else if (strcmp(arg, "never") == 0) {
            g->color = VG_COLOR_NEVER;
        } else if (strcmp(arg, "auto") == 0) {
            g->color = VG_COLOR_AUTO;
        } else {
            vg_cmd_error(cmd, "--color takes auto, always or never, not '%s'", arg);
            return -1;
        }
        return 1;
    case VG_OPT_NVML_TIMEOUT: {
        uint64_t ms;
        if (vg_parse_duration_ms(arg, &ms) || ms == 0 || ms > VG_HOUR_MS) {
            vg_cmd_error(cmd,
                         "--nvml-timeout takes a duration between 1ms and 1h "
                         "(e.g. 500ms, 10s), not '%s'",
                         arg);
            return -1;
        }
        g->nvml_timeout_ms = (unsigned)ms;
        return 1;
    }
    default:
        return 0;
    }
}

bool vg_cmd_use_color(const struct vg_global *g)
{
    if (g->color == VG_COLOR_ALWAYS)
        return true;
    if (g->color == VG_COLOR_NEVER)
        return false;
    const char *nc = getenv("NO_COLOR");
    if (nc && nc[0])
        return false;
    return isatty(STDOUT_FILENO) == 1;
}

unsigned vg_cmd_term_width(void)
{
    if (isatty(STDOUT_FILENO) != 1)
        return 0;
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

int vg_cmd_write_out(const struct vg_buf *b)
{
    const char *p = vg_buf_str(b);
    size_t left = b->len;
    while (left) {
        ssize_t n = write(STDOUT_FILENO, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        left -= (size_t)n;
    }
    return 0;
}

int vg_cmd_snapshot(const struct vg_global *g, const char *cmd, unsigned flags,
                    struct vg_snapshot **out)
{
    struct vg_snap_opts so = {
        .parts = (flags & VG_CMD_SNAP_GPUS_ONLY) ? VG_SNAP_PART_GPUS : VG_SNAP_PART_ALL,
        .nvml_path = g->nvml_path,
        .nvml_timeout_ms = g->nvml_timeout_ms,
        .proc_root = g->proc_root,
        .dev_dir = g->dev_dir,
        .skip_nvml = (flags & VG_CMD_SNAP_NO_NVML) != 0,
    };
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_snap_build(&so, out, &err);
    if (rc)
        vg_cmd_error(cmd, "%s", vg_err_msg(&err));
    vg_err_release(&err);
    if (rc || !(flags & VG_CMD_SNAP_JUDGE))
        return rc;
    /* Whether the possible leftovers work decides how sure the verdict is: measure them, and
     * only them, over a short window (no wait at all on a host without any). */
    vg_leftovers_measure(*out, VG_SNAP_ACTIVITY_MS);
    return 0;
}

bool vg_cmd_driver_view(const struct vg_snapshot *snap)
{
    return vg_health_driver_view(snap);
}

int vg_cmd_emit(const char *cmd, int rc, const struct vg_buf *out, int status)
{
    if (rc) {
        vg_cmd_error(cmd, "cannot render the output: %s", strerror(-rc));
        return VG_EXIT_SOFTWARE;
    }
    if ((rc = vg_cmd_write_out(out)) != 0) {
        /* With SIGPIPE ignored (demo, or a caller's environment), a reader that went away is
         * an EPIPE: nobody reads a message about it either. */
        if (rc != -EPIPE)
            vg_cmd_error(cmd, "cannot write the output: %s", strerror(-rc));
        return VG_EXIT_SOFTWARE;
    }
    return status;
}

int vg_cmd_find_gpu(const struct vg_snapshot *snap, const char *cmd, const char *text, size_t *gpu)
{
    enum vg_gpu_lookup r = vg_gpu_list_lookup(&snap->gpus, text, gpu);
    if (r == VG_GPU_LOOKUP_OK)
        return 0;
    if (r == VG_GPU_LOOKUP_NO_INDEX)
        vg_cmd_error(cmd, "no GPU with index %s on this host (%zu GPU%s)", text, snap->gpus.ngpus,
                     snap->gpus.ngpus == 1 ? "" : "s");
    else
        vg_cmd_error(cmd, "'%s' %s", text,
                     r == VG_GPU_LOOKUP_SEVERAL
                         ? "matches several GPUs: give more of the UUID"
                         : "is neither a GPU index nor the UUID (or UUID prefix) of a GPU here");
    return -1;
}
