/*
 * One declarative option table per command: each option is written once, as a struct vg_opt
 * row, and the getopt_long array, the short-option string, the options section of --help and
 * the lookup of watch's config-file keys are all derived from those rows.
 *
 * A table is an array ended by VG_OPT_TABLE_END. The global options (--json, --color, ...)
 * are one table, vg_global_opts, that every command's parse adds in front of its own, so
 * they are defined and handled in one place.
 */
#ifndef VG_CMD_OPT_H
#define VG_CMD_OPT_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

enum vg_opt_arg { VG_OPT_ARG_NONE, VG_OPT_ARG_REQUIRED, VG_OPT_ARG_OPTIONAL };

struct vg_opt {
    const char *name; /* long name without "--"; NULL ends a table */
    char short_name;  /* 0: none */
    enum vg_opt_arg arg;
    const char *metavar;    /* shown after the name: "--name METAVAR", "--name[=METAVAR]" */
    const char *help;       /* --help text: lines joined by '\n' (none at the end), which the
                             * generator indents to the help column; NULL: not listed (an
                             * alias, or an option another table lists) */
    int id;                 /* what the parse returns for it */
    const char *config_key; /* the config-file key that means the same; NULL: none */
};

#define VG_OPT_TABLE_END                                                                           \
    {                                                                                              \
        NULL, 0, VG_OPT_ARG_NONE, NULL, NULL, 0, NULL                                              \
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

#endif
