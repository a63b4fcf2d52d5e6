/*
 * Saturating arithmetic for figures that come from outside (the driver's memory numbers): a sum
 * that would pass UINT64_MAX stays at UINT64_MAX instead of wrapping round to a small number,
 * so a lying driver can make a figure absurd but never make memory seem to vanish.
 */
#ifndef VG_UTIL_SAT_H
#define VG_UTIL_SAT_H

#include <stdint.h>

static inline uint64_t vg_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
