/*
 * Bounded growable buffers (see buf.h). Growth doubles so appends are amortised O(1); every
 * size computation is checked against overflow before it is used.
 */
#include "util/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vg_buf_init(struct vg_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : VG_BUF_MAX_DEFAULT;
    b->err = 0;
}

void vg_buf_release(struct vg_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->err = 0;
}

void vg_buf_reset(struct vg_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int vg_buf_fail(struct vg_buf *b, int rc)
{
    if (!b->err)
        b->err = rc;
    return rc;
}

int vg_buf_reserve(struct vg_buf *b, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return vg_buf_fail(b, -E2BIG);
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return vg_buf_fail(b, -ENOMEM);
    if (!b->data)
        p[0] = '\0';
    b->data = p;
    b->cap = cap;
    return 0;
}

int vg_buf_add(struct vg_buf *b, const void *p, size_t n)
{
    int rc = vg_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int vg_buf_adds(struct vg_buf *b, const char *s)
{
    return vg_buf_add(b, s, strlen(s));
}

int vg_buf_addc(struct vg_buf *b, char c)
{
    return vg_buf_add(b, &c, 1);
}

int vg_buf_vprintf(struct vg_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return vg_buf_fail(b, -EINVAL);
    int rc = vg_buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    int m = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    if (m != n)
        return vg_buf_fail(b, -EINVAL);
    b->len += (size_t)n;
    return 0;
}

int vg_buf_printf(struct vg_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vg_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

const char *vg_buf_str(const struct vg_buf *b)
{
    return b->data ? b->data : "";
}

char *vg_buf_steal(struct vg_buf *b)
{
    char *p = b->data;
    if (!p)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
