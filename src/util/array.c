/*
 * Array growth, the search of sorted arrays and the PID comparator (array.h): the one realloc
 * loop, with its overflow checks, and the one binary search, that modules use instead of
 * writing their own.
 */
#include "util/array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int vg_array_grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    if (!elem || need > SIZE_MAX / elem)
        return -ENOMEM;
    size_t ncap = *cap < VG_ARRAY_MIN ? VG_ARRAY_MIN : *cap;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > SIZE_MAX / elem)
        ncap = need; /* doubling would overflow; what was asked for still fits */
    /* arrp is the address of some T *: read and write it as bytes, not through a void ** */
    void *old;
    memcpy(&old, arrp, sizeof(old));
    void *p = realloc(old, ncap * elem);
    if (!p)
        return -ENOMEM;
    memcpy(arrp, &p, sizeof(p));
    *cap = ncap;
    return 0;
}

void *vg_array_push(void *arrp, size_t *n, size_t *cap, size_t elem)
{
    if (*n == SIZE_MAX || vg_array_grow(arrp, cap, *n + 1, elem))
        return NULL;
    char *base;
    memcpy(&base, arrp, sizeof(base));
    char *slot = base + *n * elem;
    memset(slot, 0, elem);
    (*n)++;
    return slot;
}

size_t vg_array_lower_bound(const void *key, const void *base, size_t n, size_t elem,
                            int (*cmp)(const void *key, const void *element))
{
    const char *b = base;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2; /* never (lo + hi) / 2: that can overflow */
        if (cmp(key, b + mid * elem) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int vg_array_cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return x < y ? -1 : x > y;
}
