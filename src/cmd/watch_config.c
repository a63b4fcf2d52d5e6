/*
 * `watch` settings from flags and from the config file (see watch_config.h). One table of keys, one
 * parser per value type, so the file and the flags cannot drift apart.
 */
#include "cmd/watch_config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"
#include "util/priv.h"

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

const struct vg_opt vg_watch_opts[] = {
    {"interval", 0, VG_OPT_ARG_REQUIRED, "DUR", "time between samples (default 2s)",
     VG_WATCH_OPT_SETTING, "interval", VG_OPT_CODE},
    {"expect", 0, VG_OPT_ARG_REQUIRED, "GPU=WHO",
     "what GPU (index or UUID) may carry: none, PIDs, uid:N or user\n"
     "names, comma-separated; repeatable. Memory above the threshold\n"
     "held by anyone else, or on a GPU expected empty, is an alert",
     VG_WATCH_OPT_SETTING, "expect", VG_OPT_CODE},
    {"threshold", 0, VG_OPT_ARG_REQUIRED, "SIZE",
     "memory changes and alerts above this (default 10MiB)", VG_WATCH_OPT_SETTING, "threshold",
     VG_OPT_CODE},
    {"exec", 0, VG_OPT_ARG_REQUIRED, "CMD",
     "run CMD for each alert, without a shell: details in VRAMGUARD_*\n"
     "variables (escaped: \\n, \\xNN), the JSON event on stdin",
     VG_WATCH_OPT_SETTING, "exec", VG_OPT_CODE},
    {"shell", 0, VG_OPT_ARG_NONE, NULL, "run --exec's CMD with /bin/sh -c", VG_WATCH_OPT_SETTING,
     "shell", VG_OPT_CODE},
    {"exec-timeout", 0, VG_OPT_ARG_REQUIRED, "DUR", "stop an alert command after DUR (default 10s)",
     VG_WATCH_OPT_SETTING, "exec_timeout", VG_OPT_CODE},
    {"format", 0, VG_OPT_ARG_REQUIRED, "FMT",
     "text (default) or json: one vramguard.event/1 object per line", VG_WATCH_OPT_SETTING,
     "format", VG_OPT_VAL(.kind = VG_OPT_K_CODE, .words = "text|json")},
    {"idle-after", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "idle-holder: memory held this long with no utilisation (default 1h)", VG_WATCH_OPT_SETTING,
     "idle_after", VG_OPT_CODE},
    {"full-scan", 0, VG_OPT_ARG_REQUIRED, "DUR",
     "longest time between full /proc scans (default 60s; 0: every\n"
     "sample is one); in between, samples read only the known holders,\n"
     "the PIDs the driver reports and new processes",
     VG_WATCH_OPT_SETTING, "full_scan", VG_OPT_CODE},
    {"config", 0, VG_OPT_ARG_REQUIRED, "FILE",
     "read settings from FILE (key = value; see docs/config.md), a\n"
     "regular file that only root or you can change; flags win over\n"
     "it; SIGHUP reads it again",
     0, NULL, VG_OPT_VAL(VG_OPT_VAR(0, const char *), .kind = VG_OPT_K_STR)},
    {"once", 0, VG_OPT_ARG_NONE, NULL, "take one sample, report it, and exit", 0, NULL,
     VG_OPT_VAL(VG_OPT_VAR(1, bool), .kind = VG_OPT_K_SET)},
    VG_OPT_TABLE_END,
};

/* How each key's value is parsed: most by the typed conversion the option rows use
 * (vg_opt_store into the struct vg_watch_config), expect and exec by a function of their own.
 * A bad value is "KEY takes TAKES, not 'VALUE'"; a duration without takes says its range. */
#define VG_WCFG_AT(member) VG_OPT_AT(0, struct vg_watch_config, member)
#define VG_WCFG_DUR(member, lo, hi)                                                                \
    VG_OPT_VAL(VG_WCFG_AT(member), .kind = VG_OPT_K_DURATION, .min = (lo), .max = (hi))

static const struct vg_wcfg_key {
    const char *name;
    unsigned bit;
    int (*set)(struct vg_watch_config *c, const char *v, struct vg_err *err); /* or val */
    struct vg_opt_val val;
    bool repeatable;
} vg_wcfg_keys[] = {
    {"interval", VG_WCFG_INTERVAL, NULL, VG_WCFG_DUR(interval_ms, 100, VG_DAY_MS), false},
    {"threshold", VG_WCFG_THRESHOLD, NULL,
     VG_OPT_VAL(VG_WCFG_AT(threshold), .kind = VG_OPT_K_SIZE,
                .takes = "a size such as 10MiB or 1GiB"),
     false},
    {"expect", VG_WCFG_EXPECT, vg_set_expect, VG_OPT_CODE, true},
    {"exec", VG_WCFG_EXEC, vg_set_exec, VG_OPT_CODE, false},
    {"shell", VG_WCFG_SHELL, NULL,
     VG_OPT_VAL(VG_WCFG_AT(shell), .kind = VG_OPT_K_BOOL, .takes = "true or false"), false},
    {"exec_timeout", VG_WCFG_EXEC_TIMEOUT, NULL, VG_WCFG_DUR(exec_timeout_ms, 100, VG_HOUR_MS),
     false},
    {"format", VG_WCFG_FORMAT, NULL,
     VG_OPT_VAL(VG_WCFG_AT(format), .kind = VG_OPT_K_WORD, .words = "text|json",
                .takes = "text or json"),
     false},
    {"idle_after", VG_WCFG_IDLE_AFTER, NULL,
     VG_WCFG_DUR(idle_after_ms, 1, (uint64_t)365 * VG_DAY_MS), false},
    {"nvml_timeout", VG_WCFG_NVML_TIMEOUT, NULL, VG_WCFG_DUR(nvml_timeout_ms, 1, VG_HOUR_MS),
     false},
    /* 0 is allowed and means "every sample is a full scan", so the message says so. */
    {"full_scan", VG_WCFG_FULL_SCAN, NULL,
     VG_OPT_VAL(
         VG_WCFG_AT(full_scan_ms), .kind = VG_OPT_K_DURATION, .max = VG_WATCH_FULL_SCAN_MAX_MS,
         .takes = "a duration up to 86400 s (e.g. 30s, 10m), or 0 for a full scan at every sample"),
     false},
};
#define VG_WCFG_NKEYS (sizeof(vg_wcfg_keys) / sizeof(vg_wcfg_keys[0]))

/* Set key k from v: its function, or the typed conversion and its message. */
static int vg_wcfg_set(struct vg_watch_config *c, const struct vg_wcfg_key *k, const char *v,
                       struct vg_err *err)
{
    if (k->set)
        return k->set(c, v, err);
    int rc = vg_opt_store(&k->val, c, v);
    if (rc == 0)
        return 0;
    if (rc != -EINVAL)
        return vg_err_set(err, rc, "internal error: %s does not fit its target", k->name);
    if (k->val.takes)
        return vg_err_set(err, -EINVAL, "%s takes %s, not '%s'", k->name, k->val.takes, v);
    return vg_err_set(err, -EINVAL,
                      "%s takes a duration between %llu ms and %llu s (e.g. 500ms, 2s, 1h), "
                      "not '%s'",
                      k->name, (unsigned long long)k->val.min,
                      (unsigned long long)(k->val.max / 1000), v);
}

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
    int rc = vg_wcfg_set(c, k, value, err);
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
    int rc = vg_wcfg_set(c, k, line + v, err);
    if (rc == 0) {
        c->set |= k->bit;
        seen_line[idx] = lineno;
    }
    return rc;
}

/* The file's text into c. A bad line's message quotes it only when quote is true; otherwise it
 * names the line alone: what a file says is shown to those who could read it themselves. */
static int vg_wcfg_parse(struct vg_watch_config *c, char *text, size_t len, const char *path,
                         bool quote, struct vg_err *err)
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
        if (rc && rc != -ENOMEM && !quote)
            return vg_err_set(err, rc,
                              "%s:%u: not a valid setting (the line is not shown: you cannot "
                              "read this file yourself)",
                              path, lineno);
        if (rc)
            return rc == -ENOMEM ? rc : vg_err_prefix(err, "%s:%u", path, lineno);
        pos = end + 1;
    }
    return 0;
}

/* Whether path may be read at all (see VG_WCFG_LOAD_STRICT); its resolved form into canon. */
static int vg_wcfg_trusted(const char *path, unsigned flags, char *canon, size_t n,
                           struct vg_err *err)
{
    bool elevated = vg_priv_elevated();
    if (!elevated && !(flags & VG_WCFG_LOAD_STRICT)) {
        if (snprintf(canon, n, "%s", path) >= (int)n)
            return vg_err_set(err, -ENAMETOOLONG, "%s: too long a path", path);
        return 0;
    }
    struct vg_err why = VG_ERR_INIT;
    int rc = vg_priv_path_trusted(path, elevated ? 0 : getuid(), canon, n, &why);
    if (rc == 0)
        return 0;
    if (rc != -EPERM) { /* missing, unreadable: the message any read would give */
        vg_err_release(&why);
        return vg_err_set(err, rc, "%s: cannot read: %s", path, strerror(-rc));
    }
    vg_err_set(err, rc, "%s: refused: %s, and %s", path,
               elevated ? "a setuid or file-capability copy reads only a config that root alone "
                          "can change"
                        : "a config whose alert commands run must be changeable by root or "
                          "you alone",
               vg_err_msg(&why));
    vg_err_release(&why);
    return rc;
}

int vg_watch_config_load(struct vg_watch_config *c, const char *path, unsigned flags,
                         struct vg_err *err)
{
    char canon[PATH_MAX];
    int rc = vg_wcfg_trusted(path, flags, canon, sizeof(canon), err);
    if (rc)
        return rc;
    struct vg_buf b;
    vg_buf_init(&b, VG_WCFG_FILE_MAX);
    rc = vg_file_read_regular(AT_FDCWD, canon, &b);
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
    rc = vg_wcfg_parse(&tmp, b.data ? b.data : (char *)"", b.len, path,
                       vg_priv_caller_can_read(canon), err);
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
        /* The typed keys are copied where their rows say; exec and expect own memory. */
        for (size_t k = 0; k < VG_WCFG_NKEYS; k++) {
            const struct vg_opt_val *v = &vg_wcfg_keys[k].val;
            if ((s->set & vg_wcfg_keys[k].bit) && v->kind != VG_OPT_K_CODE)
                memcpy((char *)dst + v->off, (const char *)s + v->off, v->size);
        }
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
