/*
 * Growable byte buffers with a hard maximum, after curl's dynbuf: appending past the maximum
 * fails loudly with -E2BIG instead of truncating. The data is always NUL-terminated (the NUL is
 * not counted in len) so text can be used as a C string; binary data may contain NULs.
 *
 * Every failing call also records its code in err, which stays set until vg_buf_release() or
 * vg_buf_init(): renderers append freely and check b->err once at the end.
 *
 * An embedded struct vg_buf is set up with vg_buf_init() and torn down with vg_buf_release();
 * vg_buf_steal() hands the data to the caller (who frees it) and leaves the buffer empty.
 */
#ifndef VG_UTIL_BUF_H
#define VG_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct vg_buf {
    char *data; /* NULL until the first append */
    size_t len;
    size_t cap;
    size_t max; /* largest len allowed */
    int err;    /* first failure (sticky), so a long series of appends is checked once */
};

#define VG_BUF_MAX_DEFAULT ((size_t)64 << 20)

void vg_buf_init(struct vg_buf *b, size_t max);
void vg_buf_release(struct vg_buf *b);
/* Keep the memory, forget the contents. */
void vg_buf_reset(struct vg_buf *b);
/* Make room for n more bytes; 0, -ENOMEM or -E2BIG. */
int vg_buf_reserve(struct vg_buf *b, size_t n);
int vg_buf_add(struct vg_buf *b, const void *p, size_t n);
int vg_buf_adds(struct vg_buf *b, const char *s);
int vg_buf_addc(struct vg_buf *b, char c);
int vg_buf_printf(struct vg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vg_buf_vprintf(struct vg_buf *b, const char *fmt, va_list ap);
/* Never NULL: an empty buffer gives "". Borrowed. */
const char *vg_buf_str(const struct vg_buf *b);
/* Transfer ownership of the (NUL-terminated) data; returns NULL only on out of memory. */
char *vg_buf_steal(struct vg_buf *b);

#endif
