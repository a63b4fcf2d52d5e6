/*
 * The lifecycle fuzzer, synthetic part (issue 25): random process trees, each run through a
 * small model of how Linux and the driver behave, turned into the snapshot the /proc scan and
 * NVML would have given after the tree's events, and labelled by construction: which job each
 * process belongs to, which processes are job roots, and which roots are gone. The leftover
 * model (rules.h) and clean's default plan (act/plan.h) are then checked against the labels:
 *
 *   P1  clean's default plan (orphans only, no filters) never signals a job root, nor any
 *       process of a job whose root lives;
 *   P2  a live process (not a root) whose job's root is gone, holding device fds it inherited
 *       from that root while the driver still charges the root's PID with the memory, and not
 *       working, is a leftover (VG_LEFT_YES); when it was measured idle, of high confidence;
 *   P3  no process the labels call healthy (a root, or one whose job's root lives) is a
 *       leftover of high confidence.
 *
 * What the simulation models (fz_simulate, fz_die): fork (with or without exec: CUDA opens
 * its descriptors close-on-exec, so exec drops the inherited ones and the mapped libcuda),
 * setsid and job-control setpgid right after fork, the double-fork daemon, SIGHUP ignored
 * (inherited), a CUDA context (the process's own driver listing, its device fds, libcuda
 * mapped), exits in any order: a dead process's children go to the nearest live subreaper
 * ancestor or to init, a dead process stays a zombie (state Z, its /proc entry and so its
 * group and session leadership visible) until its parent reaps it (init, a subreaper and the
 * shell reap at once), a session leader with a terminal (the login shell) hangs its session up
 * (the terminal is gone for all, SIGHUP kills whoever does not ignore it). The driver keeps a
 * context, listed under the PID that made it, for as long as a live process holds one of its
 * descriptors; then the listing disappears.
 *
 * A tree is a list of events in a small text form that is also its reproducer:
 *
 *   reaper 2; shell 3; fork 3 4 exec pgrp; ctx 4 0; fork 4 5; exit 4; busy 5
 *
 * Words: "reaper P" (a subreaper under init, its own session: systemd --user), "shell P [sub]"
 * (a login shell on a terminal under the reaper or init; sub: it is a subreaper too), "fork P C
 * [exec] [pgrp] [setsid] [nohup]" (P forks C, which may exec, lead its own group, its own
 * session, ignore SIGHUP), "daemon P C D [exec]" (the double fork: D is the daemon), "ctx P G"
 * (P opens a context on GPU G), "hup P" (P ignores SIGHUP from now on), "close P" (P closes
 * the device fds it inherited), "exit P" (exits or is killed), "reap P" (its parent waits for
 * the zombie P), "busy P", "unmeasured P" (at the snapshot; default: measured idle). Pids are
 * given, so that a shrunk tree replays the same; an event whose process is gone is skipped.
 *
 * Labels: a process the shell or the reaper forks is a job root, and so is one forked with
 * setsid and a daemon; every other process belongs to its parent's job. P2 asks for the dead
 * root's own context (the one the driver lists under the root's PID) and leaves out processes
 * that are roots themselves (P3 calls those healthy: a daemon forked without exec holds its
 * launcher's descriptors).
 *
 * A failing random tree is shrunk (events and flags dropped while the same property still fails
 * with the same verdict and reason) and printed in that form with the seed, one per class of
 * failure (property, verdict, reason); such trees are kept below as fixed cases, which always
 * run. Environment:
 *   VG_FUZZ_SEED=N         the random trees' seed (default 1)
 *   VG_FUZZ_TREES=N        how many (default 3000; 150 under VG_VALGRIND)
 *   VG_FUZZ_CASE='...'     run this one tree (a reproducer) in place of the random ones, and
 *                          print its final process table
 *   VG_FUZZ_REPORT_ONLY=1  print every failure but do not fail the test (while the leftover
 *                          model is known to be wrong on some shapes); strict by default
 *   VG_FUZZ_VERBOSE=1      print every class of failure (default: at most 16)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "act/plan.h"
#include "rules/rules.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

#define FZ_MAXP 64 /* pids 1..63: a pid set is one 64-bit word */
#define FZ_MAXEV 96
#define FZ_NGPU 2
#define FZ_TTY 34816 /* pts/0 */

/* ------------------------------------------------------------------------------ events */

enum fz_op {
    FZ_REAPER,     /* a: a subreaper under init in a session of its own (systemd --user) */
    FZ_SHELL,      /* a: a login shell on a terminal, under the reaper or init; flag SUB */
    FZ_FORK,       /* a forks b; flags EXEC, PGRP (b leads its own group), SETSID, NOHUP */
    FZ_DAEMON,     /* a forks b, b setsid()s and forks c, b exits (a reaps it); flag EXEC */
    FZ_CTX,        /* a opens a CUDA context on GPU b */
    FZ_HUP,        /* a ignores SIGHUP from now on */
    FZ_EXIT,       /* a exits (or is killed) */
    FZ_REAP,       /* a's parent waits for it (a zombie) */
    FZ_BUSY,       /* a works (CPU, and GPU when it has a context) */
    FZ_UNMEASURED, /* whether a works was not measured */
    FZ_CLOSE,      /* a closes the device descriptors it inherited (keeps its own context's) */
};

enum {
    FZ_EXEC = 1u << 0,
    FZ_PGRP = 1u << 1,
    FZ_SETSID = 1u << 2,
    FZ_NOHUP = 1u << 3,
    FZ_SUB = 1u << 4
};

struct fz_ev {
    enum fz_op op;
    int a, b, c;
    unsigned flags;
};

struct fz_tree {
    struct fz_ev ev[FZ_MAXEV];
    size_t n;
};

static const char *const fz_op_names[] = {"reaper", "shell", "fork", "daemon",     "ctx",  "hup",
                                          "exit",   "reap",  "busy", "unmeasured", "close"};

/* The tree as its reproducer text. */
static void fz_format(const struct fz_tree *t, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < t->n; i++) {
        const struct fz_ev *e = &t->ev[i];
        char one[96];
        int k = snprintf(one, sizeof(one), "%s%s %d", i ? "; " : "", fz_op_names[e->op], e->a);
        if (e->op == FZ_FORK || e->op == FZ_DAEMON || e->op == FZ_CTX)
            k += snprintf(one + k, sizeof(one) - (size_t)k, " %d", e->b);
        if (e->op == FZ_DAEMON)
            k += snprintf(one + k, sizeof(one) - (size_t)k, " %d", e->c);
        static const char *const fl[] = {" exec", " pgrp", " setsid", " nohup", " sub"};
        for (unsigned b = 0; b < 5; b++)
            if (e->flags & (1u << b))
                k += snprintf(one + k, sizeof(one) - (size_t)k, "%s", fl[b]);
        if (k < 0 || len + (size_t)k + 1 > cap)
            return;
        memcpy(out + len, one, (size_t)k + 1);
        len += (size_t)k;
    }
}

static bool fz_num(const char *s, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < 0 || x >= FZ_MAXP)
        return false;
    *v = (int)x;
    return true;
}

/* Parse a reproducer: events separated by ';', each "word pid [pid...] [flag...]". */
static bool fz_parse(const char *text, struct fz_tree *t)
{
    char buf[4096];
    if (strlen(text) >= sizeof(buf))
        return false;
    memcpy(buf, text, strlen(text) + 1);
    t->n = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *tok[8], *s2 = NULL;
        size_t nt = 0;
        for (char *w = strtok_r(item, " \t\n", &s2); w && nt < 8; w = strtok_r(NULL, " \t\n", &s2))
            tok[nt++] = w;
        if (!nt)
            continue;
        if (t->n == FZ_MAXEV)
            return false;
        struct fz_ev e = {0};
        size_t op = 0;
        while (op < sizeof(fz_op_names) / sizeof(fz_op_names[0]) && strcmp(tok[0], fz_op_names[op]))
            op++;
        if (op == sizeof(fz_op_names) / sizeof(fz_op_names[0]))
            return false;
        e.op = (enum fz_op)op;
        size_t want = e.op == FZ_DAEMON ? 3 : e.op == FZ_FORK || e.op == FZ_CTX ? 2 : 1;
        if (nt < 1 + want || !fz_num(tok[1], &e.a) || (want > 1 && !fz_num(tok[2], &e.b)) ||
            (want > 2 && !fz_num(tok[3], &e.c)))
            return false;
        for (size_t k = 1 + want; k < nt; k++) {
            if (!strcmp(tok[k], "exec"))
                e.flags |= FZ_EXEC;
            else if (!strcmp(tok[k], "pgrp"))
                e.flags |= FZ_PGRP;
            else if (!strcmp(tok[k], "setsid"))
                e.flags |= FZ_SETSID;
            else if (!strcmp(tok[k], "nohup"))
                e.flags |= FZ_NOHUP;
            else if (!strcmp(tok[k], "sub"))
                e.flags |= FZ_SUB;
            else
                return false;
        }
        t->ev[t->n++] = e;
    }
    return true;
}

/* --------------------------------------------------------------------------- simulation */

enum fz_act { FZ_IDLE, FZ_WORKING, FZ_UNKNOWN };

struct fz_proc {
    char st; /* 0: no such pid (never made, or reaped); 'S' alive; 'Z' zombie */
    int ppid, pgid, sid, tty;
    bool infra;     /* init, the reaper, the shell: never a job, hold nothing */
    bool subreaper; /* PR_SET_CHILD_SUBREAPER */
    bool hup_ign;
    bool cuda;      /* maps libcuda */
    int ctx_gpu;    /* its own context's GPU, -1 none (the context outlives it while held) */
    uint64_t fdref; /* the contexts (by owner pid) whose descriptors it holds */
    bool execed;    /* ran exec after fork (its command line is its own) */
    int cmd;        /* whose exec its command line is: its own, or an ancestor's */
    int job;        /* label: its job's root (0 for infrastructure) */
    bool root;      /* label: a job root */
    unsigned born;  /* creation order, for start times */
    enum fz_act act;
};

struct fz_sim {
    struct fz_proc p[FZ_MAXP];
    unsigned nborn;
    bool any_reaper;
};

/* Whom the kernel gives a dying process's children: the nearest live subreaper among its
 * ancestors (find_new_reaper() skips ones that are exiting), else init. */
static int fz_new_parent(const struct fz_sim *s, int dying)
{
    for (int a = s->p[dying].ppid; a > 1; a = s->p[a].ppid)
        if (s->p[a].st == 'S' && s->p[a].subreaper)
            return a;
    return 1;
}

static void fz_die(struct fz_sim *s, int pid);

/* pid's parent waited for it, or reaps every child at once (init, a subreaper, the shell). */
static void fz_maybe_autoreap(struct fz_sim *s, int pid)
{
    if (s->p[pid].st == 'Z' && s->p[s->p[pid].ppid].infra)
        s->p[pid].st = 0;
}

static void fz_die(struct fz_sim *s, int pid)
{
    struct fz_proc *d = &s->p[pid];
    if (d->st != 'S' || pid == 1)
        return;
    /* exit closes its descriptors and drops its memory: its references to contexts go */
    d->fdref = 0;
    d->st = 'Z';
    int to = fz_new_parent(s, pid);
    for (int c = 2; c < FZ_MAXP; c++)
        if (s->p[c].st && s->p[c].ppid == pid) {
            s->p[c].ppid = to;
            fz_maybe_autoreap(s, c);
        }
    fz_maybe_autoreap(s, pid);
    /* A session leader with a terminal: the session loses it, and the hangup kills whoever
     * does not ignore SIGHUP (the shell passes it on to its jobs). */
    if (d->sid == pid && d->tty) {
        for (int c = 2; c < FZ_MAXP; c++)
            if (s->p[c].st && s->p[c].sid == pid)
                s->p[c].tty = 0;
        for (int c = 2; c < FZ_MAXP; c++)
            if (s->p[c].st == 'S' && s->p[c].sid == pid && !s->p[c].hup_ign)
                fz_die(s, c);
    }
}

static struct fz_proc *fz_spawn(struct fz_sim *s, int parent, int child, unsigned flags)
{
    struct fz_proc *par = &s->p[parent], *c = &s->p[child];
    *c = *par;
    c->st = 'S';
    c->ppid = parent;
    c->infra = c->subreaper = false;
    c->ctx_gpu = -1;
    c->born = ++s->nborn;
    c->act = FZ_IDLE;
    c->execed = (flags & FZ_EXEC) != 0;
    /* a fork keeps the command line; an exec, or a start by infrastructure (a shell forks and
     * executes a program), makes its own */
    c->cmd = (flags & FZ_EXEC) || par->infra ? child : par->cmd;
    if (flags & FZ_EXEC) {
        c->fdref = 0; /* CUDA's descriptors are close-on-exec; the new image maps no libcuda */
        c->cuda = false;
    }
    if (flags & FZ_NOHUP)
        c->hup_ign = true;
    if (flags & FZ_SETSID) {
        c->sid = c->pgid = child;
        c->tty = 0;
    } else if (flags & FZ_PGRP) {
        c->pgid = child;
    }
    /* labels: a program the shell or the service manager starts is a job, and so is one that
     * left its session on purpose; everything else belongs to its parent's job */
    c->root = par->infra || (flags & FZ_SETSID);
    c->job = c->root ? child : par->job;
    return c;
}

static bool fz_free_pid(const struct fz_sim *s, int pid)
{
    return pid > 1 && pid < FZ_MAXP && s->p[pid].st == 0 && s->p[pid].born == 0;
}

/* Play the events; one whose preconditions do not hold (its process gone, its pid taken:
 * a shrunk tree) is skipped. */
static void fz_simulate(const struct fz_tree *t, struct fz_sim *s)
{
    memset(s, 0, sizeof(*s));
    s->p[1] = (struct fz_proc){.st = 'S',
                               .ppid = 0,
                               .pgid = 1,
                               .sid = 1,
                               .infra = true,
                               .ctx_gpu = -1,
                               .born = ++s->nborn};
    for (size_t i = 0; i < t->n; i++) {
        const struct fz_ev *e = &t->ev[i];
        struct fz_proc *a = e->a > 0 && e->a < FZ_MAXP ? &s->p[e->a] : NULL;
        if (!a)
            continue;
        switch (e->op) {
        case FZ_REAPER:
        case FZ_SHELL: {
            if (!fz_free_pid(s, e->a))
                break;
            int parent = 1;
            for (int k = 2; k < FZ_MAXP; k++)
                if (s->p[k].st == 'S' && s->p[k].infra && s->p[k].subreaper && !s->p[k].tty)
                    parent = k;
            fz_spawn(s, parent, e->a, FZ_EXEC | FZ_SETSID);
            a->infra = true;
            a->root = false;
            a->job = 0;
            a->subreaper = e->op == FZ_REAPER || (e->flags & FZ_SUB);
            a->tty = e->op == FZ_SHELL ? FZ_TTY : 0;
            break;
        }
        case FZ_FORK:
            if (a->st != 'S' || !fz_free_pid(s, e->b))
                break;
            fz_spawn(s, e->a, e->b, e->flags);
            break;
        case FZ_DAEMON:
            if (a->st != 'S' || a->infra || !fz_free_pid(s, e->b) || !fz_free_pid(s, e->c) ||
                e->c <= e->b)
                break;
            fz_spawn(s, e->a, e->b, FZ_SETSID | (e->flags & FZ_EXEC));
            fz_spawn(s, e->b, e->c, 0);
            s->p[e->c].root = true;
            s->p[e->c].job = e->c;
            s->p[e->b].root = false;
            s->p[e->b].job = e->c;
            fz_die(s, e->b);
            s->p[e->b].st = 0; /* the first parent waits for it */
            break;
        case FZ_CTX:
            if (a->st != 'S' || a->infra || a->ctx_gpu >= 0 || e->b < 0 || e->b >= FZ_NGPU)
                break;
            a->ctx_gpu = e->b;
            a->cuda = true;
            a->fdref |= 1ull << e->a;
            break;
        case FZ_HUP:
            if (a->st == 'S' && !a->infra)
                a->hup_ign = true;
            break;
        case FZ_EXIT:
            if (!(a->infra && !a->tty)) /* init and the reaper do not exit */
                fz_die(s, e->a);
            break;
        case FZ_REAP:
            if (a->st == 'Z')
                a->st = 0;
            break;
        case FZ_CLOSE:
            if (a->st == 'S')
                a->fdref &= 1ull << e->a;
            break;
        case FZ_BUSY:
        case FZ_UNMEASURED:
            if (a->st == 'S' && !a->infra)
                a->act = e->op == FZ_BUSY ? FZ_WORKING : FZ_UNKNOWN;
            break;
        }
    }
}

/* Whether the driver still lists pid's context: a live process holds one of its descriptors. */
static bool fz_listed(const struct fz_sim *s, int pid)
{
    if (s->p[pid].ctx_gpu < 0)
        return false;
    for (int k = 1; k < FZ_MAXP; k++)
        if (s->p[k].st == 'S' && (s->p[k].fdref & (1ull << pid)))
            return true;
    return false;
}

static uint64_t fz_ctx_bytes(int pid)
{
    return (uint64_t)(1 + pid % 4) * GiB;
}

static bool fz_root_gone(const struct fz_sim *s, int pid)
{
    return s->p[s->p[pid].job].st != 'S';
}

/* ------------------------------------------------------------------------ the snapshot */

/* What /proc would show of pid (detail.c's reading) and the NVML lists (collect.c's). */
static struct vg_snapshot *fz_snapshot(const struct fz_sim *s)
{
    struct vg_gpu_list l;
    struct vg_proc_table t;
    vg_gpu_list_init(&l);
    vg_proc_table_init(&t);
    static const char *const uuids[] = {"GPU-00000000-aaaa", "GPU-11111111-aaaa"};
    for (unsigned g = 0; g < FZ_NGPU; g++) {
        struct vg_gpu *gp =
            fx_gpu(&l, uuids[g], "NVIDIA A100-SXM4-80GB", g, 80 * GiB, 0, 512 * MiB);
        gp->known |= VG_GPU_K_PROC_UTIL; /* the call answered; a sample per live process */
    }
    for (int pid = 1; pid < FZ_MAXP; pid++) {
        if (!fz_listed(s, pid))
            continue;
        const struct fz_proc *p = &s->p[pid];
        struct vg_gpu *gp = &l.gpus[p->ctx_gpu];
        fx_gproc(gp, (uint32_t)pid, fz_ctx_bytes(pid), VG_PTYPE_COMPUTE);
        gp->mem_used += fz_ctx_bytes(pid);
        gp->mem_free = gp->mem_total - gp->mem_used - gp->mem_reserved;
        /* a gone process has no samples left */
        if (p->st == 'S')
            for (size_t k = 0; k < gp->nprocs; k++)
                if (gp->procs[k].pid == (uint32_t)pid) {
                    gp->procs[k].util_known = true;
                    gp->procs[k].sm_util = p->act == FZ_WORKING ? 60 : 0;
                }
    }
    for (int pid = 1; pid < FZ_MAXP; pid++) {
        const struct fz_proc *p = &s->p[pid];
        if (p->st)
            t.n_scanned++;
        /* phase two reads the holders of a node and the PIDs the driver reported */
        bool holds = p->st == 'S' && p->fdref;
        if (!holds && !(p->st && fz_listed(s, pid)))
            continue;
        bool z = p->st == 'Z';
        char cmd[32] = "";
        if (!z)
            snprintf(cmd, sizeof(cmd), "python job%d.py", p->cmd);
        struct vg_proc *q = fx_proc(&t, pid, "python", cmd,
                                    z                      ? 'Z'
                                    : p->act == FZ_WORKING ? 'R'
                                                           : 'S');
        t.n_scanned--; /* counted above */
        q->ppid = p->ppid;
        q->pgid = p->pgid;
        q->sid = p->sid;
        q->tty_nr = p->tty;
        q->start_ticks = 1000u + p->born * 10u;
        q->cpu_ticks = 5;
        q->known |= VG_PROC_K_SIGIGN | VG_PROC_K_FDS | VG_PROC_K_THREADS;
        q->sig_ignored = p->hup_ign ? 1u : 0u; /* bit 0: SIGHUP */
        q->nspid = fx_grow(NULL, 1, sizeof(*q->nspid));
        q->nspid[0] = pid;
        q->nnspid = 1;
        q->nthreads = 1;
        q->threads_live = z ? 0 : 1;
        if (!z) {
            /* a zombie's environ and maps read empty: unknown */
            q->known |= VG_PROC_K_ENV | VG_PROC_K_MAPS;
            q->libs = p->cuda ? VG_LIB_CUDA : 0;
            for (unsigned g = 0; g < FZ_NGPU; g++) {
                bool on = false;
                for (int k = 1; k < FZ_MAXP && !on; k++)
                    on = (p->fdref & (1ull << k)) && s->p[k].ctx_gpu == (int)g;
                if (on)
                    fx_fd(q, g);
            }
            if (p->fdref) {
                q->has_ctl = q->has_uvm = true;
                q->dev_fd_count += 2;
            }
            q->fd_total = q->dev_fd_count + 3;
            if (p->act != FZ_UNKNOWN)
                fx_activity(q, 500, p->act == FZ_WORKING ? 300 : 0);
        }
        /* the parent is never dead: the kernel re-parents at once; it is always older */
        const struct fz_proc *par = &s->p[p->ppid];
        q->parent_alive = true;
        q->parent_known = true;
        q->parent_sid = par->sid;
        q->parent_pgid = par->pgid;
        q->parent_ns_init = p->ppid == 1;
        /* a zombie leader's entry exists, and proc/ reads it as the end of its job */
        q->pgid_zombie = s->p[p->pgid].st == 'Z' && p->pgid != pid;
        q->sid_zombie = s->p[p->sid].st == 'Z' && p->sid != pid;
        q->pgid_alive = s->p[p->pgid].st != 0 && !q->pgid_zombie;
        q->sid_alive = s->p[p->sid].st != 0 && !q->sid_zombie;
    }
    t.self_nspid_depth = 1;
    t.pidns = VG_PROC_PIDNS_INITIAL;
    /* the census of session kin (proc/kin.c) as the scan takes it: every live process that is
     * not in the table (its sessions are filtered by the rules, which read only their own) */
    for (int pid = 2; pid < FZ_MAXP; pid++) {
        const struct fz_proc *p = &s->p[pid];
        if (!p->st || vg_proc_table_find(&t, pid))
            continue;
        t.kin = fx_grow(t.kin, t.nkin + 1, sizeof(*t.kin));
        char cmd[32];
        snprintf(cmd, sizeof(cmd), p->infra ? "-bash%d" : "python job%d.py", p->cmd);
        t.kin[t.nkin++] = (struct vg_proc_kin){.pid = pid,
                                               .ppid = p->ppid,
                                               .pgid = p->pgid,
                                               .sid = p->sid,
                                               .start_ticks = 1000u + p->born * 10u,
                                               .state = p->st,
                                               .cmdline = fx_strdup(cmd)};
    }
    return fx_assemble(&l, &t);
}

/* -------------------------------------------------------------------------- properties */

enum { FZ_P1 = 1u << 0, FZ_P2 = 1u << 1, FZ_P3 = 1u << 2 };

struct fz_fail {
    unsigned prop; /* the first failing property */
    int pid;
    /* the model's answer on it: with prop, the failure's class, which shrinking keeps */
    int verdict;
    int confidence;
    const char *why_not;
    int score;
    char what[1400];
};

static bool fz_same_class(const struct fz_fail *a, const struct fz_fail *b)
{
    return a->prop == b->prop && a->verdict == b->verdict && a->confidence == b->confidence &&
           a->why_not == b->why_not;
}

static const char *fz_verdict_str(const struct vg_leftover *l)
{
    if (!l)
        return "not assessed";
    switch (l->verdict) {
    case VG_LEFT_NONE:
        return "NONE";
    case VG_LEFT_NOT:
        return "NOT";
    case VG_LEFT_YES:
        return l->confidence == VG_CONF_HIGH ? "YES high" : "YES medium";
    }
    return "?";
}

/* The facts the model weighed, with their weights: "adopted+1,group-leader-gone+2". */
static void fz_ev_str(const struct vg_leftover *l, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; l && i < l->nfacts; i++) {
        int k = snprintf(out + len, cap - len, "%s%s%+d", len ? "," : "",
                         vg_left_fact_name(l->facts[i].id), l->facts[i].weight);
        if (k < 0 || (size_t)k >= cap - len)
            return;
        len += (size_t)k;
    }
}

static void fz_note(struct fz_fail *f, unsigned *props, unsigned prop, int pid,
                    const struct vg_leftover *l, const char *fmt, const char *extra)
{
    if (!*props || prop < f->prop) {
        char evs[640];
        fz_ev_str(l, evs, sizeof(evs));
        f->prop = prop;
        f->pid = pid;
        f->verdict = l ? (int)l->verdict : -1;
        f->confidence = l ? (int)l->confidence : -1;
        f->why_not = l ? l->why_not : NULL;
        f->score = l ? l->score : 0;
        snprintf(f->what, sizeof(f->what), fmt, pid, extra, fz_verdict_str(l), evs,
                 l && l->why_not ? l->why_not : "-");
    }
    *props |= prop;
}

/*
 * Whether pid was adopted by a subreaper of its own process group and session. Nothing in
 * /proc names a process's first parent, so such an adoption leaves no trace: its parent is a
 * live process of its own group and session, as a launcher's child's is. P2 cannot be asked
 * of it (docs/diagnoses.md says so); the subreapers that keep their children in their own
 * session (vramguard run, a shell with PR_SET_CHILD_SUBREAPER) reap them themselves.
 */
static bool fz_adoption_unseen(const struct fz_sim *s, int pid)
{
    const struct fz_proc *p = &s->p[pid], *par = &s->p[p->ppid];
    if (p->root || p->ppid <= 1)
        return false;
    if (par->subreaper && par->sid == p->sid)
        return true;
    /* ... and so is that of a child of such a process: its parent lives */
    if (par->st == 'S' && !par->infra && fz_adoption_unseen(s, p->ppid))
        return true;
    /* A process whose parent lives is not weighed at all: a worker's child that kept what its
     * parent then closed hangs from a parent the snapshot does not hold (it holds nothing). */
    return par->st == 'S' && !par->infra && !par->fdref && par->ctx_gpu < 0;
}

/* Build the snapshot of the tree, judge it, check P1-P3. Returns the failing properties; f
 * gets the lowest-numbered one's first failure. */
static unsigned fz_check(const struct fz_tree *tree, struct fz_sim *s, struct fz_fail *f)
{
    fz_simulate(tree, s);
    struct vg_snapshot *snap = fz_snapshot(s);
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(snap, &ro, &fs, &err), 0);
    struct vg_leftovers ls;
    assert_int_equal(vg_leftovers_assess(snap, &ls), 0);
    struct vg_plan plan;
    struct vg_plan_opts po = {0};
    po.who = (struct vg_kill_ctx){.self = 99999, .ruid = 1000};
    po.pidns_trusted = true;
    assert_int_equal(vg_plan_build(snap, &fs, &po, &plan, &err), 0);

    unsigned props = 0;
    memset(f, 0, sizeof(*f));
    static const char *const fmt = "pid %d (%s): verdict %s [%s]; why: %s";
    for (size_t i = 0; i < plan.n; i++) {
        int pid = plan.v[i].id.pid;
        if (!plan.v[i].signal || pid <= 0 || pid >= FZ_MAXP)
            continue;
        const struct fz_proc *p = &s->p[pid];
        if (p->root || p->infra || !fz_root_gone(s, pid))
            fz_note(f, &props, FZ_P1, pid, vg_leftovers_find(&ls, pid), fmt,
                    p->root ? "a job root, signalled" : "its job's root lives, signalled");
    }
    for (int pid = 2; pid < FZ_MAXP; pid++) {
        const struct fz_proc *p = &s->p[pid];
        if (!p->st || p->infra)
            continue;
        const struct vg_leftover *l = vg_leftovers_find(&ls, pid);
        bool high = l && l->verdict == VG_LEFT_YES && l->confidence == VG_CONF_HIGH;
        bool healthy = p->root || !fz_root_gone(s, pid);
        if (healthy && high)
            fz_note(f, &props, FZ_P3, pid, l, fmt, p->root ? "a job root" : "its job's root lives");
        int r = p->job;
        if (!healthy && p->st == 'S' && p->act != FZ_WORKING && (p->fdref & (1ull << r)) &&
            fz_listed(s, r) && !fz_adoption_unseen(s, pid)) {
            if (!l || l->verdict != VG_LEFT_YES)
                fz_note(f, &props, FZ_P2, pid, l, fmt,
                        "holds its dead root's inherited fds, charged to the root: not a leftover");
        }
    }
    vg_plan_release(&plan);
    vg_leftovers_release(&ls);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    return props;
}

/* The final process table, for a reproducer. */
static void fz_print_table(const struct fz_sim *s)
{
    print_message("#   pid ppid pgid  sid st tty hup cuda ctx  fds-of     job  root  act\n");
    for (int pid = 2; pid < FZ_MAXP; pid++) {
        const struct fz_proc *p = &s->p[pid];
        if (!p->born)
            continue;
        if (!p->st) {
            print_message("#   %3d gone%s\n", pid,
                          p->infra  ? " (infra)"
                          : p->root ? " (a job root)"
                                    : "");
            continue;
        }
        char fds[64] = "-";
        size_t n = 0;
        for (int k = 1; k < FZ_MAXP && n + 8 < sizeof(fds); k++)
            if (p->fdref & (1ull << k))
                n += (size_t)snprintf(fds + n, sizeof(fds) - n, "%s%d", n ? "," : "", k);
        char ctx[16] = "-";
        if (p->ctx_gpu >= 0)
            snprintf(ctx, sizeof(ctx), "g%d%s", p->ctx_gpu, fz_listed(s, pid) ? "" : "x");
        print_message("#   %3d %4d %4d %4d  %c %3s %3s %4s %4s  %-9s %4d %5s  %s\n", pid, p->ppid,
                      p->pgid, p->sid, p->st, p->tty ? "yes" : "-", p->hup_ign ? "ign" : "-",
                      p->cuda ? "yes" : "-", ctx, fds, p->infra ? 0 : p->job,
                      p->infra  ? "infra"
                      : p->root ? (fz_root_gone(s, pid) ? "gone" : "yes")
                                : "-",
                      p->infra               ? ""
                      : p->act == FZ_WORKING ? "busy"
                      : p->act == FZ_IDLE    ? "idle"
                                             : "?");
    }
}

static const char *fz_prop_name(unsigned prop)
{
    return prop == FZ_P1 ? "P1" : prop == FZ_P2 ? "P2" : "P3";
}

/* Drop events (then flags) while the same property still fails the same way (the model's
 * verdict and reason unchanged): the smallest tree that shows that mistake. */
static void fz_shrink(struct fz_tree *t, const struct fz_fail *want)
{
    struct fz_sim s;
    struct fz_fail f;
    for (bool again = true; again;) {
        again = false;
        for (size_t i = t->n; i-- > 0;) {
            struct fz_tree u = *t;
            memmove(&u.ev[i], &u.ev[i + 1], (u.n - i - 1) * sizeof(u.ev[0]));
            u.n--;
            if (fz_check(&u, &s, &f) && fz_same_class(&f, want)) {
                *t = u;
                again = true;
            }
        }
        /* then flags, one at a time */
        for (size_t i = 0; i < t->n; i++)
            for (unsigned b = 0; b < 5; b++) {
                if (!(t->ev[i].flags & (1u << b)))
                    continue;
                struct fz_tree u = *t;
                u.ev[i].flags &= ~(1u << b);
                if (fz_check(&u, &s, &f) && fz_same_class(&f, want)) {
                    *t = u;
                    again = true;
                }
            }
    }
}

/* Number the processes 2, 3, ... in the order the events first name them (the order they were
 * made in), so that shrunk trees of one shape read the same. */
static void fz_renumber(struct fz_tree *t)
{
    int map[FZ_MAXP] = {0}, gmap[FZ_NGPU] = {-1, -1};
    int next = 2, gnext = 0;
    map[1] = 1;
    for (size_t i = 0; i < t->n; i++) {
        struct fz_ev *e = &t->ev[i];
        if (e->op == FZ_CTX && e->b >= 0 && e->b < FZ_NGPU) {
            if (gmap[e->b] < 0)
                gmap[e->b] = gnext++;
            e->b = gmap[e->b];
        }
        int *ids[3] = {&e->a, e->op == FZ_FORK || e->op == FZ_DAEMON ? &e->b : NULL,
                       e->op == FZ_DAEMON ? &e->c : NULL};
        for (int k = 0; k < 3; k++) {
            if (!ids[k] || *ids[k] <= 0 || *ids[k] >= FZ_MAXP)
                continue;
            if (!map[*ids[k]])
                map[*ids[k]] = next++;
            *ids[k] = map[*ids[k]];
        }
    }
}

static bool fz_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static unsigned long fz_env_num(const char *name, unsigned long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 0);
    return errno || *end ? dflt : x;
}

/* Print one failing tree: the property, the reproducer, the final table. */
static void fz_report(const char *label, const struct fz_tree *t)
{
    struct fz_sim s;
    struct fz_fail f;
    char text[4096];
    unsigned props = fz_check(t, &s, &f);
    fz_format(t, text, sizeof(text));
    print_message("# %s: %s fails (all failing: %s%s%s): %s\n", label, fz_prop_name(f.prop),
                  props & FZ_P1 ? "P1 " : "", props & FZ_P2 ? "P2 " : "", props & FZ_P3 ? "P3" : "",
                  f.what);
    print_message("#   VG_FUZZ_CASE='%s'\n", text);
    fz_print_table(&s);
}

/* ----------------------------------------------------------------------------- the tests */

/* The simulation itself behaves as Linux does: what the properties rest on. */
static void test_fuzz_simulation(void **state)
{
    (void)state;
    struct fz_tree t;
    struct fz_sim s;
    /* a worker of a dead main goes to the subreaper; the main stays a zombie until reaped;
     * the driver keeps the main's context while the worker holds its descriptors */
    assert_true(fz_parse("reaper 2; shell 3; fork 3 4 exec pgrp; ctx 4 1; fork 4 5; fork 5 6; "
                         "exit 5; exit 4",
                         &t));
    fz_simulate(&t, &s);
    assert_int_equal(s.p[4].st, 0); /* the shell reaped it */
    assert_int_equal(s.p[6].ppid, 2);
    assert_int_equal(s.p[5].st, 0); /* reaped by the subreaper it went to with 6 */
    assert_true(s.p[4].root && !s.p[5].root && s.p[6].job == 4);
    assert_true(fz_listed(&s, 4));
    assert_true(s.p[6].fdref & (1ull << 4));
    /* a zombie until its parent waits */
    assert_true(fz_parse("shell 3; fork 3 4 exec; fork 4 5; ctx 5 0; fork 5 6; exit 5", &t));
    fz_simulate(&t, &s);
    assert_int_equal(s.p[5].st, 'Z');
    assert_int_equal(s.p[6].ppid, 1);
    assert_true(fz_listed(&s, 5));
    assert_true(
        fz_parse("shell 3; fork 3 4 exec; fork 4 5; ctx 5 0; fork 5 6; exit 5; reap 5", &t));
    fz_simulate(&t, &s);
    assert_int_equal(s.p[5].st, 0);
    /* exec drops the descriptors; the last holder's exit frees the context */
    assert_true(fz_parse("shell 3; fork 3 4 exec; ctx 4 0; fork 4 5 exec; exit 4", &t));
    fz_simulate(&t, &s);
    assert_false(fz_listed(&s, 4));
    assert_int_equal(s.p[5].fdref, 0);
    /* logout: the terminal goes, SIGHUP kills the job that does not ignore it */
    assert_true(fz_parse("shell 3; fork 3 4 exec pgrp; fork 3 5 exec pgrp nohup; exit 3", &t));
    fz_simulate(&t, &s);
    assert_int_equal(s.p[4].st, 0);
    assert_int_equal(s.p[5].st, 'S');
    assert_int_equal(s.p[5].tty, 0);
    assert_int_equal(s.p[5].ppid, 1);
    /* the double fork: the daemon is a root of its own, in the dead middle child's session */
    assert_true(fz_parse("shell 3; fork 3 4 exec; daemon 4 5 6", &t));
    fz_simulate(&t, &s);
    assert_int_equal(s.p[5].st, 0);
    assert_true(s.p[6].root && s.p[6].sid == 5 && s.p[6].pgid == 5 && s.p[6].ppid == 1);
    /* a reproducer reads back as it was written */
    char text[512];
    fz_format(&t, text, sizeof(text));
    assert_string_equal(text, "shell 3; fork 3 4 exec; daemon 4 5 6");
    assert_false(fz_parse("fork 3", &t));
    assert_false(fz_parse("fly 3", &t));
}

/*
 * Trees that failed once, shrunk, kept so that they always run; and a few that must keep
 * holding. `known` marks the ones the shape-veto model of leftover_model.c (before the weighted
 * evidence model) gets wrong, with what it said: the test fails on them unless
 * VG_FUZZ_REPORT_ONLY=1.
 */
static const struct {
    const char *name, *tree;
    bool known;
} fz_fixed[] = {
    /* --- guards: these hold today and must keep holding */
    /* the classic: a DataLoader-style worker of a dead main that led its group (P2: YES high) */
    {"worker of a dead job-control main", "shell 2; fork 2 3 pgrp; ctx 3 0; fork 3 4; exit 3",
     false},
    /* a nohup'd main survives logout: healthy, its own listing (P3) */
    {"nohup main after logout", "shell 2; fork 2 3 pgrp nohup; ctx 3 0; fork 3 4; exit 2", false},
    /* a daemon forked without exec holds its dead launcher's descriptors: it is a root (P3) */
    {"daemon holding its launcher's fds", "shell 2; fork 2 3 pgrp; ctx 3 0; daemon 3 4 5; exit 3",
     false},
    /* a worker's worker goes to the subreaper when its parent dies, its job's root alive (P3),
     * then the root dies too (P2) */
    {"worker's worker, subreaper",
     "reaper 2; shell 3; fork 3 4 pgrp; ctx 4 0; fork 4 5; fork 5 6; "
     "exit 5; exit 4",
     false},
    {"worker's worker of a live root, shell subreaper",
     "shell 2 sub; fork 2 3 pgrp; ctx 3 0; fork 3 4; fork 4 5; exit 4", false},

    /* --- found by the fuzzer against the shape-veto model */
    /* P2: the main shared its shell's group (no job control: a script, a subshell); its worker,
     * adopted by init, holds its fds while the driver charges the gone main: NONE (nothing of
     * its group or session is gone) */
    {"main in the shell's group", "shell 2; fork 2 3; ctx 3 0; fork 3 4; exit 3", false},
    /* P2: the same under a subreaper (systemd --user started the main in its own session):
     * NONE */
    {"main in the subreaper's session", "reaper 2; fork 2 3; ctx 3 0; fork 3 4; exit 3", false},
    /* P2: the main led its own session (setsid, start_new_session, a service): its worker is
     * called "a daemon's shape": NOT */
    {"main led its session (under a subreaper)",
     "reaper 2; fork 2 3 setsid; ctx 3 0; fork 3 4; "
     "exit 3",
     false},
    {"main led its session (from a shell)", "shell 2; fork 2 3 setsid; ctx 3 0; fork 3 4; exit 3",
     false},
    /* P2: the same main a zombie (its parent, a user process, has not reaped it): its /proc
     * entry makes pgid_alive and sid_alive true, so nothing is gone: NONE */
    {"zombie main that led its session",
     "shell 2; fork 2 3; fork 3 4 setsid; ctx 4 0; fork 4 5; exit 4", false},
    /* P2: logout killed the main; its worker ignored SIGHUP and stayed: "a daemon's shape" */
    {"nohup worker after logout", "shell 2; fork 2 3; ctx 3 0; fork 3 4; hup 4; exit 2", false},
    /* P2: a daemon's own worker after the daemon died: "a daemon's shape" */
    {"worker of a dead daemon", "shell 2; fork 2 3; daemon 3 4 5; ctx 5 0; fork 5 6; exit 5", false},
    /* P2: a worker that leads its own process group (setpgid, process_group=0): "it is a job
     * itself" */
    {"worker leading its own group", "shell 2; fork 2 3; ctx 3 0; fork 3 4 pgrp; exit 3", false},
    /* P2: a worker with a context of its own besides the inherited fds (the driver lists it, so
     * no "inherited" mark) of a nohup'd main: "it ignores SIGHUP" */
    {"worker with own context, nohup main",
     "shell 2; fork 2 3 pgrp nohup; ctx 3 0; fork 3 4; ctx 4 1; exit 3", false},
    /* P2: the same without nohup, measured idle: only medium ("nothing marks it as a worker") */
    {"worker with own context", "shell 2; fork 2 3 pgrp; ctx 3 0; fork 3 4; ctx 4 1; exit 3", false},
    /* P2: a worker's worker measured idle, capped at medium by its unmeasured parent */
    {"worker's worker of an unmeasured worker",
     "shell 2; fork 2 3 pgrp; ctx 3 0; fork 3 4; exit 3; fork 4 5; unmeasured 4", false},
    /* P2: an idle worker's worker of a dead daemon whose middle worker works: NONE (its
     * parent lives, and is NOT) */
    {"idle worker under a busy one, dead daemon",
     "shell 2; fork 2 3; daemon 3 4 5; ctx 5 0; fork 5 6; exit 5; fork 6 7; busy 6", false},
    /* P1+P3, debatable labels: a worker started a helper in a session of its own (setsid
     * without exec) that inherited the main's fds; the main died. The labels call the helper a
     * job root (it left its session on purpose); the model calls it a worker's worker of a
     * leftover, YES high, and clean would signal it. Either the labels or the model must give:
     * the lead decides which. */
    /* --- known limits of the weighted model, found by this fuzzer: reported, not failed
     * (a random tree of the same class is counted apart); docs/diagnoses.md lists them */
    /* a worker that leads its own group and has a context of its own on its dead nohup'd
     * main's GPU: four facts say "a job of its own", one strong one says "kept the main's
     * context"; NOT where the labels say leftover */
    {"own-group worker with own context, nohup main",
     "shell 2; fork 2 3 nohup; ctx 3 0; fork 3 4 pgrp; ctx 4 0; exit 3", true},
    /* a worker that ignores SIGHUP and has a context of its own on another GPU, beside a
     * sibling: NOT where the labels say leftover */
    {"nohup worker with own context beside a sibling",
     "shell 2; fork 2 3; ctx 3 0; fork 3 4; ctx 4 1; hup 4; fork 3 5; exit 3", true},
    /* a worker's worker under a live daemon whose worker died: the daemon's context is in its
     * session and live, but the dead worker's is the one it holds: YES high where the labels
     * say its job (the daemon's) lives */
    {"worker's worker of a live daemon",
     "reaper 2; fork 2 3; fork 3 4; daemon 4 5 6; ctx 6 0; fork 6 7; ctx 7 0; fork 7 8; exit 7",
     true},
    {"setsid helper of a leftover",
     "shell 2; fork 2 3 pgrp; ctx 3 0; fork 3 4; fork 4 5 setsid; exit 3", false},
};

static void test_fuzz_fixed(void **state)
{
    (void)state;
    bool report_only = fz_env_flag("VG_FUZZ_REPORT_ONLY");
    size_t failed = 0;
    for (size_t i = 0; i < sizeof(fz_fixed) / sizeof(fz_fixed[0]); i++) {
        struct fz_tree t;
        struct fz_sim s;
        struct fz_fail f;
        if (!fz_parse(fz_fixed[i].tree, &t))
            fail_msg("fixed case %s does not parse", fz_fixed[i].name);
        unsigned props = fz_check(&t, &s, &f);
        if (props && fz_fixed[i].known) {
            char label[200];
            snprintf(label, sizeof(label), "fixed case \"%s\" (a known limit of the model)",
                     fz_fixed[i].name);
            fz_report(label, &t);
        } else if (props) {
            failed++;
            char label[160];
            snprintf(label, sizeof(label), "fixed case \"%s\"%s", fz_fixed[i].name,
                     fz_fixed[i].known ? " (known to fail with the shape-veto model)" : "");
            fz_report(label, &t);
        } else if (fz_fixed[i].known) {
            print_message("# fixed case \"%s\" holds now: drop its known mark\n", fz_fixed[i].name);
        }
    }
    if (failed && !report_only)
        fail_msg("%zu fixed lifecycle case(s) fail (VG_FUZZ_REPORT_ONLY=1 reports only)", failed);
}

/* ------------------------------------------------------------------------- generation */

static uint64_t fz_rng_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned fz_rnd(uint64_t *x, unsigned n)
{
    return (unsigned)(fz_rng_next(x) % n);
}

static bool fz_chance(uint64_t *x, unsigned pct)
{
    return fz_rnd(x, 100) < pct;
}

/* A random live process of the tree that matches: any (0), user processes only (1). */
static int fz_pick(const struct fz_sim *s, uint64_t *x, bool user, char st)
{
    int c[FZ_MAXP], n = 0;
    for (int pid = 2; pid < FZ_MAXP; pid++)
        if (s->p[pid].st == st && (!user || !s->p[pid].infra) &&
            !(s->p[pid].infra && !s->p[pid].tty && st == 'Z'))
            c[n++] = pid;
    return n ? c[fz_rnd(x, (unsigned)n)] : 0;
}

/* A random tree: a login shell and/or a subreaper, then random events, each played as it is
 * made so that it applies to a process that exists. */
static void fz_generate(uint64_t seed, struct fz_tree *t)
{
    uint64_t x = seed;
    struct fz_sim s;
    t->n = 0;
    int next = 2;
    unsigned base = fz_rnd(&x, 3);
    if (base >= 1)
        t->ev[t->n++] = (struct fz_ev){FZ_REAPER, next++, 0, 0, 0};
    if (base <= 1)
        t->ev[t->n++] = (struct fz_ev){FZ_SHELL, next++, 0, 0, fz_chance(&x, 25) ? FZ_SUB : 0};
    unsigned nev = 4 + fz_rnd(&x, 20);
    for (unsigned k = 0; k < nev && t->n + 4 < FZ_MAXEV && next + 2 < FZ_MAXP; k++) {
        fz_simulate(t, &s);
        struct fz_ev e = {0};
        unsigned r = fz_rnd(&x, 100);
        int user = fz_pick(&s, &x, true, 'S');
        if (r < 15 || !user) {
            /* a new job from the shell or the service manager */
            int from = 0;
            for (int pid = 2; pid < FZ_MAXP; pid++)
                if (s.p[pid].st == 'S' && s.p[pid].infra && (!from || fz_chance(&x, 50)))
                    from = pid;
            if (!from)
                break;
            e = (struct fz_ev){FZ_FORK, from, next++, 0, FZ_EXEC};
            if (s.p[from].tty && fz_chance(&x, 60))
                e.flags |= FZ_PGRP;
            if (fz_chance(&x, 20))
                e.flags |= FZ_NOHUP;
            if (fz_chance(&x, s.p[from].tty ? 10 : 50))
                e.flags |= FZ_SETSID;
        } else if (r < 45) {
            e = (struct fz_ev){FZ_FORK, user, next++, 0, 0};
            if (fz_chance(&x, 25))
                e.flags |= FZ_EXEC;
            if (fz_chance(&x, 10))
                e.flags |= FZ_PGRP;
            if (fz_chance(&x, 15))
                e.flags |= FZ_SETSID;
        } else if (r < 50) {
            e = (struct fz_ev){FZ_DAEMON, user, next, next + 1, fz_chance(&x, 30) ? FZ_EXEC : 0};
            next += 2;
        } else if (r < 65) {
            /* roots open contexts most: the main process of a training job */
            for (int tries = 0; tries < 3 && (!s.p[user].root || s.p[user].ctx_gpu >= 0); tries++)
                user = fz_pick(&s, &x, true, 'S');
            e = (struct fz_ev){FZ_CTX, user, (int)fz_rnd(&x, FZ_NGPU), 0, 0};
        } else if (r < 67) {
            e = (struct fz_ev){FZ_HUP, user, 0, 0, 0};
        } else if (r < 69) {
            e = (struct fz_ev){FZ_CLOSE, user, 0, 0, 0};
        } else if (r < 90) {
            /* roots die most: the main process crashed or was killed */
            for (int tries = 0; tries < 2 && !s.p[user].root; tries++)
                user = fz_pick(&s, &x, true, 'S');
            int sh = 0;
            for (int pid = 2; pid < FZ_MAXP; pid++)
                if (s.p[pid].st == 'S' && s.p[pid].infra && s.p[pid].tty)
                    sh = pid;
            e = (struct fz_ev){FZ_EXIT, sh && fz_chance(&x, 6) ? sh : user, 0, 0, 0};
        } else {
            int z = fz_pick(&s, &x, true, 'Z');
            if (!z)
                continue;
            e = (struct fz_ev){FZ_REAP, z, 0, 0, 0};
        }
        t->ev[t->n++] = e;
    }
    fz_simulate(t, &s);
    for (int pid = 2; pid < FZ_MAXP && t->n < FZ_MAXEV; pid++) {
        if (s.p[pid].st != 'S' || s.p[pid].infra)
            continue;
        unsigned r = fz_rnd(&x, 100);
        if (r < 20)
            t->ev[t->n++] = (struct fz_ev){FZ_BUSY, pid, 0, 0, 0};
        else if (r < 35)
            t->ev[t->n++] = (struct fz_ev){FZ_UNMEASURED, pid, 0, 0, 0};
    }
}

/* Failures by class (the property, and the model's verdict and reason on the process it
 * failed on): one model mistake each, shown by the shortest shrunk tree found. */
#define FZ_CLASSES_MAX 64
#define FZ_SHRINKS_PER_CLASS 3

struct fz_class {
    struct fz_fail f;
    struct fz_tree best;
    unsigned long first_tree, count;
    unsigned shrunk;
};

static void test_fuzz_random(void **state)
{
    (void)state;
    bool report_only = fz_env_flag("VG_FUZZ_REPORT_ONLY");
    bool verbose = fz_env_flag("VG_FUZZ_VERBOSE");
    const char *one = getenv("VG_FUZZ_CASE");
    if (one && *one) {
        struct fz_tree t;
        struct fz_sim s;
        struct fz_fail f;
        if (!fz_parse(one, &t))
            fail_msg("VG_FUZZ_CASE does not parse: %s", one);
        unsigned props = fz_check(&t, &s, &f);
        if (props) {
            fz_report("VG_FUZZ_CASE", &t);
        } else {
            print_message("# VG_FUZZ_CASE: P1-P3 hold\n");
            fz_print_table(&s);
        }
        if (props && !report_only)
            fail_msg("the tree of VG_FUZZ_CASE fails");
        return;
    }
    unsigned long seed = fz_env_num("VG_FUZZ_SEED", 1);
    unsigned long trees = fz_env_num("VG_FUZZ_TREES", getenv("VG_VALGRIND") ? 150 : 3000);
    static struct fz_class cls[FZ_CLASSES_MAX];
    size_t ncls = 0;
    unsigned long nfail = 0, nknown = 0, unclassed = 0, per_prop[3] = {0};
    /* the classes of the known limits (fz_fixed's known cases) */
    struct fz_fail known[16];
    size_t nk = 0;
    for (size_t i = 0; i < sizeof(fz_fixed) / sizeof(fz_fixed[0]) && nk < 16; i++) {
        struct fz_tree t;
        struct fz_sim s;
        if (fz_fixed[i].known && fz_parse(fz_fixed[i].tree, &t) && fz_check(&t, &s, &known[nk]))
            nk++;
    }
    for (unsigned long i = 0; i < trees; i++) {
        uint64_t ts = seed * 0x100000001b3ull + i;
        struct fz_tree t;
        struct fz_sim s;
        struct fz_fail f;
        fz_generate(fz_rng_next(&ts), &t);
        unsigned props = fz_check(&t, &s, &f);
        if (!props)
            continue;
        bool is_known = false;
        for (size_t k = 0; k < nk && !is_known; k++)
            is_known = fz_same_class(&known[k], &f);
        if (is_known) {
            nknown++;
            continue;
        }
        nfail++;
        for (unsigned b = 0; b < 3; b++)
            per_prop[b] += (props >> b) & 1u;
        size_t k = 0;
        while (k < ncls && !fz_same_class(&cls[k].f, &f))
            k++;
        if (k == ncls) {
            if (ncls == FZ_CLASSES_MAX) {
                unclassed++;
                continue;
            }
            memset(&cls[k], 0, sizeof(cls[k]));
            cls[k].f = f;
            cls[k].first_tree = i;
            cls[k].best.n = SIZE_MAX;
            ncls++;
        }
        cls[k].count++;
        /* shrinking keeps the class; a few tries per class find a short tree */
        if (cls[k].shrunk >= FZ_SHRINKS_PER_CLASS)
            continue;
        cls[k].shrunk++;
        fz_shrink(&t, &f);
        fz_renumber(&t);
        if (t.n < cls[k].best.n)
            cls[k].best = t;
    }
    print_message("# lifecycle fuzz: seed %lu, %lu trees, %lu failing (P1 %lu, P2 %lu, P3 %lu), "
                  "%zu classes of failure%s; %lu more in the known limits\n",
                  seed, trees, nfail, per_prop[0], per_prop[1], per_prop[2], ncls,
                  unclassed ? " (and more not classed)" : "", nknown);
    size_t shown = 0;
    for (unsigned prop = FZ_P1; prop <= FZ_P3; prop <<= 1)
        for (size_t k = 0; k < ncls; k++) {
            if (cls[k].f.prop != prop || (!verbose && shown >= 16))
                continue;
            char label[128];
            snprintf(label, sizeof(label), "seed %lu tree %lu, shrunk (%lu trees of this class)",
                     seed, cls[k].first_tree, cls[k].count);
            fz_report(label, &cls[k].best);
            shown++;
        }
    if (shown < ncls)
        print_message("# (%zu more classes: VG_FUZZ_VERBOSE=1 shows all)\n", ncls - shown);
    if (nfail && !report_only)
        fail_msg("%lu of %lu random lifecycle trees fail (VG_FUZZ_REPORT_ONLY=1 reports only)",
                 nfail, trees);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_simulation),
        cmocka_unit_test(test_fuzz_fixed),
        cmocka_unit_test(test_fuzz_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
