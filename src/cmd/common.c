/*
 * What every command shares: global options, error messages in the one house format
 * ("vramguard: status: cannot read ..."), colour and terminal decisions, writing output.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "rules/health.h"
#include "rules/rules.h"
#include "model/record.h"
#include "model/snapshot.h"
#include "render/render.h"
#include "render/text.h"
#include "util/buf.h"
#include "util/parse.h"
#include "util/priv.h"
#include "util/sdnotify.h"

#define VG_GLOBAL_AT(member) VG_OPT_AT(0, struct vg_global, member)

const struct vg_opt vg_global_opts[] = {
    {"json", 0, VG_OPT_ARG_NONE, NULL, "machine-readable output (see docs/json.md)", VG_OPT_JSON,
     NULL, VG_OPT_VAL(VG_GLOBAL_AT(json), .kind = VG_OPT_K_SET)},
    {"color", 0, VG_OPT_ARG_OPTIONAL, "WHEN",
     "colour: auto (default, only on a terminal), always, never;\n"
     "NO_COLOR in the environment means never",
     VG_OPT_COLOR, NULL,
     VG_OPT_VAL(VG_GLOBAL_AT(color), .kind = VG_OPT_K_WORD, .words = "auto|always|never",
                .min = VG_COLOR_ALWAYS, .takes = "auto, always or never")},
    {"colour", 0, VG_OPT_ARG_OPTIONAL, "WHEN", NULL, VG_OPT_COLOR, NULL, VG_OPT_CODE},
    {"proc", 0, VG_OPT_ARG_REQUIRED, "DIR",
     "procfs to read (default /proc), e.g. a host's /proc in a container", VG_OPT_PROC, NULL,
     VG_OPT_VAL(VG_GLOBAL_AT(proc_root), .kind = VG_OPT_K_STR)},
    {"dev", 0, VG_OPT_ARG_REQUIRED, "DIR", "where NVIDIA device nodes live (default /dev)",
     VG_OPT_DEV, NULL, VG_OPT_CODE},
    {"nvml", 0, VG_OPT_ARG_REQUIRED, "PATH",
     "NVML library to load (default $VRAMGUARD_NVML or libnvidia-ml.so.1)", VG_OPT_NVML, NULL,
     VG_OPT_VAL(VG_GLOBAL_AT(nvml_path), .kind = VG_OPT_K_STR)},
    {"nvml-timeout", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "give up on a hung driver after DUR (default 10s)", VG_OPT_NVML_TIMEOUT, "nvml_timeout",
     VG_OPT_VAL(VG_GLOBAL_AT(nvml_timeout_ms), .kind = VG_OPT_K_DURATION, .min = 1,
                .max = VG_HOUR_MS, .takes = "a duration between 1ms and 1h (e.g. 500ms, 10s)")},
    {"verbose", 0, VG_OPT_ARG_NONE, NULL, "say more about what was read and how", VG_OPT_VERBOSE,
     NULL, VG_OPT_VAL(VG_GLOBAL_AT(verbose), .kind = VG_OPT_K_SET)},
    {"scan", 0, VG_OPT_ARG_REQUIRED, "HOW",
     "how holders are found: auto (default: kernel when it can\n"
     "run and the host has 1,000 processes or more, else proc),\n"
     "kernel (a BPF iterator; root or CAP_BPF and CAP_PERFMON,\n"
     "a kernel with BTF), proc (/proc/PID/fd)",
     VG_OPT_SCAN, NULL,
     VG_OPT_VAL(VG_GLOBAL_AT(scan), .kind = VG_OPT_K_WORD, .words = "auto|kernel|proc",
                .takes = "auto, kernel or proc")},
    {"record", 0, VG_OPT_ARG_REQUIRED, "FILE",
     "write the snapshot that status, doctor, check, visible or\n"
     "clean diagnosed to FILE (docs/recording.md)",
     VG_OPT_RECORD, NULL, VG_OPT_VAL(VG_GLOBAL_AT(record), .kind = VG_OPT_K_STR)},
    {"replay", 0, VG_OPT_ARG_REQUIRED, "FILE",
     "diagnose the snapshot recorded in FILE instead of this host\n"
     "(status, doctor, check, visible, clean's plan)",
     VG_OPT_REPLAY, NULL, VG_OPT_VAL(VG_GLOBAL_AT(replay), .kind = VG_OPT_K_STR)},
    {"kmsg", 0, VG_OPT_ARG_REQUIRED, "FILE",
     "the kernel log to read Xid errors from (default $VRAMGUARD_KMSG\n"
     "or /dev/kmsg; a file of kmsg records, e.g. for tests)",
     VG_OPT_KMSG, NULL, VG_OPT_VAL(VG_GLOBAL_AT(kmsg_path), .kind = VG_OPT_K_STR)},
    {"help", 0, VG_OPT_ARG_NONE, NULL, "this help", VG_OPT_HELP, NULL, VG_OPT_CODE},
    {"version", 0, VG_OPT_ARG_NONE, NULL, "print the version and exit", VG_OPT_VERSION, NULL,
     VG_OPT_CODE},
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

/* One message line to stderr, with its syslog priority in front ("<3>") when stderr is the
 * journal stream systemd gave a service, so that journald files it at that priority. */
static void vg_cmd_vlog(int level, const char *cmd, const char *fmt, va_list ap)
{
    /* Messages carry outside text (command lines, a driver's names, UUIDs and error texts, file
     * names, values given on the command line): escaped like every text output, so each stays
     * one line and no byte a process or a driver chose reaches the terminal as a control
     * sequence. */
    struct vg_buf raw, esc;
    vg_buf_init(&raw, 0);
    vg_buf_init(&esc, 0);
    vg_buf_vprintf(&raw, fmt, ap);
    if (!raw.err)
        vg_text_escape(&esc, raw.data ? raw.data : "", raw.len, 0, NULL);
    if (vg_sd_journal_stream(STDERR_FILENO))
        fprintf(stderr, "<%d>", level);
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

void vg_cmd_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vg_cmd_vlog(VG_SD_ERR, cmd, fmt, ap);
    va_end(ap);
}

int vg_cmd_fail(const char *cmd, struct vg_err *err, int status, const char *fmt, ...)
{
    if (!fmt) {
        vg_cmd_error(cmd, "%s", vg_err_msg(err));
    } else {
        struct vg_buf b;
        vg_buf_init(&b, 0);
        va_list ap;
        va_start(ap, fmt);
        vg_buf_vprintf(&b, fmt, ap);
        va_end(ap);
        vg_cmd_error(cmd, "%s: %s", b.err ? fmt : vg_buf_str(&b), vg_err_msg(err));
        vg_buf_release(&b);
    }
    vg_err_release(err);
    return status;
}

void vg_cmd_notice(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vg_cmd_vlog(VG_SD_INFO, cmd, fmt, ap);
    va_end(ap);
}

/* The long options word (argv's "--name" or "--name=value") abbreviates, when it fits more
 * than one that differ (an alias, such as --colour for --color, is one option): "--verbose,
 * --version" into out. false when it fits one or none. */
static bool vg_cmd_ambiguous(const struct option *longopts, const char *word, struct vg_buf *out)
{
    if (!longopts || strncmp(word, "--", 2) != 0)
        return false;
    const char *name = word + 2;
    size_t n = strcspn(name, "=");
    const struct option *first = NULL;
    bool differ = false;
    for (const struct option *o = longopts; o->name; o++) {
        if (strncmp(o->name, name, n) != 0)
            continue;
        if (strlen(o->name) == n)
            return false; /* an exact match is never ambiguous */
        if (!first)
            first = o;
        else if (o->has_arg != first->has_arg || o->val != first->val)
            differ = true;
    }
    if (!differ)
        return false;
    for (const struct option *o = longopts; o->name; o++) {
        if (strncmp(o->name, name, n) != 0)
            continue;
        /* An alias of one already named is left out. */
        bool alias = false;
        for (const struct option *e = longopts; e < o && !alias; e++)
            alias = strncmp(e->name, name, n) == 0 && e->val == o->val && e->has_arg == o->has_arg;
        if (!alias)
            vg_buf_printf(out, "%s--%s", out->len ? ", " : "", o->name);
    }
    return !out->err;
}

bool vg_cmd_opt_ambiguous(const struct option *longopts, const char *word)
{
    struct vg_buf cand;
    vg_buf_init(&cand, 0);
    bool amb = vg_cmd_ambiguous(longopts, word, &cand);
    vg_buf_release(&cand);
    return amb;
}

void vg_cmd_usage_error(const char *cmd, int c, int argc, char **argv,
                        const struct option *longopts)
{
    const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    const char *sp = cmd ? " " : "";
    cmd = cmd ? cmd : "";
    struct vg_buf cand;
    vg_buf_init(&cand, 0);
    if (c == ':')
        vg_cmd_error(*cmd ? cmd : NULL, "option '%s' needs a value (see 'vramguard %s%s--help')",
                     bad, cmd, sp);
    else if (optopt > 0 && optopt < 0x100)
        vg_cmd_error(*cmd ? cmd : NULL, "unknown option '-%c' (see 'vramguard %s%s--help')", optopt,
                     cmd, sp);
    else if (vg_cmd_ambiguous(longopts, bad, &cand))
        vg_cmd_error(*cmd ? cmd : NULL,
                     "option '%.*s' is ambiguous: %s (see 'vramguard %s%s--help')",
                     (int)strcspn(bad, "="), bad, vg_buf_str(&cand), cmd, sp);
    else
        vg_cmd_error(*cmd ? cmd : NULL, "unknown option '%s' (see 'vramguard %s%s--help')", bad,
                     cmd, sp);
    vg_buf_release(&cand);
}

bool vg_cmd_refuse_json(const struct vg_global *g, const char *cmd, const char *why)
{
    if (g->json)
        vg_cmd_error(cmd, "%s", why);
    return g->json;
}

void vg_cmd_version(void)
{
    printf("vramguard %s\n", VG_VERSION);
}

/* The row getopt matched: by its long name (li, an index into longopts), else by its letter;
 * *global: it is one of vg_global_opts. NULL for 'h' and anything unknown. */
static const struct vg_opt *vg_cmd_row(const struct vg_cmd_parse *p, int c, int li, bool *global)
{
    *global = false;
    if (li < 0) {
        for (const struct vg_opt *o = p->opts; o && o->name; o++)
            if (o->short_name && o->short_name == c)
                return o;
        return NULL;
    }
    /* The globals come first in longopts: a command row with a global's name is its help. */
    const struct vg_opt *o = vg_opt_find_long(vg_global_opts, p->longopts[li].name);
    if (o) {
        *global = true;
        return o;
    }
    return vg_opt_find_long(p->opts, p->longopts[li].name);
}

/* Store a command row's value; -1 after the message for a bad one. */
static int vg_cmd_store(struct vg_cmd_parse *p, const struct vg_opt *o)
{
    if (o->val.kind == VG_OPT_K_CODE)
        return 0;
    if (o->val.dst >= VG_CMD_NDST || !p->dst[o->val.dst]) {
        vg_cmd_error(p->cmd, "internal error: no target for --%s", o->name);
        return -1;
    }
    int rc = vg_opt_store(&o->val, p->dst[o->val.dst], optarg);
    if (rc == -EINVAL)
        vg_cmd_error(p->cmd, "--%s takes %s, not '%s'", o->name, o->val.takes, optarg);
    else if (rc)
        vg_cmd_error(p->cmd, "internal error: --%s does not fit its target", o->name);
    return rc ? -1 : 0;
}

/* The first call: the getopt arrays, and getopt's state reset. 0 or VG_CMD_OPT_USAGE. */
static int vg_cmd_start(struct vg_cmd_parse *p)
{
    /* '+': a command's options end at its first operand; ':': a missing value is told apart
     * from an unknown option. Both messages are ours (opterr = 0). */
    snprintf(p->optstring, sizeof(p->optstring), "+:h");
    if (vg_cmd_opt_arrays(p->opts, p->longopts, VG_OPT_MAX, p->optstring, sizeof(p->optstring))) {
        vg_cmd_error(p->cmd, "internal error: too many options");
        return VG_CMD_OPT_USAGE;
    }
    optind = 0; /* 0, not 1: glibc then resets its internal state from main's parse */
    opterr = 0;
    p->started = true;
    return 0;
}

int vg_cmd_next_opt(struct vg_cmd_parse *p)
{
    if (!p->started && vg_cmd_start(p))
        return VG_CMD_OPT_USAGE;
    int c, li = -1;
    while ((c = getopt_long(p->argc, p->argv, p->optstring, p->longopts, &li)) != -1) {
        bool global;
        const struct vg_opt *o = c == '?' || c == ':' ? NULL : vg_cmd_row(p, c, li, &global);
        li = -1;
        p->row = o;
        if (c == 'h' || (o && o->id == VG_OPT_HELP)) {
            vg_cmd_help(stdout, p->help, p->opts, p->help_col, p->help_tail);
            return VG_CMD_OPT_HELP;
        }
        if (o && o->id == VG_OPT_VERSION) {
            vg_cmd_version();
            return VG_CMD_OPT_HELP;
        }
        if (!o) {
            vg_cmd_usage_error(p->cmd, c, p->argc, p->argv, p->longopts);
            return VG_CMD_OPT_USAGE;
        }
        if (global) {
            if (vg_global_opt(p->g, o->id, optarg, p->cmd) < 0)
                return VG_CMD_OPT_USAGE;
            continue;
        }
        if (vg_cmd_store(p, o))
            return VG_CMD_OPT_USAGE;
        if (o->val.kind == VG_OPT_K_CODE || o->val.then_code)
            return o->short_name ? o->short_name : o->id;
    }
    if (!p->operands && optind < p->argc) {
        vg_cmd_error(p->cmd, "unexpected argument '%s' (see 'vramguard %s --help')",
                     p->argv[optind], p->cmd);
        return VG_CMD_OPT_USAGE;
    }
    if (!p->replay_ok && (p->g->replay || p->g->record)) {
        vg_cmd_error(p->cmd,
                     "--%s is for the commands that diagnose one look at a host (status, "
                     "doctor, check, visible, clean's plan); %s %s",
                     p->g->replay ? "replay" : "record", p->cmd,
                     p->g->replay ? "needs the live host" : "takes no single snapshot");
        return VG_CMD_OPT_USAGE;
    }
    return VG_CMD_OPT_END;
}

/* --dev: descriptor targets in /proc are canonical absolute paths, so --dev must be one too
 * for them to match: resolve it (".", "..", symlinks), or anchor a path that does not exist
 * (yet) at the current directory. 1, or -1 after the message. */
static int vg_global_dev(struct vg_global *g, const char *arg, const char *cmd)
{
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
}

bool vg_cmd_refuse_elevated(const char *cmd, const char *what, const char *why)
{
    if (!vg_priv_elevated())
        return false;
    vg_cmd_error(cmd, "%s is refused in a setuid or file-capability copy: %s", what, why);
    return true;
}

/* A global option that names a file, in a setuid or file-capability copy: --record and
 * --replay are refused (neither needs any privilege, and each would open a file the caller
 * chose with rights the caller lacks); --nvml (code to load), --proc, --dev and --kmsg (what
 * is read and shown) take only a path that root alone can change, stored resolved. 1: handled, 0:
 * not such an option (or not elevated), -1 after the message. */
static int vg_global_elevated(struct vg_global *g, const struct vg_opt *o, const char *arg,
                              const char *cmd)
{
    if (o->id != VG_OPT_RECORD && o->id != VG_OPT_REPLAY && o->id != VG_OPT_NVML &&
        o->id != VG_OPT_PROC && o->id != VG_OPT_DEV && o->id != VG_OPT_KMSG)
        return 0;
    if (!vg_priv_elevated())
        return 0;
    if (o->id == VG_OPT_RECORD || o->id == VG_OPT_REPLAY) {
        vg_cmd_refuse_elevated(cmd, o->id == VG_OPT_RECORD ? "--record" : "--replay",
                               o->id == VG_OPT_RECORD
                                   ? "it would write the file with rights you lack; run an "
                                     "ordinary copy of vramguard for it"
                                   : "it would read the file with rights you lack, and a replay "
                                     "needs none; run an ordinary copy of vramguard for it");
        return -1;
    }
    char *dst = o->id == VG_OPT_NVML   ? g->nvml_abs
                : o->id == VG_OPT_PROC ? g->proc_abs
                : o->id == VG_OPT_KMSG ? g->kmsg_abs
                                       : g->dev_abs;
    size_t n = sizeof(g->dev_abs);
    struct vg_err err = VG_ERR_INIT;
    if (vg_priv_path_trusted(arg, 0, dst, n, &err) != 0) {
        vg_cmd_error(cmd,
                     "--%s '%s' is refused: a setuid or file-capability copy uses only files "
                     "that root alone can change, and %s",
                     o->name, arg, vg_err_msg(&err));
        vg_err_release(&err);
        return -1;
    }
    if (o->id == VG_OPT_NVML)
        g->nvml_path = g->nvml_abs;
    else if (o->id == VG_OPT_PROC)
        g->proc_root = g->proc_abs;
    else if (o->id == VG_OPT_KMSG)
        g->kmsg_path = g->kmsg_abs;
    else
        g->dev_dir = g->dev_abs;
    return 1;
}

int vg_global_opt(struct vg_global *g, int c, const char *arg, const char *cmd)
{
    /* By id: an alias (--colour) shares its row's id, and the first row words the message. */
    const struct vg_opt *o = c >= VG_OPT_JSON ? vg_opt_find_id(vg_global_opts, c) : NULL;
    if (!o || o->id == VG_OPT_HELP || o->id == VG_OPT_VERSION)
        return 0;
    int e = vg_global_elevated(g, o, arg, cmd);
    if (e)
        return e;
    if (o->id == VG_OPT_DEV)
        return vg_global_dev(g, arg, cmd);
    int rc = vg_opt_store(&o->val, g, arg);
    if (rc == -EINVAL)
        vg_cmd_error(cmd, "--%s takes %s, not '%s'", o->name, o->val.takes, arg);
    else if (rc)
        vg_cmd_error(cmd, "internal error: --%s does not fit its target", o->name);
    return rc ? -1 : 1;
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

/* --replay: the record's snapshot, told apart from a look at this host with --verbose. */
static int vg_cmd_replay(const struct vg_global *g, const char *cmd, struct vg_snapshot **out)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_snap_record_read(g->replay, out, &err);
    if (rc)
        vg_cmd_error(cmd, "--replay: %s", vg_err_msg(&err));
    else if (g->verbose)
        vg_cmd_error(cmd, "replay of '%s': nothing of this host was read", g->replay);
    vg_err_release(&err);
    return rc;
}

int vg_cmd_snapshot(const struct vg_global *g, const char *cmd, unsigned flags,
                    struct vg_snapshot **out)
{
    int rc;
    if (g->replay) {
        rc = vg_cmd_replay(g, cmd, out);
    } else {
        struct vg_snap_opts so = {
            .parts = (flags & VG_CMD_SNAP_GPUS_ONLY) ? VG_SNAP_PART_GPUS : VG_SNAP_PART_ALL,
            .nvml_path = g->nvml_path,
            .nvml_timeout_ms = g->nvml_timeout_ms,
            .proc_root = g->proc_root,
            .dev_dir = g->dev_dir,
            .skip_nvml = (flags & VG_CMD_SNAP_NO_NVML) != 0,
            .scan = g->scan,
            .sys_root = g->sys_root,
            /* $VRAMGUARD_KMSG: secure_getenv, so a privileged copy never takes it */
            .read_kmsg = !(flags & VG_CMD_SNAP_GPUS_ONLY),
            .kmsg_path = g->kmsg_path ? g->kmsg_path : secure_getenv("VRAMGUARD_KMSG"),
        };
        struct vg_err err = VG_ERR_INIT;
        rc = vg_snap_build(&so, out, &err);
        if (rc)
            vg_cmd_error(cmd, "%s", vg_err_msg(&err));
        else if (!(flags & VG_CMD_SNAP_GPUS_ONLY))
            vg_cmd_say_scan(g, cmd, *out);
        vg_err_release(&err);
        /* Whether the possible leftovers work decides how sure the verdict is: measure them,
         * and only them, over a short window (no wait at all on a host without any). */
        if (!rc && (flags & VG_CMD_SNAP_JUDGE))
            vg_leftovers_measure(*out, VG_SNAP_ACTIVITY_MS);
    }
    if (rc || !g->record || !(flags & VG_CMD_SNAP_DIAGNOSED))
        return rc;
    struct vg_err err = VG_ERR_INIT;
    if ((rc = vg_snap_record_save(*out, g->record, &err)) != 0) {
        vg_cmd_error(cmd, "--record: %s", vg_err_msg(&err));
        vg_err_release(&err);
        vg_snap_free(*out);
        *out = NULL;
    }
    return rc;
}

void vg_cmd_say_scan(const struct vg_global *g, const char *cmd, const struct vg_snapshot *snap)
{
    if (!g->verbose)
        return;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_render_scan_note(&b, snap, g->scan == VG_PROC_SCAN_PROC);
    vg_cmd_error(cmd, "scan: %s", vg_buf_str(&b));
    vg_buf_release(&b);
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

int vg_cmd_user(const char *arg, uid_t *uid)
{
    struct passwd pw, *res = NULL;
    char buf[4096]; /* a record longer than this is not found (ERANGE): the uid still works */
    if (getpwnam_r(arg, &pw, buf, sizeof(buf), &res) == 0 && res) {
        *uid = res->pw_uid;
        return 0;
    }
    int64_t v;
    if (vg_parse_i64(arg, 0, (int64_t)UINT32_MAX - 1, &v) == 0) { /* (uid_t)-1 means "none" */
        *uid = (uid_t)v;
        return 0;
    }
    return -1;
}

int vg_cmd_who_open(const struct vg_global *g, const char *cmd, struct vg_kill_who *w)
{
    struct vg_err err = VG_ERR_INIT;
    return vg_kill_who_open(g->proc_root, w, &err) ? vg_cmd_fail(cmd, &err, -1, NULL) : 0;
}
