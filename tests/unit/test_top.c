/*
 * Unit tests for `vramguard top`: the frame (rules/top.c: memory by reason per GPU adding up to
 * used memory, the driver's reservation apart, history, findings worst first, one row per
 * holder with its figures and worst finding); the screen (render/top.c) laid out at 80x24 and
 * 200x50, in colour and monochrome; the key map (render/top_keys.c). The list's sort keys,
 * filters and tree order are test_top_list.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_fixture.h"
#include "rules/rules.h"
#include "render/top.h"
#include "render/top_keys.h"
#include "rules/top.h"
#include "util/text.h"

/* The host with sensors: GPU 0 reports every one, GPU 1 none (a board without them); holder
 * 200's RSS is 1000 pages. */
static struct vg_snapshot *host_sensors(void)
{
    struct vg_snapshot *snap = host();
    struct vg_gpu *g = &snap->gpus.gpus[0];
    g->known |= VG_GPU_K_TEMP | VG_GPU_K_POWER | VG_GPU_K_POWER_LIMIT | VG_GPU_K_FAN;
    g->temp_c = 87;
    g->power_mw = 245400;
    g->power_limit_mw = 400000;
    g->fan_pct = 41;
    for (size_t i = 0; i < snap->procs.n; i++)
        if (snap->procs.procs[i].pid == 200) {
            snap->procs.procs[i].rss_known = true;
            snap->procs.procs[i].rss_pages = 1000;
        }
    return snap;
}

static void test_frame_gpus(void **state)
{
    (void)state;
    struct vg_top_history hist = {0};
    struct vg_top_frame *f = frame(&hist);
    assert_int_equal(f->ngpus, 2);
    for (size_t i = 0; i < f->ngpus; i++) {
        const struct vg_top_gpu *g = &f->gpus[i];
        assert_true(g->reasons_known);
        uint64_t sum = 0;
        for (int r = 0; r < VG_REASON_COUNT; r++)
            sum += g->bytes[r];
        /* the bars add up to used memory; the reservation is apart */
        assert_int_equal(sum, g->g->mem_used);
        assert_true(g->reserved_known);
        assert_int_equal(g->reserved, 512 * MiB);
        assert_int_equal(g->nhist, 1);
    }
    /* GPU 0: 7 GiB no process accounts for */
    assert_int_equal(f->gpus[0].bytes[VG_REASON_UNATTRIBUTED], 7 * GiB);
    assert_int_equal(f->gpus[0].hist[0], (20 * GiB + 300 * MiB + 7 * GiB) * 100 / (80 * GiB));
    /* findings worst first */
    assert_true(f->gpus[0].nfindings >= 2);
    for (size_t k = 1; k < f->gpus[0].nfindings; k++)
        assert_true(f->fs.v[f->gpus[0].findings[k - 1]].severity >=
                    f->fs.v[f->gpus[0].findings[k]].severity);
    vg_top_frame_free(f);
    /* the history grows per GPU, by UUID, and keeps the last VG_TOP_HIST */
    for (int i = 0; i < VG_TOP_HIST + 3; i++)
        vg_top_frame_free(frame(&hist));
    assert_int_equal(hist.n, 2);
    assert_int_equal(hist.g[0].n, VG_TOP_HIST);
    vg_top_history_release(&hist);
}

static void test_frame_rows(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame(NULL);
    assert_int_equal(f->nrows, 3);
    const struct vg_top_row *o = vg_top_frame_row(f, 100);
    assert_non_null(o);
    assert_true(o->has_finding);
    assert_string_equal(f->fs.v[o->finding].rule, "orphan-holder");
    assert_false(o->mem_known);
    assert_int_equal(o->seen, VG_SEEN_FD);
    assert_int_equal(o->reason, VG_REASON_ORPHAN);

    const struct vg_top_row *r0 = vg_top_frame_row(f, 200);
    assert_true(r0->mem_known);
    assert_int_equal(r0->mem, 20 * GiB);
    assert_true(r0->util_known);
    assert_int_equal(r0->util, 40);
    assert_true(r0->cpu_known);
    assert_int_equal(r0->cpu_tenths, 950);
    assert_true(r0->age_known);
    assert_int_equal(r0->age_ms, 3600 * 1000ull);
    assert_string_equal(r0->cvd, "0,1");
    assert_string_equal(r0->command, "python train.py --rank 0");
    assert_int_equal(r0->seen, VG_SEEN_NVML | VG_SEEN_FD);

    const struct vg_top_row *r1 = vg_top_frame_row(f, 201);
    assert_int_equal(r1->ngpus, 2);
    assert_int_equal(r1->mem, 8 * GiB + 300 * MiB);
    assert_false(r1->util_known);
    assert_false(r1->cpu_known);
    assert_string_equal(r1->user, "bob");
    assert_null(vg_top_frame_row(f, 150));
    vg_top_frame_free(f);
}

/* The screen as text, one line per row; printed when VG_TEST_SHOW is set. */
static char *screen_text(const struct vg_top_screen *scr)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    for (unsigned y = 0; y < scr->h; y++) {
        vg_top_screen_line(scr, y, &b);
        vg_buf_addc(&b, '\n');
    }
    assert_int_equal(b.err, 0);
    char *t = vg_buf_steal(&b);
    if (getenv("VG_TEST_SHOW"))
        fputs(t, stderr);
    return t;
}

static char *render(const struct vg_top_frame *f, struct vg_top_state *st, unsigned w, unsigned h,
                    struct vg_top_screen *scr)
{
    struct vg_top_line *v;
    size_t n;
    assert_int_equal(vg_top_lines(f, st->filter, st->sort, st->reverse, st->tree, &v, &n), 0);
    st->lines = v;
    st->nlines = n;
    scr->w = w;
    scr->h = h;
    assert_int_equal(vg_top_render(f, st, scr), 0);
    for (unsigned y = 0; y < h; y++) {
        struct vg_buf b;
        vg_buf_init(&b, 0);
        vg_top_screen_line(scr, y, &b);
        assert_true(vg_text_cols(vg_buf_str(&b)) <= w);
        vg_buf_release(&b);
    }
    free(v);
    st->lines = NULL;
    return screen_text(scr);
}

static long count_lines_before(const char *text, const char *at)
{
    long n = 0;
    for (const char *p = text; p < at; p++)
        n += *p == '\n';
    return n;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_render_sizes(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame(NULL);
    struct vg_top_screen scr = {0};
    struct vg_top_state st = {.sort = VG_TOP_SORT_MEM, .interval_ms = 1000, .host = "node7"};
    char *t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(t, "vramguard top  node7"));
    assert_non_null(strstr(t, " 0 A100-SXM4-"));
    assert_non_null(strstr(t, " 1 A100-SXM4-"));
    assert_non_null(strstr(t, "!! orphan-holder")); /* the finding inline, marked */
    assert_non_null(strstr(t, "??"));               /* 7 GiB unattributed on GPU 0 */
    assert_non_null(strstr(t, "# expected"));       /* the legend */
    assert_non_null(strstr(t, "PID"));
    assert_non_null(strstr(t, "FINDING"));
    assert_null(strstr(t, "CONTAINER")); /* dropped at 80 columns */
    assert_null(strstr(t, "TIME"));
    assert_non_null(strstr(t, "20.0G"));
    assert_non_null(strstr(t, "python train.py --"));
    assert_non_null(strstr(t, "q quit"));
    /* rows biggest first: 200 above 201 above 100 */
    assert_true(strstr(t, "    200 ") < strstr(t, "    201 "));
    assert_true(strstr(t, "    201 ") < strstr(t, "    100 "));
    free(t);

    t = render(f, &st, 200, 50, &scr);
    assert_non_null(strstr(t, "CONTAINER"));
    assert_non_null(strstr(t, "TIME"));
    assert_non_null(strstr(t, "CVD"));
    assert_non_null(strstr(t, "1h00"));
    assert_non_null(strstr(t, "95.0")); /* CPU % of rank 0 */
    assert_non_null(strstr(t, "python train.py --rank 1"));
    assert_int_equal(count(t, "\n"), 50);
    free(t);

    /* tree mode: the launcher's line above its ranks */
    st.tree = true;
    t = render(f, &st, 120, 30, &scr);
    assert_non_null(strstr(t, "150 launcher (holds no GPU itself): 2 processes"));
    assert_non_null(strstr(t, "`- python train."));
    st.tree = false;
    free(t);

    /* a filter says so in the header */
    struct vg_top_filter flt = {.user = "bob"};
    st.filter = &flt;
    t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(t, "user=bob"));
    assert_null(strstr(t, "    200 "));
    assert_non_null(strstr(t, "    201 "));
    st.filter = NULL;
    free(t);
    vg_top_screen_release(&scr);
    vg_top_frame_free(f);
}

/* Temperature, power against the limit and fan on the GPU line (hot in red), "-" for a GPU
 * without them, left out when no GPU has any; RSS per holder. */
static void test_render_sensors_rss(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame_of(host_sensors(), NULL);
    const struct vg_top_row *r = vg_top_frame_row(f, 200);
    assert_true(r->rss_known);
    assert_int_equal(r->rss, 1000 * 4096);
    assert_false(vg_top_frame_row(f, 201)->rss_known);
    struct vg_top_screen scr = {0};
    struct vg_top_state st = {.sort = VG_TOP_SORT_RSS, .interval_ms = 1000, .host = "node7"};
    char *t = render(f, &st, 160, 40, &scr);
    assert_non_null(strstr(t, " 87C  245/400W fan 41%"));
    assert_non_null(strstr(t, "   -         - fan -"));
    assert_non_null(strstr(t, "RSSv"));
    assert_non_null(strstr(t, "    3M "));
    /* sorted by RSS: the known one first */
    assert_true(strstr(t, "    200 ") < strstr(t, "    201 "));
    /* the hot temperature is red */
    const char *line = strstr(t, " 87C");
    size_t y = (size_t)count_lines_before(t, line);
    bool red = false;
    for (unsigned x = 0; x < scr.w; x++)
        red |= scr.cells[y * scr.w + x].ch == '8' && scr.cells[y * scr.w + x].color == VG_TOP_C_RED;
    assert_true(red);
    free(t);
    t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(t, " 87C 245/400W f41%"));
    free(t);
    vg_top_frame_free(f);
    /* no GPU with a sensor: no sensor columns */
    f = frame(NULL);
    t = render(f, &st, 160, 40, &scr);
    assert_null(strstr(t, " fan "));
    free(t);
    vg_top_screen_release(&scr);
    vg_top_frame_free(f);
}

static struct vg_top_act key(enum vg_top_mode mode, int k)
{
    struct vg_top_input in = {.key = k};
    return vg_top_input_act(mode, NULL, &in);
}

/* The key map per mode, the search line, and the mouse over the list as last drawn. */
static void test_input(void **state)
{
    (void)state;
    assert_int_equal(key(VG_TOP_MODE_LIST, 'q').kind, VG_TOP_ACT_QUIT);
    assert_int_equal(key(VG_TOP_MODE_LIST, 'j').arg, 1);
    assert_int_equal(key(VG_TOP_MODE_LIST, VG_TOP_KEY_UP).arg, -1);
    assert_int_equal(key(VG_TOP_MODE_LIST, '\r').kind, VG_TOP_ACT_DETAIL);
    assert_int_equal(key(VG_TOP_MODE_LIST, 'm').kind, VG_TOP_ACT_MOUSE);
    assert_int_equal(key(VG_TOP_MODE_LIST, 'x').kind, VG_TOP_ACT_NONE);
    assert_int_equal(key(VG_TOP_MODE_LIST, 0x7fffffff).kind, VG_TOP_ACT_NONE);
    /* help: any key closes it */
    assert_int_equal(key(VG_TOP_MODE_HELP, 'q').kind, VG_TOP_ACT_LIST);
    /* a plan takes only y, or n/Esc/q */
    assert_int_equal(key(VG_TOP_MODE_PLAN, 'y').kind, VG_TOP_ACT_CONFIRM);
    assert_int_equal(key(VG_TOP_MODE_PLAN, 'q').kind, VG_TOP_ACT_CANCEL);
    assert_int_equal(key(VG_TOP_MODE_PLAN, 'k').kind, VG_TOP_ACT_NONE);
    assert_int_equal(key(VG_TOP_MODE_PLAN, VG_TOP_KEY_ENTER).kind, VG_TOP_ACT_NONE);
    /* detail: Enter, Esc and q close it, the rest is the list's */
    assert_int_equal(key(VG_TOP_MODE_DETAIL, 'q').kind, VG_TOP_ACT_LIST);
    assert_int_equal(key(VG_TOP_MODE_DETAIL, VG_TOP_KEY_DOWN).kind, VG_TOP_ACT_MOVE);

    char buf[6] = "";
    assert_int_equal(vg_top_search_edit(buf, sizeof(buf), 'a'), VG_TOP_EDIT_MORE);
    for (int c = 'b'; c < 'k'; c++)
        vg_top_search_edit(buf, sizeof(buf), c);
    assert_string_equal(buf, "abcde"); /* what does not fit is refused */
    vg_top_search_edit(buf, sizeof(buf), VG_TOP_KEY_BACKSPACE);
    vg_top_search_edit(buf, sizeof(buf), 0x1b5b); /* not a key: nothing */
    vg_top_search_edit(buf, sizeof(buf), '\t');
    assert_string_equal(buf, "abcd");
    assert_int_equal(vg_top_search_edit(buf, sizeof(buf), '\n'), VG_TOP_EDIT_KEEP);
    assert_string_equal(buf, "abcd");
    assert_int_equal(vg_top_search_edit(buf, sizeof(buf), VG_TOP_KEY_ESC), VG_TOP_EDIT_DROP);
    assert_string_equal(buf, "");

    /* the mouse: rows of the list as drawn; a click elsewhere, or over a pane, means nothing */
    struct vg_top_frame *f = frame(NULL);
    struct vg_top_screen scr = {0};
    struct vg_top_state st = {.sort = VG_TOP_SORT_PID, .interval_ms = 1000, .host = "n"};
    free(render(f, &st, 120, 30, &scr));
    assert_int_equal(scr.list_rows, 3);
    assert_int_equal(scr.list_first, 0);
    char line[160];
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_top_screen_line(&scr, scr.list_y + 2, &b);
    snprintf(line, sizeof(line), "%s", vg_buf_str(&b));
    vg_buf_release(&b);
    assert_non_null(strstr(line, "    201 ")); /* by PID: 100, 200, 201 */
    struct vg_top_input in = {
        .mouse = true, .x = 3, .y = (int)scr.list_y + 2, .buttons = VG_TOP_MOUSE_CLICK};
    struct vg_top_act a = vg_top_input_act(VG_TOP_MODE_LIST, &scr, &in);
    assert_int_equal(a.kind, VG_TOP_ACT_SELECT_AT);
    assert_int_equal(a.arg, 2);
    in.y = (int)scr.list_y + 3; /* below the last row */
    assert_int_equal(vg_top_input_act(VG_TOP_MODE_LIST, &scr, &in).kind, VG_TOP_ACT_NONE);
    in.y = 1; /* a GPU line */
    assert_int_equal(vg_top_input_act(VG_TOP_MODE_LIST, &scr, &in).kind, VG_TOP_ACT_NONE);
    in.y = (int)scr.list_y;
    assert_int_equal(vg_top_input_act(VG_TOP_MODE_PLAN, &scr, &in).kind, VG_TOP_ACT_NONE);
    in.buttons = VG_TOP_MOUSE_WHEEL_DOWN;
    a = vg_top_input_act(VG_TOP_MODE_LIST, &scr, &in);
    assert_int_equal(a.kind, VG_TOP_ACT_MOVE);
    assert_int_equal(a.arg, VG_TOP_WHEEL_LINES);
    in.buttons = VG_TOP_MOUSE_WHEEL_UP;
    assert_int_equal(vg_top_input_act(VG_TOP_MODE_LIST, &scr, &in).arg, -VG_TOP_WHEEL_LINES);
    /* a pane in place of the list: no list to click */
    st.mode = VG_TOP_MODE_HELP;
    free(render(f, &st, 120, 30, &scr));
    assert_int_equal(scr.list_rows, 0);
    /* the help lists every key, whole, at 80x24 (read-only adds a line) */
    st.read_only = true;
    char *t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(
        t, "m       mouse on/off (--no-mouse: off at start): a click selects, wheel scrolls"));
    assert_non_null(strstr(t, "? h  help (any key closes it);  q  quit"));
    assert_non_null(strstr(t, "n, Esc or q leave everything as it is"));
    assert_non_null(
        strstr(t, "zombies, processes stuck in the driver. --read-only turns actions off."));
    free(t);
    vg_top_screen_release(&scr);
    vg_top_frame_free(f);
}

static void test_render_panes(void **state)
{
    (void)state;
    struct vg_top_frame *f = frame(NULL);
    struct vg_top_screen scr = {0};
    struct vg_top_state st = {.sort = VG_TOP_SORT_PID, .interval_ms = 1000};
    /* the orphan is the first line by PID: its detail */
    st.mode = VG_TOP_MODE_DETAIL;
    char *t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(t, "PID 100  user alice  state S"));
    assert_non_null(strstr(t, "command: python train.py"));
    assert_non_null(strstr(t, "!! orphan-holder (critical, high confidence):"));
    assert_non_null(strstr(t, "fix:"));
    free(t);
    st.sel = 1;
    t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(t, "CUDA_VISIBLE_DEVICES=0,1  LOCAL_RANK=0"));
    assert_non_null(strstr(t, "holds: GPU 0: 20.0G (40% SM)"));
    assert_non_null(strstr(t, "libraries: cuda nccl torch"));
    free(t);

    st.mode = VG_TOP_MODE_HELP;
    st.read_only = true;
    t = render(f, &st, 80, 24, &scr);
    assert_non_null(strstr(t, "Keys of vramguard top"));
    assert_non_null(strstr(t, "read-only (--read-only): k and K are off"));
    free(t);

    /* colour and monochrome: the same characters; severity has its mark either way */
    st.mode = VG_TOP_MODE_LIST;
    st.color = true;
    char *c = render(f, &st, 80, 24, &scr);
    bool red = false;
    for (size_t i = 0; i < (size_t)scr.w * scr.h; i++)
        red |= scr.cells[i].color == VG_TOP_C_RED;
    assert_true(red);
    st.color = false;
    char *m = render(f, &st, 80, 24, &scr);
    assert_string_equal(c, m);
    free(c);
    free(m);

    /* no frame yet, and a tiny terminal, render without harm */
    st.waiting_ms = 3000;
    scr.w = 80;
    scr.h = 24;
    assert_int_equal(vg_top_render(NULL, &st, &scr), 0);
    t = screen_text(&scr);
    assert_non_null(strstr(t, "waiting for the first sample (3s)"));
    free(t);
    t = render(f, &st, 10, 3, &scr);
    free(t);
    vg_top_screen_release(&scr);
    vg_top_frame_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_gpus),         cmocka_unit_test(test_frame_rows),
        cmocka_unit_test(test_render_sizes),
        cmocka_unit_test(test_render_sensors_rss), cmocka_unit_test(test_input),
        cmocka_unit_test(test_render_panes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
