/*
 * Streaming JSON writer (see json.h).
 */
#include "render/json.h"
#include "model/snapshot.h"
#include "util/clock.h"
#include "util/utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void vg_json_init(struct vg_json *j, struct vg_buf *out, bool pretty)
{
    memset(j, 0, sizeof(*j));
    j->out = out;
    j->pretty = pretty;
    j->first[0] = true;
}

static void vg_json_put(struct vg_json *j, const char *s, size_t n)
{
    if (j->rc == 0)
        j->rc = vg_buf_add(j->out, s, n);
}

static void vg_json_indent(struct vg_json *j)
{
    if (!j->pretty)
        return;
    vg_json_put(j, "\n", 1);
    for (int i = 0; i < j->depth; i++)
        vg_json_put(j, "  ", 2);
}

/* Before any value or key: the comma and indentation its position needs. */
static void vg_json_pre(struct vg_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        vg_json_put(j, ",", 1);
    j->first[j->depth] = false;
    if (j->depth > 0)
        vg_json_indent(j);
}

static void vg_json_open(struct vg_json *j, char c)
{
    vg_json_pre(j);
    if (j->depth + 1 >= VG_JSON_MAX_DEPTH) {
        if (j->rc == 0)
            j->rc = -E2BIG;
        return;
    }
    vg_json_put(j, &c, 1);
    j->depth++;
    j->first[j->depth] = true;
}

static void vg_json_close(struct vg_json *j, char c)
{
    if (j->depth == 0) {
        if (j->rc == 0)
            j->rc = -EINVAL;
        return;
    }
    bool empty = j->first[j->depth];
    j->depth--;
    if (!empty)
        vg_json_indent(j);
    vg_json_put(j, &c, 1);
}

void vg_json_obj_begin(struct vg_json *j)
{
    vg_json_open(j, '{');
}
void vg_json_obj_end(struct vg_json *j)
{
    vg_json_close(j, '}');
}
void vg_json_arr_begin(struct vg_json *j)
{
    vg_json_open(j, '[');
}
void vg_json_arr_end(struct vg_json *j)
{
    vg_json_close(j, ']');
}

int vg_json_escape(struct vg_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    int rc = 0;
    size_t i = 0;
    while (i < n && rc == 0) {
        unsigned char c = p[i];
        size_t run = i;
        /* Copy runs of plain printable ASCII in one append. */
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            rc = vg_buf_add(out, s + i, run - i);
            i = run;
            continue;
        }
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = vg_buf_add(out, e, 2);
            i++;
        } else if (c < 0x20) {
            const char *named = c == '\n'   ? "\\n"
                                : c == '\t' ? "\\t"
                                : c == '\r' ? "\\r"
                                : c == '\b' ? "\\b"
                                : c == '\f' ? "\\f"
                                            : NULL;
            if (named) {
                rc = vg_buf_add(out, named, 2);
            } else {
                char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                rc = vg_buf_add(out, e, 6);
            }
            i++;
        } else {
            size_t len = vg_utf8_len(p + i, n - i);
            if (len) {
                rc = vg_buf_add(out, s + i, len);
                i += len;
            } else {
                rc = vg_buf_adds(out, "\xEF\xBF\xBD"); /* U+FFFD */
                i++;
            }
        }
    }
    return rc;
}

void vg_json_strn(struct vg_json *j, const char *s, size_t n)
{
    vg_json_pre(j);
    vg_json_put(j, "\"", 1);
    if (j->rc == 0)
        j->rc = vg_json_escape(j->out, s, n);
    vg_json_put(j, "\"", 1);
}

void vg_json_str(struct vg_json *j, const char *s)
{
    if (!s)
        vg_json_null(j);
    else
        vg_json_strn(j, s, strlen(s));
}

void vg_json_key(struct vg_json *j, const char *key)
{
    vg_json_strn(j, key, strlen(key));
    vg_json_put(j, j->pretty ? ": " : ":", j->pretty ? 2 : 1);
    j->after_key = true;
}

static void vg_json_raw(struct vg_json *j, const char *s)
{
    vg_json_pre(j);
    vg_json_put(j, s, strlen(s));
}

void vg_json_u64(struct vg_json *j, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
    if (n > 0 && (size_t)n < sizeof(tmp))
        vg_json_raw(j, tmp);
    else if (j->rc == 0)
        j->rc = -EINVAL;
}

void vg_json_i64(struct vg_json *j, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);
    if (n > 0 && (size_t)n < sizeof(tmp))
        vg_json_raw(j, tmp);
    else if (j->rc == 0)
        j->rc = -EINVAL;
}

void vg_json_double(struct vg_json *j, double v)
{
    if (!isfinite(v)) {
        vg_json_null(j);
        return;
    }
    char tmp[40];
    int n = snprintf(tmp, sizeof(tmp), "%.6g", v);
    if (n > 0 && (size_t)n < sizeof(tmp))
        vg_json_raw(j, tmp);
    else if (j->rc == 0)
        j->rc = -EINVAL;
}

void vg_json_bool(struct vg_json *j, bool v)
{
    vg_json_raw(j, v ? "true" : "false");
}
void vg_json_null(struct vg_json *j)
{
    vg_json_raw(j, "null");
}

void vg_json_kstr(struct vg_json *j, const char *key, const char *s)
{
    vg_json_key(j, key);
    vg_json_str(j, s);
}

void vg_json_ku64(struct vg_json *j, const char *key, uint64_t v)
{
    vg_json_key(j, key);
    vg_json_u64(j, v);
}

void vg_json_ki64(struct vg_json *j, const char *key, int64_t v)
{
    vg_json_key(j, key);
    vg_json_i64(j, v);
}

void vg_json_kbool(struct vg_json *j, const char *key, bool v)
{
    vg_json_key(j, key);
    vg_json_bool(j, v);
}

/* The key of an optional value: null written when it is not known. Whether to write it. */
static bool vg_json_kknown(struct vg_json *j, const char *key, bool known)
{
    vg_json_key(j, key);
    if (!known)
        vg_json_null(j);
    return known;
}

void vg_json_ku64_opt(struct vg_json *j, const char *key, bool known, uint64_t v)
{
    if (vg_json_kknown(j, key, known))
        vg_json_u64(j, v);
}

void vg_json_ki64_opt(struct vg_json *j, const char *key, bool known, int64_t v)
{
    if (vg_json_kknown(j, key, known))
        vg_json_i64(j, v);
}

void vg_json_kbool_opt(struct vg_json *j, const char *key, bool known, bool v)
{
    if (vg_json_kknown(j, key, known))
        vg_json_bool(j, v);
}

void vg_json_kstrs(struct vg_json *j, const char *key, const char *const *strs, size_t n)
{
    vg_json_key(j, key);
    vg_json_arr_begin(j);
    for (size_t i = 0; i < n; i++)
        vg_json_str(j, strs[i]);
    vg_json_arr_end(j);
}

void vg_json_gpu_refs(struct vg_json *j, const struct vg_gpu_list *list, const size_t *which,
                      size_t n)
{
    vg_json_key(j, "gpus");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < n; k++)
        vg_json_u64(j, list->gpus[which[k]].index);
    vg_json_arr_end(j);
    vg_json_key(j, "gpu_uuids");
    vg_json_arr_begin(j);
    for (size_t k = 0; k < n; k++) {
        const struct vg_gpu *g = &list->gpus[which[k]];
        vg_json_str(j, (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    }
    vg_json_arr_end(j);
}

int vg_json_finish(struct vg_json *j)
{
    if (j->rc == 0 && j->depth != 0)
        j->rc = -EINVAL;
    vg_json_put(j, "\n", 1);
    return j->rc;
}

void vg_json_envelope(struct vg_json *j, const char *schema, const struct timespec *when)
{
    vg_json_obj_begin(j);
    vg_json_kstr(j, "schema", schema);
    vg_json_kstr(j, "vramguard_version", VG_VERSION);
    if (when) {
        char ts[VG_CLOCK_ISO_SIZE];
        vg_clock_iso8601(when->tv_sec, ts, sizeof(ts));
        vg_json_kstr(j, "time", ts);
    }
}
