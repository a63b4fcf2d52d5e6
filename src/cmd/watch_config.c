/*
 * `watch` settings from flags and from the config file (see watch_config.h). One table of keys, one
 * parser per value type, so the file and the flags cannot drift apart.
 */
#include "cmd/watch_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

#define VG_WCFG_FILE_MAX ((size_t)1 << 20)
#define VG_WCFG_LINE_MAX 4096u

void vg_watch_config_init(struct vg_watch_config *c)
{
    memset(c, 0, sizeof(*c));
    c->interval_ms = VG_WATCH_INTERVAL_DEFAULT_MS;
    c->threshold = VG_WATCH_THRESHOLD_DEFAULT;
    c->exec_timeout_ms = VG_WATCH_EXEC_TIMEOUT_DEFAULT_MS;
    c->format = VG_WATCH_TEXT;
    c->idle_after_ms = VG_WATCH_IDLE_AFTER_DEFAULT_MS;
    c->full_scan_ms = VG_WATCH_FULL_SCAN_DEFAULT_MS;
    vg_expect_set_init(&c->expect);
}

void vg_watch_config_release(struct vg_watch_config *c)
{
    vg_expect_set_release(&c->expect);
    free(c->exec);
    memset(c, 0, sizeof(*c));
}

static int vg_duration(const char *key, const char *v, uint64_t min, uint64_t max, uint64_t *out,
                       struct vg_err *err)
{
    uint64_t ms;
    if (vg_parse_duration_ms(v, &ms) || ms < min || ms > max)
        return vg_err_set(err, -EINVAL,
                          "%s takes a duration between %llu ms and %llu s (e.g. 500ms, 2s, 1h), "
                          "not '%s'",
                          key, (unsigned long long)min, (unsigned long long)(max / 1000), v);
    *out = ms;
    return 0;
}

static int vg_set_interval(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    return vg_duration("interval", v, 100, VG_DAY_MS, &c->interval_ms, err);
}

static int vg_set_threshold(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    if (vg_parse_size(v, false, &c->threshold, NULL, NULL) != 0)
        return vg_err_set(err, -EINVAL, "threshold takes a size such as 10MiB or 1GiB, not '%s'",
                          v);
    return 0;
}

static int vg_set_expect(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    return vg_expect_parse(&c->expect, v, err);
}

static int vg_set_exec(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    if (!*v)
        return vg_err_set(err, -EINVAL, "exec takes a command, not an empty value");
    char *d = strdup(v);
    if (!d)
        return vg_err_set(err, -ENOMEM, "out of memory");
    free(c->exec);
    c->exec = d;
    return 0;
}

static int vg_set_shell(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0) {
            c->shell = true;
            return 0;
        }
        if (strcmp(v, no[i]) == 0) {
            c->shell = false;
            return 0;
        }
    }
    return vg_err_set(err, -EINVAL, "shell takes true or false, not '%s'", v);
}

static int vg_set_exec_timeout(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    return vg_duration("exec_timeout", v, 100, VG_HOUR_MS, &c->exec_timeout_ms, err);
}

static int vg_set_format(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    if (strcmp(v, "text") == 0)
        c->format = VG_WATCH_TEXT;
    else if (strcmp(v, "json") == 0)
        c->format = VG_WATCH_JSON;
    else
        return vg_err_set(err, -EINVAL, "format takes text or json, not '%s'", v);
    return 0;
}

static int vg_set_idle_after(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    return vg_duration("idle_after", v, 1, (uint64_t)365 * VG_DAY_MS, &c->idle_after_ms, err);
}

static int vg_set_nvml_timeout(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    uint64_t ms = 0;
    int rc = vg_duration("nvml_timeout", v, 1, VG_HOUR_MS, &ms, err);
    if (rc == 0)
        c->nvml_timeout_ms = (unsigned)ms;
    return rc;
}

/* 0 is allowed and means "every sample is a full scan", so the range message says so. */
static int vg_set_full_scan(struct vg_watch_config *c, const char *v, struct vg_err *err)
{
    uint64_t ms;
    if (vg_parse_duration_ms(v, &ms) || ms > VG_WATCH_FULL_SCAN_MAX_MS)
        return vg_err_set(err, -EINVAL,
                          "full_scan takes a duration up to %u s (e.g. 30s, 10m), or 0 for a full "
                          "scan at every sample, not '%s'",
                          VG_WATCH_FULL_SCAN_MAX_MS / 1000, v);
    c->full_scan_ms = (unsigned)ms;
    return 0;
}

const struct vg_opt vg_watch_opts[] = {
    {"interval", 0, VG_OPT_ARG_REQUIRED, "DUR", "time between samples (default 2s)",
     VG_WATCH_OPT_INTERVAL, "interval"},
    {"expect", 0, VG_OPT_ARG_REQUIRED, "GPU=WHO",
     "what GPU (index or UUID) may carry: none, PIDs, uid:N or user\n"
     "names, comma-separated; repeatable. Memory above the threshold\n"
     "held by anyone else, or on a GPU expected empty, is an alert",
     VG_WATCH_OPT_EXPECT, "expect"},
    {"threshold", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "memory changes and alerts above this (default 10MiB)", VG_WATCH_OPT_THRESHOLD, "threshold"},
    {"exec", 0, VG_OPT_ARG_REQUIRED, "CMD",
     "run CMD for each alert, without a shell: details in VRAMGUARD_*\n"
     "variables (escaped: \\n, \\xNN), the JSON event on stdin",
     VG_WATCH_OPT_EXEC, "exec"},
    {"shell", 0, VG_OPT_ARG_NONE, NULL, "run --exec's CMD with /bin/sh -c", VG_WATCH_OPT_SHELL,
     "shell"},
    {"exec-timeout", 0, VG_OPT_ARG_REQUIRED, "DUR", "stop an alert command after DUR (default 10s)",
     VG_WATCH_OPT_EXEC_TIMEOUT, "exec_timeout"},
    {"format", 0, VG_OPT_ARG_REQUIRED, "FMT",
     "text (default) or json: one vramguard.event/1 object per line", VG_WATCH_OPT_FORMAT,
     "format"},
    {"idle-after", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "idle-holder: memory held this long with no utilisation (default 1h)", VG_WATCH_OPT_IDLE_AFTER,
     "idle_after"},
    {"full-scan", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "longest time between full /proc scans (default 60s; 0: every\n"
     "sample is one); in between, samples read only the known holders,\n"
     "the PIDs the driver reports and new processes",
     VG_WATCH_OPT_FULL_SCAN, "full_scan"},
    {"config", 0, VG_OPT_ARG_REQUIRED, "FILE",
     "read settings from FILE (key = value; see docs/config.md), a\n"
     "regular file; flags win over it; SIGHUP reads it again",
     VG_WATCH_OPT_CONFIG, NULL},
    {"once", 0, VG_OPT_ARG_NONE, NULL, "take one sample, report it, and exit", VG_WATCH_OPT_ONCE,
     NULL},
    VG_OPT_TABLE_END,
};

static const struct vg_wcfg_key {
    const char *name;
    unsigned bit;
    int (*set)(struct vg_watch_config *c, const char *v, struct vg_err *err);
    bool repeatable;
} vg_wcfg_keys[] = {
    {"interval", VG_WCFG_INTERVAL, vg_set_interval, false},
    {"threshold", VG_WCFG_THRESHOLD, vg_set_threshold, false},
    {"expect", VG_WCFG_EXPECT, vg_set_expect, true},
    {"exec", VG_WCFG_EXEC, vg_set_exec, false},
    {"shell", VG_WCFG_SHELL, vg_set_shell, false},
    {"exec_timeout", VG_WCFG_EXEC_TIMEOUT, vg_set_exec_timeout, false},
    {"format", VG_WCFG_FORMAT, vg_set_format, false},
    {"idle_after", VG_WCFG_IDLE_AFTER, vg_set_idle_after, false},
    {"nvml_timeout", VG_WCFG_NVML_TIMEOUT, vg_set_nvml_timeout, false},
    {"full_scan", VG_WCFG_FULL_SCAN, vg_set_full_scan, false},
};
#define VG_WCFG_NKEYS (sizeof(vg_wcfg_keys) / sizeof(vg_wcfg_keys[0]))

static const struct vg_wcfg_key *vg_wcfg_find(const char *key, size_t n)
{
    /* The option tables say which keys exist; this file says how each is parsed. */
    if (!vg_opt_find_key(vg_watch_opts, key, n) && !vg_opt_find_key(vg_global_opts, key, n))
        return NULL;
    for (size_t i = 0; i < VG_WCFG_NKEYS; i++)
        if (strlen(vg_wcfg_keys[i].name) == n && memcmp(vg_wcfg_keys[i].name, key, n) == 0)
            return &vg_wcfg_keys[i];
    return NULL;
}

int vg_watch_config_set(struct vg_watch_config *c, const char *key, const char *value,
                        struct vg_err *err)
{
    const struct vg_wcfg_key *k = vg_wcfg_find(key, strlen(key));
    if (!k)
        return vg_err_set(err, -EINVAL, "unknown key '%s'", key);
    int rc = k->set(c, value, err);
    if (rc == 0)
        c->set |= k->bit;
    return rc;
}

static bool vg_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

/* One line (without its newline) into c. *seen_line[i]: the line that first set scalar key i. */
static int vg_wcfg_line(struct vg_watch_config *c, char *line, size_t len, unsigned lineno,
                        unsigned *seen_line, struct vg_err *err)
{
    size_t a = 0;
    while (a < len && vg_blank(line[a]))
        a++;
    if (a == len || line[a] == '#')
        return 0;
    char *eq = memchr(line + a, '=', len - a);
    if (!eq)
        return vg_err_set(err, -EINVAL, "expected 'key = value', got '%.*s'", (int)(len - a),
                          line + a);
    size_t kend = (size_t)(eq - line);
    while (kend > a && vg_blank(line[kend - 1]))
        kend--;
    if (kend == a)
        return vg_err_set(err, -EINVAL, "a key is missing before '='");
    const struct vg_wcfg_key *k = vg_wcfg_find(line + a, kend - a);
    if (!k) {
        struct vg_buf known;
        vg_buf_init(&known, 0);
        for (size_t i = 0; i < VG_WCFG_NKEYS; i++)
            vg_buf_printf(&known, "%s%s", i ? ", " : "", vg_wcfg_keys[i].name);
        int rc = vg_err_set(err, -EINVAL, "unknown key '%.*s' (known: %s)", (int)(kend - a),
                            line + a, vg_buf_str(&known));
        vg_buf_release(&known);
        return rc;
    }
    size_t idx = (size_t)(k - vg_wcfg_keys);
    if (!k->repeatable && seen_line[idx])
        return vg_err_set(err, -EINVAL, "'%s' is given twice (first on line %u)", k->name,
                          seen_line[idx]);
    size_t v = (size_t)(eq - line) + 1, vend = len;
    while (v < vend && vg_blank(line[v]))
        v++;
    while (vend > v && vg_blank(line[vend - 1]))
        vend--;
    if (v == vend)
        return vg_err_set(err, -EINVAL, "'%s' has no value", k->name);
    line[vend] = '\0';
    int rc = k->set(c, line + v, err);
    if (rc == 0) {
        c->set |= k->bit;
        seen_line[idx] = lineno;
    }
    return rc;
}

static int vg_wcfg_parse(struct vg_watch_config *c, char *text, size_t len, const char *path,
                         struct vg_err *err)
{
    unsigned seen_line[VG_WCFG_NKEYS] = {0};
    unsigned lineno = 0;
    if (memchr(text, '\0', len))
        return vg_err_set(err, -EINVAL, "%s: holds a NUL byte: not a text file", path);
    for (size_t pos = 0; pos < len;) {
        char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        lineno++;
        if (end - pos > VG_WCFG_LINE_MAX)
            return vg_err_set(err, -EINVAL, "%s:%u: line longer than %u bytes", path, lineno,
                              VG_WCFG_LINE_MAX);
        int rc = vg_wcfg_line(c, text + pos, end - pos, lineno, seen_line, err);
        if (rc)
            return rc == -ENOMEM ? rc : vg_err_prefix(err, "%s:%u", path, lineno);
        pos = end + 1;
    }
    return 0;
}

int vg_watch_config_load(struct vg_watch_config *c, const char *path, struct vg_err *err)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_WCFG_FILE_MAX);
    int rc = vg_file_read_regular(AT_FDCWD, path, &b);
    if (rc) {
        vg_buf_release(&b);
        if (rc == -E2BIG)
            return vg_err_set(err, rc, "%s: larger than %zu bytes", path, VG_WCFG_FILE_MAX);
        if (rc == -EINVAL)
            return vg_err_set(err, rc,
                              "%s: not a regular file (a FIFO, device or directory is "
                              "never read)",
                              path);
        return vg_err_set(err, rc, "%s: cannot read: %s", path, strerror(-rc));
    }
    /* Parse into a scratch copy, so a bad file changes nothing. */
    struct vg_watch_config tmp;
    vg_watch_config_init(&tmp);
    rc = vg_wcfg_parse(&tmp, b.data ? b.data : (char *)"", b.len, path, err);
    vg_buf_release(&b);
    if (rc == 0) {
        struct vg_watch_config merged;
        vg_watch_config_init(&merged);
        rc = vg_watch_config_merge(&merged, c, &tmp);
        if (rc == 0) {
            vg_watch_config_release(c);
            *c = merged;
        } else {
            vg_watch_config_release(&merged);
            vg_err_set(err, rc, "out of memory");
        }
    }
    vg_watch_config_release(&tmp);
    return rc;
}

int vg_watch_config_merge(struct vg_watch_config *dst, const struct vg_watch_config *base,
                          const struct vg_watch_config *over)
{
    vg_watch_config_release(dst);
    vg_watch_config_init(dst);
    const struct vg_watch_config *src[2] = {base, over};
    for (int i = 0; i < 2; i++) {
        const struct vg_watch_config *s = src[i];
        if (s->set & VG_WCFG_INTERVAL)
            dst->interval_ms = s->interval_ms;
        if (s->set & VG_WCFG_THRESHOLD)
            dst->threshold = s->threshold;
        if (s->set & VG_WCFG_SHELL)
            dst->shell = s->shell;
        if (s->set & VG_WCFG_EXEC_TIMEOUT)
            dst->exec_timeout_ms = s->exec_timeout_ms;
        if (s->set & VG_WCFG_FORMAT)
            dst->format = s->format;
        if (s->set & VG_WCFG_IDLE_AFTER)
            dst->idle_after_ms = s->idle_after_ms;
        if (s->set & VG_WCFG_NVML_TIMEOUT)
            dst->nvml_timeout_ms = s->nvml_timeout_ms;
        if (s->set & VG_WCFG_FULL_SCAN)
            dst->full_scan_ms = s->full_scan_ms;
        if (s->set & VG_WCFG_EXEC) {
            free(dst->exec);
            if (!(dst->exec = strdup(s->exec)))
                return -ENOMEM;
        }
        if ((s->set & VG_WCFG_EXPECT) && vg_expect_set_copy(&dst->expect, &s->expect) != 0)
            return -ENOMEM;
        dst->set |= s->set;
    }
    return 0;
}
