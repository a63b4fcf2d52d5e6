/*
 * `vramguard top`'s input (see top_keys.h): the key map per mode, the mouse, the search line.
 * The switch is the key map, read best whole; README.md, doc/vramguard.1 and the help pane
 * (render/top.c) list the same keys.
 */
#include <string.h>

#include "render/top_keys.h"

static struct vg_top_act vg_act(enum vg_top_act_kind k, long arg)
{
    return (struct vg_top_act){k, arg};
}

/* The list's keys (also the detail pane's, except those that close it). */
static struct vg_top_act vg_top_list_key(int key)
{
    switch (key) {
    case 'q':
        return vg_act(VG_TOP_ACT_QUIT, 0);
    case VG_TOP_KEY_DOWN:
    case 'j':
    case 14: /* Ctrl-N */
        return vg_act(VG_TOP_ACT_MOVE, 1);
    case VG_TOP_KEY_UP:
    case 16: /* Ctrl-P */
        return vg_act(VG_TOP_ACT_MOVE, -1);
    case VG_TOP_KEY_PGDN:
        return vg_act(VG_TOP_ACT_PAGE, 1);
    case VG_TOP_KEY_PGUP:
        return vg_act(VG_TOP_ACT_PAGE, -1);
    case VG_TOP_KEY_HOME:
        return vg_act(VG_TOP_ACT_FIRST, 0);
    case VG_TOP_KEY_END:
        return vg_act(VG_TOP_ACT_LAST, 0);
    case '\n':
    case '\r':
    case VG_TOP_KEY_ENTER:
        return vg_act(VG_TOP_ACT_DETAIL, 0);
    case '?':
    case 'h':
        return vg_act(VG_TOP_ACT_HELP, 0);
    case '>':
    case VG_TOP_KEY_F6:
        return vg_act(VG_TOP_ACT_SORT, 1);
    case '<':
        return vg_act(VG_TOP_ACT_SORT, -1);
    case 'r':
        return vg_act(VG_TOP_ACT_REVERSE, 0);
    case 't':
        return vg_act(VG_TOP_ACT_TREE, 0);
    case '/':
        return vg_act(VG_TOP_ACT_SEARCH, 0);
    case 'u':
        return vg_act(VG_TOP_ACT_FILTER_USER, 0);
    case 'f':
        return vg_act(VG_TOP_ACT_FILTER_FINDING, 0);
    case 'g':
        return vg_act(VG_TOP_ACT_FILTER_GPU, 0);
    case VG_TOP_KEY_ESC:
        return vg_act(VG_TOP_ACT_CLEAR_FILTERS, 0);
    case '+':
        return vg_act(VG_TOP_ACT_INTERVAL, 1);
    case '-':
        return vg_act(VG_TOP_ACT_INTERVAL, -1);
    case 'k':
        return vg_act(VG_TOP_ACT_STOP, 0);
    case 'K':
        return vg_act(VG_TOP_ACT_STOP_ALL, 0);
    case 'm':
        return vg_act(VG_TOP_ACT_MOUSE, 0);
    default:
        return vg_act(VG_TOP_ACT_NONE, 0);
    }
}

static bool vg_top_enter(int key)
{
    return key == '\n' || key == '\r' || key == VG_TOP_KEY_ENTER;
}

static struct vg_top_act vg_top_key_act(enum vg_top_mode mode, int key)
{
    switch (mode) {
    case VG_TOP_MODE_HELP: /* any key closes it */
        return vg_act(VG_TOP_ACT_LIST, 0);
    case VG_TOP_MODE_PLAN:
        if (key == 'y' || key == 'Y')
            return vg_act(VG_TOP_ACT_CONFIRM, 0);
        if (key == 'n' || key == 'N' || key == VG_TOP_KEY_ESC || key == 'q')
            return vg_act(VG_TOP_ACT_CANCEL, 0);
        return vg_act(VG_TOP_ACT_NONE, 0); /* nothing else while a plan waits */
    case VG_TOP_MODE_DETAIL:
        if (vg_top_enter(key) || key == VG_TOP_KEY_ESC || key == 'q')
            return vg_act(VG_TOP_ACT_LIST, 0);
        return vg_top_list_key(key);
    default:
        return vg_top_list_key(key);
    }
}

static struct vg_top_act vg_top_mouse_act(enum vg_top_mode mode, const struct vg_top_screen *s,
                                          const struct vg_top_input *in)
{
    if (mode == VG_TOP_MODE_PLAN)
        return vg_act(VG_TOP_ACT_NONE, 0); /* only y confirms, only n/Esc/q cancel */
    if (mode == VG_TOP_MODE_HELP)
        return in->buttons ? vg_act(VG_TOP_ACT_LIST, 0) : vg_act(VG_TOP_ACT_NONE, 0);
    if (in->buttons & VG_TOP_MOUSE_WHEEL_UP)
        return vg_act(VG_TOP_ACT_MOVE, -VG_TOP_WHEEL_LINES);
    if (in->buttons & VG_TOP_MOUSE_WHEEL_DOWN)
        return vg_act(VG_TOP_ACT_MOVE, VG_TOP_WHEEL_LINES);
    if (!(in->buttons & VG_TOP_MOUSE_CLICK) || mode != VG_TOP_MODE_LIST || !s || !s->list_rows ||
        in->y < 0 || in->x < 0 || (unsigned)in->y < s->list_y ||
        (unsigned)in->y - s->list_y >= s->list_rows)
        return vg_act(VG_TOP_ACT_NONE, 0);
    return vg_act(VG_TOP_ACT_SELECT_AT, (long)(s->list_first + ((unsigned)in->y - s->list_y)));
}

struct vg_top_act vg_top_input_act(enum vg_top_mode mode, const struct vg_top_screen *s,
                                   const struct vg_top_input *in)
{
    return in->mouse ? vg_top_mouse_act(mode, s, in) : vg_top_key_act(mode, in->key);
}

enum vg_top_edit vg_top_search_edit(char *buf, size_t cap, int key)
{
    if (!cap)
        return VG_TOP_EDIT_DROP;
    size_t n = strnlen(buf, cap - 1);
    buf[n] = '\0';
    if (key == VG_TOP_KEY_ESC) {
        buf[0] = '\0';
        return VG_TOP_EDIT_DROP;
    }
    if (vg_top_enter(key))
        return VG_TOP_EDIT_KEEP;
    if ((key == VG_TOP_KEY_BACKSPACE || key == 127 || key == 8) && n)
        buf[n - 1] = '\0';
    else if (key >= 32 && key < 127 && n + 1 < cap) {
        buf[n] = (char)key;
        buf[n + 1] = '\0';
    }
    return VG_TOP_EDIT_MORE;
}
