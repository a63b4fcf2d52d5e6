/*
 * Unit tests for every diagnosis rule (src/rules/) over snapshots built here, each with a case
 * that must fire and a near miss that must not; and for the leftover model behind
 * orphan-holder and clean's default targets, on the lifecycles real hosts have (docs/
 * diagnoses.md lists them): workers of a dead main process adopted by init, a subreaper, a
 * container's init or the launching shell; multiprocessing children; ranks of a dead agent;
 * nohup jobs; setsid and double-fork daemons; stopped processes; working leftovers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "act/plan.h"
#include "rules/rules.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* ------------------------------------------------------------------------------ the host */

struct host {
    struct vg_gpu_list l;
    struct vg_proc_table t;
    uint64_t extra[8]; /* memory on GPU g that no process accounts for */
    struct vg_snapshot *snap;
    struct vg_findings fs;
    struct vg_rule_opts ro;
};

static const char *const uuids[] = {"GPU-00000000-aaaa", "GPU-11111111-aaaa", "GPU-22222222-aaaa",
                                    "GPU-33333333-aaaa"};

/* n A100s, minor = index, nothing held. */
static void host_init(struct host *h, size_t n)
{
    memset(h, 0, sizeof(*h));
    vg_gpu_list_init(&h->l);
    vg_proc_table_init(&h->t);
    for (size_t i = 0; i < n; i++)
        fx_gpu(&h->l, uuids[i], "NVIDIA A100-SXM4-80GB", (unsigned)i, 80 * GiB, 0, 512 * MiB);
    vg_findings_init(&h->fs);
    vg_rule_opts_init(&h->ro);
}

/* A process of a live job: a child of a live parent (pid 2, in its group), in session and
 * group 10 whose leaders live. Call in ascending pid order. */
static struct vg_proc *host_proc(struct host *h, pid_t pid, const char *comm, const char *cmd)
{
    struct vg_proc *p = fx_proc(&h->t, pid, comm, cmd, 'S');
    p->ppid = 2;
    p->parent_alive = p->parent_known = true;
    p->pgid = p->sid = p->parent_sid = p->parent_pgid = 10;
    p->pgid_alive = p->sid_alive = true;
    p->known |= VG_PROC_K_ENV | VG_PROC_K_MAPS;
    return p;
}

static void env(struct vg_proc *p, enum vg_env_var v, const char *val)
{
    free(p->env[v]);
    p->env[v] = fx_strdup(val);
    p->known |= VG_PROC_K_ENV;
}

/* A context of `bytes` on GPU g for pid, with its device node held (fx_fd on the process). */
static void ctx(struct host *h, size_t g, uint32_t pid, uint64_t bytes)
{
    fx_gproc(&h->l.gpus[g], pid, bytes, VG_PTYPE_COMPUTE);
}

/* Its adoption after the main process (group gsid... ) died: parent init, its group's leader
 * gone; a DataLoader worker is the typical one. */
static void orphaned(struct vg_proc *p, pid_t dead_pgid)
{
    p->ppid = 1;
    p->parent_known = false;
    p->pgid = dead_pgid;
    p->pgid_alive = false;
}

static void host_run(struct host *h)
{
    for (size_t g = 0; g < h->l.ngpus; g++) {
        struct vg_gpu *gp = &h->l.gpus[g];
        uint64_t used = h->extra[g];
        for (size_t k = 0; k < gp->nprocs; k++)
            used += gp->procs[k].used_known ? gp->procs[k].used_bytes : 0;
        gp->mem_used = used;
        gp->mem_free = gp->mem_total - used - gp->mem_reserved;
    }
    h->snap = fx_assemble(&h->l, &h->t);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(h->snap, &h->ro, &h->fs, &err), 0);
}

static void host_release(struct host *h)
{
    vg_findings_release(&h->fs);
    vg_snap_free(h->snap);
}

/* The finding of rule that names pid (any finding of rule when pid is 0). */
static const struct vg_finding *finding(const struct host *h, const char *rule, pid_t pid)
{
    for (size_t i = 0; i < h->fs.n; i++) {
        const struct vg_finding *f = &h->fs.v[i];
        if (strcmp(f->rule, rule) != 0)
            continue;
        if (!pid)
            return f;
        for (size_t k = 0; k < f->npids; k++)
            if (f->pids[k] == pid)
                return f;
    }
    return NULL;
}

static size_t nfindings(const struct host *h, const char *rule)
{
    size_t n = 0;
    for (size_t i = 0; i < h->fs.n; i++)
        n += strcmp(h->fs.v[i].rule, rule) == 0;
    return n;
}

static bool said(const struct vg_finding *f, const char *text)
{
    for (size_t i = 0; f && i < f->nevidence; i++)
        if (strstr(f->evidence[i], text))
            return true;
    return false;
}

static bool fixed(const struct vg_finding *f, const char *text)
{
    for (size_t i = 0; f && i < f->nfix; i++)
        if (strstr(f->fix[i], text))
            return true;
    return false;
}

static const struct vg_leftover *verdict(struct host *h, struct vg_leftovers *ls, pid_t pid)
{
    memset(ls, 0, sizeof(*ls));
    assert_int_equal(vg_leftovers_assess(h->snap, ls), 0);
    const struct vg_leftover *l = vg_leftovers_find(ls, pid);
    assert_non_null(l);
    return l;
}

/* ------------------------------------------------------------------------ the leftover model */

/* The fact of that id on pid's verdict, or NULL. */
static const struct vg_left_fact *fact_of(const struct vg_leftovers *ls, pid_t pid,
                                          enum vg_left_fact_id id)
{
    return vg_leftover_fact(vg_leftovers_find(ls, pid), id);
}

/* A DataLoader worker holding only the inherited node, its main process gone, idle: high. */
static void test_left_dataloader_init(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    struct vg_proc *w = host_proc(&h, 101, "pt_data_worker", "python train.py");
    orphaned(w, 100);
    fx_fd(w, 1);
    fx_activity(w, 500, 0);
    h.extra[1] = 6 * GiB;
    host_run(&h);
    const struct vg_finding *f = finding(&h, "orphan-holder", 101);
    assert_non_null(f);
    assert_int_equal(f->confidence, VG_CONF_HIGH);
    assert_int_equal(f->severity, VG_SEV_CRITICAL); /* the unexplained 6 GiB is most likely it */
    assert_true(said(f, "PID 101 (python train.py): leftover at high confidence, weight +6; +1 "
                        "parent is now PID 1 (init); +2 its process group leader (PID 100) has "
                        "exited; +2 holds the device node only, inherited"));
    assert_true(said(f, "named as a PyTorch DataLoader worker"));
    assert_true(said(f, "0 ms of CPU time in the last 500 ms"));
    assert_true(said(f, "confidence high"));
    assert_true(fixed(f, "kill -TERM 101 "));
    struct vg_leftovers ls;
    const struct vg_leftover *l = verdict(&h, &ls, 101);
    assert_int_equal(l->verdict, VG_LEFT_YES);
    assert_non_null(vg_leftover_fact(l, VG_LF_INHERITED));
    vg_leftovers_release(&ls);
    host_release(&h);
}

/* Forty workers of one ended job: one finding, and its kill line names every PID (a list cut
 * short, as one once was after about twenty, would leave leftovers holding the GPU). */
static void test_left_kill_line_every_pid(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    for (pid_t pid = 101; pid <= 140; pid++) {
        struct vg_proc *w = host_proc(&h, pid, "pt_data_worker", "python train.py");
        orphaned(w, 100);
        fx_fd(w, 1);
        fx_activity(w, 500, 0);
    }
    host_run(&h);
    assert_int_equal(nfindings(&h, "orphan-holder"), 1);
    const struct vg_finding *f = finding(&h, "orphan-holder", 140);
    assert_non_null(f);
    assert_int_equal(f->npids, 40);
    char want[512] = "kill -TERM";
    for (pid_t pid = 101; pid <= 140; pid++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), " %d", (int)pid);
    snprintf(want + strlen(want), sizeof(want) - strlen(want), " (then kill -KILL");
    assert_true(fixed(f, want));
    host_release(&h);
}

/* The same worker, but working (CPU time moving) or not measured: medium, with why. */
static void test_left_working_or_unmeasured(void **state)
{
    (void)state;
    for (int busy = 0; busy < 2; busy++) {
        struct host h;
        host_init(&h, 2);
        struct vg_proc *w = host_proc(&h, 101, "pt_data_worker", "python train.py");
        orphaned(w, 100);
        fx_fd(w, 1);
        if (busy)
            fx_activity(w, 500, 120);
        host_run(&h);
        const struct vg_finding *f = finding(&h, "orphan-holder", 101);
        assert_non_null(f);
        assert_int_equal(f->confidence, VG_CONF_MEDIUM);
        assert_int_equal(f->severity, VG_SEV_WARNING);
        assert_true(said(f, busy ? "confidence medium: it is working"
                                 : "confidence medium: whether it works could not be measured"));
        assert_true(fixed(f, "vramguard clean --pid 101 --force"));
        assert_false(fixed(f, "kill -TERM"));
        host_release(&h);
    }
}

/* Adopted by a subreaper in another session (systemd --user), by its container's init (tini),
 * or by the launching shell that is a subreaper: all leftovers. */
static void test_left_adopters(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    /* each configured before the next is added: the table may move */
    struct vg_proc *a = host_proc(&h, 201, "pt_data_worker", "python a.py");
    a->ppid = 150; /* systemd --user, session 150 */
    a->parent_sid = a->parent_pgid = 150;
    a->pgid = 200;
    a->pgid_alive = false;
    fx_fd(a, 0);
    fx_activity(a, 500, 0);
    struct vg_proc *b = host_proc(&h, 301, "pt_data_worker", "python b.py");
    b->ppid = 250; /* tini: pid 1 of the container's namespace */
    b->parent_ns_init = true;
    b->parent_sid = b->sid = b->parent_pgid = 250;
    b->pgid = 300;
    b->pgid_alive = false;
    fx_fd(b, 0);
    fx_activity(b, 500, 0);
    struct vg_proc *c = host_proc(&h, 401, "pt_data_worker", "python c.py");
    c->ppid = 10; /* the login shell: leads session and group 10, a subreaper */
    c->pgid = 400;
    c->pgid_alive = false;
    fx_fd(c, 0);
    fx_activity(c, 500, 0);
    host_run(&h);
    assert_true(said(finding(&h, "orphan-holder", 201), "(a subreaper in another session)"));
    assert_true(said(finding(&h, "orphan-holder", 301), "(its container's init)"));
    assert_true(said(finding(&h, "orphan-holder", 401), "(a subreaper in its own session"));
    for (pid_t pid = 201; pid <= 401; pid += 100)
        assert_int_equal(finding(&h, "orphan-holder", pid)->confidence, VG_CONF_HIGH);
    host_release(&h);
}

/* A multiprocessing child with a context of its own whose parent died: a leftover when idle
 * on the CPU and the GPU; busy on the GPU, only medium. */
static void test_left_multiprocessing(void **state)
{
    (void)state;
    for (unsigned util = 0; util <= 50; util += 50) {
        struct host h;
        host_init(&h, 1);
        ctx(&h, 0, 501, 3 * GiB);
        fx_util(&h.l.gpus[0], 501, util);
        struct vg_proc *p = host_proc(&h, 501, "python3",
                                      "/usr/bin/python3 -c from multiprocessing.spawn import "
                                      "spawn_main; spawn_main(tracker_fd=5, pipe_handle=9) "
                                      "--multiprocessing-fork");
        orphaned(p, 500);
        fx_fd(p, 0);
        fx_activity(p, 500, 0);
        host_run(&h);
        const struct vg_finding *f = finding(&h, "orphan-holder", 501);
        assert_non_null(f);
        assert_int_equal(f->confidence, util ? VG_CONF_MEDIUM : VG_CONF_HIGH);
        assert_true(said(f, "a multiprocessing worker by its command line"));
        assert_true(said(f, util ? "50% GPU" : "0% GPU"));
        assert_true(f->bytes_known && f->bytes == 3 * GiB);
        host_release(&h);
    }
}

/* Ranks of a torchrun whose agent died (TORCHELASTIC_RUN_ID=none). torchrun starts each rank
 * in a session of its own, so each leads its session and group: being adopted by init with a
 * launcher's rank variables is what says the job ended. One finding per rank's own job. */
static void test_left_ranks_of_dead_agent(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    for (pid_t pid = 601; pid <= 602; pid++) {
        ctx(&h, (size_t)(pid - 601), (uint32_t)pid, 10 * GiB);
        fx_util(&h.l.gpus[pid - 601], (uint32_t)pid, 0);
    }
    for (pid_t pid = 601; pid <= 602; pid++) {
        struct vg_proc *p = host_proc(&h, pid, "python", "python -u train.py");
        p->ppid = 1;
        p->parent_known = false;
        p->pgid = p->sid = pid;
        env(p, VG_ENV_LOCAL_RANK, pid == 601 ? "0" : "1");
        env(p, VG_ENV_TORCHELASTIC_RUN_ID, "none");
        fx_fd(p, (unsigned)(pid - 601));
        fx_activity(p, 500, 0);
    }
    host_run(&h);
    assert_int_equal(nfindings(&h, "orphan-holder"), 2);
    const struct vg_finding *f = finding(&h, "orphan-holder", 602);
    assert_int_equal(f->npids, 1);
    assert_int_equal(f->confidence, VG_CONF_HIGH);
    assert_int_equal(f->severity, VG_SEV_CRITICAL);
    assert_true(said(f, "a launcher's rank (LOCAL_RANK=1)"));
    assert_true(f->bytes == 10 * GiB);
    host_release(&h);
}

/* A nohup job whose login session ended: it leads its own group, ignores SIGHUP, was adopted
 * by init: not a leftover, working or idle; its DataLoader workers are children of a live
 * parent. */
static void test_left_nohup_job(void **state)
{
    (void)state;
    for (int busy = 0; busy < 2; busy++) {
        struct host h;
        host_init(&h, 1);
        ctx(&h, 0, 700, 20 * GiB);
        fx_util(&h.l.gpus[0], 700, busy ? 97 : 0);
        h.l.gpus[0].util_gpu = busy ? 97 : 0; /* its only holder: the GPU agrees */
        struct vg_proc *m = host_proc(&h, 700, "python", "python train.py");
        m->ppid = 1;
        m->parent_known = false;
        m->pgid = 700;
        m->sid = 650; /* the login shell, gone */
        m->sid_alive = false;
        m->known |= VG_PROC_K_SIGIGN;
        m->sig_ignored = 1u; /* SIGHUP */
        fx_fd(m, 0);
        fx_activity(m, 500, busy ? 480 : 0);
        for (pid_t pid = 701; pid <= 702; pid++) {
            struct vg_proc *w = host_proc(&h, pid, "pt_data_worker", "python train.py");
            w->ppid = 700;
            w->pgid = 700;
            w->sid = 650;
            w->sid_alive = false;
            w->parent_pgid = 700;
            w->parent_sid = 650;
            w->known |= VG_PROC_K_SIGIGN;
            w->sig_ignored = 1u;
            fx_fd(w, 0);
        }
        host_run(&h);
        assert_null(finding(&h, "orphan-holder", 0));
        struct vg_leftovers ls;
        const struct vg_leftover *l = verdict(&h, &ls, 700);
        assert_int_equal(l->verdict, VG_LEFT_NOT);
        assert_true(strstr(l->why_not, "leads its own process group"));
        assert_int_equal(vg_leftovers_find(&ls, 701)->verdict, VG_LEFT_NONE);
        vg_leftovers_release(&ls);
        /* idle, it is its framework's cache; working, nothing at all */
        assert_int_equal(finding(&h, "allocator-cache", 700) != NULL, !busy);
        host_release(&h);
    }
}

/* Daemons: setsid (leads its session), and fork-setsid-fork (leads nothing, its session and
 * group leader gone, no terminal) holding a context of its own. Neither is a leftover; a
 * double-fork shape with a worker's name is (a worker of a `setsid python` main that died). */
static void test_left_daemons(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 801, 1 * GiB);
    ctx(&h, 0, 811, 1 * GiB);
    fx_util(&h.l.gpus[0], 801, 0);
    fx_util(&h.l.gpus[0], 811, 0);
    struct vg_proc *s = host_proc(&h, 801, "mydaemon", "/usr/sbin/mydaemon");
    s->ppid = 1;
    s->parent_known = false;
    s->pgid = s->sid = 801;
    fx_fd(s, 0);
    struct vg_proc *d = host_proc(&h, 811, "mydaemon", "/usr/sbin/mydaemon --fork");
    orphaned(d, 810);
    d->sid = 810;
    d->sid_alive = false;
    fx_fd(d, 0);
    fx_activity(d, 500, 0);
    struct vg_proc *w = host_proc(&h, 821, "pt_data_worker", "python train.py");
    orphaned(w, 820);
    w->sid = 820;
    w->sid_alive = false;
    fx_fd(w, 0);
    fx_activity(w, 500, 0);
    host_run(&h);
    struct vg_leftovers ls;
    /* adopted, but nothing says a job of its ended: not even weighed against */
    const struct vg_leftover *l = verdict(&h, &ls, 801);
    assert_int_equal(l->verdict, VG_LEFT_NONE);
    assert_non_null(fact_of(&ls, 801, VG_LF_LEADS_SESSION));
    l = vg_leftovers_find(&ls, 811);
    assert_int_equal(l->verdict, VG_LEFT_NOT);
    assert_true(strstr(l->why_not, "daemon's shape"));
    l = vg_leftovers_find(&ls, 821);
    assert_int_equal(l->verdict, VG_LEFT_YES);
    assert_int_equal(l->confidence, VG_CONF_HIGH);
    vg_leftovers_release(&ls);
    assert_null(finding(&h, "orphan-holder", 801));
    assert_null(finding(&h, "orphan-holder", 811));
    assert_non_null(finding(&h, "orphan-holder", 821));
    host_release(&h);
}

/* A stopped process, a process ignoring SIGHUP that nothing marks as a worker (nohup in a
 * script), and a background job's main process with no worker mark (medium: may be the job
 * itself), whose idle worker is capped at medium too. */
static void test_left_stopped_nohup_script_background(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 910, 2 * GiB);
    fx_util(&h.l.gpus[0], 910, 0);
    struct vg_proc *t = host_proc(&h, 901, "pt_data_worker", "python t.py");
    orphaned(t, 900);
    t->state = 'T';
    fx_fd(t, 0);
    fx_activity(t, 500, 0);
    ctx(&h, 0, 905, 1 * GiB);
    struct vg_proc *n = host_proc(&h, 905, "python", "python serve.py");
    orphaned(n, 904);
    n->known |= VG_PROC_K_SIGIGN;
    n->sig_ignored = 1u;
    fx_fd(n, 0);
    fx_activity(n, 500, 0);
    struct vg_proc *m = host_proc(&h, 910, "python", "python job.py");
    orphaned(m, 909);
    fx_fd(m, 0);
    fx_activity(m, 500, 0);
    struct vg_proc *w = host_proc(&h, 911, "pt_data_worker", "python job.py");
    w->ppid = 910;
    w->pgid = 909;
    w->pgid_alive = false;
    w->parent_pgid = 909;
    fx_fd(w, 0);
    fx_activity(w, 500, 0);
    ctx(&h, 0, 920, 1 * GiB);
    fx_util(&h.l.gpus[0], 920, 0);
    struct vg_proc *u = host_proc(&h, 920, "python", "python lone.py");
    orphaned(u, 919);
    fx_fd(u, 0);
    fx_activity(u, 500, 0);
    host_run(&h);
    struct vg_leftovers ls;
    const struct vg_leftover *l = verdict(&h, &ls, 901);
    assert_int_equal(l->verdict, VG_LEFT_YES); /* a possible leftover, never a default target */
    assert_int_equal(l->confidence, VG_CONF_MEDIUM);
    assert_true(strstr(l->why_not, "stopped"));
    l = vg_leftovers_find(&ls, 905);
    assert_int_equal(l->verdict, VG_LEFT_NOT);
    assert_true(strstr(l->why_not, "ignores SIGHUP"));
    /* a main whose launching script exited, with a worker of its own: the job itself */
    l = vg_leftovers_find(&ls, 910);
    assert_int_equal(l->verdict, VG_LEFT_NOT);
    assert_true(strstr(l->why_not, "a job's main process with workers of its own"));
    assert_int_equal(vg_leftovers_find(&ls, 911)->verdict, VG_LEFT_NONE);
    /* the same without workers: it may be the job, or what is left of one */
    l = vg_leftovers_find(&ls, 920);
    assert_int_equal(l->verdict, VG_LEFT_YES);
    assert_int_equal(l->confidence, VG_CONF_MEDIUM);
    assert_true(strstr(l->why_not, "nothing marks it as a worker"));
    vg_leftovers_release(&ls);
    assert_null(finding(&h, "orphan-holder", 910));
    const struct vg_finding *f = finding(&h, "orphan-holder", 920);
    assert_non_null(f);
    assert_true(said(f, "PID 920 (python lone.py): leftover at medium confidence"));
    host_release(&h);
}

/*
 * The seed's case when the main led its own session (setsid, an ssh command, a Jupyter
 * kernel) and crashed: its workers have a double-forked daemon's lineage (group and session
 * leader gone, no terminal), and the driver still charges the dead main's PID on the GPU they
 * hold. Sure leftovers, and the charged memory is theirs. In a procfs that is not the initial
 * PID namespace the charge cannot be compared: said (weight 0), and the other facts still make
 * it sure. A lone double-forked daemon with a context of its own, in the same shape, is not.
 */
static void test_left_session_leader_crashed(void **state)
{
    (void)state;
    for (int ns = 0; ns < 2; ns++) {
        struct host h;
        host_init(&h, 1);
        ctx(&h, 0, 100, 4 * GiB); /* the dead main, still charged */
        for (pid_t pid = 101; pid <= 102; pid++) {
            struct vg_proc *w = host_proc(&h, pid, "pt_data_worker", "python train.py");
            orphaned(w, 100);
            w->sid = 100;
            w->sid_alive = false;
            w->libs = VG_LIB_CUDA | VG_LIB_TORCH_CUDA;
            fx_fd(w, 0);
            fx_activity(w, 500, 0);
        }
        ctx(&h, 0, 211, 1 * GiB);
        fx_util(&h.l.gpus[0], 211, 0);
        struct vg_proc *d = host_proc(&h, 211, "mydaemon", "/usr/sbin/mydaemon --fork");
        orphaned(d, 210);
        d->sid = 210;
        d->sid_alive = false;
        d->libs = VG_LIB_CUDA;
        fx_fd(d, 0);
        fx_activity(d, 500, 0);
        h.t.pidns = ns ? VG_PROC_PIDNS_NESTED : VG_PROC_PIDNS_INITIAL;
        host_run(&h);
        struct vg_leftovers ls;
        const struct vg_leftover *l = verdict(&h, &ls, 101);
        assert_int_equal(l->verdict, VG_LEFT_YES);
        assert_int_equal(l->confidence, VG_CONF_HIGH);
        assert_non_null(fact_of(&ls, 101, VG_LF_SIBLINGS));
        assert_null(fact_of(&ls, 101, VG_LF_ALONE));
        const struct vg_left_fact *c = fact_of(&ls, 102, VG_LF_CHARGES_LEADER);
        if (ns) {
            assert_null(c);
            assert_non_null(fact_of(&ls, 102, VG_LF_PIDS_FOREIGN));
        } else {
            assert_non_null(c);
            assert_int_equal(c->pid, 100);
            assert_true(c->bytes_known && c->bytes == 4 * GiB);
        }
        /* the daemon: its own context, alone in a session whose leader is gone */
        l = vg_leftovers_find(&ls, 211);
        assert_int_equal(l->verdict, VG_LEFT_NOT);
        assert_non_null(fact_of(&ls, 211, VG_LF_ALONE));
        vg_leftovers_release(&ls);
        const struct vg_finding *f = finding(&h, "orphan-holder", 101);
        assert_non_null(f);
        assert_int_equal(f->npids, 2);
        assert_int_equal(f->nverdicts, 2);
        if (!ns) {
            /* what the driver charges to the dead main is the workers': counted once */
            assert_true(f->bytes_known && f->bytes == 4 * GiB);
            assert_int_equal(f->severity, VG_SEV_CRITICAL);
            assert_true(said(f, "+3 the driver still charges 4 GiB on GPU 0"));
        }
        assert_null(finding(&h, "orphan-holder", 211));
        /* the weights in the verdicts add up to each score */
        for (size_t v = 0; v < f->nverdicts; v++) {
            int sum = 0;
            for (size_t k = 0; k < f->verdicts[v].nfacts; k++)
                sum += f->verdicts[v].facts[k].weight;
            assert_int_equal(sum, f->verdicts[v].score);
        }
        host_release(&h);
    }
}

/* A main that crashed under a parent that never reaps is a zombie: its job has ended, and its
 * workers say so; a zombie leader whose other threads still run (proc/ reads it as alive) does
 * not. */
static void test_left_zombie_leader(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    struct vg_proc *w = host_proc(&h, 301, "pt_data_worker", "python train.py");
    orphaned(w, 300);
    w->pgid_zombie = true;
    fx_fd(w, 0);
    fx_activity(w, 500, 0);
    struct vg_proc *a = host_proc(&h, 311, "pt_data_worker", "python train.py");
    a->ppid = 1;
    a->parent_known = false;
    a->pgid = 310; /* its leader runs (a zombie with live threads reads as alive) */
    fx_fd(a, 0);
    fx_activity(a, 500, 0);
    host_run(&h);
    struct vg_leftovers ls;
    const struct vg_leftover *l = verdict(&h, &ls, 301);
    assert_int_equal(l->verdict, VG_LEFT_YES);
    assert_int_equal(l->confidence, VG_CONF_HIGH);
    char text[160];
    vg_left_fact_text(h.snap, l, fact_of(&ls, 301, VG_LF_GROUP_GONE), text, sizeof(text));
    assert_string_equal(text, "its process group leader (PID 300) is a zombie (exited, not reaped)");
    assert_null(fact_of(&ls, 311, VG_LF_GROUP_GONE));
    vg_leftovers_release(&ls);
    host_release(&h);
}

/* A daemon forked (without exec) from a live CUDA program holds that program's files: the
 * context is older than its session, so it left that session on purpose. A worker of a main
 * that died in the worker's own session is the other way round. */
static void test_left_context_order(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 400, 8 * GiB);
    fx_util(&h.l.gpus[0], 400, 0);
    struct vg_proc *m = host_proc(&h, 400, "python", "python serve.py");
    fx_fd(m, 0);
    struct vg_proc *d = host_proc(&h, 421, "python", "python serve.py");
    orphaned(d, 420);
    d->sid = 420;
    d->sid_alive = false;
    d->libs = VG_LIB_CUDA;
    fx_fd(d, 0);
    fx_activity(d, 500, 0);
    h.t.pidns = VG_PROC_PIDNS_INITIAL;
    host_run(&h);
    struct vg_leftovers ls;
    const struct vg_leftover *l = verdict(&h, &ls, 421);
    const struct vg_left_fact *o = fact_of(&ls, 421, VG_LF_OLDER_CONTEXT);
    assert_non_null(o);
    assert_int_equal(o->pid, 400);
    assert_int_not_equal(l->confidence, VG_CONF_HIGH);
    vg_leftovers_release(&ls);
    host_release(&h);
}

/* Workers of a sure leftover are leftovers too, through their parent. */
static void test_left_worker_of_worker(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    struct vg_proc *a = host_proc(&h, 1001, "pt_data_worker", "python train.py");
    orphaned(a, 1000);
    fx_fd(a, 0);
    fx_activity(a, 500, 0);
    struct vg_proc *b = host_proc(&h, 1002, "python", "python helper.py");
    b->ppid = 1001;
    b->pgid = 1000;
    b->pgid_alive = false;
    b->parent_pgid = 1000;
    fx_fd(b, 0);
    fx_activity(b, 500, 0);
    host_run(&h);
    const struct vg_finding *f = finding(&h, "orphan-holder", 1002);
    assert_non_null(f);
    assert_int_equal(f->npids, 2);
    assert_int_equal(f->confidence, VG_CONF_HIGH);
    host_release(&h);
}

/* The near misses: a child of a live parent in a live job, a Jupyter kernel under its live
 * server, a process re-parented while its job's leaders live, a zombie (its own rule). */
static void test_left_near_misses(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 1110, 4 * GiB);
    struct vg_proc *c = host_proc(&h, 1101, "pt_data_worker", "python train.py");
    fx_fd(c, 0);
    struct vg_proc *k = host_proc(&h, 1110, "python", "python -m ipykernel_launcher -f k.json");
    k->pgid = k->sid = 1110; /* jupyter starts kernels in their own session */
    fx_fd(k, 0);
    struct vg_proc *r = host_proc(&h, 1120, "python", "python x.py");
    r->ppid = 1;
    r->parent_known = false;
    fx_fd(r, 0);
    struct vg_proc *z = host_proc(&h, 1130, "python", "");
    orphaned(z, 1129);
    z->state = 'Z';
    fx_fd(z, 0);
    host_run(&h);
    /* Adopted while its group's leader lives, holding inherited nodes: a crashed main under a
     * live script (`while :; do python train.py; done`) leaves exactly this. Possible, not
     * sure: medium, reported, left alone. */
    assert_int_equal(nfindings(&h, "orphan-holder"), 1);
    assert_non_null(finding(&h, "orphan-holder", 1120));
    struct vg_leftovers ls;
    assert_int_equal(verdict(&h, &ls, 1101)->verdict, VG_LEFT_NONE);
    assert_int_equal(vg_leftovers_find(&ls, 1110)->verdict, VG_LEFT_NONE);
    assert_int_equal(vg_leftovers_find(&ls, 1120)->verdict, VG_LEFT_YES);
    assert_int_equal(vg_leftovers_find(&ls, 1120)->confidence, VG_CONF_MEDIUM);
    assert_int_equal(vg_leftovers_find(&ls, 1130)->verdict, VG_LEFT_NONE);
    vg_leftovers_release(&ls);
    host_release(&h);
}

/* clean's default plan takes the sure leftovers only and says why it leaves the rest. */
static void test_left_plan(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 700, 20 * GiB);
    fx_util(&h.l.gpus[0], 700, 97);
    struct vg_proc *m = host_proc(&h, 700, "python", "python train.py");
    m->ppid = 1;
    m->parent_known = false;
    m->pgid = 700;
    m->sid_alive = false;
    fx_fd(m, 0);
    struct vg_proc *w = host_proc(&h, 801, "pt_data_worker", "python old.py");
    orphaned(w, 800);
    fx_fd(w, 0);
    fx_activity(w, 500, 0);
    struct vg_proc *u = host_proc(&h, 901, "pt_data_worker", "python busy.py");
    orphaned(u, 900);
    fx_fd(u, 0);
    fx_activity(u, 500, 300);
    host_run(&h);
    struct vg_plan_opts o = {.who = {.self = 9000, .ruid = 0}, .pidns_trusted = true};
    struct vg_plan plan;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_plan_build(h.snap, &h.fs, &o, &plan, &err), 0);
    assert_int_equal(plan.n, 3);
    assert_int_equal(plan.nsignal, 1);
    assert_int_equal(plan.nleft, 2);
    assert_int_equal(plan.nrefused, 0);
    for (size_t i = 0; i < plan.n; i++) {
        const struct vg_plan_entry *e = &plan.v[i];
        if (e->id.pid == 801) {
            assert_true(e->signal);
        } else if (e->id.pid == 700) {
            assert_true(e->leave);
            assert_int_equal(e->refusal, VG_KILL_NOT_LEFTOVER);
            assert_true(strstr(e->verdict, "leads its own process group"));
        } else {
            assert_int_equal(e->id.pid, 901);
            assert_true(e->leave);
            assert_int_equal(e->refusal, VG_KILL_UNSURE);
            assert_true(strstr(e->verdict, "it is working"));
        }
    }
    vg_plan_release(&plan);
    /* named with --pid, the nohup job is a target, with vramguard's word on it */
    o.by_pid = true;
    o.pid = 700;
    assert_int_equal(vg_plan_build(h.snap, &h.fs, &o, &plan, &err), 0);
    assert_int_equal(plan.n, 1);
    assert_true(plan.v[0].signal);
    assert_non_null(plan.v[0].verdict);
    vg_plan_release(&plan);
    host_release(&h);
}

/* ------------------------------------------------------------------------- jobs of ranks */

/* Two plain torchrun jobs (run id "none" both) in different sessions, each with one rank that
 * touched GPU 0 besides its own: two stray-contexts, not one two-rank ddp-gpu0. One job with
 * two such ranks under one agent is ddp-gpu0. */
static void test_ddp_job_identity(void **state)
{
    (void)state;
    for (int same = 0; same < 2; same++) {
        struct host h;
        host_init(&h, 3);
        for (pid_t pid = 1201; pid <= 1202; pid++) {
            ctx(&h, 0, (uint32_t)pid, 400 * MiB);
            ctx(&h, (size_t)(pid - 1200), (uint32_t)pid, 30 * GiB);
        }
        for (pid_t pid = 1201; pid <= 1202; pid++) {
            struct vg_proc *p = host_proc(&h, pid, "python", "python -u train.py");
            env(p, VG_ENV_TORCHELASTIC_RUN_ID, "none");
            env(p, VG_ENV_LOCAL_RANK, "1");
            env(p, VG_ENV_CUDA_VISIBLE_DEVICES, "0,1,2");
            /* torchrun starts each rank in a session of its own */
            p->pgid = p->sid = pid;
            if (!same) {
                /* each under its own agent, in its own session */
                p->ppid = pid - 100;
                p->parent_sid = p->parent_pgid = pid - 100;
            }
            fx_fd(p, 0);
            fx_fd(p, (unsigned)(pid - 1200));
        }
        host_run(&h);
        if (same) {
            const struct vg_finding *f = finding(&h, "ddp-gpu0", 0);
            assert_non_null(f);
            assert_int_equal(f->npids, 2);
            assert_non_null(strstr(f->title, "2 ranks of one job (launcher PID 2)"));
            assert_int_equal(nfindings(&h, "stray-contexts"), 0);
        } else {
            assert_null(finding(&h, "ddp-gpu0", 0));
            assert_int_equal(nfindings(&h, "stray-contexts"), 2);
        }
        host_release(&h);
    }
}

/* --------------------------------------------------------------------- visible and order */

/* A container given GPU 3 and GPU 1 (in that order in NVIDIA_VISIBLE_DEVICES) with
 * CUDA_VISIBLE_DEVICES=0: its CUDA numbers them by bus, so cuda:0 is GPU 1. Memory on GPU 1 is
 * inside; on GPU 3 it is outside. */
static void test_container_numbering(void **state)
{
    (void)state;
    for (size_t on = 1; on <= 3; on += 2) {
        struct host h;
        host_init(&h, 4);
        ctx(&h, on, 1300, 4 * GiB);
        struct vg_proc *p = host_proc(&h, 1300, "python", "python train.py");
        p->container_id = fx_strdup("0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
                                    "cdef");
        char nvd[80];
        snprintf(nvd, sizeof(nvd), "%s,%s", uuids[3], uuids[1]);
        env(p, VG_ENV_NVIDIA_VISIBLE_DEVICES, nvd);
        env(p, VG_ENV_CUDA_VISIBLE_DEVICES, "0");
        fx_fd(p, (unsigned)on);
        host_run(&h);
        const struct vg_finding *f = finding(&h, "outside-visible", 1300);
        if (on == 1) {
            assert_null(f);
        } else {
            assert_non_null(f);
            assert_true(said(f, "it runs in container 0123456789ab, which was given GPU 1 and "
                                "GPU 3"));
            assert_true(said(f, "CUDA_VISIBLE_DEVICES=0 gives cuda:0 = GPU 1"));
        }
        host_release(&h);
    }
}

/* The same with a fastest-first order on mixed GPUs, "all", host indices, and a MIG UUID. */
static void test_container_numbering_forms(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 4);
    h.l.gpus[3].cc_major = 9;
    h.l.gpus[1].cc_major = 7;
    fx_mig(&h.l.gpus[2], "MIG-aaaaaaaa-0000", 10 * GiB);
    fx_mig(&h.l.gpus[2], "MIG-bbbbbbbb-0000", 10 * GiB);
    ctx(&h, 3, 1401, 4 * GiB); /* fastest first: cuda:0 is GPU 3 (cc 9.0) */
    ctx(&h, 1, 1402, 4 * GiB); /* PCI_BUS_ID: cuda:0 is GPU 1 */
    ctx(&h, 0, 1403, 4 * GiB); /* "all": CUDA_VISIBLE_DEVICES=0 is GPU 0 */
    fx_gproc(&h.l.gpus[2].mig[1], 1404, 2 * GiB, VG_PTYPE_COMPUTE); /* given that MIG device */
    const char *cdo[] = {NULL, "PCI_BUS_ID", NULL, NULL};
    const char *nvd[] = {"3,1", "1,3", "all", "MIG-bbbbbbbb-0000"};
    for (pid_t pid = 1401; pid <= 1404; pid++) {
        struct vg_proc *p = host_proc(&h, pid, "python", "python train.py");
        p->container_id = fx_strdup("abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd");
        env(p, VG_ENV_NVIDIA_VISIBLE_DEVICES, nvd[pid - 1401]);
        env(p, VG_ENV_CUDA_VISIBLE_DEVICES, "0");
        if (cdo[pid - 1401])
            env(p, VG_ENV_CUDA_DEVICE_ORDER, cdo[pid - 1401]);
        fx_fd(p, pid == 1401 ? 3 : pid == 1402 ? 1 : pid == 1403 ? 0 : 2);
    }
    host_run(&h);
    assert_null(finding(&h, "outside-visible", 0));
    host_release(&h);
}

/* outside-visible, invalid-visible and order-mismatch on the host. */
static void test_visible_rules(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 3);
    h.l.gpus[0].cc_major = 7; /* mixed models: FASTEST_FIRST (1, 2, 0) differs from bus order */
    free(h.l.gpus[0].name);
    h.l.gpus[0].name = fx_strdup("Tesla T4");
    ctx(&h, 1, 1501, 3 * GiB); /* allowed only GPU 0 */
    ctx(&h, 1, 1502, 3 * GiB); /* "0,,1": CUDA stops at the empty entry; cuda:0 is GPU 1 */
    ctx(&h, 1, 1503, 3 * GiB); /* indices without PCI_BUS_ID on mixed GPUs */
    struct vg_proc *a = host_proc(&h, 1501, "python", "python a.py");
    env(a, VG_ENV_CUDA_VISIBLE_DEVICES, uuids[0]);
    fx_fd(a, 1);
    struct vg_proc *b = host_proc(&h, 1502, "python", "python b.py");
    env(b, VG_ENV_CUDA_VISIBLE_DEVICES, "0,,1");
    fx_fd(b, 1);
    struct vg_proc *c = host_proc(&h, 1503, "python", "python c.py");
    env(c, VG_ENV_CUDA_VISIBLE_DEVICES, "0");
    fx_fd(c, 1);
    host_run(&h);
    const struct vg_finding *f = finding(&h, "outside-visible", 1501);
    assert_non_null(f);
    assert_true(said(f, "CUDA numbers this host's GPUs"));
    assert_null(finding(&h, "outside-visible", 1502));
    assert_non_null(finding(&h, "invalid-visible", 1502));
    assert_null(finding(&h, "invalid-visible", 1501));
    assert_non_null(finding(&h, "order-mismatch", 1503));
    assert_null(finding(&h, "order-mismatch", 1501)); /* a UUID means the same to both */
    host_release(&h);
}

/* ------------------------------------------------------------------------ contexts */

/* stray-contexts says what the environment said, only as far as it was read. */
static void test_stray_contexts_env(void **state)
{
    (void)state;
    for (int read = 0; read < 2; read++) {
        struct host h;
        host_init(&h, 2);
        ctx(&h, 0, 1600, 30 * GiB);
        ctx(&h, 1, 1600, 300 * MiB);
        struct vg_proc *p = host_proc(&h, 1600, "python", "python train.py");
        if (!read)
            p->known &= ~(unsigned)VG_PROC_K_ENV;
        fx_fd(p, 0);
        fx_fd(p, 1);
        host_run(&h);
        const struct vg_finding *f = finding(&h, "stray-contexts", 1600);
        assert_non_null(f);
        assert_true(said(f, read ? "CUDA_VISIBLE_DEVICES is unset in its environment"
                                 : "its environment could not be read"));
        assert_false(said(f, read ? "could not be read" : "is unset"));
        host_release(&h);
    }
}

/* nccl-all-gpus and preallocation, and their near misses. */
static void test_nccl_and_preallocation(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    ctx(&h, 0, 1701, 20 * GiB);
    ctx(&h, 1, 1701, 400 * MiB);
    ctx(&h, 0, 1702, 70 * GiB);
    ctx(&h, 1, 1703, 30 * GiB); /* torch, one GPU: neither */
    struct vg_proc *n = host_proc(&h, 1701, "python", "python ddp.py");
    n->libs = VG_LIB_NCCL | VG_LIB_CUDA;
    fx_fd(n, 0);
    fx_fd(n, 1);
    struct vg_proc *t = host_proc(&h, 1702, "python", "python tf.py");
    t->libs = VG_LIB_TENSORFLOW | VG_LIB_CUDA;
    fx_fd(t, 0);
    struct vg_proc *o = host_proc(&h, 1703, "python", "python torch.py");
    o->libs = VG_LIB_TORCH_CUDA | VG_LIB_CUDA;
    fx_fd(o, 1);
    host_run(&h);
    assert_non_null(finding(&h, "nccl-all-gpus", 1701));
    assert_null(finding(&h, "stray-contexts", 1701)); /* reported once, by the specific rule */
    const struct vg_finding *f = finding(&h, "preallocation", 1702);
    assert_non_null(f);
    assert_true(fixed(f, "TF_FORCE_GPU_ALLOW_GROWTH=true"));
    assert_null(finding(&h, "preallocation", 1703));
    assert_null(finding(&h, "nccl-all-gpus", 1703));
    host_release(&h);
}

/* --------------------------------------------------------------- processes that cannot go */

static void test_zombie_dstate_foreign(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 1801, 2 * GiB);
    ctx(&h, 0, 999999, 1 * GiB); /* not in this /proc */
    struct vg_proc *z = host_proc(&h, 1801, "python", "");
    z->state = 'Z';
    z->ppid = 1800;
    struct vg_proc *d = host_proc(&h, 1802, "python", "python stuck.py");
    d->state = 'D';
    fx_fd(d, 0);
    struct vg_proc *s = host_proc(&h, 1803, "python", "python fine.py");
    fx_fd(s, 0);
    host_run(&h);
    const struct vg_finding *f = finding(&h, "zombie-holder", 1801);
    assert_non_null(f);
    assert_true(fixed(f, "act on the parent, PID 1800"));
    assert_non_null(finding(&h, "d-state-holder", 1802));
    assert_non_null(finding(&h, "foreign-pid", 999999));
    assert_null(finding(&h, "d-state-holder", 1803));
    assert_null(finding(&h, "zombie-holder", 1803));
    assert_null(finding(&h, "stale-pid", 0)); /* a zombie has closed its files: not stale */
    host_release(&h);
}

/* The driver lists PID 1900 on GPU 0, but the process now under that PID holds no node of
 * GPU 0 although its descriptors were read: a stale entry, never a target, not orphan-holder,
 * not foreign-pid. */
static void test_stale_pid(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    ctx(&h, 0, 1900, 5 * GiB);
    ctx(&h, 1, 1901, 5 * GiB); /* fds unread: unconfirmed but kept */
    struct vg_proc *p = host_proc(&h, 1900, "bash", "bash");
    orphaned(p, 1899);
    p->known |= VG_PROC_K_FDS; /* read: nothing NVIDIA */
    fx_activity(p, 500, 0);
    host_proc(&h, 1901, "python", "python other.py");
    host_run(&h);
    const struct vg_finding *f = finding(&h, "stale-pid", 1900);
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_WARNING);
    assert_true(fixed(f, "do not stop PID 1900"));
    assert_null(finding(&h, "orphan-holder", 1900));
    assert_null(finding(&h, "foreign-pid", 1900));
    assert_null(finding(&h, "stale-pid", 1901));
    struct vg_plan_opts o = {.who = {.self = 9000}, .pidns_trusted = true, .by_gpu = true};
    struct vg_plan plan;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_plan_build(h.snap, &h.fs, &o, &plan, &err), 0);
    assert_int_equal(plan.n, 1);
    assert_false(plan.v[0].signal);
    assert_int_equal(plan.v[0].refusal, VG_KILL_STALE);
    vg_plan_release(&plan);
    o.by_gpu = false;
    assert_int_equal(vg_plan_build(h.snap, &h.fs, &o, &plan, &err), 0);
    assert_int_equal(plan.n, 0);
    vg_plan_release(&plan);
    host_release(&h);
}

/* ------------------------------------------------------------- unexplained and unseen */

/* unattributed offers a reset only when nothing could hide a holder. */
static void test_unattributed_visibility(void **state)
{
    (void)state;
    for (int hide = 0; hide < 3; hide++) {
        struct host h;
        host_init(&h, 1);
        h.extra[0] = 8 * GiB;
        if (hide == 1)
            h.t.n_fd_unread = 1234;
        if (hide == 2)
            h.l.gpus[0].known &= ~(unsigned)VG_GPU_K_MINOR;
        host_run(&h);
        const struct vg_finding *f = finding(&h, "unattributed", 0);
        assert_non_null(f);
        assert_int_equal(said(f, "a reset is possible now"), hide == 0);
        assert_int_equal(vg_plan_reset_needed(h.snap, 0, h.ro.unattributed_min), hide == 0);
        if (hide == 1)
            assert_true(said(f, "the descriptors of 1234 processes could not be read"));
        if (hide == 2)
            assert_true(said(f, "its minor number is unknown"));
        assert_int_equal(vg_snap_gpu_unchecked(h.snap, 0) != 0, hide != 0);
        host_release(&h);
    }
}

/* A node of a minor no GPU has, with a GPU whose minor is unknown: unmatched-node, naming the
 * GPU that may be its. */
static void test_unmatched_node(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    h.l.gpus[1].known &= ~(unsigned)VG_GPU_K_MINOR;
    h.l.gpus[1].lost = true;
    struct vg_proc *p = host_proc(&h, 2001, "python", "python train.py");
    fx_fd(p, 7);
    struct vg_proc *q = host_proc(&h, 2002, "python", "python fine.py");
    fx_fd(q, 0);
    host_run(&h);
    const struct vg_finding *f = finding(&h, "unmatched-node", 2001);
    assert_non_null(f);
    assert_int_equal(f->npids, 1);
    assert_true(said(f, "holds /dev/nvidia7"));
    assert_true(said(f, "is lost: its minor number is unknown, so these may be its holders"));
    host_release(&h);
}

/* unattributed weighs the processes that hold the GPU's node without a context: CUDA opens the
 * node of every visible GPU, so the ranks of a live DDP job (contexts on GPUs 0 and 2) and a
 * DataLoader worker of a live main process hold GPU 1's node without being its holders, and an
 * NVML monitor reads every GPU; none of them is named or told to stop. A worker left over by a
 * dead job, adopted by the shell (a subreaper in its own session, so its parent lives), is the
 * likely holder, and so is a rank whose job ended. */
static void test_unattributed_blame(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 3);
    h.extra[1] = 12 * GiB;
    ctx(&h, 0, 3001, 20 * GiB);
    ctx(&h, 2, 3002, 20 * GiB);
    ctx(&h, 0, 3010, 10 * GiB);
    host_proc(&h, 3000, "torchrun", "torchrun --nproc-per-node 2 train.py");
    for (pid_t r = 3001; r <= 3002; r++) {
        struct vg_proc *p = host_proc(&h, r, "python", "python train.py");
        p->ppid = 3000;
        env(p, VG_ENV_LOCAL_RANK, r == 3001 ? "0" : "1");
        fx_fd(p, r == 3001 ? 0 : 2);
        fx_fd(p, 1); /* CUDA opened every visible GPU's node */
    }
    fx_fd(host_proc(&h, 3010, "python", "python eval.py"), 0);
    struct vg_proc *w = host_proc(&h, 3011, "pt_data_worker", "python eval.py");
    w->ppid = 3010; /* its main process lives */
    fx_fd(w, 0);
    fx_fd(w, 1);
    struct vg_proc *m = host_proc(&h, 3020, "gpu-monitor", "gpu-monitor --all");
    m->ppid = 1; /* a daemon that reads every GPU through NVML */
    m->parent_known = false;
    m->pgid = m->sid = 3020;
    m->libs = VG_LIB_NVML;
    fx_fd(m, 0);
    fx_fd(m, 1);
    fx_fd(m, 2);
    host_run(&h);
    const struct vg_finding *f = finding(&h, "unattributed", 0);
    assert_non_null(f);
    assert_int_equal(f->npids, 0);
    assert_true(said(f, "PID 3001 (python train.py) has the device node open but its context is "
                        "on GPU 0"));
    assert_true(said(f, "PID 3011 (python eval.py) has the device node open as a process of a "
                        "live job (its parent PID 3010"));
    assert_true(said(f, "PID 3020 (gpu-monitor --all) has the device node open but maps NVML"));
    assert_true(said(f, "do not stop them for this"));
    assert_false(fixed(f, "stop"));
    assert_true(fixed(f, "look again in a minute"));
    host_release(&h);

    /* The same host with a worker of a dead job on GPU 1, adopted by the shell (PID 10, which
     * leads another group), and a rank whose agent died: these two, and only these. */
    host_init(&h, 3);
    h.extra[1] = 12 * GiB;
    ctx(&h, 0, 3001, 20 * GiB);
    ctx(&h, 2, 3102, 3 * GiB);
    host_proc(&h, 3000, "torchrun", "torchrun --nproc-per-node 2 train.py");
    struct vg_proc *r = host_proc(&h, 3001, "python", "python train.py");
    r->ppid = 3000;
    env(r, VG_ENV_LOCAL_RANK, "0");
    fx_fd(r, 0);
    fx_fd(r, 1);
    struct vg_proc *o = host_proc(&h, 3101, "pt_data_worker", "python old.py");
    o->ppid = 10;
    o->pgid = 3100;
    o->pgid_alive = false;
    fx_fd(o, 1);
    fx_activity(o, 500, 0);
    struct vg_proc *d = host_proc(&h, 3102, "python", "python old.py");
    orphaned(d, 3100);
    env(d, VG_ENV_LOCAL_RANK, "1");
    fx_fd(d, 1);
    fx_fd(d, 2);
    fx_activity(d, 500, 0);
    fx_util(&h.l.gpus[2], 3102, 0);
    h.l.gpus[2].util_gpu = 0;
    host_run(&h);
    f = finding(&h, "unattributed", 0);
    assert_non_null(f);
    assert_int_equal(f->npids, 2);
    assert_int_equal(f->pids[0], 3101);
    assert_int_equal(f->pids[1], 3102);
    assert_true(said(f, "PID 3101 (python old.py) holds the device node without a context"));
    assert_true(said(f, "PID 3001 (python train.py) has the device node open but its context"));
    assert_true(fixed(f, "stop PID 3101, PID 3102 ("));
    assert_false(fixed(f, "3001"));
    host_release(&h);
}

/* ------------------------------------------------------------------- idle and cache */

static void test_allocator_cache(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    ctx(&h, 0, 2101, 20 * GiB);
    ctx(&h, 1, 2102, 20 * GiB);
    ctx(&h, 1, 2103, 512 * MiB); /* a bare context: not a cache worth a word */
    h.l.gpus[0].util_gpu = 0;    /* the GPU agrees: nothing on it worked */
    fx_util(&h.l.gpus[0], 2101, 0);
    fx_util(&h.l.gpus[1], 2102, 35);
    fx_util(&h.l.gpus[1], 2103, 0);
    struct vg_proc *a = host_proc(&h, 2101, "python", "python notebook.py");
    a->libs = VG_LIB_TORCH_CUDA | VG_LIB_CUDA;
    fx_fd(a, 0);
    fx_fd(host_proc(&h, 2102, "python", "python train.py"), 1);
    fx_fd(host_proc(&h, 2103, "python", "python small.py"), 1);
    host_run(&h);
    const struct vg_finding *f = finding(&h, "allocator-cache", 2101);
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_INFO);
    assert_true(said(f, "PyTorch is loaded"));
    assert_true(said(f, "comes back when it exits"));
    assert_true(fixed(f, "torch.cuda.empty_cache()"));
    assert_true(fixed(f, "PYTORCH_CUDA_ALLOC_CONF"));
    assert_null(finding(&h, "allocator-cache", 2102));
    assert_null(finding(&h, "allocator-cache", 2103));
    host_release(&h);

    /* no utilisation from the driver: nothing to say */
    host_init(&h, 1);
    ctx(&h, 0, 2201, 20 * GiB);
    fx_fd(host_proc(&h, 2201, "python", "python x.py"), 0);
    host_run(&h);
    assert_null(finding(&h, "allocator-cache", 0));
    host_release(&h);
}

/* Idleness needs real 0% samples the GPU's own figures do not contradict: no sample is unknown
 * (the driver answers NOT_FOUND for busy processes too), a busy GPU whose only holder shows 0%
 * did not get its work from nowhere; and a PID the driver names is not its holder on that word
 * alone: a kernel thread (the stale entry's reused PID, whose descriptors an ordinary user
 * cannot read) or a process holding no node and mapping no CUDA gets nothing. */
static void test_allocator_cache_silence(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 4);
    ctx(&h, 0, 2401, 20 * GiB); /* no sample; the GPU at 10% */
    ctx(&h, 1, 2402, 20 * GiB); /* 0% samples; the GPU at 25%, it its only holder */
    ctx(&h, 2, 2403, 20 * GiB); /* a kernel thread, 0% */
    ctx(&h, 2, 2404, 20 * GiB); /* named by the driver only, 0% */
    ctx(&h, 3, 2405, 20 * GiB); /* 0% while 2406 works: the GPU's work is 2406's */
    ctx(&h, 3, 2406, 20 * GiB);
    h.l.gpus[0].known |= VG_GPU_K_PROC_UTIL; /* samples read, none for 2401 */
    h.l.gpus[1].util_gpu = 25;
    fx_util(&h.l.gpus[1], 2402, 0);
    h.l.gpus[2].util_gpu = 0;
    fx_util(&h.l.gpus[2], 2403, 0);
    fx_util(&h.l.gpus[2], 2404, 0);
    h.l.gpus[3].util_gpu = 30;
    fx_util(&h.l.gpus[3], 2405, 0);
    fx_util(&h.l.gpus[3], 2406, 60);
    fx_fd(host_proc(&h, 2401, "python", "python train.py"), 0);
    fx_fd(host_proc(&h, 2402, "python", "python train.py"), 1);
    struct vg_proc *k = host_proc(&h, 2403, "kworker/3:1", "");
    k->ppid = 2;
    k->flags = VG_PROC_PF_KTHREAD;
    k->known &= ~(unsigned)VG_PROC_K_MAPS;
    struct vg_proc *named = host_proc(&h, 2404, "bash", "bash");
    named->libs = 0; /* maps read: no CUDA */
    fx_fd(host_proc(&h, 2405, "python", "python cache.py"), 3);
    fx_fd(host_proc(&h, 2406, "python", "python train.py"), 3);
    host_run(&h);
    assert_null(finding(&h, "allocator-cache", 2401));
    assert_null(finding(&h, "allocator-cache", 2402));
    assert_null(finding(&h, "allocator-cache", 2403));
    assert_null(finding(&h, "allocator-cache", 2404));
    assert_non_null(finding(&h, "allocator-cache", 2405));
    assert_null(finding(&h, "allocator-cache", 2406));
    host_release(&h);
}

static void test_idle_holder(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    ctx(&h, 0, 2301, 20 * GiB);
    fx_util(&h.l.gpus[0], 2301, 0);
    fx_fd(host_proc(&h, 2301, "python", "python notebook.py"), 0);
    struct vg_idle_info idle[] = {{.pid = 2301, .gpu = 0, .idle_ms = 2 * 3600 * 1000}};
    h.ro.idle = idle;
    h.ro.nidle = 1;
    host_run(&h);
    assert_non_null(finding(&h, "idle-holder", 2301));
    assert_null(finding(&h, "allocator-cache", 2301)); /* the long view speaks instead */
    host_release(&h);
}

/* Which PIDs and GPUs a finding names: each once, whatever order they were added in. */
static void test_finding_names(void **state)
{
    (void)state;
    struct vg_findings out;
    vg_findings_init(&out);
    struct vg_finding *f = vg_finding_add(&out, "orphan-holder", VG_SEV_WARNING);
    assert_non_null(f);
    assert_false(vg_finding_names_pid(f, 1)); /* none yet */
    assert_false(vg_finding_names_gpu(f, 0));
    for (pid_t p = 100; p < 140; p++) /* past the first growths */
        vg_finding_pid(&out, f, p);
    vg_finding_pid(&out, f, 120); /* again: still once */
    vg_finding_pid(&out, f, -1);  /* a PID past INT_MAX as a uint32_t reads */
    vg_finding_gpu(&out, f, 3);
    vg_finding_gpu(&out, f, 3);
    assert_int_equal(out.err, 0);
    assert_int_equal(f->npids, 41);
    assert_int_equal(f->ngpus, 1);
    assert_true(vg_finding_names_pid(f, 100));
    assert_true(vg_finding_names_pid(f, 139));
    assert_true(vg_finding_names_pid(f, -1));
    assert_false(vg_finding_names_pid(f, 140));
    assert_true(vg_finding_names_gpu(f, 3));
    assert_false(vg_finding_names_gpu(f, 0));
    assert_true(vg_findings_has_pid(&out, "orphan-holder", 120, 3));
    assert_true(vg_findings_has_pid(&out, "orphan-holder", 120, VG_SNAP_NO_GPU));
    assert_false(vg_findings_has_pid(&out, "orphan-holder", 120, 0));
    assert_false(vg_findings_has_pid(&out, "zombie-holder", 120, 3));
    vg_findings_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finding_names),
        cmocka_unit_test(test_left_dataloader_init),
        cmocka_unit_test(test_left_kill_line_every_pid),
        cmocka_unit_test(test_left_working_or_unmeasured),
        cmocka_unit_test(test_left_adopters),
        cmocka_unit_test(test_left_multiprocessing),
        cmocka_unit_test(test_left_ranks_of_dead_agent),
        cmocka_unit_test(test_left_nohup_job),
        cmocka_unit_test(test_left_daemons),
        cmocka_unit_test(test_left_stopped_nohup_script_background),
        cmocka_unit_test(test_left_session_leader_crashed),
        cmocka_unit_test(test_left_zombie_leader),
        cmocka_unit_test(test_left_context_order),
        cmocka_unit_test(test_left_worker_of_worker),
        cmocka_unit_test(test_left_near_misses),
        cmocka_unit_test(test_left_plan),
        cmocka_unit_test(test_ddp_job_identity),
        cmocka_unit_test(test_container_numbering),
        cmocka_unit_test(test_container_numbering_forms),
        cmocka_unit_test(test_visible_rules),
        cmocka_unit_test(test_stray_contexts_env),
        cmocka_unit_test(test_nccl_and_preallocation),
        cmocka_unit_test(test_zombie_dstate_foreign),
        cmocka_unit_test(test_stale_pid),
        cmocka_unit_test(test_unattributed_visibility),
        cmocka_unit_test(test_unattributed_blame),
        cmocka_unit_test(test_unmatched_node),
        cmocka_unit_test(test_allocator_cache),
        cmocka_unit_test(test_allocator_cache_silence),
        cmocka_unit_test(test_idle_holder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
