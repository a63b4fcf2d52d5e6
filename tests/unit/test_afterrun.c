/*
 * Unit tests for act/afterrun.c (and its words, render/run.c): run's check after the job,
 * through a scripted look callback (tests/unit/fixture.h snapshots). The job's processes are
 * stopped already, so nothing here is signalled and no real process is needed: the PIDs are
 * made up, and the cleanup's report says what became of each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "act/afterrun.h"
#include "render/run.h"

#define GiB (1ull << 30)
#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"

/* A holder in a scripted look. */
struct who {
    pid_t pid;      /* 0: none */
    bool in_proc;   /* /proc shows it (else only the driver lists it) */
    uint64_t start; /* its start time there */
    char state;
    uint64_t mem; /* what the driver charges it; 0: it holds only the device node */
};

/* One scripted look: GPU 0 and up to three holders (in pid order). */
struct step {
    uint64_t used;
    struct who w[3];
    bool lost;
};

struct script {
    const struct step *steps;
    size_t n, at;
    unsigned looks, sleeps;
    int cut_at; /* the sleep number that a "signal" cuts short (0: none) */
};

static struct vg_snapshot *mk(const struct step *s)
{
    struct vg_gpu_list l = {0};
    struct vg_proc_table t = {0};
    struct vg_gpu *g = fx_gpu(&l, UUID0, "A", 0, 80 * GiB, s->used, 0);
    g->lost = s->lost;
    for (int i = 0; i < 3; i++) {
        const struct who *w = &s->w[i];
        if (!w->pid)
            continue;
        if (w->mem)
            fx_gproc(g, (uint32_t)w->pid, w->mem, 1);
        if (!w->in_proc)
            continue;
        struct vg_proc *p = fx_proc(&t, w->pid, "python", "python train.py", w->state);
        p->start_ticks = w->start;
        fx_fd(p, 0);
    }
    return fx_assemble(&l, &t);
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

/* The wait between looks, or cut short as a signal would cut it. */
static int nap(void *ctx, unsigned ms)
{
    struct script *sc = ctx;
    sc->sleeps++;
    usleep(ms * 1000u);
    return sc->cut_at && (int)sc->sleeps >= sc->cut_at ? SIGTERM : 0;
}

/* ---- one check ---- */

struct check {
    struct vg_snapshot *before; /* the GPU before the job */
    struct vg_afterrun_gpu gpu;
    struct vg_job_procs members;
    struct vg_job_cleanup_report rep;
    struct script sc;
    struct vg_afterrun a;
    struct vg_buf words;
};

static void member(struct vg_job_procs *ps, pid_t pid, uint64_t start)
{
    struct vg_job_proc p = {.pid = pid, .start = start, .state = 'S'};
    memcpy(p.comm, "python", sizeof("python"));
    assert_int_equal(vg_job_procs_add(ps, &p), 0);
}

static void check_init(struct check *c, const struct step *before)
{
    memset(c, 0, sizeof(*c));
    c->before = mk(before);
    c->gpu = (struct vg_afterrun_gpu){.before = &c->before->gpus.gpus[0], .mig = -1};
    vg_buf_init(&c->words, 0);
}

/* Check with the steps (the first is the first look), then word it. */
static void check_go(struct check *c, const struct step *steps, size_t n, bool verbose)
{
    c->sc.steps = steps;
    c->sc.n = n;
    struct vg_afterrun_req req = {
        .gpus = &c->gpu,
        .n = 1,
        .members = &c->members,
        .rep = &c->rep,
        .who = {.self = getpid(), .ruid = getuid()},
        .timeout_ms = 200,
        .poll_ms = 10,
        .sleep = nap,
        .sleep_ctx = &c->sc,
    };
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_afterrun_check(&req, look, &c->sc, &c->a, &err), 0);
    vg_err_release(&err);
    const char *names[] = {"GPU 0 (A, " UUID0 ")"};
    vg_render_run_after(&c->words, &c->a, names, verbose, false);
    assert_int_equal(c->words.err, 0);
}

static const char *words(const struct check *c)
{
    return c->words.data ? c->words.data : "";
}

static void check_release(struct check *c)
{
    vg_afterrun_release(&c->a);
    vg_snap_free(c->before);
    vg_job_procs_release(&c->members);
    vg_job_cleanup_report_release(&c->rep);
    vg_buf_release(&c->words);
}

/* ---- the cases ---- */

/* The job's processes all gone, the memory back: nothing to say, one look. */
static void test_all_gone(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 0});
    member(&c.members, 4242, 100);
    member(&c.rep.termed, 4243, 101);
    member(&c.members, 4243, 101);
    const struct step steps[] = {{.used = 0}};
    check_go(&c, steps, 1, true);
    assert_int_equal(c.a.s.ngpus, 1);
    assert_int_equal(c.a.s.gpus[0].state, VG_SETTLE_FREE);
    assert_int_equal(c.a.s.looks, 1);
    assert_int_equal(c.a.n, 0);
    assert_int_equal(c.a.grew[0], 0);
    /* the cleanup's SIGTERM counts as a signal that reached the job */
    assert_int_equal(c.a.s.nsignalled, 1);
    assert_string_equal(words(&c), "");
    check_release(&c);
}

/* The main process exited; the driver lists it a moment longer, then lets its memory go:
 * looked at again, and nothing to say. */
static void test_driver_catches_up(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 0});
    member(&c.members, 4242, 100);
    const struct step steps[] = {
        {.used = 4 * GiB, .w = {{.pid = 4242, .mem = 4 * GiB}}},
        {.used = 4 * GiB, .w = {{.pid = 4242, .mem = 4 * GiB}}},
        {.used = 0},
    };
    check_go(&c, steps, 3, false);
    assert_int_equal(c.a.s.gpus[0].state, VG_SETTLE_FREE);
    assert_int_equal(c.a.s.looks, 3);
    assert_false(c.a.s.timed_out);
    assert_string_equal(words(&c), "");
    check_release(&c);
}

/* The driver never lets go of the exited process's memory: not released, named. */
static void test_not_released(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 0});
    member(&c.members, 4242, 100);
    const struct step steps[] = {{.used = GiB, .w = {{.pid = 4242, .mem = GiB}}}};
    check_go(&c, steps, 1, false);
    const struct vg_settle_gpu *g = &c.a.s.gpus[0];
    assert_int_equal(g->state, VG_SETTLE_NOT_RELEASED);
    assert_true(c.a.s.timed_out);
    assert_int_equal(c.a.n, 0); /* the job's own: not a note */
    assert_string_equal(words(&c), "warning: GPU 0 (A, " UUID0 "): 1 GiB still used: PID 4242, "
                                   "which held it, has exited, but the driver still lists it "
                                   "and has not released its memory yet (look again with "
                                   "'vramguard doctor')\n");
    check_release(&c);
}

/* A process of the job outlived the cleanup's SIGKILL (D state): wedged, only a reset helps. */
static void test_survivor(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 0});
    member(&c.members, 4242, 100);
    member(&c.members, 4250, 150);
    member(&c.rep.termed, 4250, 150);
    member(&c.rep.killed, 4250, 150);
    member(&c.rep.survivors, 4250, 150);
    const struct step steps[] = {
        {.used = 3 * GiB, .w = {{.pid = 4250, .in_proc = true, .start = 150, .state = 'R'}}},
    };
    check_go(&c, steps, 1, false);
    const struct vg_settle_gpu *g = &c.a.s.gpus[0];
    assert_int_equal(g->state, VG_SETTLE_WEDGED);
    assert_string_equal(g->why, "survived");
    assert_true(g->reset_needed);
    assert_true(g->nholders == 1 && g->holders[0].signalled);
    const struct vg_kill *k = vg_settle_kill_of(&c.a.s, 4250);
    assert_non_null(k);
    assert_int_equal(k->outcome, VG_KILL_FAILED);
    assert_int_equal(k->error, -ETIMEDOUT);
    assert_int_equal(vg_settle_kill_of(&c.a.s, 4242)->outcome, VG_KILL_GONE);
    assert_string_equal(words(&c), "warning: GPU 0 (A, " UUID0 "): still held by PID 4250 "
                                   "(python), which outlived SIGKILL; only a GPU reset (or a "
                                   "reboot) frees it\n");
    check_release(&c);
}

/* Others on the GPU: one held it before the job too (said only with verbose), one is new, one
 * only the driver lists; the verdict is theirs (held), and said only as notes. */
static void test_others(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 2 * GiB, .w = {{.pid = 300, .mem = 2 * GiB}}});
    member(&c.members, 4242, 100);
    const struct step steps[] = {{.used = 5 * GiB,
                                  .w = {{.pid = 300, .in_proc = true, .start = 9, .mem = 2 * GiB},
                                        {.pid = 5000, .in_proc = true, .start = 77},
                                        {.pid = 6000, .mem = 3 * GiB}}}};
    check_go(&c, steps, 1, true);
    assert_int_equal(c.a.s.gpus[0].state, VG_SETTLE_HELD);
    assert_int_equal(c.a.n, 3);
    assert_true(c.a.v[0].before && c.a.v[0].h->pid == 300);
    assert_true(!c.a.v[1].before && c.a.v[1].proc && c.a.v[1].h->pid == 5000);
    assert_true(!c.a.v[2].before && !c.a.v[2].proc && c.a.v[2].h->pid == 6000);
    assert_string_equal(words(&c),
                        "GPU 0 (A, " UUID0 "): PID 300 held it before the job too\n"
                        "note: GPU 0 (A, " UUID0 ") also has device node held open by PID 5000 "
                        "(python train.py), not started by this job\n"
                        "note: GPU 0 (A, " UUID0 ") also has 3 GiB held by PID 6000 (not visible "
                        "in this /proc), not started by this job\n");
    check_release(&c);
}

/* Memory grew during the job and no process holds it: measured against the GPU before the
 * job, waited on until the timeout (the driver may still be freeing it). */
static void test_grew(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = GiB});
    member(&c.members, 4242, 100);
    const struct step steps[] = {{.used = 10 * GiB}};
    check_go(&c, steps, 1, false);
    assert_int_equal(c.a.s.gpus[0].state, VG_SETTLE_UNEXPLAINED);
    assert_int_equal(c.a.grew[0], 9 * GiB);
    assert_true(c.a.s.looks > 1);
    assert_string_equal(words(&c), "warning: GPU 0 (A, " UUID0 ") has 9 GiB more memory in use "
                                   "than before the job, and no process holds it\n");
    check_release(&c);
}

/* A terminating signal during the wait: one more look, without waiting, and done. */
static void test_signal_cuts_short(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 0});
    member(&c.members, 4242, 100);
    c.sc.cut_at = 1;
    const struct step steps[] = {{.used = GiB, .w = {{.pid = 4242, .mem = GiB}}}};
    check_go(&c, steps, 1, false);
    assert_int_equal(c.sc.sleeps, 1);
    assert_int_equal(c.a.s.looks, 2);
    assert_true(c.a.s.timed_out);
    assert_int_equal(c.a.s.gpus[0].state, VG_SETTLE_NOT_RELEASED);
    check_release(&c);
}

/* The GPU fell off the bus after the job: wedged, said. */
static void test_lost(void **state)
{
    (void)state;
    struct check c;
    check_init(&c, &(struct step){.used = 0});
    const struct step steps[] = {{.used = 0, .lost = true}};
    check_go(&c, steps, 1, false);
    assert_int_equal(c.a.s.gpus[0].state, VG_SETTLE_WEDGED);
    assert_string_equal(words(&c),
                        "warning: GPU 0 (A, " UUID0 "): lost (fell off the bus or failed)\n");
    check_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_gone),
        cmocka_unit_test(test_driver_catches_up),
        cmocka_unit_test(test_not_released),
        cmocka_unit_test(test_survivor),
        cmocka_unit_test(test_others),
        cmocka_unit_test(test_grew),
        cmocka_unit_test(test_signal_cuts_short),
        cmocka_unit_test(test_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
