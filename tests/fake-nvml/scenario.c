/*
 * The scenario file parser of the fake NVML driver: text in, struct fake_scenario out, or the
 * line and reason it is wrong. Written by hand and strict on purpose (no strtoul, no sign,
 * no partial numbers, no unknown or repeated keys), because a typo in a test scenario that
 * silently means something else makes a test pass for the wrong reason. Keys are described by
 * one table; each directive then checks what only it can. The format is in README.md.
 */
#include "fake.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define LINE_LEN 1024
#define MAX_PAIRS 48

/* One line split into words: the directive, an optional bare argument and key=value pairs,
 * all pointing into buf, unquoted and NUL-terminated. */
struct line {
    char buf[LINE_LEN + 1];
    const char *word, *arg;
    unsigned n;
    const char *key[MAX_PAIRS], *val[MAX_PAIRS];
};

/* What the keys of one line set; directives copy the parts they own into the scenario. */
struct rec {
    uint64_t known, seen;   /* FK_* and K_* bits: given with a value / given at all */
    struct fake_dev d;
    struct fake_proc p;
    struct fake_rule r;
    unsigned index, parent;
    int g, m;               /* gpu=G or mig=G/M */
    enum fake_ptype type;
    unsigned exits;
};

/* The parser's own bits, above the device's FK_* ones (64-bit: past what an int enum holds). */
#define K_BIT(n) ((uint64_t)FK_PARSER << (n))
#define K_MEMU K_BIT(0)
#define K_MIGP K_BIT(1)
#define K_INDEX K_BIT(2)
#define K_PARENT K_BIT(3)
#define K_TARGET K_BIT(4)
#define K_PID K_BIT(5)
#define K_TYPE K_BIT(6)
#define K_FUNC K_BIT(7)
#define K_CODE K_BIT(8)
#define K_SECS K_BIT(9)
#define K_BY K_BIT(10)
#define K_TIMES K_BIT(11)
#define K_MEM K_BIT(12)
#define K_SM K_BIT(13)
#define K_EXITS K_BIT(14)
#define K_ECCP K_BIT(15)

enum { D_GPU = 1, D_MIG = 2, D_PROC = 4, D_ERROR = 8, D_HANG = 16, D_GROW = 32 };
#define D_RULES (D_ERROR | D_HANG | D_GROW)

enum vkind { V_UINT, V_STR, V_SIZE, V_USED, V_BUS, V_CC, V_GPU, V_MIGREF, V_TYPE, V_FUNC,
             V_INT, V_SECS, V_TIMES, V_U64, V_HEX };

static const struct key {
    unsigned dirs;
    const char *name;
    enum vkind kind;
    size_t off;            /* in struct rec */
    uint64_t bit;
    unsigned max;          /* V_UINT */
    bool na;               /* `na` allowed: clears the bit */
} keys[] = {
#define AT(field) offsetof(struct rec, field)
    {D_GPU, "index", V_UINT, AT(index), K_INDEX, FAKE_MAX_GPUS, false},
    {D_MIG, "index", V_UINT, AT(index), K_INDEX, FAKE_MAX_MIG, false},
    {D_MIG, "parent", V_UINT, AT(parent), K_PARENT, FAKE_MAX_GPUS, false},
    {D_GPU | D_MIG, "uuid", V_STR, AT(d.uuid), FK_UUID, 0, true},
    {D_GPU | D_MIG, "name", V_STR, AT(d.name), FK_NAME, 0, true},
    {D_GPU | D_MIG, "total", V_SIZE, AT(d.total), FK_TOTAL, 0, true},
    {D_GPU | D_MIG, "used", V_USED, AT(d.used), FK_USED, 0, true},
    {D_GPU, "minor", V_UINT, AT(d.minor), FK_MINOR, 255, true},
    {D_GPU, "bus", V_BUS, AT(d), FK_BUS, 0, true},
    {D_GPU, "reserved", V_SIZE, AT(d.reserved), FK_RESERVED, 0, true},
    {D_GPU, "util", V_UINT, AT(d.util), FK_UTIL, 100, true},
    {D_GPU, "mem_util", V_UINT, AT(d.mem_util), K_MEMU, 100, true},
    {D_GPU, "cc", V_CC, AT(d), FK_CC, 0, true},
    {D_GPU, "persistence", V_UINT, AT(d.persistence), FK_PERSIST, 1, true},
    {D_GPU, "compute_mode", V_UINT, AT(d.compute_mode), FK_CMODE, 3, true},
    {D_GPU, "mig", V_UINT, AT(d.mig), FK_MIG, 1, true},
    {D_GPU, "mig_pending", V_UINT, AT(d.mig_pending), K_MIGP, 1, true},
    {D_GPU, "temp", V_UINT, AT(d.temp), FK_TEMP, 200, true},
    {D_GPU, "power_mw", V_UINT, AT(d.power_mw), FK_POWER, 10000000, true},
    {D_GPU, "power_limit_mw", V_UINT, AT(d.power_limit_mw), FK_PLIMIT, 10000000, true},
    {D_GPU, "fan", V_UINT, AT(d.fan), FK_FAN, 200, true},
    {D_GPU, "ecc", V_UINT, AT(d.ecc), FK_ECC, 1, true},
    {D_GPU, "ecc_pending", V_UINT, AT(d.ecc_pending), K_ECCP, 1, true},
    {D_GPU, "ecc_vol_corr", V_U64, AT(d.ecc_count[0]), FK_ECC_VC, 0, true},
    {D_GPU, "ecc_vol_uncorr", V_U64, AT(d.ecc_count[1]), FK_ECC_VU, 0, true},
    {D_GPU, "ecc_agg_corr", V_U64, AT(d.ecc_count[2]), FK_ECC_AC, 0, true},
    {D_GPU, "ecc_agg_uncorr", V_U64, AT(d.ecc_count[3]), FK_ECC_AU, 0, true},
    {D_GPU, "retired_sbe", V_UINT, AT(d.retired_sbe), FK_RET_SBE, 0xFFFFFFFFu, true},
    {D_GPU, "retired_dbe", V_UINT, AT(d.retired_dbe), FK_RET_DBE, 0xFFFFFFFFu, true},
    {D_GPU, "retired_pending", V_UINT, AT(d.retired_pending), FK_RET_PEND, 1, true},
    {D_GPU, "remap_corr", V_UINT, AT(d.remap[0]), FK_REMAP_C, 0xFFFFFFFFu, true},
    {D_GPU, "remap_uncorr", V_UINT, AT(d.remap[1]), FK_REMAP_U, 0xFFFFFFFFu, true},
    {D_GPU, "remap_pending", V_UINT, AT(d.remap[2]), FK_REMAP_P, 1, true},
    {D_GPU, "remap_failure", V_UINT, AT(d.remap[3]), FK_REMAP_F, 1, true},
    {D_GPU, "recovery_action", V_UINT, AT(d.recovery), FK_RECOVERY, 255, true},
    {D_GPU, "clocks_event_reasons", V_HEX, AT(d.clocks), FK_CLOCKS, 0, true},
    {D_MIG, "gi", V_UINT, AT(d.gi), FK_GI, 0xFFFFFFFEu, true},
    {D_MIG, "ci", V_UINT, AT(d.ci), FK_CI, 0xFFFFFFFEu, true},
    {D_PROC | D_RULES, "gpu", V_GPU, AT(g), K_TARGET, FAKE_MAX_GPUS - 1, false},
    {D_PROC | D_RULES, "mig", V_MIGREF, AT(g), K_TARGET, 0, false},
    {D_PROC, "pid", V_UINT, AT(p.pid), K_PID, 0xFFFFFFFFu, false},
    {D_PROC | D_GROW, "type", V_TYPE, AT(type), K_TYPE, 0, false},
    {D_PROC, "mem", V_SIZE, AT(p.mem), K_MEM, 0, true},
    {D_PROC, "sm", V_UINT, AT(p.sm), K_SM, 100, false},
    {D_PROC, "exits", V_UINT, AT(exits), K_EXITS, 1, false},
    {D_ERROR | D_HANG, "func", V_FUNC, AT(r.fn), K_FUNC, 0, false},
    {D_RULES, "times", V_TIMES, AT(r.left), K_TIMES, 0, false},
    {D_ERROR, "code", V_INT, AT(r.code), K_CODE, 0, false},
    {D_HANG, "seconds", V_SECS, AT(r.ns), K_SECS, 0, false},
    {D_GROW, "by", V_UINT, AT(r.by), K_BY, 0xFFFFFFFFu, false},
#undef AT
};

struct parser {
    struct fake_scenario *sc;
    char *msg;
    unsigned long msglen;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *ps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* A truncated message is still the right message. */
    if (vsnprintf(ps->msg, ps->msglen, fmt, ap) < 0 && ps->msglen)
        ps->msg[0] = '\0';
    va_end(ap);
    return -1;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

/* Splits s[0..n) into ln. A word is `value` or `key=value`; a value is bare (up to the next
 * blank) or double-quoted with \" and \\ escapes. `#` at the start of a word begins a comment.
 * The output never outgrows the input: each word loses its '=' or quotes for a NUL. */
static int split(struct parser *ps, const char *s, size_t n, struct line *ln)
{
    size_t i = 0, o = 0;
    ln->word = ln->arg = NULL;
    ln->n = 0;
    for (;;) {
        while (i < n && is_space(s[i]))
            i++;
        if (i == n || s[i] == '#')
            return 0;
        const char *key = NULL;
        size_t start = o;
        while (i < n && !is_space(s[i]) && s[i] != '=' && s[i] != '"')
            ln->buf[o++] = s[i++];
        if (i < n && s[i] == '=') {
            if (o == start)
                return fail(ps, "'=' without a key");
            ln->buf[o++] = '\0';
            key = ln->buf + start;
            start = o;
            i++;
        }
        if (i < n && s[i] == '"' && o == start) {
            for (i++; i < n && s[i] != '"'; i++) {
                if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\'))
                    i++;
                ln->buf[o++] = s[i];
            }
            if (i++ == n)
                return fail(ps, "unterminated quoted value");
            if (i < n && !is_space(s[i]))
                return fail(ps, "text after a closing '\"'");
        } else {
            for (; i < n && !is_space(s[i]); ln->buf[o++] = s[i++])
                if (s[i] == '"' || s[i] == '=')
                    return fail(ps, "stray '%c'", s[i]);
        }
        ln->buf[o++] = '\0';
        const char *val = ln->buf + start;
        if (!ln->word && !key) {
            ln->word = val;
        } else if (!ln->word) {
            return fail(ps, "a line must start with a directive, not '%s='", key);
        } else if (!key) {
            if (ln->arg || ln->n)
                return fail(ps, "expected key=value, got '%s'", val);
            ln->arg = val;
        } else if (ln->n == MAX_PAIRS) {
            return fail(ps, "too many keys");
        } else {
            ln->key[ln->n] = key;
            ln->val[ln->n++] = val;
        }
    }
}

/* Decimal digits only (n of them, or up to the NUL when n is 0), at most max. */
static bool parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!n)
        n = strlen(s);
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Bytes, or a whole number with a KiB, MiB, GiB or TiB suffix. */
static bool parse_size(const char *s, uint64_t *out)
{
    static const char *const units[] = {"", "KiB", "MiB", "GiB", "TiB"};
    size_t n = strspn(s, "0123456789");
    for (unsigned u = 0; u < 5; u++)
        if (!strcmp(s + n, units[u]) && n && parse_u64(s, n, UINT64_MAX >> (10 * u), out)) {
            *out <<= 10 * u;
            return true;
        }
    return false;
}

/* A 64-bit value in decimal, or in hex after 0x (1 to 16 digits). */
static bool parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t n;
    if (s[0] != '0' || s[1] != 'x')
        return parse_u64(s, 0, UINT64_MAX, out);
    s += 2;
    n = strlen(s);
    if (!n || n > 16 || strspn(s, "0123456789abcdefABCDEF") != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        unsigned d = ch <= '9' ? (unsigned)(ch - '0') : (unsigned)((ch | 0x20) - 'a' + 10);
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

/* Seconds as digits[.digits] (at most 9 decimals, at most a day), to nanoseconds. */
static bool parse_seconds(const char *s, uint64_t *ns)
{
    uint64_t sec, frac = 0, scale = 1000000000u;
    size_t n = strspn(s, "0123456789");
    const char *f = s + n + (s[n] == '.');
    if (!n || !parse_u64(s, n, 86400, &sec) || (s[n] && (s[n] != '.' || !*f)) || strlen(f) > 9)
        return false;
    for (; *f; f++) {
        if (*f < '0' || *f > '9')
            return false;
        scale /= 10;
        frac += (uint64_t)(*f - '0') * scale;
    }
    *ns = sec * 1000000000u + frac;
    return true;
}

/* n hex digits, 1 <= n <= max. */
static bool parse_hex(const char *s, size_t n, size_t max, unsigned *out)
{
    static const char digits[] = "0123456789abcdef0123456789ABCDEF";
    unsigned v = 0;
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *d = s[i] ? strchr(digits, s[i]) : NULL;
        if (!d)
            return false;
        v = v * 16 + (unsigned)(d - digits) % 16;
    }
    *out = v;
    return true;
}

/* DOMAIN:BUS:DEVICE.FUNCTION in hex, e.g. 00000000:07:00.0. */
static bool parse_bus(const char *s, struct fake_dev *d)
{
    const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *dot = c2 ? strchr(c2 + 1, '.') : NULL;
    if (!dot || strlen(s) >= sizeof d->bus || !parse_hex(s, (size_t)(c1 - s), 8, &d->domain)
        || !parse_hex(c1 + 1, (size_t)(c2 - c1 - 1), 2, &d->bus_no)
        || !parse_hex(c2 + 1, (size_t)(dot - c2 - 1), 2, &d->dev_no)
        || !parse_hex(dot + 1, strlen(dot + 1), 1, &d->fn_no) || d->dev_no > 31 || d->fn_no > 7)
        return false;
    memcpy(d->bus, s, strlen(s) + 1);
    return true;
}

/* A and B separated by sep, each a decimal of at most amax and bmax. */
static bool parse_pair(const char *s, char sep, unsigned amax, unsigned bmax, int *a, int *b)
{
    const char *p = strchr(s, sep);
    uint64_t x, y;
    if (!p || p == s || !parse_u64(s, (size_t)(p - s), amax, &x) || !parse_u64(p + 1, 0, bmax, &y))
        return false;
    *a = (int)x;
    *b = (int)y;
    return true;
}

static const char *const hints[] = {
    [V_STR] = "1 to 95 characters", [V_SIZE] = "a size (bytes, or a number with KiB to TiB)",
    [V_USED] = "auto or a size", [V_BUS] = "DOMAIN:BUS:DEVICE.FN in hex", [V_CC] = "MAJOR.MINOR",
    [V_GPU] = "a GPU index below 64", [V_MIGREF] = "GPU/INDEX like 0/1",
    [V_TYPE] = "compute, graphics or mps", [V_FUNC] = "an NVML function of nvml_abi.h",
    [V_INT] = "a nonzero integer", [V_SECS] = "seconds like 30 or 0.25 (at most 86400)",
    [V_TIMES] = "a number from 1", [V_U64] = "a number below 2^64",
    [V_HEX] = "a number, or hex like 0x48",
};

/* Sets the field of one key from v. */
static int set(struct parser *ps, struct rec *rc, const struct key *k, const char *v)
{
    void *at = (char *)rc + k->off;
    uint64_t u;
    bool ok = true;
    if (rc->seen & k->bit)
        return fail(ps, "%s given twice", k->bit == K_TARGET ? "gpu= or mig=" : k->name);
    rc->seen |= k->bit;
    if (k->na && !strcmp(v, "na")) {
        rc->known |= k->kind == V_USED ? FK_USED_NA : 0;
        return 0;
    }
    if (k->kind == V_USED && !strcmp(v, "auto"))
        return 0;
    switch (k->kind) {
    case V_UINT:
        if ((ok = parse_u64(v, 0, k->max, &u)))
            *(unsigned *)at = (unsigned)u;
        break;
    case V_STR:
        if ((ok = *v && strlen(v) < FAKE_STR))
            memcpy(at, v, strlen(v) + 1);
        break;
    case V_SIZE:
    case V_USED:
        ok = parse_size(v, at);
        break;
    case V_BUS:
        ok = parse_bus(v, at);
        break;
    case V_CC:
        ok = parse_pair(v, '.', 99, 99, &rc->d.cc_major, &rc->d.cc_minor);
        break;
    case V_GPU:
        if ((ok = parse_u64(v, 0, k->max, &u)))
            rc->g = (int)u, rc->m = -1;
        break;
    case V_MIGREF:
        ok = parse_pair(v, '/', FAKE_MAX_GPUS - 1, FAKE_MAX_MIG - 1, &rc->g, &rc->m);
        break;
    case V_TYPE:
        ok = !strcmp(v, "compute") || !strcmp(v, "graphics") || !strcmp(v, "mps");
        rc->type = v[0] == 'c' ? FAKE_COMPUTE : v[0] == 'g' ? FAKE_GRAPHICS : FAKE_MPS;
        break;
    case V_FUNC:
        ok = false;
        for (unsigned f = 0; f < FAKE_FN_COUNT && !ok; f++)
            if ((ok = !strcmp(v, fake_fns[f].name) && fake_fns[f].scope != FAKE_NONE))
                rc->r.fn = (enum fake_fn)f;
        break;
    case V_INT:
        ok = parse_u64(v + (*v == '-'), 0, 2147483647u + (*v == '-'), &u) && u;
        rc->r.code = *v == '-' ? (int)(-(int64_t)u) : (int)u;
        break;
    case V_SECS:
        ok = parse_seconds(v, at);
        break;
    case V_TIMES:
        if ((ok = parse_u64(v, 0, 1000000000, &u) && u))
            rc->r.left = (long long)u;
        break;
    case V_U64:
        ok = parse_u64(v, 0, UINT64_MAX, at);
        break;
    case V_HEX:
        ok = parse_hex64(v, at);
        break;
    }
    if (!ok && k->kind == V_UINT)
        return fail(ps, "%s must be %sa number from 0 to %u, not '%s'", k->name,
                    k->na ? "na or " : "", k->max, v);
    if (!ok)
        return fail(ps, "%s must be %s%s, not '%s'", k->name, k->na ? "na or " : "",
                    hints[k->kind], v);
    rc->known |= k->bit;
    return 0;
}

static int do_gpu(struct parser *ps, struct rec *rc)
{
    struct fake_scenario *sc = ps->sc;
    struct fake_dev *d = &rc->d;
    if (rc->index != sc->ngpus)
        return fail(ps, "index must be %u: GPUs are declared 0, 1, 2... in order", sc->ngpus);
    if ((rc->seen & K_MEMU) && !(rc->known & K_MEMU))
        d->known &= ~FK_UTIL; /* mem_util=na */
    if ((rc->seen & K_MIGP) && !(rc->known & K_MIGP))
        d->known &= ~FK_MIG;  /* mig_pending=na */
    if (!(rc->seen & K_MIGP))
        d->mig_pending = d->mig;
    if ((rc->seen & K_ECCP) && !(rc->known & K_ECCP))
        d->known &= ~FK_ECC;  /* ecc_pending=na */
    if (!(rc->seen & K_ECCP))
        d->ecc_pending = d->ecc;
    sc->gpus[sc->ngpus].dev = *d;
    sc->gpus[sc->ngpus++].nmig = 0;
    return 0;
}

static int do_mig(struct parser *ps, struct rec *rc)
{
    struct fake_scenario *sc = ps->sc;
    struct fake_gpu *g = rc->parent < sc->ngpus ? &sc->gpus[rc->parent] : NULL;
    if (!g || !(g->dev.known & FK_MIG) || g->dev.mig != 1)
        return fail(ps, "parent must be a GPU declared above with mig=1");
    if (rc->index != g->nmig || g->nmig == FAKE_MAX_MIG)
        return fail(ps, "index must be %u: MIG devices are declared 0, 1... (at most %d)",
                    g->nmig, FAKE_MAX_MIG);
    rc->d.known |= FK_RESERVED; /* MIG devices have no reservation of their own: 0 */
    g->mig[g->nmig++] = rc->d;
    return 0;
}

static int do_proc(struct parser *ps, struct rec *rc)
{
    struct fake_scenario *sc = ps->sc;
    if ((unsigned)rc->g >= sc->ngpus || (rc->m >= 0 && (unsigned)rc->m >= sc->gpus[rc->g].nmig))
        return fail(ps, "no such %s declared above", rc->m >= 0 ? "MIG device" : "GPU");
    if (sc->nprocs == FAKE_MAX_PROCS)
        return fail(ps, "more than %d proc lines", FAKE_MAX_PROCS);
    rc->p.gpu = rc->g;
    rc->p.mig = rc->m;
    rc->p.type = rc->type;
    rc->p.mem_known = rc->known & K_MEM;
    rc->p.sm_given = rc->seen & K_SM;
    rc->p.exits = (rc->seen & K_EXITS) && rc->exits;
    sc->procs[sc->nprocs++] = rc->p;
    return 0;
}

static int do_rule(struct parser *ps, struct rec *rc, enum fake_rule_kind kind)
{
    struct fake_scenario *sc = ps->sc;
    enum fake_scope scope = kind == FAKE_RULE_GROW ? FAKE_DEVICE : fake_fns[rc->r.fn].scope;
    if (sc->nrules == FAKE_MAX_RULES)
        return fail(ps, "more than %d error, hang and grow lines", FAKE_MAX_RULES);
    if ((rc->known & K_TARGET) && (scope == FAKE_GLOBAL || (scope == FAKE_INDEX && rc->m >= 0)))
        return fail(ps, "%s takes no %s=", fake_fns[rc->r.fn].name, rc->m >= 0 ? "mig" : "gpu");
    rc->r.kind = kind;
    rc->r.gpu = rc->g;
    rc->r.mig = rc->m;
    rc->r.type = rc->type;
    if (!(rc->known & K_TIMES))
        rc->r.left = kind == FAKE_RULE_GROW ? 1 : -1;
    sc->rules[sc->nrules++] = rc->r;
    return 0;
}

/* count N: what nvmlDeviceGetCount* answers instead of the number of gpu lines, any 32-bit
 * value (a lying driver); na: the number of gpu lines. */
static int do_count(struct parser *ps, const struct line *ln)
{
    struct fake_scenario *sc = ps->sc;
    uint64_t u;
    if (!ln->arg || ln->n)
        return fail(ps, "count takes one value");
    sc->count_set = false;
    if (!strcmp(ln->arg, "na"))
        return 0;
    if (!parse_u64(ln->arg, 0, 4294967295u, &u))
        return fail(ps, "count must be na or a number from 0 to 4294967295, not '%s'", ln->arg);
    sc->count = (unsigned)u;
    sc->count_set = true;
    return 0;
}

/* driver, nvml, cuda: one bare argument. */
static int do_system(struct parser *ps, const struct line *ln)
{
    struct fake_scenario *sc = ps->sc;
    const char *v = ln->arg;
    bool cuda = !strcmp(ln->word, "cuda");
    unsigned bit = cuda ? FK_CUDA : ln->word[0] == 'd' ? FK_DRIVER : FK_NVML;
    uint64_t u;
    if (!v || ln->n)
        return fail(ps, "%s takes one value", ln->word);
    sc->known &= ~bit;
    if (!strcmp(v, "na"))
        return 0;
    if (cuda && !parse_u64(v, 0, 2147483647, &u))
        return fail(ps, "cuda must be na or a number like 12040, not '%s'", v);
    if (!cuda && (!*v || strlen(v) >= sizeof sc->driver))
        return fail(ps, "%s must be 1 to %zu characters", ln->word, sizeof sc->driver - 1);
    if (cuda)
        sc->cuda = (int)u;
    else
        memcpy(bit == FK_DRIVER ? sc->driver : sc->nvml, v, strlen(v) + 1);
    sc->known |= bit;
    return 0;
}

static int do_line(struct parser *ps, const char *s, size_t n)
{
    static const struct {
        const char *word;
        unsigned dir;
        uint64_t need;
    } dirs[] = {
        {"gpu", D_GPU, K_INDEX},
        {"mig", D_MIG, K_PARENT | K_INDEX},
        {"proc", D_PROC, K_TARGET | K_PID | K_TYPE},
        {"error", D_ERROR, K_FUNC | K_CODE},
        {"hang", D_HANG, K_FUNC | K_SECS},
        {"grow", D_GROW, K_TYPE | K_BY},
    };
    static struct line ln; /* both only used under state.c's lock */
    static struct rec rc;
    unsigned d = 0;
    if (n > LINE_LEN)
        return fail(ps, "line longer than %d bytes", LINE_LEN);
    if (split(ps, s, n, &ln))
        return -1;
    if (!ln.word)
        return 0;
    if (!strcmp(ln.word, "driver") || !strcmp(ln.word, "nvml") || !strcmp(ln.word, "cuda"))
        return do_system(ps, &ln);
    if (!strcmp(ln.word, "count"))
        return do_count(ps, &ln);
    while (d < sizeof dirs / sizeof dirs[0] && strcmp(ln.word, dirs[d].word))
        d++;
    if (d == sizeof dirs / sizeof dirs[0])
        return fail(ps, "unknown directive '%s'", ln.word);
    if (ln.arg)
        return fail(ps, "expected key=value, got '%s'", ln.arg);
    memset(&rc, 0, sizeof rc);
    rc.g = rc.m = -1;
    for (unsigned i = 0; i < ln.n; i++) {
        const struct key *k = keys;
        while (k < keys + sizeof keys / sizeof keys[0]
               && (!(k->dirs & dirs[d].dir) || strcmp(k->name, ln.key[i])))
            k++;
        if (k == keys + sizeof keys / sizeof keys[0])
            return fail(ps, "unknown %s key '%s'", ln.word, ln.key[i]);
        if (set(ps, &rc, k, ln.val[i]))
            return -1;
    }
    if ((rc.known & dirs[d].need) != dirs[d].need) {
        for (const struct key *k = keys; ; k++)
            if ((k->dirs & dirs[d].dir) && (dirs[d].need & k->bit & ~rc.known))
                return fail(ps, "%s needs %s=", ln.word, k->name);
    }
    rc.d.known = rc.known & (FK_PARSER - 1);
    switch (dirs[d].dir) {
    case D_GPU: return do_gpu(ps, &rc);
    case D_MIG: return do_mig(ps, &rc);
    case D_PROC: return do_proc(ps, &rc);
    case D_ERROR: return do_rule(ps, &rc, FAKE_RULE_ERROR);
    case D_HANG: return do_rule(ps, &rc, FAKE_RULE_HANG);
    default: return do_rule(ps, &rc, FAKE_RULE_GROW);
    }
}

int fake_scenario_parse(const char *text, unsigned long len, struct fake_scenario *sc,
                        char *msg, unsigned long msglen, unsigned *line)
{
    struct parser ps = {.sc = sc, .msg = msg, .msglen = msglen};
    size_t i = 0;
    sc->known = 0;
    sc->count_set = false;
    sc->ngpus = sc->nprocs = sc->nrules = 0;
    *line = 0;
    if (memchr(text, '\0', len))
        return fail(&ps, "NUL byte in the file");
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        ++*line;
        if (do_line(&ps, text + i, n))
            return -1;
        i += n + 1;
    }
    *line = 0;
    return 0;
}
