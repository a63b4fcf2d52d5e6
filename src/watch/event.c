/*
 * Rendering watch events (see engine.h): a text line for people and logs, or one
 * vramguard.event/1 JSON object per line for scripts (docs/json.md). Messages carry process
 * names and command lines, so text output is escaped like every other screen.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "render/json.h"
#include "render/text.h"
#include "rules/rules.h"
#include "util/clock.h"
#include "watch/engine.h"

/* Whether the text line shows the severity word: what may need action. */
static bool vg_event_shows_severity(const struct vg_event *ev)
{
    switch (ev->type) {
    case VG_EV_FINDING_PRESENT:
    case VG_EV_FINDING_OPENED:
    case VG_EV_ALERT:
    case VG_EV_DRIVER_HUNG:
    case VG_EV_DRIVER_ERROR:
    case VG_EV_GPU_LOST:
    case VG_EV_GPU_HUNG:
        return true;
    default:
        return false;
    }
}

int vg_event_text(const struct vg_event *ev, const struct timespec *when,
                  const struct vg_style *st, struct vg_buf *out)
{
    static const struct vg_style plain = {"", "", "", "", "", "", "", ""};
    if (!st)
        st = &plain;
    char ts[VG_CLOCK_ISO_SIZE];
    vg_clock_iso8601(when->tv_sec, ts, sizeof(ts));
    const char *color = "";
    if (vg_event_shows_severity(ev))
        color = ev->severity == VG_SEV_CRITICAL  ? st->red
                : ev->severity == VG_SEV_WARNING ? st->yellow
                                                 : "";
    vg_buf_printf(out, "%s %s%s%s ", ts, st->bold, vg_event_name(ev->type), st->reset);
    if (vg_event_shows_severity(ev)) {
        char sev[16];
        const char *s = vg_severity_str(ev->severity);
        size_t i = 0;
        for (; s[i] && i + 1 < sizeof(sev); i++)
            sev[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
        sev[i] = '\0';
        vg_buf_printf(out, "%s%s%s ", color, sev, *color ? st->reset : "");
    }
    const char *m = ev->message ? ev->message : "";
    vg_text_escape(out, m, strlen(m), 0, NULL);
    vg_buf_addc(out, '\n');
    return out->err;
}

static void vg_kopt_str(struct vg_json *j, const char *key, const char *s)
{
    vg_json_kstr(j, key, s); /* NULL writes null */
}

int vg_event_json(const struct vg_event *ev, const struct timespec *when, uint64_t sample,
                  struct vg_buf *out)
{
    char ts[VG_CLOCK_ISO_SIZE];
    vg_clock_iso8601(when->tv_sec, ts, sizeof(ts));
    struct vg_json j;
    vg_json_init(&j, out, false);
    vg_json_obj_begin(&j);
    vg_json_kstr(&j, "schema", VG_JSON_SCHEMA_EVENT);
    vg_json_kstr(&j, "time", ts);
    vg_json_ku64(&j, "sample", sample);
    vg_json_kstr(&j, "event", vg_event_name(ev->type));
    vg_json_kstr(&j, "severity", vg_severity_str(ev->severity));
    vg_json_kstr(&j, "message", ev->message);
    vg_json_ku64_opt(&j, "gpu", ev->gpu_known, ev->gpu);
    vg_kopt_str(&j, "gpu_uuid", ev->gpu_uuid);
    vg_json_key(&j, "mig_device");
    if (ev->mig >= 0)
        vg_json_i64(&j, ev->mig);
    else
        vg_json_null(&j);
    vg_json_key(&j, "gpus");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < ev->ngpus; i++)
        vg_json_u64(&j, ev->gpus[i]);
    vg_json_arr_end(&j);
    vg_json_key(&j, "pid");
    if (ev->pid_known)
        vg_json_i64(&j, ev->pid);
    else
        vg_json_null(&j);
    vg_json_key(&j, "pids");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < ev->npids; i++)
        vg_json_i64(&j, ev->pids[i]);
    vg_json_arr_end(&j);
    vg_kopt_str(&j, "user", ev->user);
    vg_kopt_str(&j, "command", ev->command);
    vg_json_ku64_opt(&j, "memory", ev->mem_known, ev->mem);
    vg_json_ku64_opt(&j, "previous_memory", ev->prev_known, ev->prev);
    vg_kopt_str(&j, "rule", ev->rule);
    vg_kopt_str(&j, "alert", ev->alert);
    vg_kopt_str(&j, "expect", ev->expect);
    vg_kopt_str(&j, "driver_error", ev->driver_error);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}
