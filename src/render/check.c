/*
 * `check` output (see check.h). The summary line names the worst things first and stays short
 * (monitoring systems show it in one table cell); the lines after it say everything.
 */
#include "render/check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "render/json.h"
#include "render/render.h"
#include "render/text.h"

static const char *const vg_render_check_names[] = {"OK", "WARNING", "CRITICAL", "UNKNOWN"};

const char *vg_render_check_state_name(enum vg_health_state s)
{
    return (unsigned)s < 4 ? vg_render_check_names[s] : "UNKNOWN";
}

static void vg_sev_upper(enum vg_severity s, char *out, size_t n)
{
    const char *w = vg_severity_str(s);
    size_t i = 0;
    for (; w[i] && i + 1 < n; i++)
        out[i] = (char)(w[i] >= 'a' && w[i] <= 'z' ? w[i] - 'a' + 'A' : w[i]);
    out[i] = '\0';
}

/* "GPU 2 (PID 5458)", "GPUs 0,1 (PIDs 7,8,9,...)" */
static void vg_where(struct vg_buf *o, const struct vg_snapshot *snap, const size_t *gpus,
                     size_t ngpus, const pid_t *pids, size_t npids)
{
    if (ngpus) {
        vg_buf_printf(o, " on GPU%s ", ngpus > 1 ? "s" : "");
        for (size_t i = 0; i < ngpus && i < 4; i++)
            vg_buf_printf(o, "%s%u", i ? "," : "", snap->gpus.gpus[gpus[i]].index);
        if (ngpus > 4)
            vg_buf_adds(o, ",...");
    }
    if (npids) {
        vg_buf_printf(o, " (PID%s ", npids > 1 ? "s" : "");
        for (size_t i = 0; i < npids && i < 3; i++)
            vg_buf_printf(o, "%s%d", i ? "," : "", (int)pids[i]);
        vg_buf_adds(o, npids > 3 ? ",...)" : ")");
    }
}

static void vg_counts(const struct vg_findings *fs, size_t counts[3])
{
    counts[0] = counts[1] = counts[2] = 0;
    for (size_t i = 0; i < fs->n; i++)
        counts[fs->v[i].severity]++;
}

static void vg_summary(struct vg_buf *o, const struct vg_snapshot *snap,
                       const struct vg_findings *fs, const struct vg_alerts *as,
                       enum vg_health_state state)
{
    vg_buf_printf(o, "VRAMGUARD %s - ", vg_render_check_state_name(state));
    const char *sep = "";
    if (!snap->driver_ok) {
        vg_buf_adds(o, "no NVIDIA driver view (");
        vg_text_escape_str(o, snap->driver_error ? snap->driver_error : "unknown reason", 0);
        vg_buf_adds(o, ")");
        sep = "; ";
    }
    size_t lost = vg_health_lost(snap);
    if (lost) {
        vg_buf_printf(o, "%s%zu GPU%s lost (", sep, lost, lost == 1 ? "" : "s");
        for (size_t i = 0, k = 0; i < snap->gpus.ngpus; i++)
            if (snap->gpus.gpus[i].lost)
                vg_buf_printf(o, "%s%u", k++ ? "," : "", snap->gpus.gpus[i].index);
        vg_buf_adds(o, ")");
        sep = "; ";
    }
    size_t hung = vg_health_hung(snap);
    if (hung) {
        vg_buf_printf(o, "%s%zu GPU%s hung (", sep, hung, hung == 1 ? "" : "s");
        for (size_t i = 0, k = 0; i < snap->gpus.ngpus; i++)
            if (snap->gpus.gpus[i].hung)
                vg_buf_printf(o, "%s%u", k++ ? "," : "", snap->gpus.gpus[i].index);
        vg_buf_adds(o, ")");
        sep = "; ";
    }
    if (as->problem) {
        vg_buf_adds(o, sep);
        vg_text_escape_str(o, as->problem, 0);
        sep = "; ";
    }
    size_t counts[3];
    vg_counts(fs, counts);
    size_t serious = counts[VG_SEV_WARNING] + counts[VG_SEV_CRITICAL];
    if (as->n || serious) {
        vg_buf_adds(o, sep);
        if (as->n)
            vg_buf_printf(o, "%zu alert%s%s", as->n, as->n == 1 ? "" : "s", serious ? ", " : "");
        if (serious)
            vg_buf_printf(o, "%zu finding%s", serious, serious == 1 ? "" : "s");
        vg_buf_adds(o, ": ");
        size_t shown = 0;
        for (int sev = VG_SEV_CRITICAL; sev >= VG_SEV_WARNING; sev--) {
            for (size_t i = 0; i < as->n; i++) {
                if ((int)as->v[i].severity != sev || shown >= 3)
                    continue;
                vg_buf_printf(o, "%s%s", shown++ ? "; " : "", as->v[i].kind);
                pid_t pid = as->v[i].pid;
                vg_where(o, snap, &as->v[i].gpu, 1, &pid, as->v[i].has_pid);
            }
            for (size_t i = 0; i < fs->n; i++) {
                const struct vg_finding *f = &fs->v[i];
                if ((int)f->severity != sev || shown >= 3)
                    continue;
                vg_buf_printf(o, "%s%s", shown++ ? "; " : "", f->rule);
                vg_where(o, snap, f->gpus, f->ngpus, f->pids, f->npids);
            }
        }
        if (as->n + serious > shown)
            vg_buf_printf(o, "; and %zu more", as->n + serious - shown);
    } else if (snap->driver_ok && !as->problem && !lost && !hung) {
        vg_buf_printf(o, "%zu GPU%s, %zu holder%s, no problems found", snap->gpus.ngpus,
                      snap->gpus.ngpus == 1 ? "" : "s", snap->nholdings,
                      snap->nholdings == 1 ? "" : "s");
    }
    vg_buf_printf(o, " | critical=%zu warning=%zu info=%zu alerts=%zu holders=%zu\n",
                  counts[VG_SEV_CRITICAL], counts[VG_SEV_WARNING], counts[VG_SEV_INFO], as->n,
                  snap->nholdings);
}

int vg_render_check_text(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         const struct vg_alerts *as, enum vg_health_state state, bool color,
                         struct vg_buf *out)
{
    struct vg_style st;
    vg_style_init(&st, color);
    vg_summary(out, snap, fs, as, state);
    for (size_t i = 0; i < snap->gpus.ngpus && snap->driver_ok; i++) {
        const struct vg_gpu *g = &snap->gpus.gpus[i];
        if (!g->lost)
            continue;
        char uuid[32];
        vg_text_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
        vg_buf_printf(out,
                      "%sCRITICAL%s gpu-lost: GPU %u (%s) answers \"GPU is lost\": it has "
                      "fallen off the bus or its driver state is broken; see 'dmesg' (Xid), "
                      "then a GPU reset or a reboot\n",
                      st.red, st.reset, g->index, uuid);
    }
    for (size_t i = 0; i < snap->gpus.ngpus && snap->driver_ok; i++) {
        const struct vg_gpu *g = &snap->gpus.gpus[i];
        if (!g->hung)
            continue;
        char uuid[32];
        vg_text_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
        vg_buf_printf(out,
                      "%sCRITICAL%s gpu-hung: GPU %u (%s): a driver call for it did not "
                      "return within the driver timeout, so its memory and holders are "
                      "unknown; see 'dmesg' (Xid), then a GPU reset or a reboot\n",
                      st.red, st.reset, g->index, uuid);
    }
    for (int sev = VG_SEV_CRITICAL; sev >= VG_SEV_INFO; sev--) {
        const char *c = sev == VG_SEV_CRITICAL ? st.red : sev == VG_SEV_WARNING ? st.yellow : "";
        char word[16];
        vg_sev_upper((enum vg_severity)sev, word, sizeof(word));
        for (size_t i = 0; i < as->n; i++) {
            if ((int)as->v[i].severity != sev)
                continue;
            vg_buf_printf(out, "%s%s%s alert %s: ", c, word, *c ? st.reset : "", as->v[i].kind);
            vg_text_escape_str(out, as->v[i].message, 0);
            vg_buf_addc(out, '\n');
        }
        for (size_t i = 0; i < fs->n; i++) {
            const struct vg_finding *f = &fs->v[i];
            if ((int)f->severity != sev)
                continue;
            vg_buf_printf(out, "%s%s%s %s: ", c, word, *c ? st.reset : "", f->rule);
            vg_text_escape_str(out, f->title, 0);
            vg_buf_addc(out, '\n');
            for (size_t k = 0; k < f->nfix && k < 1; k++) {
                vg_buf_adds(out, "  fix: ");
                vg_text_escape_str(out, f->fix[k], 0);
                vg_buf_addc(out, '\n');
            }
        }
    }
    vg_render_unread_text(out, snap, &st);
    return out->err;
}

static void vg_json_finding(struct vg_json *j, const struct vg_snapshot *snap,
                            const struct vg_finding *f)
{
    vg_json_obj_begin(j);
    vg_json_kstr(j, "rule", f->rule);
    vg_json_kstr(j, "severity", vg_severity_str(f->severity));
    vg_json_kstr(j, "confidence", vg_confidence_str(f->confidence));
    vg_json_kstr(j, "title", f->title);
    vg_json_key(j, "gpus");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->ngpus; k++)
        vg_json_u64(j, snap->gpus.gpus[f->gpus[k]].index);
    vg_json_arr_end(j);
    vg_json_key(j, "gpu_uuids");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->ngpus; k++) {
        const struct vg_gpu *g = &snap->gpus.gpus[f->gpus[k]];
        vg_json_str(j, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    }
    vg_json_arr_end(j);
    vg_json_key(j, "pids");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->npids; k++)
        vg_json_u64(j, (uint32_t)f->pids[k]);
    vg_json_arr_end(j);
    vg_json_ku64_opt(j, "memory", f->bytes_known, f->bytes);
    vg_json_key(j, "evidence");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->nevidence; k++)
        vg_json_str(j, f->evidence[k]);
    vg_json_arr_end(j);
    vg_json_key(j, "fix");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < f->nfix; k++)
        vg_json_str(j, f->fix[k]);
    vg_json_arr_end(j);
    vg_json_obj_end(j);
}

static void vg_json_alert(struct vg_json *j, const struct vg_snapshot *snap,
                          const struct vg_alert *a)
{
    const struct vg_gpu *g = &snap->gpus.gpus[a->gpu];
    vg_json_obj_begin(j);
    vg_json_kstr(j, "alert", a->kind);
    vg_json_kstr(j, "severity", vg_severity_str(a->severity));
    vg_json_ku64(j, "gpu", g->index);
    vg_json_kstr(j, "gpu_uuid", (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    vg_json_key(j, "mig_device");
    if (a->mig >= 0)
        vg_json_i64(j, a->mig);
    else
        vg_json_null(j);
    vg_json_key(j, "pid");
    if (a->has_pid)
        vg_json_i64(j, a->pid);
    else
        vg_json_null(j);
    vg_json_kstr(j, "user", a->user);
    vg_json_kstr(j, "command", a->command);
    vg_json_ku64_opt(j, "memory", a->bytes_known, a->bytes);
    vg_json_kstr(j, "expect", a->expect);
    vg_json_kstr(j, "message", a->message);
    vg_json_obj_end(j);
}

int vg_render_check_json(const struct vg_snapshot *snap, const struct vg_findings *fs,
                         const struct vg_alerts *as, enum vg_health_state state, struct vg_buf *out)
{
    struct vg_buf summary;
    vg_buf_init(&summary, 0);
    vg_summary(&summary, snap, fs, as, state);
    if (summary.len && summary.data[summary.len - 1] == '\n')
        summary.data[--summary.len] = '\0';

    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, VG_JSON_SCHEMA_CHECK, &snap->taken_at);
    char lower[16];
    const char *name = vg_render_check_state_name(state);
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof(lower); i++)
        lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    lower[i] = '\0';
    vg_json_kstr(&j, "status", lower);
    vg_json_ku64(&j, "exit_status", (uint64_t)state);
    vg_json_kstr(&j, "summary", summary.err ? NULL : vg_buf_str(&summary));
    vg_json_key(&j, "driver");
    vg_json_obj_begin(&j);
    vg_json_kbool(&j, "available", snap->driver_ok);
    vg_json_kstr(&j, "error", snap->driver_error);
    vg_json_obj_end(&j);
    vg_json_kstr(&j, "problem", as->problem);
    vg_json_key(&j, "lost_gpus");
    vg_json_arr_begin(&j);
    for (size_t k = 0; k < snap->gpus.ngpus && snap->driver_ok; k++)
        if (snap->gpus.gpus[k].lost)
            vg_json_u64(&j, snap->gpus.gpus[k].index);
    vg_json_arr_end(&j);
    vg_json_key(&j, "hung_gpus");
    vg_json_arr_begin(&j);
    for (size_t k = 0; k < snap->gpus.ngpus && snap->driver_ok; k++)
        if (snap->gpus.gpus[k].hung)
            vg_json_u64(&j, snap->gpus.gpus[k].index);
    vg_json_arr_end(&j);
    vg_json_key(&j, "alerts");
    vg_json_arr_begin(&j);
    for (size_t k = 0; k < as->n; k++)
        vg_json_alert(&j, snap, &as->v[k]);
    vg_json_arr_end(&j);
    vg_json_key(&j, "findings");
    vg_json_arr_begin(&j);
    for (size_t k = 0; k < fs->n; k++)
        vg_json_finding(&j, snap, &fs->v[k]);
    vg_json_arr_end(&j);
    vg_render_unread_json(&j, snap);
    size_t counts[3];
    vg_counts(fs, counts);
    vg_json_key(&j, "counts");
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "critical", counts[VG_SEV_CRITICAL]);
    vg_json_ku64(&j, "warning", counts[VG_SEV_WARNING]);
    vg_json_ku64(&j, "info", counts[VG_SEV_INFO]);
    vg_json_ku64(&j, "alerts", as->n);
    vg_json_ku64(&j, "holders", snap->nholdings);
    vg_json_obj_end(&j);
    vg_json_obj_end(&j);
    vg_buf_release(&summary);
    return vg_json_finish(&j);
}
