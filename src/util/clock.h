/*
 * Clocks: a monotonic millisecond count for deadlines and windows (never the wall clock, which
 * jumps), sleeping until such a time whatever signals interrupt the sleep, and the one format of
 * wall-clock timestamps in output (ISO 8601, UTC).
 */
#ifndef VG_UTIL_CLOCK_H
#define VG_UTIL_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Bytes an ISO 8601 time of vg_clock_iso8601() takes, with its NUL: "2026-12-01T16:29:21Z". */
#define VG_CLOCK_ISO_SIZE 21

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t vg_clock_ms(void);

/* Timed waits (pthread_cond_timedwait on a CLOCK_MONOTONIC condition) take a struct timespec:
 * t plus ms, normalised; and b - a in seconds. */
void vg_clock_ts_add_ms(struct timespec *t, uint64_t ms);
double vg_clock_ts_diff(const struct timespec *a, const struct timespec *b);

/* Sleep until vg_clock_ms() >= when_ms (returns at once when it already is). */
void vg_clock_sleep_until(uint64_t when_ms);

/* Wall-clock time t as ISO 8601 UTC to the second into out (n >= VG_CLOCK_ISO_SIZE); "?" when it
 * cannot be written (a year past 9999, or n too small). */
void vg_clock_iso8601(time_t t, char *out, size_t n);

#endif
