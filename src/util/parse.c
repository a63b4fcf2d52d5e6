/*
 * Strict parsers for untrusted text (see parse.h). Written by hand instead of strtoull() alone
 * because strtoull accepts leading whitespace, a minus sign (wrapping the value) and partial
 * input, each of which has let garbage through in other tools.
 */
#include "util/parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vg_parse_u64n(const char *s, size_t n, uint64_t *out)
{
    if (!s || n == 0)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int vg_parse_u64(const char *s, uint64_t *out)
{
    if (!s)
        return -EINVAL;
    return vg_parse_u64n(s, strlen(s), out);
}

int vg_parse_i64n(const char *s, size_t n, int64_t min, int64_t max, int64_t *out)
{
    if (!s || n == 0)
        return -EINVAL;
    bool neg = s[0] == '-';
    size_t skip = neg || s[0] == '+';
    uint64_t mag;
    int rc = vg_parse_u64n(s + skip, n - skip, &mag);
    if (rc)
        return rc;
    int64_t v;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return -ERANGE;
        v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return -ERANGE;
        v = (int64_t)mag;
    }
    if (v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int vg_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    return s ? vg_parse_i64n(s, strlen(s), min, max, out) : -EINVAL;
}

/* A non-negative decimal number with an optional fraction, no exponent, no sign. Returns the
 * number of bytes consumed, 0 when there is no number (s NULL included). */
static size_t vg_parse_decimal(const char *s, double *out, bool *had_point)
{
    if (!s)
        return 0;
    size_t i = 0, digits = 0;
    double v = 0.0;
    while (s[i] >= '0' && s[i] <= '9') {
        v = v * 10.0 + (s[i] - '0');
        i++;
        digits++;
    }
    *had_point = false;
    if (s[i] == '.') {
        *had_point = true;
        i++;
        double scale = 0.1;
        while (s[i] >= '0' && s[i] <= '9') {
            v += (s[i] - '0') * scale;
            scale /= 10.0;
            i++;
            digits++;
        }
    }
    if (!digits || !isfinite(v))
        return 0;
    *out = v;
    return i;
}

struct vg_unit {
    const char *name;
    double mult;
};

/* v in the unit named s (one of units) as a whole number: 0 with *out set, -EINVAL when s names
 * no unit of the table, -ERANGE when the result does not fit 64 bits. Sizes and durations both
 * end here. */
static int vg_unit_apply(const struct vg_unit *units, const char *s, double v, uint64_t *out)
{
    const struct vg_unit *u = units;
    while (u->name && strcmp(u->name, s) != 0)
        u++;
    if (!u->name)
        return -EINVAL;
    double r = v * u->mult;
    /* 2^64 is exactly representable; anything at or above it does not fit. */
    if (!isfinite(r) || r >= 18446744073709551616.0)
        return -ERANGE;
    *out = (uint64_t)r;
    return 0;
}

int vg_parse_size(const char *s, bool allow_fraction, uint64_t *bytes, bool *is_fraction,
                  double *fraction)
{
    static const struct vg_unit units[] = {
        {"", 1},
        {"B", 1},
        {"K", 1024.0},
        {"KiB", 1024.0},
        {"k", 1024.0},
        {"M", 1048576.0},
        {"MiB", 1048576.0},
        {"G", 1073741824.0},
        {"GiB", 1073741824.0},
        {"T", 1099511627776.0},
        {"TiB", 1099511627776.0},
        {"kB", 1e3},
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
        {NULL, 0},
    };
    double v;
    bool point;
    size_t n = vg_parse_decimal(s, &v, &point);
    if (!n)
        return -EINVAL;
    const char *unit = s + n;
    if (*unit == ' ')
        unit++;
    if (allow_fraction && point && *unit == '\0' && v <= 1.0) {
        if (is_fraction)
            *is_fraction = true;
        if (fraction)
            *fraction = v;
        return 0;
    }
    uint64_t b;
    int rc = vg_unit_apply(units, unit, v, &b);
    if (rc)
        return rc;
    if (is_fraction)
        *is_fraction = false;
    *bytes = b;
    return 0;
}

int vg_parse_duration_ms(const char *s, uint64_t *ms)
{
    static const struct vg_unit units[] = {
        {"", 1000},     {"ms", 1},         {"s", 1000},      {"m", 60000},
        {"min", 60000}, {"h", VG_HOUR_MS}, {"d", VG_DAY_MS}, {NULL, 0},
    };
    double v;
    bool point;
    size_t n = vg_parse_decimal(s, &v, &point);
    return n ? vg_unit_apply(units, s + n, v, ms) : -EINVAL;
}

bool vg_parse_line(const char **s, const char *end, const char **line, size_t *n)
{
    if (!*s || *s >= end)
        return false;
    const char *nl = memchr(*s, '\n', (size_t)(end - *s));
    const char *le = nl ? nl : end;
    *line = *s;
    *n = (size_t)(le - *s);
    *s = nl ? nl + 1 : end;
    return true;
}

bool vg_parse_list_next(const char **pos, const char *trim, const char **tok, size_t *len)
{
    if (!*pos)
        return false;
    const char *a = *pos, *comma = strchr(a, ',');
    const char *b = comma ? comma : a + strlen(a);
    *pos = comma ? comma + 1 : NULL;
    if (trim) {
        while (a < b && strchr(trim, *a))
            a++;
        while (b > a && strchr(trim, b[-1]))
            b--;
    }
    *tok = a;
    *len = (size_t)(b - a);
    return true;
}

size_t vg_parse_list_count(const char *s)
{
    size_t n = 1;
    for (; *s; s++)
        n += *s == ',';
    return n;
}

bool vg_parse_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

bool vg_parse_starts(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n >= k && memcmp(s, lit, k) == 0;
}

bool vg_parse_ends(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n >= k && memcmp(s + n - k, lit, k) == 0;
}

int vg_fmt_size(uint64_t bytes, char *out, size_t n)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned i = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && i + 1 < sizeof(names) / sizeof(names[0])) {
        v /= 1024.0;
        i++;
    }
    int w;
    if (i == 0)
        w = snprintf(out, n, "%llu B", (unsigned long long)bytes);
    else if (v >= 100.0 || v == (double)(uint64_t)v)
        w = snprintf(out, n, "%.0f %s", v, names[i]);
    else
        w = snprintf(out, n, "%.1f %s", v, names[i]);
    if (w < 0 || (size_t)w >= n)
        return -ENOSPC;
    return 0;
}

void vg_fmt_size_or(bool known, uint64_t bytes, const char *unknown, char *out, size_t n)
{
    if (!known || vg_fmt_size(bytes, out, n) != 0)
        snprintf(out, n, "%s", unknown);
}

int vg_parse_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}
