/*
 * Unit tests for act/settle.c: the one stop-and-settle procedure, through its look callback
 * with scripted snapshots (tests/unit/fixture.h). The targets are real child processes where a
 * signal must reach something (freed, held by another, timeout); the others are judged from
 * the snapshots alone (D state, wedged, a refusal, a target that had vanished).
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
#include "act/settle.h"
#include "util/clock.h"

#define GiB (1ull << 30)

/* One scripted look: what GPU 0 shows. */
struct step {
    uint64_t used;  /* bytes used on the GPU */
    pid_t holder;   /* the driver lists it (0: none) with 4 GiB */
    bool in_proc;   /* /proc shows it */
    uint64_t start; /* its start time there */
    char state;     /* its state there */
    pid_t other;    /* a second holder, another's (0: none), 1 GiB */
    bool lost;      /* the GPU fell off the bus */
    bool no_driver; /* the driver does not answer */
};

struct script {
    const struct step *steps;
    size_t n, at;
    unsigned looks;
};

static struct vg_snapshot *mk(const struct step *s)
{
    struct vg_gpu_list l = {0};
    struct vg_proc_table t = {0};
    struct vg_gpu *g = fx_gpu(&l, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA H100", 0,
                              80 * GiB, s->used, 0);
    g->lost = s->lost;
    pid_t a = s->holder, b = s->other;
    if (a)
        fx_gproc(g, (uint32_t)a, 4 * GiB, 1);
    if (b)
        fx_gproc(g, (uint32_t)b, 1 * GiB, 1);
    /* the table in pid order */
    pid_t lo = a && b ? (a < b ? a : b) : a ? a : b, hi = a && b ? (a < b ? b : a) : 0;
    pid_t order[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        pid_t pid = order[i];
        if (!pid || (pid == a && !s->in_proc))
            continue;
        struct vg_proc *p =
            fx_proc(&t, pid, "python", "python train.py", pid == a ? s->state : 'S');
        if (pid == a)
            p->start_ticks = s->start;
        else
            p->uid = 1001;
        fx_fd(p, 0);
    }
    struct vg_snapshot *snap = fx_assemble(&l, &t);
    if (s->no_driver) {
        snap->driver_ok = false;
        snap->driver_error = fx_strdup("the driver did not answer");
    }
    return snap;
}

static int look(void *ctx, struct vg_snapshot **snap)
{
    struct script *sc = ctx;
    sc->looks++;
    const struct step *s = &sc->steps[sc->at < sc->n ? sc->at : sc->n - 1];
    if (sc->at < sc->n)
        sc->at++;
    *snap = mk(s);
    return 0;
}

/* The driver always lists the target: the re-check's question. */
static int lists(void *arg, pid_t pid)
{
    (void)arg;
    (void)pid;
    return 1;
}

/* ---- children ---- */

/* ---- the run ---- */

struct run {
    struct vg_kill_identity id;
    struct vg_settle_target target;
    struct vg_settle_want want;
    struct vg_settle_req req;
    struct vg_settle_result res;
    struct script sc;
    int proc_fd;
};

static void run_init(struct run *r, pid_t pid, uint64_t start, bool signal,
                     enum vg_kill_refusal refusal)
{
    memset(r, 0, sizeof(*r));
    r->id =
        (struct vg_kill_identity){.pid = pid, .start_ticks = start, .uid = getuid(), .nvml = true};
    r->target = (struct vg_settle_target){.id = &r->id, .signal = signal, .refusal = refusal};
    r->want = (struct vg_settle_want){.gpu = 0, .ref = 7};
    r->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(r->proc_fd >= 0);
    r->req = (struct vg_settle_req){
        .targets = &r->target,
        .ntargets = 1,
        .gpus = &r->want,
        .ngpus = 1,
        .grace_ms = 200,
        .kill_wait_ms = 2000,
        .timeout_ms = 1000,
        .poll_ms = 20,
        .tolerance = 256ull << 20,
        .stop = true,
        .proc_root_fd = r->proc_fd,
        .who = {.self = getpid(), .ruid = getuid()},
        .nvml = lists,
    };
    vg_settle_result_init(&r->res);
}

/* Run the steps; the first is the caller's look. */
static void run_go(struct run *r, const struct step *steps, size_t n)
{
    struct vg_snapshot *first = mk(&steps[0]);
    r->sc = (struct script){steps + 1, n - 1, 0, 0};
    if (n == 1)
        r->sc = (struct script){steps, 1, 0, 0};
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_settle_run(&r->req, first, look, &r->sc, &r->res, &err), 0);
    vg_err_release(&err);
    vg_snap_free(first);
}

static void run_release(struct run *r)
{
    vg_settle_result_release(&r->res);
    close(r->proc_fd);
}

static const struct vg_settle_gpu *gpu0(const struct run *r)
{
    const struct vg_settle_gpu *g = vg_settle_gpu_of(&r->res, 7);
    assert_non_null(g);
    return g;
}

static void test_freed(void **state)
{
    (void)state;
    if (!kid_need_pidfd())
        skip();
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    struct run r;
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    const struct step steps[] = {
        {.used = 5 * GiB, .holder = pid, .in_proc = true, .start = st, .state = 'S'},
        {.used = 0},
    };
    run_go(&r, steps, 2);
    const struct vg_settle_gpu *g = gpu0(&r);
    assert_int_equal(g->state, VG_SETTLE_FREED);
    assert_string_equal(g->why, "stopped");
    assert_true(g->before_known);
    assert_int_equal(g->before, 5 * GiB);
    assert_int_equal(g->used, 0);
    assert_false(g->reset_needed);
    assert_int_equal(g->nstopped, 1);
    assert_int_equal(r.res.nkills, 1);
    assert_int_equal(r.res.kills[0].outcome, VG_KILL_TERMINATED);
    assert_int_equal(r.res.nsignalled, 1);
    assert_true(g->nholders == 1 && g->holders[0].signalled && !g->holders[0].present);
    assert_int_equal(g->holders[0].owner, VG_SETTLE_TARGET);
    assert_non_null(r.res.last);
    assert_false(r.res.timed_out);
    run_release(&r);
}

/* The target gone, another's process still on the GPU: held by another, never signalled. */
static void test_held_by_other(void **state)
{
    (void)state;
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    struct run r;
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    const struct step steps[] = {
        {.used = 6 * GiB,
         .holder = pid,
         .in_proc = true,
         .start = st,
         .state = 'S',
         .other = 4000000},
        {.used = 1 * GiB, .other = 4000000},
    };
    run_go(&r, steps, 2);
    const struct vg_settle_gpu *g = gpu0(&r);
    assert_int_equal(g->state, VG_SETTLE_HELD);
    assert_string_equal(g->why, "holder");
    assert_int_equal(r.res.nkills, 1); /* only the target */
    bool seen = false;
    for (size_t i = 0; i < g->nholders; i++)
        if (g->holders[i].pid == 4000000) {
            seen = true;
            assert_int_equal(g->holders[i].owner, VG_SETTLE_OTHER);
            assert_false(g->holders[i].signalled);
            assert_true(g->holders[i].present);
        }
    assert_true(seen);
    run_release(&r);
}

/* A target in D state: never signalled, wedged, and only a reset frees it; the wait runs to
 * the timeout, since it may come out of the driver. */
static void test_dstate(void **state)
{
    (void)state;
    struct run r;
    run_init(&r, 4100000, 77, false, VG_KILL_DSTATE);
    r.req.timeout_ms = 100;
    const struct step steps[] = {
        {.used = 5 * GiB, .holder = 4100000, .in_proc = true, .start = 77, .state = 'D'},
    };
    run_go(&r, steps, 1);
    const struct vg_settle_gpu *g = gpu0(&r);
    assert_int_equal(g->state, VG_SETTLE_WEDGED);
    assert_string_equal(g->why, "d-state");
    assert_true(g->reset_needed);
    assert_true(r.res.timed_out);
    assert_true(r.res.looks > 1);
    assert_int_equal(r.res.kills[0].outcome, VG_KILL_REFUSED);
    assert_int_equal(r.res.kills[0].refusal, VG_KILL_DSTATE);
    assert_false(g->holders[0].signalled);
    assert_int_equal(g->holders[0].refusal, VG_KILL_DSTATE);
    assert_int_equal(r.res.nsignalled, 0);
    run_release(&r);
}

/* The GPU falls off the bus between looks: wedged "lost"; the driver gone: wedged "hung". */
static void test_wedged(void **state)
{
    (void)state;
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    struct run r;
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    const struct step steps[] = {
        {.used = 5 * GiB, .holder = pid, .in_proc = true, .start = st, .state = 'S'},
        {.used = 0, .lost = true},
    };
    run_go(&r, steps, 2);
    assert_int_equal(gpu0(&r)->state, VG_SETTLE_WEDGED);
    assert_string_equal(gpu0(&r)->why, "lost");
    run_release(&r);

    pid = kid_spawn(false);
    st = kid_start(pid);
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    const struct step gone[] = {
        {.used = 5 * GiB, .holder = pid, .in_proc = true, .start = st, .state = 'S'},
        {.no_driver = true},
    };
    run_go(&r, gone, 2);
    assert_int_equal(gpu0(&r)->state, VG_SETTLE_WEDGED);
    assert_string_equal(gpu0(&r)->why, "hung");
    assert_string_equal(r.res.driver_error, "the driver did not answer");
    run_release(&r);
}

/* The target is killed (it ignores SIGTERM) but the memory never comes back: stuck once the
 * timeout passes, a reset needed (nothing holds the GPU, nothing could hide a holder). */
static void test_timeout_stuck(void **state)
{
    (void)state;
    if (!kid_need_pidfd())
        skip();
    pid_t pid = kid_spawn(true);
    uint64_t st = kid_start(pid);
    struct run r;
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    r.req.timeout_ms = 400;
    const struct step steps[] = {
        {.used = 5 * GiB, .holder = pid, .in_proc = true, .start = st, .state = 'S'},
        {.used = 5 * GiB},
    };
    uint64_t t0 = vg_clock_ms();
    run_go(&r, steps, 2);
    uint64_t took = vg_clock_ms() - t0;
    const struct vg_settle_gpu *g = gpu0(&r);
    assert_int_equal(r.res.kills[0].outcome, VG_KILL_KILLED);
    assert_int_equal(g->state, VG_SETTLE_STUCK);
    assert_string_equal(g->why, "stuck");
    assert_true(r.res.timed_out);
    assert_true(g->reset_needed);
    assert_int_equal(g->settled_ms, 0);
    assert_true(took < 3000);
    run_release(&r);
}

/* A target the plan refused (another user's): never signalled, its refusal kept, and the GPU it
 * holds is held by another. */
static void test_refusal(void **state)
{
    (void)state;
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    struct run r;
    run_init(&r, pid, st, false, VG_KILL_OTHER_USER);
    const struct step steps[] = {
        {.used = 5 * GiB, .holder = pid, .in_proc = true, .start = st, .state = 'S'},
    };
    run_go(&r, steps, 1);
    const struct vg_settle_gpu *g = gpu0(&r);
    assert_int_equal(r.res.kills[0].outcome, VG_KILL_REFUSED);
    assert_int_equal(r.res.kills[0].refusal, VG_KILL_OTHER_USER);
    assert_int_equal(g->state, VG_SETTLE_HELD);
    assert_int_equal(g->holders[0].owner, VG_SETTLE_OTHER);
    assert_int_equal(r.res.nsignalled, 0);
    assert_int_equal(kill(pid, 0), 0); /* still alive */
    assert_false(r.res.timed_out);
    run_release(&r);
}

/* A target that had exited before the stop: nothing sent (gone); the driver lists its PID a
 * while longer (not released), then lets go: free, since nothing was stopped. */
static void test_vanished(void **state)
{
    (void)state;
    if (!kid_need_pidfd())
        skip();
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    nkids--;
    struct run r;
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    const struct step steps[] = {
        {.used = 4 * GiB, .holder = pid, .in_proc = false},
        {.used = 4 * GiB, .holder = pid, .in_proc = false},
        {.used = 0},
    };
    run_go(&r, steps, 3);
    const struct vg_settle_gpu *g = gpu0(&r);
    assert_int_equal(r.res.kills[0].outcome, VG_KILL_GONE);
    assert_int_equal(r.res.nsignalled, 0);
    assert_int_equal(g->state, VG_SETTLE_FREE);
    assert_true(r.res.looks >= 3);
    assert_false(r.res.timed_out);
    run_release(&r);

    /* and when the driver never lets go: not released at the timeout */
    run_init(&r, pid, st, true, VG_KILL_ALLOWED);
    r.req.timeout_ms = 150;
    const struct step stays[] = {
        {.used = 4 * GiB, .holder = pid, .in_proc = false},
    };
    run_go(&r, stays, 1);
    assert_int_equal(gpu0(&r)->state, VG_SETTLE_NOT_RELEASED);
    assert_true(r.res.timed_out);
    run_release(&r);
}

/* Only looking (stop false): one look, nothing signalled; a GPU the caller could not find is
 * missing. */
static void test_look_only(void **state)
{
    (void)state;
    struct run r;
    run_init(&r, 4200000, 5, true, VG_KILL_ALLOWED);
    struct vg_settle_want wants[2] = {{.gpu = 0, .ref = 7}, {.gpu = VG_SETTLE_NO_GPU, .ref = 8}};
    r.req.gpus = wants;
    r.req.ngpus = 2;
    r.req.stop = false;
    const struct step steps[] = {{.used = 0}};
    run_go(&r, steps, 1);
    assert_int_equal(r.res.looks, 1);
    assert_int_equal(r.res.nkills, 0);
    assert_int_equal(gpu0(&r)->state, VG_SETTLE_FREE);
    const struct vg_settle_gpu *m = vg_settle_gpu_of(&r.res, 8);
    assert_non_null(m);
    assert_int_equal(m->state, VG_SETTLE_WEDGED);
    assert_string_equal(m->why, "missing");
    assert_null(r.res.last);
    run_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_freed, kid_teardown),
        cmocka_unit_test_teardown(test_held_by_other, kid_teardown),
        cmocka_unit_test(test_dstate),
        cmocka_unit_test_teardown(test_wedged, kid_teardown),
        cmocka_unit_test_teardown(test_timeout_stuck, kid_teardown),
        cmocka_unit_test_teardown(test_refusal, kid_teardown),
        cmocka_unit_test_teardown(test_vanished, kid_teardown),
        cmocka_unit_test(test_look_only),
    };
    return cmocka_run_group_tests_name("settle", tests, NULL, NULL);
}
