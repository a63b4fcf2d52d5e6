/*
 * Escaping untrusted text for terminals and evidence lines (see text.h). Every code point counts
 * as one column: exact East Asian widths would need tables we do not want, and an off-by-one in
 * the last column of a command line costs nothing.
 */
#include "util/text.h"
#include "util/utf8.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Code points that print nothing yet change how the text around them reads: the Arabic letter
 * mark, zero-width space/joiners, LRM/RLM, line and paragraph separators, the bidi embeddings
 * and overrides (U+202A-U+202E), word joiner and invisible operators, the bidi isolates
 * (U+2066-U+2069), the byte order mark / zero-width no-break space. */
static bool vg_text_invisible(unsigned cp)
{
    return cp == 0x061C || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) ||
           (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF;
}

/* The escaped form of the code point or byte at p into tmp; returns its length, *used the input
 * bytes consumed. */
static size_t vg_text_one(const unsigned char *p, size_t n, char tmp[8], size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = p[0];
    if (c == '\n' || c == '\t' || c == '\r') {
        tmp[0] = '\\';
        tmp[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        *used = 1;
        return 2;
    }
    size_t len = vg_utf8_len(p, n);
    /* C0 and C1 controls and DEL: never let them reach the terminal. */
    bool control = c < 0x20 || c == 0x7F || (len == 2 && c == 0xC2 && p[1] < 0xA0);
    if (!len || control) {
        tmp[0] = '\\';
        tmp[1] = 'x';
        tmp[2] = hex[c >> 4];
        tmp[3] = hex[c & 15];
        *used = 1;
        return 4;
    }
    unsigned cp = len == 2   ? (unsigned)(c & 0x1F) << 6 | (p[1] & 0x3Fu)
                  : len == 3 ? (unsigned)(c & 0x0F) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu)
                             : 0;
    if (vg_text_invisible(cp)) {
        tmp[0] = '\\';
        tmp[1] = 'u';
        tmp[2] = hex[cp >> 12 & 15];
        tmp[3] = hex[cp >> 8 & 15];
        tmp[4] = hex[cp >> 4 & 15];
        tmp[5] = hex[cp & 15];
        *used = len;
        return 6;
    }
    memcpy(tmp, p, len);
    *used = len;
    return len;
}

char vg_text_state(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ? c : '?';
}

int vg_text_escape(struct vg_buf *out, const char *s, size_t n, size_t max_cols, size_t *cols)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t col = 0;
    int rc = 0;
    /* First pass: total width, to know whether to cut. */
    size_t total = 0;
    for (size_t i = 0; i < n;) {
        char tmp[8];
        size_t used, len = vg_text_one(p + i, n - i, tmp, &used);
        total += len == used && len > 1 && (unsigned char)tmp[0] >= 0x80 ? 1 : len;
        i += used;
    }
    bool cut = max_cols && total > max_cols;
    size_t limit = cut ? max_cols - 1 : total;
    for (size_t i = 0; i < n && rc == 0;) {
        char tmp[8];
        size_t used, len = vg_text_one(p + i, n - i, tmp, &used);
        size_t w = len == used && len > 1 && (unsigned char)tmp[0] >= 0x80 ? 1 : len;
        if (col + w > limit)
            break;
        rc = vg_buf_add(out, tmp, len);
        col += w;
        i += used;
    }
    if (rc == 0 && cut) {
        rc = vg_buf_adds(out, "\xE2\x80\xA6");
        col++;
    }
    if (cols)
        *cols = col;
    return rc;
}

void vg_text_escape_str(struct vg_buf *out, const char *s, size_t max_cols)
{
    if (s)
        vg_text_escape(out, s, strlen(s), max_cols, NULL);
}

size_t vg_text_cols(const char *s)
{
    size_t cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80)
            cols++;
    return cols;
}

void vg_text_short_uuid(const char *uuid, char *out, size_t n)
{
    if (!uuid) {
        snprintf(out, n, "n/a");
        return;
    }
    /* "GPU-" or "MIG-" then 8 hex digits is enough to tell GPUs apart and to type. */
    const char *dash = strchr(uuid, '-');
    size_t keep = dash ? (size_t)(dash - uuid) + 1 + 8 : 12;
    if (keep > strlen(uuid))
        keep = strlen(uuid);
    /* The driver's text, escaped like any other (callers print the result as it is): fewer
     * columns, and a visible "…", until the escaped form fits out. */
    for (size_t cols = n > 4 ? n - 4 : 1;; cols--) {
        struct vg_buf b;
        vg_buf_init(&b, n);
        int rc = vg_text_escape(&b, uuid, keep, cols, NULL);
        bool fits = rc == 0 && b.len < n;
        if (fits)
            memcpy(out, vg_buf_str(&b), b.len + 1);
        vg_buf_release(&b);
        if (fits)
            return;
        if (cols <= 1)
            break;
    }
    snprintf(out, n, "?");
}
