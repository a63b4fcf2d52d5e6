/*
 * Unit tests for src/render: JSON writer and escaping (always valid JSON whatever a process put
 * in its name), terminal escaping (no control bytes reach the terminal), and the status
 * renderers over a hand-made snapshot (unknown values as null / n/a, never 0).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fixture.h"
#include "render/json.h"
#include "render/render.h"
#include "render/settle.h"
#include "render/text.h"

#define GiB (1ull << 30)

static void test_json_escape(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    const char in[] = "a\"b\\c\n\x01\xff\xc3\xa9\xed\xa0\x80z";
    assert_int_equal(vg_json_escape(&b, in, sizeof(in) - 1), 0);
    /* quote, backslash, newline, control, invalid byte -> U+FFFD, valid é kept, surrogate
     * encoding (invalid in UTF-8) -> three U+FFFD. */
    assert_string_equal(vg_buf_str(&b), "a\\\"b\\\\c\\n\\u0001\xEF\xBF\xBD\xc3\xa9"
                                        "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
    vg_buf_release(&b);
}

static void test_json_writer(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_json j;
    vg_json_init(&j, &b, false);
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "a", 1);
    vg_json_ku64_opt(&j, "b", false, 7);
    vg_json_key(&j, "c");
    vg_json_arr_begin(&j);
    vg_json_str(&j, "x");
    vg_json_null(&j);
    vg_json_arr_end(&j);
    vg_json_key(&j, "d");
    vg_json_arr_begin(&j);
    vg_json_arr_end(&j);
    vg_json_obj_end(&j);
    assert_int_equal(vg_json_finish(&j), 0);
    assert_string_equal(vg_buf_str(&b), "{\"a\":1,\"b\":null,\"c\":[\"x\",null],\"d\":[]}\n");
    vg_buf_release(&b);

    vg_buf_init(&b, 0);
    vg_json_init(&j, &b, false);
    vg_json_obj_begin(&j); /* unbalanced */
    assert_int_equal(vg_json_finish(&j), -EINVAL);
    vg_buf_release(&b);
}

static void test_text_escape(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    const char in[] = "ls\x1b[2J\n\xff\xc2\x9b ok";
    size_t cols;
    assert_int_equal(vg_text_escape(&b, in, sizeof(in) - 1, 0, &cols), 0);
    assert_string_equal(vg_buf_str(&b), "ls\\x1b[2J\\n\\xff\\xc2\\x9b ok");
    vg_buf_reset(&b);
    assert_int_equal(vg_text_escape(&b, "abcdefghij", 10, 5, &cols), 0);
    assert_string_equal(vg_buf_str(&b), "abcd\xE2\x80\xA6");
    assert_int_equal(cols, 5);
    vg_buf_reset(&b);
    assert_int_equal(vg_text_escape(&b, "abcde", 5, 5, &cols), 0);
    assert_string_equal(vg_buf_str(&b), "abcde");
    /* invisible code points that reorder or hide text (issue 27): a name with U+202E would
     * read "gpj.exe" backwards; isolates, marks, zero-width ones, separators, the BOM */
    vg_buf_reset(&b);
    const char bidi[] = "x\xE2\x80\xAE"
                        "exe.jpg\xE2\x81\xA6\xE2\x80\x8F\xE2\x80\x8B\xE2\x80\xA8"
                        "\xEF\xBB\xBF\xD8\x9C|\xC3\xA9\xE2\x80\xA6\xE2\x82\xAC";
    assert_int_equal(vg_text_escape(&b, bidi, sizeof(bidi) - 1, 0, &cols), 0);
    assert_string_equal(vg_buf_str(&b), "x\\u202e"
                                        "exe.jpg\\u2066\\u200f\\u200b\\u2028\\ufeff\\u061c|"
                                        "\xC3\xA9\xE2\x80\xA6\xE2\x82\xAC");
    assert_int_equal(cols, 1 + 6 + 7 + 6 * 6 + 1 + 3); /* é, the ellipsis and € stay as they are */
    vg_buf_release(&b);
    /* a state byte is one letter or '?' */
    assert_int_equal(vg_text_state('R'), 'R');
    assert_int_equal(vg_text_state('t'), 't');
    assert_int_equal(vg_text_state('\x1b'), '?');
    assert_int_equal(vg_text_state(' '), '?');
    assert_int_equal(vg_text_state('\xff'), '?');
}

/* What became of a holder the stop meant to end, never a signal it did not get (issue 27: a
 * target refused because its PID was reused read "outlived SIGKILL"). */
static void test_settle_survivor(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_settle_holder h = {
        .state = 'S', .signalled = true, .outcome = VG_KILL_FAILED, .error = -ETIMEDOUT};
    vg_render_settle_survivor(&b, &h);
    assert_string_equal(vg_buf_str(&b), ", which outlived SIGKILL");
    vg_buf_reset(&b);
    h = (struct vg_settle_holder){.state = 'S', .refusal = VG_KILL_CHANGED};
    vg_render_settle_survivor(&b, &h);
    assert_string_equal(vg_buf_str(&b), ", which was not signalled: its PID now names another "
                                        "process (the start time or owner changed)");
    vg_buf_reset(&b);
    h = (struct vg_settle_holder){
        .state = 'S', .signalled = true, .outcome = VG_KILL_FAILED, .error = -EPERM};
    vg_render_settle_survivor(&b, &h);
    assert_string_equal(vg_buf_str(&b), ", which could not be signalled");
    vg_buf_release(&b);
}

/* The short UUID is the driver's text: escaped, and cut with a visible ellipsis to fit. */
static void test_short_uuid(void **state)
{
    (void)state;
    char out[32];
    vg_text_short_uuid("GPU-8a1b2c3d-1111-2222-3333-444444444444", out, sizeof(out));
    assert_string_equal(out, "GPU-8a1b2c3d");
    vg_text_short_uuid(NULL, out, sizeof(out));
    assert_string_equal(out, "n/a");
    vg_text_short_uuid("GPU-\x1b]0;x\x07\n12", out, sizeof(out));
    assert_string_equal(out, "GPU-\\x1b]0;x\\x07\\n1");
    /* all control bytes: 4 columns each, cut to fit 16 bytes with the ellipsis */
    char small[16];
    vg_text_short_uuid("GPU-\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b", small, sizeof(small));
    assert_string_equal(small, "GPU-\\x1b\xE2\x80\xA6");
    assert_null(strchr(small, '\x1b'));
}

static struct vg_snapshot *sample(void)
{
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_gpu *g =
        fx_gpu(&l, "GPU-8a1b2c3d-1111-2222", "NVIDIA H100", 2, 80 * GiB, 3 * GiB, GiB / 2);
    fx_gproc(g, 100, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g, 200, UINT64_MAX, VG_PTYPE_COMPUTE);
    struct vg_proc *p = fx_proc(&t, 100, "py)\n(thon", "python \"train\".py\x1b[31m", 'S');
    fx_fd(p, 2);
    return fx_assemble(&l, &t);
}

/* How a holder was seen, one word for JSON, text and metrics: a node held by descriptor or
 * mapping is the node; "map" only when a mapping is all there is. */
static void test_seen(void **state)
{
    (void)state;
    assert_string_equal(vg_render_seen(VG_SEEN_NVML), "nvml");
    assert_string_equal(vg_render_seen(VG_SEEN_FD), "fd");
    assert_string_equal(vg_render_seen(VG_SEEN_MAP), "map");
    assert_string_equal(vg_render_seen(VG_SEEN_FD | VG_SEEN_MAP), "fd");
    assert_string_equal(vg_render_seen(VG_SEEN_NVML | VG_SEEN_FD), "both");
    assert_string_equal(vg_render_seen(VG_SEEN_NVML | VG_SEEN_MAP), "both");
    assert_string_equal(vg_render_seen_words(VG_SEEN_MAP), "device node only (mapped)");
    assert_string_equal(vg_render_seen_words(VG_SEEN_NVML | VG_SEEN_MAP), "driver and device node");
    assert_true(VG_SEEN_NODE_ONLY(VG_SEEN_MAP) && VG_SEEN_NODE_ONLY(VG_SEEN_FD | VG_SEEN_MAP));
    assert_false(VG_SEEN_NODE_ONLY(VG_SEEN_NVML | VG_SEEN_MAP) || VG_SEEN_NODE_ONLY(VG_SEEN_NVML));
}

static void test_status_json(void **state)
{
    (void)state;
    struct vg_snapshot *s = sample();
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_render_opts ro = {0};
    assert_int_equal(vg_render_status_json(s, &ro, &b), 0);
    const char *o = vg_buf_str(&b);
    assert_non_null(strstr(o, "\"schema\": \"vramguard.status/1\""));
    assert_non_null(strstr(o, "\"minor\": 2"));
    assert_non_null(strstr(o, "\"reserved\": 536870912"));
    assert_non_null(strstr(o, "\"unexplained\": 2147483648"));
    assert_non_null(strstr(o, "\"memory\": 1073741824"));
    assert_non_null(strstr(o, "\"memory\": null")); /* pid 200: unknown, not 0 */
    assert_non_null(strstr(o, "\"seen_by\": \"both\""));
    assert_non_null(strstr(o, "\"seen_by\": \"nvml\""));
    assert_non_null(strstr(o, "\"comm\": \"py)\\n(thon\""));
    assert_non_null(strstr(o, "\"command\": \"python \\\"train\\\".py\\u001b[31m\""));
    assert_null(strstr(o, "\x1b"));
    vg_buf_release(&b);
    vg_snap_free(s);
}

static void test_status_text(void **state)
{
    (void)state;
    struct vg_snapshot *s = sample();
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_render_opts ro = {.color = false, .width = 80};
    assert_int_equal(vg_render_status_text(s, &ro, &b), 0);
    const char *o = vg_buf_str(&b);
    assert_non_null(strstr(o, "GPU 0  NVIDIA H100  GPU-8a1b2c3d  minor 2"));
    assert_non_null(
        strstr(o, "memory 3 GiB of 80 GiB used, 76.5 GiB free, 512 MiB reserved, util 10%"));
    assert_non_null(strstr(o, "up to 2 GiB held by no listed process"));
    assert_non_null(strstr(o, "n/a")); /* pid 200's memory */
    assert_null(strstr(o, "\x1b"));    /* no colour, and the command's escape is escaped */
    /* Every line fits 80 columns. */
    for (const char *line = o; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        char *copy = strndup(line, n);
        assert_true(vg_text_cols(copy) <= 80);
        free(copy);
        line += n + (nl ? 1 : 0);
    }
    vg_buf_release(&b);
    vg_snap_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escape), cmocka_unit_test(test_json_writer),
        cmocka_unit_test(test_text_escape), cmocka_unit_test(test_settle_survivor),
        cmocka_unit_test(test_status_json), cmocka_unit_test(test_status_text),
        cmocka_unit_test(test_short_uuid),  cmocka_unit_test(test_seen),
    };
    return cmocka_run_group_tests_name("render", tests, NULL, NULL);
}
