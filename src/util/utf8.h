/*
 * UTF-8 validation for the renderers: text for a terminal, JSON and Prometheus labels all pass
 * valid sequences through and escape everything else, and must agree on what is valid.
 */
#ifndef VG_UTIL_UTF8_H
#define VG_UTIL_UTF8_H

#include <stddef.h>

/* Bytes of the valid UTF-8 sequence at s (at most n bytes, n > 0), or 0 when it is not one:
 * truncated, a stray continuation byte, an overlong form, a surrogate or above U+10FFFF. */
size_t vg_utf8_len(const unsigned char *s, size_t n);

#endif
