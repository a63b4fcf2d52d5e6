/*
 * Rendering watch events (see event.h): the message from the event's data, a text line for
 * people and logs, or one vramguard.event/1 JSON object per line for scripts (docs/json.md).
 * Messages carry process names and command lines, so text output is escaped like every other
 * screen.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render/event.h"
#include "render/json.h"
#include "render/render.h"
#include "render/text.h"
#include "rules/rules.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/parse.h"

static void vg_event_driver(const struct vg_event *ev, struct vg_buf *m)
{
    if (ev->type == VG_EV_DRIVER_RECOVERED) {
        vg_buf_printf(m, "the NVIDIA driver answers again (%zu GPU%s)", ev->listed,
                      ev->listed == 1 ? "" : "s");
        return;
    }
    vg_buf_adds(m, ev->driver_error ? ev->driver_error : "the NVIDIA driver is unavailable");
    if (ev->frozen)
        vg_buf_adds(m, "; GPUs, findings and alerts are held as they were until it answers");
}

static void vg_event_gpu(const struct vg_event *ev, struct vg_buf *m)
{
    char uuid[32];
    vg_text_short_uuid(ev->gpu_uuid, uuid, sizeof(uuid));
    if (ev->gpu_name)
        vg_buf_printf(m, "GPU %u %s (%s)", ev->gpu, ev->gpu_name, uuid);
    else
        vg_buf_printf(m, "GPU %u (%s)", ev->gpu, uuid);
    bool back = ev->type == VG_EV_GPU_BACK;
    if (ev->type == VG_EV_GPU_LOST && ev->unlisted) {
        vg_buf_adds(m, " is no longer listed by the driver");
    } else if (ev->type == VG_EV_GPU_LOST) {
        vg_buf_adds(m, " is lost: the driver answers \"GPU is lost\" (fallen off the bus)");
    } else if (ev->type == VG_EV_GPU_HUNG) {
        vg_buf_adds(m, " hangs: a driver call for it did not return in time; its holders, "
                       "findings and alerts are held as they were until it answers");
    } else if (ev->mem_known) {
        char used[32], total[32];
        vg_fmt_size_or(true, ev->mem, "n/a", used, sizeof(used));
        vg_fmt_size_or(true, ev->total, "n/a", total, sizeof(total));
        vg_buf_printf(m, "%s %s of %s used", back ? " is back:" : ":", used, total);
    } else {
        vg_buf_adds(m, back ? " is back: memory n/a" : ": memory n/a");
    }
}

/* "PID 4182 on GPU 0 (GPU-8a1b2c3d)" */
static void vg_event_where(const struct vg_event *ev, struct vg_buf *m, const char *verb)
{
    vg_buf_printf(m, "PID %d %s ", (int)ev->pid, verb);
    if (ev->gpu_known) {
        char uuid[32];
        vg_text_short_uuid(ev->gpu_uuid, uuid, sizeof(uuid));
        vg_buf_printf(m, "GPU %u", ev->gpu);
        if (ev->mig >= 0)
            vg_buf_printf(m, "/MIG %d", ev->mig);
        vg_buf_printf(m, " (%s)", uuid);
    } else if (ev->minor_known) {
        vg_buf_printf(m, "/dev/nvidia%u", ev->minor);
    } else {
        vg_buf_adds(m, "an unknown GPU");
    }
}

/* ", alice: python train.py" */
static void vg_event_who(const struct vg_event *ev, struct vg_buf *m)
{
    if (ev->stale) {
        vg_buf_adds(m, ", a stale entry: the PID now names another process");
    } else if (!ev->in_proc) {
        vg_buf_adds(m, ", not in this /proc");
        return;
    }
    if (ev->user)
        vg_buf_printf(m, ", %s", ev->user);
    if (ev->command)
        vg_buf_printf(m, ": %s", ev->command);
}

static void vg_event_memory(const struct vg_event *ev, struct vg_buf *m)
{
    char size[32];
    if (ev->node_only) {
        vg_buf_adds(m, "device node only");
        return;
    }
    vg_fmt_size_or(ev->mem_known, ev->mem, "n/a", size, sizeof(size));
    vg_buf_adds(m, size);
}

static void vg_event_holder(const struct vg_event *ev, struct vg_buf *m)
{
    if (ev->type == VG_EV_HOLDER_LEFT) {
        vg_event_where(ev, m, "left");
        vg_buf_adds(m, ": it held ");
        vg_event_memory(ev, m);
    } else if (ev->type == VG_EV_HOLDER_MEMORY) {
        uint64_t was = ev->prev, now = ev->mem;
        char a[32], b[32], d[32];
        vg_fmt_size_or(true, was, "n/a", a, sizeof(a));
        vg_fmt_size_or(true, now, "n/a", b, sizeof(b));
        vg_fmt_size_or(true, now > was ? now - was : was - now, "n/a", d, sizeof(d));
        vg_event_where(ev, m, "on");
        vg_buf_printf(m, ": %s -> %s (%s%s)", a, b, now > was ? "+" : "-", d);
    } else {
        vg_event_where(ev, m, "on");
        vg_buf_adds(m, ": ");
        vg_event_memory(ev, m);
    }
    vg_event_who(ev, m);
}

bool vg_render_event_message(const struct vg_event *ev, struct vg_buf *out)
{
    switch (ev->type) {
    case VG_EV_DRIVER_HUNG:
    case VG_EV_DRIVER_ERROR:
    case VG_EV_DRIVER_RECOVERED:
        vg_event_driver(ev, out);
        return true;
    case VG_EV_GPU_PRESENT:
    case VG_EV_GPU_APPEARED:
    case VG_EV_GPU_LOST:
    case VG_EV_GPU_BACK:
    case VG_EV_GPU_HUNG:
        vg_event_gpu(ev, out);
        return true;
    case VG_EV_HOLDER_PRESENT:
    case VG_EV_HOLDER_APPEARED:
    case VG_EV_HOLDER_LEFT:
    case VG_EV_HOLDER_MEMORY:
        vg_event_holder(ev, out);
        return true;
    case VG_EV_FINDING_PRESENT:
    case VG_EV_FINDING_OPENED:
    case VG_EV_FINDING_CLOSED:
        vg_buf_printf(out, "%s: %s", ev->rule ? ev->rule : "", ev->text ? ev->text : "");
        return true;
    case VG_EV_ALERT:
    case VG_EV_ALERT_CLEARED:
        break;
    }
    if (!ev->text)
        return false;
    vg_buf_adds(out, ev->text);
    return true;
}

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

int vg_render_event_priority(const struct vg_event *ev)
{
    if (!vg_event_shows_severity(ev))
        return VG_SD_INFO;
    return ev->severity == VG_SEV_CRITICAL  ? VG_SD_CRIT
           : ev->severity == VG_SEV_WARNING ? VG_SD_WARNING
                                            : VG_SD_INFO;
}

int vg_render_event_text(const struct vg_event *ev, const struct timespec *when,
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
    struct vg_buf m;
    vg_buf_init(&m, 0);
    vg_render_event_message(ev, &m);
    if (m.err)
        out->err = m.err;
    vg_text_escape(out, m.data ? m.data : "", m.len, 0, NULL);
    vg_buf_release(&m);
    vg_buf_addc(out, '\n');
    return out->err;
}

static void vg_kopt_str(struct vg_json *j, const char *key, const char *s)
{
    vg_json_kstr(j, key, s); /* NULL writes null */
}

int vg_render_event_json(const struct vg_event *ev, const struct timespec *when, uint64_t sample,
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
    struct vg_buf m;
    vg_buf_init(&m, 0);
    bool has = vg_render_event_message(ev, &m);
    vg_json_key(&j, "message");
    if (m.err)
        out->err = m.err;
    else if (has)
        vg_json_strn(&j, m.data ? m.data : "", m.len);
    else
        vg_json_null(&j);
    vg_buf_release(&m);
    vg_json_ku64_opt(&j, "gpu", ev->gpu_known, ev->gpu);
    vg_kopt_str(&j, "gpu_uuid", ev->gpu_uuid);
    vg_json_ki64_opt(&j, "mig_device", ev->mig >= 0, ev->mig);
    vg_json_key(&j, "gpus");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < ev->ngpus; i++)
        vg_json_u64(&j, ev->gpus[i]);
    vg_json_arr_end(&j);
    vg_json_ki64_opt(&j, "pid", ev->pid_known, ev->pid);
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

/* The alert command's VRAMGUARD_* variables being built. A variable that cannot be added fails
 * the whole set (err): an alert command never runs with some of its variables silently
 * missing. */
struct vg_event_env {
    char **v;
    size_t n, cap;
    int err;
};

/* NAME=VALUE, the value escaped as text output is (vg_text_escape): a command line, user name
 * or message is anyone's text, and a script that echoes or logs it must get one line without
 * terminal escapes (the JSON event on stdin keeps every byte). Nothing for a NULL value. */
static void vg_env_add(struct vg_event_env *e, const char *name, const char *value)
{
    if (!value || e->err)
        return;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "%s=", name);
    vg_text_escape(&b, value, strlen(value), 0, NULL);
    char *s = b.err ? NULL : vg_buf_steal(&b);
    e->err = b.err ? b.err : s ? 0 : -ENOMEM;
    vg_buf_release(&b);
    if (!s)
        return;
    if (VG_ARRAY_GROW(e->v, e->cap, e->n + 1)) {
        free(s);
        e->err = -ENOMEM;
        return;
    }
    e->v[e->n++] = s;
}

static void vg_env_addu(struct vg_event_env *e, const char *name, bool known, uint64_t value)
{
    if (!known)
        return;
    char num[24];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)value);
    vg_env_add(e, name, num);
}

int vg_render_event_env(const struct vg_event *ev, const char *host, const struct timespec *when,
                        char ***out, size_t *nout)
{
    struct vg_event_env env = {0};
    char ts[VG_CLOCK_ISO_SIZE], num[24];
    vg_clock_iso8601(when->tv_sec, ts, sizeof(ts));
    vg_env_add(&env, "VRAMGUARD_EVENT", vg_event_name(ev->type));
    vg_env_add(&env, "VRAMGUARD_ALERT", ev->alert);
    vg_env_add(&env, "VRAMGUARD_SEVERITY", vg_severity_str(ev->severity));
    vg_env_add(&env, "VRAMGUARD_TIME", ts);
    vg_env_add(&env, "VRAMGUARD_HOST", host);
    vg_env_addu(&env, "VRAMGUARD_GPU", ev->gpu_known, ev->gpu);
    vg_env_add(&env, "VRAMGUARD_GPU_UUID", ev->gpu_uuid);
    if (ev->mig >= 0)
        vg_env_addu(&env, "VRAMGUARD_MIG_DEVICE", true, (uint64_t)ev->mig);
    if (ev->pid_known) {
        snprintf(num, sizeof(num), "%d", (int)ev->pid);
        vg_env_add(&env, "VRAMGUARD_PID", num);
    }
    vg_env_add(&env, "VRAMGUARD_USER", ev->user);
    vg_env_add(&env, "VRAMGUARD_COMMAND", ev->command);
    vg_env_addu(&env, "VRAMGUARD_MEMORY", ev->mem_known, ev->mem);
    vg_env_add(&env, "VRAMGUARD_EXPECT", ev->expect);
    struct vg_buf msg;
    vg_buf_init(&msg, 0);
    if (vg_render_event_message(ev, &msg) && !msg.err)
        vg_env_add(&env, "VRAMGUARD_MESSAGE", vg_buf_str(&msg));
    else if (msg.err && !env.err)
        env.err = msg.err;
    vg_buf_release(&msg);
    if (env.err) {
        vg_render_event_env_free(env.v, env.n);
        env.v = NULL;
        env.n = 0;
    }
    *out = env.v;
    *nout = env.n;
    return env.err;
}

void vg_render_event_env_free(char **env, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
}
