/*
 * Unit tests for render/top_keys.c, the key table of `vramguard top`: every key is in the help
 * pane, every row dispatches to its action in each of its modes, no key is bound twice in a
 * mode, every action a key can mean has a key, and the help pane draws the table's lines in
 * its order. The key map's behaviour key by key (and the mouse, the search line) is
 * test_top.c's test_input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/top.h"
#include "render/top_keys.h"
#include "util/buf.h"

static const enum vg_top_mode modes[] = {VG_TOP_MODE_LIST, VG_TOP_MODE_DETAIL, VG_TOP_MODE_HELP,
                                         VG_TOP_MODE_PLAN};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

/* Every help line of the table, one string. */
static char *all_help(void)
{
    size_t n;
    const struct vg_top_key *k = vg_top_keys(&n);
    struct vg_buf b;
    vg_buf_init(&b, 0);
    for (size_t i = 0; i < n; i++)
        if (k[i].help)
            vg_buf_printf(&b, "%s\n", k[i].help);
    assert_int_equal(b.err, 0);
    return vg_buf_steal(&b);
}

/* Whether word stands in text on its own: not inside a longer word. */
static bool has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        bool before = p == text || !isalnum((unsigned char)p[-1]);
        bool after = !isalnum((unsigned char)p[n]);
        if (before && after)
            return true;
    }
    return false;
}

static struct vg_top_act act_of(enum vg_top_mode mode, int key)
{
    struct vg_top_input in = {.key = key};
    return vg_top_input_act(mode, NULL, &in);
}

static void test_every_key_in_help(void **state)
{
    (void)state;
    size_t n;
    const struct vg_top_key *k = vg_top_keys(&n);
    assert_true(n > 0);
    assert_non_null(k[0].help); /* the first row opens a help line */
    char *help = all_help();
    for (size_t i = 0; i < n; i++) {
        assert_non_null(k[i].name);
        if (!has_word(help, k[i].name))
            fail_msg("key '%s' (row %zu) is not in the help", k[i].name, i);
        /* a printable key's name is the key, or its other case told by the same word */
        if (k[i].key > 32 && k[i].key < 127) {
            assert_int_equal(strlen(k[i].name), 1);
            assert_int_equal(tolower(k[i].name[0]), tolower(k[i].key));
        }
        assert_true(k[i].modes != 0);
    }
    /* the help's lines fit the 80 columns the help pane has at 80x24 */
    for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(strlen(line) <= 79);
    free(help);
}

static void test_every_key_dispatches(void **state)
{
    (void)state;
    size_t n;
    const struct vg_top_key *k = vg_top_keys(&n);
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < NMODES; m++) {
            if (!(k[i].modes & (1u << modes[m])) || k[i].key == VG_TOP_KEY_ANY)
                continue;
            struct vg_top_act a = act_of(modes[m], k[i].key);
            if (a.kind != k[i].act || a.arg != k[i].arg)
                fail_msg("key '%s' in mode %d does %d(%ld), its row says %d(%ld)", k[i].name,
                         (int)modes[m], (int)a.kind, a.arg, (int)k[i].act, k[i].arg);
        }
    /* help: any key closes it, also a code no row names; elsewhere such a code means nothing */
    assert_int_equal(act_of(VG_TOP_MODE_HELP, 'Z').kind, VG_TOP_ACT_LIST);
    assert_int_equal(act_of(VG_TOP_MODE_HELP, VG_TOP_KEY_F6).kind, VG_TOP_ACT_LIST);
    assert_int_equal(act_of(VG_TOP_MODE_HELP, 0x7fffffff).kind, VG_TOP_ACT_LIST);
    assert_int_equal(act_of(VG_TOP_MODE_LIST, 'Z').kind, VG_TOP_ACT_NONE);
    assert_int_equal(act_of(VG_TOP_MODE_PLAN, 'Z').kind, VG_TOP_ACT_NONE);
    assert_int_equal(act_of(VG_TOP_MODE_DETAIL, VG_TOP_KEY_ANY).kind, VG_TOP_ACT_NONE);
}

static void test_no_key_twice_in_a_mode(void **state)
{
    (void)state;
    size_t n;
    const struct vg_top_key *k = vg_top_keys(&n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (k[i].key == k[j].key && (k[i].modes & k[j].modes))
                fail_msg("key '%s' is bound twice in one mode (rows %zu and %zu)", k[i].name, i,
                         j);
}

/* Every action a key can mean (all but NONE and the click's SELECT_AT) has a key. */
static void test_every_action_has_a_key(void **state)
{
    (void)state;
    size_t n;
    const struct vg_top_key *k = vg_top_keys(&n);
    for (int a = VG_TOP_ACT_QUIT; a <= VG_TOP_ACT_MOUSE; a++) {
        if (a == VG_TOP_ACT_SELECT_AT)
            continue;
        bool bound = false;
        for (size_t i = 0; i < n; i++)
            bound |= (int)k[i].act == a;
        if (!bound)
            fail_msg("action %d has no key", a);
    }
}

/* The help pane: the table's lines, in its order, then the notes. */
static void test_help_pane_from_table(void **state)
{
    (void)state;
    struct vg_top_screen scr = {.w = 100, .h = 40};
    struct vg_top_state st = {.mode = VG_TOP_MODE_HELP, .interval_ms = 1000, .host = "n"};
    assert_int_equal(vg_top_render(NULL, &st, &scr), 0);
    struct vg_buf b;
    vg_buf_init(&b, 0);
    for (unsigned y = 0; y < scr.h; y++) {
        vg_top_screen_line(&scr, y, &b);
        vg_buf_addc(&b, '\n');
    }
    const char *text = vg_buf_str(&b), *at = text;
    char *help = all_help();
    for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
        const char *p = strstr(at, line);
        if (!p)
            fail_msg("help line missing or out of order: %s", line);
        at = p + strlen(line);
    }
    assert_non_null(strstr(at, "--read-only turns actions off."));
    free(help);
    vg_buf_release(&b);
    vg_top_screen_release(&scr);
}

/* + and - walk the interval's steps; an interval between two steps goes to the nearer one in
 * the key's direction; the ends stay. */
static void test_interval_steps(void **state)
{
    (void)state;
    assert_int_equal(vg_top_interval_step(1000, true), 2000);
    assert_int_equal(vg_top_interval_step(1000, false), 500);
    assert_int_equal(vg_top_interval_step(3000, true), 5000);
    assert_int_equal(vg_top_interval_step(3000, false), 2000);
    assert_int_equal(vg_top_interval_step(250, false), 250);
    assert_int_equal(vg_top_interval_step(60000, true), 60000);
    assert_int_equal(vg_top_interval_step(30000, true), 60000);
    assert_int_equal(vg_top_interval_step(400, true), 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_in_help),
        cmocka_unit_test(test_every_key_dispatches),
        cmocka_unit_test(test_no_key_twice_in_a_mode),
        cmocka_unit_test(test_every_action_has_a_key),
        cmocka_unit_test(test_help_pane_from_table),
        cmocka_unit_test(test_interval_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
