/*
 * What `vramguard top`'s UI is showing, as data: the frame taken last, the holder list made of
 * it (render/top_list.h) with the selection, sort, filters, search line, mode and message, and
 * the actions of the key table (render/top_keys.h) that change only these. Pure: cmd/top.c
 * owns the terminal, the threads and the actions that reach the host (stop, interval, mouse,
 * quit) and hands everything else here; the unit tests drive the same functions.
 *
 * The selection follows its PID (or launcher line) across frames, sorts and filters, and
 * stays on the list when its process leaves.
 *
 * Ownership: struct vg_top_view owns its frame, its lines and its filter strings
 * (vg_top_view_release()); vg_top_view_state() lends them to the screen's state.
 */
#ifndef VG_RENDER_TOP_VIEW_H
#define VG_RENDER_TOP_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "render/top.h"
#include "render/top_keys.h"
#include "render/top_list.h"

#define VG_TOP_SEARCH_CAP 128

struct vg_top_view {
    struct vg_top_frame *frame; /* owned; NULL before the first */
    struct vg_top_line *lines;  /* the list of frame as sorted and filtered */
    size_t nlines, sel;
    pid_t sel_pid; /* what the selection follows */
    bool sel_group;
    enum vg_top_mode mode;
    enum vg_top_sort sort;
    bool reverse, tree;
    struct vg_top_filter filter;
    char *user_filter, *rule_filter;
    char search[VG_TOP_SEARCH_CAP];
    bool searching;
    char prompt[VG_TOP_SEARCH_CAP + 64];
    char message[512]; /* the key line's message; "" none */
};

/* Sort by memory, every holder, the list mode. */
void vg_top_view_init(struct vg_top_view *v);
void vg_top_view_release(struct vg_top_view *v);

/* The key line's message, printf-style. */
void vg_top_view_say(struct vg_top_view *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Show f (taken over; NULL: keep the frame shown) from now on. */
void vg_top_view_take(struct vg_top_view *v, struct vg_top_frame *f);
/* Remake the list after a new frame, sort or filter; the selection follows its PID. */
void vg_top_view_relist(struct vg_top_view *v);

/* The selected line, and the selected holder's row (NULL on a launcher's line or none). */
const struct vg_top_line *vg_top_view_line(const struct vg_top_view *v);
const struct vg_top_row *vg_top_view_row(const struct vg_top_view *v);

/* Carry out a, with page lines to a page (PgUp, PgDn). The key line's message is cleared first
 * by a key on the list or the detail (closing a pane keeps it). Returns false for the actions
 * that are the command's (quit, interval, stop, confirm, cancel, mouse): nothing else done. */
bool vg_top_view_act(struct vg_top_view *v, struct vg_top_act a, long page);
/* While the search line is typed: key edits it; returns false when not typing. */
bool vg_top_view_search_key(struct vg_top_view *v, int key);

/* What of st the view gives: list, selection, sort, filter, mode, prompt (written into the
 * view's buffer), message. */
void vg_top_view_state(struct vg_top_view *v, struct vg_top_state *st);

#endif
