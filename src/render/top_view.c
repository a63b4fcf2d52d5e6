/*
 * What `vramguard top`'s UI shows (see top_view.h): the list of the frame taken last, the
 * selection that follows its PID, and the key table's actions on sort, filters, search and
 * panes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/top_view.h"

void vg_top_view_init(struct vg_top_view *v)
{
    memset(v, 0, sizeof(*v));
    v->sort = VG_TOP_SORT_MEM;
    v->mode = VG_TOP_MODE_LIST;
}

static void vg_top_view_clear_filters(struct vg_top_view *v)
{
    free(v->user_filter);
    free(v->rule_filter);
    v->user_filter = v->rule_filter = NULL;
    v->filter.by_gpu = false;
    v->search[0] = '\0';
}

void vg_top_view_release(struct vg_top_view *v)
{
    vg_top_frame_free(v->frame);
    free(v->lines);
    vg_top_view_clear_filters(v);
    v->frame = NULL;
    v->lines = NULL;
    v->nlines = 0;
}

void vg_top_view_say(struct vg_top_view *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v->message, sizeof(v->message), fmt, ap);
    va_end(ap);
    if (n < 0)
        v->message[0] = '\0';
}

void vg_top_view_take(struct vg_top_view *v, struct vg_top_frame *f)
{
    if (!f)
        return;
    vg_top_frame_free(v->frame);
    v->frame = f;
}

void vg_top_view_relist(struct vg_top_view *v)
{
    v->filter = (struct vg_top_filter){.user = v->user_filter,
                                       .rule = v->rule_filter,
                                       .by_gpu = v->filter.by_gpu,
                                       .gpu_index = v->filter.gpu_index,
                                       .text = v->search[0] ? v->search : NULL};
    free(v->lines);
    v->lines = NULL;
    v->nlines = 0;
    if (!v->frame)
        return;
    if (vg_top_lines(v->frame, &v->filter, v->sort, v->reverse, v->tree, &v->lines, &v->nlines))
        vg_top_view_say(v, "out of memory");
    for (size_t i = 0; i < v->nlines; i++)
        if (v->lines[i].pid == v->sel_pid && v->lines[i].group == v->sel_group) {
            v->sel = i;
            return;
        }
    if (v->sel >= v->nlines)
        v->sel = v->nlines ? v->nlines - 1 : 0;
}

const struct vg_top_line *vg_top_view_line(const struct vg_top_view *v)
{
    return v->frame && v->sel < v->nlines ? &v->lines[v->sel] : NULL;
}

const struct vg_top_row *vg_top_view_row(const struct vg_top_view *v)
{
    const struct vg_top_line *l = vg_top_view_line(v);
    return l && !l->group ? &v->frame->rows[l->row] : NULL;
}

static void vg_top_view_select(struct vg_top_view *v, long delta)
{
    long n = (long)v->nlines, s = (long)v->sel + delta;
    s = s >= n ? n - 1 : s;
    v->sel = s < 0 ? 0 : (size_t)s;
    if (v->sel < v->nlines) {
        v->sel_pid = v->lines[v->sel].pid;
        v->sel_group = v->lines[v->sel].group;
    }
}

/* u, f: filter by the selected row's user or finding, or drop that filter. */
static void vg_top_view_toggle(struct vg_top_view *v, char **slot, bool user)
{
    const struct vg_top_row *r = vg_top_view_row(v);
    if (*slot) {
        free(*slot);
        *slot = NULL;
        return;
    }
    const char *s = !r               ? NULL
                    : user           ? r->user
                    : r->has_finding ? v->frame->fs.v[r->finding].rule
                                     : NULL;
    if (!s) {
        vg_top_view_say(v, user ? "the selected holder's user is unknown"
                                : "the selected holder has no finding");
        return;
    }
    *slot = strdup(s);
}

/* g: the next GPU, then all. */
static void vg_top_view_gpu_filter(struct vg_top_view *v)
{
    size_t n = v->frame ? v->frame->ngpus : 0;
    if (!n) {
        v->filter.by_gpu = false;
        return;
    }
    if (!v->filter.by_gpu) {
        v->filter.by_gpu = true;
        v->filter.gpu_index = v->frame->gpus[0].g->index;
        return;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (v->frame->gpus[i].g->index == v->filter.gpu_index) {
            v->filter.gpu_index = v->frame->gpus[i + 1].g->index;
            return;
        }
    v->filter.by_gpu = false;
}

/* The actions on the list and the panes; false for the others. */
static bool vg_top_view_do(struct vg_top_view *v, struct vg_top_act a, long page)
{
    switch (a.kind) {
    case VG_TOP_ACT_NONE:
        return true;
    case VG_TOP_ACT_MOVE:
        vg_top_view_select(v, a.arg);
        return true;
    case VG_TOP_ACT_PAGE:
        vg_top_view_select(v, a.arg * page);
        return true;
    case VG_TOP_ACT_FIRST:
        vg_top_view_select(v, -(long)v->nlines);
        return true;
    case VG_TOP_ACT_LAST:
        vg_top_view_select(v, (long)v->nlines);
        return true;
    case VG_TOP_ACT_SELECT_AT:
        vg_top_view_select(v, a.arg - (long)v->sel);
        return true;
    case VG_TOP_ACT_DETAIL:
    case VG_TOP_ACT_HELP:
    case VG_TOP_ACT_LIST:
        v->mode = a.kind == VG_TOP_ACT_DETAIL ? VG_TOP_MODE_DETAIL
                  : a.kind == VG_TOP_ACT_HELP ? VG_TOP_MODE_HELP
                                              : VG_TOP_MODE_LIST;
        return true;
    case VG_TOP_ACT_SORT:
        v->sort = (enum vg_top_sort)((v->sort + VG_TOP_SORT_COUNT + (a.arg > 0 ? 1 : -1)) %
                                     VG_TOP_SORT_COUNT);
        return true;
    case VG_TOP_ACT_REVERSE:
        v->reverse = !v->reverse;
        return true;
    case VG_TOP_ACT_TREE:
        v->tree = !v->tree;
        return true;
    case VG_TOP_ACT_SEARCH:
        v->searching = true;
        return true;
    case VG_TOP_ACT_FILTER_USER:
    case VG_TOP_ACT_FILTER_FINDING:
        vg_top_view_toggle(v, a.kind == VG_TOP_ACT_FILTER_USER ? &v->user_filter : &v->rule_filter,
                           a.kind == VG_TOP_ACT_FILTER_USER);
        return true;
    case VG_TOP_ACT_FILTER_GPU:
        vg_top_view_gpu_filter(v);
        return true;
    case VG_TOP_ACT_CLEAR_FILTERS:
        vg_top_view_clear_filters(v);
        return true;
    default:
        return false;
    }
}

bool vg_top_view_act(struct vg_top_view *v, struct vg_top_act a, long page)
{
    /* a new key on the list or the detail clears the last message; closing a pane keeps it */
    if (a.kind != VG_TOP_ACT_NONE && a.kind != VG_TOP_ACT_LIST &&
        (v->mode == VG_TOP_MODE_LIST || v->mode == VG_TOP_MODE_DETAIL))
        v->message[0] = '\0';
    return vg_top_view_do(v, a, page);
}

bool vg_top_view_search_key(struct vg_top_view *v, int key)
{
    if (!v->searching)
        return false;
    if (vg_top_search_edit(v->search, sizeof(v->search), key) != VG_TOP_EDIT_MORE)
        v->searching = false;
    return true;
}

void vg_top_view_state(struct vg_top_view *v, struct vg_top_state *st)
{
    snprintf(v->prompt, sizeof(v->prompt), "search (Enter keeps, Esc drops): %s", v->search);
    st->lines = v->lines;
    st->nlines = v->nlines;
    st->sel = v->sel;
    st->sort = v->sort;
    st->reverse = v->reverse;
    st->tree = v->tree;
    st->filter = &v->filter;
    st->mode = v->mode;
    st->prompt = v->searching ? v->prompt : NULL;
    st->message = v->message[0] ? v->message : NULL;
}
