/*
 * SIGTERM -> grace -> SIGKILL through pidfds, or by number for our own unreaped children where
 * there are none (see stop.h). The pidfd system calls themselves are proc/signal.c's; this is
 * the sequence.
 */
#include "act/stop.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/signal.h"
#include "util/clock.h"

void vg_stop_init(struct vg_stop *s, int pidfd)
{
    *s = (struct vg_stop){.pidfd = pidfd, .outcome = VG_STOP_IDLE};
}

void vg_stop_init_child(struct vg_stop *s, pid_t child)
{
    *s = (struct vg_stop){.pidfd = -1, .child = child, .outcome = VG_STOP_IDLE};
}

/* Whether s is a child to signal by number (no pidfd). */
static bool vg_stop_by_pid(const struct vg_stop *s)
{
    return s->pidfd < 0 && s->child > 0;
}

/* Send sig to s: through its pidfd, or by number to our unreaped child (whose number cannot be
 * another process's while it is unreaped). 0 or a negative errno. */
static int vg_stop_send(const struct vg_stop *s, int sig)
{
    if (!vg_stop_by_pid(s))
        return vg_proc_pidfd_signal(s->pidfd, sig);
    return kill(s->child, sig) == 0 ? 0 : -errno;
}

/* The step between two looks at a child with no pidfd (nothing to poll on). */
#define VG_STOP_CHILD_STEP_MS 20u

/* Whether s has exited, waiting up to timeout_ms: 1, 0 or a negative errno. A child is looked
 * at with WNOWAIT, which leaves it to be reaped by its owner. */
static int vg_stop_exited(const struct vg_stop *s, unsigned timeout_ms)
{
    if (!vg_stop_by_pid(s))
        return vg_proc_pidfd_exited(s->pidfd, timeout_ms);
    uint64_t deadline = vg_clock_ms() + timeout_ms;
    for (;;) {
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_PID, (id_t)s->child, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
            return errno == ECHILD ? 1 : -errno; /* ECHILD: reaped already, so gone */
        if (si.si_pid == s->child)
            return 1;
        uint64_t now = vg_clock_ms();
        if (now >= deadline)
            return 0;
        uint64_t left = deadline - now;
        vg_clock_sleep_until(now + (left < VG_STOP_CHILD_STEP_MS ? left : VG_STOP_CHILD_STEP_MS));
    }
}

void vg_stop_release(struct vg_stop *s)
{
    if (s && s->pidfd >= 0) {
        close(s->pidfd);
        s->pidfd = -1;
    }
}

/* A signal that could not be sent: -ESRCH means it had exited (after SIGTERM: of it). */
static void vg_stop_fail(struct vg_stop *s, int rc)
{
    if (rc == -ESRCH) {
        s->outcome = s->sent_term ? VG_STOP_TERMINATED : VG_STOP_GONE;
    } else {
        s->outcome = VG_STOP_FAILED;
        s->error = rc;
    }
    vg_stop_release(s);
}

void vg_stop_term(struct vg_stop *s)
{
    s->term_at_ms = vg_clock_ms();
    int rc = vg_stop_send(s, SIGTERM);
    if (rc) {
        vg_stop_fail(s, rc);
        return;
    }
    s->sent_term = true;
    s->outcome = VG_STOP_PENDING;
}

static struct vg_stop *vg_stop_at(struct vg_stop *first, size_t stride, size_t i)
{
    return (struct vg_stop *)(void *)((char *)first + i * stride);
}

/* Look at every pending target until deadline_ms; exited ones get `done` as their outcome. */
static void vg_stop_wait(struct vg_stop *first, size_t n, size_t stride,
                         unsigned long long deadline_ms, enum vg_stop_outcome done)
{
    for (;;) {
        size_t pending = 0;
        for (size_t i = 0; i < n; i++) {
            struct vg_stop *s = vg_stop_at(first, stride, i);
            if (s->outcome != VG_STOP_PENDING)
                continue;
            int r = vg_stop_exited(s, 0);
            if (r == 1) {
                s->outcome = done;
                s->exit_ms = vg_clock_ms() - s->term_at_ms;
                vg_stop_release(s);
            } else if (r < 0) {
                s->outcome = VG_STOP_FAILED;
                s->error = r;
                vg_stop_release(s);
            } else {
                pending++;
            }
        }
        unsigned long long now = vg_clock_ms();
        if (!pending || now >= deadline_ms)
            return;
        /* Wait on one of them; the others are looked at again right after. A short slice
         * keeps several targets from waiting in turn. */
        for (size_t i = 0; i < n; i++) {
            struct vg_stop *s = vg_stop_at(first, stride, i);
            if (s->outcome == VG_STOP_PENDING) {
                unsigned long long left = deadline_ms - now;
                vg_stop_exited(s, left < 50 ? (unsigned)left : 50);
                break;
            }
        }
    }
}

void vg_stop_finish(struct vg_stop *first, size_t n, size_t stride, unsigned grace_ms,
                    unsigned kill_wait_ms)
{
    unsigned long long last = 0;
    for (size_t i = 0; i < n; i++) {
        const struct vg_stop *s = vg_stop_at(first, stride, i);
        if (s->outcome == VG_STOP_PENDING && s->term_at_ms > last)
            last = s->term_at_ms;
    }
    if (!last)
        return;
    /* The targets got their SIGTERM within moments of one another: one deadline for all,
     * counted from the last, so each has at least the grace period. */
    vg_stop_wait(first, n, stride, last + grace_ms, VG_STOP_TERMINATED);
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        struct vg_stop *s = vg_stop_at(first, stride, i);
        if (s->outcome != VG_STOP_PENDING)
            continue;
        int rc = vg_stop_send(s, SIGKILL);
        if (rc == -ESRCH) {
            s->outcome = VG_STOP_TERMINATED;
            s->exit_ms = vg_clock_ms() - s->term_at_ms;
            vg_stop_release(s);
        } else if (rc) {
            s->outcome = VG_STOP_FAILED;
            s->error = rc;
            vg_stop_release(s);
        } else {
            s->sent_kill = true;
            any = true;
        }
    }
    if (!any)
        return;
    vg_stop_wait(first, n, stride, vg_clock_ms() + kill_wait_ms, VG_STOP_KILLED);
    for (size_t i = 0; i < n; i++) {
        struct vg_stop *s = vg_stop_at(first, stride, i);
        if (s->outcome == VG_STOP_PENDING) {
            s->outcome = VG_STOP_FAILED;
            s->error = -ETIMEDOUT;
            vg_stop_release(s);
        }
    }
}

int vg_stop_signal_if(pid_t pid, int sig, bool (*same)(void *ctx), void *ctx)
{
    int pfd = -1;
    int rc = vg_proc_pidfd_open(pid, &pfd);
    if (rc == 0) {
        rc = same(ctx) ? vg_proc_pidfd_signal(pfd, sig) : -ESRCH;
        close(pfd);
        return rc;
    }
    if (rc != -ENOSYS)
        return rc;
    if (!same(ctx))
        return -ESRCH;
    return kill(pid, sig) == 0 ? 0 : -errno;
}

void vg_stop_group_step(pid_t pgid, uint64_t term_at, unsigned grace_ms, bool *termed, uint64_t now)
{
    if (!*termed && now >= term_at) {
        kill(-pgid, SIGTERM);
        *termed = true;
    } else if (*termed && now >= term_at + grace_ms) {
        kill(-pgid, SIGKILL);
    }
}

uint64_t vg_stop_group_due(uint64_t term_at, unsigned grace_ms, bool termed)
{
    return term_at + (termed ? grace_ms : 0);
}
