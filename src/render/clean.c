/*
 * `clean` output (see clean.h). The text is written for someone about to stop other people's
 * processes: every process with why it is (or is not) touched, every GPU with the memory at
 * stake, and after --force what happened, what is left and the next step.
 */
#include "render/clean.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/visible.h"
#include "render/json.h"
#include "render/settle.h"
#include "render/text.h"
#include "util/array.h"
#include "util/parse.h"
#include "util/sat.h"

const char *const vg_clean_reset_preconditions[] = {
    "run it as root",
    "no process may use the GPU: no CUDA or graphics application, no X server or other display "
    "on it, no monitoring tool holding it (another nvidia-smi, DCGM's nv-hostengine, "
    "dcgm-exporter)",
    "stop nvidia-persistenced and the MPS control daemon first if they hold it (persistence "
    "mode itself may stay on)",
    "on NVLink/NVSwitch systems (HGX/DGX) the driver may require resetting every GPU of the "
    "baseboard together, with the fabric manager running",
    "the GPU's applications lose their state: anything left on it is gone",
    NULL,
};

/* What a printed reset command names the GPU by: its UUID when it is a well-formed one, else a
 * placeholder, since nvidia-smi -i reads a comma as a list of GPUs (a command pasted from here
 * must never reset another GPU). */
static const char *vg_reset_target(const char *uuid)
{
    return vg_visible_uuid_ok(uuid) ? uuid : "<UUID>";
}

static const struct vg_gpu *vg_gpu_by_uuid(const struct vg_snapshot *s, const char *uuid,
                                           size_t *idx)
{
    size_t i;
    if (!s || !vg_gpu_list_by_uuid(&s->gpus, uuid, &i))
        return NULL;
    if (idx)
        *idx = i;
    return &s->gpus.gpus[i];
}

static const char *vg_uuid(const struct vg_gpu *g)
{
    return (g->known & VG_GPU_K_UUID) ? g->uuid : NULL;
}

/* The plan's entries are sorted by pid (act/plan.h): a binary search, so that rendering a
 * plan over thousands of holders stays linear in them. */
static const struct vg_plan_entry *vg_entry_of(const struct vg_plan *p, pid_t pid)
{
    /* an entry begins with its identity, which begins with its pid */
    size_t lo = vg_array_lower_bound(&pid, p->v, p->n, sizeof(*p->v), vg_array_cmp_pid);
    return lo < p->n && p->v[lo].id.pid == pid ? &p->v[lo] : NULL;
}

/* Memory the driver attributes to signal targets on before-GPU gi, and whether any target
 * there is seen only through the device node. */
static uint64_t vg_target_bytes(const struct vg_clean_view *v, size_t gi, size_t *ntargets,
                                bool *fd_only)
{
    uint64_t sum = 0;
    *ntargets = 0;
    *fd_only = false;
    const struct vg_snapshot *s = v->before;
    size_t first, count;
    vg_snap_gpu_holdings(s, gi, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &s->holdings[i];
        const struct vg_plan_entry *e = vg_entry_of(v->plan, h->pid);
        if (!e || !e->signal)
            continue;
        (*ntargets)++;
        if (h->used_known)
            sum = vg_sat_add(sum, h->used_bytes);
        if (VG_SEEN_NODE_ONLY(h->seen))
            *fd_only = true;
    }
    return sum;
}

/* Does a finding (of snapshot snap) concern the plan: one of its GPUs in scope, or one of its
 * processes in the plan? */
static bool vg_concerns(const struct vg_clean_view *v, const struct vg_snapshot *snap,
                        const struct vg_finding *f)
{
    for (size_t i = 0; i < f->npids; i++)
        if (vg_entry_of(v->plan, f->pids[i]))
            return true;
    for (size_t i = 0; i < f->ngpus; i++) {
        size_t bi;
        if (vg_gpu_by_uuid(v->before, vg_uuid(&snap->gpus.gpus[f->gpus[i]]), &bi) &&
            vg_plan_in_scope(v->plan, bi))
            return true;
    }
    return false;
}

/* PIDs the plan signalled that the snapshot after still shows holding something. */
static bool vg_still_listed(const struct vg_clean_view *v, pid_t pid)
{
    if (!v->after)
        return false;
    for (size_t i = 0; i < v->after->nholdings; i++)
        if (v->after->holdings[i].pid == pid)
            return true;
    return false;
}

static bool vg_was_signalled(const struct vg_clean_view *v, size_t i)
{
    return v->kills &&
           (v->kills[i].outcome == VG_KILL_TERMINATED || v->kills[i].outcome == VG_KILL_KILLED);
}

/* ------------------------------------------------------------------------------------ words */

/* The refusals that need no figures, one sentence each; the others are worded below. */
static const char *const vg_refusal_sentences[] = {
    [VG_KILL_INIT] = "PID 1 (init) is never signalled",
    [VG_KILL_SELF] = "this is vramguard itself",
    [VG_KILL_ANCESTOR] = "it is running vramguard (one of its ancestors): never signalled",
    [VG_KILL_KTHREAD] = "a kernel thread: no signal stops it",
    [VG_KILL_DSTATE] = "a thread is in uninterruptible sleep (D), waiting in the driver: no "
                       "signal reaches it. Only a GPU reset (once nothing else uses the GPU) or "
                       "a reboot frees its memory",
    [VG_KILL_UNREADABLE] = "its identity (start time, owner) could not be read",
    [VG_KILL_NOT_VISIBLE] =
        "the driver lists this PID but /proc shows no such process: it lives in "
        "another PID namespace (run vramguard on the host) or has exited while "
        "the driver still holds its memory",
    [VG_KILL_NAMESPACE] = "only the driver lists it, and this /proc is not the host's PID "
                          "namespace: the number may name another process here (run vramguard on "
                          "the host)",
    [VG_KILL_NOT_HOLDER] = "holds no GPU memory and no NVIDIA device node: nothing to free",
    [VG_KILL_RELEASED] = "it no longer holds the GPU: left alone",
    [VG_KILL_STALE] = "the driver lists this PID, but the process now under it holds no "
                      "node of the GPU: a stale entry of a process that exited, its PID "
                      "reused by another process, which is never signalled",
};

/* long: one case per refusal with figures, each its own sentence; the list reads best whole,
 * in one place. */
static void vg_refusal_text(struct vg_buf *o, const struct vg_plan_entry *e, enum vg_kill_refusal r,
                            const struct vg_kill *k)
{
    if (r == VG_KILL_NOT_VISIBLE && e->hidden) {
        vg_buf_adds(o, "the driver lists this PID but /proc, mounted with hidepid, does not show "
                       "it: most likely another user's process, hidden from vramguard, not gone "
                       "(run as root, or in the group the procfs exempts with gid=, to see it)");
        return;
    }
    if ((size_t)r < sizeof(vg_refusal_sentences) / sizeof(vg_refusal_sentences[0]) &&
        vg_refusal_sentences[r]) {
        vg_buf_adds(o, vg_refusal_sentences[r]);
        return;
    }
    switch (r) {
    case VG_KILL_PROTECTED:
        if (e->infra.kind == VG_INFRA_UNPROVEN) {
            /* act/infra.h: named so and not disproven: refused, and said so, not hidden */
            vg_buf_printf(o, "named like infrastructure (%s), but ",
                          e->protected_name ? e->protected_name : "a protected name");
            vg_render_infra_why(o, &e->infra, NULL);
            vg_buf_adds(o, ": never signalled by a cleanup; check it (ls -l /proc/PID/exe) and "
                           "restart or stop it yourself");
            break;
        }
        vg_buf_printf(o,
                      "infrastructure (%s): never signalled by a cleanup; stop its service "
                      "yourself if it really must go",
                      e->protected_name ? e->protected_name : "a protected name");
        break;
    case VG_KILL_OTHER_USER:
        vg_buf_adds(o, "belongs to ");
        if (e->user)
            vg_text_escape_str(o, e->user, 40);
        else
            vg_buf_printf(o, "uid %u", (unsigned)e->id.uid);
        vg_buf_adds(o, ", another user, and you are not root: ask its owner, or run as root");
        break;
    case VG_KILL_ZOMBIE:
        vg_buf_printf(o,
                      "a zombie (defunct): vramguard never signals one; act on its parent, "
                      "PID %d, which must reap it (if the parent is stuck, stopping it lets "
                      "init reap the zombie). The parent is not signalled for you",
                      (int)e->act_on);
        break;
    case VG_KILL_CHANGED:
        if (k && k->now_start_ticks != e->id.start_ticks)
            vg_buf_printf(o,
                          "its start time changed since the plan (%" PRIu64 " -> %" PRIu64
                          " ticks after boot): the PID now names another process",
                          e->id.start_ticks, k->now_start_ticks);
        else
            vg_buf_printf(o, "its owner changed since the plan (uid %u -> %u)", (unsigned)e->id.uid,
                          k ? (unsigned)k->now_uid : 0u);
        break;
    case VG_KILL_UNSURE:
        vg_buf_adds(o, "not a sure leftover: ");
        vg_text_escape_str(o, e->verdict ? e->verdict : "its evidence is weak", 0);
        vg_buf_printf(o, ". Stop it by name if it is one: vramguard clean --pid %d --force",
                      (int)e->id.pid);
        break;
    case VG_KILL_NOT_LEFTOVER:
        vg_buf_adds(o, "not a leftover: ");
        vg_text_escape_str(o, e->verdict ? e->verdict : "it detached on purpose", 0);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------------------------------- text */

static void vg_gpu_label(struct vg_buf *o, const struct vg_gpu *g, const struct vg_style *st)
{
    char su[32];
    vg_text_short_uuid(vg_uuid(g), su, sizeof(su));
    vg_buf_printf(o, "%sGPU %u%s  ", st->bold, g->index, st->reset);
    vg_text_escape_str(o, (g->known & VG_GPU_K_NAME) && g->name ? g->name : "(name n/a)", 40);
    vg_buf_adds(o, "  ");
    vg_text_escape_str(o, su, 0);
}

static void vg_entry_gpus(struct vg_buf *o, const struct vg_snapshot *s,
                          const struct vg_plan_entry *e)
{
    if (!e->ngpus) {
        vg_buf_adds(o, "GPU -");
        return;
    }
    vg_buf_adds(o, "GPU ");
    for (size_t k = 0; k < e->ngpus; k++)
        vg_buf_printf(o, "%s%u", k ? "," : "", s->gpus.gpus[e->gpus[k]].index);
}

static void vg_text_entry(struct vg_buf *o, const struct vg_clean_view *v, size_t i,
                          const struct vg_render_opts *ro, const struct vg_style *st)
{
    const struct vg_plan_entry *e = &v->plan->v[i];
    const struct vg_kill *k = v->kills && e->signal ? &v->kills[i] : NULL;
    char mem[32];
    if (e->mem_known)
        vg_fmt_size_or(true, e->mem_bytes, "n/a", mem, sizeof(mem));
    else
        snprintf(mem, sizeof(mem), "%s", VG_SEEN_NODE_ONLY(e->seen) ? "device node only" : "n/a");
    vg_buf_printf(o, "  %sPID %d%s  ", st->bold, (int)e->id.pid, st->reset);
    if (e->user)
        vg_text_escape_str(o, e->user, 24);
    else
        vg_buf_adds(o, "?");
    vg_buf_adds(o, "  ");
    vg_entry_gpus(o, v->before, e);
    vg_buf_printf(o, "  %s", mem);
    if (e->state == 'Z' || e->state == 'D')
        vg_buf_printf(o, "  %sstate %c%s", st->red, vg_text_state(e->state), st->reset);
    vg_buf_adds(o, "\n    ");
    size_t width = ro->width > 8 ? ro->width - 4 : 0;
    if (e->cmdline && e->cmdline[0]) {
        vg_text_escape_str(o, e->cmdline, width);
    } else {
        vg_buf_addc(o, '[');
        vg_text_escape_str(o, e->comm ? e->comm : "?", 0);
        vg_buf_addc(o, ']');
    }
    vg_buf_adds(o, "\n    why: ");
    if (e->reason) {
        vg_buf_printf(o, "%s: ", e->reason);
        vg_text_escape_str(o, e->finding ? e->finding : "", 0);
    } else if (e->refusal == VG_KILL_NOT_HOLDER) {
        vg_buf_adds(o, "named with --pid");
    } else if (e->refusal == VG_KILL_NOT_LEFTOVER) {
        vg_buf_adds(o, "it was adopted by init or a subreaper, or its job's leader is gone, "
                       "which is how a leftover looks");
    } else {
        vg_buf_printf(o, "holds the GPU and matches %s",
                      v->filters && *v->filters ? v->filters : "the filters");
    }
    vg_buf_addc(o, '\n');
    if (e->signal && e->verdict) {
        /* named explicitly although the leftover model is not sure: say what it thinks */
        vg_buf_adds(o, "    note: vramguard would not have picked it: ");
        vg_text_escape_str(o, e->verdict, 0);
        vg_buf_addc(o, '\n');
    }
    if (!e->signal) {
        vg_buf_printf(o, "    %s%s:%s ", st->yellow, e->leave ? "left alone" : "not touched",
                      st->reset);
        vg_refusal_text(o, e, e->refusal, NULL);
        vg_buf_addc(o, '\n');
    } else if (k) {
        bool bad = k->outcome == VG_KILL_FAILED || k->outcome == VG_KILL_REFUSED;
        vg_buf_printf(o, "    %sresult:%s ", bad ? st->red : st->green, st->reset);
        vg_render_settle_outcome(o, e, k, v->grace_ms);
        vg_buf_addc(o, '\n');
        if (vg_was_signalled(v, i) && vg_still_listed(v, e->id.pid))
            vg_buf_adds(o, "    the driver still lists this PID: its memory should come back "
                           "once the driver tears the context down; look again with 'vramguard "
                           "doctor'\n");
    }
}

/* The memory at stake on one GPU, before anything is done. */
static void vg_text_gpu_plan(struct vg_buf *o, const struct vg_clean_view *v, size_t gi,
                             const struct vg_style *st)
{
    const struct vg_snapshot *s = v->before;
    const struct vg_gpu *g = &s->gpus.gpus[gi];
    const struct vg_snap_gpu *sg = &s->per_gpu[gi];
    char used[32], total[32], held[32], un[32];
    vg_buf_adds(o, "  ");
    vg_gpu_label(o, g, st);
    bool mem = g->known & VG_GPU_K_MEM;
    vg_fmt_size_or(mem, g->mem_used, "n/a", used, sizeof(used));
    vg_fmt_size_or(mem, g->mem_total, "n/a", total, sizeof(total));
    vg_buf_printf(o, ": %s of %s used", used, total);
    size_t ntargets;
    bool fd_only;
    uint64_t bytes = vg_target_bytes(v, gi, &ntargets, &fd_only);
    if (ntargets == 0) {
        vg_buf_adds(o, "; nothing to stop here\n");
        return;
    }
    vg_buf_printf(o, "; stopping %zu process%s", ntargets, ntargets == 1 ? "" : "es");
    bool unexplained = fd_only && sg->unexplained_known && sg->unexplained_bytes > 0;
    if (bytes) {
        vg_fmt_size_or(true, bytes, "n/a", held, sizeof(held));
        vg_buf_printf(o, " frees the %s the driver attributes to %s", held,
                      ntargets == 1 ? "it" : "them");
    }
    if (unexplained) {
        vg_fmt_size_or(true, sg->unexplained_bytes, "n/a", un, sizeof(un));
        vg_buf_printf(o, "%s likely frees%s the %s no listed process accounts for",
                      bytes ? ", and" : "", sg->unexplained_upper_bound ? " part of" : "", un);
    }
    if (!bytes && !unexplained)
        vg_buf_adds(o, " frees no memory the driver reports (device nodes only)");
    vg_buf_addc(o, '\n');
}

/* The same GPU after --force. */
static void vg_text_gpu_after(struct vg_buf *o, const struct vg_clean_view *v, size_t gi,
                              const struct vg_style *st)
{
    const struct vg_gpu *g = &v->before->gpus.gpus[gi];
    vg_buf_adds(o, "  ");
    vg_gpu_label(o, g, st);
    size_t ai;
    const struct vg_gpu *a = vg_gpu_by_uuid(v->after, vg_uuid(g), &ai);
    if (!a || !v->after->driver_ok) {
        vg_buf_adds(o, ": cannot tell now (the driver's view is unavailable)\n");
        return;
    }
    bool mb = g->known & VG_GPU_K_MEM, ma = a->known & VG_GPU_K_MEM;
    char freed[32], used[32], total[32], un[32];
    if (mb && ma && g->mem_used > a->mem_used) {
        vg_fmt_size_or(true, g->mem_used - a->mem_used, "n/a", freed, sizeof(freed));
        vg_buf_printf(o, ": %sfreed %s%s", st->green, freed, st->reset);
    } else if (mb && ma) {
        vg_buf_adds(o, ": nothing freed");
    } else {
        vg_buf_adds(o, ": memory n/a");
    }
    vg_fmt_size_or(ma, a->mem_used, "n/a", used, sizeof(used));
    vg_fmt_size_or(ma, a->mem_total, "n/a", total, sizeof(total));
    size_t first, count;
    vg_snap_gpu_holdings(v->after, ai, &first, &count);
    vg_buf_printf(o, "; now %s of %s used, %zu holder%s", used, total, count,
                  count == 1 ? "" : "s");
    const struct vg_snap_gpu *sa = &v->after->per_gpu[ai];
    if (sa->unexplained_known && sa->unexplained_bytes > 0) {
        vg_fmt_size_or(true, sa->unexplained_bytes, "n/a", un, sizeof(un));
        vg_buf_printf(o, ", %s held by no listed process", un);
    }
    vg_buf_addc(o, '\n');
    const struct vg_settle_gpu *sg = v->settle ? vg_settle_gpu_of(v->settle, gi) : NULL;
    if (sg) {
        vg_buf_adds(o, "    after the stop");
        vg_render_settle_gpu(o, sg);
        vg_buf_addc(o, '\n');
    }
}

static void vg_text_findings_after(struct vg_buf *o, const struct vg_clean_view *v,
                                   const struct vg_style *st)
{
    const struct vg_findings *fs = v->after_findings;
    size_t shown = 0;
    for (int sev = VG_SEV_CRITICAL; fs && sev >= VG_SEV_INFO; sev--) {
        for (size_t i = 0; i < fs->n; i++) {
            const struct vg_finding *f = &fs->v[i];
            if ((int)f->severity != sev || !vg_concerns(v, v->after, f))
                continue;
            if (!shown++)
                vg_buf_adds(o, "\nStill found (vramguard doctor says):\n");
            const char *sevs = sev == VG_SEV_CRITICAL  ? "CRITICAL"
                               : sev == VG_SEV_WARNING ? "WARNING"
                                                       : "INFO";
            vg_buf_printf(o, "  %s%s%s %s: ",
                          sev == VG_SEV_INFO      ? st->cyan
                          : sev == VG_SEV_WARNING ? st->yellow
                                                  : st->red,
                          sevs, st->reset, f->rule);
            vg_text_escape_str(o, f->title ? f->title : "", 0);
            vg_buf_addc(o, '\n');
            for (size_t k = 0; k < f->nfix; k++) {
                vg_buf_adds(o, "    fix: ");
                vg_text_escape_str(o, f->fix[k], 0);
                vg_buf_addc(o, '\n');
            }
        }
    }
    if (!shown)
        vg_buf_printf(o,
                      "\n%sNothing left to fix on these GPUs%s (vramguard doctor finds no "
                      "problem concerning them).\n",
                      st->green, st->reset);
}

static void vg_text_resets(struct vg_buf *o, const struct vg_clean_view *v,
                           const struct vg_style *st)
{
    if (!v->nresets)
        return;
    vg_buf_printf(o,
                  "\n%sGPU reset%s: memory held with no process left; only a reset (or a "
                  "reboot) frees it.\n",
                  st->bold, st->reset);
    for (size_t i = 0; i < v->nresets; i++) {
        const struct vg_reset *r = &v->resets[i];
        char held[32];
        vg_fmt_size_or(true, r->held, "n/a", held, sizeof(held));
        vg_buf_printf(o, "  GPU %u: %s held.\n    nvidia-smi --gpu-reset -i ", r->index, held);
        vg_text_escape_str(o, vg_reset_target(r->uuid), 0);
        vg_buf_addc(o, '\n');
        if (r->attempted && r->exit_status == 0)
            vg_buf_printf(o, "    %sran it%s: nvidia-smi exited 0\n", st->green, st->reset);
        else if (r->attempted)
            vg_buf_printf(o, "    %sran it%s: nvidia-smi %s %d\n", st->red, st->reset,
                          r->exit_status < 0 ? "was killed by signal" : "exited",
                          r->exit_status < 0 ? -r->exit_status : r->exit_status);
        else if (r->refused)
            vg_buf_printf(o, "    %snot run:%s %s\n", st->yellow, st->reset, r->refused);
        else if (!(v->reset && v->force))
            vg_buf_printf(o,
                          "    'vramguard clean --gpu %u --reset --force', as root, runs it "
                          "after checking again that nothing holds the GPU\n",
                          r->index);
    }
    vg_buf_adds(o, "  Preconditions:\n");
    for (size_t i = 0; vg_clean_reset_preconditions[i]; i++)
        vg_buf_printf(o, "    - %s\n", vg_clean_reset_preconditions[i]);
}

int vg_render_clean_text(const struct vg_clean_view *v, const struct vg_render_opts *ro,
                         struct vg_buf *out)
{
    struct vg_style st;
    vg_style_init(&st, ro->color);
    const struct vg_plan *p = v->plan;
    const struct vg_snapshot *s = v->before;
    vg_render_replay_text(out, s, &st);
    if (!s->driver_ok) {
        vg_buf_printf(out, "%sno NVIDIA driver view:%s ", st.yellow, st.reset);
        vg_text_escape_str(out, s->driver_error ? s->driver_error : "unknown reason", 0);
        vg_buf_adds(out, "\nOnly holders of device nodes are seen; memory cannot be checked.\n\n");
    }
    if (v->force)
        vg_buf_printf(out,
                      "%sClean%s: SIGTERM through a pidfd after re-checking each process, "
                      "SIGKILL %.1fs later if it is still there.\n\n",
                      st.bold, st.reset, (double)v->grace_ms / 1000.0);
    else
        vg_buf_printf(out, "%sPlan%s (dry run: nothing was signalled; add --force to act).\n\n",
                      st.bold, st.reset);

    if (p->n == 0) {
        if (v->filters && *v->filters)
            vg_buf_printf(out, "No process holding a GPU matches %s.\n\n", v->filters);
        else
            vg_buf_adds(out, "Nothing to clean: no leftover of a finished job holds a "
                             "GPU.\n\n");
    }
    if (p->nsignal) {
        if (v->force)
            vg_buf_printf(out, "%zu target%s:\n", p->nsignal, p->nsignal == 1 ? "" : "s");
        else
            vg_buf_printf(out, "Would stop %zu process%s (SIGTERM, then SIGKILL after %.1fs):\n",
                          p->nsignal, p->nsignal == 1 ? "" : "es", (double)v->grace_ms / 1000.0);
        for (size_t i = 0; i < p->n; i++)
            if (p->v[i].signal)
                vg_text_entry(out, v, i, ro, &st);
        vg_buf_addc(out, '\n');
    }
    if (p->nrefused) {
        vg_buf_printf(out, "Will not touch %zu process%s:\n", p->nrefused,
                      p->nrefused == 1 ? "" : "es");
        for (size_t i = 0; i < p->n; i++)
            if (!p->v[i].signal && !p->v[i].leave)
                vg_text_entry(out, v, i, ro, &st);
        vg_buf_addc(out, '\n');
    }
    if (p->nleft) {
        vg_buf_printf(out,
                      "Left alone: %zu process%s that look%s orphaned but %s not a sure "
                      "leftover:\n",
                      p->nleft, p->nleft == 1 ? "" : "es", p->nleft == 1 ? "s" : "",
                      p->nleft == 1 ? "is" : "are");
        for (size_t i = 0; i < p->n; i++)
            if (p->v[i].leave)
                vg_text_entry(out, v, i, ro, &st);
        vg_buf_addc(out, '\n');
    }

    if (s->driver_ok && p->nscope) {
        vg_buf_adds(out, v->force ? "Memory before:\n" : "Memory at stake:\n");
        for (size_t i = 0; i < p->nscope; i++)
            vg_text_gpu_plan(out, v, p->scope[i], &st);
    }
    if (v->force && v->after) {
        vg_buf_adds(out, "\nMemory after:\n");
        for (size_t i = 0; i < p->nscope; i++)
            vg_text_gpu_after(out, v, p->scope[i], &st);
        vg_text_findings_after(out, v, &st);
    }
    vg_text_resets(out, v, &st);
    /* Who could not be seen could not be planned for. */
    vg_render_unread_text(out, s, &st);
    if (ro->verbose)
        vg_render_unread_names(out, s, &st);
    return out->err;
}

/* ------------------------------------------------------------------------------------- JSON */

static void vg_json_refusal(struct vg_json *j, const struct vg_plan_entry *e,
                            enum vg_kill_refusal r, const struct vg_kill *k)
{
    vg_json_kstr(j, "refusal", vg_kill_refusal_id(r));
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_refusal_text(&b, e, r, k);
    vg_json_kstr(j, "refusal_message", r == VG_KILL_ALLOWED ? NULL : vg_buf_str(&b));
    if (b.err)
        j->rc = j->rc ? j->rc : b.err;
    vg_buf_release(&b);
}

static void vg_json_entry(struct vg_json *j, const struct vg_clean_view *v, size_t i)
{
    const struct vg_plan_entry *e = &v->plan->v[i];
    const struct vg_snapshot *s = v->before;
    vg_json_obj_begin(j);
    vg_json_ku64(j, "pid", (uint32_t)e->id.pid);
    bool known = e->refusal != VG_KILL_NOT_VISIBLE && e->refusal != VG_KILL_NOT_HOLDER &&
                 e->refusal != VG_KILL_UNREADABLE;
    vg_json_ku64_opt(j, "start_ticks", known, e->id.start_ticks);
    vg_json_ku64_opt(j, "uid", known, e->id.uid);
    vg_json_kstr(j, "user", e->user);
    vg_json_kstr(j, "comm", e->comm);
    vg_json_kstr(j, "command", e->cmdline);
    char state[2] = {e->state, '\0'};
    vg_json_kstr(j, "state", e->state == '?' ? NULL : state);
    vg_json_gpu_refs(j, &s->gpus, e->gpus, e->ngpus);
    vg_json_kstr(j, "seen", e->seen ? vg_render_seen(e->seen) : NULL);
    vg_json_ku64_opt(j, "memory", e->mem_known, e->mem_bytes);
    vg_json_ku64_opt(j, "age_seconds", e->age_known, e->age_ms / 1000u);
    vg_json_kstr(j, "reason", e->reason);
    vg_json_kstr(j, "finding", e->finding);
    vg_json_kstr(j, "action", e->signal ? "signal" : e->leave ? "leave" : "refuse");
    vg_json_kstr(j, "verdict", e->verdict);
    vg_json_refusal(j, e, e->refusal, NULL);
    vg_json_kstr(j, "protected_name", e->protected_name);
    vg_render_json_infra(j, "infrastructure_check", &e->infra);
    if (e->refusal == VG_KILL_ZOMBIE)
        vg_json_ku64(j, "act_on_pid", (uint32_t)e->act_on);
    else
        vg_json_kstr(j, "act_on_pid", NULL);
    vg_json_key(j, "result");
    const struct vg_kill *k = v->kills && e->signal ? &v->kills[i] : NULL;
    if (!k) {
        vg_json_null(j);
    } else {
        vg_json_obj_begin(j);
        vg_json_kstr(j, "outcome", vg_kill_outcome_id(k->outcome));
        vg_json_key(j, "signals");
        vg_json_arr_begin(j);
        if (k->stop.sent_term)
            vg_json_str(j, "SIGTERM");
        if (k->stop.sent_kill)
            vg_json_str(j, "SIGKILL");
        vg_json_arr_end(j);
        bool exited = k->outcome == VG_KILL_TERMINATED || k->outcome == VG_KILL_KILLED;
        vg_json_key(j, "seconds");
        if (exited)
            vg_json_double(j, (double)k->stop.exit_ms / 1000.0);
        else
            vg_json_null(j);
        vg_json_refusal(j, e, k->outcome == VG_KILL_REFUSED ? k->refusal : VG_KILL_ALLOWED, k);
        vg_json_kstr(
            j, "error",
            k->outcome == VG_KILL_FAILED
                ? (k->error == -ETIMEDOUT ? "still running after SIGKILL" : strerror(-k->error))
                : NULL);
        vg_json_kbool(j, "still_listed", exited && vg_still_listed(v, e->id.pid));
        vg_json_obj_end(j);
    }
    vg_json_obj_end(j);
}

static void vg_json_mem(struct vg_json *j, const struct vg_snapshot *s, size_t gi)
{
    const struct vg_gpu *g = &s->gpus.gpus[gi];
    const struct vg_snap_gpu *sg = &s->per_gpu[gi];
    bool mem = g->known & VG_GPU_K_MEM;
    size_t first, count;
    vg_snap_gpu_holdings(s, gi, &first, &count);
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "total", mem, g->mem_total);
    vg_json_ku64_opt(j, "used", mem, g->mem_used);
    vg_json_ku64(j, "held_by_holders", sg->held_bytes);
    vg_json_ku64_opt(j, "unexplained", sg->unexplained_known, sg->unexplained_bytes);
    vg_json_ku64(j, "holders", count);
    vg_json_obj_end(j);
}

static void vg_json_gpu(struct vg_json *j, const struct vg_clean_view *v, size_t gi)
{
    const struct vg_snapshot *s = v->before;
    const struct vg_gpu *g = &s->gpus.gpus[gi];
    vg_json_obj_begin(j);
    vg_json_ku64(j, "index", g->index);
    vg_json_kstr(j, "uuid", vg_uuid(g));
    vg_json_kstr(j, "name", (g->known & VG_GPU_K_NAME) ? g->name : NULL);
    size_t ntargets;
    bool fd_only;
    uint64_t bytes = vg_target_bytes(v, gi, &ntargets, &fd_only);
    vg_json_ku64(j, "targets", ntargets);
    vg_json_ku64(j, "targets_memory", bytes);
    vg_json_key(j, "before");
    vg_json_mem(j, s, gi);
    size_t ai = 0;
    const struct vg_gpu *a =
        v->after && v->after->driver_ok ? vg_gpu_by_uuid(v->after, vg_uuid(g), &ai) : NULL;
    vg_json_key(j, "after");
    if (a)
        vg_json_mem(j, v->after, ai);
    else
        vg_json_null(j);
    bool both = a && (g->known & VG_GPU_K_MEM) && (a->known & VG_GPU_K_MEM);
    vg_json_ku64_opt(j, "freed", both,
                     both && g->mem_used > a->mem_used ? g->mem_used - a->mem_used : 0);
    const struct vg_reset *r = NULL;
    for (size_t i = 0; i < v->nresets && !r; i++)
        if (v->resets[i].uuid && vg_uuid(g) && strcmp(v->resets[i].uuid, vg_uuid(g)) == 0)
            r = &v->resets[i];
    vg_json_key(j, "reset");
    if (!r) {
        vg_json_null(j);
    } else {
        vg_json_obj_begin(j);
        vg_json_ku64(j, "held", r->held);
        struct vg_buf cmd;
        vg_buf_init(&cmd, 0);
        vg_buf_printf(&cmd, "nvidia-smi --gpu-reset -i %s", vg_reset_target(r->uuid));
        vg_json_kstr(j, "command", vg_buf_str(&cmd));
        vg_buf_release(&cmd);
        vg_json_kbool(j, "attempted", r->attempted);
        vg_json_key(j, "exit_status");
        if (r->attempted)
            vg_json_i64(j, r->exit_status);
        else
            vg_json_null(j);
        vg_json_kstr(j, "refused", r->refused);
        vg_json_obj_end(j);
    }
    vg_json_obj_end(j);
}

/* The options the plan was made with. */
static void vg_clean_json_options(struct vg_json *j, const struct vg_clean_view *v)
{
    const struct vg_snapshot *s = v->before;
    const struct vg_plan_opts *o = v->opts;
    vg_json_key(j, "options");
    vg_json_obj_begin(j);
    if (o->by_gpu)
        vg_json_ku64(j, "gpu", s->gpus.gpus[o->gpu].index);
    else
        vg_json_kstr(j, "gpu", NULL);
    vg_json_ku64_opt(j, "pid", o->by_pid, (uint32_t)o->pid);
    vg_json_ku64_opt(j, "uid", o->by_user, o->uid);
    vg_json_ku64_opt(j, "older_than_seconds", o->by_age, o->older_than_ms / 1000u);
    vg_json_kbool(j, "orphans", o->orphans || !(o->by_gpu || o->by_pid || o->by_user || o->by_age));
    vg_json_ku64(j, "grace_ms", v->grace_ms);
    vg_json_kbool(j, "reset", v->reset);
    vg_json_kbool(j, "force", v->force);
    vg_json_obj_end(j);
}

/* One finding that still concerns the cleanup after it. */
static void vg_clean_json_finding_after(struct vg_json *j, const struct vg_clean_view *v,
                                        const struct vg_finding *f)
{
    vg_json_obj_begin(j);
    vg_json_kstr(j, "rule", f->rule);
    vg_json_kstr(j, "severity", vg_severity_str(f->severity));
    vg_json_kstr(j, "title", f->title);
    vg_json_key(j, "gpus");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->ngpus; k++)
        vg_json_u64(j, v->after->gpus.gpus[f->gpus[k]].index);
    vg_json_arr_end(j);
    vg_json_key(j, "pids");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->npids; k++)
        vg_json_u64(j, (uint32_t)f->pids[k]);
    vg_json_arr_end(j);
    vg_json_key(j, "fix");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->nfix; k++)
        vg_json_str(j, f->fix[k]);
    vg_json_arr_end(j);
    vg_json_obj_end(j);
}

/* The findings after the cleanup that concern what it cleaned (null when not looked at). */
static void vg_clean_json_findings_after(struct vg_json *j, const struct vg_clean_view *v)
{
    vg_json_key(j, "findings_after");
    if (!v->after_findings) {
        vg_json_null(j);
    } else {
        vg_json_arr_begin(j);
        for (size_t i = 0; i < v->after_findings->n; i++) {
            const struct vg_finding *f = &v->after_findings->v[i];
            if (vg_concerns(v, v->after, f))
                vg_clean_json_finding_after(j, v, f);
        }
        vg_json_arr_end(j);
    }
}

/* The counts of the plan and of the signals' outcomes. */
static void vg_clean_json_summary(struct vg_json *j, const struct vg_clean_view *v)
{
    const struct vg_plan *p = v->plan;
    size_t counts[6] = {0};
    for (size_t i = 0; v->kills && i < p->n; i++)
        if (p->v[i].signal)
            counts[v->kills[i].outcome]++;
    vg_json_key(j, "summary");
    vg_json_obj_begin(j);
    vg_json_ku64(j, "to_signal", p->nsignal);
    vg_json_ku64(j, "refused", p->nrefused);
    vg_json_ku64(j, "left_alone", p->nleft);
    vg_json_ku64(j, "terminated", counts[VG_KILL_TERMINATED]);
    vg_json_ku64(j, "killed", counts[VG_KILL_KILLED]);
    vg_json_ku64(j, "gone", counts[VG_KILL_GONE]);
    vg_json_ku64(j, "refused_at_signal_time", counts[VG_KILL_REFUSED]);
    vg_json_ku64(j, "failed", counts[VG_KILL_FAILED]);
    vg_json_ku64(j, "resets_needed", v->nresets);
    vg_json_obj_end(j);
}

int vg_render_clean_json(const struct vg_clean_view *v, struct vg_buf *out)
{
    const struct vg_snapshot *s = v->before;
    const struct vg_plan *p = v->plan;
    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, VG_JSON_SCHEMA_CLEAN, &s->taken_at);
    vg_render_replay_json(&j, s);
    vg_json_kstr(&j, "mode", v->force ? "force" : "plan");
    vg_json_key(&j, "driver");
    vg_json_obj_begin(&j);
    vg_json_kbool(&j, "available", s->driver_ok);
    vg_json_kstr(&j, "error", s->driver_error);
    vg_json_obj_end(&j);

    vg_clean_json_options(&j, v);

    vg_json_key(&j, "processes");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < p->n; i++)
        vg_json_entry(&j, v, i);
    vg_json_arr_end(&j);

    vg_json_key(&j, "gpus");
    vg_json_arr_begin(&j);
    for (size_t i = 0; s->driver_ok && i < p->nscope; i++)
        vg_json_gpu(&j, v, p->scope[i]);
    vg_json_arr_end(&j);

    vg_clean_json_findings_after(&j, v);

    vg_render_unread_json(&j, s);
    vg_json_key(&j, "reset_preconditions");
    vg_json_arr_begin(&j);
    for (size_t i = 0; v->nresets && vg_clean_reset_preconditions[i]; i++)
        vg_json_str(&j, vg_clean_reset_preconditions[i]);
    vg_json_arr_end(&j);

    vg_clean_json_summary(&j, v);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}

void vg_render_clean_refusal(struct vg_buf *o, const struct vg_plan_entry *e,
                             enum vg_kill_refusal r, const struct vg_kill *k)
{
    vg_refusal_text(o, e, r, k);
}
