/*
 * Unit tests for act/handoff.c through its look callback with scripted snapshots
 * (tests/unit/fixture.h): whose a holder is (the pure part), the GPU lists a scheduler writes,
 * and the prolog, the epilog (a real child of the job stopped; one in D state left; another's
 * left alone) and the node check's verdicts, as the scheduler reads them.
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
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fixture.h"
#include "act/handoff.h"
#include "rules/rules.h"

#define GiB (1ull << 30)

/* What GPU 0 shows at one look: a job's holder and another's. */
struct step {
    uint64_t used;
    pid_t job;        /* a holder of job 42 (0: none), 4 GiB */
    uint64_t start;   /* its start time */
    char state;       /* its state */
    bool job_in_proc; /* /proc shows it */
    pid_t other;      /* another user's holder (0: none), 1 GiB */
};

struct script {
    const struct step *steps;
    size_t n, at;
    bool fail_after; /* looks after the steps fail */
};

static struct vg_snapshot *mk(const struct step *s)
{
    struct vg_gpu_list l = {0};
    struct vg_proc_table t = {0};
    struct vg_gpu *g = fx_gpu(&l, "GPU-aaaaaaaa-2222-3333-4444-555555555555", "NVIDIA H100", 3,
                              80 * GiB, s->used, 0);
    if (s->job)
        fx_gproc(g, (uint32_t)s->job, 4 * GiB, 1);
    if (s->other)
        fx_gproc(g, (uint32_t)s->other, 1 * GiB, 1);
    /* the job's child has a small pid; the other one is above any pid_max */
    if (s->job && s->job_in_proc) {
        struct vg_proc *p = fx_proc(&t, s->job, "python", "python train.py", s->state);
        p->start_ticks = s->start;
        p->uid = getuid();
        p->known |= VG_PROC_K_ENV;
        p->env[VG_ENV_SLURM_JOB_ID] = fx_strdup("42");
        fx_fd(p, 3);
    }
    if (s->other) {
        struct vg_proc *p = fx_proc(&t, s->other, "python", "python serve.py", 'S');
        p->uid = getuid() + 1;
        p->known |= VG_PROC_K_ENV;
        fx_fd(p, 3);
    }
    return fx_assemble(&l, &t);
}

static int look(void *ctx, struct vg_snapshot **snap)
{
    struct script *sc = ctx;
    if (sc->at >= sc->n && sc->fail_after)
        return 1;
    *snap = mk(&sc->steps[sc->at < sc->n ? sc->at : sc->n - 1]);
    if (sc->at < sc->n)
        sc->at++;
    return 0;
}

static int lists(void *arg, pid_t pid)
{
    (void)arg;
    (void)pid;
    return 1;
}

struct run {
    struct vg_handoff_sels sels;
    struct vg_handoff_req req;
    struct vg_handoff_result res;
    struct script sc;
};

static void run_init(struct run *r, enum vg_handoff_mode mode, const char *gpus)
{
    memset(r, 0, sizeof(*r));
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_handoff_sels_parse(gpus, true, &r->sels, &err), 0);
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    r->req = (struct vg_handoff_req){
        .mode = mode,
        .job = {.id = "42", .uid_known = true, .uid = getuid()},
        .sel = r->sels.v,
        .nsel = r->sels.n,
        .timeout_ms = 1000,
        .grace_ms = 200,
        .tolerance = 256ull << 20,
        .poll_ms = 20,
        .proc_root_fd = fd,
        .who = {.self = getpid(), .ruid = getuid()},
        .nvml = lists,
    };
    vg_handoff_result_init(&r->res);
}

static int run_go(struct run *r, const struct step *steps, size_t n)
{
    r->sc = (struct script){steps, n, 0, false};
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_handoff_run(&r->req, look, &r->sc, &r->res, &err);
    vg_err_release(&err);
    return rc;
}

static void run_release(struct run *r)
{
    vg_handoff_result_release(&r->res);
    vg_handoff_sels_release(&r->sels);
    close(r->req.proc_root_fd);
}

static void test_owner_of(void **state)
{
    (void)state;
    struct vg_proc p = {.pid = 500, .ppid = 1, .uid = 1000, .state = 'S'};
    p.known = VG_PROC_K_STAT | VG_PROC_K_STATUS | VG_PROC_K_ENV | VG_PROC_K_CGROUP;
    char comm[] = "python", cmd[] = "python x.py", cg[] = "/system.slice/slurmstepd/job_42/step_0";
    p.comm = comm;
    p.cmdline = cmd;
    p.cgroup = cg;
    struct vg_handoff_job job = {.id = "42", .uid_known = true, .uid = 1000};
    struct vg_kill_ctx who = {.self = 9, .ruid = 0};
    unsigned ev;
    struct vg_infra pn;
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_TARGET);
    assert_true((ev & VG_HANDOFF_EV_UID) && (ev & VG_HANDOFF_EV_CGROUP));
    p.uid = 1001; /* another user's, even in the job's cgroup */
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_OTHER);
    assert_true(ev & VG_HANDOFF_EV_OTHER_UID);
    p.uid = 1000;
    char other[] = "43";
    p.env[VG_ENV_SLURM_JOB_ID] = other; /* marked as another job's */
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_OTHER);
    p.env[VG_ENV_SLURM_JOB_ID] = NULL;
    /* Named Xorg, nothing known of what it runs: unproven, a holder like any other (the
     * classifier's own cases are test_infra's) */
    char xorg[] = "Xorg";
    p.comm = xorg;
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_TARGET);
    assert_int_equal(pn.kind, VG_INFRA_UNPROVEN);
    assert_string_equal(pn.name, "Xorg");
    /* A root-owned Xorg in root's directories, run by root outside the job's cgroup: the
     * baseline's; in the job's cgroup, or as the job's uid, never */
    char exe[] = "/usr/lib/xorg/Xorg", svc[] = "/system.slice/display-manager.service";
    p.exe = exe;
    p.exe_mode = 0100755;
    p.exe_uid = 0;
    p.exe_path_same = p.exe_dirs_trusted = true;
    p.known |= VG_PROC_K_EXE | VG_PROC_K_EXE_STAT | VG_PROC_K_EXE_PATH;
    p.uid = 0;
    p.cgroup = svc;
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_INFRA);
    assert_int_equal(pn.kind, VG_INFRA_PROVEN);
    p.cgroup = cg;
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_OTHER);
    p.cgroup = svc;
    p.uid = 1000; /* the job's uid */
    assert_int_equal(vg_handoff_owner_of(&p, &job, &who, &ev, &pn), VG_SETTLE_OTHER);
    assert_true(pn.facts & VG_INFRA_F_JOB_UID);
    assert_string_equal(vg_handoff_owner_id(VG_SETTLE_TARGET), "job");
    assert_true(vg_handoff_cgroup_names("/a/job_42/step_0", "42"));
    assert_false(vg_handoff_cgroup_names("/a/job_420/step_0", "42"));
}

static void test_sels(void **state)
{
    (void)state;
    struct vg_handoff_sels s;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_handoff_sels_parse("0,2-3,2", true, &s, &err), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.v[2].number, 3);
    vg_handoff_sels_release(&s);
    assert_int_equal(vg_handoff_sels_parse("x", true, &s, &err), -EINVAL);
    vg_err_release(&err);
    /* empty entries name nothing; each word ends at its comma */
    assert_int_equal(vg_handoff_sels_parse(",1,,GPU-ab,", false, &s, &err), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0].kind, VG_HANDOFF_SEL_INDEX);
    assert_int_equal(s.v[0].number, 1);
    assert_int_equal(s.v[1].kind, VG_HANDOFF_SEL_UUID);
    assert_string_equal(s.v[1].text, "GPU-ab");
    vg_handoff_sels_release(&s);
    assert_int_equal(vg_handoff_sels_parse(",,", true, &s, &err), -EINVAL);
    assert_string_equal(err.msg, "names no GPU");
    vg_err_release(&err);
    assert_int_equal(vg_handoff_sels_parse("", true, &s, &err), -EINVAL);
    vg_err_release(&err);
}

/* Prolog: someone holds the job's GPU: dirty, nothing touched; a GPU not there: wedged. */
static void test_prolog(void **state)
{
    (void)state;
    struct run r;
    run_init(&r, VG_HANDOFF_PROLOG, "3,9");
    const struct step steps[] = {{.used = 1 * GiB, .other = 4000000}};
    assert_int_equal(run_go(&r, steps, 1), 0);
    assert_int_equal(r.res.s.looks, 1);
    assert_int_equal(r.res.s.ngpus, 2);
    const struct vg_settle_gpu *g = &r.res.s.gpus[0];
    assert_int_equal(vg_handoff_gpu_state(g), VG_HANDOFF_DIRTY);
    assert_string_equal(g->why, "holder");
    assert_int_equal(vg_handoff_gpu_sel(&r.res, g)->number, 3);
    assert_int_equal(vg_handoff_gpu_state(&r.res.s.gpus[1]), VG_HANDOFF_WEDGED);
    assert_string_equal(r.res.s.gpus[1].why, "missing");
    assert_int_equal(r.res.state, VG_HANDOFF_WEDGED);
    assert_int_equal(r.res.s.nsignalled, 0);
    run_release(&r);
}

static void test_epilog_cleaned(void **state)
{
    (void)state;
    if (!kid_need_pidfd())
        skip();
    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    struct run r;
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    const struct step steps[] = {
        {.used = 4 * GiB, .job = pid, .start = st, .state = 'S', .job_in_proc = true},
        {.used = 0},
    };
    assert_int_equal(run_go(&r, steps, 2), 0);
    const struct vg_settle_gpu *g = &r.res.s.gpus[0];
    assert_int_equal(r.res.state, VG_HANDOFF_CLEANED);
    assert_string_equal(g->why, "stopped");
    assert_int_equal(r.res.s.nsignalled, 1);
    assert_true(g->holders[0].signalled);
    assert_int_equal(g->holders[0].outcome, VG_KILL_TERMINATED);
    assert_true(g->settled_ms > 0);
    assert_int_equal(r.res.s.looks, 3); /* the quiet period's look confirms it */
    run_release(&r);
    kid_teardown(NULL);

    pid = kid_spawn(false);
    st = kid_start(pid);
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    const struct step other[] = {
        {.used = 5 * GiB,
         .job = pid,
         .start = st,
         .state = 'S',
         .job_in_proc = true,
         .other = 4000000},
        {.used = 1 * GiB, .other = 4000000},
    };
    assert_int_equal(run_go(&r, other, 2), 0);
    assert_int_equal(r.res.state, VG_HANDOFF_DIRTY);
    assert_int_equal(r.res.s.nsignalled, 1);
    run_release(&r);
}

/* Epilog: the GPU looks free right after the stop, but a process of the job opens it again a
 * moment later (a handler that re-opens, a parent that starts another): the quiet period's look
 * sees it, stops it too, and only then says cleaned (issue 27: it said cleaned at once). */
static void test_epilog_reopened(void **state)
{
    (void)state;
    if (!kid_need_pidfd())
        skip();
    pid_t first = kid_spawn(false);
    uint64_t st1 = kid_start(first);
    pid_t second = kid_spawn(false);
    uint64_t st2 = kid_start(second);
    struct run r;
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    r.req.timeout_ms = 8000;
    const struct step steps[] = {
        {.used = 4 * GiB, .job = first, .start = st1, .state = 'S', .job_in_proc = true},
        {.used = 0},
        {.used = 4 * GiB, .job = second, .start = st2, .state = 'S', .job_in_proc = true},
        {.used = 0},
    };
    assert_int_equal(run_go(&r, steps, 4), 0);
    assert_int_equal(r.res.state, VG_HANDOFF_CLEANED);
    assert_int_equal(r.res.s.nsignalled, 2);
    assert_true(r.res.s.looks >= 5);
    run_release(&r);
    kid_teardown(NULL);
}

/* Epilog: the job's holder is stuck in the driver: wedged within the timeout, not signalled. */
static void test_epilog_dstate(void **state)
{
    (void)state;
    struct run r;
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    r.req.timeout_ms = 100;
    const struct step steps[] = {
        {.used = 4 * GiB, .job = 4100000, .start = 9, .state = 'D', .job_in_proc = true},
    };
    assert_int_equal(run_go(&r, steps, 1), 0);
    const struct vg_settle_gpu *g = &r.res.s.gpus[0];
    assert_int_equal(r.res.state, VG_HANDOFF_WEDGED);
    assert_string_equal(g->why, "d-state");
    assert_false(g->holders[0].signalled);
    assert_int_equal(g->holders[0].refusal, VG_KILL_DSTATE);
    assert_true(r.res.s.timed_out);
    run_release(&r);
}

/* Epilog: the memory stays after the job's holder went: wedged "stuck"; a later look that fails
 * leaves what was judged better unknown. */
static void test_epilog_stuck_and_look_failed(void **state)
{
    (void)state;
    struct run r;
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    r.req.timeout_ms = 150;
    /* the job's holder had exited already: the driver lets go of its PID, not its memory */
    const struct step steps[] = {
        {.used = 4 * GiB},
    };
    assert_int_equal(run_go(&r, steps, 1), 0);
    assert_int_equal(r.res.state, VG_HANDOFF_DIRTY);
    assert_string_equal(r.res.s.gpus[0].why, "unexplained");
    assert_true(r.res.s.timed_out);
    run_release(&r);

    pid_t pid = kid_spawn(false);
    uint64_t st = kid_start(pid);
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    const struct step fail[] = {
        {.used = 4 * GiB, .job = pid, .start = st, .state = 'S', .job_in_proc = true},
    };
    r.sc = (struct script){fail, 1, 0, true};
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_handoff_run(&r.req, look, &r.sc, &r.res, &err), 0);
    assert_int_equal(r.res.state, VG_HANDOFF_WEDGED); /* it was still there: survived */
    run_release(&r);
}

/* Without the driver: unknown, nothing judged. */
static void test_no_driver(void **state)
{
    (void)state;
    struct run r;
    run_init(&r, VG_HANDOFF_EPILOG, "3");
    struct vg_snapshot *s = NULL;
    const struct step st = {.used = 0};
    s = mk(&st);
    s->driver_ok = false;
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_err err = VG_ERR_INIT;
    r.req.mode = VG_HANDOFF_NODE;
    assert_int_equal(vg_handoff_node(&r.req, s, &fs, &r.res, &err), 0);
    assert_int_equal(r.res.state, VG_HANDOFF_UNKNOWN);
    assert_false(r.res.s.driver_ok);
    vg_snap_free(s);
    run_release(&r);

    /* node mode with the driver: every GPU, free */
    run_init(&r, VG_HANDOFF_NODE, "3");
    s = mk(&st);
    assert_int_equal(vg_handoff_node(&r.req, s, &fs, &r.res, &err), 0);
    assert_int_equal(r.res.s.ngpus, 1);
    assert_null(vg_handoff_gpu_sel(&r.res, &r.res.s.gpus[0]) == NULL ? NULL : "sel");
    vg_snap_free(s);
    run_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_of),
        cmocka_unit_test(test_sels),
        cmocka_unit_test(test_prolog),
        cmocka_unit_test_teardown(test_epilog_cleaned, kid_teardown),
        cmocka_unit_test(test_epilog_reopened),
        cmocka_unit_test(test_epilog_dstate),
        cmocka_unit_test_teardown(test_epilog_stuck_and_look_failed, kid_teardown),
        cmocka_unit_test(test_no_driver),
    };
    return cmocka_run_group_tests_name("handoff", tests, NULL, NULL);
}
