/*
 * The words of a stop (see settle.h).
 */
#include "render/settle.h"
#include "render/json.h"
#include "render/text.h"

#include <errno.h>
#include <string.h>

#include "render/clean.h"
#include "render/text.h"
#include "util/parse.h"

void vg_render_settle_outcome(struct vg_buf *o, const struct vg_plan_entry *e,
                              const struct vg_kill *k, unsigned grace_ms)
{
    switch (k->outcome) {
    case VG_KILL_PENDING:
        vg_buf_adds(o, "still waiting");
        break;
    case VG_KILL_TERMINATED:
        vg_buf_printf(o, "exited after SIGTERM (%.1fs)", (double)k->stop.exit_ms / 1000.0);
        break;
    case VG_KILL_KILLED:
        vg_buf_printf(o, "still running %.1fs after SIGTERM: killed with SIGKILL",
                      (double)grace_ms / 1000.0);
        break;
    case VG_KILL_GONE:
        vg_buf_adds(o, "had already exited: nothing sent");
        break;
    case VG_KILL_REFUSED:
        vg_buf_adds(o, "not signalled: ");
        vg_render_clean_refusal(o, e, k->refusal, k);
        break;
    case VG_KILL_FAILED:
        if (k->error == -ETIMEDOUT)
            vg_buf_adds(o, "still there after SIGKILL: stuck in the kernel; only a GPU reset or "
                           "a reboot frees its memory");
        else
            vg_buf_printf(o, "could not signal it: %s%s", strerror(-k->error),
                          k->error == -ENOSYS ? " (signals go through a pidfd, which needs "
                                                "Linux 5.3 or later)"
                                              : "");
        break;
    }
}

static void vg_settle_size(struct vg_buf *o, uint64_t bytes)
{
    char s[32];
    vg_fmt_size_or(true, bytes, "?", s, sizeof(s));
    vg_buf_adds(o, s);
}

/* The first present holder that is not infrastructure, of the owner wanted (or any). */
static const struct vg_settle_holder *vg_settle_who(const struct vg_settle_gpu *g, bool target)
{
    for (size_t i = 0; i < g->nholders; i++) {
        const struct vg_settle_holder *h = &g->holders[i];
        if (h->present && h->owner != VG_SETTLE_INFRA &&
            (!target || h->owner == VG_SETTLE_TARGET) && (target || h->owner != VG_SETTLE_TARGET))
            return h;
    }
    return NULL;
}

/* The PID only the driver still lists: a target that has exited (the largest, when several). */
static const struct vg_settle_holder *vg_settle_unreleased(const struct vg_settle_gpu *g)
{
    const struct vg_settle_holder *pick = NULL;
    for (size_t i = 0; i < g->nholders; i++) {
        const struct vg_settle_holder *h = &g->holders[i];
        if (h->present && h->owner == VG_SETTLE_UNSEEN &&
            (!pick || (h->mem_known && (!pick->mem_known || h->mem_bytes > pick->mem_bytes))))
            pick = h;
    }
    return pick;
}

static void vg_settle_pid(struct vg_buf *o, const struct vg_settle_holder *h)
{
    vg_buf_printf(o, "PID %d", (int)h->pid);
    if (h->comm) {
        vg_buf_adds(o, " (");
        vg_text_escape_str(o, h->comm, 40);
        vg_buf_addc(o, ')');
    }
}

/* long: one sentence per verdict and cause; the list reads best whole, in one place. */
void vg_render_settle_gpu(struct vg_buf *o, const struct vg_settle_gpu *g)
{
    const char *w = g->why ? g->why : "free";
    const struct vg_settle_holder *h = NULL;
    vg_buf_adds(o, ": ");
    switch (g->state) {
    case VG_SETTLE_FREE:
        vg_buf_adds(o, "free, nothing to stop");
        break;
    case VG_SETTLE_FREED:
        vg_buf_adds(o, "the memory came back");
        if (g->before_known && g->mem_known && g->before > g->used) {
            vg_buf_adds(o, " (");
            vg_settle_size(o, g->before - g->used);
            vg_buf_adds(o, " freed)");
        }
        break;
    case VG_SETTLE_UNKNOWN:
        vg_buf_adds(o, strcmp(w, "look-failed") == 0
                           ? "could not be looked at again: the host's processes could not be read"
                           : "its memory could not be read");
        break;
    case VG_SETTLE_UNEXPLAINED:
        vg_settle_size(o, g->used);
        vg_buf_adds(o, " used that no process accounts for, and nothing was stopped on it");
        break;
    case VG_SETTLE_HELD: {
        /* Counted, not named: what was not to be stopped is not this stop's to list. */
        size_t n = 0, unseen = 0;
        for (size_t i = 0; i < g->nholders; i++) {
            const struct vg_settle_holder *x = &g->holders[i];
            if (x->present && x->owner != VG_SETTLE_INFRA && x->owner != VG_SETTLE_TARGET) {
                n++;
                unseen += x->owner == VG_SETTLE_UNSEEN;
            }
        }
        vg_buf_printf(o, "still held by %zu other process%s, not to be stopped", n,
                      n == 1 ? "" : "es");
        if (unseen)
            vg_buf_printf(o, " (%zu of them a PID this /proc does not show)", unseen);
        break;
    }
    case VG_SETTLE_NOT_RELEASED:
        vg_settle_size(o, g->used);
        vg_buf_adds(o, " still used: ");
        h = vg_settle_unreleased(g);
        if (h)
            vg_buf_printf(o, "PID %d, which held it, has exited", (int)h->pid);
        else
            vg_buf_adds(o, "a process that held it has exited");
        vg_buf_adds(o, ", but the driver still lists it and has not released its memory yet "
                       "(look again with 'vramguard doctor')");
        break;
    case VG_SETTLE_STUCK:
        vg_settle_size(o, g->used);
        vg_buf_adds(o, " still used after the stopped processes were gone");
        break;
    case VG_SETTLE_WEDGED:
        h = vg_settle_who(g, true);
        if (strcmp(w, "lost") == 0)
            vg_buf_adds(o, "lost (fell off the bus or failed)");
        else if (strcmp(w, "hung") == 0)
            vg_buf_adds(o, "hung: the driver did not answer in time");
        else if (strcmp(w, "missing") == 0)
            vg_buf_adds(o, "not found by the driver");
        else if (strcmp(w, "d-state") == 0)
            vg_buf_adds(o, "held by a process stuck in the driver (D state): no signal reaches it");
        else if (h) {
            vg_buf_adds(o, "still held by ");
            vg_settle_pid(o, h);
            vg_render_settle_survivor(o, h);
        } else {
            vg_buf_adds(o, "wedged");
        }
        break;
    }
    if (g->reset_needed)
        vg_buf_adds(o, "; only a GPU reset (or a reboot) frees it");
}

void vg_render_settle_survivor(struct vg_buf *o, const struct vg_settle_holder *h)
{
    if (h->signalled && h->outcome == VG_KILL_FAILED && h->error != -ETIMEDOUT)
        vg_buf_adds(o, ", which could not be signalled");
    else if (h->signalled)
        vg_buf_adds(o, ", which outlived SIGKILL");
    else if (h->state == 'Z' || h->refusal == VG_KILL_ZOMBIE)
        vg_buf_adds(o, ", a zombie (its parent must reap it)");
    else if (h->refusal == VG_KILL_CHANGED)
        vg_buf_adds(o, ", which was not signalled: its PID now names another process (the "
                       "start time or owner changed)");
    else if (h->refusal == VG_KILL_UNREADABLE)
        vg_buf_adds(o, ", which was not signalled: who it is could not be read again");
    else if (h->refusal == VG_KILL_DSTATE)
        vg_buf_adds(o, ", which was not signalled: stuck in the driver (D state)");
    else
        vg_buf_adds(o, ", which cannot be signalled");
}

/* ---- infrastructure ------------------------------------------------------------------------- */

void vg_render_json_infra(struct vg_json *j, const char *key, const struct vg_infra *inf)
{
    static const char *const kinds[] = {NULL, "impostor", "unproven", "proven"};
    vg_json_key(j, key);
    if (inf->kind == VG_INFRA_NONE) {
        vg_json_null(j);
        return;
    }
    vg_json_obj_begin(j);
    vg_json_kstr(j, "claims", inf->name);
    vg_json_kstr(j, "verdict", kinds[inf->kind]);
    vg_json_key(j, "facts");
    vg_json_arr_begin(j);
    for (unsigned bit = 1; bit <= VG_INFRA_F_LAST; bit <<= 1)
        if (inf->facts & bit)
            vg_json_str(j, vg_infra_fact_id(bit));
    vg_json_arr_end(j);
    vg_json_obj_end(j);
}

void vg_render_infra_why(struct vg_buf *o, const struct vg_infra *inf, const char *exe)
{
    unsigned f = inf->facts;
    if (inf->kind == VG_INFRA_NONE || inf->kind == VG_INFRA_PROVEN)
        return;
    if (f & VG_INFRA_F_EXE_OTHER) {
        vg_buf_adds(o, "it runs ");
        if (exe)
            vg_text_escape_str(o, exe, 80);
        else
            vg_buf_adds(o, "another program");
    } else if (f & (VG_INFRA_F_EXE_UNTRUSTED | VG_INFRA_F_DIRS_UNTRUSTED)) {
        vg_buf_adds(o, "its executable");
        if (exe) {
            vg_buf_adds(o, " ");
            vg_text_escape_str(o, exe, 80);
        }
        vg_buf_adds(o, " is not root's, or sits where others may write");
    } else if (f & VG_INFRA_F_EXE_DELETED) {
        vg_buf_adds(o, "its executable was deleted or replaced since it started");
    } else {
        vg_buf_adds(o, "its executable could not be read");
    }
}

void vg_render_settle_line(struct vg_buf *o, const struct vg_plan *plan,
                           const struct vg_settle_target *targets, size_t ntargets,
                           const struct vg_settle_result *res, unsigned grace_ms)
{
    size_t start = o->len;
    for (size_t i = 0; i < ntargets; i++) {
        if (!targets[i].signal)
            continue;
        const struct vg_plan_entry *e = NULL;
        for (size_t k = 0; k < plan->n && !e; k++)
            e = &plan->v[k].id == targets[i].id ? &plan->v[k] : NULL;
        vg_buf_printf(o, "%sPID %d ", o->len > start ? "; " : "", (int)targets[i].id->pid);
        vg_render_settle_outcome(o, e, &res->kills[i], grace_ms);
    }
    for (size_t i = 0; i < res->ngpus; i++) {
        vg_buf_printf(o, "; GPU %u", res->gpus[i].index);
        vg_render_settle_gpu(o, &res->gpus[i]);
    }
}

void vg_render_settle_bgstop(struct vg_buf *o, const struct vg_bgstop_result *r, unsigned grace_ms)
{
    if (r->error)
        vg_buf_adds(o, vg_err_msg(&r->err));
    else
        vg_render_settle_line(o, &r->plan, r->targets, r->ntargets, &r->res, grace_ms);
}
