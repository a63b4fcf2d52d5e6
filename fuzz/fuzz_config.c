/*
 * Fuzz target: the `watch`/`check` config file (vg_watch_config_load, docs/config.md), which
 * also parses `expect` lines (vg_expect_parse) and every key's value the way the flags do. The
 * input is the file's content, served from a memfd. Invariants: a file that fails leaves the
 * config as it was and says "PATH:LINE: ..." or "PATH: ..."; one that loads gives values within
 * each key's bounds and expectations that name a GPU and at least one WHO; merging with flags
 * and copying never leak (LeakSanitizer).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "cmd/watch_config.h"

static void check_loaded(const struct vg_watch_config *c)
{
    FUZZ_CHECK(c->interval_ms >= 100 && c->interval_ms <= 86400000);
    FUZZ_CHECK(c->format == VG_WATCH_TEXT || c->format == VG_WATCH_JSON);
    if (c->exec)
        FUZZ_CHECK(strlen(c->exec) > 0 || (c->set & VG_WCFG_EXEC));
    for (size_t i = 0; i < c->expect.n; i++) {
        const struct vg_expect *e = &c->expect.v[i];
        FUZZ_CHECK(e->gpu && e->gpu[0] && e->text);
        FUZZ_CHECK(e->nwho >= 1 && e->who);
        for (size_t k = 0; k < e->nwho; k++) {
            const struct vg_who *w = &e->who[k];
            FUZZ_CHECK(w->kind == VG_WHO_NONE || w->kind == VG_WHO_PID || w->kind == VG_WHO_UID ||
                       w->kind == VG_WHO_USER);
            if (w->kind == VG_WHO_USER)
                FUZZ_CHECK(w->user && w->user[0]);
            if (w->kind == VG_WHO_PID)
                FUZZ_CHECK(w->pid > 0);
            if (w->kind == VG_WHO_NONE)
                FUZZ_CHECK(e->nwho == 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            abort();
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

    struct vg_watch_config c;
    vg_watch_config_init(&c);
    c.interval_ms = 4321; /* a marker: a failed load must not touch it */
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_watch_config_load(&c, path, 0, &err);
    if (rc != 0) {
        FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM || rc == -E2BIG || rc == -EFBIG);
        FUZZ_CHECK(c.interval_ms == 4321 && c.set == 0 && c.expect.n == 0 && !c.exec);
        const char *msg = vg_err_msg(&err);
        FUZZ_CHECK(msg && strncmp(msg, path, strlen(path)) == 0);
    } else {
        if (!(c.set & VG_WCFG_INTERVAL))
            c.interval_ms = VG_WATCH_INTERVAL_DEFAULT_MS;
        check_loaded(&c);
        /* Flags over the file, as `watch --config F --interval 1s --expect 0=none` does. */
        struct vg_watch_config flags, merged;
        vg_watch_config_init(&flags);
        vg_watch_config_init(&merged);
        struct vg_err e2 = VG_ERR_INIT;
        FUZZ_CHECK(vg_watch_config_set(&flags, "interval", "1s", &e2) == 0);
        FUZZ_CHECK(vg_watch_config_set(&flags, "expect", "0=none", &e2) == 0);
        FUZZ_CHECK(vg_watch_config_merge(&merged, &c, &flags) == 0);
        FUZZ_CHECK(merged.interval_ms == 1000 && merged.expect.n == 1);
        check_loaded(&merged);
        vg_watch_config_release(&merged);
        vg_watch_config_release(&flags);
        vg_err_release(&e2);
    }
    vg_watch_config_release(&c);
    vg_err_release(&err);
    close(fd);

    /* The same bytes as one --expect value. */
    char *s = fuzz_cstr(data, size);
    struct vg_expect_set set;
    vg_expect_set_init(&set);
    struct vg_err e3 = VG_ERR_INIT;
    rc = vg_expect_parse(&set, s, &e3);
    if (rc == 0) {
        FUZZ_CHECK(set.n == 1);
        struct vg_watch_config one;
        vg_watch_config_init(&one);
        one.expect = set;
        check_loaded(&one);
        struct vg_expect_set copy;
        vg_expect_set_init(&copy);
        FUZZ_CHECK(vg_expect_set_copy(&copy, &set) == 0 && copy.n == 1);
        vg_expect_set_release(&copy);
    } else {
        FUZZ_CHECK(set.n == 0 && vg_err_msg(&e3)[0]);
    }
    vg_expect_set_release(&set);
    vg_err_release(&e3);
    free(s);
    return 0;
}
