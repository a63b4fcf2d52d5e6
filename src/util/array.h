/*
 * Arrays that grow, written once (after git's ALLOC_GROW): an array is a pointer, a count and a
 * capacity that the caller keeps side by side, all three starting at zero. vg_array_grow()
 * makes room for a number of elements, doubling the capacity so that n appends cost O(n)
 * copies; it never aborts: when memory runs out, or the size in bytes would not fit a size_t,
 * it returns -ENOMEM and leaves the pointer and the capacity as they were (the elements stay
 * the caller's, still valid). The memory is the caller's to free().
 *
 * The macros take the array itself, so the element size comes from its type:
 *     if (VG_ARRAY_GROW(t->v, t->cap, t->n + 1)) return -ENOMEM;
 *     struct vg_x *x = VG_ARRAY_PUSH(t->v, t->n, t->cap);  (zeroed; NULL on -ENOMEM)
 * The count and capacity must be size_t (the macros take their addresses).
 *
 * vg_array_lower_bound() is the binary search of a sorted array, written once: where a key is,
 * or where it would go (C++'s std::lower_bound), with bsearch's comparator convention.
 * vg_array_cmp_pid() is the qsort/bsearch comparator of PIDs, written once.
 */
#ifndef VG_UTIL_ARRAY_H
#define VG_UTIL_ARRAY_H

#include <stddef.h>
#include <sys/types.h>

/* The capacity a first growth gives at the least. */
#define VG_ARRAY_MIN 8

/* Make *arrp (an array of elem-byte elements with capacity *cap) hold at least need elements;
 * 0 or -ENOMEM. */
int vg_array_grow(void *arrp, size_t *cap, size_t need, size_t elem);
/* Append one zeroed element and count it in *n; the new element, or NULL (nothing changed) when
 * memory runs out. */
void *vg_array_push(void *arrp, size_t *n, size_t *cap, size_t elem);

/* The first index of the n-element array base (sorted as cmp says) whose element is not before
 * key: cmp(key, element) is negative, zero or positive as key comes before, with or after the
 * element. n when every element is before key; with equal elements, the first of them. */
size_t vg_array_lower_bound(const void *key, const void *base, size_t n, size_t elem,
                            int (*cmp)(const void *key, const void *element));

/* Orders pid_t values, or structs whose first member is their pid_t (a pointer to a struct
 * points to its first member), for qsort, bsearch and vg_array_lower_bound(). */
int vg_array_cmp_pid(const void *a, const void *b);

#define VG_ARRAY_GROW(arr, cap, need) vg_array_grow(&(arr), &(cap), (need), sizeof(*(arr)))
#define VG_ARRAY_PUSH(arr, n, cap) vg_array_push(&(arr), &(n), &(cap), sizeof(*(arr)))

#endif
