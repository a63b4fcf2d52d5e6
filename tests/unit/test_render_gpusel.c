/*
 * Unit tests for the words of GPU selection (src/render/gpusel.c) over a hand-made selection
 * (act/gpusel.h's state, no driver, no locks): device and MIG names with and without a name or
 * UUID, the holder note of a reserved GPU (its run alive, gone with its job's processes named,
 * more than named, unreadable), "asked for N GPUs, M free enough (...)", a listed GPU that does
 * not fit or is reserved, the --verbose line with ": chosen", and durations for people.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "render/gpusel.h"

#define GiB (1ull << 30)

/* GPU 0 (A, GPU-a) free 60 of 80 GiB; GPU 1 (B, GPU-b) reserved by run 42; GPU 2 (no name,
 * GPU-c) 3 of 80 GiB free, needs 40 GiB; GPU 3 under MIG, its device 0 MIG-d. */
struct host {
    struct vg_gpu gpus[4];
    struct vg_gpu mig[1];
    bool reserved[4];
    pid_t holder[4];
    struct vg_lock_who who[4];
    struct vg_pick_cand ranked[4];
    struct vg_gpusel_gpu v[4];
    struct vg_gpusel s;
};

static void host_init(struct host *h)
{
    memset(h, 0, sizeof(*h));
    h->gpus[0] = (struct vg_gpu){
        .index = 0, .name = "A", .uuid = "GPU-a", .mem_total = 80 * GiB, .mem_free = 60 * GiB};
    h->gpus[1] = (struct vg_gpu){.index = 1, .name = "B", .uuid = "GPU-b"};
    h->gpus[2] =
        (struct vg_gpu){.index = 2, .uuid = "GPU-c", .mem_total = 80 * GiB, .mem_free = 3 * GiB};
    h->mig[0] = (struct vg_gpu){.index = 0, .is_mig = true, .name = "MIG 1g.10gb", .uuid = "MIG-d"};
    h->gpus[3] = (struct vg_gpu){.index = 3, .name = "D", .mig = h->mig, .nmig = 1};
    for (size_t i = 0; i < 4; i++)
        h->who[i].run_alive = -1;
    h->reserved[1] = true;
    h->holder[1] = 42;
    h->who[1].run_alive = 1;
    h->ranked[0] = (struct vg_pick_cand){.gpu = 0, .reason = VG_PICK_OK};
    h->ranked[1] = (struct vg_pick_cand){.gpu = 1, .reason = VG_PICK_RESERVED};
    h->ranked[2] =
        (struct vg_pick_cand){.gpu = 2, .reason = VG_PICK_LOW_MEM, .need_bytes = 40 * GiB};
    h->ranked[3] = (struct vg_pick_cand){.gpu = 3, .reason = VG_PICK_MIG};
    h->s.gpus.gpus = h->gpus;
    h->s.gpus.ngpus = 4;
    h->s.reserved = h->reserved;
    h->s.holder = h->holder;
    h->s.who = h->who;
    h->s.ranked = h->ranked;
    h->s.neligible = 1;
    h->s.v = h->v;
    h->s.dir.fd = -1;
}

static struct vg_buf g_b;

static const char *str(void)
{
    return vg_buf_str(&g_b);
}

static int setup(void **state)
{
    (void)state;
    vg_buf_init(&g_b, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    vg_buf_release(&g_b);
    return 0;
}

static void test_names(void **state)
{
    (void)state;
    struct host h;
    host_init(&h);
    vg_render_gpusel_dev(&h.s, 0, -1, &g_b);
    assert_string_equal(str(), "GPU 0 (A, GPU-a)");
    vg_buf_reset(&g_b);
    vg_render_gpusel_dev(&h.s, 2, -1, &g_b);
    assert_string_equal(str(), "GPU 2 (GPU-c)");
    vg_buf_reset(&g_b);
    vg_render_gpusel_dev(&h.s, 3, 0, &g_b);
    assert_string_equal(str(), "MIG 3/0 (MIG 1g.10gb, MIG-d)");
    vg_buf_reset(&g_b);
    h.gpus[3].uuid = NULL;
    vg_render_gpusel_dev(&h.s, 3, -1, &g_b);
    assert_string_equal(str(), "GPU 3 (D)");
    vg_buf_reset(&g_b);
    h.v[0] = (struct vg_gpusel_gpu){.gpu = 3, .mig = 0, .uuid = "MIG-d", .lock_fd = -1};
    h.s.n = 1;
    vg_render_gpusel_name(&h.s, 0, &g_b);
    assert_string_equal(str(), "MIG 3/0 (MIG 1g.10gb, MIG-d)");
}

static void test_holder(void **state)
{
    (void)state;
    struct host h;
    host_init(&h);
    vg_render_gpusel_holder(&h.s, 0, &g_b); /* no holder known: nothing */
    assert_string_equal(str(), "");
    vg_render_gpusel_holder(&h.s, 1, &g_b);
    assert_string_equal(str(), " (pid 42)");
    vg_buf_reset(&g_b);
    h.who[1].run_alive = 0;
    h.who[1].holders[0].pid = 43;
    strcpy(h.who[1].holders[0].comm, "python");
    h.who[1].holders[1].pid = 44;
    h.who[1].nholders = 2;
    h.who[1].more = 3;
    vg_render_gpusel_holder(&h.s, 1, &g_b);
    assert_string_equal(str(), " (pid 42, gone; its job still holds it: 43 (python), 44 (?) and 3 "
                               "more)");
    vg_buf_reset(&g_b);
    h.who[1].nholders = 0;
    h.who[1].more = 0;
    h.who[1].unreadable = 2;
    vg_render_gpusel_holder(&h.s, 1, &g_b);
    assert_string_equal(str(), " (pid 42, gone; its job still holds it, in processes we may not "
                               "look at)");
}

static void test_short(void **state)
{
    (void)state;
    struct host h;
    host_init(&h);
    struct vg_pick_criteria c = {.min_free_set = true, .min_free_bytes = 40 * GiB, .max_util = 100};
    vg_render_gpusel_short(&h.s, &c, 2, &g_b);
    assert_string_equal(str(),
                        "asked for 2 GPUs, 1 free enough (GPU 1: reserved by another "
                        "vramguard run (pid 42); GPU 2: 3 GiB free of 80 GiB, needs "
                        "40 GiB; GPU 3: in MIG mode (name a MIG device with --gpus MIG-...))");
}

static void test_list_refusals(void **state)
{
    (void)state;
    struct host h;
    host_init(&h);
    struct vg_pick_criteria c = {.max_util = 100};
    vg_render_gpusel_unfit(&h.s, &h.ranked[2], &c, &g_b);
    assert_string_equal(str(), "GPU 2 (GPU-c): 3 GiB free of 80 GiB, needs 40 GiB");
    vg_buf_reset(&g_b);
    vg_render_gpusel_reserved(&h.s, 1, -1, &g_b);
    assert_string_equal(str(), "GPU 1 (B, GPU-b) is reserved by another vramguard run (pid 42)");
    vg_buf_reset(&g_b);
    vg_render_gpusel_reserved(&h.s, 3, 0, &g_b); /* a MIG device's holder is not looked up */
    assert_string_equal(str(), "MIG 3/0 (MIG 1g.10gb, MIG-d) is reserved by another vramguard run");
}

static void test_ranked(void **state)
{
    (void)state;
    struct host h;
    host_init(&h);
    struct vg_pick_criteria c = {.max_util = 100};
    h.v[0] = (struct vg_gpusel_gpu){.gpu = 0, .mig = -1, .uuid = "GPU-a", .lock_fd = -1};
    h.s.n = 1;
    vg_render_gpusel_ranked(&h.s, 0, &c, &g_b);
    assert_string_equal(str(), "GPU 0 (A, GPU-a): 60 GiB free of 80 GiB: chosen");
    vg_buf_reset(&g_b);
    vg_render_gpusel_ranked(&h.s, 1, &c, &g_b);
    assert_string_equal(str(), "GPU 1 (B, GPU-b): reserved by another vramguard run (pid 42)");
}

static void test_duration(void **state)
{
    (void)state;
    char d[32];
    static const struct {
        uint64_t ms;
        const char *text;
    } cases[] = {{0, "0s"},        {500, "500ms"},  {1500, "1500ms"},
                 {10000, "10s"},   {90000, "90s"},  {300000, "5m"},
                 {5400000, "90m"}, {7200000, "2h"}, {86400000, "24h"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vg_render_duration_ms(cases[i].ms, d, sizeof(d));
        assert_string_equal(d, cases[i].text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duration, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
