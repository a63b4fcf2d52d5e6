/*
 * Helpers for human-readable output: colour and padding; escaping untrusted text is util/text.h's
 * (included here, as every renderer needs it).
 * Nothing here allocates except through the caller's struct vg_buf.
 */
#ifndef VG_RENDER_TEXT_H
#define VG_RENDER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"
#include "util/text.h" /* vg_text_escape() and the rest of escaping */

/* ANSI SGR sequences, or "" when colour is off. */
struct vg_style {
    const char *bold, *dim, *red, *yellow, *green, *magenta, *cyan, *reset;
};

void vg_style_init(struct vg_style *st, bool color);

/* Append s padded with spaces to width columns (left-aligned unless right). s is trusted
 * (our own text). */
int vg_text_pad(struct vg_buf *out, const char *s, size_t width, bool right);

#endif
