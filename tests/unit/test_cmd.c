/*
 * Unit tests for the option parse every command shares (src/cmd/common.c, vg_cmd_next_opt):
 * the command's own options come back with their values, global options are applied on the
 * way, and help, bad usage and stray words end the parse with a distinct value. Also the option
 * tables (src/cmd/opt.c): the getopt arrays, help lines and config keys derived from them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd/cmd.h"
#include "cmd/opt.h"
#include "cmd/watch_config.h"

enum { OPT_COUNT = VG_OPT_FIRST_LOCAL, OPT_FLAG };

static const struct vg_opt opts[] = {
    {"count", 0, VG_OPT_ARG_REQUIRED, "N", "how many", OPT_COUNT, NULL, VG_OPT_CODE},
    {"number", 'n', VG_OPT_ARG_REQUIRED, "N", "a number", 'n', NULL, VG_OPT_CODE},
    {"flag", 0, VG_OPT_ARG_NONE, NULL, "a flag", OPT_FLAG, NULL, VG_OPT_CODE},
    VG_OPT_TABLE_END,
};

static struct vg_cmd_parse parse(struct vg_global *g, int argc, char **argv, bool operands)
{
    struct vg_cmd_parse p = {.g = g,
                             .cmd = "t",
                             .help = "usage: t\n",
                             .opts = opts,
                             .argc = argc,
                             .argv = argv,
                             .operands = operands};
    return p;
}

/* Help goes to stdout, which carries TAP here: send it elsewhere while the parse prints. */
static int next_quiet(struct vg_cmd_parse *p)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    assert_true(saved >= 0);
    dup2(fileno(null), STDOUT_FILENO);
    int c = vg_cmd_next_opt(p);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    fclose(null);
    return c;
}

static void test_own_and_global(void **state)
{
    (void)state;
    struct vg_global g = {0};
    char *argv[] = {"t", "--json", "--count", "3", "-n2", "--flag", "--verbose", NULL};
    struct vg_cmd_parse p = parse(&g, 7, argv, false);
    assert_int_equal(vg_cmd_next_opt(&p), OPT_COUNT);
    assert_string_equal(optarg, "3");
    assert_int_equal(vg_cmd_next_opt(&p), 'n');
    assert_string_equal(optarg, "2");
    assert_int_equal(vg_cmd_next_opt(&p), OPT_FLAG);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_END);
    assert_true(g.json);
    assert_true(g.verbose);
}

static void test_stops_at_operand(void **state)
{
    (void)state;
    struct vg_global g = {0};
    char *argv[] = {"t", "--flag", "cmd", "--json", NULL};
    struct vg_cmd_parse p = parse(&g, 4, argv, true);
    assert_int_equal(vg_cmd_next_opt(&p), OPT_FLAG);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_END);
    assert_int_equal(optind, 2);
    assert_false(g.json);

    /* The same words where the command takes none. */
    p = parse(&g, 4, argv, false);
    assert_int_equal(vg_cmd_next_opt(&p), OPT_FLAG);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);
}

static void test_help(void **state)
{
    (void)state;
    struct vg_global g = {0};
    char *argv1[] = {"t", "--flag", "-h", NULL};
    struct vg_cmd_parse p = parse(&g, 3, argv1, false);
    assert_int_equal(vg_cmd_next_opt(&p), OPT_FLAG);
    assert_int_equal(next_quiet(&p), VG_CMD_OPT_HELP);

    char *argv2[] = {"t", "--help", "--bogus", NULL};
    p = parse(&g, 3, argv2, false);
    assert_int_equal(next_quiet(&p), VG_CMD_OPT_HELP);
}

static void test_bad_usage(void **state)
{
    (void)state;
    struct vg_global g = {0};
    char *unknown[] = {"t", "--bogus", NULL};
    struct vg_cmd_parse p = parse(&g, 2, unknown, false);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);

    char *short_unknown[] = {"t", "-x", NULL};
    p = parse(&g, 2, short_unknown, false);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);

    char *missing[] = {"t", "--count", NULL};
    p = parse(&g, 2, missing, false);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);

    char *bad_global[] = {"t", "--color=sometimes", NULL};
    p = parse(&g, 2, bad_global, false);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);
}

/* An abbreviation of several options is told from an unknown option; an alias and its option
 * (--colour, --color) are one; an exact name is never ambiguous; --version ends the parse. */
static void test_ambiguous(void **state)
{
    (void)state;
    struct option lo[VG_OPT_MAX];
    char os[16] = "+:h";
    assert_int_equal(vg_cmd_opt_arrays(opts, lo, VG_OPT_MAX, os, sizeof(os)), 0);
    assert_true(vg_cmd_opt_ambiguous(lo, "--v"));
    assert_true(vg_cmd_opt_ambiguous(lo, "--ver=1"));
    assert_true(vg_cmd_opt_ambiguous(lo, "--n"));     /* --nvml, --nvml-timeout, --number */
    assert_false(vg_cmd_opt_ambiguous(lo, "--nvml")); /* exact, though --nvml-timeout too */
    assert_false(vg_cmd_opt_ambiguous(lo, "--col"));  /* --color and its alias --colour */
    assert_false(vg_cmd_opt_ambiguous(lo, "--verb"));
    assert_false(vg_cmd_opt_ambiguous(lo, "--bogus"));
    assert_false(vg_cmd_opt_ambiguous(lo, "-v"));
    assert_false(vg_cmd_opt_ambiguous(NULL, "--v"));

    struct vg_global g = {0};
    char *amb[] = {"t", "--v", NULL};
    struct vg_cmd_parse p = parse(&g, 2, amb, false);
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);
    char *ver[] = {"t", "--flag", "--version", "--bogus", NULL};
    p = parse(&g, 4, ver, false);
    assert_int_equal(vg_cmd_next_opt(&p), OPT_FLAG);
    assert_int_equal(next_quiet(&p), VG_CMD_OPT_HELP);
}

/* The text vg_opt_help prints for t at col. */
static char *help_of(const struct vg_opt *t, unsigned col)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    vg_opt_help(f, t, col);
    fclose(f);
    return text;
}

static void test_table_help(void **state)
{
    (void)state;
    static const struct vg_opt t[] = {
        {"count", 'n', VG_OPT_ARG_REQUIRED, "N", "how many", 'n', NULL, VG_OPT_CODE},
        {"keep", 0, VG_OPT_ARG_OPTIONAL, "DUR", "first line\nsecond line", 1, NULL, VG_OPT_CODE},
        {"alias", 0, VG_OPT_ARG_NONE, NULL, NULL, 2, NULL, VG_OPT_CODE},
        {"unattributed-min", 0, VG_OPT_ARG_REQUIRED, "SIZE", "too long for the column", 3, NULL,
         VG_OPT_CODE},
        {"once", 0, VG_OPT_ARG_NONE, NULL, "one", 4, NULL, VG_OPT_CODE},
        VG_OPT_TABLE_END,
    };
    char *h = help_of(t, 20);
    assert_string_equal(h, "  -n, --count N        how many\n"
                           "  --keep[=DUR]         first line\n"
                           "                       second line\n"
                           "  --unattributed-min SIZE  too long for the column\n"
                           "  --once               one\n");
    free(h);
    h = help_of(t + 4, 22);
    assert_string_equal(h, "  --once                 one\n");
    free(h);
    assert_int_equal(vg_opt_count(t), 5);

    /* The globals' section, as every --help ends. */
    h = help_of(vg_global_opts, VG_OPT_HELP_COL);
    assert_non_null(strstr(h, "  --color[=WHEN]       colour: auto (default, only on a terminal), "
                              "always, never;\n                       NO_COLOR"));
    assert_null(strstr(h, "colour["));
    free(h);
}

static void test_table_getopt(void **state)
{
    (void)state;
    static const struct vg_opt t[] = {
        {"count", 'n', VG_OPT_ARG_REQUIRED, "N", "how many", 'n', NULL, VG_OPT_CODE},
        {"keep", 0, VG_OPT_ARG_OPTIONAL, "DUR", "keep", 300, NULL, VG_OPT_CODE},
        {"verbose", 0, VG_OPT_ARG_NONE, NULL, "own words for a global", VG_OPT_VERBOSE, NULL,
         VG_OPT_CODE},
        {"quiet", 'q', VG_OPT_ARG_NONE, NULL, "quiet", 'q', NULL, VG_OPT_CODE},
        VG_OPT_TABLE_END,
    };
    struct option lo[VG_OPT_MAX];
    char os[16] = "+:h";
    assert_int_equal(vg_cmd_opt_arrays(t, lo, VG_OPT_MAX, os, sizeof(os)), 0);
    assert_string_equal(os, "+:hn:q");
    size_t nglobal = vg_opt_count(vg_global_opts), n = 0;
    while (lo[n].name)
        n++;
    /* --verbose is a global already: listed once. */
    assert_int_equal(n, nglobal + 3);
    assert_string_equal(lo[0].name, "json");
    assert_string_equal(lo[nglobal].name, "count");
    assert_int_equal(lo[nglobal].has_arg, required_argument);
    assert_int_equal(lo[nglobal].val, 'n');
    assert_int_equal(lo[nglobal + 1].has_arg, optional_argument);
    assert_int_equal(lo[nglobal + 1].val, 300);
    assert_string_equal(lo[nglobal + 2].name, "quiet");

    /* Too small: refused, never cut short. */
    char small[4] = "+:h";
    assert_int_equal(vg_cmd_opt_arrays(t, lo, VG_OPT_MAX, small, sizeof(small)), -ENOSPC);
    assert_int_equal(vg_cmd_opt_arrays(t, lo, 4, os, sizeof(os)), -ENOSPC);

    /* Lookups visible uses to know which words carry a value. */
    assert_ptr_equal(vg_opt_find_long(vg_global_opts, "--nvml-timeout"), &vg_global_opts[6]);
    assert_int_equal(vg_opt_find_long(vg_global_opts, "--proc")->arg, VG_OPT_ARG_REQUIRED);
    assert_null(vg_opt_find_long(vg_global_opts, "--nvml-time"));
    assert_int_equal(vg_opt_find_id(t, 300)->arg, VG_OPT_ARG_OPTIONAL);
    assert_null(vg_opt_find_id(t, 999));
}

static void test_table_config_keys(void **state)
{
    (void)state;
    const struct vg_opt *o = vg_opt_find_key(vg_watch_opts, "idle_after", 10);
    assert_non_null(o);
    assert_string_equal(o->name, "idle-after");
    o = vg_opt_find_key(vg_global_opts, "nvml_timeout", 12);
    assert_non_null(o);
    assert_string_equal(o->name, "nvml-timeout");
    assert_null(vg_opt_find_key(vg_watch_opts, "config", 6));
    assert_null(vg_opt_find_key(vg_watch_opts, "idle-after", 10));

    /* Every key the table names is one the config parser knows, and nothing else is. */
    struct vg_watch_config c;
    vg_watch_config_init(&c);
    for (const struct vg_opt *r = vg_watch_opts; r->name; r++) {
        if (!r->config_key)
            continue;
        struct vg_err err = VG_ERR_INIT;
        vg_watch_config_set(&c, r->config_key, "", &err);
        assert_null(strstr(vg_err_msg(&err), "unknown key"));
        vg_err_release(&err);
    }
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_watch_config_set(&c, "once", "true", &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err), "unknown key 'once'");
    vg_err_release(&err);
    vg_watch_config_release(&c);
}

/* Typed rows: the parse stores their values itself and returns only what the command
 * handles (a CODE row, or one with then_code). */
struct typed {
    bool flag, given;
    const char *str;
    uint64_t ms;
    unsigned n;
    int word;
};

#define TYPED(member) VG_OPT_AT(0, struct typed, member)

static const struct vg_opt typed_opts[] = {
    {"flag", 'f', VG_OPT_ARG_NONE, NULL, "a flag", 0, NULL,
     VG_OPT_VAL(TYPED(flag), .kind = VG_OPT_K_SET)},
    {"str", 0, VG_OPT_ARG_REQUIRED, "S", "a string", 0, NULL,
     VG_OPT_VAL(TYPED(str), .kind = VG_OPT_K_STR)},
    {"dur", 0, VG_OPT_ARG_REQUIRED, "D", "a duration", OPT_COUNT, NULL,
     VG_OPT_VAL(TYPED(ms), VG_OPT_GIVEN(struct typed, given), .kind = VG_OPT_K_DURATION,
                .min = 1000, .max = 60000, .takes = "a duration between 1s and 1m",
                .then_code = true)},
    {"num", 0, VG_OPT_ARG_REQUIRED, "N", "a number", 0, NULL,
     VG_OPT_VAL(TYPED(n), .kind = VG_OPT_K_NUM, .min = 1, .max = 9,
                .takes = "a number from 1 to 9")},
    {"word", 0, VG_OPT_ARG_OPTIONAL, "W", "a word", 0, NULL,
     VG_OPT_VAL(TYPED(word), .kind = VG_OPT_K_WORD, .words = "a|bb|c", .min = 2,
                .takes = "a, bb or c")},
    {"code", 0, VG_OPT_ARG_NONE, NULL, "the command's", OPT_FLAG, NULL, VG_OPT_CODE},
    VG_OPT_TABLE_END,
};

static void test_typed_rows(void **state)
{
    (void)state;
    struct vg_global g = {0};
    struct typed t = {0};
    char *argv[] = {"t", "-f",     "--str=x",   "--dur",  "2s",     "--num",
                    "7", "--word", "--word=bb", "--code", "--json", NULL};
    struct vg_cmd_parse p = {.g = &g,
                             .cmd = "t",
                             .help = "usage: t\n",
                             .opts = typed_opts,
                             .argc = 11,
                             .argv = argv,
                             .dst = {&t}};
    assert_int_equal(vg_cmd_next_opt(&p), OPT_COUNT); /* then_code: stored, and returned */
    assert_string_equal(p.row->name, "dur");
    assert_true(t.flag && t.given);
    assert_string_equal(t.str, "x");
    assert_int_equal(t.ms, 2000);
    assert_int_equal(vg_cmd_next_opt(&p), OPT_FLAG);
    assert_int_equal(t.n, 7);
    assert_int_equal(t.word, 1); /* --word alone stored min (2), then --word=bb */
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_END);
    assert_true(g.json);

    /* A bad value: the usage error, nothing stored. */
    char *bad[] = {"t", "--num", "10", NULL};
    p = (struct vg_cmd_parse){
        .g = &g, .cmd = "t", .help = "", .opts = typed_opts, .argc = 3, .argv = bad, .dst = {&t}};
    assert_int_equal(vg_cmd_next_opt(&p), VG_CMD_OPT_USAGE);
    assert_int_equal(t.n, 7);

    /* The conversion alone, as the watch config file uses it. */
    struct vg_opt_val b = VG_OPT_VAL(TYPED(flag), .kind = VG_OPT_K_BOOL);
    assert_int_equal(vg_opt_store(&b, &t, "off"), 0);
    assert_false(t.flag);
    assert_int_equal(vg_opt_store(&b, &t, "yes"), 0);
    assert_true(t.flag);
    assert_int_equal(vg_opt_store(&b, &t, "maybe"), -EINVAL);
    assert_int_equal(vg_opt_store(&typed_opts[2].val, &t, "2m"), -EINVAL);
    assert_int_equal(vg_opt_store(&typed_opts[4].val, &t, "b"), -EINVAL);
    assert_int_equal(vg_opt_store(&typed_opts[4].val, &t, "c"), 0);
    assert_int_equal(t.word, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_and_global), cmocka_unit_test(test_stops_at_operand),
        cmocka_unit_test(test_help),           cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_table_help),     cmocka_unit_test(test_table_getopt),
        cmocka_unit_test(test_typed_rows),     cmocka_unit_test(test_table_config_keys),
        cmocka_unit_test(test_ambiguous),
    };
    return cmocka_run_group_tests_name("cmd", tests, NULL, NULL);
}
