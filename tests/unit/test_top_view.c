/*
 * Unit tests for render/top_view.c, what `vramguard top`'s UI shows: the selection follows its
 * PID across sorts and filters, u/f/g filter by the selected holder and drop the filter again,
 * Esc clears them all, the search line, the message cleared by a key but not by closing a
 * pane, and the actions that are the command's left to it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/top_view.h"
#include "top_fixture.h"

static bool act(struct vg_top_view *v, enum vg_top_act_kind k, long arg)
{
    bool mine = vg_top_view_act(v, (struct vg_top_act){k, arg}, 10);
    vg_top_view_relist(v);
    return mine;
}

static void test_view(void **state)
{
    (void)state;
    struct vg_top_view v;
    vg_top_view_init(&v);
    vg_top_view_relist(&v); /* no frame yet: an empty list */
    assert_int_equal(v.nlines, 0);
    assert_null(vg_top_view_row(&v));
    vg_top_view_take(&v, frame(NULL));
    vg_top_view_relist(&v);
    assert_int_equal(v.nlines, 3); /* by memory: 200 201 100 */
    act(&v, VG_TOP_ACT_MOVE, 1);
    assert_int_equal(vg_top_view_row(&v)->pid, 201);
    act(&v, VG_TOP_ACT_SORT, -1); /* mem -> gpu: 100 200 201; the selection stays on 201 */
    assert_int_equal(v.sort, VG_TOP_SORT_GPU);
    assert_int_equal(vg_top_view_row(&v)->pid, 201);
    assert_int_equal(v.sel, 2);
    act(&v, VG_TOP_ACT_FILTER_USER, 0); /* bob's */
    assert_string_equal(v.user_filter, "bob");
    assert_int_equal(v.nlines, 1);
    act(&v, VG_TOP_ACT_FILTER_USER, 0); /* again: every user */
    assert_null(v.user_filter);
    assert_int_equal(v.nlines, 3);
    act(&v, VG_TOP_ACT_FILTER_GPU, 0);
    assert_true(v.filter.by_gpu);
    assert_int_equal(v.filter.gpu_index, 0);
    act(&v, VG_TOP_ACT_FILTER_GPU, 0);
    assert_int_equal(v.filter.gpu_index, 1);
    act(&v, VG_TOP_ACT_FILTER_GPU, 0); /* after the last: all */
    assert_false(v.filter.by_gpu);
    act(&v, VG_TOP_ACT_FIRST, 0); /* 100, the orphan: its finding */
    assert_int_equal(vg_top_view_row(&v)->pid, 100);
    act(&v, VG_TOP_ACT_FILTER_FINDING, 0);
    assert_non_null(v.rule_filter);
    act(&v, VG_TOP_ACT_SEARCH, 0);
    assert_true(vg_top_view_search_key(&v, 'x'));
    assert_true(vg_top_view_search_key(&v, '\n'));
    assert_false(vg_top_view_search_key(&v, 'y')); /* done typing */
    assert_string_equal(v.search, "x");
    vg_top_view_relist(&v);
    assert_int_equal(v.nlines, 0);
    act(&v, VG_TOP_ACT_CLEAR_FILTERS, 0);
    assert_null(v.rule_filter);
    assert_string_equal(v.search, "");
    assert_int_equal(v.nlines, 3);

    /* a key clears the message, closing a pane keeps it */
    act(&v, VG_TOP_ACT_DETAIL, 0);
    vg_top_view_say(&v, "nothing stopped");
    act(&v, VG_TOP_ACT_LIST, 0);
    assert_string_equal(v.message, "nothing stopped");
    act(&v, VG_TOP_ACT_MOVE, 1);
    assert_string_equal(v.message, "");
    /* the command's own: left to it */
    assert_false(act(&v, VG_TOP_ACT_QUIT, 0));
    assert_false(act(&v, VG_TOP_ACT_STOP, 0));
    assert_false(act(&v, VG_TOP_ACT_MOUSE, 0));
    assert_false(act(&v, VG_TOP_ACT_INTERVAL, 1));

    struct vg_top_state st = {0};
    v.searching = true;
    vg_top_view_state(&v, &st);
    assert_ptr_equal(st.lines, v.lines);
    assert_string_equal(st.prompt, "search (Enter keeps, Esc drops): ");
    assert_null(st.message);
    vg_top_view_release(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
