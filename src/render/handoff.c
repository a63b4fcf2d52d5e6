/*
 * `handoff` output (see handoff.h): the reason line, the details, the JSON document.
 */
#include "render/handoff.h"
#include "render/json.h"
#include "render/render.h"
#include "render/settle.h"
#include "util/parse.h"
#include "util/sat.h"
#include "util/text.h"

#include <stdio.h>
#include <string.h>

/* A comm is at most 15 bytes; escaped, each may take 4 columns. */
#define VG_HANDOFF_COMM_COLS 64u

const char *vg_render_handoff_mode(enum vg_handoff_mode m)
{
    return m == VG_HANDOFF_PROLOG ? "prolog" : m == VG_HANDOFF_EPILOG ? "epilog" : "node";
}

static void vg_handoff_size(struct vg_buf *out, uint64_t bytes)
{
    char s[32];
    vg_fmt_size_or(true, bytes, "?", s, sizeof(s));
    vg_buf_adds(out, s);
}

/* "GPU 3" by NVML's index when the driver knows it, else as the scheduler named it. */
static void vg_handoff_gpu_name(struct vg_buf *out, const struct vg_handoff_result *r,
                                const struct vg_settle_gpu *g)
{
    const struct vg_handoff_sel *sel = vg_handoff_gpu_sel(r, g);
    if (g->found || !sel)
        vg_buf_printf(out, "GPU %u", g->index);
    else if (sel->kind == VG_HANDOFF_SEL_MINOR)
        vg_buf_printf(out, "GPU /dev/nvidia%u", sel->number);
    else if (sel->kind == VG_HANDOFF_SEL_INDEX)
        vg_buf_printf(out, "GPU %u", sel->number);
    else {
        vg_buf_adds(out, "GPU ");
        vg_text_escape_str(out, sel->text, 0);
    }
}

/* "pid 4242 (alice, python)" */
static void vg_handoff_who(struct vg_buf *out, const struct vg_settle_holder *h)
{
    vg_buf_printf(out, "pid %d", (int)h->pid);
    if (!h->user && !h->comm)
        return;
    vg_buf_adds(out, " (");
    if (h->user)
        vg_text_escape_str(out, h->user, VG_HANDOFF_COMM_COLS);
    if (h->user && h->comm)
        vg_buf_adds(out, ", ");
    if (h->comm)
        vg_text_escape_str(out, h->comm, VG_HANDOFF_COMM_COLS);
    vg_buf_addc(out, ')');
}

/* The holder a GPU's state is about: the first present one of the owner that decides it. */
static const struct vg_settle_holder *vg_handoff_culprit(const struct vg_settle_gpu *g)
{
    const struct vg_settle_holder *pick = NULL;
    for (size_t i = 0; i < g->nholders; i++) {
        const struct vg_settle_holder *h = &g->holders[i];
        if (!h->present || h->owner == VG_SETTLE_INFRA)
            continue;
        bool match = strcmp(g->why, "d-state") == 0    ? h->state == 'D'
                     : strcmp(g->why, "survived") == 0 ? h->owner == VG_SETTLE_TARGET
                     : strcmp(g->why, "leftover") == 0 ? h->owner == VG_SETTLE_LEFTOVER
                                                       : h->owner != VG_SETTLE_TARGET;
        if (match &&
            (!pick || (h->mem_known && (!pick->mem_known || h->mem_bytes > pick->mem_bytes))))
            pick = h;
    }
    return pick;
}

/* "pid 4242 (alice, python)", then " and 2 other processes" when there are more. */
static void vg_handoff_who_more(struct vg_buf *out, const struct vg_settle_holder *h, size_t n)
{
    vg_handoff_who(out, h);
    if (n > 1)
        vg_buf_printf(out, " and %zu other process%s", n - 1, n - 1 == 1 ? "" : "es");
}

/* The memory of an "unexplained" GPU as its holder list has it: ": 12 GiB used and no process
 * holds it" when none is present; else what the present holders with a context hold and what
 * is left, ": 12 GiB used, 10 GiB by pid 4242 (alice, python), 2 GiB unexplained" (the biggest
 * named, the others counted; "up to" when some holder's memory is unknown), and those that
 * hold only the device node, which the driver charges nothing: "; pid 4300 (bob, python)
 * holds only its device node". */
static void vg_handoff_unexplained(struct vg_buf *out, const struct vg_settle_gpu *g)
{
    const struct vg_settle_holder *big = NULL, *ctx = NULL, *node = NULL;
    size_t nctx = 0, nnode = 0;
    uint64_t held = 0;
    bool unknown = false;
    for (size_t i = 0; i < g->nholders; i++) {
        const struct vg_settle_holder *h = &g->holders[i];
        if (!h->present)
            continue;
        if (!(h->seen & VG_SEEN_NVML)) {
            node = nnode++ ? node : h;
            continue;
        }
        ctx = nctx++ ? ctx : h;
        if (!h->mem_known) {
            unknown = true;
            continue;
        }
        held = vg_sat_add(held, h->mem_bytes);
        if (!big || h->mem_bytes > big->mem_bytes)
            big = h;
    }
    vg_buf_adds(out, ": ");
    vg_handoff_size(out, g->used);
    if (nctx + nnode == 0) {
        vg_buf_adds(out, " used and no process holds it");
        return;
    }
    if (nctx == 0) {
        vg_buf_adds(out, " used and unexplained");
    } else {
        vg_buf_adds(out, " used, ");
        if (big)
            vg_handoff_size(out, held);
        else
            vg_buf_adds(out, "an unknown amount");
        vg_buf_adds(out, " by ");
        vg_handoff_who_more(out, big ? big : ctx, nctx);
        if (g->used > held) {
            vg_buf_adds(out, unknown ? ", up to " : ", ");
            vg_handoff_size(out, g->used - held);
            vg_buf_adds(out, " unexplained");
        }
    }
    if (nnode) {
        vg_buf_adds(out, "; ");
        vg_handoff_who_more(out, node, nnode);
        vg_buf_adds(out, nnode == 1 ? " holds only its device node" : " hold only its device node");
    }
}

static void vg_handoff_job_words(struct vg_buf *out, const struct vg_handoff_view *v)
{
    if (v->job_id) {
        vg_buf_adds(out, "job ");
        vg_text_escape_str(out, v->job_id, 0);
    } else {
        vg_buf_adds(out, "the job");
    }
}

/* Why one GPU is in its state, as words after "GPU N". */
static void vg_handoff_cause(struct vg_buf *out, const struct vg_handoff_view *v,
                             const struct vg_settle_gpu *g)
{
    const struct vg_settle_holder *h = vg_handoff_culprit(g);
    const char *w = g->why;
    if (strcmp(w, "missing") == 0) {
        vg_buf_adds(out, " not found by the driver");
    } else if (strcmp(w, "lost") == 0) {
        vg_buf_adds(out, " is lost (fell off the bus or failed)");
    } else if (strcmp(w, "hung") == 0) {
        vg_buf_adds(out, " hung: the driver did not answer in time");
    } else if (strcmp(w, "d-state") == 0 && h) {
        vg_buf_adds(out, " held by ");
        vg_handoff_who(out, h);
        vg_buf_adds(out, ", stuck in the driver (D state)");
    } else if (strcmp(w, "survived") == 0 && h) {
        vg_buf_adds(out, " still held by ");
        vg_handoff_who(out, h);
        vg_buf_adds(out, " of ");
        vg_handoff_job_words(out, v);
        vg_render_settle_survivor(out, h);
    } else if (strcmp(w, "holder") == 0 && h) {
        vg_buf_adds(out, " held by ");
        vg_handoff_who(out, h);
        if (h->owner == VG_SETTLE_UNSEEN && v->res->s.hidepid)
            vg_buf_adds(out, ", a PID this /proc (hidepid) does not show: most likely another "
                             "user's, hidden, not gone");
        else if (h->owner == VG_SETTLE_UNSEEN)
            vg_buf_adds(out, ", a PID this /proc does not show");
        else if (v->mode == VG_HANDOFF_EPILOG) {
            vg_buf_adds(out, ", not ");
            vg_handoff_job_words(out, v);
        }
        if (h->mem_known) {
            vg_buf_adds(out, ", ");
            vg_handoff_size(out, h->mem_bytes);
        }
    } else if (strcmp(w, "leftover") == 0 && h) {
        vg_buf_adds(out, " held by ");
        vg_handoff_who(out, h);
        vg_buf_adds(out, h->state == 'Z' ? ", a zombie" : ", a leftover of an ended job");
        if (h->mem_known) {
            vg_buf_adds(out, ", ");
            vg_handoff_size(out, h->mem_bytes);
        }
    } else if (strcmp(w, "unexplained") == 0) {
        vg_handoff_unexplained(out, g);
    } else if (strcmp(w, "stuck") == 0) {
        vg_buf_adds(out, ": ");
        vg_handoff_size(out, g->used);
        vg_buf_adds(out, " still used after the holders of ");
        vg_handoff_job_words(out, v);
        vg_buf_adds(out, " were gone");
    } else if (strcmp(w, "look-failed") == 0) {
        vg_buf_adds(out, " could not be looked at again: the host's processes could not be read");
    } else if (strcmp(w, "memory-unknown") == 0) {
        vg_buf_adds(out, ": its memory could not be read");
    } else if (strcmp(w, "stopped") == 0) {
        vg_buf_adds(out, " free after the leftovers of ");
        vg_handoff_job_words(out, v);
        vg_buf_adds(out, " were stopped");
    } else {
        vg_buf_adds(out, " free");
    }
}

static size_t vg_handoff_count(const struct vg_handoff_result *r, enum vg_handoff_state s)
{
    size_t n = 0;
    for (size_t i = 0; i < r->s.ngpus; i++)
        n += vg_handoff_gpu_state(&r->s.gpus[i]) == s;
    return n;
}

static void vg_handoff_gpu_list(struct vg_buf *out, const struct vg_handoff_result *r)
{
    vg_buf_adds(out, r->s.ngpus == 1 ? "GPU " : "GPUs ");
    for (size_t i = 0; i < r->s.ngpus; i++) {
        const struct vg_settle_gpu *g = &r->s.gpus[i];
        if (i)
            vg_buf_addc(out, ',');
        if (g->found)
            vg_buf_printf(out, "%u", g->index);
        else
            vg_text_escape_str(out, vg_handoff_gpu_sel(r, g)->text, 0);
    }
}

int vg_render_handoff_reason(const struct vg_handoff_view *v, struct vg_buf *out)
{
    const struct vg_handoff_result *r = v->res;
    vg_buf_printf(out, "vramguard: %s: ", vg_handoff_state_id(r->state));
    if (!r->s.driver_ok) {
        vg_buf_adds(out, r->s.driver_hung ? "the driver hung: " : "could not check: ");
        vg_text_escape_str(out, r->s.driver_error ? r->s.driver_error : "unknown reason", 0);
        return out->err;
    }
    if (r->s.ngpus == 0 && v->mode != VG_HANDOFF_NODE) {
        vg_handoff_job_words(out, v);
        vg_buf_adds(out, " has no GPUs here: nothing to hand over");
        return out->err;
    }
    if (r->state == VG_HANDOFF_CLEAN || r->state == VG_HANDOFF_CLEANED) {
        if (r->s.nsignalled) {
            vg_buf_printf(out, "stopped %zu leftover process%s of ", r->s.nsignalled,
                          r->s.nsignalled == 1 ? "" : "es");
            vg_handoff_job_words(out, v);
            vg_buf_adds(out, "; ");
        }
        vg_handoff_gpu_list(out, r);
        vg_buf_adds(out, " free");
        if (r->s.nsignalled)
            vg_buf_printf(out, " after %.1fs", (double)r->s.elapsed_ms / 1000.0);
        return out->err;
    }
    /* The first GPU in the overall state speaks; the others are counted. */
    size_t same = vg_handoff_count(r, r->state);
    for (size_t i = 0; i < r->s.ngpus; i++) {
        const struct vg_settle_gpu *g = &r->s.gpus[i];
        if (vg_handoff_gpu_state(g) != r->state)
            continue;
        vg_handoff_gpu_name(out, r, g);
        vg_handoff_cause(out, v, g);
        break;
    }
    if (same > 1)
        vg_buf_printf(out, "; %zu more GPU%s %s", same - 1, same - 1 == 1 ? "" : "s",
                      vg_handoff_state_id(r->state));
    return out->err;
}

static void vg_handoff_holder_text(struct vg_buf *out, const struct vg_handoff_view *v,
                                   const struct vg_settle_holder *h)
{
    vg_buf_adds(out, "  ");
    vg_handoff_who(out, h);
    vg_buf_printf(out, ": %s", vg_handoff_owner_id(h->owner));
    if (h->protected_name)
        vg_buf_printf(out, " (%s)", h->protected_name);
    if (h->mem_known) {
        vg_buf_adds(out, ", ");
        vg_handoff_size(out, h->mem_bytes);
    }
    if (h->state == 'D')
        vg_buf_adds(out, ", D state");
    if (h->signalled)
        vg_buf_printf(out, ": signalled, %s", vg_kill_outcome_id(h->outcome));
    else if (h->owner == VG_SETTLE_TARGET && h->refusal != VG_KILL_ALLOWED)
        vg_buf_printf(out, ": not signalled (%s)", vg_kill_refusal_id(h->refusal));
    else if (v->mode == VG_HANDOFF_EPILOG && h->owner != VG_SETTLE_TARGET)
        vg_buf_adds(out, ": left alone");
    if (!h->present)
        vg_buf_adds(out, ", gone");
    vg_buf_addc(out, '\n');
}

int vg_render_handoff_text(const struct vg_handoff_view *v, struct vg_buf *out)
{
    const struct vg_handoff_result *r = v->res;
    for (size_t i = 0; i < r->s.ngpus; i++) {
        const struct vg_settle_gpu *g = &r->s.gpus[i];
        vg_buf_printf(out, "%s: ", vg_handoff_state_id(vg_handoff_gpu_state(g)));
        vg_handoff_gpu_name(out, r, g);
        if (g->found && g->uuid) {
            char u[16];
            vg_text_short_uuid(g->uuid, u, sizeof(u));
            vg_buf_printf(out, " (%s)", u);
        }
        /* The verdicts settle made (prolog, epilog) in its words, as clean, run and top say
         * them (the holders are listed below); node mode's come from the leftover model and
         * keep the hand-off's. The reason line and JSON keep the stable form. */
        if (v->mode == VG_HANDOFF_NODE)
            vg_handoff_cause(out, v, g);
        else
            vg_render_settle_gpu(out, g);
        if (g->mem_known) {
            vg_buf_adds(out, "; used ");
            vg_handoff_size(out, g->used);
            vg_buf_adds(out, ", baseline ");
            vg_handoff_size(out, g->baseline);
        }
        vg_buf_addc(out, '\n');
        for (size_t k = 0; k < g->nholders; k++)
            vg_handoff_holder_text(out, v, &g->holders[k]);
    }
    if (!r->s.driver_ok) {
        vg_buf_adds(out, r->s.driver_hung ? "the driver hung: " : "could not check: ");
        vg_text_escape_str(out, r->s.driver_error ? r->s.driver_error : "unknown reason", 0);
        vg_buf_addc(out, '\n');
    }
    if (r->s.hidepid)
        vg_buf_adds(out, "note: /proc is mounted with hidepid: other users' processes are hidden, "
                         "and a holder among them is not seen above (run as root to see them)\n");
    else if (r->s.may_hide)
        vg_buf_adds(out, "note: some processes' descriptors could not be read (see 'vramguard "
                         "status'): a holder among them is not seen above\n");
    vg_buf_printf(out, "%s of %zu GPU%s in %.1fs (%u look%s)%s\n", vg_render_handoff_mode(v->mode),
                  r->s.ngpus, r->s.ngpus == 1 ? "" : "s", (double)r->s.elapsed_ms / 1000.0,
                  r->s.looks, r->s.looks == 1 ? "" : "s", r->s.timed_out ? ", timed out" : "");
    return out->err;
}

static void vg_handoff_holder_json(struct vg_json *j, const struct vg_settle_holder *h)
{
    vg_json_obj_begin(j);
    vg_json_ki64(j, "pid", h->pid);
    vg_json_kstr(j, "user", h->user);
    vg_json_key(j, "uid");
    if (h->uid_known)
        vg_json_u64(j, h->uid);
    else
        vg_json_null(j);
    vg_json_kstr(j, "comm", h->comm);
    char st[2] = {h->state, '\0'};
    vg_json_kstr(j, "state", h->state == '?' ? NULL : st);
    vg_json_kstr(j, "owner", vg_handoff_owner_id(h->owner));
    vg_json_key(j, "evidence");
    vg_json_arr_begin(j);
    for (unsigned bit = 1; bit <= VG_HANDOFF_EV_ENV_UNKNOWN; bit <<= 1)
        if (h->evidence & bit)
            vg_json_str(j, vg_handoff_evidence_id(bit));
    vg_json_arr_end(j);
    vg_json_kstr(j, "infrastructure", h->protected_name);
    vg_render_json_infra(j, "infrastructure_check", &h->infra);
    vg_json_kstr(j, "seen_by", vg_render_seen(h->seen));
    vg_json_ku64_opt(j, "memory", h->mem_known, h->mem_bytes);
    vg_json_kbool(j, "present", h->present);
    vg_json_kbool(j, "signalled", h->signalled);
    vg_json_kstr(j, "outcome", h->signalled ? vg_kill_outcome_id(h->outcome) : NULL);
    vg_json_kstr(j, "refusal", vg_kill_refusal_id(h->refusal));
    vg_json_obj_end(j);
}

static const char *vg_handoff_sel_kind(enum vg_handoff_sel_kind k)
{
    return k == VG_HANDOFF_SEL_MINOR ? "minor" : k == VG_HANDOFF_SEL_INDEX ? "index" : "uuid";
}

static void vg_handoff_gpu_json(struct vg_json *j, const struct vg_handoff_view *v,
                                const struct vg_settle_gpu *g)
{
    vg_json_obj_begin(j);
    const struct vg_handoff_sel *sel = vg_handoff_gpu_sel(v->res, g);
    vg_json_kstr(j, "named", sel ? sel->text : NULL);
    vg_json_kstr(j, "named_as", sel ? vg_handoff_sel_kind(sel->kind) : NULL);
    vg_json_kbool(j, "found", g->found);
    vg_json_ku64_opt(j, "index", g->found, g->index);
    vg_json_ku64_opt(j, "minor", g->found && g->minor_known, g->minor);
    vg_json_kstr(j, "uuid", g->uuid);
    vg_json_kstr(j, "name", g->name);
    vg_json_kstr(j, "outcome", vg_handoff_state_id(vg_handoff_gpu_state(g)));
    vg_json_kstr(j, "cause", g->why);
    struct vg_buf why;
    vg_buf_init(&why, 0);
    vg_handoff_gpu_name(&why, v->res, g);
    vg_handoff_cause(&why, v, g);
    vg_json_kstr(j, "reason", why.err ? NULL : vg_buf_str(&why));
    vg_buf_release(&why);
    vg_json_key(j, "memory");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "used", g->mem_known, g->used);
    vg_json_ku64_opt(j, "baseline", g->mem_known, g->baseline);
    vg_json_obj_end(j);
    vg_json_ku64(j, "stopped", g->nstopped);
    vg_json_ku64(j, "settled_ms", g->settled_ms);
    vg_json_key(j, "holders");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < g->nholders; k++)
        vg_handoff_holder_json(j, &g->holders[k]);
    vg_json_arr_end(j);
    vg_json_obj_end(j);
}

static void vg_handoff_drain_json(struct vg_json *j, const struct vg_handoff_view *v)
{
    vg_json_key(j, "drain");
    vg_json_obj_begin(j);
    vg_json_kbool(j, "requested", v->drain);
    vg_json_kbool(j, "ran", v->drain_ran);
    vg_json_kstr(j, "command", v->drain_cmd);
    vg_json_key(j, "exit_status");
    if (v->drain_ran && v->drain_status >= 0)
        vg_json_i64(j, v->drain_status);
    else
        vg_json_null(j);
    vg_json_kstr(j, "error", v->drain_error);
    vg_json_obj_end(j);
}

int vg_render_handoff_json(const struct vg_handoff_view *v, struct vg_buf *out)
{
    const struct vg_handoff_result *r = v->res;
    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, VG_JSON_SCHEMA_HANDOFF, &v->when);
    vg_json_kstr(&j, "mode", vg_render_handoff_mode(v->mode));
    vg_json_key(&j, "job");
    vg_json_obj_begin(&j);
    vg_json_kstr(&j, "id", v->job_id);
    vg_json_key(&j, "uid");
    if (v->uid_known)
        vg_json_u64(&j, v->uid);
    else
        vg_json_null(&j);
    vg_json_obj_end(&j);
    vg_json_kstr(&j, "gpus_from", v->gpus_from);
    vg_json_kstr(&j, "outcome", vg_handoff_state_id(r->state));
    vg_json_ki64(&j, "exit_status", v->exit_status);
    struct vg_buf reason;
    vg_buf_init(&reason, 0);
    vg_render_handoff_reason(v, &reason);
    vg_json_kstr(&j, "reason", reason.err ? NULL : vg_buf_str(&reason));
    vg_buf_release(&reason);
    vg_json_key(&j, "driver");
    vg_json_obj_begin(&j);
    vg_json_kbool(&j, "available", r->s.driver_ok);
    vg_json_kbool(&j, "hung", r->s.driver_hung);
    vg_json_kstr(&j, "error", r->s.driver_error);
    vg_json_obj_end(&j);
    vg_json_ku64(&j, "elapsed_ms", r->s.elapsed_ms);
    vg_json_ku64(&j, "timeout_ms", v->timeout_ms);
    vg_json_ku64(&j, "grace_ms", v->grace_ms);
    vg_json_ku64(&j, "tolerance_bytes", v->tolerance);
    vg_json_kbool(&j, "timed_out", r->s.timed_out);
    vg_json_kbool(&j, "holders_may_hide", r->s.may_hide);
    vg_json_ku64(&j, "looks", r->s.looks);
    vg_json_ku64(&j, "signalled", r->s.nsignalled);
    vg_json_key(&j, "gpus");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < r->s.ngpus; i++)
        vg_handoff_gpu_json(&j, v, &r->s.gpus[i]);
    vg_json_arr_end(&j);
    vg_handoff_drain_json(&j, v);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}
