/*
 * `vramguard top`'s screen as data: a grid of cells (a character, a colour, attributes) that
 * cmd/top.c copies to the terminal with ncurses and the unit tests read as lines of text. Pure:
 * a frame (rules/top.h), its list (render/top_list.h) and what the UI is showing (selection,
 * sort, filter, mode, the plan of a stop action) in, cells out; nothing here reads the system
 * or talks to a terminal.
 *
 * The screen: a header line (host, time, interval, driver, sort, filters); one line per GPU,
 * its memory as a bar split by reason with one character per class (so a monochrome terminal
 * still tells them apart) plus a colour, used/total, utilisation and a sparkline of used
 * memory, then its findings, worst first, as many as fit; a legend; the holder table, whose
 * columns drop by priority to fit the width (PID, memory and command stay); a key line. In
 * place of the table: the selected holder's detail, the help, or the plan of a stop action.
 * Severity is marked by a symbol (!! critical, ! warning, i info) as well as by colour.
 *
 * Ownership: struct vg_top_screen owns its cells (vg_top_screen_release()). The state borrows
 * everything it points to.
 */
#ifndef VG_RENDER_TOP_H
#define VG_RENDER_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "act/kill.h"
#include "act/plan.h"
#include "render/top_list.h"
#include "util/buf.h"

enum vg_top_color {
    VG_TOP_C_DEFAULT,
    VG_TOP_C_RED,
    VG_TOP_C_YELLOW,
    VG_TOP_C_GREEN,
    VG_TOP_C_CYAN,
    VG_TOP_C_MAGENTA,
    VG_TOP_C_BLUE,
    VG_TOP_C_WHITE,
    VG_TOP_C_COUNT
};
enum { VG_TOP_A_BOLD = 1u << 0, VG_TOP_A_REVERSE = 1u << 1, VG_TOP_A_DIM = 1u << 2 };

struct vg_top_cell {
    uint32_t ch; /* a Unicode code point; ' ' when blank */
    unsigned char color;
    unsigned char attr;
};

struct vg_top_screen {
    unsigned w, h;
    struct vg_top_cell *cells; /* h rows of w */
    /* Where vg_top_render() put the holder list, for mouse clicks: list_rows lines from screen
     * line list_y show lines list_first... of the list (list_rows 0: no list on screen). */
    unsigned list_y, list_rows;
    size_t list_first;
};

/* (Re)size to w x h, blank. 0 or -ENOMEM. */
int vg_top_screen_resize(struct vg_top_screen *s, unsigned w, unsigned h);
void vg_top_screen_release(struct vg_top_screen *s);
/* Line y as UTF-8 text, trailing blanks left out, appended to out. */
void vg_top_screen_line(const struct vg_top_screen *s, unsigned y, struct vg_buf *out);

enum vg_top_mode { VG_TOP_MODE_LIST, VG_TOP_MODE_DETAIL, VG_TOP_MODE_HELP, VG_TOP_MODE_PLAN };

/* What the UI shows besides the frame. */
struct vg_top_state {
    const struct vg_top_line *lines; /* the holder list (vg_top_lines()) */
    size_t nlines;
    size_t sel; /* selected line */
    enum vg_top_sort sort;
    bool reverse, tree;
    const struct vg_top_filter *filter;
    enum vg_top_mode mode;
    const char *prompt;  /* an input being typed ("search: tra"); NULL: none */
    const char *message; /* the key line's message; NULL: the key hints */
    unsigned interval_ms;
    bool read_only;
    bool color;   /* for the command: cells carry colours either way, the terminal gets
                   * them only with colour on (marks and characters say the same) */
    bool unicode; /* the terminal takes UTF-8: block characters for the sparkline */
    const char *host;
    time_t now;
    bool sampling;       /* a sample is under way (shown until its frame arrives) */
    uint64_t waiting_ms; /* how long the sample under way has taken so far */
    /* VG_TOP_MODE_PLAN */
    const struct vg_plan *plan;
    const bool *chosen;    /* plan->n: the entries this action is about */
    const char *plan_what; /* "PID 4242", "the leftovers of orphan-holder" */
    unsigned grace_ms;
};

/* Draw the frame (NULL: no sample yet) into s, which has its size. 0 or -ENOMEM. */
int vg_top_render(const struct vg_top_frame *f, const struct vg_top_state *st,
                  struct vg_top_screen *s);

#endif
