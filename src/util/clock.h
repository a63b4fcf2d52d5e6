/*
 * Clocks: a monotonic millisecond count for deadlines and windows (never the wall clock, which
 * jumps), and sleeping until such a time whatever signals interrupt the sleep.
 */
#ifndef VG_UTIL_CLOCK_H
#define VG_UTIL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t vg_clock_ms(void);

/* Sleep until vg_clock_ms() >= when_ms (returns at once when it already is). */
void vg_clock_sleep_until(uint64_t when_ms);

#endif
