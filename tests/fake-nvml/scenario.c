/*
 * The scenario file parser of the fake NVML driver: text in, struct fake_scenario out, or the
 * line and reason it is wrong. Written by hand and strict on purpose (no strtoul, no sign,
 * no partial numbers, no unknown keys), because a typo in a test scenario that silently means
 * something else makes a test pass for the wrong reason. The format is in README.md.
 */
#include "fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LINE_MAX_LEN 1024
#define MAX_PAIRS 24

/* One line split into words: the directive, an optional bare argument and key=value pairs.
 * Strings point into buf, unquoted and NUL-terminated. */
struct line {
    char buf[LINE_MAX_LEN + 1];
    const char *word, *arg;
    unsigned n;
    struct {
        const char *key, *val;
    } p[MAX_PAIRS];
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
    /* A truncated message is still the right message: the return value is not needed. */
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
 * blank) or double-quoted with \" and \\ escapes. `#` at the start of a word begins a comment. */
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
        if (i < n && s[i] == '"') {
            if (o != start)
                return fail(ps, "stray '\"'");
            for (i++;; i++) {
                if (i == n)
                    return fail(ps, "unterminated quoted value");
                if (s[i] == '"')
                    break;
                if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\'))
                    i++;
                ln->buf[o++] = s[i];
            }
            i++;
            if (i < n && !is_space(s[i]))
                return fail(ps, "text after a closing '\"'");
        } else {
            while (i < n && !is_space(s[i])) {
                if (s[i] == '"' || s[i] == '=')
                    return fail(ps, "stray '%c' in a value", s[i]);
                ln->buf[o++] = s[i++];
            }
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
        } else {
            if (ln->n == MAX_PAIRS)
                return fail(ps, "too many keys");
            for (unsigned j = 0; j < ln->n; j++)
                if (!strcmp(ln->p[j].key, key))
                    return fail(ps, "key '%s' given twice", key);
            ln->p[ln->n].key = key;
            ln->p[ln->n].val = val;
            ln->n++;
        }
    }
}

/* Decimal digits only, at most max. */
static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
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
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    char digits[32];
    size_t n = strspn(s, "0123456789");
    unsigned shift = 0;
    if (n == 0 || n >= sizeof digits)
        return false;
    if (s[n]) {
        for (unsigned u = 0; u < 4 && !shift; u++)
            if (!strcmp(s + n, units[u]))
                shift = 10 * (u + 1);
        if (!shift)
            return false;
    }
    memcpy(digits, s, n);
    digits[n] = '\0';
    if (!parse_u64(digits, UINT64_MAX >> shift, out))
        return false;
    *out <<= shift;
    return true;
}

/* An int, optionally negative. */
static bool parse_int(const char *s, int *out)
{
    uint64_t v;
    bool neg = *s == '-';
    if (!parse_u64(s + neg, neg ? 2147483648u : 2147483647u, &v))
        return false;
    *out = neg ? (int)(-(int64_t)v) : (int)v;
    return true;
}

/* Seconds as digits[.digits] (at most 9 decimals, at most a day), to nanoseconds. */
static bool parse_seconds(const char *s, uint64_t *ns)
{
    char whole[16];
    uint64_t sec, frac = 0, scale = 1000000000u;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n >= sizeof whole)
        return false;
    memcpy(whole, s, n);
    whole[n] = '\0';
    if (!parse_u64(whole, 86400, &sec))
        return false;
    if (s[n] == '.') {
        const char *f = s + n + 1;
        if (!*f || strlen(f) > 9)
            return false;
        for (; *f; f++) {
            if (*f < '0' || *f > '9')
                return false;
            scale /= 10;
            frac += (uint64_t)(*f - '0') * scale;
        }
    } else if (s[n]) {
        return false;
    }
    *ns = sec * 1000000000u + frac;
    return true;
}

/* n hex digits, 1 <= n <= max. */
static bool parse_hex(const char *s, size_t n, size_t max, unsigned *out)
{
    unsigned v = 0;
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
                   : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                   : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16;
        if (d == 16)
            return false;
        v = v * 16 + d;
    }
    *out = v;
    return true;
}

/* DOMAIN:BUS:DEVICE.FUNCTION in hex, e.g. 00000000:07:00.0. */
static bool parse_bus(const char *s, struct fake_dev *d)
{
    const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *dot = c2 ? strchr(c2 + 1, '.') : NULL;
    if (!dot || strlen(s) >= sizeof d->bus)
        return false;
    if (!parse_hex(s, (size_t)(c1 - s), 8, &d->domain)
        || !parse_hex(c1 + 1, (size_t)(c2 - c1 - 1), 2, &d->bus_no)
        || !parse_hex(c2 + 1, (size_t)(dot - c2 - 1), 2, &d->dev_no)
        || !parse_hex(dot + 1, strlen(dot + 1), 1, &d->fn_no) || d->dev_no > 31 || d->fn_no > 7)
        return false;
    memcpy(d->bus, s, strlen(s) + 1);
    return true;
}

/* "G/M": GPU G's MIG device M. */
static bool parse_mig_ref(const char *s, int *g, int *m)
{
    char gs[8];
    uint64_t gv, mv;
    const char *slash = strchr(s, '/');
    if (!slash || (size_t)(slash - s) >= sizeof gs)
        return false;
    memcpy(gs, s, (size_t)(slash - s));
    gs[slash - s] = '\0';
    if (!parse_u64(gs, FAKE_MAX_GPUS - 1, &gv) || !parse_u64(slash + 1, FAKE_MAX_MIG - 1, &mv))
        return false;
    *g = (int)gv;
    *m = (int)mv;
    return true;
}

static bool is_na(const char *v)
{
    return !strcmp(v, "na");
}

/* A string field of at most FAKE_STR - 1 bytes, or na. */
static int set_str(struct parser *ps, struct fake_dev *d, unsigned bit, char *dst,
                   const char *k, const char *v)
{
    size_t n = strlen(v);
    d->known &= ~bit;
    if (is_na(v))
        return 0;
    if (n == 0 || n >= FAKE_STR)
        return fail(ps, "%s must be 1 to %d characters", k, FAKE_STR - 1);
    memcpy(dst, v, n + 1);
    d->known |= bit;
    return 0;
}

/* An unsigned field in [0, max], or na. */
static int set_uint(struct parser *ps, struct fake_dev *d, unsigned bit, unsigned *dst,
                    const char *k, const char *v, unsigned max)
{
    uint64_t u;
    d->known &= ~bit;
    if (is_na(v))
        return 0;
    if (!parse_u64(v, max, &u))
        return fail(ps, "%s must be na or a number from 0 to %u, not '%s'", k, max, v);
    *dst = (unsigned)u;
    d->known |= bit;
    return 0;
}

/* A size field, or na. */
static int set_size(struct parser *ps, struct fake_dev *d, unsigned bit, uint64_t *dst,
                    const char *k, const char *v)
{
    d->known &= ~bit;
    if (is_na(v))
        return 0;
    if (!parse_size(v, dst))
        return fail(ps, "%s must be na or a size (bytes, KiB, MiB, GiB, TiB), not '%s'", k, v);
    d->known |= bit;
    return 0;
}

/* Keys that GPUs and MIG devices share: 1 if k was one of them, 0 if not, -1 on error. */
static int dev_key(struct parser *ps, struct fake_dev *d, const char *k, const char *v)
{
    if (!strcmp(k, "uuid"))
        return set_str(ps, d, FK_UUID, d->uuid, k, v) ? -1 : 1;
    if (!strcmp(k, "name"))
        return set_str(ps, d, FK_NAME, d->name, k, v) ? -1 : 1;
    if (!strcmp(k, "total"))
        return set_size(ps, d, FK_TOTAL, &d->total, k, v) ? -1 : 1;
    if (!strcmp(k, "used")) {
        d->known &= ~(FK_USED | FK_USED_NA);
        if (!strcmp(v, "auto"))
            return 1;
        if (is_na(v))
            return d->known |= FK_USED_NA, 1;
        return set_size(ps, d, FK_USED, &d->used, k, v) ? -1 : 1;
    }
    return 0;
}

/* A number in [0, max] or na for keys whose getter depends on more than one key:
 * 1 given, -1 na, -2 wrong (with the message set). */
static int tri(struct parser *ps, const char *k, const char *v, unsigned max, unsigned *out)
{
    uint64_t u;
    if (is_na(v))
        return -1;
    if (!parse_u64(v, max, &u))
        return fail(ps, "%s must be na or a number from 0 to %u, not '%s'", k, max, v) - 1;
    *out = (unsigned)u;
    return 1;
}

static int parse_cc(struct parser *ps, struct fake_dev *d, const char *v)
{
    const char *dot = strchr(v, '.');
    char maj[4];
    uint64_t a, b;
    d->known &= ~FK_CC;
    if (is_na(v))
        return 0;
    if (!dot || dot - v >= (long)sizeof maj)
        return fail(ps, "cc must be na or MAJOR.MINOR, not '%s'", v);
    memcpy(maj, v, (size_t)(dot - v));
    maj[dot - v] = '\0';
    if (!parse_u64(maj, 99, &a) || !parse_u64(dot + 1, 99, &b))
        return fail(ps, "cc must be na or MAJOR.MINOR, not '%s'", v);
    d->cc_major = (int)a;
    d->cc_minor = (int)b;
    d->known |= FK_CC;
    return 0;
}

static int do_gpu(struct parser *ps, const struct line *ln)
{
    struct fake_scenario *sc = ps->sc;
    if (sc->ngpus == FAKE_MAX_GPUS)
        return fail(ps, "more than %d GPUs", FAKE_MAX_GPUS);
    struct fake_gpu *g = &sc->gpus[sc->ngpus];
    struct fake_dev *d = &g->dev;
    /* 0 omitted, 1 given, -1 na: mig_pending defaults to mig, mem_util to 0 */
    int have_mig = 0, have_pend = 0, have_memu = 0;
    bool have_index = false;
    memset(g, 0, sizeof *g);
    for (unsigned i = 0; i < ln->n; i++) {
        const char *k = ln->p[i].key, *v = ln->p[i].val;
        uint64_t u;
        int r = dev_key(ps, d, k, v);
        if (r < 0)
            return -1;
        if (r)
            continue;
        if (!strcmp(k, "index")) {
            if (!parse_u64(v, FAKE_MAX_GPUS, &u) || u != sc->ngpus)
                return fail(ps, "index must be %u: GPUs are declared 0, 1, 2... in order",
                            sc->ngpus);
            have_index = true;
        } else if (!strcmp(k, "minor")) {
            r = set_uint(ps, d, FK_MINOR, &d->minor, k, v, 255);
        } else if (!strcmp(k, "bus")) {
            d->known &= ~FK_BUS;
            if (!is_na(v) && !parse_bus(v, d))
                return fail(ps, "bus must be na or DOMAIN:BUS:DEVICE.FN in hex, not '%s'", v);
            d->known |= is_na(v) ? 0 : FK_BUS;
        } else if (!strcmp(k, "reserved")) {
            r = set_size(ps, d, FK_RESERVED, &d->reserved, k, v);
        } else if (!strcmp(k, "util")) {
            r = set_uint(ps, d, FK_UTIL, &d->util, k, v, 100);
        } else if (!strcmp(k, "mem_util")) {
            r = (have_memu = tri(ps, k, v, 100, &d->mem_util)) == -2 ? -1 : 0;
        } else if (!strcmp(k, "cc")) {
            r = parse_cc(ps, d, v);
        } else if (!strcmp(k, "persistence")) {
            r = set_uint(ps, d, FK_PERSIST, &d->persistence, k, v, 1);
        } else if (!strcmp(k, "compute_mode")) {
            r = set_uint(ps, d, FK_CMODE, &d->compute_mode, k, v, 3);
        } else if (!strcmp(k, "mig")) {
            r = (have_mig = tri(ps, k, v, 1, &d->mig)) == -2 ? -1 : 0;
        } else if (!strcmp(k, "mig_pending")) {
            r = (have_pend = tri(ps, k, v, 1, &d->mig_pending)) == -2 ? -1 : 0;
        } else {
            return fail(ps, "unknown gpu key '%s'", k);
        }
        if (r < 0)
            return -1;
    }
    if (!have_index)
        return fail(ps, "gpu needs index=%u", sc->ngpus);
    if (have_memu == -1)
        d->known &= ~FK_UTIL;
    if (have_mig == 1 && have_pend != -1) {
        d->known |= FK_MIG;
        if (!have_pend)
            d->mig_pending = d->mig;
    }
    sc->ngpus++;
    return 0;
}

static int do_mig(struct parser *ps, const struct line *ln)
{
    struct fake_scenario *sc = ps->sc;
    struct fake_gpu *g = NULL;
    struct fake_dev d;
    bool have_index = false;
    uint64_t u;
    memset(&d, 0, sizeof d);
    d.known = FK_RESERVED; /* MIG devices have no reservation of their own: 0 */
    for (unsigned i = 0; i < ln->n; i++) {
        const char *k = ln->p[i].key, *v = ln->p[i].val;
        int r = dev_key(ps, &d, k, v);
        if (r < 0)
            return -1;
        if (r)
            continue;
        if (!strcmp(k, "parent")) {
            if (!parse_u64(v, FAKE_MAX_GPUS, &u) || u >= sc->ngpus)
                return fail(ps, "parent must be a GPU index declared above, not '%s'", v);
            g = &sc->gpus[u];
            if (!(g->dev.known & FK_MIG) || g->dev.mig != 1)
                return fail(ps, "GPU %s does not have mig=1", v);
        } else if (!strcmp(k, "index")) {
            if (!g)
                return fail(ps, "parent= must come before index=");
            if (g->nmig == FAKE_MAX_MIG)
                return fail(ps, "more than %d MIG devices on a GPU", FAKE_MAX_MIG);
            if (!parse_u64(v, FAKE_MAX_MIG, &u) || u != g->nmig)
                return fail(ps, "index must be %u: MIG devices are declared 0, 1... in order",
                            g->nmig);
            have_index = true;
        } else if (!strcmp(k, "gi")) {
            if (set_uint(ps, &d, FK_GI, &d.gi, k, v, 0xFFFFFFFEu))
                return -1;
        } else if (!strcmp(k, "ci")) {
            if (set_uint(ps, &d, FK_CI, &d.ci, k, v, 0xFFFFFFFEu))
                return -1;
        } else {
            return fail(ps, "unknown mig key '%s'", k);
        }
    }
    if (!g || !have_index)
        return fail(ps, "mig needs parent= and index=");
    g->mig[g->nmig++] = d;
    return 0;
}

/* gpu=G or mig=G/M, for proc (which must name a declared device) and rules (which need not). */
static int target(struct parser *ps, const char *k, const char *v, bool declared, int *g,
                  int *m)
{
    uint64_t u;
    if (!strcmp(k, "gpu")) {
        if (!parse_u64(v, FAKE_MAX_GPUS - 1, &u) || (declared && u >= ps->sc->ngpus))
            return fail(ps, "gpu must be a GPU index%s, not '%s'", declared ? " declared above"
                                                                             : " below 64", v);
        *g = (int)u;
        *m = -1;
        return 0;
    }
    if (!parse_mig_ref(v, g, m)
        || (declared && ((unsigned)*g >= ps->sc->ngpus
                         || (unsigned)*m >= ps->sc->gpus[*g].nmig)))
        return fail(ps, "mig must be GPU/INDEX of a MIG device%s, not '%s'",
                    declared ? " declared above" : "", v);
    return 0;
}

static int parse_type(struct parser *ps, const char *v, enum fake_ptype *t)
{
    if (!strcmp(v, "compute"))
        *t = FAKE_COMPUTE;
    else if (!strcmp(v, "graphics"))
        *t = FAKE_GRAPHICS;
    else if (!strcmp(v, "mps"))
        *t = FAKE_MPS;
    else
        return fail(ps, "type must be compute, graphics or mps, not '%s'", v);
    return 0;
}

static int do_proc(struct parser *ps, const struct line *ln)
{
    struct fake_scenario *sc = ps->sc;
    struct fake_proc p = {.gpu = 0, .mig = -1};
    bool have_pid = false, have_type = false, have_dev = false;
    int g = -1;
    uint64_t u;
    if (sc->nprocs == FAKE_MAX_PROCS)
        return fail(ps, "more than %d proc lines", FAKE_MAX_PROCS);
    for (unsigned i = 0; i < ln->n; i++) {
        const char *k = ln->p[i].key, *v = ln->p[i].val;
        if (!strcmp(k, "gpu") || !strcmp(k, "mig")) {
            if (have_dev)
                return fail(ps, "give one of gpu= and mig=");
            if (target(ps, k, v, true, &g, &p.mig))
                return -1;
            p.gpu = (unsigned)g;
            have_dev = true;
        } else if (!strcmp(k, "pid")) {
            if (!parse_u64(v, UINT32_MAX, &u))
                return fail(ps, "pid must be a number from 0 to 4294967295, not '%s'", v);
            p.pid = (uint32_t)u;
            have_pid = true;
        } else if (!strcmp(k, "type")) {
            if (parse_type(ps, v, &p.type))
                return -1;
            have_type = true;
        } else if (!strcmp(k, "mem")) {
            p.mem_known = !is_na(v);
            if (p.mem_known && !parse_size(v, &p.mem))
                return fail(ps, "mem must be na or a size, not '%s'", v);
        } else if (!strcmp(k, "sm")) {
            if (!parse_u64(v, 100, &u))
                return fail(ps, "sm must be a number from 0 to 100, not '%s'", v);
            p.sm = (unsigned)u;
        } else {
            return fail(ps, "unknown proc key '%s'", k);
        }
    }
    if (!have_dev || !have_pid || !have_type)
        return fail(ps, "proc needs gpu= or mig=, pid= and type=");
    sc->procs[sc->nprocs++] = p;
    return 0;
}

/* error, hang and grow. */
static int do_rule(struct parser *ps, const struct line *ln, enum fake_rule_kind kind)
{
    struct fake_scenario *sc = ps->sc;
    struct fake_rule r = {.kind = kind, .fn = FAKE_FN_COUNT, .gpu = -1, .mig = -1, .left = -1};
    bool have_code = false, have_secs = false, have_type = false, have_by = false;
    uint64_t u;
    if (sc->nrules == FAKE_MAX_RULES)
        return fail(ps, "more than %d error, hang and grow lines", FAKE_MAX_RULES);
    if (kind == FAKE_RULE_GROW)
        r.left = 1;
    for (unsigned i = 0; i < ln->n; i++) {
        const char *k = ln->p[i].key, *v = ln->p[i].val;
        if (!strcmp(k, "func") && kind != FAKE_RULE_GROW) {
            for (unsigned f = 0; f < FAKE_FN_COUNT && r.fn == FAKE_FN_COUNT; f++)
                if (!strcmp(v, fake_fns[f].name) && fake_fns[f].scope != FAKE_NONE)
                    r.fn = (enum fake_fn)f;
            if (r.fn == FAKE_FN_COUNT)
                return fail(ps, "unknown function '%s'", v);
        } else if (!strcmp(k, "gpu") || !strcmp(k, "mig")) {
            if (r.gpu != -1)
                return fail(ps, "give one of gpu= and mig=");
            if (target(ps, k, v, false, &r.gpu, &r.mig))
                return -1;
        } else if (!strcmp(k, "times")) {
            if (!parse_u64(v, 1000000000, &u) || u == 0)
                return fail(ps, "times must be a number from 1, not '%s'", v);
            r.left = (long)u;
        } else if (!strcmp(k, "code") && kind == FAKE_RULE_ERROR) {
            if (!parse_int(v, &r.code) || r.code == NVML_SUCCESS)
                return fail(ps, "code must be a nonzero integer, not '%s'", v);
            have_code = true;
        } else if (!strcmp(k, "seconds") && kind == FAKE_RULE_HANG) {
            if (!parse_seconds(v, &r.ns))
                return fail(ps, "seconds must be like 30 or 0.25 (at most 86400), not '%s'", v);
            have_secs = true;
        } else if (!strcmp(k, "type") && kind == FAKE_RULE_GROW) {
            if (parse_type(ps, v, &r.type))
                return -1;
            have_type = true;
        } else if (!strcmp(k, "by") && kind == FAKE_RULE_GROW) {
            if (!parse_u64(v, UINT32_MAX, &u))
                return fail(ps, "by must be a number, not '%s'", v);
            r.by = (unsigned)u;
            have_by = true;
        } else {
            return fail(ps, "unknown %s key '%s'", ln->word, k);
        }
    }
    if (kind == FAKE_RULE_ERROR && (r.fn == FAKE_FN_COUNT || !have_code))
        return fail(ps, "error needs func= and code=");
    if (kind == FAKE_RULE_HANG && (r.fn == FAKE_FN_COUNT || !have_secs))
        return fail(ps, "hang needs func= and seconds=");
    if (kind == FAKE_RULE_GROW && (!have_type || !have_by))
        return fail(ps, "grow needs type= and by=");
    if (r.gpu != -1 && kind != FAKE_RULE_GROW) {
        enum fake_scope scope = fake_fns[r.fn].scope;
        if (scope == FAKE_GLOBAL || (scope == FAKE_INDEX && r.mig != -1))
            return fail(ps, "%s takes no %s=", fake_fns[r.fn].name, r.mig != -1 ? "mig" : "gpu");
    }
    sc->rules[sc->nrules++] = r;
    return 0;
}

/* driver, nvml, cuda: one bare argument. */
static int do_system(struct parser *ps, const struct line *ln)
{
    struct fake_scenario *sc = ps->sc;
    const char *w = ln->word, *v = ln->arg;
    bool cuda = !strcmp(w, "cuda");
    unsigned bit = cuda ? FK_CUDA : !strcmp(w, "driver") ? FK_DRIVER : FK_NVML;
    char *dst = bit == FK_DRIVER ? sc->driver : sc->nvml;
    uint64_t u;
    if (!v || ln->n)
        return fail(ps, "%s takes one value", w);
    sc->known &= ~bit;
    if (is_na(v))
        return 0;
    if (cuda) {
        if (!parse_u64(v, 2147483647, &u))
            return fail(ps, "cuda must be na or a number like 12040, not '%s'", v);
        sc->cuda = (int)u;
    } else {
        size_t n = strlen(v);
        if (n == 0 || n >= sizeof sc->driver)
            return fail(ps, "%s must be 1 to %zu characters", w, sizeof sc->driver - 1);
        memcpy(dst, v, n + 1);
    }
    sc->known |= bit;
    return 0;
}

static int do_line(struct parser *ps, const char *s, size_t n)
{
    static struct line ln; /* only used under state.c's lock */
    if (n > LINE_MAX_LEN)
        return fail(ps, "line longer than %d bytes", LINE_MAX_LEN);
    if (split(ps, s, n, &ln))
        return -1;
    if (!ln.word)
        return 0;
    if (!strcmp(ln.word, "driver") || !strcmp(ln.word, "nvml") || !strcmp(ln.word, "cuda"))
        return do_system(ps, &ln);
    if (ln.arg)
        return fail(ps, "expected key=value, got '%s'", ln.arg);
    if (!strcmp(ln.word, "gpu"))
        return do_gpu(ps, &ln);
    if (!strcmp(ln.word, "mig"))
        return do_mig(ps, &ln);
    if (!strcmp(ln.word, "proc"))
        return do_proc(ps, &ln);
    if (!strcmp(ln.word, "error"))
        return do_rule(ps, &ln, FAKE_RULE_ERROR);
    if (!strcmp(ln.word, "hang"))
        return do_rule(ps, &ln, FAKE_RULE_HANG);
    if (!strcmp(ln.word, "grow"))
        return do_rule(ps, &ln, FAKE_RULE_GROW);
    return fail(ps, "unknown directive '%s'", ln.word);
}

int fake_scenario_parse(const char *text, unsigned long len, struct fake_scenario *sc,
                        char *msg, unsigned long msglen, unsigned *line)
{
    struct parser ps = {.sc = sc, .msg = msg, .msglen = msglen};
    size_t i = 0;
    sc->known = 0;
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
