/*
 * `vramguard top`'s screen: a frame and the UI's state -> a grid of cells (render/top.h). Every
 * piece of outside text (commands, user names, the driver's strings, findings) goes through
 * vg_text_escape() before it reaches a cell, as in every other renderer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/clean.h"
#include "render/render.h"
#include "render/top.h"
#include "render/top_keys.h"
#include "util/parse.h"
#include "util/utf8.h"

int vg_top_screen_resize(struct vg_top_screen *s, unsigned w, unsigned h)
{
    size_t n = (size_t)w * h;
    struct vg_top_cell *c = realloc(s->cells, (n ? n : 1) * sizeof(*c));
    if (!c)
        return -ENOMEM;
    s->cells = c;
    s->w = w;
    s->h = h;
    for (size_t i = 0; i < n; i++)
        c[i] = (struct vg_top_cell){' ', VG_TOP_C_DEFAULT, 0};
    return 0;
}

void vg_top_screen_release(struct vg_top_screen *s)
{
    free(s->cells);
    s->cells = NULL;
    s->w = s->h = 0;
}

static void vg_utf8_put(struct vg_buf *out, uint32_t cp)
{
    if (cp < 0x80) {
        vg_buf_addc(out, (char)cp);
    } else if (cp < 0x800) {
        vg_buf_addc(out, (char)(0xc0 | (cp >> 6)));
        vg_buf_addc(out, (char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        vg_buf_addc(out, (char)(0xe0 | (cp >> 12)));
        vg_buf_addc(out, (char)(0x80 | ((cp >> 6) & 0x3f)));
        vg_buf_addc(out, (char)(0x80 | (cp & 0x3f)));
    } else {
        vg_buf_addc(out, (char)(0xf0 | (cp >> 18)));
        vg_buf_addc(out, (char)(0x80 | ((cp >> 12) & 0x3f)));
        vg_buf_addc(out, (char)(0x80 | ((cp >> 6) & 0x3f)));
        vg_buf_addc(out, (char)(0x80 | (cp & 0x3f)));
    }
}

void vg_top_screen_line(const struct vg_top_screen *s, unsigned y, struct vg_buf *out)
{
    if (y >= s->h)
        return;
    const struct vg_top_cell *row = &s->cells[(size_t)y * s->w];
    unsigned end = s->w;
    while (end > 0 && row[end - 1].ch == ' ')
        end--;
    for (unsigned x = 0; x < end; x++)
        vg_utf8_put(out, row[x].ch);
}

/* ---- drawing ---- */

struct vg_pen {
    struct vg_top_screen *s;
    unsigned x, y;
    unsigned right; /* first column not to write */
    unsigned char color, attr;
};

static void vg_pen_at(struct vg_pen *p, unsigned x, unsigned y)
{
    p->x = x;
    p->y = y;
    p->right = p->s->w;
    p->color = VG_TOP_C_DEFAULT;
    p->attr = 0;
}

static void vg_put(struct vg_pen *p, uint32_t cp)
{
    if (p->y < p->s->h && p->x < p->right && p->x < p->s->w)
        p->s->cells[(size_t)p->y * p->s->w + p->x] = (struct vg_top_cell){cp, p->color, p->attr};
    p->x++;
}

/* Our own (trusted, valid UTF-8) text. */
static void vg_puts(struct vg_pen *p, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = vg_utf8_len(u + i, n - i);
        uint32_t cp = u[i];
        if (l == 2)
            cp = (uint32_t)(u[i] & 0x1f) << 6 | (u[i + 1] & 0x3f);
        else if (l == 3)
            cp = (uint32_t)(u[i] & 0x0f) << 12 | (uint32_t)(u[i + 1] & 0x3f) << 6 |
                 (u[i + 2] & 0x3f);
        else if (l == 4)
            cp = (uint32_t)(u[i] & 0x07) << 18 | (uint32_t)(u[i + 1] & 0x3f) << 12 |
                 (uint32_t)(u[i + 2] & 0x3f) << 6 | (u[i + 3] & 0x3f);
        vg_put(p, l ? cp : '?');
        i += l ? l : 1;
    }
}

static void vg_putf(struct vg_pen *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vg_putf(struct vg_pen *p, const char *fmt, ...)
{
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof(b), fmt, ap);
    va_end(ap);
    if (n >= 0)
        vg_puts(p, b); /* cut at 511 bytes when longer: a screen line is shorter */
}

/* Outside text, escaped, cut to max columns (0: to the pen's right edge). */
static void vg_put_text(struct vg_pen *p, const char *s, unsigned max)
{
    if (!s)
        return;
    unsigned room = p->right > p->x ? p->right - p->x : 0;
    if (!max || max > room)
        max = room;
    if (!max)
        return;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_text_escape(&b, s, strlen(s), max, NULL);
    if (!b.err)
        vg_puts(p, vg_buf_str(&b));
    vg_buf_release(&b);
}

static void vg_pad_to(struct vg_pen *p, unsigned x)
{
    while (p->x < x)
        vg_put(p, ' ');
}

/* Fill the rest of the line with blanks in the pen's colour and attributes. */
static void vg_fill(struct vg_pen *p)
{
    vg_pad_to(p, p->s->w);
}

/* Write text from the pen on, wrapping at word boundaries to the screen's width with indent
 * columns on the continuation lines; stops at line ymax. Returns the line after the last. */
static unsigned vg_wrap(struct vg_pen *p, const char *text, unsigned indent, unsigned ymax)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_text_escape(&b, text ? text : "", text ? strlen(text) : 0, 0, NULL);
    const char *s = b.err ? "" : vg_buf_str(&b);
    unsigned w = p->s->w;
    while (*s && p->y < ymax) {
        size_t room = w > p->x ? w - p->x : 0, len = strlen(s), cut = len;
        if (vg_text_cols(s) > room) {
            /* the last blank within room columns (bytes approximate columns: escaped text is
             * ASCII but for valid UTF-8, which only makes the line shorter) */
            cut = room;
            while (cut > 0 && s[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = room ? room : 1;
        }
        char save = s[cut];
        ((char *)s)[cut] = '\0';
        vg_puts(p, s);
        ((char *)s)[cut] = save;
        s += cut;
        while (*s == ' ')
            s++;
        if (*s) {
            p->y++;
            p->x = indent;
        }
    }
    vg_buf_release(&b);
    return p->y + 1;
}

/* ---- words ---- */

static unsigned char vg_sev_color(enum vg_severity s)
{
    return s == VG_SEV_CRITICAL  ? VG_TOP_C_RED
           : s == VG_SEV_WARNING ? VG_TOP_C_YELLOW
                                 : VG_TOP_C_CYAN;
}

static const char *vg_sev_mark(enum vg_severity s)
{
    return s == VG_SEV_CRITICAL ? "!!" : s == VG_SEV_WARNING ? "! " : "i ";
}

/* "20.0G", "300M", "1.5T", "640K" (a small process's RSS) */
static void vg_top_size(uint64_t b, char *out, size_t n)
{
    double g = (double)b / (double)(1ull << 30);
    if (b < (1ull << 20))
        snprintf(out, n, "%" PRIu64 "K", b >> 10);
    else if (b < (1ull << 30))
        snprintf(out, n, "%" PRIu64 "M", b >> 20);
    else if (g < 100)
        snprintf(out, n, "%.1fG", g);
    else if (g < 10000)
        snprintf(out, n, "%.0fG", g);
    else
        snprintf(out, n, "%.1fT", g / 1024);
}

static void vg_top_age(uint64_t ms, char *out, size_t n)
{
    uint64_t s = ms / 1000;
    if (s < 60)
        snprintf(out, n, "%" PRIu64 "s", s);
    else if (s < 3600)
        snprintf(out, n, "%" PRIu64 "m%02" PRIu64, s / 60, s % 60);
    else if (s < 86400)
        snprintf(out, n, "%" PRIu64 "h%02" PRIu64, s / 3600, s / 60 % 60);
    else
        snprintf(out, n, "%" PRIu64 "d%02" PRIu64, s / 86400, s / 3600 % 24);
}

/* The classes of a bar: one character and a colour each, reasons first, then reserved, free. */
struct vg_bar_class {
    char ch;
    unsigned char color;
    const char *name;
};
static const struct vg_bar_class vg_bar_classes[VG_REASON_COUNT] = {
    [VG_REASON_OUTSIDE] = {'X', VG_TOP_C_MAGENTA, "outside visible"},
    [VG_REASON_ORPHAN] = {'O', VG_TOP_C_RED, "orphan"},
    [VG_REASON_ZOMBIE] = {'Z', VG_TOP_C_RED, "zombie"},
    [VG_REASON_FOREIGN] = {'F', VG_TOP_C_BLUE, "foreign PID"},
    [VG_REASON_UNATTRIBUTED] = {'?', VG_TOP_C_YELLOW, "unattributed"},
    [VG_REASON_CONTEXT] = {'c', VG_TOP_C_CYAN, "context only"},
    [VG_REASON_EXPECTED] = {'#', VG_TOP_C_GREEN, "expected"},
};
/* Drawn in this order, left to right: the expected memory first, then what is wrong. */
static const enum vg_reason vg_bar_order[VG_REASON_COUNT] = {
    VG_REASON_EXPECTED, VG_REASON_CONTEXT, VG_REASON_OUTSIDE,      VG_REASON_FOREIGN,
    VG_REASON_ORPHAN,   VG_REASON_ZOMBIE,  VG_REASON_UNATTRIBUTED,
};

/* ---- the GPU part ---- */

static void vg_top_bar(struct vg_pen *p, const struct vg_top_gpu *tg, unsigned width)
{
    const struct vg_gpu *g = tg->g;
    uint64_t total = g->mem_total ? g->mem_total : 1;
    unsigned done = 0;
    uint64_t acc = 0;
    vg_put(p, '[');
    for (size_t i = 0; i <= VG_REASON_COUNT; i++) {
        bool res = i == VG_REASON_COUNT;
        uint64_t b = res ? (tg->reserved_known ? tg->reserved : 0) : tg->bytes[vg_bar_order[i]];
        if (!b)
            continue;
        acc += b;
        /* cells up to the cumulative share, at least one for any class present */
        unsigned upto = (unsigned)((double)acc / (double)total * width + 0.5);
        if (upto <= done)
            upto = done + 1;
        if (upto > width)
            upto = width;
        p->color = res ? VG_TOP_C_DEFAULT : vg_bar_classes[vg_bar_order[i]].color;
        p->attr = res ? VG_TOP_A_DIM : VG_TOP_A_BOLD;
        for (; done < upto; done++)
            vg_put(p, res ? 'r' : (uint32_t)vg_bar_classes[vg_bar_order[i]].ch);
    }
    p->color = VG_TOP_C_DEFAULT;
    p->attr = VG_TOP_A_DIM;
    for (; done < width; done++)
        vg_put(p, '.');
    p->attr = 0;
    vg_put(p, ']');
}

static void vg_top_spark(struct vg_pen *p, const struct vg_top_gpu *tg, unsigned width,
                         bool unicode)
{
    static const char ascii[] = "_.-=*#";
    size_t from = tg->nhist > width ? tg->nhist - width : 0;
    p->color = VG_TOP_C_CYAN;
    for (size_t i = from; i < tg->nhist; i++) {
        unsigned v = tg->hist[i];
        if (v == VG_TOP_HIST_UNKNOWN)
            vg_put(p, '?');
        else if (unicode)
            vg_put(p, 0x2581u + (v >= 100 ? 7u : v * 8u / 100u));
        else
            vg_put(p, (uint32_t)ascii[v >= 100 ? 5 : v * 6 / 100]);
    }
    p->color = VG_TOP_C_DEFAULT;
}

/* The sensors: " 63C  245/700W fan 41%" (wide, VG_TOP_SENSORS_W columns) or " 63C 245/700W
 * f41%" (narrow, VG_TOP_SENSORS_NARROW_W); an unknown one is "-" (the driver lacks the call or
 * the board the sensor: a fanless GPU has no fan speed). 85C and up is red. */
#define VG_TOP_SENSORS_W 24u
#define VG_TOP_SENSORS_NARROW_W 18u
static void vg_top_sensors(struct vg_pen *p, const struct vg_gpu *g, bool wide)
{
    char t[16] = "-", pw[24] = "-", fan[16] = "-";
    if (g->known & VG_GPU_K_TEMP)
        snprintf(t, sizeof(t), "%uC", g->temp_c);
    unsigned w = (g->power_mw + 500u) / 1000u, lim = (g->power_limit_mw + 500u) / 1000u;
    if ((g->known & VG_GPU_K_POWER) && (g->known & VG_GPU_K_POWER_LIMIT))
        snprintf(pw, sizeof(pw), "%u/%uW", w, lim);
    else if (g->known & VG_GPU_K_POWER)
        snprintf(pw, sizeof(pw), "%uW", w);
    else if (g->known & VG_GPU_K_POWER_LIMIT)
        snprintf(pw, sizeof(pw), "-/%uW", lim);
    if (g->known & VG_GPU_K_FAN)
        snprintf(fan, sizeof(fan), "%u%%", g->fan_pct);
    if ((g->known & VG_GPU_K_TEMP) && g->temp_c >= 85)
        p->color = VG_TOP_C_RED;
    vg_putf(p, wide ? " %4s" : " %3s", t);
    p->color = VG_TOP_C_DEFAULT;
    if (wide)
        vg_putf(p, " %9s fan %-4s", pw, fan);
    else
        vg_putf(p, " %8s f%-3s", pw, fan);
}

/* "0 NVIDIA A100-SXM4-80GB [####...] 28.3G/80.0G  37%  63C  245/700W fan 41% ▁▂▃" or the
 * GPU's trouble. */
static void vg_top_gpu_line(struct vg_pen *p, const struct vg_top_gpu *tg,
                            const struct vg_top_state *st, bool sensors)
{
    const struct vg_gpu *g = tg->g;
    unsigned w = p->s->w, name_w = w >= 120 ? 22 : 12, spark_w = w >= 120 ? 24 : w >= 100 ? 8 : 4;
    bool wide = w >= 120;
    p->attr = VG_TOP_A_BOLD;
    vg_putf(p, "%2u ", g->index);
    p->attr = 0;
    const char *name = (g->known & VG_GPU_K_NAME) ? g->name : "n/a";
    if (strncmp(name, "NVIDIA ", 7) == 0 && name_w < 20)
        name += 7;
    vg_put_text(p, name, name_w);
    vg_pad_to(p, 3 + name_w + 1);
    if (g->lost || g->hung) {
        p->color = VG_TOP_C_RED;
        p->attr = VG_TOP_A_BOLD;
        vg_puts(p, g->lost ? "LOST: the GPU answered \"GPU is lost\" (dmesg: Xid 79)"
                           : "HUNG: the driver did not answer for it; figures unknown");
        return;
    }
    unsigned sensors_w = !sensors ? 0 : wide ? VG_TOP_SENSORS_W : VG_TOP_SENSORS_NARROW_W;
    int fixed = 1 + 1 + 1 + 11 + 1 + 4 + (int)sensors_w + 1 + (int)spark_w;
    int bar_w = (int)w - (int)p->x - fixed;
    if (tg->reasons_known && bar_w >= 8)
        vg_top_bar(p, tg, (unsigned)bar_w);
    else if (bar_w >= 8)
        vg_putf(p, "[%-*s]", bar_w, " memory by reason unknown");
    char used[16] = "n/a", total[16] = "n/a";
    if (g->known & VG_GPU_K_MEM) {
        vg_top_size(g->mem_used, used, sizeof(used));
        vg_top_size(g->mem_total, total, sizeof(total));
    }
    vg_putf(p, " %5s/%-5s", used, total);
    if (g->known & VG_GPU_K_UTIL)
        vg_putf(p, " %3u%%", g->util_gpu);
    else
        vg_puts(p, "  n/a");
    if (sensors)
        vg_top_sensors(p, g, wide);
    vg_put(p, ' ');
    vg_top_spark(p, tg, spark_w, st->unicode);
}

static void vg_top_finding_line(struct vg_pen *p, const struct vg_finding *fd)
{
    p->x = 4;
    p->color = vg_sev_color(fd->severity);
    p->attr = VG_TOP_A_BOLD;
    vg_puts(p, vg_sev_mark(fd->severity));
    vg_put(p, ' ');
    vg_puts(p, fd->rule);
    p->attr = 0;
    p->color = VG_TOP_C_DEFAULT;
    vg_puts(p, ": ");
    vg_put_text(p, fd->title, 0);
}

/* Finding lines per GPU: one at a time to each GPU that has more, until extra runs out. */
static size_t *vg_top_shares(const struct vg_top_frame *f, size_t shown, size_t extra)
{
    size_t *share = calloc(shown ? shown : 1, sizeof(*share));
    bool more = share != NULL;
    while (more && extra) {
        more = false;
        for (size_t i = 0; i < shown && extra; i++)
            if (share[i] < f->gpus[i].nfindings) {
                share[i]++;
                extra--;
                more = true;
            }
    }
    return share;
}

/* Whether any GPU of the frame gave a sensor figure: when none did (a driver or boards without
 * them, or a GPU list read without asking) the sensor columns are left out, for the bar. */
static bool vg_top_any_sensor(const struct vg_top_frame *f)
{
    const unsigned bits = VG_GPU_K_TEMP | VG_GPU_K_POWER | VG_GPU_K_POWER_LIMIT | VG_GPU_K_FAN;
    for (size_t i = 0; i < f->ngpus; i++)
        if (f->gpus[i].g->known & bits)
            return true;
    return false;
}

/* The GPUs with as many findings as fit in budget lines. Returns the next free line. */
static unsigned vg_top_gpus(struct vg_top_screen *s, const struct vg_top_frame *f,
                            const struct vg_top_state *st, unsigned y, unsigned budget)
{
    struct vg_pen p = {.s = s};
    size_t n = f->ngpus, shown = n <= budget ? n : budget ? budget - 1 : 0;
    size_t *share = vg_top_shares(f, shown, budget - shown - (shown < n ? 1 : 0));
    bool sensors = vg_top_any_sensor(f);
    for (size_t i = 0; i < shown; i++) {
        const struct vg_top_gpu *tg = &f->gpus[i];
        vg_pen_at(&p, 0, y++);
        vg_top_gpu_line(&p, tg, st, sensors);
        size_t sh = share ? share[i] : 0;
        for (size_t k = 0; k < sh; k++) {
            vg_pen_at(&p, 0, y++);
            if (k + 1 == sh && sh < tg->nfindings) {
                p.x = 4;
                vg_putf(&p, "+%zu more findings (Enter on a holder, or vramguard doctor --gpu %u)",
                        tg->nfindings - k, tg->g->index);
            } else {
                vg_top_finding_line(&p, &f->fs.v[tg->findings[k]]);
            }
        }
    }
    free(share);
    if (shown < n) {
        vg_pen_at(&p, 0, y++);
        vg_putf(&p, "   ... %zu more GPUs (g filters one; a taller terminal shows them)",
                n - shown);
    }
    return y;
}

static void vg_top_legend(struct vg_top_screen *s, unsigned y)
{
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 0, y);
    vg_puts(&p, "   ");
    for (size_t i = 0; i < VG_REASON_COUNT; i++) {
        const struct vg_bar_class *c = &vg_bar_classes[vg_bar_order[i]];
        p.color = c->color;
        p.attr = VG_TOP_A_BOLD;
        vg_put(&p, (uint32_t)c->ch);
        p.color = VG_TOP_C_DEFAULT;
        p.attr = 0;
        vg_putf(&p, " %s  ", c->name);
    }
    vg_puts(&p, "r reserved  . free");
}

/* ---- the holder table ---- */

enum vg_col {
    VG_COL_PID,
    VG_COL_USER,
    VG_COL_GPU,
    VG_COL_MEM,
    VG_COL_UTIL,
    VG_COL_CPU,
    VG_COL_TIME,
    VG_COL_RSS,
    VG_COL_STATE,
    VG_COL_SEEN,
    VG_COL_CONT,
    VG_COL_CVD,
    VG_COL_FINDING,
    VG_COL_CMD,
    VG_COL_COUNT
};

struct vg_col_def {
    const char *title;
    unsigned width; /* 0: the rest (COMMAND) */
    unsigned prio;  /* lower stays longer when the terminal is narrow */
    bool right;
    enum vg_top_sort sort;
};

static const struct vg_col_def vg_cols[VG_COL_COUNT] = {
    [VG_COL_PID] = {"PID", 7, 0, true, VG_TOP_SORT_PID},
    [VG_COL_USER] = {"USER", 8, 3, false, VG_TOP_SORT_USER},
    [VG_COL_GPU] = {"GPU", 5, 1, false, VG_TOP_SORT_GPU},
    [VG_COL_MEM] = {"MEM", 6, 0, true, VG_TOP_SORT_MEM},
    [VG_COL_UTIL] = {"SM%", 4, 5, true, VG_TOP_SORT_UTIL},
    [VG_COL_CPU] = {"CPU%", 5, 4, true, VG_TOP_SORT_CPU},
    [VG_COL_TIME] = {"TIME", 6, 6, true, VG_TOP_SORT_TIME},
    [VG_COL_RSS] = {"RSS", 6, 6, true, VG_TOP_SORT_RSS},
    [VG_COL_STATE] = {"S", 1, 3, false, VG_TOP_SORT_STATE},
    [VG_COL_SEEN] = {"SEEN", 4, 7, false, VG_TOP_SORT_COUNT},
    [VG_COL_CONT] = {"CONTAINER", 12, 9, false, VG_TOP_SORT_COUNT},
    [VG_COL_CVD] = {"CVD", 9, 8, false, VG_TOP_SORT_COUNT},
    [VG_COL_FINDING] = {"FINDING", 17, 1, false, VG_TOP_SORT_FINDING},
    [VG_COL_CMD] = {"COMMAND", 0, 0, false, VG_TOP_SORT_COMMAND},
};
#define VG_COL_CMD_MIN 16u

/* Which columns fit in w: by priority, while the command keeps VG_COL_CMD_MIN columns. */
static void vg_cols_fit(unsigned w, bool on[VG_COL_COUNT])
{
    unsigned used = 0;
    memset(on, 0, VG_COL_COUNT * sizeof(on[0]));
    on[VG_COL_CMD] = true;
    for (unsigned prio = 0; prio <= 9; prio++)
        for (int c = 0; c < VG_COL_CMD; c++)
            if (vg_cols[c].prio == prio && used + vg_cols[c].width + 1 + VG_COL_CMD_MIN <= w) {
                on[c] = true;
                used += vg_cols[c].width + 1;
            }
}

static void vg_col_head(struct vg_pen *p, const struct vg_top_state *st, const bool on[])
{
    p->attr = VG_TOP_A_REVERSE | VG_TOP_A_BOLD;
    for (int c = 0; c < VG_COL_COUNT; c++) {
        if (!on[c])
            continue;
        const struct vg_col_def *d = &vg_cols[c];
        char t[32];
        bool sorted = d->sort == st->sort;
        snprintf(t, sizeof(t), "%s%s", d->title, sorted ? (st->reverse ? "^" : "v") : "");
        unsigned start = p->x, w = d->width ? d->width : (unsigned)strlen(t);
        if (d->right)
            vg_pad_to(p, start + (w > strlen(t) ? w - (unsigned)strlen(t) : 0));
        vg_puts(p, t);
        vg_pad_to(p, start + w + 1);
    }
    vg_fill(p);
    p->attr = 0;
}

/* One cell's text for a row (not FINDING or COMMAND). */
static void vg_cell_text(const struct vg_top_frame *f, const struct vg_top_row *r, int c, char *t,
                         size_t n)
{
    snprintf(t, n, "n/a");
    switch (c) {
    case VG_COL_PID:
        snprintf(t, n, "%d", (int)r->pid);
        break;
    case VG_COL_GPU: {
        if (!r->ngpus)
            snprintf(t, n, "-");
        else if (r->ngpus == 1 && !r->ngpus_more)
            snprintf(t, n, "%u", f->snap->gpus.gpus[r->gpus[0]].index);
        else
            snprintf(t, n, "%u+%zu", f->snap->gpus.gpus[r->gpus[0]].index,
                     r->ngpus - 1 + r->ngpus_more);
        break;
    }
    case VG_COL_MEM:
        if (r->mem_known)
            vg_top_size(r->mem, t, n);
        else if (!(r->seen & VG_SEEN_NVML))
            snprintf(t, n, "-"); /* no context: device nodes only */
        break;
    case VG_COL_UTIL:
        if (r->util_known)
            snprintf(t, n, "%u", r->util);
        break;
    case VG_COL_CPU:
        if (r->cpu_known)
            snprintf(t, n, "%u.%u", r->cpu_tenths / 10, r->cpu_tenths % 10);
        break;
    case VG_COL_TIME:
        if (r->age_known)
            vg_top_age(r->age_ms, t, n);
        break;
    case VG_COL_RSS:
        if (r->rss_known)
            vg_top_size(r->rss, t, n);
        break;
    case VG_COL_STATE:
        snprintf(t, n, "%c", vg_text_state(r->state));
        break;
    case VG_COL_SEEN:
        snprintf(t, n, "%s", vg_render_seen(r->seen));
        break;
    default:
        break;
    }
}

static void vg_cell_finding(struct vg_pen *p, const struct vg_top_frame *f,
                            const struct vg_top_row *r, unsigned w, bool sel)
{
    if (!r->has_finding)
        return;
    const struct vg_finding *fd = &f->fs.v[r->finding];
    unsigned char c0 = p->color, a0 = p->attr;
    p->color = vg_sev_color(r->severity);
    p->attr = (unsigned char)(a0 | (sel ? 0 : VG_TOP_A_BOLD));
    vg_puts(p, vg_sev_mark(r->severity));
    vg_put(p, ' ');
    unsigned right = p->right;
    p->right = p->x + (w > 3 ? w - 3 : 0);
    vg_put_text(p, fd->rule, 0);
    p->right = right;
    p->color = c0;
    p->attr = a0;
}

static void vg_table_row(struct vg_pen *p, const struct vg_top_frame *f,
                         const struct vg_top_line *l, const bool on[], bool sel)
{
    const struct vg_top_row *r = &f->rows[l->row];
    p->attr = sel ? VG_TOP_A_REVERSE : 0;
    for (int c = 0; c < VG_COL_COUNT; c++) {
        if (!on[c])
            continue;
        const struct vg_col_def *d = &vg_cols[c];
        unsigned start = p->x;
        if (c == VG_COL_FINDING) {
            vg_cell_finding(p, f, r, d->width, sel);
        } else if (c == VG_COL_USER) {
            vg_put_text(p, r->user ? r->user : "?", d->width);
        } else if (c == VG_COL_CONT) {
            vg_put_text(p, r->container ? r->container : "-", d->width);
        } else if (c == VG_COL_CVD) {
            vg_put_text(p, r->cvd ? r->cvd : "-", d->width);
        } else if (c == VG_COL_CMD) {
            for (unsigned k = 0; k < l->depth; k++)
                vg_puts(p, k + 1 == l->depth ? "`- " : "   ");
            vg_put_text(p, r->command ? r->command : (r->proc ? "?" : "(not in this /proc)"), 0);
        } else {
            char t[32];
            vg_cell_text(f, r, c, t, sizeof(t));
            if (d->right)
                vg_pad_to(p, start + (d->width > strlen(t) ? d->width - (unsigned)strlen(t) : 0));
            vg_puts(p, t);
        }
        vg_pad_to(p, start + d->width + 1);
    }
    vg_fill(p);
    p->attr = 0;
}

static void vg_group_row(struct vg_pen *p, const struct vg_top_state *st, size_t i, bool sel)
{
    size_t n = 0;
    for (size_t k = i + 1; k < st->nlines && st->lines[k].depth > 0; k++)
        n += st->lines[k].depth == 1;
    p->attr = sel ? VG_TOP_A_REVERSE : VG_TOP_A_BOLD;
    vg_putf(p, "%7d launcher (holds no GPU itself): %zu process%s of one job",
            (int)st->lines[i].pid, n, n == 1 ? "" : "es");
    vg_fill(p);
    p->attr = 0;
}

static void vg_top_table(struct vg_top_screen *s, const struct vg_top_frame *f,
                         const struct vg_top_state *st, unsigned y, unsigned ymax)
{
    struct vg_pen p = {.s = s};
    bool on[VG_COL_COUNT];
    vg_cols_fit(s->w, on);
    vg_pen_at(&p, 0, y++);
    vg_col_head(&p, st, on);
    unsigned rows = ymax > y ? ymax - y : 0;
    if (st->nlines == 0 && rows) {
        vg_pen_at(&p, 2, y);
        vg_puts(&p, f->nrows ? "no holder matches the filters (Esc clears them)"
                             : "no process holds a GPU");
        return;
    }
    size_t first = rows && st->sel >= rows ? st->sel - rows + 1 : 0;
    s->list_y = y;
    s->list_first = first;
    size_t left = st->nlines > first ? st->nlines - first : 0;
    s->list_rows = (unsigned)(left < rows ? left : rows);
    for (size_t i = first; i < st->nlines && y < ymax; i++) {
        vg_pen_at(&p, 0, y++);
        if (st->lines[i].group)
            vg_group_row(&p, st, i, i == st->sel);
        else
            vg_table_row(&p, f, &st->lines[i], on, i == st->sel);
    }
}

/* ---- the panes in place of the table ---- */

/* A labelled line: "label: " then text, wrapped with a hanging indent. */
static unsigned vg_top_field(struct vg_top_screen *s, unsigned y, unsigned ymax, const char *label,
                             const char *text, unsigned char color)
{
    if (y >= ymax)
        return y;
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 1, y);
    p.attr = VG_TOP_A_BOLD;
    vg_puts(&p, label);
    p.attr = 0;
    p.color = color;
    vg_put(&p, ' ');
    return vg_wrap(&p, text, 4, ymax);
}

static unsigned vg_detail_env(struct vg_top_screen *s, const struct vg_proc *pr, unsigned y,
                              unsigned ymax)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    if (pr && (pr->known & VG_PROC_K_ENV)) {
        for (int v = 0; v < VG_ENV_COUNT; v++)
            if (pr->env[v])
                vg_buf_printf(&b, "%s%s=%s", b.len ? "  " : "", vg_env_name((enum vg_env_var)v),
                              pr->env[v]);
        if (!b.len)
            vg_buf_adds(&b, "none of the variables that matter for GPUs is set");
    } else {
        vg_buf_adds(&b, "n/a (could not be read)");
    }
    y = vg_top_field(s, y, ymax, "environment:", b.err ? "?" : vg_buf_str(&b), 0);
    vg_buf_reset(&b);
    if (pr && (pr->known & VG_PROC_K_MAPS)) {
        for (unsigned bit = 1; bit <= VG_LIB_NVML; bit <<= 1)
            if (pr->libs & bit)
                vg_buf_printf(&b, "%s%s", b.len ? " " : "", vg_lib_name(bit));
        if (!b.len)
            vg_buf_adds(&b, "none of CUDA, NCCL, PyTorch, TensorFlow, JAX mapped");
    } else {
        vg_buf_adds(&b, "n/a (maps could not be read)");
    }
    y = vg_top_field(s, y, ymax, "libraries:", b.err ? "?" : vg_buf_str(&b), 0);
    vg_buf_release(&b);
    return y;
}

static unsigned vg_detail_finding(struct vg_top_screen *s, const struct vg_finding *fd, unsigned y,
                                  unsigned ymax)
{
    char head[160];
    snprintf(head, sizeof(head), "%s %s (%s, %s confidence):", vg_sev_mark(fd->severity), fd->rule,
             vg_severity_str(fd->severity), vg_confidence_str(fd->confidence));
    y = vg_top_field(s, y, ymax, head, fd->title, vg_sev_color(fd->severity));
    /* the fix first: on a small screen it is what must not be cut */
    for (size_t i = 0; i < fd->nfix; i++)
        y = vg_top_field(s, y, ymax, "  fix: ", fd->fix[i], VG_TOP_C_GREEN);
    for (size_t i = 0; i < fd->nevidence; i++)
        y = vg_top_field(s, y, ymax, "  seen:", fd->evidence[i], 0);
    return y;
}

/* The holder's identity on one line (b), the GPUs it holds on another (gb). */
static void vg_detail_ids(struct vg_buf *b, struct vg_buf *gb, const struct vg_top_frame *f,
                          const struct vg_top_row *r)
{
    const struct vg_proc *pr = r->proc;
    char age[32] = "n/a";
    if (r->age_known)
        vg_top_age(r->age_ms, age, sizeof(age));
    vg_buf_printf(b, "PID %d  user ", (int)r->pid);
    vg_text_escape_str(b, r->user ? r->user : "?", 32);
    vg_buf_printf(b, "  state %c  running %s", vg_text_state(r->state), age);
    if (r->rss_known) {
        char rss[16];
        vg_top_size(r->rss, rss, sizeof(rss));
        vg_buf_printf(b, "  RSS %s", rss);
    }
    if (pr && (pr->known & VG_PROC_K_STAT))
        vg_buf_printf(b, "  parent %d  group %d  session %d", (int)pr->ppid, (int)pr->pgid,
                      (int)pr->sid);
    vg_buf_printf(b, "  seen by %s", vg_render_seen_words(r->seen));
    for (size_t i = 0; i < r->ngpus; i++) {
        const struct vg_gpu *g = &f->snap->gpus.gpus[r->gpus[i]];
        const struct vg_gpu_proc *gp = vg_gpu_find_proc(g, (uint32_t)r->pid);
        char sz[16] = "no context";
        if (gp && gp->used_known)
            vg_top_size(gp->used_bytes, sz, sizeof(sz));
        vg_buf_printf(gb, "%sGPU %u: %s", i ? ", " : "", g->index, sz);
        if (gp && gp->util_known)
            vg_buf_printf(gb, " (%u%% SM)", gp->sm_util);
        else if (gp)
            vg_buf_adds(gb, " (SM n/a)"); /* no sample from the driver: unknown, not 0% */
    }
}

static void vg_top_detail(struct vg_top_screen *s, const struct vg_top_frame *f,
                          const struct vg_top_state *st, unsigned y, unsigned ymax)
{
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 0, y++);
    p.attr = VG_TOP_A_REVERSE | VG_TOP_A_BOLD;
    vg_puts(&p, " Detail (Enter or Esc: back to the list) ");
    vg_fill(&p);
    const struct vg_top_line *l = st->sel < st->nlines ? &st->lines[st->sel] : NULL;
    if (!l || l->group) {
        vg_pen_at(&p, 1, y);
        if (l)
            vg_putf(&p, "PID %d launched the processes below it; it holds no GPU itself.",
                    (int)l->pid);
        else
            vg_puts(&p, "nothing selected");
        return;
    }
    const struct vg_top_row *r = &f->rows[l->row];
    struct vg_buf b, gb;
    vg_buf_init(&b, 0);
    vg_buf_init(&gb, 0);
    vg_detail_ids(&b, &gb, f, r);
    /* escaped already, so written as they are */
    y = vg_wrap((vg_pen_at(&p, 1, y), &p), b.err ? "?" : vg_buf_str(&b), 4, ymax);
    if (gb.len)
        y = vg_top_field(s, y, ymax, "holds:", gb.err ? "?" : vg_buf_str(&gb), 0);
    vg_buf_release(&gb);
    vg_buf_release(&b);
    const struct vg_proc *pr = r->proc;
    y = vg_top_field(s, y, ymax, "command:", r->command ? r->command : "n/a", 0);
    if (pr && (pr->container_id || pr->pod_uid))
        y = vg_top_field(s, y, ymax, "cgroup:", pr->cgroup ? pr->cgroup : "?", 0);
    y = vg_detail_env(s, pr, y, ymax);
    if (r->has_finding)
        y = vg_detail_finding(s, &f->fs.v[r->finding], y, ymax);
    else
        y = vg_top_field(s, y, ymax, "finding:", "none: nothing wrong found with it", 0);
    (void)y;
}

/* Under the keys (render/top_keys.h's table, whose help lines come first). */
static const char *const vg_top_help_notes[] = {
    "",
    "Bars: one character per reason memory is held (the legend under the GPUs),",
    "coloured when the terminal can. Severity: !! critical, ! warning, i info.",
    "Never stopped: infrastructure, another user's process unless you are root,",
    "zombies, processes stuck in the driver. --read-only turns actions off.",
};

/* A help text of the key table, line by line from y; returns the next line. */
static unsigned vg_top_help_text(struct vg_pen *p, const char *text, unsigned y, unsigned ymax)
{
    while (text && y < ymax) {
        const char *nl = strchr(text, '\n');
        size_t n = nl ? (size_t)(nl - text) : strlen(text);
        char line[160];
        snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) ? n : sizeof(line) - 1), text);
        vg_pen_at(p, 1, y++);
        vg_puts(p, line);
        text = nl ? nl + 1 : NULL;
    }
    return y;
}

static void vg_top_help(struct vg_top_screen *s, const struct vg_top_state *st, unsigned y,
                        unsigned ymax)
{
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 0, y++);
    p.attr = VG_TOP_A_REVERSE | VG_TOP_A_BOLD;
    vg_puts(&p, " Keys of vramguard top (any key closes this help) ");
    vg_fill(&p);
    if (st->read_only && y < ymax) {
        vg_pen_at(&p, 1, y++);
        p.color = VG_TOP_C_YELLOW;
        vg_puts(&p, "read-only (--read-only): k and K are off");
    }
    size_t nkeys;
    const struct vg_top_key *keys = vg_top_keys(&nkeys);
    for (size_t i = 0; i < nkeys && y < ymax; i++)
        y = vg_top_help_text(&p, keys[i].help, y, ymax);
    for (size_t i = 0; i < sizeof(vg_top_help_notes) / sizeof(vg_top_help_notes[0]) && y < ymax;
         i++)
        y = vg_top_help_text(&p, vg_top_help_notes[i], y, ymax);
}

/* One entry of a stop plan: what would happen to it and why. */
static unsigned vg_plan_entry_lines(struct vg_top_screen *s, const struct vg_plan_entry *e,
                                    unsigned y, unsigned ymax)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "PID %d  ", (int)e->id.pid);
    vg_text_escape_str(&b, e->user ? e->user : "?", 32);
    for (size_t i = 0; i < e->ngpus; i++)
        vg_buf_printf(&b, "%s%zu", i ? "," : "  GPU ", e->gpus[i]);
    if (e->mem_known) {
        char sz[16];
        vg_top_size(e->mem_bytes, sz, sizeof(sz));
        vg_buf_printf(&b, "  %s", sz);
    }
    vg_buf_adds(&b, "  ");
    vg_text_escape_str(&b, e->cmdline && e->cmdline[0] ? e->cmdline : e->comm, 60);
    const char *what = e->signal ? "stop:  " : e->leave ? "leave: " : "refuse:";
    y = vg_top_field(s, y, ymax, what, b.err ? "?" : vg_buf_str(&b),
                     e->signal ? VG_TOP_C_DEFAULT : VG_TOP_C_YELLOW);
    if (e->reason) {
        vg_buf_reset(&b);
        vg_buf_printf(&b, "%s: ", e->reason);
        vg_text_escape_str(&b, e->finding ? e->finding : "", 0);
        y = vg_top_field(s, y, ymax, "       why:", b.err ? "?" : vg_buf_str(&b), 0);
    }
    if (!e->signal) {
        vg_buf_reset(&b);
        vg_render_clean_refusal(&b, e, e->refusal, NULL);
        y = vg_top_field(s, y, ymax, "       because", b.err ? "?" : vg_buf_str(&b),
                         VG_TOP_C_YELLOW);
    }
    vg_buf_release(&b);
    return y;
}

static void vg_top_plan(struct vg_top_screen *s, const struct vg_top_state *st, unsigned y,
                        unsigned ymax)
{
    struct vg_pen p = {.s = s};
    const struct vg_plan *pl = st->plan;
    size_t nsig = 0, nshown = 0;
    for (size_t i = 0; pl && i < pl->n; i++) {
        nsig += st->chosen[i] && pl->v[i].signal;
        nshown += st->chosen[i];
    }
    vg_pen_at(&p, 0, y++);
    p.attr = VG_TOP_A_REVERSE | VG_TOP_A_BOLD;
    vg_puts(&p, " Stop ");
    vg_put_text(&p, st->plan_what ? st->plan_what : "?", 40);
    vg_puts(&p, "? The plan, as `vramguard clean` makes it ");
    vg_fill(&p);
    for (size_t i = 0; pl && i < pl->n && y < ymax; i++)
        if (st->chosen[i])
            y = vg_plan_entry_lines(s, &pl->v[i], y, ymax);
    if (!nshown)
        y = vg_top_field(s, y, ymax, "nothing:",
                         "it is not a leftover of an ended job (its job still runs, or it was "
                         "started on purpose), so top does not stop it; if it must go, "
                         "`vramguard clean --pid PID --force` stops it by name",
                         VG_TOP_C_YELLOW);
    vg_pen_at(&p, 1, y < ymax ? y + 1 : ymax);
    p.attr = VG_TOP_A_BOLD;
    if (nsig)
        vg_putf(&p,
                "y: stop %zu process%s (pidfd, identity re-checked; SIGKILL after %us)  n: cancel",
                nsig, nsig == 1 ? "" : "es", st->grace_ms / 1000);
    else
        vg_puts(&p, "Nothing to stop. n or Esc: back");
}

/* ---- header and key line ---- */

static void vg_top_header(struct vg_top_screen *s, const struct vg_top_frame *f,
                          const struct vg_top_state *st)
{
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 0, 0);
    p.attr = VG_TOP_A_BOLD;
    vg_puts(&p, "vramguard top");
    p.attr = 0;
    struct tm tm;
    char t[16] = "";
    if (localtime_r(&st->now, &tm))
        strftime(t, sizeof(t), "%H:%M:%S", &tm);
    vg_puts(&p, "  ");
    vg_put_text(&p, st->host ? st->host : "", 24);
    vg_putf(&p, "  %s  every %u.%us", t, st->interval_ms / 1000, st->interval_ms % 1000 / 100);
    if (f && f->snap->driver_ok && f->snap->gpus.driver_version) {
        vg_puts(&p, "  driver ");
        vg_put_text(&p, f->snap->gpus.driver_version, 20);
    }
    if (f && (f->hung || f->snap->driver_hung)) {
        p.color = VG_TOP_C_RED;
        p.attr = VG_TOP_A_BOLD;
        vg_puts(&p, "  DRIVER HUNG");
        p.color = VG_TOP_C_DEFAULT;
        p.attr = 0;
    } else if (st->sampling && st->waiting_ms >= 2000) {
        p.color = VG_TOP_C_YELLOW;
        vg_putf(&p, "  driver slow: waiting %" PRIu64 "s", st->waiting_ms / 1000);
        p.color = VG_TOP_C_DEFAULT;
    }
    vg_putf(&p, "  sort %s%s", vg_top_sort_name(st->sort), st->reverse ? "^" : "");
    if (st->tree)
        vg_puts(&p, "  tree");
    const struct vg_top_filter *flt = st->filter;
    if (flt && flt->user) {
        vg_puts(&p, "  user=");
        vg_put_text(&p, flt->user, 16);
    }
    if (flt && flt->by_gpu)
        vg_putf(&p, "  gpu=%u", flt->gpu_index);
    if (flt && flt->rule)
        vg_putf(&p, "  finding=%s", flt->rule);
    if (flt && flt->text && flt->text[0]) {
        vg_puts(&p, "  /");
        vg_put_text(&p, flt->text, 20);
    }
    if (st->read_only)
        vg_puts(&p, "  [read-only]");
}

static void vg_top_key_line(struct vg_top_screen *s, const struct vg_top_state *st)
{
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 0, s->h - 1);
    if (st->prompt) {
        p.attr = VG_TOP_A_BOLD;
        vg_put_text(&p, st->prompt, 0);
        vg_put(&p, '_');
        return;
    }
    if (st->message) {
        p.attr = VG_TOP_A_BOLD;
        vg_put_text(&p, st->message, 0);
        return;
    }
    p.attr = VG_TOP_A_REVERSE;
    vg_puts(
        &p,
        st->read_only
            ? "q quit  ? help  Enter detail  / search  u g f filter  t tree  <> sort  read-only"
            : "q quit  ? help  Enter detail  / search  u g f filter  t tree  <> sort  k K stop");
    vg_fill(&p);
}

/* Lines for the GPU part: every GPU, and findings up to half the screen. */
static unsigned vg_top_gpu_budget(const struct vg_top_frame *f, unsigned h)
{
    size_t want = f->ngpus;
    for (size_t i = 0; i < f->ngpus; i++)
        want += f->gpus[i].nfindings;
    unsigned half = h > 8 ? (h - 4) / 2 : 1;
    unsigned most = h > 8 ? h - 8 : 1; /* room for the table's head and a few rows */
    unsigned b = want < half ? (unsigned)want : half;
    if (b < f->ngpus)
        b = f->ngpus < most ? (unsigned)f->ngpus : most;
    return b;
}

static void vg_top_no_frame(struct vg_top_screen *s, const struct vg_top_state *st)
{
    struct vg_pen p = {.s = s};
    vg_pen_at(&p, 1, 2);
    vg_putf(&p, "waiting for the first sample (%" PRIu64 "s)...", st->waiting_ms / 1000);
    if (st->waiting_ms >= 2000) {
        vg_pen_at(&p, 1, 3);
        p.color = VG_TOP_C_YELLOW;
        vg_puts(&p, "the driver is slow to answer; the sample gives up on it after "
                    "--nvml-timeout and shows /proc's view");
    }
}

int vg_top_render(const struct vg_top_frame *f, const struct vg_top_state *st,
                  struct vg_top_screen *s)
{
    if (vg_top_screen_resize(s, s->w, s->h))
        return -ENOMEM;
    s->list_y = s->list_rows = 0;
    s->list_first = 0;
    if (s->w == 0 || s->h < 2)
        return 0;
    vg_top_header(s, f, st);
    vg_top_key_line(s, st);
    unsigned y = 1, ymax = s->h - 1;
    if (st->mode == VG_TOP_MODE_HELP) {
        vg_top_help(s, st, y, ymax);
        return 0;
    }
    if (!f) {
        vg_top_no_frame(s, st);
        return 0;
    }
    struct vg_pen p = {.s = s};
    if (!f->snap->driver_ok && y < ymax) {
        vg_pen_at(&p, 0, y++);
        p.color = VG_TOP_C_RED;
        p.attr = VG_TOP_A_BOLD;
        vg_puts(&p, f->snap->driver_hung ? "DRIVER HUNG: " : "no driver view: ");
        p.attr = 0;
        vg_put_text(&p, f->snap->driver_error ? f->snap->driver_error : "unknown reason", 0);
    }
    if (f->ngpus && y < ymax) {
        y = vg_top_gpus(s, f, st, y, vg_top_gpu_budget(f, ymax - y));
        if (y < ymax)
            vg_top_legend(s, y++);
    }
    if (st->mode == VG_TOP_MODE_DETAIL)
        vg_top_detail(s, f, st, y, ymax);
    else if (st->mode == VG_TOP_MODE_PLAN)
        vg_top_plan(s, st, y, ymax);
    else
        vg_top_table(s, f, st, y, ymax);
    return 0;
}
