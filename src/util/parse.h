/*
 * Strict parsing of numbers, sizes and durations from untrusted text (command lines, /proc,
 * scenario files). Every function rejects empty input, trailing garbage, signs where none
 * belong and overflow, returning -EINVAL or -ERANGE and leaving *out untouched on failure.
 * Also the matching of length-delimited text (a field of a line, a path component) against
 * literals. No function here allocates.
 */
#ifndef VG_UTIL_PARSE_H
#define VG_UTIL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal unsigned integer, the whole of s. */
int vg_parse_u64(const char *s, uint64_t *out);
/* Same, over exactly n bytes (s need not be NUL-terminated). */
int vg_parse_u64n(const char *s, size_t n, uint64_t *out);

/* The value of one hex digit (0-9, a-f, A-F): 0..15, or -1 for any other byte. */
int vg_parse_hex_digit(char c);
/* Decimal signed integer within [min, max]. */
int vg_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
/* Same, over exactly n bytes. */
int vg_parse_i64n(const char *s, size_t n, int64_t min, int64_t max, int64_t *out);

/* A byte size: "123", "512MiB", "20GiB", "1.5G", "10MB". Binary (KiB, MiB, GiB, TiB, and the
 * single letters K, M, G, T) and decimal (kB, MB, GB, TB) units; "B" alone is bytes. When
 * allow_fraction is true a plain number in [0, 1] with a decimal point (e.g. "0.5") is a fraction
 * and reported through *is_fraction / *fraction instead of *bytes. */
int vg_parse_size(const char *s, bool allow_fraction, uint64_t *bytes, bool *is_fraction,
                  double *fraction);

/* Durations in milliseconds that options and configuration keys are bounded by. */
#define VG_HOUR_MS 3600000u
#define VG_DAY_MS 86400000u

/* The largest process ID the kernel hands out (pid_max is at most 2^22; pid_t is 32-bit): what a
 * PID given as text may be at most. */
#define VG_PID_MAX 0x7fffffff

/* A duration: "500ms", "2s", "1.5s", "10m", "2h", "1d"; a bare number is seconds.
 * Result in milliseconds. */
int vg_parse_duration_ms(const char *s, uint64_t *ms);

/* Text split into lines: the line at *s (before end) as *line and its length *n without the
 * '\n' (the last line may lack one), *s moved past it; false once *s reaches end. */
bool vg_parse_line(const char **s, const char *end, const char **line, size_t *n);

/* A comma-separated list (CUDA_VISIBLE_DEVICES, --gpus, --expect's WHO, ...), entry by entry:
 * the entry at *pos as [*tok, *tok + *len), with the characters of trim (NULL: none) cut from
 * both ends, and *pos moved past its comma (NULL after the last entry); false once *pos is
 * NULL. Every comma separates, so "a,,b" has an empty entry in the middle, "a," one at the end
 * and "" is one empty entry: a parser that skips empty entries checks *len. */
bool vg_parse_list_next(const char **pos, const char *trim, const char **tok, size_t *len);
/* How many entries vg_parse_list_next() gives for s: one more than its commas. */
size_t vg_parse_list_count(const char *s);

/* Whether the n bytes at s (not NUL-terminated) are lit, begin with lit, end with lit. */
bool vg_parse_is(const char *s, size_t n, const char *lit);
bool vg_parse_starts(const char *s, size_t n, const char *lit);
bool vg_parse_ends(const char *s, size_t n, const char *lit);

/* Render bytes for people: "0 B", "512 KiB", "1.5 GiB" (one decimal above KiB when needed).
 * Writes at most n bytes including the NUL; returns -ENOSPC if it would not fit. */
int vg_fmt_size(uint64_t bytes, char *out, size_t n);

/* vg_fmt_size() when the amount is known and fits, else the caller's word for an unknown amount
 * ("n/a" in tables, "an unknown amount" in sentences). */
void vg_fmt_size_or(bool known, uint64_t bytes, const char *unknown, char *out, size_t n);

#endif
