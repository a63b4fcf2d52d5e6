/*
 * Table-driven tests for CUDA_VISIBLE_DEVICES resolution (src/model/visible.c): ordinary
 * values, hostile ones, ordering by CUDA_DEVICE_ORDER, UUID prefixes and MIG devices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fixture.h"
#include "model/visible.h"

#define GiB (1ull << 30)

enum host { HOMO, HETERO, MIGHOST };

static void build(enum host h, struct vg_gpu_list *l)
{
    vg_gpu_list_init(l);
    switch (h) {
    case HOMO:
        fx_gpu(l, "GPU-aaaa1111-0000-0000-0000-000000000000", "A100", 0, 80 * GiB, 0, 0);
        fx_gpu(l, "GPU-aaaa2222-0000-0000-0000-000000000000", "A100", 1, 80 * GiB, 0, 0);
        fx_gpu(l, "GPU-bbbb3333-0000-0000-0000-000000000000", "A100", 2, 80 * GiB, 0, 0);
        fx_gpu(l, "GPU-cccc4444-0000-0000-0000-000000000000", "A100", 3, 80 * GiB, 0, 0);
        for (size_t i = 0; i < 4; i++)
            l->gpus[i].cc_major = 8, l->gpus[i].cc_minor = 0;
        break;
    case HETERO:
        fx_gpu(l, "GPU-t4000000-0000", "Tesla T4", 0, 16 * GiB, 0, 0);
        fx_gpu(l, "GPU-h1000000-0000", "H100", 1, 80 * GiB, 0, 0);
        fx_gpu(l, "GPU-a1000000-0000", "A100", 2, 80 * GiB, 0, 0);
        l->gpus[0].cc_major = 7, l->gpus[0].cc_minor = 5;
        l->gpus[1].cc_major = 9, l->gpus[1].cc_minor = 0;
        l->gpus[2].cc_major = 8, l->gpus[2].cc_minor = 0;
        break;
    case MIGHOST:
        fx_gpu(l, "GPU-m0000000-0000", "A100", 0, 80 * GiB, 0, 0);
        fx_gpu(l, "GPU-n0000000-0000", "A100", 1, 80 * GiB, 0, 0);
        fx_mig(&l->gpus[0], "MIG-11110000-0000-4000-8000-000000000000", 10 * GiB);
        fx_mig(&l->gpus[0], "MIG-22220000-0000-4000-8000-000000000000", 10 * GiB);
        l->gpus[0].cc_major = l->gpus[1].cc_major = 8;
        break;
    }
}

struct row {
    enum host host;
    const char *value; /* NULL: unset */
    const char *order;
    const char *devices; /* "g" or "g/m", comma-separated; "" for none */
    int cut;             /* entry index CUDA stops at; -1 for none */
    enum vg_vis_problem problem; /* the problem at the cut (or of an ignored MIG entry) */
    const char *corrected;       /* NULL: no correction expected */
};

#define UA "GPU-aaaa1111-0000-0000-0000-000000000000"
#define UB "GPU-aaaa2222-0000-0000-0000-000000000000"
#define UC "GPU-bbbb3333-0000-0000-0000-000000000000"
#define UD "GPU-cccc4444-0000-0000-0000-000000000000"

static const struct row rows[] = {
    /* unset, empty, none */
    {HOMO, NULL, NULL, "0,1,2,3", -1, VG_VIS_OK, NULL},
    {HOMO, "", NULL, "", 0, VG_VIS_EMPTY_ENTRY, NULL},
    {HOMO, "-1", NULL, "", 0, VG_VIS_NEGATIVE, NULL},
    {HOMO, " ", NULL, "", 0, VG_VIS_EMPTY_ENTRY, NULL},
    /* plain indices */
    {HOMO, "0", NULL, "0", -1, VG_VIS_OK, NULL},
    {HOMO, "3", NULL, "3", -1, VG_VIS_OK, NULL},
    {HOMO, "2,1", NULL, "2,1", -1, VG_VIS_OK, NULL},
    {HOMO, "0,1,2,3", NULL, "0,1,2,3", -1, VG_VIS_OK, NULL},
    {HOMO, " 0, 1", NULL, "0,1", -1, VG_VIS_OK, NULL},
    {HOMO, "0 ,\t1 ", NULL, "0,1", -1, VG_VIS_OK, NULL},
    /* the cut at the first invalid entry */
    {HOMO, "0,2,-1,1", NULL, "0,2", 2, VG_VIS_NEGATIVE, UA "," UC "," UB},
    {HOMO, "-1,0", NULL, "", 0, VG_VIS_NEGATIVE, UA},
    {HOMO, "0,,1", NULL, "0", 1, VG_VIS_EMPTY_ENTRY, UA "," UB},
    {HOMO, "0,", NULL, "0", 1, VG_VIS_EMPTY_ENTRY, UA},
    {HOMO, ",0", NULL, "", 0, VG_VIS_EMPTY_ENTRY, UA},
    {HOMO, "4", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, "1,7,2", NULL, "1", 1, VG_VIS_BAD_INDEX, UB "," UC},
    {HOMO, "1,0,1", NULL, "1,0", 2, VG_VIS_DUPLICATE, UB "," UA},
    {HOMO, "0,0", NULL, "0", 1, VG_VIS_DUPLICATE, UA},
    {HOMO, "abc", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, "0x1", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, "1.0", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, "+1", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, "99999999999999999999999", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, "0;1", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    /* UUIDs and prefixes */
    {HOMO, UC, NULL, "2", -1, VG_VIS_OK, NULL},
    {HOMO, "GPU-bbbb", NULL, "2", -1, VG_VIS_OK, NULL},
    {HOMO, "GPU-cccc4444," UA, NULL, "3,0", -1, VG_VIS_OK, NULL},
    {HOMO, "GPU-aaaa", NULL, "", 0, VG_VIS_AMBIGUOUS_UUID, ""},
    {HOMO, "GPU-aaaa2", NULL, "1", -1, VG_VIS_OK, NULL},
    {HOMO, "GPU-", NULL, "", 0, VG_VIS_UNKNOWN_UUID, ""},
    {HOMO, "GPU-zzz", NULL, "", 0, VG_VIS_UNKNOWN_UUID, ""},
    {HOMO, "gpu-bbbb", NULL, "", 0, VG_VIS_BAD_INDEX, ""},
    {HOMO, UC "," UC, NULL, "2", 1, VG_VIS_DUPLICATE, UC},
    {HOMO, "GPU-bbbb," UC, NULL, "2", 1, VG_VIS_DUPLICATE, UC},
    /* mixed forms: conservatively a cut */
    {HOMO, "0,GPU-bbbb", NULL, "0", 1, VG_VIS_MIXED, UA "," UC},
    {HOMO, "GPU-bbbb,0", NULL, "2", 1, VG_VIS_MIXED, UC "," UA},
    /* ordering */
    {HETERO, NULL, NULL, "1,2,0", -1, VG_VIS_OK, NULL},
    {HETERO, NULL, "FASTEST_FIRST", "1,2,0", -1, VG_VIS_OK, NULL},
    {HETERO, NULL, "PCI_BUS_ID", "0,1,2", -1, VG_VIS_OK, NULL},
    {HETERO, "0", NULL, "1", -1, VG_VIS_OK, NULL},
    {HETERO, "0", "PCI_BUS_ID", "0", -1, VG_VIS_OK, NULL},
    {HETERO, "2,0", NULL, "0,1", -1, VG_VIS_OK, NULL},
    {HETERO, "GPU-t4", NULL, "0", -1, VG_VIS_OK, NULL},
    {HETERO, "1", "pci_bus_id", "2", -1, VG_VIS_OK, NULL},
    {HOMO, NULL, NULL, "0,1,2,3", -1, VG_VIS_OK, NULL},
    /* MIG: one MIG device per process */
    {MIGHOST, "MIG-2222", NULL, "0/1", -1, VG_VIS_OK, NULL},
    {MIGHOST, "MIG-1111,MIG-2222", NULL, "0/0", -1, VG_VIS_EXTRA_MIG,
     "MIG-11110000-0000-4000-8000-000000000000"},
    {MIGHOST, "0", "PCI_BUS_ID", "0/0", -1, VG_VIS_OK, NULL},
    {MIGHOST, "GPU-m0", NULL, "0/0", -1, VG_VIS_OK, NULL},
    {MIGHOST, "MIG-", NULL, "", 0, VG_VIS_UNKNOWN_UUID, ""},
    {MIGHOST, "MIG-1111,GPU-n0", NULL, "0/0,1", -1, VG_VIS_OK, NULL},
    /* found by fuzz_visible: a mixed-form index naming the MIG GPU is its first MIG device,
     * so the suggestion must not name that device twice */
    {MIGHOST, "MIG-11,000", "PCI_BUS_ID", "0/0", 1, VG_VIS_MIXED,
     "MIG-11110000-0000-4000-8000-000000000000"},
};

static void devices_str(const struct vg_visible *v, char *out, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < v->ndevices && off < n; i++) {
        int w = v->devices[i].mig >= 0
                    ? snprintf(out + off, n - off, "%s%zu/%d", i ? "," : "", v->devices[i].gpu,
                               v->devices[i].mig)
                    : snprintf(out + off, n - off, "%s%zu", i ? "," : "", v->devices[i].gpu);
        if (w < 0)
            return;
        off += (size_t)w;
    }
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        struct vg_gpu_list l;
        build(r->host, &l);
        struct vg_visible v;
        struct vg_err err = VG_ERR_INIT;
        assert_int_equal(vg_visible_resolve(r->value, r->order, &l, &v, &err), 0);
        char got[256];
        devices_str(&v, got, sizeof(got));
        print_message("row %zu: '%s' -> '%s'\n", i, r->value ? r->value : "(unset)", got);
        assert_string_equal(got, r->devices);
        assert_int_equal(v.set, r->value != NULL);
        if (r->cut < 0) {
            assert_int_equal(v.cut, v.nentries);
        } else {
            assert_int_equal(v.cut, (size_t)r->cut);
            assert_int_equal(v.entries[v.cut].problem, r->problem);
            for (size_t k = v.cut + 1; k < v.nentries; k++)
                assert_int_equal(v.entries[k].problem, VG_VIS_AFTER_CUT);
        }
        if (r->problem == VG_VIS_EXTRA_MIG) {
            bool found = false;
            for (size_t k = 0; k < v.nentries; k++)
                found |= v.entries[k].problem == VG_VIS_EXTRA_MIG;
            assert_true(found);
        }
        if (r->corrected)
            assert_string_equal(v.corrected ? v.corrected : "(none)", r->corrected);
        else
            assert_null(v.corrected);
        vg_visible_release(&v);
        vg_gpu_list_release(&l);
    }
}

/* A suggested value leaves out a device whose UUID is not well-formed, as one whose UUID is
 * unknown: "GPU-a,1,b" pasted into CUDA_VISIBLE_DEVICES would be three entries. */
static void test_corrected_skips_bad_uuid(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    build(HOMO, &l);
    free(l.gpus[2].uuid);
    l.gpus[2].uuid = fx_strdup("GPU-a,1,b");
    struct vg_visible v;
    assert_int_equal(vg_visible_resolve("0,9,2", NULL, &l, &v, NULL), 0);
    assert_int_equal(v.cut, 1);
    assert_string_equal(v.corrected, UA);
    vg_visible_release(&v);
    vg_gpu_list_release(&l);
}

static void test_order_flags(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    build(HETERO, &l);
    struct vg_visible v;
    assert_int_equal(vg_visible_resolve(NULL, NULL, &l, &v, NULL), 0);
    assert_true(v.order_differs);
    assert_false(v.order_invalid);
    vg_visible_release(&v);
    assert_int_equal(vg_visible_resolve(NULL, "SLOWEST", &l, &v, NULL), 0);
    assert_true(v.order_invalid);
    assert_int_equal(v.order, VG_ORDER_FASTEST_FIRST);
    vg_visible_release(&v);
    vg_gpu_list_release(&l);

    build(HOMO, &l);
    assert_int_equal(vg_visible_resolve(NULL, NULL, &l, &v, NULL), 0);
    assert_false(v.order_differs); /* same model everywhere: CUDA and nvidia-smi agree */
    vg_visible_release(&v);
    vg_gpu_list_release(&l);
}

static void test_long_value(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    build(HOMO, &l);
    size_t n = 1 << 20;
    char *big = malloc(n + 1);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (i % 2) ? ',' : '0' + (char)((i / 2) % 4);
    big[n] = '\0';
    struct vg_visible v;
    assert_int_equal(vg_visible_resolve(big, NULL, &l, &v, NULL), 0);
    assert_int_equal(v.ndevices, 4);
    assert_int_equal(v.cut, 4); /* the fifth entry repeats GPU 0 */
    assert_int_equal(v.entries[4].problem, VG_VIS_DUPLICATE);
    vg_visible_release(&v);
    memset(big, 'x', n);
    assert_int_equal(vg_visible_resolve(big, NULL, &l, &v, NULL), 0);
    assert_int_equal(v.ndevices, 0);
    vg_visible_release(&v);
    free(big);
    vg_gpu_list_release(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_corrected_skips_bad_uuid),
        cmocka_unit_test(test_order_flags),
        cmocka_unit_test(test_long_value),
    };
    return cmocka_run_group_tests_name("visible", tests, NULL, NULL);
}
