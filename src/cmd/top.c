/*
 * `vramguard top`: the live view, on ncurses. Two threads and, while a stop runs, a third:
 *
 * - the collector's thread (model/collector.h, as serve's: the sampler's NVML kept open on its
 *   own deadline worker, incremental /proc scans) every interval samples, and top's make
 *   callback measures the suspects' activity, runs the rules and builds a frame (rules/top.h),
 *   which the collector keeps for the UI to take. A hung driver costs it one --nvml-timeout;
 *   it never touches the terminal;
 * - the UI thread (this one) owns the terminal: it waits for keys at most 100 ms at a time,
 *   takes the newest frame when there is one, and draws the screen (render/top.h) when
 *   something changed. It never calls the driver, so keys answer whatever the driver does;
 * - a stop action (k, K) builds the plan of `clean` on the UI thread from the frame shown,
 *   confirmed with y, then act/bgstop.h stops and settles on a thread of its own through
 *   act/settle.h (pidfd, identity re-checked, SIGTERM, grace, SIGKILL, a look again), whose
 *   result comes back as data, worded here as one line (render/settle.h). Quitting while it
 *   runs waits for it to finish and says what it did on stderr.
 *
 * Signals: SIGINT and SIGTERM end it (the handler only sets a flag); ncurses handles SIGWINCH
 * (KEY_RESIZE) and SIGTSTP. The other threads block every signal.
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "act/bgstop.h"
#include "cmd/cmd.h"
#include "model/collector.h"
#include "proc/signal.h"
#include "render/clean.h"
#include "render/settle.h"
#include "rules/reason.h"
#include "render/top.h"
#include "render/top_keys.h"
#include "render/top_view.h"
#include "rules/rules.h"
#include "rules/top.h"
#include "util/clock.h"
#include "util/parse.h"

static const char vg_top_help[] =
    "usage: vramguard top [--interval D] [--sort KEY] [--read-only] [--no-mouse] [options]\n"
    "\n"
    "The live view: per GPU, memory as a bar split by why it is held (expected, context only,\n"
    "outside the visible set, foreign PID, orphan, zombie, unattributed, the driver's\n"
    "reservation), utilisation, temperature, power draw against the limit, fan, a history of\n"
    "used memory and its findings; per holder, PID, user, GPUs, memory, SM %, CPU %, age,\n"
    "host RSS, state, seen by, container, CUDA_VISIBLE_DEVICES, command and its finding.\n"
    "Sort, filter, tree and detail keys; ? lists them. A figure the driver or the board does\n"
    "not give shows as -.\n"
    "\n"
    "k stops the selected holder, K every holder of its finding, only when they are sure\n"
    "leftovers of ended jobs, through the planner and identity checks of `vramguard clean`:\n"
    "the plan is shown first and y confirms. Never stopped: infrastructure, another user's\n"
    "process unless you are root, zombies, processes stuck in the driver.\n"
    "\n"
    "Options:\n";

static const char vg_top_help_tail[] =
    "\n"
    "Keys: arrows, j, Ctrl-N/Ctrl-P, PgUp/PgDn, Home/End select; Enter detail; < > F6 sort;\n"
    "r reverse; / search; u user; g GPU; f finding; Esc clear filters; t tree; k K stop;\n"
    "+ - interval; m mouse on/off (click selects, the wheel scrolls); ? h help; q quit;\n"
    "on a stop's plan y stops, n Esc q leave it.\n"
    "Exit status: 0 quit; 3 /proc could not be opened; 64 bad usage or no terminal;\n"
    "70 internal error.\n"
    "\n";

#define VG_TOP_INTERVAL_MIN_MS 250u
#define VG_TOP_INTERVAL_MAX_MS 60000u

struct vg_top {
    struct vg_global *g;
    bool read_only, color, unicode, mouse;
    struct vg_bgstop_opts stop_opts; /* borrowed by stop while one runs */
    struct vg_bgstop stop;
    struct vg_collector *coll;
    struct vg_top_history hist; /* the collector thread's */
    unsigned interval_ms;
    struct vg_top_view v; /* the UI's */
    struct vg_top_screen scr;
    char host[256];
    struct vg_kill_who who;
    /* the plan shown (VG_TOP_MODE_PLAN) */
    struct vg_plan plan;
    bool *chosen;
    char plan_what[96];
};

enum {
    VG_OPT_SORT = VG_OPT_FIRST_LOCAL,
};
#define VG_TOP_AT(member) VG_OPT_AT(0, struct vg_top, member)

const struct vg_opt vg_top_opts[] = {
    {"interval", 'i', VG_OPT_ARG_REQUIRED, "D", "sample every D (default 1s; + and - change it)", 0,
     NULL,
     VG_OPT_VAL(VG_TOP_AT(interval_ms), .kind = VG_OPT_K_DURATION, .min = VG_TOP_INTERVAL_MIN_MS,
                .max = VG_TOP_INTERVAL_MAX_MS, .takes = "a duration from 250ms to 1m")},
    {"sort", 0, VG_OPT_ARG_REQUIRED, "KEY",
     "pid, user, gpu, mem (default), util, cpu, time, state,\nfinding, command or rss", VG_OPT_SORT,
     NULL,
     VG_OPT_VAL(.kind = VG_OPT_K_CODE,
                .words = "pid|user|gpu|mem|util|cpu|time|state|finding|command|rss")},
    {"read-only", 0, VG_OPT_ARG_NONE, NULL, "no actions: k and K are off", 0, NULL,
     VG_OPT_VAL(VG_TOP_AT(read_only), .kind = VG_OPT_K_SET)},
    {"no-mouse", 0, VG_OPT_ARG_NONE, NULL,
     "leave the mouse to the terminal (text selection);\nm turns top's mouse on and off", 0, NULL,
     VG_OPT_VAL(VG_TOP_AT(mouse), .kind = VG_OPT_K_CLEAR)},
    VG_OPT_TABLE_END,
};

#define VG_TOP_GRACE_MS 10000u
#define VG_TOP_KILL_WAIT_MS 5000u
/* After the stop, how long to look again while the driver catches up. */
#define VG_TOP_SETTLE_MS 2000u

/* The mouse events top asks for: a click selects, the wheel scrolls. The wheel's down notch is
 * button 5 in ncurses 6 (BUTTON5_PRESSED); older ABIs reported it as REPORT_MOUSE_POSITION. */
#ifdef BUTTON5_PRESSED
#define VG_TOP_WHEEL_DOWN_BIT BUTTON5_PRESSED
#else
#define VG_TOP_WHEEL_DOWN_BIT REPORT_MOUSE_POSITION
#endif
#define VG_TOP_MOUSE_EVENTS (BUTTON1_PRESSED | BUTTON4_PRESSED | VG_TOP_WHEEL_DOWN_BIT)

static volatile sig_atomic_t vg_top_quit;

static void vg_top_on_signal(int sig)
{
    (void)sig;
    vg_top_quit = 1;
}

static int vg_top_parse(struct vg_top *t, int argc, char **argv)
{
    struct vg_cmd_parse p = {.g = t->g,
                             .cmd = "top",
                             .help = vg_top_help,
                             .opts = vg_top_opts,
                             .help_tail = vg_top_help_tail,
                             .argc = argc,
                             .argv = argv,
                             .dst = {[0] = t}};
    int ch;
    while ((ch = vg_cmd_next_opt(&p)) >= 0) {
        if (ch == VG_OPT_SORT && (t->v.sort = vg_top_sort_parse(optarg)) == VG_TOP_SORT_COUNT) {
            vg_cmd_error("top",
                         "--sort takes pid, user, gpu, mem, util, cpu, time, state, finding, "
                         "command or rss, not '%s'",
                         optarg);
            return VG_EXIT_USAGE;
        }
    }
    if (ch != VG_CMD_OPT_END)
        return ch == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (vg_cmd_refuse_json(t->g, "top",
                           "top is a screen, not a document: use 'vramguard status --json' or "
                           "'vramguard watch --json'"))
        return VG_EXIT_USAGE;
    if (isatty(STDIN_FILENO) != 1 || isatty(STDOUT_FILENO) != 1) {
        vg_cmd_error("top", "needs a terminal; for pipes use 'vramguard status' or "
                            "'vramguard watch'");
        return VG_EXIT_USAGE;
    }
    return -1;
}

/* ---- the collector's callback ---- */

/* The collector's make: a sample, taken over, diagnosed and made into a frame (rules/top.h),
 * with the clock and page size of this host. */
static int vg_top_make(void *arg, struct vg_snapshot *snap, bool hung, void **out,
                       struct vg_err *err)
{
    struct vg_top_history *hist = arg;
    struct vg_top_build_opts bo = {0};
    long tck = sysconf(_SC_CLK_TCK);
    struct timespec ts;
    if (tck > 0 && clock_gettime(CLOCK_BOOTTIME, &ts) == 0) {
        bo.clk_tck = (unsigned long)tck;
        bo.now_ticks = (uint64_t)ts.tv_sec * (uint64_t)tck +
                       (uint64_t)ts.tv_nsec * (uint64_t)tck / 1000000000u;
    }
    long page = sysconf(_SC_PAGESIZE);
    bo.page_size = page > 0 ? (uint64_t)page : 0;
    struct vg_top_frame *f = NULL;
    int rc = vg_top_frame_diagnose(snap, hung, &bo, hist, &f, err);
    *out = f;
    return rc;
}

static void vg_top_frame_drop(void *f)
{
    vg_top_frame_free(f);
}

/* ---- actions ---- */

/* The stop's thread, done: show what changed at once. */
static void vg_top_stop_done(void *arg)
{
    vg_collector_poke(arg);
}

/* What a finished stop did, as one line (render/settle.h's words); NULL: out of memory. */
static char *vg_top_stop_words(const struct vg_bgstop_result *r)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_render_settle_bgstop(&b, r, VG_TOP_GRACE_MS);
    char *msg = b.err ? strdup("out of memory while stopping") : vg_buf_steal(&b);
    vg_buf_release(&b);
    return msg;
}

static void vg_top_plan_clear(struct vg_top *t)
{
    vg_plan_release(&t->plan);
    free(t->chosen);
    t->chosen = NULL;
}

/* k (pid > 0: that holder) or K (rule: every leftover its finding names): the plan shown. */
static void vg_top_plan_make(struct vg_top *t, pid_t pid, const struct vg_finding *fd)
{
    vg_top_plan_clear(t);
    struct vg_err err = VG_ERR_INIT;
    if (vg_bgstop_plan(t->v.frame->snap, &t->v.frame->fs, pid, fd, vg_kill_who_ctx(&t->who),
                       &t->plan, &t->chosen, &err) != 0) {
        vg_top_view_say(&t->v, "cannot plan: %s", err.msg ? err.msg : "out of memory");
        vg_err_release(&err);
        return;
    }
    if (pid > 0)
        snprintf(t->plan_what, sizeof(t->plan_what), "PID %d", (int)pid);
    else
        snprintf(t->plan_what, sizeof(t->plan_what), "the leftovers of %s", fd->rule);
    t->v.mode = VG_TOP_MODE_PLAN;
}

static void vg_top_stop_key(struct vg_top *t, bool all)
{
    if (t->read_only) {
        vg_top_view_say(&t->v, "read-only (--read-only): %s is off", all ? "K" : "k");
        return;
    }
    const struct vg_top_row *r = vg_top_view_row(&t->v);
    if (!r) {
        vg_top_view_say(&t->v, "select a process first (a launcher's line is not one)");
        return;
    }
    if (vg_bgstop_busy(&t->stop)) {
        vg_top_view_say(&t->v, "a stop is still under way");
    } else if (!t->who.own_pidns) {
        vg_top_view_say(&t->v, "stopping needs the procfs of vramguard's own PID namespace (--proc "
                               "numbers processes differently)");
    } else {
        if (!all)
            vg_top_plan_make(t, r->pid, NULL);
        else if (r->has_finding)
            vg_top_plan_make(t, 0, &t->v.frame->fs.v[r->finding]);
        else
            vg_top_view_say(&t->v, "PID %d has no finding: K stops the leftovers of one",
                            (int)r->pid);
    }
}

/* y on the plan: hand it to the stop's thread. */
static void vg_top_confirm(struct vg_top *t)
{
    size_t n = vg_bgstop_count(&t->plan, t->chosen);
    t->v.mode = VG_TOP_MODE_LIST;
    if (!n) {
        vg_top_view_say(&t->v, "nothing to stop");
        vg_top_plan_clear(t);
        return;
    }
    struct vg_err err = VG_ERR_INIT;
    bool *chosen = t->chosen;
    t->chosen = NULL;
    if (vg_bgstop_start(&t->stop, t->v.frame->snap, &t->plan, chosen, &err) != 0) {
        vg_top_view_say(&t->v, "%s", vg_err_msg(&err));
        vg_err_release(&err);
        return;
    }
    vg_top_view_say(&t->v,
                    "stopping %zu process%s: SIGTERM sent, SIGKILL after %us if still there...", n,
                    n == 1 ? "" : "es", VG_TOP_GRACE_MS / 1000);
}

/* Carry out what a key or a click means (render/top_keys.h): the view's own actions there, the
 * ones that reach the host or the terminal here. Returns false to quit. */
static bool vg_top_act(struct vg_top *t, struct vg_top_act a)
{
    if (vg_top_view_act(&t->v, a, LINES > 12 ? LINES / 2 : 1))
        return true;
    switch (a.kind) {
    case VG_TOP_ACT_QUIT:
        return false;
    case VG_TOP_ACT_INTERVAL:
        t->interval_ms = vg_top_interval_step(t->interval_ms, a.arg > 0);
        vg_collector_set_interval(t->coll, t->interval_ms);
        break;
    case VG_TOP_ACT_STOP:
    case VG_TOP_ACT_STOP_ALL:
        vg_top_stop_key(t, a.kind == VG_TOP_ACT_STOP_ALL);
        break;
    case VG_TOP_ACT_CONFIRM:
        vg_top_confirm(t);
        break;
    case VG_TOP_ACT_CANCEL:
        t->v.mode = VG_TOP_MODE_LIST;
        vg_top_plan_clear(t);
        vg_top_view_say(&t->v, "nothing stopped");
        break;
    case VG_TOP_ACT_MOUSE:
        t->mouse = !t->mouse;
        mousemask(t->mouse ? VG_TOP_MOUSE_EVENTS : 0, NULL);
        vg_top_view_say(&t->v, t->mouse ? "mouse on: click selects, the wheel scrolls (m: off)"
                                        : "mouse off: the terminal selects text again (m: on)");
        break;
    default:
        break;
    }
    return true;
}

/* ncurses' key codes as top_keys.h's; a byte is itself. */
static int vg_top_keycode(int ch)
{
    static const int map[][2] = {
        {KEY_UP, VG_TOP_KEY_UP},       {KEY_DOWN, VG_TOP_KEY_DOWN},
        {KEY_PPAGE, VG_TOP_KEY_PGUP},  {KEY_NPAGE, VG_TOP_KEY_PGDN},
        {KEY_HOME, VG_TOP_KEY_HOME},   {KEY_END, VG_TOP_KEY_END},
        {KEY_ENTER, VG_TOP_KEY_ENTER}, {KEY_BACKSPACE, VG_TOP_KEY_BACKSPACE},
        {KEY_F(6), VG_TOP_KEY_F6},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i][0] == ch)
            return map[i][1];
    return ch >= 0 && ch < 256 ? ch : -1;
}

/* One key (or KEY_MOUSE) from getch. Returns false to quit. */
static bool vg_top_key(struct vg_top *t, int ch)
{
    struct vg_top_input in = {.key = vg_top_keycode(ch)};
    if (ch == KEY_MOUSE) {
        MEVENT ev;
        if (getmouse(&ev) != OK)
            return true;
        in = (struct vg_top_input){.mouse = true, .x = ev.x, .y = ev.y};
        if (ev.bstate & (BUTTON1_CLICKED | BUTTON1_PRESSED))
            in.buttons |= VG_TOP_MOUSE_CLICK;
        if (ev.bstate & BUTTON4_PRESSED)
            in.buttons |= VG_TOP_MOUSE_WHEEL_UP;
        if (ev.bstate & VG_TOP_WHEEL_DOWN_BIT)
            in.buttons |= VG_TOP_MOUSE_WHEEL_DOWN;
    } else if (vg_top_view_search_key(&t->v, in.key)) {
        return true;
    }
    return vg_top_act(t, vg_top_input_act(t->v.mode, &t->scr, &in));
}

/* ---- the terminal ---- */

static const short vg_top_curses_colors[VG_TOP_C_COUNT] = {
    [VG_TOP_C_DEFAULT] = -1,          [VG_TOP_C_RED] = COLOR_RED,
    [VG_TOP_C_YELLOW] = COLOR_YELLOW, [VG_TOP_C_GREEN] = COLOR_GREEN,
    [VG_TOP_C_CYAN] = COLOR_CYAN,     [VG_TOP_C_MAGENTA] = COLOR_MAGENTA,
    [VG_TOP_C_BLUE] = COLOR_BLUE,     [VG_TOP_C_WHITE] = COLOR_WHITE,
};

static void vg_top_curses_init(struct vg_top *t)
{
    initscr();
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    timeout(100);
    mouseinterval(0); /* a press selects at once: no wait to tell a click from a drag */
    if (t->mouse && mousemask(VG_TOP_MOUSE_EVENTS, NULL) == 0)
        t->mouse = false; /* the terminal reports no mouse */
    t->color = t->color && has_colors();
    if (t->color) {
        start_color();
        use_default_colors();
        for (short i = 1; i < VG_TOP_C_COUNT; i++)
            init_pair(i, vg_top_curses_colors[i], -1);
    }
}

static void vg_top_draw_cell(const struct vg_top *t, unsigned y, unsigned x,
                             const struct vg_top_cell *c)
{
    attr_t a = 0;
    if (c->attr & VG_TOP_A_BOLD)
        a |= A_BOLD;
    if (c->attr & VG_TOP_A_REVERSE)
        a |= A_REVERSE;
    if (c->attr & VG_TOP_A_DIM)
        a |= A_DIM;
    short pair = t->color ? (short)c->color : 0;
    wchar_t w[2] = {(wchar_t)(c->ch < 0x80 || t->unicode ? c->ch : '?'), 0};
    cchar_t cc;
    if (setcchar(&cc, w, a, pair, NULL) == OK)
        mvadd_wch((int)y, (int)x, &cc);
}

static void vg_top_draw(struct vg_top *t)
{
    struct vg_collector_health hl;
    vg_collector_health(t->coll, &hl);
    struct vg_top_state st = {
        .interval_ms = t->interval_ms,
        .read_only = t->read_only,
        .color = t->color,
        .unicode = t->unicode,
        .host = t->host,
        .now = time(NULL),
        .sampling = hl.busy,
        .waiting_ms = hl.busy_ms,
        .plan = &t->plan,
        .chosen = t->chosen,
        .plan_what = t->plan_what,
        .grace_ms = VG_TOP_GRACE_MS,
    };
    vg_top_view_state(&t->v, &st);
    t->scr.w = COLS > 0 ? (unsigned)COLS : 0;
    t->scr.h = LINES > 0 ? (unsigned)LINES : 0;
    if (vg_top_render(t->v.frame, &st, &t->scr) != 0)
        return;
    erase();
    for (unsigned y = 0; y < t->scr.h; y++)
        for (unsigned x = 0; x < t->scr.w; x++) {
            /* the bottom-right cell: writing it scrolls some terminals */
            if (y + 1 == t->scr.h && x + 1 == t->scr.w)
                continue;
            vg_top_draw_cell(t, y, x, &t->scr.cells[(size_t)y * t->scr.w + x]);
        }
    refresh();
}

/* Take what the other threads left: the newest frame, the sampler's error, a stop's outcome.
 * Returns true when something changed. */
static bool vg_top_take(struct vg_top *t)
{
    char *err = NULL;
    struct vg_top_frame *f = vg_collector_take(t->coll, &err);
    struct vg_bgstop_result *done = vg_bgstop_take(&t->stop);
    char *act = done ? vg_top_stop_words(done) : NULL;
    vg_bgstop_result_free(done);
    if (err)
        vg_top_view_say(&t->v, "sampling failed: %s", err);
    if (act)
        vg_top_view_say(&t->v, "%s", act);
    free(err);
    free(act);
    /* the plan on screen keeps pointing into its own copies, not the frame */
    vg_top_view_take(&t->v, f);
    return f || err || act;
}

static void vg_top_loop(struct vg_top *t)
{
    bool dirty = true;
    uint64_t drawn = 0;
    while (!vg_top_quit) {
        if (vg_top_take(t))
            dirty = true;
        uint64_t now = vg_clock_ms();
        if (dirty || now - drawn >= 1000) {
            vg_top_view_relist(&t->v);
            vg_top_draw(t);
            drawn = now;
            dirty = false;
        }
        int ch = getch();
        if (ch == ERR)
            continue;
        dirty = true;
        if (ch == KEY_RESIZE)
            continue;
        if (!vg_top_key(t, ch))
            break;
    }
}

static void vg_top_release(struct vg_top *t)
{
    vg_top_view_release(&t->v);
    vg_top_plan_clear(t);
    vg_top_screen_release(&t->scr);
    vg_bgstop_release(&t->stop); /* joined: nothing reads the ancestors and root_fd now */
    vg_kill_who_release(&t->who);
}

/* Start the collector, its first sample on its thread so the screen comes up at once. */
static int vg_top_start(struct vg_top *t)
{
    struct vg_collector_opts co = {
        .sampler = {.nvml_path = t->g->nvml_path,
                    .nvml_timeout_ms = t->g->nvml_timeout_ms,
                    .proc_root = t->g->proc_root,
                    .dev_dir = t->g->dev_dir,
                    .sensors = true,
                    .scan = t->g->scan},
        .make = vg_top_make,
        .drop = vg_top_frame_drop,
        .arg = &t->hist,
        .interval_ms = t->interval_ms,
        .first_in_thread = true,
    };
    struct vg_err err = VG_ERR_INIT;
    if (vg_collector_new(&co, &t->coll, &err) != 0 || vg_collector_start(t->coll, &err) != 0) {
        return vg_cmd_fail("top", &err, -1, "cannot start the sampler");
    }
    t->stop_opts = (struct vg_bgstop_opts){
        .nvml_path = t->g->nvml_path,
        .nvml_timeout_ms = t->g->nvml_timeout_ms,
        .proc_root = t->g->proc_root,
        .dev_dir = t->g->dev_dir,
        .scan = t->g->scan,
        .proc_root_fd = t->who.root_fd,
        .who = vg_kill_who_ctx(&t->who),
        .grace_ms = VG_TOP_GRACE_MS,
        .kill_wait_ms = VG_TOP_KILL_WAIT_MS,
        .settle_ms = VG_TOP_SETTLE_MS,
        .done = vg_top_stop_done,
        .done_arg = t->coll,
    };
    if (vg_bgstop_init(&t->stop, &t->stop_opts) != 0) {
        vg_cmd_error("top", "cannot set up its threads");
        return -1;
    }
    return 0;
}

int vg_cmd_top(struct vg_global *g, int argc, char **argv)
{
    static struct vg_top t; /* static: a stop's thread may outlive this call's frame */
    memset(&t, 0, sizeof(t));
    t.g = g;
    vg_top_view_init(&t.v);
    t.mouse = true;
    t.who.root_fd = -1;
    t.interval_ms = 1000;
    vg_plan_init(&t.plan);
    int status = vg_top_parse(&t, argc, argv);
    if (status >= 0)
        return status;
    if (vg_cmd_who_open(g, "top", &t.who) != 0)
        return VG_EXIT_UNKNOWN;
    if (gethostname(t.host, sizeof(t.host) - 1) != 0)
        t.host[0] = '\0';
    t.color = vg_cmd_use_color(g);
    setlocale(LC_CTYPE, "");
    t.unicode = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    struct sigaction sa = {.sa_handler = vg_top_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (vg_top_start(&t) != 0)
        return VG_EXIT_SOFTWARE;
    vg_top_curses_init(&t);
    vg_top_loop(&t);
    endwin();
    /* A stop under way is finished, not abandoned: its SIGKILL round is sent and what it did is
     * said here, since the screen is gone. */
    if (vg_bgstop_busy(&t.stop))
        vg_cmd_error("top", "finishing the stop under way (SIGKILL after %us if still there)...",
                     VG_TOP_GRACE_MS / 1000);
    vg_bgstop_join(&t.stop);
    struct vg_bgstop_result *done = vg_bgstop_take(&t.stop);
    char *msg = done ? vg_top_stop_words(done) : NULL;
    if (msg)
        vg_cmd_error("top", "%s", msg);
    free(msg);
    vg_bgstop_result_free(done);
    /* one stuck in a read the sampler cannot bound is left to the process's exit, with the
     * history it writes */
    if (vg_collector_free_within(t.coll, 1000))
        vg_top_history_release(&t.hist);
    vg_top_release(&t);
    return VG_EXIT_OK;
}
