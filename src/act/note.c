/*
 * Whole messages for log callbacks (see note.h).
 */
#include "act/note.h"

#include <stddef.h>

#include "util/buf.h"

void vg_note_v(void (*fn)(void *ctx, const char *msg), void *ctx, const char *lost, const char *fmt,
               va_list ap)
{
    if (!fn)
        return;
    struct vg_buf msg;
    vg_buf_init(&msg, 0);
    vg_buf_vprintf(&msg, fmt, ap);
    fn(ctx, msg.err ? lost : vg_buf_str(&msg));
    vg_buf_release(&msg);
}
