/*
 * `vramguard top`'s input (see top_keys.h): the key table, the mouse, the search line. The
 * table is the key map, read best whole; the help pane (render/top.c) prints its help, and
 * README.md and doc/vramguard.1 list the same keys.
 */
#include <string.h>

#include "render/top_keys.h"

static struct vg_top_act vg_act(enum vg_top_act_kind k, long arg)
{
    return (struct vg_top_act){k, arg};
}

#define VG_LD (VG_TOP_IN_LIST | VG_TOP_IN_DETAIL) /* the list's keys, also the detail's */
#define VG_L VG_TOP_IN_LIST
#define VG_D VG_TOP_IN_DETAIL
#define VG_P VG_TOP_IN_PLAN

/* The help pane's key lines are these rows' help, in this order. */
static const struct vg_top_key vg_top_key_table[] = {
    {VG_TOP_KEY_UP, "Up", VG_LD, VG_TOP_ACT_MOVE, -1,
     "Up/Down j Ctrl-N/Ctrl-P PgUp/PgDn Home/End  select a holder"},
    {VG_TOP_KEY_DOWN, "Down", VG_LD, VG_TOP_ACT_MOVE, 1, NULL},
    {'j', "j", VG_LD, VG_TOP_ACT_MOVE, 1, NULL},
    {14, "Ctrl-N", VG_LD, VG_TOP_ACT_MOVE, 1, NULL},
    {16, "Ctrl-P", VG_LD, VG_TOP_ACT_MOVE, -1, NULL},
    {VG_TOP_KEY_PGUP, "PgUp", VG_LD, VG_TOP_ACT_PAGE, -1, NULL},
    {VG_TOP_KEY_PGDN, "PgDn", VG_LD, VG_TOP_ACT_PAGE, 1, NULL},
    {VG_TOP_KEY_HOME, "Home", VG_LD, VG_TOP_ACT_FIRST, 0, NULL},
    {VG_TOP_KEY_END, "End", VG_LD, VG_TOP_ACT_LAST, 0, NULL},
    {VG_TOP_KEY_ENTER, "Enter", VG_L, VG_TOP_ACT_DETAIL, 0,
     "Enter   detail: command line, GPU variables, libraries, finding, evidence, fix"},
    {'\r', "Enter", VG_L, VG_TOP_ACT_DETAIL, 0, NULL},
    {'\n', "Enter", VG_L, VG_TOP_ACT_DETAIL, 0, NULL},
    /* the detail closes on Enter, Esc and q */
    {VG_TOP_KEY_ENTER, "Enter", VG_D, VG_TOP_ACT_LIST, 0, NULL},
    {'\r', "Enter", VG_D, VG_TOP_ACT_LIST, 0, NULL},
    {'\n', "Enter", VG_D, VG_TOP_ACT_LIST, 0, NULL},
    {VG_TOP_KEY_ESC, "Esc", VG_D, VG_TOP_ACT_LIST, 0, NULL},
    {'q', "q", VG_D, VG_TOP_ACT_LIST, 0, NULL},
    {'<', "<", VG_LD, VG_TOP_ACT_SORT, -1,
     "< > F6  sort by the previous / next column;  r  reverse the order"},
    {'>', ">", VG_LD, VG_TOP_ACT_SORT, 1, NULL},
    {VG_TOP_KEY_F6, "F6", VG_LD, VG_TOP_ACT_SORT, 1, NULL},
    {'r', "r", VG_LD, VG_TOP_ACT_REVERSE, 0, NULL},
    {'/', "/", VG_LD, VG_TOP_ACT_SEARCH, 0,
     "/       search command, user, PID or container (Enter keeps it, Esc drops it)"},
    {'u', "u", VG_LD, VG_TOP_ACT_FILTER_USER, 0,
     "u       only the selected holder's user (u again: every user)"},
    {'g', "g", VG_LD, VG_TOP_ACT_FILTER_GPU, 0,
     "g       only one GPU's holders (g again: the next GPU, then all)"},
    {'f', "f", VG_LD, VG_TOP_ACT_FILTER_FINDING, 0,
     "f       only the holders of the selected holder's finding (f again: all)"},
    {VG_TOP_KEY_ESC, "Esc", VG_L, VG_TOP_ACT_CLEAR_FILTERS, 0,
     "Esc     clear every filter;  t  tree: a job's ranks under their launcher"},
    {'t', "t", VG_LD, VG_TOP_ACT_TREE, 0, NULL},
    {'k', "k", VG_LD, VG_TOP_ACT_STOP, 0,
     "k       stop the selected holder if it is a sure leftover of an ended job:\n"
     "        the plan of `vramguard clean` first, y confirms, the identity is\n"
     "        re-checked through a pidfd; n, Esc or q leave everything as it is"},
    /* a plan waits for these alone */
    {'y', "y", VG_P, VG_TOP_ACT_CONFIRM, 0, NULL},
    {'Y', "y", VG_P, VG_TOP_ACT_CONFIRM, 0, NULL},
    {'n', "n", VG_P, VG_TOP_ACT_CANCEL, 0, NULL},
    {'N', "n", VG_P, VG_TOP_ACT_CANCEL, 0, NULL},
    {VG_TOP_KEY_ESC, "Esc", VG_P, VG_TOP_ACT_CANCEL, 0, NULL},
    {'q', "q", VG_P, VG_TOP_ACT_CANCEL, 0, NULL},
    {'K', "K", VG_LD, VG_TOP_ACT_STOP_ALL, 0,
     "K       the same for every sure leftover of the selected holder's finding"},
    {'+', "+", VG_LD, VG_TOP_ACT_INTERVAL, 1,
     "+ -     longer / shorter interval;  ? h  help (any key closes it);  q  quit"},
    {'-', "-", VG_LD, VG_TOP_ACT_INTERVAL, -1, NULL},
    {'?', "?", VG_LD, VG_TOP_ACT_HELP, 0, NULL},
    {'h', "h", VG_LD, VG_TOP_ACT_HELP, 0, NULL},
    {VG_TOP_KEY_ANY, "any key", VG_TOP_IN_HELP, VG_TOP_ACT_LIST, 0, NULL},
    {'q', "q", VG_L, VG_TOP_ACT_QUIT, 0, NULL},
    {'m', "m", VG_LD, VG_TOP_ACT_MOUSE, 0,
     "m       mouse on/off (--no-mouse: off at start): a click selects, wheel scrolls"},
};

#undef VG_LD
#undef VG_L
#undef VG_D
#undef VG_P

const struct vg_top_key *vg_top_keys(size_t *n)
{
    *n = sizeof(vg_top_key_table) / sizeof(vg_top_key_table[0]);
    return vg_top_key_table;
}

static bool vg_top_enter(int key)
{
    return key == '\n' || key == '\r' || key == VG_TOP_KEY_ENTER;
}

/* The row binding key in mode, else the mode's VG_TOP_KEY_ANY row; nothing else means
 * nothing (a plan waits for y or n, Esc, q alone). */
static struct vg_top_act vg_top_key_act(enum vg_top_mode mode, int key)
{
    const struct vg_top_key *any = NULL;
    unsigned in = 1u << mode;
    for (size_t i = 0; i < sizeof(vg_top_key_table) / sizeof(vg_top_key_table[0]); i++) {
        const struct vg_top_key *r = &vg_top_key_table[i];
        if (!(r->modes & in))
            continue;
        if (r->key == key)
            return vg_act(r->act, r->arg);
        if (r->key == VG_TOP_KEY_ANY && !any)
            any = r;
    }
    return any ? vg_act(any->act, any->arg) : vg_act(VG_TOP_ACT_NONE, 0);
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

unsigned vg_top_interval_step(unsigned ms, bool longer)
{
    static const unsigned steps[] = {250, 500, 1000, 2000, 5000, 10000, 30000, 60000};
    size_t n = sizeof(steps) / sizeof(steps[0]), i = 0;
    while (i + 1 < n && steps[i] < ms)
        i++;
    if (longer && steps[i] <= ms && i + 1 < n)
        i++;
    else if (!longer && i > 0)
        i--;
    return steps[i];
}
