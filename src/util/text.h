/*
 * Escaping untrusted text: process names, command lines and even the driver's strings can hold
 * any byte, terminal escape sequences included. Everything printed for people goes through here
 * (renderers, and the rules' evidence lines). Nothing here allocates except through the caller's
 * struct vg_buf.
 */
#ifndef VG_UTIL_TEXT_H
#define VG_UTIL_TEXT_H

#include <stddef.h>

#include "util/buf.h"

/* Append s (n bytes) with control characters and invalid UTF-8 escaped as \n, \t, \xNN, and
 * the invisible code points that reorder or hide text (bidi embeddings, overrides and isolates,
 * marks, zero-width characters, line and paragraph separators: a name with U+202E reads
 * backwards) as \uNNNN, so nothing a process chose can move the cursor, change colours or
 * disguise what is shown. When max_cols is non-zero and
 * the escaped text is wider, it is cut to max_cols-1 columns followed by "…". Returns the
 * number of columns written through *cols (may be NULL). */
int vg_text_escape(struct vg_buf *out, const char *s, size_t n, size_t max_cols, size_t *cols);

/* vg_text_escape() of the string s (NULL appends nothing), without the column count. */
void vg_text_escape_str(struct vg_buf *out, const char *s, size_t max_cols);

/* A process state letter as shown: the kernel's letter (A-Z, a-z), or '?' for any other byte
 * (a copied or test procfs, a recorded snapshot can hold anything), so one column always. */
char vg_text_state(char c);

/* Display columns of valid UTF-8 text (one per code point). */
size_t vg_text_cols(const char *s);

/* "GPU-8a1b2c3d": the UUID's first 8 hex digits after the prefix, escaped as text (a driver's
 * "GPU-\033[2J..." shows as "GPU-\x1b[2J…"), cut with a visible "…" to fit; written into out
 * (n >= 16), ready to print as it is. */
void vg_text_short_uuid(const char *uuid, char *out, size_t n);

#endif
