/*
 * `doctor` output. For people: per GPU, the path walked (who holds it, is the memory
 * explained, which findings concern it), then each finding with what was seen and what to do,
 * worst first, written to be read at 2 a.m.: short lines, numbers with units, commands to copy.
 * For scripts: the findings as a versioned JSON document (docs/json.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "render/json.h"
#include "render/render.h"
#include "render/text.h"
#include "rules/rules.h"
#include "util/parse.h"

bool vg_render_finding_selected(const struct vg_finding *f, const struct vg_finding_filter *flt)
{
    if (!flt)
        return true;
    return (!flt->by_gpu || vg_finding_names_gpu(f, flt->gpu)) &&
           (!flt->by_pid || vg_finding_names_pid(f, flt->pid));
}

void vg_render_finding_json(struct vg_json *j, const struct vg_snapshot *snap,
                            const struct vg_finding *f)
{
    vg_json_obj_begin(j);
    vg_json_kstr(j, "rule", f->rule);
    vg_json_kstr(j, "severity", vg_severity_str(f->severity));
    vg_json_kstr(j, "confidence", vg_confidence_str(f->confidence));
    vg_json_kstr(j, "title", f->title);
    vg_json_gpu_refs(j, &snap->gpus, f->gpus, f->ngpus);
    vg_json_key(j, "pids");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->npids; k++)
        vg_json_u64(j, (uint32_t)f->pids[k]);
    vg_json_arr_end(j);
    vg_json_ku64_opt(j, "memory", f->bytes_known, f->bytes);
    vg_json_kstrs(j, "evidence", (const char *const *)f->evidence, f->nevidence);
    vg_json_kstrs(j, "fix", (const char *const *)f->fix, f->nfix);
    vg_json_key(j, "verdicts");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->nverdicts; k++) {
        const struct vg_verdict *v = &f->verdicts[k];
        vg_json_obj_begin(j);
        vg_json_ku64(j, "pid", (uint32_t)v->pid);
        vg_json_kstr(j, "verdict", v->verdict);
        vg_json_kstr(j, "confidence", vg_confidence_str(v->confidence));
        vg_json_ki64(j, "score", v->score);
        vg_json_key(j, "facts");
        vg_json_arr_begin(j);
        for (size_t i = 0; i < v->nfacts; i++) {
            vg_json_obj_begin(j);
            vg_json_kstr(j, "fact", v->facts[i].fact);
            vg_json_ki64(j, "weight", v->facts[i].weight);
            vg_json_kstr(j, "text", v->facts[i].text);
            vg_json_obj_end(j);
        }
        vg_json_arr_end(j);
        vg_json_obj_end(j);
    }
    vg_json_arr_end(j);
    vg_json_obj_end(j);
}

static const char *vg_sev_color(const struct vg_style *st, enum vg_severity s)
{
    return s == VG_SEV_CRITICAL ? st->red : s == VG_SEV_WARNING ? st->yellow : st->cyan;
}

/* The GPU's heading line, then what is wrong with the GPU itself (lost, hung). */
static void vg_doctor_gpu_head(struct vg_buf *o, const struct vg_gpu *g, const struct vg_style *st)
{
    char uuid[32], used[32], total[32];
    vg_text_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
    bool mem = g->known & VG_GPU_K_MEM;
    if (mem) {
        vg_fmt_size(g->mem_used, used, sizeof(used));
        vg_fmt_size(g->mem_total, total, sizeof(total));
    }
    vg_buf_printf(o, "%sGPU %u%s  ", st->bold, g->index, st->reset);
    vg_text_escape_str(o, (g->known & VG_GPU_K_NAME) ? g->name : "(name n/a)", 0);
    vg_buf_printf(o, "  %s  ", uuid);
    if (mem)
        vg_buf_printf(o, "%s of %s used\n", used, total);
    else
        vg_buf_adds(o, "memory n/a\n");
    if (g->lost)
        vg_buf_printf(o,
                      "  %sthe GPU answered \"GPU is lost\": it may have fallen off the bus "
                      "(check dmesg for Xid 79)%s\n",
                      st->red, st->reset);
    if (g->hung)
        vg_buf_printf(o,
                      "  %sa driver call for this GPU did not return in time: its figures "
                      "are unknown; a GPU whose calls hang is usually wedged (check dmesg for "
                      "Xid errors; nvidia-smi may hang on it too)%s\n",
                      st->red, st->reset);
}

/* No holder seen, but some could not be: say what was not seen rather than "nobody". */
static void vg_doctor_who_unknown(struct vg_buf *o, const struct vg_snapshot *snap,
                                  const struct vg_gpu *g, bool procs_known, bool minor_known,
                                  const struct vg_style *st)
{
    size_t hidden = snap->procs.n_fd_unread;
    vg_buf_printf(o, "  who:  %sunknown: ", st->yellow);
    if (!procs_known)
        vg_buf_adds(o, g->hung ? "the driver did not answer for it; "
                               : "the driver's process list failed; ");
    if (!minor_known)
        vg_buf_adds(o, "its minor number is unknown, so who holds its node cannot be told");
    else if (hidden)
        vg_buf_printf(o,
                      "no process vramguard could read holds its node, but %zu could "
                      "not be read",
                      hidden);
    else if (vg_snap_holders_may_hide(snap))
        vg_buf_adds(o, "no process vramguard can see holds its node, but other users' "
                       "processes are hidden (hidepid)");
    else
        vg_buf_adds(o, "no process holds its node");
    vg_buf_printf(o, "%s\n", st->reset);
}

/* One holder's line: PID, memory, how it was seen, owner and command. */
static void vg_doctor_holder(struct vg_buf *o, const struct vg_holding *h, bool first)
{
    char size[32] = "no context";
    if (h->seen & VG_SEEN_NVML) {
        if (h->used_known)
            vg_fmt_size(h->used_bytes, size, sizeof(size));
        else
            snprintf(size, sizeof(size), "n/a");
    }
    vg_buf_printf(o, "  %s  PID %" PRIu32 " %s, %s", first ? "who:" : "    ", (uint32_t)h->pid,
                  size, vg_render_seen_words(h->seen));
    /* a stale entry: what the PID names now, said to be someone else */
    const struct vg_proc *p = h->proc ? h->proc : h->stale_proc;
    if (h->stale)
        vg_buf_adds(o, ", stale: the PID now names");
    if (p && p->user) {
        vg_buf_adds(o, ", ");
        vg_text_escape_str(o, p->user, 0);
    }
    if (p && (p->cmdline || p->comm)) {
        const char *c = p->cmdline && p->cmdline[0] ? p->cmdline : p->comm;
        vg_buf_adds(o, ": ");
        vg_text_escape(o, c, strlen(c), 48, NULL);
    }
    vg_buf_addc(o, '\n');
}

/* Who: one line per holder, at most a handful, then a count. */
static void vg_doctor_who(struct vg_buf *o, const struct vg_snapshot *snap, size_t gi,
                          const struct vg_style *st)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    bool procs_known = !snap->driver_ok || (g->known & VG_GPU_K_PROCS);
    bool minor_known = !snap->driver_ok || (g->known & VG_GPU_K_MINOR);
    if (count == 0 && (!procs_known || !minor_known || vg_snap_holders_may_hide(snap))) {
        vg_doctor_who_unknown(o, snap, g, procs_known, minor_known, st);
    } else if (count == 0) {
        vg_buf_adds(o, "  who:  nobody holds it\n");
    } else {
        for (size_t i = first; i < first + count && i < first + 6; i++)
            vg_doctor_holder(o, &snap->holdings[i], i == first);
        if (count > 6)
            vg_buf_printf(o, "        ... and %zu more (vramguard status)\n", count - 6);
        if (!procs_known)
            vg_buf_printf(o,
                          "        %s(the driver's process list failed: some holders may be "
                          "missing)%s\n",
                          st->yellow, st->reset);
    }
}

/* Why: the findings that concern the GPU, or that nothing wrong was found. */
static void vg_doctor_why(struct vg_buf *o, const struct vg_snapshot *snap, size_t gi,
                          const struct vg_findings *fs, const struct vg_finding_filter *flt,
                          const struct vg_style *st)
{
    size_t n = 0;
    for (size_t i = 0; i < fs->n; i++) {
        const struct vg_finding *f = &fs->v[i];
        bool here = false;
        for (size_t k = 0; k < f->ngpus; k++)
            here |= f->gpus[k] == gi;
        if (!here || !vg_render_finding_selected(f, flt))
            continue;
        vg_buf_printf(o, "  %s  %s%s%s", n++ ? "    " : "why:", vg_sev_color(st, f->severity),
                      f->rule, st->reset);
        if (f->npids) {
            vg_buf_adds(o, " (PID");
            for (size_t k = 0; k < f->npids && k < 8; k++)
                vg_buf_printf(o, " %d", (int)f->pids[k]);
            vg_buf_adds(o, f->npids > 8 ? " ...)" : ")");
        }
        vg_buf_addc(o, '\n');
    }
    if (n == 0 && vg_snap_gpu_unchecked(snap, gi))
        vg_buf_printf(o, "  why:  %snothing wrong found in what could be checked (see below)%s\n",
                      st->yellow, st->reset);
    else if (n == 0)
        vg_buf_printf(o, "  why:  %snothing wrong found%s\n", st->green, st->reset);
}

static void vg_doctor_gpu(struct vg_buf *o, const struct vg_snapshot *snap, size_t gi,
                          const struct vg_findings *fs, const struct vg_finding_filter *flt,
                          const struct vg_style *st)
{
    const struct vg_snap_gpu *s = &snap->per_gpu[gi];
    vg_doctor_gpu_head(o, &snap->gpus.gpus[gi], st);
    vg_doctor_who(o, snap, gi, st);
    if (s->unexplained_known && s->unexplained_bytes) {
        char un[32];
        vg_fmt_size(s->unexplained_bytes, un, sizeof(un));
        vg_buf_printf(o, "  unexplained: %s%s\n", s->unexplained_upper_bound ? "up to " : "", un);
    }
    vg_doctor_why(o, snap, gi, fs, flt, st);
    vg_buf_addc(o, '\n');
}

static void vg_doctor_finding(struct vg_buf *o, const struct vg_snapshot *snap,
                              const struct vg_finding *f, const struct vg_style *st)
{
    const char *sev = f->severity == VG_SEV_CRITICAL  ? "CRITICAL"
                      : f->severity == VG_SEV_WARNING ? "WARNING"
                                                      : "INFO";
    vg_buf_printf(o, "%s%s%s %s%s%s: ", vg_sev_color(st, f->severity), sev, st->reset, st->bold,
                  f->rule, st->reset);
    vg_text_escape_str(o, f->title ? f->title : "", 0);
    vg_buf_addc(o, '\n');
    /* Only a verdict drawn from circumstance says how sure it is; facts go without. */
    if (f->confidence != VG_CONF_HIGH)
        vg_buf_printf(o, "  confidence: %s\n", vg_confidence_str(f->confidence));
    if (f->ngpus) {
        vg_buf_adds(o, "  GPU:");
        for (size_t k = 0; k < f->ngpus; k++)
            vg_buf_printf(o, " %u", snap->gpus.gpus[f->gpus[k]].index);
    }
    if (f->npids) {
        vg_buf_adds(o, f->ngpus ? "   PID:" : "  PID:");
        for (size_t k = 0; k < f->npids; k++)
            vg_buf_printf(o, " %d", (int)f->pids[k]);
    }
    if (f->ngpus || f->npids)
        vg_buf_addc(o, '\n');
    if (f->nevidence)
        vg_buf_printf(o, "  %sseen:%s\n", st->dim, st->reset);
    for (size_t k = 0; k < f->nevidence; k++) {
        vg_buf_adds(o, "    - ");
        vg_text_escape_str(o, f->evidence[k], 0);
        vg_buf_addc(o, '\n');
    }
    if (f->nfix)
        vg_buf_printf(o, "  %sfix:%s\n", st->dim, st->reset);
    for (size_t k = 0; k < f->nfix; k++) {
        vg_buf_adds(o, "    - ");
        vg_text_escape_str(o, f->fix[k], 0);
        vg_buf_addc(o, '\n');
    }
    vg_buf_addc(o, '\n');
}

int vg_render_doctor_text(const struct vg_snapshot *snap, const struct vg_findings *fs,
                          const struct vg_finding_filter *flt, const struct vg_render_opts *ro,
                          struct vg_buf *out)
{
    struct vg_style st;
    vg_style_init(&st, ro->color);
    vg_render_replay_text(out, snap, &st);
    if (!snap->driver_ok) {
        vg_buf_printf(out, "%sno NVIDIA driver view:%s ", st.yellow, st.reset);
        vg_text_escape_str(out, snap->driver_error ? snap->driver_error : "unknown reason", 0);
        vg_buf_adds(out, "\nOnly what /proc shows can be checked: memory figures, NVML-only "
                         "holders and unexplained memory cannot.\n\n");
    }
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++)
        if (!flt || !flt->by_gpu || flt->gpu == gi)
            vg_doctor_gpu(out, snap, gi, fs, flt, &st);

    size_t counts[3] = {0, 0, 0}, shown = 0;
    for (int sev = VG_SEV_CRITICAL; sev >= VG_SEV_INFO; sev--) {
        for (size_t i = 0; i < fs->n; i++) {
            const struct vg_finding *f = &fs->v[i];
            if ((int)f->severity != sev || !vg_render_finding_selected(f, flt))
                continue;
            vg_doctor_finding(out, snap, f, &st);
            counts[sev]++;
            shown++;
        }
    }
    /* What could not be checked, so that "no problems" is not read as "all clear"; the
     * summary stays the last line. */
    for (size_t gi = 0; snap->driver_ok && gi < snap->gpus.ngpus; gi++) {
        unsigned u = vg_snap_gpu_unchecked(snap, gi) & ~VG_SNAP_UNCHECKED_DESCRIPTORS;
        /* a hung GPU's figures and lists are unknown because of the hang: say that once */
        if (u & VG_SNAP_UNCHECKED_HUNG)
            u &= ~(VG_SNAP_UNCHECKED_MEMORY | VG_SNAP_UNCHECKED_PROCESSES);
        if (!u)
            continue;
        vg_buf_printf(out, "%sGPU %u: not fully checked: ", st.yellow, snap->gpus.gpus[gi].index);
        size_t k = 0;
        for (unsigned bit = 1; bit & VG_SNAP_UNCHECKED_ALL; bit <<= 1)
            if (u & bit)
                vg_buf_printf(out, "%s%s", k++ ? "; " : "", vg_render_unchecked_text(bit));
        vg_buf_printf(out, " (vramguard status).%s\n", st.reset);
    }
    /* Xids: a log that could not be read is said, never "no Xid" */
    if (snap->kmsg.state == VG_KMSG_UNREADABLE)
        vg_buf_printf(out, "%sXid errors: not checked: %s.%s\n", st.yellow,
                      snap->kmsg.why ? snap->kmsg.why : "the kernel log could not be read",
                      st.reset);
    else if (snap->kmsg.state == VG_KMSG_READ && snap->kmsg.lost && !snap->kmsg.ndevs)
        vg_buf_printf(out,
                      "%sXid errors: none in the kernel log, which overwrote %llu record%s "
                      "before they were read.%s\n",
                      st.yellow, (unsigned long long)snap->kmsg.n_lost,
                      snap->kmsg.n_lost == 1 ? "" : "s", st.reset);
    vg_render_unread_text(out, snap, &st);
    if (ro->verbose)
        vg_render_unread_names(out, snap, &st);
    if (shown == 0) {
        size_t nrules;
        vg_rules_table(&nrules);
        bool partial = false;
        for (size_t gi = 0; gi < snap->gpus.ngpus && !partial; gi++)
            partial = vg_snap_gpu_unchecked(snap, gi) != 0;
        partial =
            partial || vg_snap_unread_envs(snap) > 0 || snap->kmsg.state == VG_KMSG_UNREADABLE;
        vg_buf_printf(out,
                      "%sNo problems found%s.%s Checked %zu GPU%s and %zu holder%s against "
                      "%zu rules (vramguard doctor --list).\n",
                      partial ? st.yellow : st.green, partial ? " in what could be checked" : "",
                      st.reset, snap->gpus.ngpus, snap->gpus.ngpus == 1 ? "" : "s", snap->nholdings,
                      snap->nholdings == 1 ? "" : "s", nrules);
    } else {
        vg_buf_printf(out, "%zu finding%s: %zu critical, %zu warning%s, %zu info.\n", shown,
                      shown == 1 ? "" : "s", counts[VG_SEV_CRITICAL], counts[VG_SEV_WARNING],
                      counts[VG_SEV_WARNING] == 1 ? "" : "s", counts[VG_SEV_INFO]);
    }
    return out->err;
}

/* Per GPU: whether it was fully checked, and if not, why (ids of VG_SNAP_UNCHECKED_*). */
static void vg_doctor_json_gpus(struct vg_json *j, const struct vg_snapshot *snap,
                                const struct vg_finding_filter *flt)
{
    vg_json_key(j, "gpus");
    vg_json_arr_begin(j);
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        if (flt && flt->by_gpu && flt->gpu != gi)
            continue;
        const struct vg_gpu *g = &snap->gpus.gpus[gi];
        unsigned u = vg_snap_gpu_unchecked(snap, gi);
        vg_json_obj_begin(j);
        vg_json_ku64(j, "index", g->index);
        vg_json_kstr(j, "uuid", (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
        vg_json_kbool(j, "fully_checked", u == 0);
        vg_json_key(j, "not_checked");
        vg_json_arr_begin(j);
        for (unsigned bit = 1; bit & VG_SNAP_UNCHECKED_ALL; bit <<= 1)
            if (u & bit)
                vg_json_str(j, vg_snap_unchecked_id(bit));
        vg_json_arr_end(j);
        vg_json_obj_end(j);
    }
    vg_json_arr_end(j);
}

int vg_render_rules_json(struct vg_buf *out)
{
    size_t n;
    const struct vg_rule_def *t = vg_rules_table(&n);
    struct vg_json j;
    vg_json_init(&j, out, true);
    /* no "time": the list is the program's, not an observation of the host */
    vg_json_envelope(&j, VG_JSON_SCHEMA_RULES, NULL);
    vg_json_key(&j, "rules");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < n; i++) {
        vg_json_obj_begin(&j);
        vg_json_kstr(&j, "id", t[i].id);
        vg_json_kstr(&j, "sees", t[i].sees);
        vg_json_obj_end(&j);
    }
    vg_json_arr_end(&j);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}

int vg_render_doctor_json(const struct vg_snapshot *snap, const struct vg_findings *fs,
                          const struct vg_finding_filter *flt, struct vg_buf *out)
{
    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, VG_JSON_SCHEMA_DOCTOR, &snap->taken_at);
    vg_render_replay_json(&j, snap);
    vg_json_key(&j, "driver");
    vg_json_obj_begin(&j);
    vg_json_kbool(&j, "available", snap->driver_ok);
    vg_json_kstr(&j, "error", snap->driver_error);
    vg_json_obj_end(&j);
    /* where the Xids came from: null when this command did not read the kernel log */
    vg_json_key(&j, "kernel_log");
    if (snap->kmsg.state == VG_KMSG_NOT_ASKED) {
        vg_json_null(&j);
    } else {
        vg_json_obj_begin(&j);
        vg_json_kbool(&j, "read", snap->kmsg.state == VG_KMSG_READ);
        vg_json_kstr(&j, "path", snap->kmsg.path);
        vg_json_kstr(&j, "error", snap->kmsg.why);
        vg_json_kbool(&j, "lost", snap->kmsg.lost);
        vg_json_ku64(&j, "lost_records", snap->kmsg.n_lost);
        vg_json_ku64(&j, "records", snap->kmsg.n_records);
        vg_json_obj_end(&j);
    }
    vg_json_key(&j, "checked");
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "gpus", snap->gpus.ngpus);
    vg_json_ku64(&j, "holders", snap->nholdings);
    vg_json_ku64(&j, "processes", snap->procs.n_scanned);
    vg_json_key(&j, "rules");
    vg_json_arr_begin(&j);
    size_t nrules;
    const struct vg_rule_def *t = vg_rules_table(&nrules);
    for (size_t i = 0; i < nrules; i++)
        vg_json_str(&j, t[i].id);
    vg_json_arr_end(&j);
    vg_json_obj_end(&j);

    size_t counts[3] = {0, 0, 0};
    vg_json_key(&j, "findings");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < fs->n; i++) {
        const struct vg_finding *f = &fs->v[i];
        if (!vg_render_finding_selected(f, flt))
            continue;
        counts[f->severity]++;
        vg_render_finding_json(&j, snap, f);
    }
    vg_json_arr_end(&j);
    vg_doctor_json_gpus(&j, snap, flt);
    vg_render_unread_json(&j, snap);
    vg_json_key(&j, "summary");
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "critical", counts[VG_SEV_CRITICAL]);
    vg_json_ku64(&j, "warning", counts[VG_SEV_WARNING]);
    vg_json_ku64(&j, "info", counts[VG_SEV_INFO]);
    vg_json_obj_end(&j);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}
