/*
 * The holder list of `vramguard top` as data: which rows of a frame (rules/top.h) the screen
 * lists and in what order. Sorting, filtering and the tree order (a launcher's ranks and
 * workers under it, by parent PID) are pure functions over a frame, so the screen
 * (render/top.h), the command and the tests share them; they decide nothing about a process,
 * only how it is shown, which is why they live in render/ and not beside the rules.
 *
 * Ownership: a filter borrows its strings; vg_top_lines() returns a heap array the caller
 * frees with free().
 */
#ifndef VG_RENDER_TOP_LIST_H
#define VG_RENDER_TOP_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "rules/top.h"

enum vg_top_sort {
    VG_TOP_SORT_PID,
    VG_TOP_SORT_USER,
    VG_TOP_SORT_GPU,
    VG_TOP_SORT_MEM,
    VG_TOP_SORT_UTIL,
    VG_TOP_SORT_CPU,
    VG_TOP_SORT_TIME,
    VG_TOP_SORT_STATE,
    VG_TOP_SORT_FINDING,
    VG_TOP_SORT_COMMAND,
    VG_TOP_SORT_RSS,
    VG_TOP_SORT_COUNT
};
/* "pid", "user", "gpu", "mem", "util", "cpu", "time", "state", "finding", "command", "rss" */
const char *vg_top_sort_name(enum vg_top_sort s);
/* The key of that name, or VG_TOP_SORT_COUNT. */
enum vg_top_sort vg_top_sort_parse(const char *name);

/* What a row must match: each set field narrows (NULL / false: any). */
struct vg_top_filter {
    const char *user; /* exact user name */
    bool by_gpu;
    unsigned gpu_index; /* NVML index */
    const char *rule;   /* its finding's rule id */
    const char *text;   /* a substring of the command, user, PID or container */
};
bool vg_top_row_match(const struct vg_top_frame *f, const struct vg_top_row *r,
                      const struct vg_top_filter *flt);

/* One line of the holder list: a row, or (tree mode) the header of a group of rows that share
 * a parent which holds no GPU itself (a launcher: torchrun, mpirun, srun). */
struct vg_top_line {
    bool group; /* a launcher's header line: pid is the launcher's */
    size_t row; /* index into rows (not group) */
    pid_t pid;
    unsigned depth; /* 0 at the top, 1 under a launcher or parent row */
};

/* The list shown: rows passing flt, ordered by key (biggest first for figures when !reverse;
 * alphabetical or ascending for the others), ties by PID; with tree, rows whose parent is
 * another row are put right under it, and rows sharing a parent that is no row (and not PID
 * 1 or 0) under a group line for that parent when there are two or more. *out is heap
 * (free() it); 0 or -ENOMEM. */
int vg_top_lines(const struct vg_top_frame *f, const struct vg_top_filter *flt,
                 enum vg_top_sort key, bool reverse, bool tree, struct vg_top_line **out,
                 size_t *n);

#endif
