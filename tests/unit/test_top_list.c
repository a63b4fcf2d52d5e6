/*
 * Unit tests for render/top_list.c, the holder list of `vramguard top`: the sort keys (biggest
 * first for figures, unknown last, ties by PID, reversed), each filter alone and together,
 * the text search (a substring of command, user or container; a PID only whole) and the tree
 * order (ranks under their launcher, a row under its parent row).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/top_list.h"
#include "top_fixture.h"

static void lines_pids(const struct vg_top_frame *f, const struct vg_top_filter *flt,
                       enum vg_top_sort key, bool rev, bool tree, char *out, size_t n)
{
    struct vg_top_line *v;
    size_t k;
    assert_int_equal(vg_top_lines(f, flt, key, rev, tree, &v, &k), 0);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        int w = snprintf(out + at, n - at, "%s%s%d/%u", i ? " " : "", v[i].group ? "g" : "",
                         (int)v[i].pid, v[i].depth);
        assert_true(w > 0 && (size_t)w < n - at);
        at += (size_t)w;
    }
    free(v);
}

static void test_sort_filter_tree(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame(NULL);
    char s[256];
    lines_pids(f, NULL, VG_TOP_SORT_MEM, false, false, s, sizeof(s));
    assert_string_equal(s, "200/0 201/0 100/0"); /* biggest first, unknown last */
    lines_pids(f, NULL, VG_TOP_SORT_MEM, true, false, s, sizeof(s));
    assert_string_equal(s, "100/0 201/0 200/0");
    lines_pids(f, NULL, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0 200/0 201/0");
    lines_pids(f, NULL, VG_TOP_SORT_USER, true, false, s, sizeof(s));
    assert_string_equal(s, "201/0 100/0 200/0");
    lines_pids(f, NULL, VG_TOP_SORT_FINDING, false, false, s, sizeof(s));
    assert_true(strncmp(s, "100/0", 5) == 0 || strncmp(s, "201/0", 5) == 0);
    lines_pids(f, NULL, VG_TOP_SORT_CPU, false, false, s, sizeof(s));
    assert_string_equal(s, "200/0 100/0 201/0");

    struct vg_top_filter flt = {.user = "bob"};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "201/0");
    flt = (struct vg_top_filter){.by_gpu = true, .gpu_index = 1};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "201/0");
    flt = (struct vg_top_filter){.rule = "orphan-holder"};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0");
    flt = (struct vg_top_filter){.text = "rank 1"};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "201/0");
    flt = (struct vg_top_filter){.text = "200"};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "200/0");

    /* tree: the two ranks under their launcher, 150, which holds no GPU */
    lines_pids(f, NULL, VG_TOP_SORT_PID, false, true, s, sizeof(s));
    assert_string_equal(s, "100/0 g150/0 200/1 201/1");
    lines_pids(f, NULL, VG_TOP_SORT_MEM, false, true, s, sizeof(s));
    assert_string_equal(s, "g150/0 200/1 201/1 100/0");

    assert_int_equal(vg_top_sort_parse("mem"), VG_TOP_SORT_MEM);
    assert_int_equal(vg_top_sort_parse("nope"), VG_TOP_SORT_COUNT);
    for (int k = 0; k < VG_TOP_SORT_COUNT; k++)
        assert_int_equal(vg_top_sort_parse(vg_top_sort_name((enum vg_top_sort)k)), k);
    vg_top_frame_free(f);
}

/* Filters narrow together; a filter that matches nothing gives an empty list, not an error. */
static void test_filters_combined(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame(NULL);
    char s[256];
    struct vg_top_filter flt = {.user = "alice", .by_gpu = true, .gpu_index = 0};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0 200/0");
    flt.rule = "orphan-holder";
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0");
    flt = (struct vg_top_filter){.user = "carol"};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, true, s, sizeof(s));
    assert_string_equal(s, "");
    /* a PID matches only whole: "20" is in no command, user or container */
    flt = (struct vg_top_filter){.text = "20"};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "");
    /* an empty search is no filter */
    flt = (struct vg_top_filter){.text = ""};
    lines_pids(f, &flt, VG_TOP_SORT_PID, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0 200/0 201/0");
    assert_true(vg_top_row_match(f, &f->rows[0], NULL));
    vg_top_frame_free(f);
}

/* Unknown figures stay last whichever way the order goes; ties fall back to PID order. */
static void test_sort_unknown_and_ties(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame(NULL);
    char s[256];
    /* only 200 has an SM figure */
    lines_pids(f, NULL, VG_TOP_SORT_UTIL, false, false, s, sizeof(s));
    assert_string_equal(s, "200/0 100/0 201/0");
    /* one GPU each but 201 on GPU 0 first: by GPU then PID */
    lines_pids(f, NULL, VG_TOP_SORT_GPU, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0 200/0 201/0");
    lines_pids(f, NULL, VG_TOP_SORT_COMMAND, false, false, s, sizeof(s));
    assert_string_equal(s, "100/0 200/0 201/0");
    assert_string_equal(vg_top_sort_name(VG_TOP_SORT_COUNT), "?");
    assert_int_equal(vg_top_sort_parse(NULL), VG_TOP_SORT_COUNT);
    vg_top_frame_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_filter_tree),
        cmocka_unit_test(test_filters_combined),
        cmocka_unit_test(test_sort_unknown_and_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
