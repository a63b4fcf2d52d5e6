/*
 * The fake NVML driver's state: the live scenario, the lock that guards it, nvmlInit's
 * reference count, the device-handle table, and the prologue every exported call runs
 * (fake_enter): log the call, reload the scenario if its file changed, check the handle,
 * apply hang and error rules.
 *
 * Why reload on every call: tests change the world (a process appears, a GPU is lost) while a
 * long-running client such as `vramguard watch` keeps NVML initialised. A stat() per call is
 * cheap; the file is re-parsed only when its path, inode, size or mtime (ns) changed, or, for
 * a file written within RACY_NS of our last read, when its text changed. A reload that fails
 * keeps the previous world and reports the problem once on stderr.
 *
 * Why a static handle table: nvmlDevice_t values must stay valid pointers across reloads, so
 * a handle is the address of a fixed slot (GPU x MIG index), never of scenario data.
 */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_MAX (1u << 20)
#define PATH_LEN 4096
/* File timestamps come from a coarse clock: a file rewritten this soon after we read it may
 * keep its mtime. */
#define RACY_NS 50000000LL

struct nvmlDevice_st {
    char unused;
};

/* Which version of a file we looked at (err: stat failed with it). */
struct sig {
    int err;
    dev_t dev;
    ino_t ino;
    off_t size;
    long long mtime_ns;
};

#define FAKE_FN_INFO(name, scope) {#name, scope},
const struct fake_fn_info fake_fns[FAKE_FN_COUNT] = {FAKE_FUNCS(FAKE_FN_INFO)};
#undef FAKE_FN_INFO

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_refs;                /* successful nvmlInit calls not yet shut down */
static struct fake_scenario g_sc[2];   /* the live one and the one being parsed */
static int g_cur;
static bool g_have;                    /* g_sc[g_cur] holds a scenario, maybe an older one */
static struct {
    char path[PATH_LEN];
    struct sig sig;
    uint64_t hash;                     /* of its text */
    long long read_ns;                 /* when it was last read */
    bool ok;                           /* it parsed, and is g_sc[g_cur] */
    char msg[PATH_LEN + 640];          /* else why not, as one line for stderr */
} g_seen;                              /* the file as last looked at */
static struct nvmlDevice_st g_handles[FAKE_MAX_GPUS][FAKE_MAX_MIG + 1];

static void put(int fd, const char *s, size_t n)
{
    if (write(fd, s, n) != (ssize_t)n) {
        /* nowhere left to complain; a test reading the output sees what is missing */
    }
}

void fake_log(enum fake_fn fn)
{
    const char *path = getenv("FAKE_NVML_LOG");
    char line[128];
    if (!path || !*path)
        return;
    size_t n = strlen(fake_fns[fn].name);
    memcpy(line, fake_fns[fn].name, n);
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        put(fd, line, n); /* one write, so lines from several threads never mix */
        close(fd);
    }
}

__attribute__((format(printf, 1, 2))) static void seen_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(g_seen.msg, sizeof g_seen.msg, fmt, ap) < 0) /* sized not to truncate */
        g_seen.msg[0] = '\0';
    va_end(ap);
}

static void fill_sig(const struct stat *st, struct sig *s)
{
    memset(s, 0, sizeof *s);
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mtime_ns = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

static bool same_sig(const struct sig *a, const struct sig *b)
{
    return a->err == b->err && a->dev == b->dev && a->ino == b->ino && a->size == b->size
        && a->mtime_ns == b->mtime_ns;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t hash(const char *p, size_t n) /* FNV-1a */
{
    uint64_t h = 14695981039346656037ULL;
    while (n--)
        h = (h ^ (unsigned char)*p++) * 1099511628211ULL;
    return h;
}

enum load { LOAD_BAD, LOAD_OK, LOAD_SAME };

/* Reads g_seen.path. With same_ok, text identical to what was read last time stops there
 * (LOAD_SAME). Otherwise parses it into the spare scenario (LOAD_OK), or fills g_seen.msg
 * (LOAD_BAD); g_seen.sig becomes that of the file actually read. */
static enum load load(bool same_ok)
{
    static char text[FILE_MAX + 1]; /* only used under g_lock */
    struct stat st;
    size_t len = 0;
    ssize_t n = 1;
    char msg[512];
    unsigned line;
    enum load r = LOAD_BAD;
    long long t = now_ns();
    int fd = open(g_seen.path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        seen_msg("fake-nvml: %s: cannot read: %s\n", g_seen.path, strerror(errno));
        goto out;
    }
    while (len < sizeof text && (n = read(fd, text + len, sizeof text - len)) != 0) {
        if (n < 0 && errno != EINTR) {
            seen_msg("fake-nvml: %s: cannot read: %s\n", g_seen.path, strerror(errno));
            goto out;
        }
        len += n > 0 ? (size_t)n : 0;
    }
    g_seen.read_ns = t;
    if (same_ok && hash(text, len) == g_seen.hash) {
        r = LOAD_SAME;
        goto out;
    }
    g_seen.hash = hash(text, len);
    fill_sig(&st, &g_seen.sig);
    if (len == sizeof text)
        seen_msg("fake-nvml: %s: larger than %u bytes\n", g_seen.path, FILE_MAX);
    else if (fake_scenario_parse(text, len, &g_sc[!g_cur], msg, sizeof msg, &line))
        seen_msg("fake-nvml: %s:%u: %s\n", g_seen.path, line, msg);
    else
        r = LOAD_OK;
out:
    if (fd >= 0)
        close(fd);
    return r;
}

/* Makes the live scenario follow the file at path. Returns whether the file as it is now is
 * a good scenario; a new problem is printed once, or every time when loud (nvmlInit). */
static bool refresh(const char *path, bool loud)
{
    struct stat st;
    struct sig s;
    const char *too_long = "fake-nvml: FAKE_NVML_SCENARIO is too long\n";
    if (strlen(path) >= PATH_LEN) {
        if (loud)
            put(STDERR_FILENO, too_long, strlen(too_long));
        return false;
    }
    memset(&s, 0, sizeof s);
    if (stat(path, &st) < 0)
        s.err = errno;
    else
        fill_sig(&st, &s);
    bool same = !strcmp(path, g_seen.path) && same_sig(&s, &g_seen.sig);
    /* Same stat, but written so soon after we read it that the kernel's coarse timestamps
     * might not show a rewrite: compare the text too (as git does for "racy" files). */
    bool racy = same && !s.err && s.mtime_ns >= g_seen.read_ns - RACY_NS;
    enum load r = LOAD_SAME;
    if (!same) {
        memcpy(g_seen.path, path, strlen(path) + 1);
        g_seen.sig = s;
    }
    if (!same || racy)
        r = load(racy);
    if (r == LOAD_SAME) {
        if (!g_seen.ok && loud)
            put(STDERR_FILENO, g_seen.msg, strlen(g_seen.msg));
        return g_seen.ok;
    }
    g_seen.ok = r == LOAD_OK;
    if (!g_seen.ok)
        put(STDERR_FILENO, g_seen.msg, strlen(g_seen.msg));
    else
        g_cur = !g_cur, g_have = true;
    return g_seen.ok;
}

nvmlDevice_t fake_handle(unsigned g, int m)
{
    return &g_handles[g][m + 1];
}

/* Which slot a handle is, or false when it is not one of ours. */
static bool slot_of(nvmlDevice_t h, int *g, int *m)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)&g_handles[0][0];
    if (p < base || p >= base + sizeof g_handles || (p - base) % sizeof g_handles[0][0])
        return false;
    size_t i = (p - base) / sizeof g_handles[0][0];
    *g = (int)(i / (FAKE_MAX_MIG + 1));
    *m = (int)(i % (FAKE_MAX_MIG + 1)) - 1;
    return true;
}

/* The first rule of that kind that applies to this call and has uses left (one is used). */
static struct fake_rule *match(struct fake_scenario *sc, enum fake_rule_kind kind,
                               enum fake_fn fn, enum fake_ptype type, int g, int m)
{
    for (struct fake_rule *r = sc->rules; r < sc->rules + sc->nrules; r++) {
        if (r->kind != kind || r->left == 0 || (kind == FAKE_RULE_GROW ? r->type != type
                                                                        : r->fn != fn))
            continue;
        if (r->gpu != -1 && (r->gpu != g || r->mig != m))
            continue;
        if (r->left > 0)
            r->left--;
        return r;
    }
    return NULL;
}

unsigned fake_grow(const struct fake_call *c, enum fake_ptype type)
{
    struct fake_rule *r = match(c->sc, FAKE_RULE_GROW, FAKE_FN_COUNT, type, c->g, c->m);
    return r ? r->by : 0;
}

/* Everything fake_enter checks before hang and error rules, with the lock held. */
static nvmlReturn_t prologue(enum fake_fn fn, nvmlDevice_t handle, unsigned index,
                             struct fake_call *c)
{
    const char *path = getenv("FAKE_NVML_SCENARIO");
    bool init = fn == FAKE_FN_nvmlInit || fn == FAKE_FN_nvmlInit_v2;
    if (!path || !*path)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (!init && g_refs == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!refresh(path, init) && (init || !g_have))
        return NVML_ERROR_UNKNOWN;
    *c = (struct fake_call){.sc = &g_sc[g_cur], .g = -1, .m = -1};
    if (fake_fns[fn].scope == FAKE_INDEX)
        c->g = index < FAKE_MAX_GPUS ? (int)index : FAKE_MAX_GPUS; /* matches no gpu= */
    if (fake_fns[fn].scope != FAKE_DEVICE)
        return NVML_SUCCESS;
    if (!handle || !slot_of(handle, &c->g, &c->m))
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((unsigned)c->g >= c->sc->ngpus)
        return NVML_ERROR_GPU_IS_LOST;
    c->gpu = &c->sc->gpus[c->g];
    if (c->m >= 0 && (unsigned)c->m >= c->gpu->nmig)
        return NVML_ERROR_GPU_IS_LOST;
    c->dev = c->m >= 0 ? &c->gpu->mig[c->m] : &c->gpu->dev;
    return NVML_SUCCESS;
}

nvmlReturn_t fake_enter(enum fake_fn fn, nvmlDevice_t handle, unsigned index,
                        struct fake_call *c)
{
    nvmlReturn_t r;
    bool hung = false;
    fake_log(fn);
    pthread_mutex_lock(&g_lock);
    while ((r = prologue(fn, handle, index, c)) == NVML_SUCCESS && !hung) {
        struct fake_rule *h = match(c->sc, FAKE_RULE_HANG, fn, 0, c->g, c->m);
        if (!h)
            break;
        /* Sleep unlocked, so other threads (and a watchdog) can still call in; then do the
         * call normally against whatever the world is by then. */
        struct timespec ts = {.tv_sec = (time_t)(h->ns / 1000000000u),
                              .tv_nsec = (long)(h->ns % 1000000000u)};
        hung = true;
        pthread_mutex_unlock(&g_lock);
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&g_lock);
    }
    struct fake_rule *e = r ? NULL : match(c->sc, FAKE_RULE_ERROR, fn, 0, c->g, c->m);
    if (e)
        r = e->code;
    if (r != NVML_SUCCESS)
        pthread_mutex_unlock(&g_lock);
    return r;
}

void fake_leave(void)
{
    pthread_mutex_unlock(&g_lock);
}

nvmlReturn_t fake_refcount(enum fake_fn fn)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(fn, NULL, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    if (fn == FAKE_FN_nvmlShutdown)
        g_refs--; /* prologue saw g_refs > 0 */
    else
        g_refs++;
    fake_leave();
    return NVML_SUCCESS;
}
