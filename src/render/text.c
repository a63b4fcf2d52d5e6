/*
 * Colours and padding for terminal output (see text.h); the escaping is util/text.c's.
 */
#include "render/text.h"

#include <string.h>

void vg_style_init(struct vg_style *st, bool color)
{
    if (color) {
        *st = (struct vg_style){"\033[1m",  "\033[2m",  "\033[31m", "\033[33m",
                                "\033[32m", "\033[35m", "\033[36m", "\033[0m"};
    } else {
        *st = (struct vg_style){"", "", "", "", "", "", "", ""};
    }
}

int vg_text_pad(struct vg_buf *out, const char *s, size_t width, bool right)
{
    size_t w = vg_text_cols(s);
    int rc = 0;
    if (right)
        for (size_t i = w; i < width && rc == 0; i++)
            rc = vg_buf_addc(out, ' ');
    if (rc == 0)
        rc = vg_buf_adds(out, s);
    if (!right)
        for (size_t i = w; i < width && rc == 0; i++)
            rc = vg_buf_addc(out, ' ');
    return rc;
}
