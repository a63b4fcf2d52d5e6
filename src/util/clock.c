/*
 * Monotonic clock and timestamp helpers (see clock.h).
 */
#include "util/clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

uint64_t vg_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void vg_clock_sleep_until(uint64_t when_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(when_ms / 1000u),
                          .tv_nsec = (long)(when_ms % 1000u) * 1000000L};
    /* absolute, so an interrupted sleep resumes toward the same instant */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void vg_clock_ts_add_ms(struct timespec *t, uint64_t ms)
{
    t->tv_sec += (time_t)(ms / 1000);
    t->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

double vg_clock_ts_diff(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

void vg_clock_iso8601(time_t t, char *out, size_t n)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, n, "?");
}
