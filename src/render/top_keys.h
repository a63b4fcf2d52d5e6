/*
 * `vramguard top`'s input, as data: which action a key or a mouse event means in the mode the
 * UI is in, and the editing of the search line. Pure (no terminal, no ncurses): cmd/top.c turns
 * what getch() returns into a struct vg_top_input and carries out the action; the unit tests
 * and fuzz/fuzz_top_input.c drive the same functions with arbitrary input.
 *
 * The keys are one table (vg_top_keys(), as htop's Action.c): one row per key and the modes it
 * works in, the action it means and the help pane's text. The key handling, the help pane
 * (render/top.c) and the fuzz target's key map all read it, so a key cannot do one thing and
 * be described as another, or be missing from the help.
 *
 * Keys: a byte (ASCII, control characters included) is itself; the keys a terminal sends as
 * escape sequences, which ncurses decodes, are the VG_TOP_KEY_* codes above 0xFF. Any other
 * code means nothing (VG_TOP_ACT_NONE).
 *
 * Ownership: nothing is allocated; the search line is the caller's buffer.
 */
#ifndef VG_RENDER_TOP_KEYS_H
#define VG_RENDER_TOP_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "render/top.h"

enum {
    VG_TOP_KEY_ESC = 27,
    VG_TOP_KEY_UP = 0x100,
    VG_TOP_KEY_DOWN,
    VG_TOP_KEY_PGUP,
    VG_TOP_KEY_PGDN,
    VG_TOP_KEY_HOME,
    VG_TOP_KEY_END,
    VG_TOP_KEY_ENTER,     /* also '\r' and '\n' */
    VG_TOP_KEY_BACKSPACE, /* also 127 and 8 */
    VG_TOP_KEY_F6,
    VG_TOP_KEY_MAX
};

/* A mouse event: where (cell) and what. */
enum {
    VG_TOP_MOUSE_CLICK = 1u << 0,
    VG_TOP_MOUSE_WHEEL_UP = 1u << 1,
    VG_TOP_MOUSE_WHEEL_DOWN = 1u << 2
};

struct vg_top_input {
    bool mouse; /* a mouse event (x, y, buttons), else a key */
    int key;
    int x, y;
    unsigned buttons;
};

enum vg_top_act_kind {
    VG_TOP_ACT_NONE,
    VG_TOP_ACT_QUIT,
    VG_TOP_ACT_MOVE, /* arg lines down (negative: up) */
    VG_TOP_ACT_PAGE, /* arg pages down (negative: up) */
    VG_TOP_ACT_FIRST,
    VG_TOP_ACT_LAST,
    VG_TOP_ACT_SELECT_AT, /* arg: the line index clicked */
    VG_TOP_ACT_DETAIL,
    VG_TOP_ACT_HELP,
    VG_TOP_ACT_LIST, /* close the pane shown: back to the list */
    VG_TOP_ACT_SORT, /* arg +1 next column, -1 previous */
    VG_TOP_ACT_REVERSE,
    VG_TOP_ACT_TREE,
    VG_TOP_ACT_SEARCH,
    VG_TOP_ACT_FILTER_USER,
    VG_TOP_ACT_FILTER_FINDING,
    VG_TOP_ACT_FILTER_GPU,
    VG_TOP_ACT_CLEAR_FILTERS,
    VG_TOP_ACT_INTERVAL, /* arg +1 longer, -1 shorter */
    VG_TOP_ACT_STOP,     /* k */
    VG_TOP_ACT_STOP_ALL, /* K */
    VG_TOP_ACT_CONFIRM,  /* y on a plan */
    VG_TOP_ACT_CANCEL,   /* n, Esc, q on a plan */
    VG_TOP_ACT_MOUSE,    /* m: mouse on or off */
};

struct vg_top_act {
    enum vg_top_act_kind kind;
    long arg;
};

/* The modes a row of the key table works in. */
enum {
    VG_TOP_IN_LIST = 1u << VG_TOP_MODE_LIST,
    VG_TOP_IN_DETAIL = 1u << VG_TOP_MODE_DETAIL,
    VG_TOP_IN_HELP = 1u << VG_TOP_MODE_HELP,
    VG_TOP_IN_PLAN = 1u << VG_TOP_MODE_PLAN,
};

/* A row's key that stands for every key no other row of that mode binds. */
#define VG_TOP_KEY_ANY (-1)

/* One row of the key table. Rows come in the order the help pane lists them: a row with help
 * opens one or more of its lines ('\n' between them), a row without is told by a line above
 * (several keys share one: "< > F6  sort by ..."). A key is bound once per mode. */
struct vg_top_key {
    int key;          /* a byte, a VG_TOP_KEY_* code or VG_TOP_KEY_ANY */
    const char *name; /* as the help writes it: "Up", "Ctrl-N", "j", "any key" */
    unsigned modes;   /* VG_TOP_IN_* */
    enum vg_top_act_kind act;
    long arg;
    const char *help; /* NULL: a line above tells it */
};

/* The key table, *n rows; static. */
const struct vg_top_key *vg_top_keys(size_t *n);

/* Lines the wheel moves the selection per notch. */
#define VG_TOP_WHEEL_LINES 3

/* What in (a key or a mouse event) means in mode, on the screen last drawn (s: where the holder
 * list is, for a click; NULL: clicks mean nothing). Not for the search line (see below). */
struct vg_top_act vg_top_input_act(enum vg_top_mode mode, const struct vg_top_screen *s,
                                   const struct vg_top_input *in);

/* The search line while typing it: key edits buf (cap bytes, always NUL-terminated; printable
 * ASCII only, what does not fit is refused). Returns what the key did. */
enum vg_top_edit {
    VG_TOP_EDIT_MORE, /* still typing (the filter follows the text live) */
    VG_TOP_EDIT_KEEP, /* Enter: done, the text stays as the filter */
    VG_TOP_EDIT_DROP, /* Esc: done, the text is dropped */
};
enum vg_top_edit vg_top_search_edit(char *buf, size_t cap, int key);

/* The sampling interval + (longer) or - (shorter) gives from ms: the next step of 250ms, 500ms,
 * 1s, 2s, 5s, 10s, 30s, 1m, or the nearest step for an interval between two (--interval 3s:
 * + 5s, - 2s); the ends stay where they are. */
unsigned vg_top_interval_step(unsigned ms, bool longer);

#endif
