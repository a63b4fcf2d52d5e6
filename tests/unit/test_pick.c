/*
 * Unit tests for GPU choice (src/model/pick.c): the order GPUs are picked in, why the others
 * are not, unknown values, and the strict parsers behind -n, --min-free, --max-util, --gpus
 * and --exclude, hostile values included.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"
#include "model/pick.h"
#include "model/visible.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static struct vg_pick_criteria defaults(void)
{
    struct vg_pick_criteria c = {
        .min_free_set = true,
        .min_free_is_fraction = true,
        .min_free_fraction = VG_PICK_DEFAULT_MIN_FREE,
        .max_util = VG_PICK_DEFAULT_MAX_UTIL,
    };
    return c;
}

/* Four 80 GiB GPUs: 0 half used, 1 empty, 2 busy, 3 nearly empty. */
static void four(struct vg_gpu_list *l)
{
    vg_gpu_list_init(l);
    fx_gpu(l, "GPU-00000000-aaaa-4000-8000-000000000000", "A100", 0, 80 * GiB, 30 * GiB, 512 * MiB);
    fx_gpu(l, "GPU-11111111-bbbb-4000-8000-000000000000", "A100", 1, 80 * GiB, 0, 512 * MiB);
    fx_gpu(l, "GPU-22222222-cccc-4000-8000-000000000000", "H100", 2, 80 * GiB, 0, 512 * MiB);
    fx_gpu(l, "GPU-33333333-dddd-4000-8000-000000000000", "H100", 3, 80 * GiB, 1 * GiB, 512 * MiB);
    l->gpus[2].util_gpu = 99;
    l->gpus[1].util_gpu = 20;
    l->gpus[3].util_gpu = 0;
}

static void test_order_most_free_first(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    four(&l);
    struct vg_pick_criteria c = defaults();
    struct vg_pick_cand out[4];
    size_t ok = vg_pick_rank(&l, &c, out);
    assert_int_equal(ok, 3);
    assert_int_equal(out[0].gpu, 1);
    assert_int_equal(out[1].gpu, 3);
    assert_int_equal(out[2].gpu, 0);
    assert_int_equal(out[3].gpu, 2);
    assert_int_equal(out[3].reason, VG_PICK_BUSY);

    /* Equal free memory: lower utilisation first, then lower index. */
    l.gpus[3].mem_used = 0;
    l.gpus[3].mem_free = l.gpus[1].mem_free;
    l.gpus[3].util_gpu = 20;
    ok = vg_pick_rank(&l, &c, out);
    assert_int_equal(out[0].gpu, 1);
    assert_int_equal(out[1].gpu, 3);
    l.gpus[3].util_gpu = 5;
    ok = vg_pick_rank(&l, &c, out);
    assert_int_equal(out[0].gpu, 3);
    assert_int_equal(out[1].gpu, 1);
    vg_gpu_list_release(&l);
}

static void test_reasons(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    four(&l);
    bool excluded[4] = {false, true, false, false};
    bool reserved[4] = {false, false, false, true};
    struct vg_pick_criteria c = defaults();
    c.excluded = excluded;
    c.reserved = reserved;
    c.min_free_is_fraction = false;
    c.min_free_bytes = 60 * GiB;
    struct vg_pick_cand out[4];
    size_t ok = vg_pick_rank(&l, &c, out);
    assert_int_equal(ok, 0);
    /* The rest in index order, each with its reason. */
    assert_int_equal(out[0].gpu, 0);
    assert_int_equal(out[0].reason, VG_PICK_LOW_MEM);
    assert_int_equal(out[0].need_bytes, 60 * GiB);
    assert_int_equal(out[1].reason, VG_PICK_EXCLUDED);
    assert_int_equal(out[2].reason, VG_PICK_BUSY);
    assert_int_equal(out[3].reason, VG_PICK_RESERVED);

    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_pick_describe(&l, &out[0], &c, &b);
    assert_string_equal(vg_buf_str(&b), "49.5 GiB free of 80 GiB, needs 60 GiB");
    vg_buf_reset(&b);
    vg_pick_describe(&l, &out[2], &c, &b);
    assert_string_equal(vg_buf_str(&b), "utilisation 99% above 50%");
    vg_buf_reset(&b);
    vg_pick_describe(&l, &out[3], &c, &b);
    assert_string_equal(vg_buf_str(&b), "reserved by another vramguard run");
    vg_buf_release(&b);
    vg_gpu_list_release(&l);
}

static void test_unknown_is_not_zero(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    four(&l);
    struct vg_pick_criteria c = defaults();
    uint64_t need;
    /* Unknown memory never passes a floor (and a fraction of an unknown total is unknown). */
    l.gpus[1].known &= ~VG_GPU_K_MEM;
    assert_int_equal(vg_pick_judge(&l, 1, &c, &need), VG_PICK_MEM_UNKNOWN);
    c.min_free_is_fraction = false;
    c.min_free_bytes = 1;
    assert_int_equal(vg_pick_judge(&l, 1, &c, &need), VG_PICK_MEM_UNKNOWN);
    c.min_free_set = false;
    assert_int_equal(vg_pick_judge(&l, 1, &c, &need), VG_PICK_OK);
    /* Unknown utilisation passes the default ceiling, not an explicit one. */
    l.gpus[3].known &= ~VG_GPU_K_UTIL;
    c = defaults();
    assert_int_equal(vg_pick_judge(&l, 3, &c, &need), VG_PICK_OK);
    c.max_util_explicit = true;
    assert_int_equal(vg_pick_judge(&l, 3, &c, &need), VG_PICK_UTIL_UNKNOWN);
    c.max_util = 100; /* no ceiling at all */
    assert_int_equal(vg_pick_judge(&l, 3, &c, &need), VG_PICK_OK);
    /* Unknown sorts after known. */
    c = defaults();
    c.min_free_set = false;
    struct vg_pick_cand out[4];
    vg_pick_rank(&l, &c, out);
    assert_int_equal(out[0].gpu, 3);
    assert_int_equal(out[1].gpu, 0);
    assert_int_equal(out[2].gpu, 1);
    vg_gpu_list_release(&l);
}

static void test_never_picked(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    four(&l);
    struct vg_pick_criteria c = defaults();
    uint64_t need;
    fx_mig(&l.gpus[0], "MIG-aaaa", 10 * GiB);
    l.gpus[1].lost = true;
    l.gpus[3].known &= ~VG_GPU_K_UUID;
    assert_int_equal(vg_pick_judge(&l, 0, &c, &need), VG_PICK_MIG);
    assert_int_equal(vg_pick_judge(&l, 1, &c, &need), VG_PICK_LOST);
    assert_int_equal(vg_pick_judge(&l, 3, &c, &need), VG_PICK_NO_UUID);
    vg_gpu_list_release(&l);
}

/* A UUID that is not a well-formed one never becomes part of a CUDA_VISIBLE_DEVICES value: a
 * comma would make several entries of it, a control character would reach a terminal. */
static void test_bad_uuid(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "GPU-a,1,b",
        "GPU-00000000-0000-4000-8000-00000000000",   /* one digit short */
        "GPU-00000000-0000-4000-8000-0000000000000", /* one too many */
        "GPU-0000000g-0000-4000-8000-000000000000",
        "GPU-00000000-0000-4000-8000-000000000000,1",
        "GPU-00000000-0000-4000-8000-00000000000 ",
        "GPU-\033[2J000-0000-4000-8000-000000000000",
        "gpu-00000000-0000-4000-8000-000000000000",
        "MIG-GPU-00000000-0000-4000-8000-000000000000/1",
        "MIG-GPU-00000000-0000-4000-8000-000000000000/1/",
        "MIG-GPU-00000000-0000-4000-8000-000000000000/1/2/3",
        "",
    };
    static const char *const good[] = {
        "GPU-00000000-0000-4000-8000-000000000000",
        "GPU-6F1C2A3E-ABCD-4000-8000-0123456789ab",
        "MIG-11111111-0000-4000-8000-000000000000",
        "MIG-GPU-00000000-0000-4000-8000-000000000000/7/0",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (vg_visible_uuid_ok(bad[i]))
            fail_msg("'%s' accepted", bad[i]);
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!vg_visible_uuid_ok(good[i]))
            fail_msg("'%s' refused", good[i]);
    assert_false(vg_visible_uuid_ok(NULL));

    struct vg_gpu_list l;
    four(&l);
    struct vg_pick_criteria c = defaults();
    uint64_t need;
    free(l.gpus[2].uuid);
    l.gpus[2].uuid = fx_strdup("GPU-a,1,b");
    assert_int_equal(vg_pick_judge(&l, 2, &c, &need), VG_PICK_BAD_UUID);
    struct vg_pick_cand out[4];
    size_t ok = vg_pick_rank(&l, &c, out);
    for (size_t i = 0; i < ok; i++)
        assert_int_not_equal(out[i].gpu, 2);
    assert_string_equal(vg_pick_reason_str(VG_PICK_BAD_UUID), "its UUID is not well-formed");
    vg_gpu_list_release(&l);
}

static void test_floor(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    four(&l);
    struct vg_pick_criteria c = defaults();
    bool known;
    assert_int_equal(vg_pick_floor(&c, &l.gpus[0], &known), 40 * GiB);
    assert_true(known);
    c.min_free_fraction = 1.0;
    assert_int_equal(vg_pick_floor(&c, &l.gpus[0], &known), 80 * GiB);
    c.min_free_fraction = 0;
    assert_int_equal(vg_pick_floor(&c, &l.gpus[0], &known), 0);
    /* Exactly the floor passes. */
    c.min_free_is_fraction = false;
    c.min_free_bytes = l.gpus[1].mem_free;
    uint64_t need;
    assert_int_equal(vg_pick_judge(&l, 1, &c, &need), VG_PICK_OK);
    c.min_free_bytes++;
    assert_int_equal(vg_pick_judge(&l, 1, &c, &need), VG_PICK_LOW_MEM);
    vg_gpu_list_release(&l);
}

static void test_parse_count(void **state)
{
    (void)state;
    struct vg_err err = VG_ERR_INIT;
    unsigned n = 7;
    assert_int_equal(vg_pick_parse_count("-n", "1", &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(vg_pick_parse_count("-n", "64", &n, &err), 0);
    const char *bad[] = {"0", "65", "999", "-1", "", "1.5", "2x", " 2", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        n = 7;
        assert_int_equal(vg_pick_parse_count("-n", bad[i], &n, &err), -EINVAL);
        assert_int_equal(n, 7);
    }
    assert_string_equal(vg_err_msg(&err),
                        "-n takes a number of GPUs from 1 to 64, not '99999999999999999999'");
    vg_err_release(&err);
}

static void test_parse_util(void **state)
{
    (void)state;
    struct vg_err err = VG_ERR_INIT;
    unsigned u;
    assert_int_equal(vg_pick_parse_util("0", &u, &err), 0);
    assert_int_equal(u, 0);
    assert_int_equal(vg_pick_parse_util("100", &u, &err), 0);
    assert_int_equal(u, 100);
    assert_int_equal(vg_pick_parse_util("30%", &u, &err), 0);
    assert_int_equal(u, 30);
    const char *bad[] = {"101", "-1", "", "%", "50%%", "1e2", "50 ", "0x10"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(vg_pick_parse_util(bad[i], &u, &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err),
                        "--max-util takes a utilisation percentage from 0 to 100, not '0x10'");
    vg_err_release(&err);
}

static void test_parse_min_free(void **state)
{
    (void)state;
    struct vg_err err = VG_ERR_INIT;
    struct vg_pick_criteria c = {0};
    assert_int_equal(vg_pick_parse_min_free("20GiB", &c, &err), 0);
    assert_true(c.min_free_set);
    assert_false(c.min_free_is_fraction);
    assert_int_equal(c.min_free_bytes, 20 * GiB);
    assert_int_equal(vg_pick_parse_min_free("512MiB", &c, &err), 0);
    assert_int_equal(c.min_free_bytes, 512 * MiB);
    assert_int_equal(vg_pick_parse_min_free("0.5", &c, &err), 0);
    assert_true(c.min_free_is_fraction);
    assert_true(c.min_free_fraction == 0.5);
    assert_int_equal(vg_pick_parse_min_free("1.0", &c, &err), 0);
    assert_true(c.min_free_fraction == 1.0);
    const char *bad[] = {"-1",   "1e400",          "1.5", "",   "GiB", "20 GB GB", "0.5.5",
                         "-0.5", "99999999999TiB", "nan", "inf"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vg_pick_criteria d = {0};
        assert_int_not_equal(vg_pick_parse_min_free(bad[i], &d, &err), 0);
        assert_false(d.min_free_set);
    }
    assert_int_equal(vg_pick_parse_min_free("1e400", &c, &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err), "--min-free takes a size (20GiB, 512MiB) or a "
                                          "fraction of the total from 0 to 1 (0.5), not '1e400'");
    vg_err_release(&err);
}

static void test_parse_spec(void **state)
{
    (void)state;
    struct vg_err err = VG_ERR_INIT;
    struct vg_pick_spec s;
    assert_int_equal(vg_pick_parse_spec("auto", &s, &err), 0);
    assert_true(s.is_auto);
    assert_int_equal(s.count, 1);
    assert_int_equal(vg_pick_parse_spec("auto:4", &s, &err), 0);
    assert_int_equal(s.count, 4);
    assert_int_equal(vg_pick_parse_spec("0,GPU-1", &s, &err), 0);
    assert_false(s.is_auto);
    assert_string_equal(s.list, "0,GPU-1");
    assert_int_equal(vg_pick_parse_spec("auto:0", &s, &err), -EINVAL);
    assert_int_equal(vg_pick_parse_spec("auto:", &s, &err), -EINVAL);
    assert_int_equal(vg_pick_parse_spec("auto:999", &s, &err), -EINVAL);
    assert_int_equal(vg_pick_parse_spec("", &s, &err), -EINVAL);
    vg_err_release(&err);
}

static void test_resolve_list(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    four(&l);
    fx_mig(&l.gpus[2], "MIG-22220000-0000-4000-8000-000000000000", 10 * GiB);
    struct vg_err err = VG_ERR_INIT;
    struct vg_pick_sel *sel;
    size_t n;
    /* Indices, full UUIDs, unique prefixes, blanks, forms mixed. */
    assert_int_equal(vg_pick_resolve_list("--gpus", "3, GPU-0000 ,1,MIG-2222", &l, &sel, &n, &err),
                     0);
    assert_int_equal(n, 4);
    assert_int_equal(sel[0].gpu, 3);
    assert_int_equal(sel[0].mig, -1);
    assert_int_equal(sel[1].gpu, 0);
    assert_int_equal(sel[2].gpu, 1);
    assert_int_equal(sel[3].gpu, 2);
    assert_int_equal(sel[3].mig, 0);
    free(sel);
    /* A GPU in MIG mode named as a GPU stays the whole GPU. */
    assert_int_equal(vg_pick_resolve_list("--gpus", "2", &l, &sel, &n, &err), 0);
    assert_int_equal(sel[0].mig, -1);
    free(sel);

    struct {
        const char *in, *msg;
    } bad[] = {
        {"4", "--gpus: '4' is not a GPU of this host (no such GPU index; see 'vramguard "
              "status')"},
        {"GPU-9", "--gpus: 'GPU-9' is not a GPU of this host (no GPU or MIG device has this "
                  "UUID; see 'vramguard status')"},
        {"GPU-", "--gpus: 'GPU-' is not a GPU of this host (no GPU or MIG device has this "
                 "UUID; see 'vramguard status')"},
        {"foo", "--gpus: 'foo' is not a GPU of this host (not an index or a GPU-/MIG- UUID; "
                "see 'vramguard status')"},
        {"-1", "--gpus: '-1' is not a GPU of this host (negative index; see 'vramguard "
               "status')"},
        {"0,,1", "--gpus '0,,1': empty entry"},
        {"1,GPU-1111", "--gpus: 'GPU-1111' names a GPU already in the list"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sel = NULL;
        assert_int_equal(vg_pick_resolve_list("--gpus", bad[i].in, &l, &sel, &n, &err), -EINVAL);
        assert_null(sel);
        assert_string_equal(vg_err_msg(&err), bad[i].msg);
    }
    vg_err_release(&err);
    vg_gpu_list_release(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_most_free_first),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_unknown_is_not_zero),
        cmocka_unit_test(test_never_picked),
        cmocka_unit_test(test_bad_uuid),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_parse_count),
        cmocka_unit_test(test_parse_util),
        cmocka_unit_test(test_parse_min_free),
        cmocka_unit_test(test_parse_spec),
        cmocka_unit_test(test_resolve_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
