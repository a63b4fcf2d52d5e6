/*
 * Helpers for human-readable output: escaping untrusted text (process names and command lines
 * can hold any byte, including terminal escape sequences), display width, and colour.
 * Nothing here allocates except through the caller's struct vg_buf.
 */
#ifndef VG_RENDER_TEXT_H
#define VG_RENDER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* ANSI SGR sequences, or "" when colour is off. */
struct vg_style {
    const char *bold, *dim, *red, *yellow, *green, *magenta, *cyan, *reset;
};

void vg_style_init(struct vg_style *st, bool color);

/* Append s (n bytes) with control characters and invalid UTF-8 escaped as \n, \t, \xNN, so
 * nothing a process chose can move the cursor or change colours. When max_cols is non-zero and
 * the escaped text is wider, it is cut to max_cols-1 columns followed by "…". Returns the
 * number of columns written through *cols (may be NULL). */
int vg_text_escape(struct vg_buf *out, const char *s, size_t n, size_t max_cols, size_t *cols);

/* Append s padded with spaces to width columns (left-aligned unless right). s is trusted
 * (our own text). */
int vg_text_pad(struct vg_buf *out, const char *s, size_t width, bool right);

/* Display columns of valid UTF-8 text (one per code point). */
size_t vg_text_cols(const char *s);

#endif
