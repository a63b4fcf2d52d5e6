/*
 * One declarative option table per command: each option is written once, as a struct vg_opt
 * row, and the getopt_long array, the short-option string, the options section of --help and
 * the lookup of watch's config-file keys are all derived from those rows. A row may also say
 * what its value is (a flag, a duration in a range, a size, a word of a list, ...) and where
 * it goes (struct vg_opt_val): the shared parse (cmd.h, vg_cmd_next_opt) then converts and
 * stores it and words the error, and the command keeps code only for what is its own.
 *
 * A table is an array ended by VG_OPT_TABLE_END. The global options (--json, --color, ...)
 * are one table, vg_global_opts, that every command's parse adds in front of its own, so
 * they are defined and handled in one place.
 */
#ifndef VG_CMD_OPT_H
#define VG_CMD_OPT_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum vg_opt_arg { VG_OPT_ARG_NONE, VG_OPT_ARG_REQUIRED, VG_OPT_ARG_OPTIONAL };

/* What the parse does with an option's value. Every kind but CODE converts and stores it in
 * a target the parse is given (struct vg_opt_val), so the command has no case for it. */
enum vg_opt_kind {
    VG_OPT_K_CODE,     /* nothing: the parse returns the row's id to the command */
    VG_OPT_K_SET,      /* a bool set true (a flag) */
    VG_OPT_K_CLEAR,    /* a bool set false (--no-X) */
    VG_OPT_K_STR,      /* a const char * set to the argument (argv's, not a copy) */
    VG_OPT_K_DURATION, /* milliseconds (vg_parse_duration_ms) within [min, max] */
    VG_OPT_K_SIZE,     /* bytes (vg_parse_size, no fraction) */
    VG_OPT_K_NUM,      /* a decimal number (vg_parse_u64) within [min, max] */
    VG_OPT_K_PID,      /* a process id, 1 to VG_PID_MAX, into a pid_t */
    VG_OPT_K_WORD,     /* an int (an enum): the index of the argument in words; an optional
                        * argument left out stores min */
    VG_OPT_K_BOOL,     /* a bool from true/yes/on/1 or false/no/off/0 */
};

/* Where and how a row's value is kept. The target is one of the structs (or variables) the
 * command hands its parse (struct vg_cmd_parse's dst[]), at offset off, size bytes wide (1 for
 * a bool; 4 or 8 for numbers). A bad value is reported as "--NAME takes TAKES, not 'ARG'". */
struct vg_opt_val {
    enum vg_opt_kind kind;
    unsigned dst;      /* which of the parse's targets */
    size_t off, size;  /* the member within it */
    size_t given;      /* 1 + the offset of a bool set true as well; 0: none */
    uint64_t min, max; /* DURATION, NUM: the range; WORD: the value for a missing argument */
    const char *words; /* WORD: the accepted words, '|'-separated, in the enum's order; any
                        * other kind: the values the completion scripts offer (the parse
                        * checks them itself) */
    const char *takes; /* what the option takes, for the message */
    bool then_code;    /* after storing, return the row's id to the command as well */
};

/* The pieces of a struct vg_opt_val, to combine in VG_OPT_VAL:
 *     VG_OPT_VAL(VG_OPT_AT(0, struct vg_clean, po.pid), .kind = VG_OPT_K_PID,
 *                .takes = "a process id") */
#define VG_OPT_AT(i, type, member)                                                                 \
    .dst = (i), .off = offsetof(type, member), .size = sizeof(((type *)0)->member)
/* A plain variable (not a struct member) as target i. */
#define VG_OPT_VAR(i, type) .dst = (i), .off = 0, .size = sizeof(type)
#define VG_OPT_GIVEN(type, member) .given = offsetof(type, member) + 1
/* A row's struct vg_opt_val (a macro call, which keeps clang-format from laying the row out one
 * field a line). */
#define VG_OPT_VAL(...)                                                                            \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
/* A row whose value the command handles itself. */
#define VG_OPT_CODE                                                                                \
    {                                                                                              \
        .kind = VG_OPT_K_CODE                                                                      \
    }

struct vg_opt {
    const char *name; /* long name without "--"; NULL ends a table */
    char short_name;  /* 0: none */
    enum vg_opt_arg arg;
    const char *metavar;    /* shown after the name: "--name METAVAR", "--name[=METAVAR]" */
    const char *help;       /* --help text: lines joined by '\n' (none at the end), which the
                             * generator indents to the help column; NULL: not listed (an
                             * alias, or an option another table lists) */
    int id;                 /* what the parse returns for it (a CODE or then_code row); a
                             * typed row that never comes back may leave it 0 */
    const char *config_key; /* the config-file key that means the same; NULL: none */
    struct vg_opt_val val;  /* how its value is kept (VG_OPT_CODE: by the command) */
};

#define VG_OPT_TABLE_END                                                                           \
    {                                                                                              \
        NULL, 0, VG_OPT_ARG_NONE, NULL, NULL, 0, NULL, VG_OPT_CODE                                 \
    }

/* Default column at which help texts start ("  --name METAVAR" padded to it). */
#define VG_OPT_HELP_COL 20u
/* The most rows one parse may combine (global and command tables together). */
#define VG_OPT_MAX 48

/* Rows in a table. */
size_t vg_opt_count(const struct vg_opt *t);

/* Append the rows of t to the getopt_long array out (n used of cap; a name already there is
 * skipped, so a command may list a global option under help of its own) and keep it
 * NULL-terminated. 0, or -ENOSPC when cap is too small. */
int vg_opt_longopts(const struct vg_opt *t, struct option *out, size_t *n, size_t cap);

/* Append t's short options in getopt form ("n:", "q") to out (NUL-terminated, cap bytes).
 * 0, or -ENOSPC. */
int vg_opt_shortopts(const struct vg_opt *t, char *out, size_t cap);

/* Print the listed rows of t as help lines: "  -n, --name METAVAR" padded to col (two spaces
 * when longer), then the help, its further lines indented to col + 3. */
void vg_opt_help(FILE *f, const struct vg_opt *t, unsigned col);

/* The row with this long name, given as "--name", "--name=value" or "name"; NULL when none
 * (or name is NULL). */
const struct vg_opt *vg_opt_find_long(const struct vg_opt *t, const char *name);
/* The row with this id, or NULL. */
const struct vg_opt *vg_opt_find_id(const struct vg_opt *t, int id);
/* The row whose config_key is the n bytes at key, or NULL. */
const struct vg_opt *vg_opt_find_key(const struct vg_opt *t, const char *key, size_t n);

/* Convert arg as v says and store it in base (v->off; v->given set true too). arg NULL (an
 * optional argument left out) stores nothing but given, WORD's min, SET's and CLEAR's value.
 * 0, -EINVAL when arg is not such a value (nothing stored; the caller words the message,
 * with v->takes), or -ERANGE when the row's target is too narrow for its value (a bug in the
 * row, never a truncated value). */
int vg_opt_store(const struct vg_opt_val *v, void *base, const char *arg);

#endif
