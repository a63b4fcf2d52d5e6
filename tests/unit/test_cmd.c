/*
 * Unit tests for the option parse every command shares (src/cmd/common.c, vg_cmd_next_opt):
 * the command's own options come back with their values, global options are applied on the
 * way, and help, bad usage and stray words end the parse with a distinct value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd/cmd.h"

enum { OPT_COUNT = VG_OPT_FIRST_LOCAL, OPT_FLAG };

static const struct option longopts[] = {
    VG_GLOBAL_LONGOPTS,
    {"count", required_argument, NULL, OPT_COUNT},
    {"flag", no_argument, NULL, OPT_FLAG},
    {NULL, 0, NULL, 0},
};

static struct vg_cmd_parse parse(struct vg_global *g, int argc, char **argv, bool operands)
{
    struct vg_cmd_parse p = {.g = g, .cmd = "t", .help = "usage: t\n", .shortopts = "n:",
                             .longopts = longopts, .argc = argc, .argv = argv,
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_and_global),
        cmocka_unit_test(test_stops_at_operand),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_bad_usage),
    };
    return cmocka_run_group_tests_name("cmd", tests, NULL, NULL);
}
