/*
 * Unit tests for `clean`'s safety: the protected names and the refusal rules of act/kill.c,
 * the plan of act/plan.c on hand-made hosts (who is selected by the default and by each
 * filter, why, with what memory, and what is refused), the identity re-check, and the
 * signalling sequence on real child processes: a wrong start time or uid is never signalled,
 * a process that ignores SIGTERM is killed after the grace period.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "act/kill.h"
#include "act/plan.h"
#include "proc/signal.h"
#include "util/clock.h"
#include "rules/rules.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static const struct vg_kill_ctx root_ctx = {.self = 9000, .ruid = 0};

/* A process as the scanner would read it: stat and status known, a command line. */
static struct vg_proc mkproc(pid_t pid, const char *comm, const char *cmdline, char state)
{
    struct vg_proc p;
    memset(&p, 0, sizeof(p));
    p.pid = pid;
    p.comm = (char *)comm;
    p.cmdline = (char *)cmdline;
    p.state = state;
    p.ppid = 1;
    p.uid = 1000;
    p.known = VG_PROC_K_STAT | VG_PROC_K_STATUS | VG_PROC_K_CMDLINE;
    return p;
}

/* ---------------------------------------------------------------------- protected names */

static void test_protected_names(void **state)
{
    (void)state;
    static const struct {
        const char *comm, *cmdline, *want;
    } cases[] = {
        {"Xorg", "/usr/lib/xorg/Xorg :0 -seat seat0", "Xorg"},
        {"X", "X :0", "X"},
        {"Xwayland", "/usr/bin/Xwayland :1", "Xwayland"},
        {"gnome-shell", "/usr/bin/gnome-shell", "gnome-shell"},
        {"kwin_wayland", "/usr/bin/kwin_wayland", "kwin_*"},
        {"gdm-x-session", "/usr/libexec/gdm-x-session", "gdm*"},
        {"sddm-greeter", "/usr/bin/sddm-greeter", "sddm*"},
        /* The kernel keeps 15 bytes of a name. */
        {"nvidia-persiste", "/usr/bin/nvidia-persistenced --user nvidia", "nvidia-persistenced"},
        {"nvidia-persiste", "", "nvidia-persistenced"},
        {"nv-hostengine", "/usr/bin/nv-hostengine -n", "nv-hostengine"},
        {"dcgm-exporter", "/usr/bin/dcgm-exporter -f x.csv", "dcgm-exporter"},
        {"nv-fabricmanag", "x", NULL}, /* 14 bytes: not a cut name */
        {"nv-fabricmanage", "x", "nv-fabricmanager"},
        {"nvidia-cuda-mps", "x", "nvidia-cuda-mps-control"},
        {"nvidia-smi", "nvidia-smi -l 1", "nvidia-smi"},
        /* By argv[0]'s basename when comm says something else. */
        {"python3", "/usr/bin/nv-hostengine --foo", "nv-hostengine"},
        {"worker", "/opt/dcgm/dcgm-exporter", "dcgm-exporter"},
        {"python", "python train.py --name Xorg", NULL},
        {"Xorgish", "/opt/Xorgish", NULL},
        {"Xfoo", "Xfoo", NULL},
        {"python", "python nvidia-smi", NULL},
        {"vramguard", "vramguard watch", "vramguard"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vg_proc p = mkproc(100, cases[i].comm, cases[i].cmdline, 'S');
        const char *got = vg_kill_protected_name(&p);
        if (!cases[i].want)
            assert_null(got);
        else
            assert_string_equal(got, cases[i].want);
    }
    /* Unknown comm and command line: nothing to match. */
    struct vg_proc p = mkproc(100, NULL, NULL, 'S');
    p.known = VG_PROC_K_STATUS;
    assert_null(vg_kill_protected_name(&p));
}

/* --------------------------------------------------------------------------- refusals */

static void test_check_rules(void **state)
{
    (void)state;
    pid_t anc[] = {8999, 4000, 1};
    struct vg_kill_ctx ctx = {.self = 9000, .ancestors = anc, .nancestors = 3, .ruid = 1000};
    pid_t act = -1;

    struct vg_proc p = mkproc(1, "systemd", "/sbin/init", 'S');
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_INIT);
    p = mkproc(9000, "vramguard", "vramguard clean", 'R');
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_SELF);
    p = mkproc(4000, "bash", "-bash", 'S');
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_ANCESTOR);

    p = mkproc(77, "kworker/0:1", "", 'I');
    p.flags = 0x00200000u; /* PF_KTHREAD */
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_KTHREAD);
    p = mkproc(78, "nv_queue", "", 'S');
    p.ppid = 2; /* a child of kthreadd */
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_KTHREAD);
    p = mkproc(79, "odd", "", 'S'); /* no command line, no flags: still a kernel thread */
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_KTHREAD);

    p = mkproc(80, "Xorg", "/usr/lib/xorg/Xorg", 'S');
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_PROTECTED);

    /* Another user's process: refused unless the caller's real uid is root. */
    p = mkproc(81, "python", "python train.py", 'S');
    p.uid = 1001;
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_OTHER_USER);
    assert_int_equal(vg_kill_check(&p, &root_ctx, &act), VG_KILL_ALLOWED);
    p.uid = 1000;
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_ALLOWED);
    /* Root's process, asked by a user. */
    p.uid = 0;
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_OTHER_USER);

    /* A zombie: act on the parent. Also when its other threads still run. */
    p = mkproc(82, "python", "", 'Z');
    p.ppid = 70;
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_ZOMBIE);
    assert_int_equal(act, 70);
    p.known |= VG_PROC_K_THREADS;
    p.nthreads = 2;
    p.threads_live = 1;
    assert_int_equal(vg_kill_check(&p, &root_ctx, &act), VG_KILL_ZOMBIE);

    /* D state, in the main thread or any other; also a defunct process stuck exiting. */
    p = mkproc(83, "python", "python x.py", 'D');
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_DSTATE);
    assert_int_equal(act, 0);
    p = mkproc(84, "python", "python x.py", 'S');
    p.known |= VG_PROC_K_THREADS;
    p.threads_d = 1;
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_DSTATE);
    p.state = 'Z';
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_DSTATE);

    /* Identity unreadable. */
    p = mkproc(85, "python", "python x.py", 'S');
    p.known &= ~VG_PROC_K_STATUS;
    assert_int_equal(vg_kill_check(&p, &ctx, &act), VG_KILL_UNREADABLE);

    for (int r = VG_KILL_INIT; r <= VG_KILL_RELEASED; r++)
        assert_non_null(vg_kill_refusal_id((enum vg_kill_refusal)r));
    assert_null(vg_kill_refusal_id(VG_KILL_ALLOWED));
}

/* ------------------------------------------------------------------------------ plans */

/*
 * GPU 0 (minor 0) holds:
 *   100 an orphaned worker (fd only), uid 1000
 *   200 a live job (not orphaned), 20 GiB, uid 1000, started long ago
 *   300 a zombie the driver still lists with 2 GiB, parent 250
 *   400 nvidia-persistenced, orphaned-looking (a daemon would lead its own group, but make it
 *       look like a leftover to prove the name alone protects it)
 *   500 an orphan of another user (uid 1001), 1 GiB
 *   600 an orphan with a thread in D state
 *   700 a PID the driver lists with 3 GiB that this /proc does not show
 * GPU 1 (minor 1): 6 GiB used, nobody holds it (a reset candidate).
 */
static struct vg_snapshot *host(void)
{
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    fx_gpu(&l, "GPU-aaaaaaaa-0000", "A100", 0, 80 * GiB, 30 * GiB, 512 * MiB);
    fx_gpu(&l, "GPU-bbbbbbbb-0000", "A100", 1, 80 * GiB, 6 * GiB, 512 * MiB);
    struct vg_gpu *g0 = &l.gpus[0];
    fx_gproc(g0, 200, 20 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 300, 2 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 500, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 700, 3 * GiB, VG_PTYPE_COMPUTE);

    /* a DataLoader worker of a dead main process, idle: a sure leftover */
    struct vg_proc *p = fx_proc(&t, 100, "pt_data_worker", "python train.py", 'S');
    p->pgid = 99;
    p->sid = 99;
    p->start_ticks = 1000;
    fx_activity(p, 500, 0);
    fx_fd(p, 0);
    p = fx_proc(&t, 200, "python", "python train.py", 'R');
    p->ppid = 150;
    p->parent_alive = true;
    p->pgid = p->sid = 200;
    p->start_ticks = 10;
    fx_fd(p, 0);
    p = fx_proc(&t, 300, "python", "", 'Z');
    p->ppid = 250;
    p->parent_alive = true;
    p->pgid = p->sid = 250;
    p->pgid_alive = p->sid_alive = true;
    p = fx_proc(&t, 400, "nvidia-persiste", "/usr/bin/nvidia-persistenced", 'S');
    p->pgid = p->sid = 399;
    fx_fd(p, 0);
    /* bob's multiprocessing worker whose parent died, with a context of its own, idle */
    p = fx_proc(&t, 500, "python", "python -c from multiprocessing.spawn import spawn_main; "
                                   "spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork",
                'S');
    fx_activity(p, 500, 0);
    fx_util(g0, 500, 0);
    p->uid = 1001;
    free(p->user);
    p->user = fx_strdup("bob");
    p->pgid = p->sid = 499;
    fx_fd(p, 0);
    p = fx_proc(&t, 600, "python", "python stuck.py", 'D');
    p->pgid = p->sid = 599;
    fx_fd(p, 0);
    return fx_assemble(&l, &t);
}

struct planned {
    struct vg_snapshot *snap;
    struct vg_findings fs;
    struct vg_plan plan;
};

static void plan_with(struct planned *pl, struct vg_plan_opts *o)
{
    pl->snap = host();
    vg_findings_init(&pl->fs);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(pl->snap, &ro, &pl->fs, &err), 0);
    if (!o->who.self)
        o->who = root_ctx;
    o->pidns_trusted = true;
    assert_int_equal(vg_plan_build(pl->snap, &pl->fs, o, &pl->plan, &err), 0);
}

static void planned_release(struct planned *pl)
{
    vg_plan_release(&pl->plan);
    vg_findings_release(&pl->fs);
    vg_snap_free(pl->snap);
}

static const struct vg_plan_entry *entry(const struct vg_plan *p, pid_t pid)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].id.pid == pid)
            return &p->v[i];
    return NULL;
}

static void test_plan_default_orphans_only(void **state)
{
    (void)state;
    struct vg_plan_opts o = {0};
    struct planned pl;
    plan_with(&pl, &o);
    const struct vg_plan *p = &pl.plan;

    /* The orphan is a target, for the orphan-holder finding, with its identity. */
    const struct vg_plan_entry *e = entry(p, 100);
    assert_non_null(e);
    assert_true(e->signal);
    assert_string_equal(e->reason, "orphan-holder");
    assert_non_null(e->finding);
    assert_int_equal(e->id.start_ticks, 1000);
    assert_int_equal(e->id.uid, 1000);
    assert_int_equal(e->id.nminors, 1);
    assert_int_equal(e->id.minors[0], 0);
    assert_false(e->id.nvml);
    assert_false(e->mem_known); /* device node only */
    assert_int_equal(e->ngpus, 1);
    assert_int_equal(e->gpus[0], 0);
    assert_string_equal(e->cmdline, "python train.py");
    assert_null(e->verdict); /* a sure leftover: nothing to excuse */

    /* A live job is never a default target. */
    assert_null(entry(p, 200));
    /* The NVML-only PID is not a leftover finding of its own here. */
    assert_null(entry(p, 700));

    /* The zombie is listed, refused, with its parent to act on. */
    e = entry(p, 300);
    assert_non_null(e);
    assert_false(e->signal);
    assert_int_equal(e->refusal, VG_KILL_ZOMBIE);
    assert_int_equal(e->act_on, 250);
    assert_string_equal(e->reason, "zombie-holder");
    assert_true(e->mem_known);
    assert_int_equal(e->mem_bytes, 2 * GiB);

    /* The persistence daemon looks orphaned (a double fork), is no leftover, and would be
     * infrastructure anyway: listed as left alone, for the stronger reason. */
    e = entry(p, 400);
    assert_non_null(e);
    assert_true(e->leave);
    assert_int_equal(e->refusal, VG_KILL_PROTECTED);
    assert_string_equal(e->protected_name, "nvidia-persistenced");

    /* As root, another user's orphan may go; its memory is the driver's figure. */
    e = entry(p, 500);
    assert_non_null(e);
    assert_true(e->signal);
    assert_true(e->mem_known);
    assert_int_equal(e->mem_bytes, 1 * GiB);
    assert_int_equal(e->seen, VG_SEEN_NVML | VG_SEEN_FD);
    assert_true(e->id.nvml);

    /* A process stuck in D: listed, never signalled, for that reason first (adopted with
     * nothing but device nodes, it may also be a leftover: no signal would reach it). */
    e = entry(p, 600);
    assert_non_null(e);
    assert_int_equal(e->refusal, VG_KILL_DSTATE);
    assert_string_equal(e->reason, "d-state-holder");

    assert_int_equal(p->n, 5);
    assert_int_equal(p->nsignal, 2);
    assert_int_equal(p->nrefused, 2);
    assert_int_equal(p->nleft, 1);
    /* Sorted by pid. */
    for (size_t i = 1; i < p->n; i++)
        assert_true(p->v[i - 1].id.pid < p->v[i].id.pid);
    /* A clean of the whole host reports on every GPU. */
    assert_int_equal(p->nscope, 2);
    planned_release(&pl);
}

static void test_plan_not_root(void **state)
{
    (void)state;
    pid_t anc[] = {100};
    struct vg_plan_opts o = {.who = {.self = 9000, .ruid = 1000}};
    struct planned pl;
    plan_with(&pl, &o);
    const struct vg_plan_entry *e = entry(&pl.plan, 500);
    assert_non_null(e);
    assert_false(e->signal);
    assert_int_equal(e->refusal, VG_KILL_OTHER_USER);
    assert_true(entry(&pl.plan, 100)->signal);
    planned_release(&pl);

    /* The orphan happens to be what runs vramguard: never. */
    o = (struct vg_plan_opts){.who = {.self = 9000, .ancestors = anc, .nancestors = 1}};
    plan_with(&pl, &o);
    e = entry(&pl.plan, 100);
    assert_int_equal(e->refusal, VG_KILL_ANCESTOR);
    planned_release(&pl);

    o = (struct vg_plan_opts){.who = {.self = 100}};
    plan_with(&pl, &o);
    assert_int_equal(entry(&pl.plan, 100)->refusal, VG_KILL_SELF);
    planned_release(&pl);
}

static void test_plan_filters(void **state)
{
    (void)state;
    struct planned pl;

    /* --gpu 0: every holder of GPU 0, orphan or not. */
    struct vg_plan_opts o = {.by_gpu = true, .gpu = 0};
    plan_with(&pl, &o);
    assert_int_equal(pl.plan.n, 7);
    const struct vg_plan_entry *e = entry(&pl.plan, 200);
    assert_non_null(e);
    assert_true(e->signal);
    assert_null(e->reason); /* no finding: it matched the filter */
    assert_int_equal(e->mem_bytes, 20 * GiB);
    e = entry(&pl.plan, 700);
    assert_non_null(e);
    assert_int_equal(e->refusal, VG_KILL_NOT_VISIBLE);
    assert_string_equal(e->reason, "foreign-pid");
    assert_int_equal(pl.plan.nscope, 1);
    assert_int_equal(pl.plan.scope[0], 0);
    planned_release(&pl);

    /* --gpu 0 --orphans: the leftovers of GPU 0 only. */
    o = (struct vg_plan_opts){.by_gpu = true, .gpu = 0, .orphans = true};
    plan_with(&pl, &o);
    assert_null(entry(&pl.plan, 200));
    assert_null(entry(&pl.plan, 700));
    assert_non_null(entry(&pl.plan, 100));
    planned_release(&pl);

    /* --gpu 1: nobody holds it. */
    o = (struct vg_plan_opts){.by_gpu = true, .gpu = 1};
    plan_with(&pl, &o);
    assert_int_equal(pl.plan.n, 0);
    assert_int_equal(pl.plan.nscope, 1);
    assert_int_equal(pl.plan.scope[0], 1);
    assert_true(vg_plan_reset_needed(pl.snap, 1, 256 * MiB));
    assert_false(vg_plan_reset_needed(pl.snap, 0, 256 * MiB));
    assert_false(vg_plan_reset_needed(pl.snap, 1, 8 * GiB));
    planned_release(&pl);

    /* --user bob (1001). */
    o = (struct vg_plan_opts){.by_user = true, .uid = 1001};
    plan_with(&pl, &o);
    assert_int_equal(pl.plan.n, 1);
    assert_int_equal(pl.plan.v[0].id.pid, 500);
    /* Scope: only the GPUs its holders hold. */
    assert_int_equal(pl.plan.nscope, 1);
    planned_release(&pl);

    /* --older-than with 100 ticks a second and "now" at tick 7000: 100 started at tick 1000
     * (60 s ago), 200 at tick 10 (69.9 s ago). */
    o = (struct vg_plan_opts){
        .by_age = true, .older_than_ms = 61000, .now_ticks = 7000, .clk_tck = 100};
    plan_with(&pl, &o);
    assert_null(entry(&pl.plan, 100));
    assert_non_null(entry(&pl.plan, 200));
    planned_release(&pl);
    o = (struct vg_plan_opts){
        .by_age = true, .older_than_ms = 60000, .now_ticks = 7000, .clk_tck = 100};
    plan_with(&pl, &o);
    e = entry(&pl.plan, 100);
    assert_non_null(e);
    assert_true(e->age_known);
    assert_int_equal(e->age_ms, 60000);
    planned_release(&pl);
    /* --older-than --orphans: the old leftovers only. */
    o = (struct vg_plan_opts){
        .by_age = true, .older_than_ms = 61000, .now_ticks = 7000, .clk_tck = 100, .orphans = true};
    plan_with(&pl, &o);
    assert_null(entry(&pl.plan, 100));
    assert_null(entry(&pl.plan, 200));
    assert_non_null(entry(&pl.plan, 500));
    planned_release(&pl);

    /* --pid of a holder, and of something that holds nothing. */
    o = (struct vg_plan_opts){.by_pid = true, .pid = 200};
    plan_with(&pl, &o);
    assert_int_equal(pl.plan.n, 1);
    assert_true(pl.plan.v[0].signal);
    planned_release(&pl);
    o = (struct vg_plan_opts){.by_pid = true, .pid = 4242};
    plan_with(&pl, &o);
    assert_int_equal(pl.plan.n, 1);
    assert_int_equal(pl.plan.v[0].id.pid, 4242);
    assert_int_equal(pl.plan.v[0].refusal, VG_KILL_NOT_HOLDER);
    assert_int_equal(pl.plan.nscope, 0);
    planned_release(&pl);

    /* Filters combine: --user alice --gpu 0 --orphans. */
    o = (struct vg_plan_opts){
        .by_user = true, .uid = 1000, .by_gpu = true, .gpu = 0, .orphans = true};
    plan_with(&pl, &o);
    assert_non_null(entry(&pl.plan, 100));
    assert_null(entry(&pl.plan, 200));
    assert_null(entry(&pl.plan, 500));
    planned_release(&pl);
}

/* Holders only the driver lists are acted on by PID only when this /proc is the host's. */
static void test_plan_namespace(void **state)
{
    (void)state;
    struct vg_plan_opts o = {.by_gpu = true, .gpu = 0};
    struct planned pl;
    pl.snap = host();
    vg_findings_init(&pl.fs);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(pl.snap, &ro, &pl.fs, &err), 0);
    o.who = root_ctx;
    o.pidns_trusted = false;
    assert_int_equal(vg_plan_build(pl.snap, &pl.fs, &o, &pl.plan, &err), 0);
    /* 300 is seen by the driver only: refused for the namespace before anything else. */
    assert_int_equal(entry(&pl.plan, 300)->refusal, VG_KILL_NAMESPACE);
    /* 500 also holds the device node: it is itself. */
    assert_true(entry(&pl.plan, 500)->signal);
    planned_release(&pl);
}

/* ---------------------------------------------------------------------- the re-check */

static void test_verify(void **state)
{
    (void)state;
    unsigned minors[] = {0};
    struct vg_kill_identity id = {
        .pid = 100, .start_ticks = 1000, .uid = 1000, .minors = minors, .nminors = 1};
    struct vg_kill_ctx ctx = {.self = 9000, .ruid = 1000};
    unsigned held0[] = {0}, held3[] = {3};
    struct vg_proc now = mkproc(100, "python", "python x.py", 'S');
    now.start_ticks = 1000;
    now.known |= VG_PROC_K_FDS;
    now.dev_minors = held0;
    now.ndev_minors = 1;
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_ALLOWED);

    /* The PID was reused: another start time. */
    now.start_ticks = 1001;
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_CHANGED);
    now.start_ticks = 1000;
    /* Same start, other owner (setuid since): not the process that was planned. */
    now.uid = 0;
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_CHANGED);
    now.uid = 1000;
    /* Start time unreadable. */
    now.known &= ~VG_PROC_K_STAT;
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_CHANGED);
    now.known |= VG_PROC_K_STAT;

    /* It let go of the GPU (holds another one now, or none). */
    now.dev_minors = held3;
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_RELEASED);
    now.ndev_minors = 0;
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_RELEASED);
    /* ... unless the driver listed it and still does (or cannot say). */
    id.nvml = true;
    assert_int_equal(vg_kill_verify(&id, &now, 1, &ctx), VG_KILL_ALLOWED);
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_ALLOWED);
    assert_int_equal(vg_kill_verify(&id, &now, 0, &ctx), VG_KILL_RELEASED);

    /* Became a zombie, or went into D state since the plan: the policy applies again. */
    now.dev_minors = held0;
    now.ndev_minors = 1;
    now.state = 'Z';
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_ZOMBIE);
    now.state = 'D';
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_DSTATE);
    /* exec'd into something protected */
    now.state = 'S';
    now.comm = (char *)"Xorg";
    assert_int_equal(vg_kill_verify(&id, &now, -1, &ctx), VG_KILL_PROTECTED);
}

/* ------------------------------------------------------------ signalling real processes */

struct child {
    char dir[PATH_MAX];
    char node[PATH_MAX + 16];
    pid_t pid;
};

/* Start a child that holds DIR/nvidia0 open and waits; ignore_term makes it ignore SIGTERM.
 * Returns once the child has the file open (it writes a byte to a pipe). */
/* Children still to clean up, so a failed assertion (which leaves the test early) does not
 * leave processes or directories behind: the tests' teardown ends them. */
static struct child *live[4];
static size_t nlive;

static void child_end(struct child *c);

static int children_teardown(void **state)
{
    (void)state;
    while (nlive)
        child_end(live[nlive - 1]);
    return 0;
}

static void child_start(struct child *c, bool ignore_term)
{
    snprintf(c->dir, sizeof(c->dir), "/tmp/vg-test-plan.XXXXXX");
    c->pid = -1;
    c->node[0] = '\0';
    assert_non_null(mkdtemp(c->dir));
    assert_true(nlive < sizeof(live) / sizeof(live[0]));
    live[nlive++] = c;
    snprintf(c->node, sizeof(c->node), "%s/nvidia0", c->dir);
    int fd = open(c->node, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (ignore_term)
            signal(SIGTERM, SIG_IGN);
        else
            signal(SIGTERM, SIG_DFL);
        int held = open(c->node, O_RDONLY);
        (void)held;
        char b = 'r';
        if (write(pfd[1], &b, 1) != 1)
            _exit(1);
        /* Bounded: the test kills it long before. */
        for (int i = 0; i < 600; i++)
            sleep(1);
        _exit(0);
    }
    close(pfd[1]);
    char b;
    assert_int_equal(read(pfd[0], &b, 1), 1);
    close(pfd[0]);
}

static void child_identity(const struct child *c, struct vg_kill_identity *id, int root_fd)
{
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read(root_fd, c->pid, c->dir, &p, &err), 0);
    assert_true(p.known & VG_PROC_K_FDS);
    assert_int_equal(p.ndev_minors, 1);
    memset(id, 0, sizeof(*id));
    id->pid = c->pid;
    id->start_ticks = p.start_ticks;
    id->uid = p.uid;
    id->minors = malloc(sizeof(unsigned));
    assert_non_null(id->minors);
    id->minors[0] = p.dev_minors[0];
    id->nminors = 1;
    vg_proc_release(&p);
}

static bool child_alive(const struct child *c)
{
    int st;
    return waitpid(c->pid, &st, WNOHANG) == 0;
}

static void child_end(struct child *c)
{
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = -1;
    }
    if (c->node[0])
        unlink(c->node);
    rmdir(c->dir);
    for (size_t i = 0; i < nlive; i++) {
        if (live[i] == c) {
            live[i] = live[--nlive];
            break;
        }
    }
}

/* pidfds need Linux 5.3; valgrind before 3.20 does not know the system call either. */
static void need_pidfd(void)
{
    int fd;
    if (vg_proc_pidfd_open(getpid(), &fd) != 0)
        skip();
    close(fd);
}

static void test_kill_identity_changed(void **state)
{
    (void)state;
    need_pidfd();
    int root_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root_fd >= 0);
    static struct child c;
    child_start(&c, false);
    struct vg_kill_identity id;
    child_identity(&c, &id, root_fd);
    struct vg_kill_ctx ctx = {.self = getpid(), .ruid = getuid()};
    struct vg_err err = VG_ERR_INIT;

    /* The plan saw another start time: the process behind the PID is not the planned one. */
    id.start_ticks += 1;
    struct vg_kill k;
    vg_kill_init(&k, &id);
    assert_int_equal(vg_kill_start(&k, root_fd, c.dir, &ctx, NULL, NULL, &err), 0);
    assert_int_equal(k.outcome, VG_KILL_REFUSED);
    assert_int_equal(k.refusal, VG_KILL_CHANGED);
    assert_false(k.stop.sent_term);
    assert_int_equal(k.now_start_ticks, id.start_ticks - 1);
    assert_int_equal(k.stop.pidfd, -1);
    vg_kill_finish(&k, 1, 100, 100);
    assert_int_equal(k.outcome, VG_KILL_REFUSED);
    vg_kill_release(&k);
    assert_true(child_alive(&c));

    /* Another uid. */
    id.start_ticks -= 1;
    id.uid += 1;
    vg_kill_init(&k, &id);
    assert_int_equal(vg_kill_start(&k, root_fd, c.dir, &ctx, NULL, NULL, &err), 0);
    assert_int_equal(k.outcome, VG_KILL_REFUSED);
    assert_int_equal(k.refusal, VG_KILL_CHANGED);
    vg_kill_release(&k);
    assert_true(child_alive(&c));

    /* It no longer holds what the plan saw (planned minor 5; it holds 0). */
    id.uid -= 1;
    id.minors[0] = 5;
    vg_kill_init(&k, &id);
    assert_int_equal(vg_kill_start(&k, root_fd, c.dir, &ctx, NULL, NULL, &err), 0);
    assert_int_equal(k.refusal, VG_KILL_RELEASED);
    vg_kill_release(&k);
    assert_true(child_alive(&c));

    /* The right identity: SIGTERM, and it exits. */
    id.minors[0] = 0;
    vg_kill_init(&k, &id);
    assert_int_equal(vg_kill_start(&k, root_fd, c.dir, &ctx, NULL, NULL, &err), 0);
    assert_int_equal(k.outcome, VG_KILL_PENDING);
    assert_true(k.stop.sent_term);
    vg_kill_finish(&k, 1, 10000, 5000);
    assert_int_equal(k.outcome, VG_KILL_TERMINATED);
    assert_false(k.stop.sent_kill);
    vg_kill_release(&k);
    int st;
    assert_int_equal(waitpid(c.pid, &st, 0), c.pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    c.pid = -1;

    /* Gone: nothing sent. */
    vg_kill_init(&k, &id);
    assert_int_equal(vg_kill_start(&k, root_fd, c.dir, &ctx, NULL, NULL, &err), 0);
    /* (REFUSED only if the PID was reused already: then it is another process.) */
    assert_true(k.outcome == VG_KILL_GONE || k.outcome == VG_KILL_REFUSED);
    assert_false(k.stop.sent_term);
    vg_kill_release(&k);

    vg_kill_identity_release(&id);
    child_end(&c);
    close(root_fd);
}

static void test_kill_after_grace(void **state)
{
    (void)state;
    need_pidfd();
    int root_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root_fd >= 0);
    static struct child a, b;
    child_start(&a, true);
    child_start(&b, false);
    struct vg_kill_identity ida, idb;
    child_identity(&a, &ida, root_fd);
    child_identity(&b, &idb, root_fd);
    struct vg_kill_ctx ctx = {.self = getpid(), .ruid = getuid()};
    struct vg_err err = VG_ERR_INIT;
    struct vg_kill ks[2];
    vg_kill_init(&ks[0], &ida);
    vg_kill_init(&ks[1], &idb);
    unsigned long long t0 = vg_clock_ms();
    assert_int_equal(vg_kill_start(&ks[0], root_fd, a.dir, &ctx, NULL, NULL, &err), 0);
    assert_int_equal(vg_kill_start(&ks[1], root_fd, b.dir, &ctx, NULL, NULL, &err), 0);
    vg_kill_finish(ks, 2, 300, 5000);
    /* The one ignoring SIGTERM got SIGKILL once the grace period was over. */
    assert_int_equal(ks[0].outcome, VG_KILL_KILLED);
    assert_true(ks[0].stop.sent_term && ks[0].stop.sent_kill);
    assert_true(vg_clock_ms() - t0 >= 300);
    assert_true(ks[0].stop.exit_ms >= 300);
    assert_int_equal(ks[1].outcome, VG_KILL_TERMINATED);
    assert_false(ks[1].stop.sent_kill);
    int st;
    assert_int_equal(waitpid(a.pid, &st, 0), a.pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_int_equal(waitpid(b.pid, &st, 0), b.pid);
    a.pid = b.pid = -1;
    vg_kill_release(&ks[0]);
    vg_kill_release(&ks[1]);
    vg_kill_identity_release(&ida);
    vg_kill_identity_release(&idb);
    child_end(&a);
    child_end(&b);
    close(root_fd);
}

/* A process that is its own refusal at signal time (here: vramguard itself, i.e. this test). */
static void test_kill_never_self(void **state)
{
    (void)state;
    need_pidfd();
    int root_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root_fd >= 0);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read(root_fd, getpid(), NULL, &p, &err), 0);
    struct vg_kill_identity id = {.pid = getpid(), .start_ticks = p.start_ticks, .uid = p.uid};
    vg_proc_release(&p);
    struct vg_kill_ctx ctx = {.self = getpid(), .ruid = getuid()};
    struct vg_kill k;
    vg_kill_init(&k, &id);
    assert_int_equal(vg_kill_start(&k, root_fd, NULL, &ctx, NULL, NULL, &err), 0);
    assert_int_equal(k.outcome, VG_KILL_REFUSED);
    assert_int_equal(k.refusal, VG_KILL_SELF);
    vg_kill_release(&k);
    close(root_fd);
}

/*
 * Orphans adopted by someone other than init: a subreaper in another session (systemd --user),
 * a container's init (tini); and what must not match: a container's main process (its group's
 * leader, in its init's session) and a live worker whose group leader exited while its parent
 * (same session) lives on.
 */
static void test_orphan_adopted(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    fx_gpu(&l, "GPU-aaaaaaaa-0000", "A100", 0, 80 * GiB, 0, 512 * MiB);
    struct vg_proc *p;
    static const struct {
        pid_t pid, ppid, pgid, sid, parent_sid;
        bool ns_init, pgid_alive, sid_alive;
    } rows[] = {
        /* adopted by systemd --user (session 790): its job's group and session are gone */
        {800, 790, 781, 780, 790, false, false, false},
        /* a container's main process under tini (805, session 805) */
        {810, 805, 810, 805, 805, true, true, true},
        /* its worker, adopted by tini after the main process died */
        {820, 805, 815, 805, 805, true, false, true},
        /* a live worker of a live parent (in the same group), though the group's leader
         * exited */
        {840, 835, 836, 835, 835, false, false, true},
        /* a worker of a dead main adopted by the launching shell, a subreaper (844): its
         * parent is in another group of its session, and its own group's leader is gone */
        {846, 844, 845, 844, 844, false, false, true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        p = fx_proc(&t, rows[i].pid, "python", "python train.py", 'S');
        p->ppid = rows[i].ppid;
        p->pgid = rows[i].pgid;
        p->sid = rows[i].sid;
        p->parent_alive = true;
        p->parent_known = true;
        p->parent_sid = rows[i].parent_sid;
        p->parent_ns_init = rows[i].ns_init;
        p->parent_pgid = rows[i].pid == 840 ? 836 : rows[i].ppid;
        p->pgid_alive = rows[i].pgid_alive;
        p->sid_alive = rows[i].sid_alive;
        fx_fd(p, 0);
    }
    /* an unknown parent (not readable): as before, a live parent means no orphan */
    p = fx_proc(&t, 850, "python", "python x.py", 'S');
    p->ppid = 845;
    p->parent_alive = true;
    p->pgid = p->sid = 849;
    fx_fd(p, 0);
    struct vg_snapshot *snap = fx_assemble(&l, &t);
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(snap, &ro, &fs, &err), 0);
    bool orphan[6] = {false};
    static const pid_t pids[] = {800, 810, 820, 840, 850, 846};
    bool subreaper_said = false, init_said = false, shell_said = false;
    for (size_t i = 0; i < fs.n; i++) {
        if (strcmp(fs.v[i].rule, "orphan-holder") != 0)
            continue;
        for (size_t k = 0; k < fs.v[i].npids; k++)
            for (size_t j = 0; j < 6; j++)
                orphan[j] |= fs.v[i].pids[k] == pids[j];
        for (size_t e = 0; e < fs.v[i].nevidence; e++) {
            subreaper_said |= strstr(fs.v[i].evidence[e],
                                     "PID 800") && strstr(fs.v[i].evidence[e],
                                                          "parent is now PID 790 (a subreaper in "
                                                          "another session)");
            init_said |= strstr(fs.v[i].evidence[e], "PID 820") &&
                         strstr(fs.v[i].evidence[e], "parent is now PID 805 (its container's init)");
            shell_said |= strstr(fs.v[i].evidence[e], "PID 846") &&
                          strstr(fs.v[i].evidence[e], "parent is now PID 844 (a subreaper in its "
                                                      "own session");
        }
    }
    assert_true(orphan[0]);
    assert_false(orphan[1]);
    assert_true(orphan[2]);
    assert_false(orphan[3]);
    assert_false(orphan[4]);
    assert_true(orphan[5]);
    assert_true(subreaper_said);
    assert_true(init_said);
    assert_true(shell_said);
    vg_findings_release(&fs);
    vg_snap_free(snap);
}

static void test_ancestors(void **state)
{
    (void)state;
    int root_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root_fd >= 0);
    pid_t self;
    assert_int_equal(vg_proc_self_pid(root_fd, &self), 0);
    assert_int_equal(self, getpid());
    pid_t *anc = NULL;
    size_t n = 0;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_ancestors(root_fd, getpid(), &anc, &n, &err), 0);
    assert_true(n >= 1);
    assert_int_equal(anc[0], getppid());
    free(anc);
    close(root_fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protected_names),
        cmocka_unit_test(test_check_rules),
        cmocka_unit_test(test_plan_default_orphans_only),
        cmocka_unit_test(test_plan_not_root),
        cmocka_unit_test(test_plan_filters),
        cmocka_unit_test(test_plan_namespace),
        cmocka_unit_test(test_verify),
        cmocka_unit_test_teardown(test_kill_identity_changed, children_teardown),
        cmocka_unit_test_teardown(test_kill_after_grace, children_teardown),
        cmocka_unit_test(test_kill_never_self),
        cmocka_unit_test(test_ancestors),
        cmocka_unit_test(test_orphan_adopted),
    };
    return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
