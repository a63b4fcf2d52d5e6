/*
 * Unit tests for act/bgstop.c: top's stop in the background. The plan from a hand-made frame
 * (k picks every entry, K those its finding names), and the stop on its own thread through
 * scripted looks (tests/unit/fixture.h): a real child stopped and its GPU freed, found again
 * by UUID at another index; a first look that fails; a plan with nothing to signal counted as
 * such. The result is data: no thread prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kids.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fixture.h"
#include "act/bgstop.h"
#include "util/clock.h"

#define GiB (1ull << 30)
#define UUID_A "GPU-11111111-2222-3333-4444-555555555555"
#define UUID_B "GPU-99999999-2222-3333-4444-555555555555"

/* A host: GPU UUID_A at index `at` (another GPU before it when at is 1), holder pid (0: none)
 * with 4 GiB and start time st. */
static struct vg_snapshot *host(unsigned at, pid_t pid, uint64_t st, uint64_t used)
{
    struct vg_gpu_list l = {0};
    struct vg_proc_table t = {0};
    if (at == 1)
        fx_gpu(&l, UUID_B, "NVIDIA H100", 1, 80 * GiB, 0, 0);
    struct vg_gpu *g = fx_gpu(&l, UUID_A, "NVIDIA H100", 0, 80 * GiB, used, 0);
    if (pid) {
        fx_gproc(g, (uint32_t)pid, 4 * GiB, 1);
        struct vg_proc *p = fx_proc(&t, pid, "python", "python train.py", 'S');
        p->start_ticks = st;
        p->uid = getuid();
        fx_fd(p, 0);
    }
    return fx_assemble(&l, &t);
}

/* ---- the scripted looks ---- */

struct script {
    pid_t pid;
    uint64_t st;
    unsigned looks;
    bool fail;
};

/* First look: the holder still there (at index 1 now); then gone, its memory back. */
static int look(void *ctx, struct vg_snapshot **snap)
{
    struct script *sc = ctx;
    if (sc->fail)
        return 1;
    sc->looks++;
    *snap = sc->looks == 1 ? host(1, sc->pid, sc->st, 5 * GiB) : host(1, 0, 0, 0);
    return 0;
}

static int lists(void *arg, pid_t pid)
{
    (void)arg;
    (void)pid;
    return 1;
}

static volatile int dones;

static void done(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&dones, 1, __ATOMIC_SEQ_CST);
}

/* A plan of one entry, pid on GPU 0 of the frame, to be signalled. */
static void one_entry(struct vg_plan *plan, bool **chosen, pid_t pid, uint64_t st, bool signal)
{
    vg_plan_init(plan);
    plan->v = calloc(1, sizeof(*plan->v));
    plan->scope = calloc(1, sizeof(*plan->scope));
    *chosen = calloc(1, sizeof(bool));
    assert_true(plan->v && plan->scope && *chosen);
    plan->n = 1;
    plan->nscope = 1;
    plan->scope[0] = 0;
    struct vg_plan_entry *e = &plan->v[0];
    e->id = (struct vg_kill_identity){.pid = pid, .start_ticks = st, .uid = getuid(), .nvml = true};
    e->signal = signal;
    e->refusal = signal ? VG_KILL_ALLOWED : VG_KILL_ZOMBIE;
    e->state = 'S';
    plan->nsignal = signal;
    plan->nrefused = !signal;
    (*chosen)[0] = true;
}

static void opts_init(struct vg_bgstop_opts *o, struct script *sc, int proc_fd)
{
    *o = (struct vg_bgstop_opts){
        .proc_root_fd = proc_fd,
        .who = {.self = getpid(), .ruid = getuid()},
        .grace_ms = 200,
        .kill_wait_ms = 2000,
        .settle_ms = 1000,
        .poll_ms = 20,
        .look = look,
        .look_ctx = sc,
        .nvml = lists,
        .done = done,
    };
}

/* Wait (bounded) for the thread's result. */
static struct vg_bgstop_result *await(struct vg_bgstop *s)
{
    for (int i = 0; i < 500; i++) {
        struct vg_bgstop_result *r = vg_bgstop_take(s);
        if (r)
            return r;
        vg_clock_sleep_until(vg_clock_ms() + 20);
    }
    fail_msg("the stop did not finish");
    return NULL;
}

static void test_stop_freed(void **state)
{
    (void)state;
    if (!kid_need_pidfd())
        skip();
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    struct script sc = {.pid = pid, .st = st};
    int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(proc_fd >= 0);
    struct vg_bgstop_opts o;
    opts_init(&o, &sc, proc_fd);
    struct vg_bgstop s;
    assert_int_equal(vg_bgstop_init(&s, &o), 0);
    assert_false(vg_bgstop_busy(&s));
    assert_null(vg_bgstop_take(&s));

    struct vg_snapshot *frame = host(0, pid, st, 5 * GiB);
    struct vg_plan plan;
    bool *chosen;
    one_entry(&plan, &chosen, pid, st, true);
    assert_int_equal(vg_bgstop_count(&plan, chosen), 1);
    dones = 0;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_bgstop_start(&s, frame, &plan, chosen, &err), 0);
    assert_int_equal(plan.n, 0); /* taken over */
    vg_snap_free(frame);         /* the thread reads its own copies only */
    struct vg_bgstop_result *r = await(&s);
    assert_false(vg_bgstop_busy(&s));
    assert_int_equal(__atomic_load_n(&dones, __ATOMIC_SEQ_CST), 1);
    assert_int_equal(r->error, 0);
    assert_int_equal(r->plan.n, 1);
    assert_int_equal(r->ntargets, 1);
    assert_ptr_equal(r->targets[0].id, &r->plan.v[0].id);
    assert_int_equal(r->res.nkills, 1);
    assert_int_equal(r->res.kills[0].outcome, VG_KILL_TERMINATED);
    const struct vg_settle_gpu *g = vg_settle_gpu_of(&r->res, 0);
    assert_non_null(g);
    assert_int_equal(g->index, 1); /* where the first look has UUID_A */
    assert_string_equal(g->uuid, UUID_A);
    assert_int_equal(g->state, VG_SETTLE_FREED);
    assert_null(vg_bgstop_take(&s)); /* once */
    vg_bgstop_result_free(r);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    nkids = 0; /* reaped here: nothing for the teardown to kill */
    vg_bgstop_release(&s);
    vg_err_release(&err);
    close(proc_fd);
}

/* The first look fails: nothing is signalled, and the result says why. */
static void test_look_fails(void **state)
{
    (void)state;
    struct script sc = {.fail = true};
    struct vg_bgstop_opts o;
    opts_init(&o, &sc, -1);
    struct vg_bgstop s;
    assert_int_equal(vg_bgstop_init(&s, &o), 0);
    struct vg_snapshot *frame = host(0, 4242, 1, 5 * GiB);
    struct vg_plan plan;
    bool *chosen;
    one_entry(&plan, &chosen, 4242, 1, true);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_bgstop_start(&s, frame, &plan, chosen, &err), 0);
    vg_snap_free(frame);
    struct vg_bgstop_result *r = await(&s);
    assert_int_not_equal(r->error, 0);
    assert_string_equal(vg_err_msg(&r->err), "cannot look at the host to stop anything");
    assert_int_equal(r->res.nkills, 0);
    vg_bgstop_result_free(r);
    vg_bgstop_release(&s);
}

/* Only chosen entries that are to be signalled count. */
static void test_count(void **state)
{
    (void)state;
    struct vg_plan plan;
    bool *chosen;
    one_entry(&plan, &chosen, 4242, 1, false);
    assert_int_equal(vg_bgstop_count(&plan, chosen), 0);
    plan.v[0].signal = true;
    assert_int_equal(vg_bgstop_count(&plan, chosen), 1);
    chosen[0] = false;
    assert_int_equal(vg_bgstop_count(&plan, chosen), 0);
    assert_int_equal(vg_bgstop_count(&plan, NULL), 0);
    vg_plan_release(&plan);
    free(chosen);
}

/* k picks every entry of its PID's plan; K with no finding picks none. */
static void test_plan(void **state)
{
    (void)state;
    struct vg_snapshot *frame = host(0, 4242, 1, 5 * GiB);
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_kill_ctx who = {.self = getpid(), .ruid = getuid()};
    struct vg_plan plan;
    vg_plan_init(&plan);
    bool *chosen = NULL;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_bgstop_plan(frame, &fs, 4242, NULL, who, &plan, &chosen, &err), 0);
    assert_non_null(chosen);
    for (size_t i = 0; i < plan.n; i++)
        assert_true(chosen[i]);
    vg_plan_release(&plan);
    free(chosen);
    assert_int_equal(vg_bgstop_plan(frame, &fs, 0, NULL, who, &plan, &chosen, &err), 0);
    for (size_t i = 0; i < plan.n; i++)
        assert_false(chosen[i]);
    vg_plan_release(&plan);
    free(chosen);
    vg_findings_release(&fs);
    vg_err_release(&err);
    vg_snap_free(frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stop_freed, kid_teardown),
        cmocka_unit_test(test_look_fails),
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_plan),
    };
    return cmocka_run_group_tests_name("bgstop", tests, NULL, NULL);
}
