/*
 * Option tables (opt.h): getopt_long arrays, short-option strings, help lines, config-key
 * lookups and the conversion of values, all derived from the one row per option.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cmd/opt.h"
#include "util/parse.h"

size_t vg_opt_count(const struct vg_opt *t)
{
    size_t n = 0;
    while (t && t[n].name)
        n++;
    return n;
}

int vg_opt_longopts(const struct vg_opt *t, struct option *out, size_t *n, size_t cap)
{
    static const int has_arg[] = {
        [VG_OPT_ARG_NONE] = no_argument,
        [VG_OPT_ARG_REQUIRED] = required_argument,
        [VG_OPT_ARG_OPTIONAL] = optional_argument,
    };
    for (; t && t->name; t++) {
        bool dup = false;
        for (size_t i = 0; i < *n && !dup; i++)
            dup = strcmp(out[i].name, t->name) == 0;
        if (dup)
            continue;
        if (*n + 1 >= cap)
            return -ENOSPC;
        /* The short letter is what the parse returns for an option that has one, so -n and
         * --count are one case. */
        out[*n] =
            (struct option){t->name, has_arg[t->arg], NULL, t->short_name ? t->short_name : t->id};
        (*n)++;
    }
    if (*n >= cap)
        return -ENOSPC;
    out[*n] = (struct option){NULL, 0, NULL, 0};
    return 0;
}

int vg_opt_shortopts(const struct vg_opt *t, char *out, size_t cap)
{
    size_t len = strnlen(out, cap);
    for (; t && t->name; t++) {
        if (!t->short_name)
            continue;
        const char *suffix = t->arg == VG_OPT_ARG_REQUIRED   ? ":"
                             : t->arg == VG_OPT_ARG_OPTIONAL ? "::"
                                                             : "";
        size_t add = 1 + strlen(suffix);
        if (len + add >= cap)
            return -ENOSPC;
        out[len] = t->short_name;
        memcpy(out + len + 1, suffix, strlen(suffix));
        len += add;
        out[len] = '\0';
    }
    return 0;
}

void vg_opt_help(FILE *f, const struct vg_opt *t, unsigned col)
{
    for (; t && t->name; t++) {
        if (!t->help)
            continue;
        int w = 0;
        if (t->short_name)
            w += fprintf(f, "  -%c, --%s", t->short_name, t->name);
        else
            w += fprintf(f, "  --%s", t->name);
        if (t->metavar)
            w += fprintf(f, t->arg == VG_OPT_ARG_OPTIONAL ? "[=%s]" : " %s", t->metavar);
        /* Pad to the column; a name too long for it keeps two spaces before its text. */
        int pad = (int)col + 3 - w;
        fprintf(f, "%*s", pad >= 1 ? pad : 2, "");
        for (const char *h = t->help;;) {
            const char *nl = strchr(h, '\n');
            if (!nl) {
                fprintf(f, "%s\n", h);
                break;
            }
            fprintf(f, "%.*s\n%*s", (int)(nl - h), h, (int)col + 3, "");
            h = nl + 1;
        }
    }
}

const struct vg_opt *vg_opt_find_long(const struct vg_opt *t, const char *name)
{
    if (!name)
        return NULL;
    if (name[0] == '-' && name[1] == '-')
        name += 2;
    size_t n = strcspn(name, "=");
    for (; t && t->name; t++)
        if (strlen(t->name) == n && memcmp(t->name, name, n) == 0)
            return t;
    return NULL;
}

const struct vg_opt *vg_opt_find_id(const struct vg_opt *t, int id)
{
    for (; t && t->name; t++)
        if (t->id == id)
            return t;
    return NULL;
}

const struct vg_opt *vg_opt_find_key(const struct vg_opt *t, const char *key, size_t n)
{
    for (; t && t->name; t++)
        if (t->config_key && strlen(t->config_key) == n && memcmp(t->config_key, key, n) == 0)
            return t;
    return NULL;
}

/* Store v in the size bytes at p: 0, or -ERANGE when the row's target cannot hold it (a row
 * whose range or width is wrong: never cut short). */
static int vg_opt_put(void *p, size_t size, uint64_t v)
{
    if (size == sizeof(uint64_t)) {
        memcpy(p, &v, sizeof(v));
    } else if (size == sizeof(uint32_t) && v <= UINT32_MAX) {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, sizeof(x));
    } else if (size == sizeof(uint8_t) && v <= 1) {
        uint8_t x = (uint8_t)v;
        memcpy(p, &x, sizeof(x));
    } else {
        return -ERANGE;
    }
    return 0;
}

/* The index of arg among the '|'-separated words, or -1. */
static int vg_opt_word(const char *words, const char *arg)
{
    size_t n = strlen(arg);
    for (int i = 0; words && *words; i++) {
        size_t w = strcspn(words, "|");
        if (w == n && memcmp(words, arg, n) == 0)
            return i;
        words += w + (words[w] == '|');
    }
    return -1;
}

/* arg as v's kind says, into *out. 0 or -EINVAL. */
static int vg_opt_convert(const struct vg_opt_val *v, const char *arg, uint64_t *out)
{
    int64_t i;
    int w;
    switch (v->kind) {
    case VG_OPT_K_DURATION:
        return vg_parse_duration_ms(arg, out) || *out < v->min || *out > v->max ? -EINVAL : 0;
    case VG_OPT_K_SIZE:
        return vg_parse_size(arg, false, out, NULL, NULL) ? -EINVAL : 0;
    case VG_OPT_K_NUM:
        return vg_parse_u64(arg, out) || *out < v->min || *out > v->max ? -EINVAL : 0;
    case VG_OPT_K_PID:
        if (vg_parse_i64(arg, 1, VG_PID_MAX, &i))
            return -EINVAL;
        *out = (uint64_t)i;
        return 0;
    case VG_OPT_K_WORD:
        if ((w = vg_opt_word(v->words, arg)) < 0)
            return -EINVAL;
        *out = (uint64_t)w;
        return 0;
    case VG_OPT_K_BOOL:
        if ((w = vg_opt_word("false|no|off|0|true|yes|on|1", arg)) < 0)
            return -EINVAL;
        *out = w >= 4;
        return 0;
    default:
        return -EINVAL;
    }
}

int vg_opt_store(const struct vg_opt_val *v, void *base, const char *arg)
{
    char *at = (char *)base + v->off;
    uint64_t x = 0;
    int rc = 0;
    switch (v->kind) {
    case VG_OPT_K_CODE:
        return 0;
    case VG_OPT_K_SET:
    case VG_OPT_K_CLEAR:
        rc = vg_opt_put(at, v->size, v->kind == VG_OPT_K_SET);
        break;
    case VG_OPT_K_STR:
        if (v->size != sizeof(arg))
            return -ERANGE;
        if (arg)
            memcpy(at, &arg, sizeof(arg));
        break;
    default:
        if (!arg && v->kind == VG_OPT_K_WORD)
            rc = vg_opt_put(at, v->size, v->min);
        else if (arg && vg_opt_convert(v, arg, &x))
            return -EINVAL;
        else if (arg)
            rc = vg_opt_put(at, v->size, x);
        break;
    }
    if (rc == 0 && v->given)
        rc = vg_opt_put((char *)base + v->given - 1, sizeof(bool), 1);
    return rc;
}
