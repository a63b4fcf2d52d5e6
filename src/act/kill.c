/*
 * The safety rules of `clean` and the signalling sequence (see kill.h). The checks are pure
 * functions over a struct vg_proc so they can be unit-tested on hand-made processes; only
 * vg_kill_start() and vg_kill_finish() touch the system.
 */
#include "act/kill.h"
#include "act/infra.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/collect.h"
#include "model/snapshot.h"
#include "proc/signal.h"

/* Kernel threads are children of kthreadd, PID 2. */
#define VG_KTHREADD_PID 2

const char *vg_kill_protected_name(const struct vg_proc *p)
{
    struct vg_infra inf;
    vg_infra_judge(p, &inf);
    return inf.kind == VG_INFRA_PROVEN || inf.kind == VG_INFRA_UNPROVEN ? inf.name : NULL;
}

const char *vg_kill_refusal_id(enum vg_kill_refusal r)
{
    switch (r) {
    case VG_KILL_ALLOWED:
        return NULL;
    case VG_KILL_INIT:
        return "init";
    case VG_KILL_SELF:
        return "self";
    case VG_KILL_ANCESTOR:
        return "ancestor";
    case VG_KILL_KTHREAD:
        return "kernel-thread";
    case VG_KILL_PROTECTED:
        return "infrastructure";
    case VG_KILL_OTHER_USER:
        return "other-user";
    case VG_KILL_ZOMBIE:
        return "zombie";
    case VG_KILL_DSTATE:
        return "d-state";
    case VG_KILL_UNREADABLE:
        return "unreadable";
    case VG_KILL_NOT_VISIBLE:
        return "not-visible";
    case VG_KILL_NAMESPACE:
        return "pid-namespace";
    case VG_KILL_NOT_HOLDER:
        return "not-holder";
    case VG_KILL_CHANGED:
        return "identity-changed";
    case VG_KILL_RELEASED:
        return "released";
    case VG_KILL_STALE:
        return "stale-entry";
    case VG_KILL_UNSURE:
        return "uncertain";
    case VG_KILL_NOT_LEFTOVER:
        return "not-leftover";
    }
    return "unknown";
}

const char *vg_kill_outcome_id(enum vg_kill_outcome o)
{
    switch (o) {
    case VG_KILL_PENDING:
        return "pending";
    case VG_KILL_TERMINATED:
        return "terminated";
    case VG_KILL_KILLED:
        return "killed";
    case VG_KILL_GONE:
        return "gone";
    case VG_KILL_REFUSED:
        return "refused";
    case VG_KILL_FAILED:
        return "failed";
    }
    return "unknown";
}

enum vg_kill_refusal vg_kill_check(const struct vg_proc *p, const struct vg_kill_ctx *ctx,
                                   pid_t *act_on)
{
    if (act_on)
        *act_on = 0;
    if (p->pid == 1)
        return VG_KILL_INIT;
    if (p->pid == ctx->self)
        return VG_KILL_SELF;
    for (size_t i = 0; i < ctx->nancestors; i++)
        if (ctx->ancestors[i] == p->pid)
            return VG_KILL_ANCESTOR;
    if (!(p->known & VG_PROC_K_STAT) || !(p->known & VG_PROC_K_STATUS))
        return VG_KILL_UNREADABLE;
    if ((p->flags & VG_PROC_PF_KTHREAD) || p->pid == VG_KTHREADD_PID || p->ppid == VG_KTHREADD_PID)
        return VG_KILL_KTHREAD;
    /* Infrastructure proven, or named so and unproven (act/infra.h says why both): never
     * signalled, except a hand-off's job's own processes, which are never infrastructure. */
    bool job_own = ctx->job_uid_known && p->uid == ctx->job_uid;
    if (!job_own && vg_kill_protected_name(p))
        return VG_KILL_PROTECTED;
    if (ctx->ruid != 0 && p->uid != ctx->ruid)
        return VG_KILL_OTHER_USER;
    /* A thread stuck in the driver blocks everything, exiting included, so it comes before the
     * zombie case: a defunct process with a D thread is stuck exiting, and its parent cannot
     * help either. */
    if (p->state == 'D' || ((p->known & VG_PROC_K_THREADS) && p->threads_d > 0))
        return VG_KILL_DSTATE;
    if (p->state == 'Z' || p->state == 'X') {
        if (act_on)
            *act_on = p->ppid;
        return VG_KILL_ZOMBIE;
    }
    /* Every user process has at least argv[0]; an empty command line is a kernel thread that
     * the flags did not give away (an old kernel, or another procfs). */
    if ((p->known & VG_PROC_K_CMDLINE) && p->cmdline && p->cmdline[0] == '\0')
        return VG_KILL_KTHREAD;
    return VG_KILL_ALLOWED;
}

bool vg_kill_is_system(const struct vg_proc *p, const struct vg_kill_ctx *ctx)
{
    switch (vg_kill_check(p, ctx, NULL)) {
    case VG_KILL_INIT:
    case VG_KILL_SELF:
    case VG_KILL_ANCESTOR:
    case VG_KILL_KTHREAD:
        return true;
    default:
        return false;
    }
}

void vg_kill_identity_release(struct vg_kill_identity *id)
{
    if (!id)
        return;
    free(id->minors);
    id->minors = NULL;
    id->nminors = 0;
}

static bool vg_has_minor(const struct vg_kill_identity *id, unsigned minor)
{
    for (size_t i = 0; i < id->nminors; i++)
        if (id->minors[i] == minor)
            return true;
    return false;
}

enum vg_kill_refusal vg_kill_verify(const struct vg_kill_identity *id, const struct vg_proc *now,
                                    int nvml_lists, const struct vg_kill_ctx *ctx)
{
    if (now->pid != id->pid || !(now->known & VG_PROC_K_STAT) ||
        now->start_ticks != id->start_ticks)
        return VG_KILL_CHANGED;
    if (!(now->known & VG_PROC_K_STATUS) || now->uid != id->uid)
        return VG_KILL_CHANGED;
    enum vg_kill_refusal r = vg_kill_check(now, ctx, NULL);
    if (r != VG_KILL_ALLOWED)
        return r;
    if (!(now->known & VG_PROC_K_FDS))
        return id->nvml && nvml_lists == 0 ? VG_KILL_RELEASED : VG_KILL_ALLOWED;
    for (size_t i = 0; i < now->ndev_minors; i++)
        if (id->nminors == 0 || vg_has_minor(id, now->dev_minors[i]))
            return VG_KILL_ALLOWED;
    if (id->nvml && nvml_lists != 0)
        return VG_KILL_ALLOWED;
    return VG_KILL_RELEASED;
}

/* Asked only for a target whose device fds show nothing. */
int vg_kill_nvml_lists(void *arg, pid_t pid)
{
    struct vg_kill_nvml *n = arg;
    if (n->hung)
        return -1;
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_err err = VG_ERR_INIT;
    int rc =
        vg_gpu_collect(n->path, n->timeout_ms ? n->timeout_ms : VG_SNAP_NVML_TIMEOUT_MS, &l, &err);
    vg_err_release(&err);
    if (rc == -ETIMEDOUT)
        n->hung = true;
    int found = rc ? -1 : 0;
    bool complete = rc == 0;
    for (size_t i = 0; !rc && i < l.ngpus && found != 1; i++) {
        const struct vg_gpu *d = &l.gpus[i];
        if (d->hung)
            n->hung = true;
        if (d->hung || !(d->known & VG_GPU_K_PROCS))
            complete = false;
        for (size_t k = 0; k < d->nprocs && found != 1; k++)
            found = d->procs[k].pid == (uint32_t)pid;
        for (size_t m = 0; m < d->nmig && found != 1; m++)
            for (size_t k = 0; k < d->mig[m].nprocs && found != 1; k++)
                found = d->mig[m].procs[k].pid == (uint32_t)pid;
    }
    vg_gpu_list_release(&l);
    /* "not listed" only when every list was read: a hung or refused one may list it */
    return found == 1 ? 1 : complete ? 0 : -1;
}

void vg_kill_init(struct vg_kill *k, const struct vg_kill_identity *id)
{
    memset(k, 0, sizeof(*k));
    k->id = id;
    vg_stop_init(&k->stop, -1);
    k->outcome = VG_KILL_REFUSED;
}

void vg_kill_release(struct vg_kill *k)
{
    if (k)
        vg_stop_release(&k->stop);
}

/* The sequence's state as the kill's outcome. */
static void vg_kill_sync(struct vg_kill *k)
{
    switch (k->stop.outcome) {
    case VG_STOP_IDLE:
        break;
    case VG_STOP_PENDING:
        k->outcome = VG_KILL_PENDING;
        break;
    case VG_STOP_TERMINATED:
        k->outcome = VG_KILL_TERMINATED;
        break;
    case VG_STOP_KILLED:
        k->outcome = VG_KILL_KILLED;
        break;
    case VG_STOP_GONE:
        k->outcome = VG_KILL_GONE;
        break;
    case VG_STOP_FAILED:
        k->outcome = VG_KILL_FAILED;
        k->error = k->stop.error;
        break;
    }
}

/* Could not even start: -ESRCH is a process that has gone. */
static void vg_kill_fail(struct vg_kill *k, int rc)
{
    if (rc == -ESRCH) {
        k->outcome = VG_KILL_GONE;
    } else {
        k->outcome = VG_KILL_FAILED;
        k->error = rc;
    }
    vg_kill_release(k);
}

int vg_kill_start(struct vg_kill *k, int proc_root_fd, const char *dev_dir,
                  const struct vg_kill_ctx *ctx, vg_kill_nvml_fn nvml, void *nvml_arg,
                  struct vg_err *err)
{
    const struct vg_kill_identity *id = k->id;
    /* The pidfd first: from here on a signal reaches the process the pidfd names or nobody.
     * What follows checks that this is still the process that was planned. */
    int pidfd = -1;
    int rc = vg_proc_pidfd_open(id->pid, &pidfd);
    if (rc) {
        vg_kill_fail(k, rc);
        return 0;
    }
    vg_stop_init(&k->stop, pidfd);
    struct vg_proc now;
    struct vg_err rerr = VG_ERR_INIT;
    rc = vg_proc_read(proc_root_fd, id->pid, dev_dir, &now, &rerr);
    vg_err_release(&rerr);
    if (rc == -ENOMEM) {
        vg_proc_release(&now);
        vg_kill_release(k);
        return vg_err_set(err, rc, "out of memory re-reading process %d", (int)id->pid);
    }
    if (rc == -ENOENT || rc == -ESRCH) {
        vg_proc_release(&now);
        vg_kill_fail(k, -ESRCH);
        return 0;
    }
    int lists = -1;
    if (rc == 0 && id->nvml && nvml && (!(now.known & VG_PROC_K_FDS) || now.ndev_minors == 0))
        lists = nvml(nvml_arg, id->pid);
    enum vg_kill_refusal r = rc ? VG_KILL_UNREADABLE : vg_kill_verify(id, &now, lists, ctx);
    k->now_start_ticks = now.start_ticks;
    k->now_uid = now.uid;
    vg_proc_release(&now);
    if (r != VG_KILL_ALLOWED) {
        k->outcome = VG_KILL_REFUSED;
        k->refusal = r;
        vg_kill_release(k);
        return 0;
    }
    vg_stop_term(&k->stop);
    vg_kill_sync(k);
    return 0;
}

void vg_kill_finish(struct vg_kill *ks, size_t n, unsigned grace_ms, unsigned kill_wait_ms)
{
    if (!n)
        return;
    vg_stop_finish(&ks[0].stop, n, sizeof(*ks), grace_ms, kill_wait_ms);
    for (size_t i = 0; i < n; i++)
        if (ks[i].outcome == VG_KILL_PENDING)
            vg_kill_sync(&ks[i]);
}

int vg_kill_who_open(const char *proc_root, struct vg_kill_who *w, struct vg_err *err)
{
    *w = (struct vg_kill_who){.root_fd = -1};
    const char *root = proc_root && *proc_root ? proc_root : "/proc";
    w->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->root_fd < 0)
        return vg_err_set(err, -errno, "cannot open '%s': %s", root, strerror(errno));
    if (vg_proc_self_pid(w->root_fd, &w->self) == 0)
        w->own_pidns = w->self == getpid();
    else
        w->self = getpid(); /* not shown there: at least never our own PID */
    int rc = vg_proc_ancestors(w->root_fd, w->self, &w->ancestors, &w->nancestors, err);
    if (rc)
        vg_kill_who_release(w);
    return rc;
}

struct vg_kill_ctx vg_kill_who_ctx(const struct vg_kill_who *w)
{
    return (struct vg_kill_ctx){
        .self = w->self, .ancestors = w->ancestors, .nancestors = w->nancestors, .ruid = getuid()};
}

void vg_kill_who_release(struct vg_kill_who *w)
{
    free(w->ancestors);
    w->ancestors = NULL;
    w->nancestors = 0;
    if (w->root_fd >= 0)
        close(w->root_fd);
    w->root_fd = -1;
}
