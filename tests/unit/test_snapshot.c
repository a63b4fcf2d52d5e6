/*
 * Unit tests for the snapshot join (src/model/snapshot.c): NVML and fd holders merged per GPU
 * through the minor number, fd-only and NVML-only holders kept and marked, MIG attribution,
 * bogus PIDs, and the per-GPU unexplained memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "fixture.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static const struct vg_holding *find(const struct vg_snapshot *s, size_t gpu, int mig, pid_t pid)
{
    for (size_t i = 0; i < s->nholdings; i++)
        if (s->holdings[i].gpu == gpu && s->holdings[i].mig == mig && s->holdings[i].pid == pid)
            return &s->holdings[i];
    return NULL;
}

static void test_join_minor_not_index(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    /* GPU 0 is /dev/nvidia3 and GPU 1 is /dev/nvidia1: never assume minor == index. */
    fx_gpu(&l, "GPU-aaaaaaaa-0000", "A", 3, 80 * GiB, 3 * GiB, 512 * MiB);
    fx_gpu(&l, "GPU-bbbbbbbb-0000", "B", 1, 80 * GiB, 1 * GiB, 512 * MiB);
    struct vg_gpu *g0 = &l.gpus[0], *g1 = &l.gpus[1]; /* after the last realloc */
    fx_gproc(g0, 100, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 200, UINT64_MAX, VG_PTYPE_COMPUTE | VG_PTYPE_GRAPHICS);
    fx_gproc(g1, 999999, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_fd(fx_proc(&t, 100, "python", "python train.py", 'S'), 3);
    fx_proc(&t, 200, "Xorg", "/usr/lib/xorg/Xorg", 'S');
    fx_fd(fx_proc(&t, 300, "pt_data_worker", "python train.py", 'S'), 3);
    fx_fd(fx_proc(&t, 400, "stray", "stray", 'S'), 7);
    struct vg_snapshot *s = fx_assemble(&l, &t);

    assert_int_equal(s->nholdings, 5);
    const struct vg_holding *h = find(s, 0, -1, 100);
    assert_non_null(h);
    assert_int_equal(h->seen, VG_SEEN_NVML | VG_SEEN_FD);
    assert_true(h->used_known && h->used_bytes == 1 * GiB);
    assert_non_null(h->proc);

    h = find(s, 0, -1, 200);
    assert_non_null(h);
    assert_int_equal(h->seen, VG_SEEN_NVML);
    assert_false(h->used_known);
    assert_int_equal(h->types, VG_PTYPE_COMPUTE | VG_PTYPE_GRAPHICS);

    h = find(s, 0, -1, 300);
    assert_non_null(h);
    assert_int_equal(h->seen, VG_SEEN_FD);
    assert_false(h->used_known);

    h = find(s, 1, -1, 999999);
    assert_non_null(h);
    assert_null(h->proc); /* NVML-only, not in this /proc */

    h = find(s, VG_SNAP_NO_GPU, -1, 400);
    assert_non_null(h);
    assert_int_equal(h->minor, 7);

    /* Holdings are grouped by GPU, NO_GPU last. */
    size_t first, count;
    vg_snap_gpu_holdings(s, 0, &first, &count);
    assert_int_equal(first, 0);
    assert_int_equal(count, 3);
    vg_snap_gpu_holdings(s, VG_SNAP_NO_GPU, &first, &count);
    assert_int_equal(first, 4);
    assert_int_equal(count, 1);

    /* 3 GiB used, 1 GiB attributed, one holder unknown: up to 2 GiB unexplained. */
    assert_true(s->per_gpu[0].unexplained_known);
    assert_true(s->per_gpu[0].unexplained_bytes == 2 * GiB);
    assert_true(s->per_gpu[0].unexplained_upper_bound);
    assert_false(s->per_gpu[0].unexplained_has_reserved);
    assert_int_equal(s->per_gpu[0].nholders, 3);
    assert_true(s->per_gpu[1].unexplained_bytes == 0);
    assert_false(s->per_gpu[1].unexplained_upper_bound);
    vg_snap_free(s);
}

static void test_mig_attribution(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_gpu *g = fx_gpu(&l, "GPU-cccccccc", "A100", 0, 80 * GiB, 6 * GiB, 0);
    g->known &= ~(unsigned)VG_GPU_K_RESERVED;
    fx_mig(g, "MIG-11111111", 10 * GiB);
    fx_mig(g, "MIG-22222222", 10 * GiB);
    struct vg_gpu *m0 = &g->mig[0];
    fx_gproc(m0, 500, 4 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g, 500, UINT64_MAX, VG_PTYPE_COMPUTE); /* the parent lists it too */
    fx_gproc(g, 600, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_fd(fx_proc(&t, 500, "python", "python a.py", 'R'), 0);
    struct vg_snapshot *s = fx_assemble(&l, &t);

    assert_int_equal(s->nholdings, 2);
    const struct vg_holding *h = find(s, 0, 0, 500);
    assert_non_null(h);
    assert_int_equal(h->seen, VG_SEEN_NVML | VG_SEEN_FD);
    assert_true(h->used_bytes == 4 * GiB);
    assert_null(find(s, 0, -1, 500));
    assert_non_null(find(s, 0, -1, 600));
    /* v1-style memory (no reservation known): unexplained includes the reservation. */
    assert_true(s->per_gpu[0].unexplained_bytes == 1 * GiB);
    assert_true(s->per_gpu[0].unexplained_has_reserved);
    vg_snap_free(s);
}

static void test_bogus_and_unknown(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_gpu *g = fx_gpu(&l, "GPU-dddddddd", "H100", 0, 80 * GiB, 1 * GiB, 0);
    fx_gproc(g, 0, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g, UINT32_MAX, UINT64_MAX, VG_PTYPE_COMPUTE);
    struct vg_gpu *g2 = fx_gpu(&l, "GPU-eeeeeeee", "H100", 1, 80 * GiB, 5 * GiB, 0);
    g2->known &= ~(unsigned)VG_GPU_K_PROCS; /* process lists failed */
    fx_proc(&t, 1, "init", "/sbin/init", 'S');
    struct vg_snapshot *s = fx_assemble(&l, &t);

    const struct vg_holding *h = find(s, 0, -1, 0);
    assert_non_null(h);
    assert_true(h->bogus_pid);
    assert_null(h->proc); /* PID 0 is not the process in /proc/0, nor anything else */
    h = find(s, 0, -1, (pid_t)UINT32_MAX);
    assert_non_null(h);
    assert_true(h->bogus_pid);
    assert_null(h->proc);
    /* No process list: nothing can be called unexplained. */
    assert_false(s->per_gpu[1].unexplained_known);
    vg_snap_free(s);
}

static void test_no_driver(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_proc *p = fx_proc(&t, 42, "python", "python x.py", 'S');
    fx_fd(p, 0);
    fx_fd(p, 1);
    struct vg_snapshot *s = vg_snap_new();
    assert_non_null(s);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_assemble(s, &l, false, &t, &err), 0);
    assert_int_equal(s->nholdings, 2);
    assert_int_equal(s->holdings[0].gpu, VG_SNAP_NO_GPU);
    assert_int_equal(s->holdings[0].minor, 0);
    assert_int_equal(s->holdings[1].minor, 1);
    assert_null(s->per_gpu);
    vg_snap_free(s);
}

/* Two holders of 2^63 bytes on one GPU: held_by_holders saturates, it does not wrap to 0. */
static void test_sums_saturate(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    struct vg_gpu *g = fx_gpu(&l, "GPU-aaaaaaaa-0000", "A", 0, 80 * GiB, 80 * GiB, 0);
    fx_gproc(g, 4000001, 1ull << 63, VG_PTYPE_COMPUTE);
    fx_gproc(g, 4000002, 1ull << 63, VG_PTYPE_COMPUTE);
    struct vg_snapshot *s = fx_assemble(&l, &t);
    assert_int_equal(s->per_gpu[0].held_bytes, UINT64_MAX);
    assert_true(s->per_gpu[0].unexplained_known);
    assert_int_equal(s->per_gpu[0].unexplained_bytes, 0);
    vg_snap_free(s);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The join at a scale a lying driver or a hostile user can reach: 256 GPUs (the most the client
 * reads) with 1000 driver-listed PIDs each, and 100,000 processes holding device nodes (half of
 * them the driver's). A join that compared every descriptor with every holding would make
 * 2.5e10 comparisons (minutes); the indexed one takes well under a second. The bound below is
 * 30 times what the sanitizer build needs on a loaded 2-core machine, so it tests the shape,
 * not the speed.
 */
static void test_join_at_scale(void **state)
{
    (void)state;
    enum { NGPU = 256, PER_GPU = 1000, NPROC = 100000 };
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    l.gpus = calloc(NGPU, sizeof(*l.gpus));
    assert_non_null(l.gpus);
    l.ngpus = NGPU;
    for (unsigned gi = 0; gi < NGPU; gi++) {
        struct vg_gpu *g = &l.gpus[gi];
        g->index = gi;
        g->minor = NGPU - 1 - gi; /* never the index */
        g->mem_total = 80 * GiB;
        g->mem_used = 40 * GiB;
        g->known = VG_GPU_K_MINOR | VG_GPU_K_MEM | VG_GPU_K_PROCS;
        g->procs = calloc(PER_GPU, sizeof(*g->procs));
        assert_non_null(g->procs);
        g->nprocs = PER_GPU;
        for (unsigned k = 0; k < PER_GPU; k++) {
            /* PIDs 1..NPROC/2 are the driver's (and in /proc), spread over the GPUs in order */
            g->procs[k].pid = 1 + (gi * PER_GPU + k) % (NPROC / 2);
            g->procs[k].types = VG_PTYPE_COMPUTE;
            g->procs[k].used_known = true;
            g->procs[k].used_bytes = 1ull << 62; /* sums saturate on the way */
        }
        for (unsigned k = 1; k < PER_GPU; k++) /* sorted by pid, as the client keeps it */
            assert_true(g->procs[k - 1].pid < g->procs[k].pid);
    }
    t.procs = calloc(NPROC, sizeof(*t.procs));
    assert_non_null(t.procs);
    for (unsigned i = 0; i < NPROC; i++) {
        struct vg_proc *p = &t.procs[t.n++];
        p->pid = (pid_t)(i + 1);
        p->known = VG_PROC_K_STAT | VG_PROC_K_FDS;
        p->state = 'S';
        p->dev_minors = calloc(1, sizeof(*p->dev_minors));
        assert_non_null(p->dev_minors);
        /* the driver's processes hold their GPU's node; the others one node each */
        unsigned gi = i < NPROC / 2 ? (i / PER_GPU) % NGPU : i % NGPU;
        p->dev_minors[0] = NGPU - 1 - gi;
        p->ndev_minors = 1;
        p->dev_fd_count = 1;
    }
    t.n_scanned = t.n;
    double t0 = now_s();
    struct vg_snapshot *s = fx_assemble(&l, &t);
    size_t total = 0;
    for (size_t gi = 0; gi < NGPU; gi++) {
        size_t first, count;
        vg_snap_gpu_holdings(s, gi, &first, &count);
        total += count;
        assert_int_equal(s->per_gpu[gi].held_bytes, UINT64_MAX);
    }
    size_t unread = vg_snap_unread_envs(s);
    double took = now_s() - t0;
    fprintf(stderr, "# join: %zu holdings of %d GPUs and %d processes in %.3f s\n", s->nholdings,
            NGPU, NPROC, took);
    assert_int_equal(total, s->nholdings);
    assert_int_equal(unread, NPROC); /* no environment was read for any of them */
    assert_true(took < 30.0);
    /* every driver entry whose process holds its GPU's node is seen by both */
    size_t both = 0;
    for (size_t i = 0; i < s->nholdings; i++)
        both += s->holdings[i].seen == (VG_SEEN_NVML | VG_SEEN_FD);
    assert_true(both >= NPROC / 2);
    vg_snap_free(s);
}

/* The one lookup of a GPU a person names: index, UUID, unique UUID prefix; and by exact UUID. */
static void test_gpu_lookup(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    fx_gpu(&l, "GPU-ab12-0000", "T4", 0, GiB, 0, 0);
    fx_gpu(&l, "GPU-ab34-0000", "T4", 1, GiB, 0, 0);
    fx_gpu(&l, "GPU-c200-0000", "T4", 3, GiB, 0, 0);
    size_t pos = 99;
    assert_int_equal(vg_gpu_list_lookup(&l, "2", &pos), VG_GPU_LOOKUP_OK); /* indices 0, 1, 2 */
    assert_int_equal(pos, 2);
    assert_int_equal(vg_gpu_list_lookup(&l, "3", &pos), VG_GPU_LOOKUP_NO_INDEX);
    assert_int_equal(vg_gpu_list_lookup(&l, "GPU-ab3", &pos), VG_GPU_LOOKUP_OK);
    assert_int_equal(pos, 1);
    assert_int_equal(vg_gpu_list_lookup(&l, "GPU-ab", &pos), VG_GPU_LOOKUP_SEVERAL);
    assert_int_equal(vg_gpu_list_lookup(&l, "GPU-ff", &pos), VG_GPU_LOOKUP_NO_UUID);
    assert_int_equal(vg_gpu_list_lookup(&l, "", &pos), VG_GPU_LOOKUP_NO_UUID);
    assert_true(vg_gpu_list_by_uuid(&l, "GPU-c200-0000", &pos));
    assert_int_equal(pos, 2);
    assert_false(vg_gpu_list_by_uuid(&l, "GPU-c200", &pos)); /* exact only */
    assert_false(vg_gpu_list_by_uuid(&l, NULL, &pos));
    vg_gpu_list_release(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_minor_not_index), cmocka_unit_test(test_mig_attribution),
        cmocka_unit_test(test_bogus_and_unknown),    cmocka_unit_test(test_no_driver),
        cmocka_unit_test(test_sums_saturate),        cmocka_unit_test(test_join_at_scale),
        cmocka_unit_test(test_gpu_lookup),
    };
    return cmocka_run_group_tests_name("snapshot", tests, NULL, NULL);
}
