/*
 * Expectations and the alerts they raise (see expect.h). Parsing is strict: a bad entry is a
 * usage error with a message naming the part that is wrong, never silently ignored, because a
 * monitor that quietly expects nothing is worse than one that refuses to start.
 */
#include "rules/expect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/text.h"
#include "util/buf.h"
#include "util/parse.h"

void vg_expect_set_init(struct vg_expect_set *set)
{
    memset(set, 0, sizeof(*set));
}

static void vg_expect_release(struct vg_expect *e)
{
    for (size_t i = 0; i < e->nwho; i++)
        free(e->who[i].user);
    free(e->who);
    free(e->gpu);
    free(e->text);
    memset(e, 0, sizeof(*e));
}

void vg_expect_set_release(struct vg_expect_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        vg_expect_release(&set->v[i]);
    free(set->v);
    memset(set, 0, sizeof(*set));
}

static bool vg_all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* A user name as useradd allows, loosely: no blanks, commas, colons or '='. */
static bool vg_user_ok(const char *s, size_t n)
{
    if (n == 0 || n > 256 || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == ',' || c == ':' || c == '=' || c == 0x7f)
            return false;
    }
    return true;
}

static int vg_who_parse(const char *s, size_t n, struct vg_who *w, const char *text,
                        struct vg_err *err)
{
    char num[24];
    memset(w, 0, sizeof(*w));
    if (n == 4 && memcmp(s, "none", 4) == 0) {
        w->kind = VG_WHO_NONE;
        return 0;
    }
    if (vg_all_digits(s, n)) {
        uint64_t v;
        if (n >= sizeof(num) || (memcpy(num, s, n), num[n] = '\0', vg_parse_u64(num, &v)) ||
            v == 0 || v > VG_PID_MAX)
            return vg_err_set(err, -EINVAL, "expect '%s': '%.*s' is not a process id", text, (int)n,
                              s);
        w->kind = VG_WHO_PID;
        w->pid = (pid_t)v;
        return 0;
    }
    if (n > 4 && memcmp(s, "uid:", 4) == 0) {
        uint64_t v;
        if (n - 4 >= sizeof(num) || !vg_all_digits(s + 4, n - 4) ||
            (memcpy(num, s + 4, n - 4), num[n - 4] = '\0', vg_parse_u64(num, &v)) ||
            v > 0xfffffffeu)
            return vg_err_set(err, -EINVAL, "expect '%s': '%.*s' is not a uid", text, (int)n, s);
        w->kind = VG_WHO_UID;
        w->uid = (uid_t)v;
        return 0;
    }
    if (!vg_user_ok(s, n))
        return vg_err_set(err, -EINVAL,
                          "expect '%s': '%.*s' is neither none, a PID, uid:N nor a user name", text,
                          (int)n, s);
    w->kind = VG_WHO_USER;
    if (!(w->user = strndup(s, n)))
        return vg_err_set(err, -ENOMEM, "out of memory");
    return 0;
}

int vg_expect_parse(struct vg_expect_set *set, const char *text, struct vg_err *err)
{
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || !eq[1])
        return vg_err_set(err, -EINVAL,
                          "expect takes GPU=WHO (GPU an index or UUID; WHO none, a PID, "
                          "uid:N or a user, comma-separated), not '%s'",
                          text);
    size_t glen = (size_t)(eq - text);
    for (size_t i = 0; i < glen; i++)
        if ((unsigned char)text[i] <= ' ' || text[i] == ',')
            return vg_err_set(err, -EINVAL, "expect '%s': '%.*s' is not a GPU index or UUID", text,
                              (int)glen, text);
    for (size_t i = 0; i < set->n; i++)
        if (strlen(set->v[i].gpu) == glen && memcmp(set->v[i].gpu, text, glen) == 0)
            return vg_err_set(err, -EINVAL,
                              "expect '%s': GPU %.*s already has an expectation ('%s'); "
                              "list everyone allowed in one: GPU=alice,bob",
                              text, (int)glen, text, set->v[i].text);

    struct vg_expect e = {0};
    int rc = -ENOMEM;
    if (!(e.gpu = strndup(text, glen)) || !(e.text = strdup(text)))
        goto fail;
    bool none = false;
    size_t who_cap = 0;
    const char *pos = eq + 1, *s;
    size_t n;
    while (vg_parse_list_next(&pos, NULL, &s, &n)) {
        if (VG_ARRAY_GROW(e.who, who_cap, e.nwho + 1))
            goto fail;
        if ((rc = vg_who_parse(s, n, &e.who[e.nwho], text, err)) != 0)
            goto out;
        none = none || e.who[e.nwho].kind == VG_WHO_NONE;
        e.nwho++;
    }
    if (none && e.nwho > 1) {
        rc = vg_err_set(err, -EINVAL, "expect '%s': none cannot be combined with others", text);
        goto out;
    }
    if (VG_ARRAY_GROW(set->v, set->cap, set->n + 1))
        goto fail;
    set->v[set->n++] = e;
    return 0;
fail:
    rc = vg_err_set(err, -ENOMEM, "out of memory");
out:
    vg_expect_release(&e);
    return rc;
}

int vg_expect_set_copy(struct vg_expect_set *dst, const struct vg_expect_set *src)
{
    vg_expect_set_release(dst);
    for (size_t i = 0; i < src->n; i++) {
        int rc = vg_expect_parse(dst, src->v[i].text, NULL);
        if (rc) {
            vg_expect_set_release(dst);
            return rc;
        }
    }
    return 0;
}

/* The GPU an expectation names, or VG_SNAP_NO_GPU. *why says what went wrong. */
static size_t vg_expect_gpu(const struct vg_snapshot *snap, const char *gpu, const char **why)
{
    size_t pos;
    switch (vg_gpu_list_lookup(&snap->gpus, gpu, &pos)) {
    case VG_GPU_LOOKUP_OK:
        return pos;
    case VG_GPU_LOOKUP_NO_INDEX:
        *why = "no GPU with that index";
        break;
    case VG_GPU_LOOKUP_SEVERAL:
        *why = "the UUID prefix matches several GPUs";
        break;
    case VG_GPU_LOOKUP_NO_UUID:
        *why = "no GPU with that UUID";
        break;
    }
    return VG_SNAP_NO_GPU;
}

static bool vg_who_allows(const struct vg_who *w, const struct vg_holding *h)
{
    const struct vg_proc *p = h->proc;
    switch (w->kind) {
    case VG_WHO_NONE:
        return false;
    case VG_WHO_PID:
        return h->pid == w->pid;
    case VG_WHO_UID:
        return p && (p->known & VG_PROC_K_STATUS) && p->uid == w->uid;
    case VG_WHO_USER:
        return p && (p->known & VG_PROC_K_USER) && p->user && strcmp(p->user, w->user) == 0;
    }
    return false;
}

/* What applies to one GPU: the expectations that resolve to it, merged. */
struct vg_gpu_rule {
    const struct vg_expect **e;
    size_t n;
    bool empty;            /* every one of them says none */
    struct vg_buf text;    /* "1=none" or "0=alice; GPU-11=bob" */
    struct vg_buf allowed; /* "alice, bob" */
};

static bool vg_rule_allows(const struct vg_gpu_rule *r, const struct vg_holding *h)
{
    for (size_t i = 0; i < r->n; i++)
        for (size_t k = 0; k < r->e[i]->nwho; k++)
            if (vg_who_allows(&r->e[i]->who[k], h))
                return true;
    return false;
}

static void vg_rule_describe(struct vg_gpu_rule *r)
{
    bool first_who = true;
    for (size_t i = 0; i < r->n; i++) {
        vg_buf_printf(&r->text, "%s%s", i ? "; " : "", r->e[i]->text);
        for (size_t k = 0; k < r->e[i]->nwho; k++) {
            const struct vg_who *w = &r->e[i]->who[k];
            const char *sep = first_who ? "" : ", ";
            if (w->kind == VG_WHO_NONE)
                continue;
            first_who = false;
            if (w->kind == VG_WHO_PID)
                vg_buf_printf(&r->allowed, "%sPID %d", sep, (int)w->pid);
            else if (w->kind == VG_WHO_UID)
                vg_buf_printf(&r->allowed, "%suid %u", sep, (unsigned)w->uid);
            else
                vg_buf_printf(&r->allowed, "%s%s", sep, w->user);
        }
    }
}

static void vg_gpu_label(const struct vg_snapshot *snap, size_t gpu, char *out, size_t n)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    char uuid[32];
    vg_text_short_uuid(g->known & VG_GPU_K_UUID ? g->uuid : NULL, uuid, sizeof(uuid));
    snprintf(out, n, "GPU %u (%s)", g->index, uuid);
}

/* "PID 4182 holds 519 MiB, alice: python train.py" into b. */
static void vg_holder_words(struct vg_buf *b, const struct vg_holding *h, const char *size)
{
    const struct vg_proc *p = h->proc;
    vg_buf_printf(b, "PID %d holds %s", (int)h->pid, size);
    if (!p) {
        vg_buf_adds(b, ", not in this /proc (another PID namespace, or gone)");
        return;
    }
    if (p->user)
        vg_buf_printf(b, ", %s", p->user);
    const char *cmd = p->cmdline && *p->cmdline ? p->cmdline : p->comm;
    if (cmd)
        vg_buf_printf(b, ": %s", cmd);
}

/* A new alert finding of rule on gpu, with the expectation it breaks; NULL on failure (out->err
 * says so). */
static struct vg_finding *vg_alert_add(struct vg_findings *out, const char *rule,
                                       enum vg_severity sev, size_t gpu,
                                       const struct vg_gpu_rule *r)
{
    if (r->text.err || r->allowed.err) {
        out->err = -ENOMEM;
        return NULL;
    }
    struct vg_finding *f = vg_finding_add(out, rule, sev);
    if (!f)
        return NULL;
    f->kind = VG_FINDING_ALERT;
    vg_finding_gpu(out, f, gpu);
    if (!(f->expect = strdup(vg_buf_str(&r->text))))
        out->err = -ENOMEM;
    return f;
}

/* The alert's title (msg) and its one evidence line (facts); both are consumed. */
static void vg_alert_words(struct vg_findings *out, struct vg_finding *f, struct vg_buf *msg,
                           struct vg_buf *facts)
{
    if (msg->err || facts->err) {
        out->err = -ENOMEM;
        return;
    }
    vg_finding_title(out, f, "%s", vg_buf_str(msg));
    vg_finding_evidence(out, f, "%s", vg_buf_str(facts));
}

/* The holder an unexpected-holder alert names: who, what, since when. */
static void vg_alert_holder(struct vg_findings *out, struct vg_finding *f,
                            const struct vg_holding *h)
{
    const struct vg_proc *p = h->proc;
    vg_finding_pid(out, f, h->pid);
    f->mig = h->mig;
    if (p && (p->known & VG_PROC_K_STAT)) {
        f->start_known = true;
        f->start_ticks = p->start_ticks;
    }
    f->bytes_known = h->used_known;
    f->bytes = h->used_bytes;
    if (p && p->user && !(f->user = strdup(p->user)))
        out->err = -ENOMEM;
    const char *cmd = p ? (p->cmdline && *p->cmdline ? p->cmdline : p->comm) : NULL;
    if (cmd && !(f->command = strdup(cmd)))
        out->err = -ENOMEM;
}

/* "GPU 1 (GPU-1f0e9d8c) should be empty (expect 1=none)" or "... may carry only alice". */
static void vg_rule_head(struct vg_buf *b, const struct vg_snapshot *snap, size_t gpu,
                         const struct vg_gpu_rule *r)
{
    char label[64];
    vg_gpu_label(snap, gpu, label, sizeof(label));
    if (r->empty)
        vg_buf_printf(b, "%s should be empty (expect %s)", label, vg_buf_str(&r->text));
    else
        vg_buf_printf(b, "%s may carry only %s (expect %s)", label, vg_buf_str(&r->allowed),
                      vg_buf_str(&r->text));
}

static void vg_expect_check_gpu(const struct vg_snapshot *snap, size_t gpu,
                                const struct vg_gpu_rule *r, uint64_t threshold,
                                struct vg_findings *out)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    bool used_over = (g->known & VG_GPU_K_MEM) && g->mem_used > threshold;
    enum vg_severity sev = r->empty ? VG_SEV_CRITICAL : VG_SEV_WARNING;
    size_t first, count, raised = 0;
    vg_snap_gpu_holdings(snap, gpu, &first, &count);
    for (size_t i = first; i < first + count && !out->err; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->bogus_pid || !(h->seen & VG_SEEN_NVML) || vg_rule_allows(r, h))
            continue;
        if (h->used_known ? h->used_bytes <= threshold : !used_over)
            continue;
        struct vg_finding *f = vg_alert_add(out, VG_EXPECT_UNEXPECTED_HOLDER, sev, gpu, r);
        if (!f)
            return;
        vg_alert_holder(out, f, h);
        char size[32];
        vg_fmt_size_or(h->used_known, h->used_bytes, "an unknown amount", size, sizeof(size));
        struct vg_buf msg, facts;
        vg_buf_init(&msg, 0);
        vg_buf_init(&facts, 0);
        vg_holder_words(&facts, h, size);
        vg_rule_head(&msg, snap, gpu, r);
        vg_buf_printf(&msg, ": %s", vg_buf_str(&facts));
        if (!h->used_known) {
            char used[32];
            vg_fmt_size_or(true, g->mem_used, "an unknown amount", used, sizeof(used));
            vg_buf_printf(&msg, " (the GPU has %s used)", used);
        }
        vg_alert_words(out, f, &msg, &facts);
        vg_buf_release(&msg);
        vg_buf_release(&facts);
        raised++;
    }
    if (!r->empty || raised || !used_over || out->err)
        return;
    struct vg_finding *f = vg_alert_add(out, VG_EXPECT_GPU_NOT_EMPTY, sev, gpu, r);
    if (!f)
        return;
    f->bytes_known = true;
    f->bytes = g->mem_used;
    char used[32], total[32];
    vg_fmt_size_or(true, g->mem_used, "an unknown amount", used, sizeof(used));
    vg_fmt_size_or(true, g->mem_total, "an unknown amount", total, sizeof(total));
    struct vg_buf msg, facts;
    vg_buf_init(&msg, 0);
    vg_buf_init(&facts, 0);
    vg_buf_printf(&facts, "%s of %s is used%s", used, total,
                  (g->known & VG_GPU_K_RESERVED) ? "" : " (the driver's reservation included)");
    vg_rule_head(&msg, snap, gpu, r);
    vg_buf_printf(&msg, " but %s, and no process the driver lists holds more than the threshold",
                  vg_buf_str(&facts));
    vg_alert_words(out, f, &msg, &facts);
    vg_buf_release(&msg);
    vg_buf_release(&facts);
}

/* Add a reason to out->unchecked ("...; ..."). 0 or -ENOMEM. */
static int vg_unchecked(struct vg_findings *out, const char *fmt, const char *a, const char *b)
{
    struct vg_buf buf;
    vg_buf_init(&buf, 0);
    if (out->unchecked)
        vg_buf_printf(&buf, "%s; ", out->unchecked);
    vg_buf_printf(&buf, fmt, a, b);
    if (buf.err) {
        vg_buf_release(&buf);
        return -ENOMEM;
    }
    free(out->unchecked);
    out->unchecked = vg_buf_steal(&buf);
    return out->unchecked ? 0 : -ENOMEM;
}

int vg_expect_check(const struct vg_expect_set *set, const struct vg_snapshot *snap,
                    uint64_t threshold, struct vg_findings *out, struct vg_err *err)
{
    if (set->n == 0)
        return 0;
    if (!snap->driver_ok) {
        if (vg_unchecked(out, "%s%s", "expectations cannot be checked without the driver's view",
                         "") < 0)
            return vg_err_set(err, -ENOMEM, "out of memory");
        return 0;
    }
    size_t ngpus = snap->gpus.ngpus;
    size_t *which = calloc(set->n ? set->n : 1, sizeof(*which));
    if (!which)
        return vg_err_set(err, -ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < set->n && !rc; i++) {
        const char *why = "";
        which[i] = vg_expect_gpu(snap, set->v[i].gpu, &why);
        if (which[i] == VG_SNAP_NO_GPU)
            rc = vg_unchecked(out, "expect %s: %s", set->v[i].text, why);
    }
    for (size_t gpu = 0; gpu < ngpus && !rc; gpu++) {
        struct vg_gpu_rule r = {0};
        vg_buf_init(&r.text, 0);
        vg_buf_init(&r.allowed, 0);
        r.e = calloc(set->n, sizeof(*r.e));
        if (!r.e)
            rc = -ENOMEM;
        r.empty = true;
        for (size_t i = 0; i < set->n && !rc; i++) {
            if (which[i] != gpu)
                continue;
            r.e[r.n++] = &set->v[i];
            r.empty = r.empty && set->v[i].who[0].kind == VG_WHO_NONE;
        }
        if (!rc && r.n) {
            vg_rule_describe(&r);
            vg_expect_check_gpu(snap, gpu, &r, threshold, out);
            rc = out->err;
        }
        free(r.e);
        vg_buf_release(&r.text);
        vg_buf_release(&r.allowed);
    }
    free(which);
    if (rc)
        return vg_err_set(err, -ENOMEM, "out of memory");
    return 0;
}
