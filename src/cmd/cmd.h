/*
 * The command layer: one file per subcommand, each parsing its own flags, calling the layers
 * below and printing. Only main.c and cmd/ print or choose exit statuses.
 *
 * Global options (--json, --color, --proc, --dev, --nvml, --nvml-timeout, --verbose, --scan) are
 * accepted
 * both before the command name and among the command's own flags, so `vramguard --json status`
 * and `vramguard status --json` mean the same. They are parsed into one struct vg_global owned
 * by main(), the only mutable state shared between files.
 */
#ifndef VG_CMD_CMD_H
#define VG_CMD_CMD_H

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "act/kill.h"
#include "cmd/opt.h"
#include "util/buf.h"
#include "util/err.h"

/* Exit statuses (documented in the man page and README). */
enum vg_exit {
    VG_EXIT_OK = 0,       /* success; for diagnosing commands: nothing found */
    VG_EXIT_WARN = 1,     /* findings at warning level (or a command's own soft failure) */
    VG_EXIT_CRIT = 2,     /* findings at critical level */
    VG_EXIT_UNKNOWN = 3,  /* could not check: no driver view, /proc unreadable, ... */
    VG_EXIT_USAGE = 64,   /* bad command line (EX_USAGE) */
    VG_EXIT_SOFTWARE = 70 /* internal error, e.g. out of memory (EX_SOFTWARE) */
};

enum vg_color { VG_COLOR_AUTO, VG_COLOR_ALWAYS, VG_COLOR_NEVER };

struct vg_global {
    const char *nvml_path;    /* --nvml (into nvml_abs when checked: see vg_global_opt) */
    const char *proc_root;    /* --proc (into proc_abs when checked) */
    const char *dev_dir;      /* --dev, resolved (points into dev_abs) */
    char dev_abs[PATH_MAX];   /* storage for the resolved --dev: /proc shows canonical targets */
    char nvml_abs[PATH_MAX];  /* --nvml and --proc resolved, in a setuid or file-capability */
    char proc_abs[PATH_MAX];  /* copy (util/priv.h): what was checked is what is opened */
    unsigned nvml_timeout_ms; /* --nvml-timeout; 0 = default */
    bool json;                /* --json */
    bool verbose;             /* --verbose */
    int scan;                 /* --scan: enum vg_proc_scan_mode (auto, kernel, proc) */
    enum vg_color color;      /* --color */
    const char *record;       /* --record FILE: write the snapshot diagnosed (model/record.h) */
    const char *replay;       /* --replay FILE: diagnose that record instead of this host */
    const char *sys_root;     /* sysfs for the GPUs on the PCI bus (doctor --sysfs); NULL: /sys */
    const char *kmsg_path;    /* --kmsg FILE (into kmsg_abs when checked), else
                               * $VRAMGUARD_KMSG (never in a privileged copy), else /dev/kmsg */
    char kmsg_abs[PATH_MAX];
};

/* Option codes of the global options inside getopt_long tables. */
enum {
    VG_OPT_JSON = 0x100,
    VG_OPT_COLOR,
    VG_OPT_PROC,
    VG_OPT_DEV,
    VG_OPT_NVML,
    VG_OPT_NVML_TIMEOUT,
    VG_OPT_VERBOSE,
    VG_OPT_SCAN,
    VG_OPT_RECORD,
    VG_OPT_REPLAY,
    VG_OPT_KMSG,
    VG_OPT_HELP,
    VG_OPT_VERSION,
    VG_OPT_FIRST_LOCAL /* commands number their options that come back from here */
};

/* In a setuid or file-capability copy, refuse what would use its privileges for the caller:
 * "WHAT is refused in a setuid or file-capability copy: WHY". true after the message. */
bool vg_cmd_refuse_elevated(const char *cmd, const char *what, const char *why);

/* The global options, one row each: every command's parse puts them in front of its own. */
extern const struct vg_opt vg_global_opts[];

/* Handle one global option inside a command's getopt loop. Returns 1 when handled, 0 when c is
 * not a global option, -1 after printing an error for a bad value. cmd names the command for
 * messages (NULL before the command). In a setuid or file-capability copy (vg_priv_elevated)
 * the options that name a file are refused (--record, --replay) or take only paths root alone
 * can change (--nvml, --proc, --dev, --kmsg): see docs/reliability.md, "Trust boundaries". */
int vg_global_opt(struct vg_global *g, int c, const char *arg, const char *cmd);

/* The global options' section, shared by every command's --help and the main help. */
void vg_global_help(FILE *f);

/* Print "vramguard: CMD: message" to stderr (CMD omitted when NULL), the message escaped as
 * text output is (vg_text_escape): control characters and invalid UTF-8 as \n, \xNN, so it
 * stays one line whatever outside text it carries. */
void vg_cmd_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The one failure path of a call below cmd/: print "vramguard: CMD: PREFIX: message" (PREFIX
 * from fmt; NULL: "vramguard: CMD: message"), release err and return status, so a command
 * writes `return vg_cmd_fail("clean", &err, VG_EXIT_SOFTWARE, NULL);`. */
int vg_cmd_fail(const char *cmd, struct vg_err *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for what is not a failure ("listening on ...", "stopping on ..."): under systemd,
 * when stderr is the journal stream, vg_cmd_error's lines go at priority err ("<3>") and
 * these at info ("<6>"). */
void vg_cmd_notice(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report an unknown option (c == '?') or a missing value (c == ':', from an optstring that
 * starts with ':') the way getopt saw it, and point at --help. longopts (the getopt_long array
 * the parse used; NULL: none) tells an abbreviation that fits several options from an unknown
 * one, and the message names the candidates. */
void vg_cmd_usage_error(const char *cmd, int c, int argc, char **argv,
                        const struct option *longopts);
/* Whether word ("--name" or "--name=value") abbreviates more than one option of longopts. */
bool vg_cmd_opt_ambiguous(const struct option *longopts, const char *word);
/* For a command whose output is no document (top's screen, run's job, serve's metrics): with
 * --json, print why (the message names what to use instead) and return true, for the caller's
 * exit 64; --json is never silently ignored. */
bool vg_cmd_refuse_json(const struct vg_global *g, const char *cmd, const char *why);
/* Print "vramguard VERSION" to stdout (--version, wherever it is given). */
void vg_cmd_version(void);

/* Values vg_cmd_next_opt returns besides the command's own option codes (all >= 0). */
enum {
    VG_CMD_OPT_END = -1,   /* no options left; optind is at the first word after them */
    VG_CMD_OPT_HELP = -2,  /* -h, --help or --version: printed, and the command is done */
    VG_CMD_OPT_USAGE = -3, /* the error is printed: the command ends with VG_EXIT_USAGE */
};

/* The most targets one parse stores values into. */
#define VG_CMD_NDST 4

/* One command's option parse, shared so that every command treats global options, -h/--help,
 * unknown options, missing values and stray words alike. The caller fills the public fields
 * and calls vg_cmd_next_opt until it returns a negative value; the rest is its own state. */
struct vg_cmd_parse {
    struct vg_global *g;       /* receives the global options */
    const char *cmd;           /* the command's name, for messages */
    const char *help;          /* its usage up to "Options:\n", printed on -h/--help */
    const struct vg_opt *opts; /* its own options (after vg_global_opts); NULL: none */
    const char *help_tail;     /* printed after the options' lines, before the globals' */
    unsigned help_col;         /* column of the options' help texts; 0: VG_OPT_HELP_COL */
    int argc;                  /* argv[0] is the command's name */
    char **argv;
    bool operands;            /* false: a word after the options is a usage error */
    bool replay_ok;           /* the command diagnoses one snapshot (vg_cmd_snapshot's
                               * VG_CMD_SNAP_DIAGNOSED): --record and --replay apply; any other
                               * refuses them once its options are parsed */
    void *dst[VG_CMD_NDST];   /* where typed rows store their values (struct vg_opt_val.dst) */
    const struct vg_opt *row; /* the row of the option just returned */
    bool started;
    char optstring[16];
    struct option longopts[VG_OPT_MAX];
};

/* The fields of a struct vg_cmd_parse that every command fills alike, from its own
 * vg_NAME_help, vg_NAME_opts and vg_NAME_help_tail:
 *     struct vg_cmd_parse p = {VG_CMD_PARSE(clean), .g = g, .argc = argc, .argv = argv}; */
#define VG_CMD_PARSE(name)                                                                         \
    .cmd = #name, .help = vg_##name##_help, .opts = vg_##name##_opts,                              \
    .help_tail = vg_##name##_help_tail

/* Build the getopt_long array and short-option string of the global table followed by opts
 * (NULL: none) into longopts and optstring (which holds its prefix, e.g. "+:h"). 0 or
 * -ENOSPC. */
int vg_cmd_opt_arrays(const struct vg_opt *opts, struct option *longopts, size_t cap,
                      char *optstring, size_t optcap);
/* Print a command's whole --help: head, its options, tail, the global options. */
void vg_cmd_help(FILE *f, const char *head, const struct vg_opt *opts, unsigned col,
                 const char *tail);

/* The next of the command's own options, with optarg set; global options are applied to g on
 * the way, and so are the rows with a typed value (stored into dst[], a bad value reported:
 * VG_CMD_OPT_USAGE), which come back only with then_code. Returns a row's short letter, else
 * its id. Parsing stops at the first word that is not an option (or after "--"), as git does,
 * so `vramguard run -- CMD -x` leaves -x to CMD. */
int vg_cmd_next_opt(struct vg_cmd_parse *p);

/* Colour decision: --color, NO_COLOR, and whether stdout is a terminal. */
bool vg_cmd_use_color(const struct vg_global *g);
/* Terminal width of stdout, or 0 when it is not a terminal. */
unsigned vg_cmd_term_width(void);
/* Write the whole buffer to stdout; 0 or a negative errno. */
int vg_cmd_write_out(const struct vg_buf *b);

/* Build a snapshot from the global options; prints the error itself ("vramguard: CMD: ...")
 * and returns non-zero when even /proc could not be read. flags: VG_CMD_SNAP_*. With --replay
 * the snapshot is the record's (model/record.h) whatever the flags: nothing of this host is
 * read and nothing is measured (the record carries what was). With --record the snapshot a
 * call flagged VG_CMD_SNAP_DIAGNOSED returns is written to the file, measured first. */
enum {
    VG_CMD_SNAP_NO_NVML = 1u << 0,   /* /proc alone (--no-nvml) */
    VG_CMD_SNAP_JUDGE = 1u << 1,     /* the command judges leftovers: measure whether the
                                      * suspects work (VG_SNAP_ACTIVITY_MS more, only when there
                                      * is one) */
    VG_CMD_SNAP_GPUS_ONLY = 1u << 2, /* the driver's GPUs alone, no /proc read (visible) */
    VG_CMD_SNAP_DIAGNOSED = 1u << 3, /* the one look the command's output is about: the one
                                      * --record writes */
};
struct vg_snapshot;
int vg_cmd_snapshot(const struct vg_global *g, const char *cmd, unsigned flags,
                    struct vg_snapshot **out);
/* With --verbose, say on stderr which scan found the holders of snap and, when /proc was read,
 * why the kernel scan did not run. */
void vg_cmd_say_scan(const struct vg_global *g, const char *cmd, const struct vg_snapshot *snap);
/* Whether the snapshot holds a view of the GPUs worth the name: the driver answered and, if it
 * listed any GPU, at least one is neither lost nor hung (every GPU lost or hung, or no handle
 * for any, is a driver view in name only: "could not check", exit 3, rather than "nothing
 * wrong"). */
bool vg_cmd_driver_view(const struct vg_snapshot *snap);
/* Write a rendered buffer (rc is the renderer's result); prints the error and returns
 * VG_EXIT_SOFTWARE on failure, else status unchanged. */
int vg_cmd_emit(const char *cmd, int rc, const struct vg_buf *out, int status);
/* A GPU named on the command line: its NVML index or a UUID (prefix). -1 with a message when
 * nothing or more than one GPU matches. */
int vg_cmd_find_gpu(const struct vg_snapshot *snap, const char *cmd, const char *text, size_t *gpu);

/* A user named on the command line: a name first (as chown does), else a uid. 0, or -1 when
 * neither names a user. */
int vg_cmd_user(const char *arg, uid_t *uid);

/* Who is asking, as the procfs of --proc numbers processes (act/kill.h's struct vg_kill_who):
 * the commands that signal never touch vramguard or its ancestors (a shell, slurmd and its
 * epilog script). Open --proc and find self and ancestors; -1 after printing the error for
 * cmd. vg_kill_who_release() frees w. */
int vg_cmd_who_open(const struct vg_global *g, const char *cmd, struct vg_kill_who *w);

/* One subcommand as main's table lists it: what runs it, and what the main help, `help` and
 * the completion scripts (complete.c) say about it. */
struct vg_cmd_def {
    const char *name;
    int (*run)(struct vg_global *g, int argc, char **argv);
    const char *summary;       /* the main help's line; NULL: a hidden command (completion) */
    const struct vg_opt *opts; /* its option table (NULL: none), for the completion scripts */
    const char *operands;      /* its first operand's words, '|'-separated; NULL: none */
    bool operand_commands;     /* its first operand is a vramguard command (help) */
    bool operand_program;      /* its operands are a program and its arguments (run) */
};

/* The main help: usage, the listed commands of cmds[0..n), the global options. */
void vg_cmd_main_help(FILE *f, const struct vg_cmd_def *cmds, size_t n);
/* `vramguard help [COMMAND]`: the main help, or COMMAND's --help (the same text). */
int vg_cmd_help_command(struct vg_global *g, int argc, char **argv, const struct vg_cmd_def *cmds,
                        size_t n);
/* `vramguard completion bash|zsh|fish`: the shell's completion script, from cmds' tables. */
int vg_cmd_completion(struct vg_global *g, int argc, char **argv, const struct vg_cmd_def *cmds,
                      size_t n);
/* Write the completion script for shell ("bash", "zsh" or "fish") to f. -EINVAL: no such
 * shell. */
int vg_cmd_completion_script(FILE *f, const char *shell, const struct vg_cmd_def *cmds, size_t n);

/* Each command's option table (in its own file), for the completion scripts. */
extern const struct vg_opt vg_status_opts[], vg_doctor_opts[], vg_visible_opts[], vg_run_opts[],
    vg_pick_opts[], vg_demo_opts[], vg_check_opts[], vg_clean_opts[], vg_serve_opts[],
    vg_handoff_opts[], vg_top_opts[];

int vg_cmd_status(struct vg_global *g, int argc, char **argv);
int vg_cmd_doctor(struct vg_global *g, int argc, char **argv);

/* status and doctor as another command runs them in its own process (demo): what to show as a
 * struct, where to look from g (--nvml, --dev, ...), no command line parsed or made up. Each
 * returns the command's exit status. */
struct vg_cmd_status_req {
    bool no_nvml; /* --no-nvml */
};
struct vg_cmd_doctor_req {
    bool check_shell; /* false: --no-shell */
};
int vg_cmd_status_show(const struct vg_global *g, const struct vg_cmd_status_req *req);
int vg_cmd_doctor_show(const struct vg_global *g, const struct vg_cmd_doctor_req *req);
int vg_cmd_visible(struct vg_global *g, int argc, char **argv);
int vg_cmd_run(struct vg_global *g, int argc, char **argv);
int vg_cmd_pick(struct vg_global *g, int argc, char **argv);
int vg_cmd_demo(struct vg_global *g, int argc, char **argv);
int vg_cmd_watch(struct vg_global *g, int argc, char **argv);
int vg_cmd_check(struct vg_global *g, int argc, char **argv);
int vg_cmd_clean(struct vg_global *g, int argc, char **argv);
int vg_cmd_serve(struct vg_global *g, int argc, char **argv);
int vg_cmd_handoff(struct vg_global *g, int argc, char **argv);
int vg_cmd_top(struct vg_global *g, int argc, char **argv);

#endif
