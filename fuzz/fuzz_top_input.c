/*
 * Fuzz target: `vramguard top`'s terminal input above ncurses (render/top_keys.h): the key map
 * per mode, the search line's editing and mouse events over the holder list as last drawn,
 * driven as the UI drives them, with the typed text then drawn as the prompt and the filter
 * (render/top.h). ncurses itself decodes the escape sequences into keys; what we add is what
 * a key, a code we do not know or a click anywhere on any screen size means.
 *
 * Input: the screen (w, h), where the list is (first line, rows, first index), then events:
 * 0xFA x y buttons is a mouse event, 0xFB b0 b1 b2 b3 a raw key code (any int, as getch could
 * give), 0xFC i the key of row i of the key table (render/top_keys.h: every key top binds,
 * escape-decoded ones included), 0xF0..0xF9 the decoded keys (Up, Down, PgUp, PgDn, Home,
 * End, Enter, Backspace, F6), any other byte that key. Invariants: the search line stays
 * NUL-terminated, within its buffer and printable; a click selects only a line the list
 * shows; a plan is answered only by y, n, Esc or q, never by a click; help closes on any key;
 * a key the table binds in a mode does what its row says, any other key nothing (or closes
 * the help); every action is a known one; the screen never holds a line wider than itself.
 */
#include <string.h>

#include "fuzz.h"
#include "render/top.h"
#include "render/top_keys.h"
#include "util/buf.h"
#include "util/text.h"

#define SEARCH_CAP 128 /* as cmd/top.c's */

struct model {
    enum vg_top_mode mode;
    bool searching;
    char search[SEARCH_CAP];
    long sel, nlines;
};

static void check_search(const struct model *m)
{
    size_t n = strnlen(m->search, sizeof(m->search));
    FUZZ_CHECK(n < sizeof(m->search));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(m->search[i] >= 32 && m->search[i] < 127);
}

/* What the key table says key means in mode: its row there, else the mode's any-key row,
 * else nothing. */
static struct vg_top_act table_act(enum vg_top_mode mode, int key)
{
    size_t n;
    const struct vg_top_key *k = vg_top_keys(&n);
    struct vg_top_act any = {VG_TOP_ACT_NONE, 0};
    for (size_t i = 0; i < n; i++) {
        if (!(k[i].modes & (1u << mode)))
            continue;
        if (k[i].key == key)
            return (struct vg_top_act){k[i].act, k[i].arg};
        if (k[i].key == VG_TOP_KEY_ANY)
            any = (struct vg_top_act){k[i].act, k[i].arg};
    }
    return any;
}

static void apply(struct model *m, const struct vg_top_screen *scr, const struct vg_top_input *in,
                  struct vg_top_act a)
{
    FUZZ_CHECK(a.kind >= VG_TOP_ACT_NONE && a.kind <= VG_TOP_ACT_MOUSE);
    if (!in->mouse) {
        struct vg_top_act want = table_act(m->mode, in->key);
        FUZZ_CHECK(a.kind == want.kind && a.arg == want.arg);
    }
    if (m->mode == VG_TOP_MODE_PLAN) {
        FUZZ_CHECK(a.kind == VG_TOP_ACT_NONE || a.kind == VG_TOP_ACT_CONFIRM ||
                   a.kind == VG_TOP_ACT_CANCEL);
        FUZZ_CHECK(!in->mouse || a.kind == VG_TOP_ACT_NONE);
    }
    if (m->mode == VG_TOP_MODE_HELP && !in->mouse)
        FUZZ_CHECK(a.kind == VG_TOP_ACT_LIST);
    switch (a.kind) {
    case VG_TOP_ACT_SELECT_AT:
        FUZZ_CHECK(in->mouse && m->mode == VG_TOP_MODE_LIST);
        FUZZ_CHECK(a.arg >= (long)scr->list_first &&
                   a.arg < (long)scr->list_first + (long)scr->list_rows);
        m->sel = a.arg < m->nlines ? a.arg : m->nlines - 1;
        break;
    case VG_TOP_ACT_MOVE:
        FUZZ_CHECK(a.arg >= -VG_TOP_WHEEL_LINES && a.arg <= VG_TOP_WHEEL_LINES && a.arg != 0);
        m->sel += a.arg;
        m->sel = m->sel < 0 ? 0 : m->sel >= m->nlines ? m->nlines - 1 : m->sel;
        break;
    case VG_TOP_ACT_DETAIL:
        m->mode = VG_TOP_MODE_DETAIL;
        break;
    case VG_TOP_ACT_HELP:
        m->mode = VG_TOP_MODE_HELP;
        break;
    case VG_TOP_ACT_LIST:
    case VG_TOP_ACT_CONFIRM:
    case VG_TOP_ACT_CANCEL:
        m->mode = VG_TOP_MODE_LIST;
        break;
    case VG_TOP_ACT_SEARCH:
        m->searching = true;
        break;
    case VG_TOP_ACT_STOP:
    case VG_TOP_ACT_STOP_ALL:
        m->mode = VG_TOP_MODE_PLAN; /* as when a plan could be made */
        break;
    default:
        break;
    }
}

/* Draw the typed text as the prompt and the filter (no frame: the header and key line). */
static void draw(struct vg_top_screen *scr, const struct model *m)
{
    char prompt[SEARCH_CAP + 40];
    snprintf(prompt, sizeof(prompt), "search (Enter keeps, Esc drops): %s", m->search);
    struct vg_top_filter flt = {.text = m->search[0] ? m->search : NULL};
    struct vg_top_state st = {.sort = VG_TOP_SORT_MEM,
                              .filter = &flt,
                              .mode = m->mode == VG_TOP_MODE_PLAN ? VG_TOP_MODE_LIST : m->mode,
                              .prompt = m->searching ? prompt : NULL,
                              .interval_ms = 1000,
                              .host = m->search,
                              .unicode = true};
    unsigned w = scr->w, h = scr->h, list_y = scr->list_y, list_rows = scr->list_rows;
    size_t first = scr->list_first;
    FUZZ_CHECK(vg_top_render(NULL, &st, scr) == 0);
    for (unsigned y = 0; y < scr->h; y++) {
        struct vg_buf b;
        vg_buf_init(&b, 0);
        vg_top_screen_line(scr, y, &b);
        FUZZ_CHECK(!b.err && vg_text_cols(vg_buf_str(&b)) <= scr->w);
        vg_buf_release(&b);
    }
    /* keep the fuzzed list geometry for the clicks that follow */
    scr->w = w, scr->h = h, scr->list_y = list_y, scr->list_rows = list_rows;
    scr->list_first = first;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    struct vg_top_screen scr = {0};
    scr.w = 1 + data[0] % 240u;
    scr.h = 1 + data[1] % 80u;
    scr.list_y = data[2] % (scr.h + 2u);
    scr.list_rows = data[3] % 64u;
    scr.list_first = data[4];
    struct model m = {.mode = VG_TOP_MODE_LIST, .nlines = (long)scr.list_first + scr.list_rows + 1};
    size_t i = 5, events = 0;
    while (i < size) {
        struct vg_top_input in = {0};
        uint8_t b = data[i++];
        if (b == 0xFA) {
            if (size - i < 3)
                break;
            in = (struct vg_top_input){.mouse = true,
                                       .x = (int8_t)data[i],
                                       .y = (int8_t)data[i + 1],
                                       .buttons = data[i + 2]};
            i += 3;
        } else if (b == 0xFB) {
            if (size - i < 4)
                break;
            uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
                         (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24;
            in.key = (int)k;
            i += 4;
        } else if (b == 0xFC) {
            if (size - i < 1)
                break;
            size_t nkeys;
            const struct vg_top_key *keys = vg_top_keys(&nkeys);
            in.key = keys[data[i++] % nkeys].key;
        } else if (b >= 0xF0 && b < 0xFA) {
            in.key = VG_TOP_KEY_UP + (b - 0xF0);
        } else {
            in.key = b;
        }
        if (m.searching && !in.mouse) {
            char before[SEARCH_CAP];
            memcpy(before, m.search, sizeof(before));
            enum vg_top_edit e = vg_top_search_edit(m.search, sizeof(m.search), in.key);
            check_search(&m);
            if (e == VG_TOP_EDIT_DROP)
                FUZZ_CHECK(m.search[0] == '\0');
            if (e == VG_TOP_EDIT_KEEP)
                FUZZ_CHECK(strcmp(before, m.search) == 0);
            m.searching = e == VG_TOP_EDIT_MORE;
        } else {
            apply(&m, &scr, &in, vg_top_input_act(m.mode, &scr, &in));
        }
        if (++events % 32 == 0)
            draw(&scr, &m);
    }
    draw(&scr, &m);
    vg_top_screen_release(&scr);
    return 0;
}
