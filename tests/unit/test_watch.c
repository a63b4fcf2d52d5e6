/*
 * Unit tests for the watch engine and its parts (src/model/watch.c, src/render/event.c,
 * src/cmd/watch_config.c, src/rules/expect.c, src/act/alert.c): the config file parser
 * (strict, FILE:LINE errors, precedence),
 * expectations, the alert command's word splitting, and the
 * event diffing on hand-made snapshots: present events first, silence without change, memory
 * against the last reported figure, PID reuse, alerts once, idle-holder from the idle history,
 * GPUs lost and back, and the frozen view while the driver is hung.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "act/alert.h"
#include "cmd/watch_config.h"
#include "model/watch.h"
#include "render/event.h"
#include "rules/expect.h"
#include "rules/health.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* ---- config ----------------------------------------------------------------------------- */

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/vg-watch-conf-XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static int load(struct vg_watch_config *c, const char *text, struct vg_err *err)
{
    char *path = write_tmp(text);
    int rc = vg_watch_config_load(c, path, 0, err);
    if (rc && err->msg) {
        /* drop the temporary path from the message so tests can compare the rest */
        const char *colon = strstr(err->msg, path);
        if (colon) {
            char *rest = strdup(err->msg + strlen(path));
            assert_non_null(rest);
            free(err->msg);
            err->msg = rest;
        }
    }
    unlink(path);
    free(path);
    return rc;
}

static void test_config_defaults_and_file(void **state)
{
    (void)state;
    struct vg_watch_config c;
    vg_watch_config_init(&c);
    assert_int_equal(c.interval_ms, 2000);
    assert_int_equal(c.threshold, 10 * MiB);
    assert_int_equal(c.exec_timeout_ms, 10000);
    assert_int_equal(c.idle_after_ms, 3600000);
    assert_int_equal(c.full_scan_ms, 60000);
    assert_int_equal(c.format, VG_WATCH_TEXT);
    assert_null(c.exec);
    assert_int_equal(c.set, 0);

    struct vg_err err = VG_ERR_INIT;
    int rc = load(&c,
                  "# a comment\n"
                  "\n"
                  "   interval=500ms  \n"
                  "threshold = 1GiB\r\n"
                  "expect = 0=none\n"
                  "expect = GPU-1234=alice,42,uid:1000\n"
                  "exec = /usr/local/bin/page --team gpu  # not a comment: part of the value\n"
                  "shell = yes\n"
                  "exec_timeout = 3s\n"
                  "format = json\n"
                  "idle_after = 2h\n"
                  "nvml_timeout = 750ms\n"
                  "full_scan = 5m",
                  &err);
    if (rc)
        fail_msg("%s", vg_err_msg(&err));
    assert_int_equal(c.interval_ms, 500);
    assert_int_equal(c.threshold, GiB);
    assert_int_equal(c.expect.n, 2);
    assert_string_equal(c.expect.v[0].text, "0=none");
    assert_int_equal(c.expect.v[0].who[0].kind, VG_WHO_NONE);
    assert_string_equal(c.expect.v[1].gpu, "GPU-1234");
    assert_int_equal(c.expect.v[1].nwho, 3);
    assert_int_equal(c.expect.v[1].who[0].kind, VG_WHO_USER);
    assert_string_equal(c.expect.v[1].who[0].user, "alice");
    assert_int_equal(c.expect.v[1].who[1].kind, VG_WHO_PID);
    assert_int_equal(c.expect.v[1].who[1].pid, 42);
    assert_int_equal(c.expect.v[1].who[2].kind, VG_WHO_UID);
    assert_int_equal(c.expect.v[1].who[2].uid, 1000);
    assert_string_equal(c.exec, "/usr/local/bin/page --team gpu  # not a comment: part of the value");
    assert_true(c.shell);
    assert_int_equal(c.exec_timeout_ms, 3000);
    assert_int_equal(c.format, VG_WATCH_JSON);
    assert_int_equal(c.idle_after_ms, 7200000);
    assert_int_equal(c.nvml_timeout_ms, 750);
    assert_int_equal(c.full_scan_ms, 300000);
    assert_int_equal(c.set, VG_WCFG_INTERVAL | VG_WCFG_THRESHOLD | VG_WCFG_EXPECT | VG_WCFG_EXEC |
                                VG_WCFG_SHELL | VG_WCFG_EXEC_TIMEOUT | VG_WCFG_FORMAT |
                                VG_WCFG_IDLE_AFTER | VG_WCFG_NVML_TIMEOUT | VG_WCFG_FULL_SCAN);
    vg_watch_config_release(&c);
    vg_err_release(&err);
}

static void test_config_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"interval = 2s\ncolour = red\n", ":2: unknown key 'colour' (known: interval, threshold, "
                                          "expect, exec, shell, exec_timeout, format, idle_after, "
                                          "nvml_timeout, full_scan)"},
        {"interval 2s\n", ":1: expected 'key = value', got 'interval 2s'"},
        {"= 2s\n", ":1: a key is missing before '='"},
        {"interval =   \n", ":1: 'interval' has no value"},
        {"# x\ninterval = 1s\n\ninterval = 2s\n", ":4: 'interval' is given twice (first on line 2)"},
        {"interval = 50ms\n", ":1: interval takes a duration between 100 ms and 86400 s (e.g. "
                              "500ms, 2s, 1h), not '50ms'"},
        {"full_scan = -1s\n", ":1: full_scan takes a duration up to 86400 s (e.g. 30s, 10m), or 0 "
                              "for a full scan at every sample, not '-1s'"},
        {"full_scan = 2d\n", ":1: full_scan takes a duration up to 86400 s (e.g. 30s, 10m), or 0 "
                             "for a full scan at every sample, not '2d'"},
        {"full_scan = often\n", ":1: full_scan takes a duration up to 86400 s (e.g. 30s, 10m), or "
                                "0 for a full scan at every sample, not 'often'"},
        {"threshold = -1\n", ":1: threshold takes a size such as 10MiB or 1GiB, not '-1'"},
        {"format = yaml\n", ":1: format takes text or json, not 'yaml'"},
        {"shell = maybe\n", ":1: shell takes true or false, not 'maybe'"},
        {"expect = 0=none\nexpect = 0=alice\n", ":2: expect '0=alice': GPU 0 already has an "
                                                "expectation ('0=none'); list everyone allowed in "
                                                "one: GPU=alice,bob"},
        {"expect = 0=alice bob\n", ":1: expect '0=alice bob': 'alice bob' is neither none, a "
                                   "PID, uid:N nor a user name"},
        {"expect = 0=uid:x\n", ":1: expect '0=uid:x': 'uid:x' is not a uid"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vg_watch_config c;
        vg_watch_config_init(&c);
        assert_int_equal(vg_watch_config_set(&c, "interval", "7s", NULL), 0);
        struct vg_err err = VG_ERR_INIT;
        assert_int_equal(load(&c, cases[i].text, &err), -EINVAL);
        if (strcmp(vg_err_msg(&err), cases[i].msg) != 0)
            fail_msg("case %zu: got '%s', want '%s'", i, vg_err_msg(&err), cases[i].msg);
        /* a bad file changes nothing */
        assert_int_equal(c.interval_ms, 7000);
        assert_int_equal(c.expect.n, 0);
        vg_watch_config_release(&c);
        vg_err_release(&err);
    }
    struct vg_watch_config c;
    vg_watch_config_init(&c);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_watch_config_load(&c, "/nonexistent/watch.conf", 0, &err), -ENOENT);
    assert_string_equal(vg_err_msg(&err),
                        "/nonexistent/watch.conf: cannot read: No such file or directory");
    assert_int_equal(vg_watch_config_set(&c, "bogus", "1", &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err), "unknown key 'bogus'");
    vg_watch_config_release(&c);
    vg_err_release(&err);
}

static void test_config_merge(void **state)
{
    (void)state;
    struct vg_watch_config file, flags, out;
    vg_watch_config_init(&file);
    vg_watch_config_init(&flags);
    vg_watch_config_init(&out);
    assert_int_equal(vg_watch_config_set(&file, "interval", "5s", NULL), 0);
    assert_int_equal(vg_watch_config_set(&file, "threshold", "1GiB", NULL), 0);
    assert_int_equal(vg_watch_config_set(&file, "expect", "0=none", NULL), 0);
    assert_int_equal(vg_watch_config_set(&file, "expect", "1=bob", NULL), 0);
    assert_int_equal(vg_watch_config_set(&file, "exec", "notify", NULL), 0);
    assert_int_equal(vg_watch_config_set(&flags, "threshold", "1MiB", NULL), 0);
    assert_int_equal(vg_watch_config_merge(&out, &file, &flags), 0);
    assert_int_equal(out.interval_ms, 5000); /* from the file */
    assert_int_equal(out.threshold, MiB);    /* the flag wins */
    assert_int_equal(out.expect.n, 2);       /* no expect flag: the file's */
    assert_string_equal(out.exec, "notify");
    assert_int_equal(vg_watch_config_set(&flags, "expect", "2=carol", NULL), 0);
    assert_int_equal(vg_watch_config_merge(&out, &file, &flags), 0);
    assert_int_equal(out.expect.n, 1); /* expect flags replace the file's lines */
    assert_string_equal(out.expect.v[0].text, "2=carol");
    vg_watch_config_release(&file);
    vg_watch_config_release(&flags);
    vg_watch_config_release(&out);
}

/* full_scan: a flag and a file line are the same parser; 0 is a value (every sample a full
 * scan), not "unset"; the flag wins over the file, and a file without it keeps the default. */
static void test_config_full_scan(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        unsigned ms;
    } ok[] = {{"0", 0}, {"0s", 0}, {"30s", 30000}, {"90", 90000}, {"1.5m", 90000},
              {"250ms", 250}, {"1d", 86400000}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct vg_watch_config c;
        vg_watch_config_init(&c);
        struct vg_err err = VG_ERR_INIT;
        if (vg_watch_config_set(&c, "full_scan", ok[i].v, &err) != 0)
            fail_msg("'%s': %s", ok[i].v, vg_err_msg(&err));
        assert_int_equal(c.full_scan_ms, ok[i].ms);
        assert_int_equal(c.set, VG_WCFG_FULL_SCAN);
        vg_watch_config_release(&c);
        vg_err_release(&err);
    }
    static const char *const bad[] = {"-1", "-0", "", "1x", "soon", "86401s", "2d", " 5s", "5 s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vg_watch_config c;
        vg_watch_config_init(&c);
        struct vg_err err = VG_ERR_INIT;
        if (vg_watch_config_set(&c, "full_scan", bad[i], &err) != -EINVAL)
            fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(vg_err_msg(&err), "full_scan takes a duration"));
        assert_int_equal(c.full_scan_ms, 60000); /* unchanged */
        assert_int_equal(c.set, 0);
        vg_watch_config_release(&c);
        vg_err_release(&err);
    }

    struct vg_watch_config file, flags, out;
    vg_watch_config_init(&file);
    vg_watch_config_init(&flags);
    vg_watch_config_init(&out);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(load(&file, "full_scan = 0\n", &err), 0);
    assert_int_equal(file.full_scan_ms, 0);
    assert_int_equal(vg_watch_config_merge(&out, &file, &flags), 0);
    assert_int_equal(out.full_scan_ms, 0); /* the file's 0 is kept, not taken for "unset" */
    assert_int_equal(vg_watch_config_set(&flags, "full_scan", "2m", NULL), 0);
    assert_int_equal(vg_watch_config_merge(&out, &file, &flags), 0);
    assert_int_equal(out.full_scan_ms, 120000); /* the flag wins */
    vg_watch_config_release(&file);
    vg_watch_config_init(&file);
    assert_int_equal(load(&file, "interval = 1s\n", &err), 0);
    vg_watch_config_release(&flags);
    vg_watch_config_init(&flags);
    assert_int_equal(vg_watch_config_merge(&out, &file, &flags), 0);
    assert_int_equal(out.full_scan_ms, 60000); /* neither: the default */
    assert_int_equal(load(&file, "full_scan = 1m\nfull_scan = 2m\n", &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err), ":2: 'full_scan' is given twice (first on line 1)");
    vg_watch_config_release(&file);
    vg_watch_config_release(&flags);
    vg_watch_config_release(&out);
    vg_err_release(&err);
}

static void test_exec_split(void **state)
{
    (void)state;
    char **argv = NULL;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_alert_split("  /bin/echo  'a b' \"c \\\"d\\\" \\\\\" e\\ f $HOME;|* ''",
                                   &argv, &err),
                     0);
    const char *want[] = {"/bin/echo", "a b", "c \"d\" \\", "e f", "$HOME;|*", ""};
    size_t n = 0;
    for (; argv[n]; n++) {
        assert_true(n < 6);
        assert_string_equal(argv[n], want[n]);
    }
    assert_int_equal(n, 6);
    vg_alert_argv_free(argv);
    assert_int_equal(vg_alert_split("echo 'open", &argv, &err), -EINVAL);
    assert_int_equal(vg_alert_split("echo \"open", &argv, &err), -EINVAL);
    assert_int_equal(vg_alert_split("   ", &argv, &err), -EINVAL);
    assert_string_equal(vg_err_msg(&err), "exec: the command is empty");
    vg_err_release(&err);
}

/* ---- the engine ------------------------------------------------------------------------- */

struct world {
    struct vg_gpu_list l;
    struct vg_proc_table t;
};

static void world_init(struct world *w)
{
    vg_gpu_list_init(&w->l);
    vg_proc_table_init(&w->t);
}

/* Two GPUs: index 0 minor 2, index 1 minor 1, with `used` on each. */
static void world_gpus(struct world *w, uint64_t used0, uint64_t used1)
{
    fx_gpu(&w->l, "GPU-00000000-0000", "A100", 2, 80 * GiB, used0, 512 * MiB);
    fx_gpu(&w->l, "GPU-11111111-1111", "A100", 1, 80 * GiB, used1, 512 * MiB);
}

static struct vg_proc *world_proc(struct world *w, pid_t pid, uint64_t start, const char *cmd)
{
    struct vg_proc *p = fx_proc(&w->t, pid, "python", cmd, 'S');
    p->start_ticks = start;
    p->parent_alive = p->sid_alive = p->pgid_alive = true;
    return p;
}

static struct vg_snapshot *world_snap(struct world *w)
{
    return fx_assemble(&w->l, &w->t);
}

/* A snapshot without the driver's view (hung), /proc as given. */
static struct vg_snapshot *world_snap_nodriver(struct world *w)
{
    struct vg_snapshot *s = vg_snap_new();
    assert_non_null(s);
    s->proc_root = fx_strdup("/proc");
    s->dev_dir = fx_strdup("/dev");
    s->driver_error = fx_strdup("the NVIDIA driver has not answered (hung)");
    struct vg_gpu_list empty;
    vg_gpu_list_init(&empty);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_assemble(s, &empty, false, &w->t, &err), 0);
    vg_gpu_list_release(&w->l);
    return s;
}

struct run {
    struct vg_watch_opts o;
    struct vg_health_watch hw; /* o's judge: the one `watch` uses */
    struct vg_watch_view *view;
    struct vg_event_list ev;
    uint64_t now;
    bool alive;
};

static void run_init(struct run *r)
{
    memset(r, 0, sizeof(*r));
    r->o.threshold = 10 * MiB;
    r->hw.threshold = 10 * MiB;
    r->o.judge = vg_health_watch_judge;
    r->o.judge_ctx = &r->hw;
    r->now = 1000;
    r->alive = true;
    vg_event_list_init(&r->ev);
}

static bool run_alive(void *ctx, pid_t pid, bool start_known, uint64_t start)
{
    (void)pid;
    (void)start_known;
    (void)start;
    return ((struct run *)ctx)->alive;
}

/* One step; the snapshot is freed. Events of this step only in r->ev. */
static void step(struct run *r, struct vg_snapshot *snap, bool hung)
{
    vg_event_list_release(&r->ev);
    vg_event_list_init(&r->ev);
    r->o.alive = run_alive;
    r->o.alive_ctx = r;
    struct vg_watch_view *next = NULL;
    struct vg_err err = VG_ERR_INIT;
    if (vg_watch_step(&r->o, snap, hung, r->now, r->view, &next, &r->ev, &err))
        fail_msg("vg_watch_step: %s", vg_err_msg(&err));
    vg_watch_view_free(r->view);
    r->view = next;
    vg_snap_free(snap);
    r->now += 1000;
}

static void run_release(struct run *r)
{
    vg_event_list_release(&r->ev);
    vg_watch_view_free(r->view);
}

static size_t count(const struct run *r, enum vg_event_type t)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ev.n; i++)
        n += r->ev.v[i].type == t;
    return n;
}

/* An event's message as watch prints it (render/event.c); valid until the next call. */
static const char *msg(const struct vg_event *e)
{
    static char text[1024];
    struct vg_buf b;
    vg_buf_init(&b, 0);
    bool has = vg_render_event_message(e, &b);
    snprintf(text, sizeof(text), "%s", has && !b.err ? vg_buf_str(&b) : "(none)");
    vg_buf_release(&b);
    return text;
}

static const struct vg_event *find_ev(const struct run *r, enum vg_event_type t, pid_t pid)
{
    for (size_t i = 0; i < r->ev.n; i++)
        if (r->ev.v[i].type == t && (!pid || (r->ev.v[i].pid_known && r->ev.v[i].pid == pid)))
            return &r->ev.v[i];
    return NULL;
}

/* The step's events on stderr, with VG_TEST_VERBOSE set (to see why an assertion failed). */
static void dump(const struct run *r)
{
    if (!getenv("VG_TEST_VERBOSE"))
        return;
    for (size_t i = 0; i < r->ev.n; i++)
        fprintf(stderr, "  %s: %s\n", vg_event_name(r->ev.v[i].type), msg(&r->ev.v[i]));
}

/* A holder 100 on GPU 1 (fd + NVML) with mem1, a holder 200 on GPU 0 by device node only. */
static struct vg_snapshot *basic(uint64_t mem1, uint64_t start100)
{
    struct world w;
    world_init(&w);
    world_gpus(&w, 0, mem1);
    fx_gproc(&w.l.gpus[1], 100, mem1, VG_PTYPE_COMPUTE);
    fx_fd(world_proc(&w, 100, start100, "python train.py"), 1);
    fx_fd(world_proc(&w, 200, 77, "python worker"), 2);
    return world_snap(&w);
}

static void test_engine_present_then_silence(void **state)
{
    (void)state;
    struct run r;
    run_init(&r);
    step(&r, basic(2 * GiB, 50), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_GPU_PRESENT), 2);
    assert_int_equal(count(&r, VG_EV_HOLDER_PRESENT), 2);
    assert_int_equal(count(&r, VG_EV_DRIVER_HUNG) + count(&r, VG_EV_DRIVER_ERROR), 0);
    const struct vg_event *e = find_ev(&r, VG_EV_HOLDER_PRESENT, 100);
    assert_non_null(e);
    assert_string_equal(msg(e), "PID 100 on GPU 1 (GPU-11111111): 2 GiB, alice: python train.py");
    assert_true(e->gpu_known && e->gpu == 1 && e->mem_known && e->mem == 2 * GiB);
    e = find_ev(&r, VG_EV_HOLDER_PRESENT, 200);
    assert_string_equal(msg(e),
                        "PID 200 on GPU 0 (GPU-00000000): device node only, alice: python worker");
    assert_false(e->mem_known);
    /* the same world again: nothing */
    step(&r, basic(2 * GiB, 50), false);
    dump(&r);
    assert_int_equal(r.ev.n, 0);
    run_release(&r);
}

static void test_engine_memory_and_reuse(void **state)
{
    (void)state;
    struct run r;
    run_init(&r);
    step(&r, basic(2 * GiB, 50), false);
    /* +6 MiB: under the 10 MiB threshold */
    step(&r, basic(2 * GiB + 6 * MiB, 50), false);
    assert_int_equal(r.ev.n, 0);
    /* +12 MiB from the figure last reported: one event, from 2 GiB */
    step(&r, basic(2 * GiB + 12 * MiB, 50), false);
    dump(&r);
    assert_int_equal(r.ev.n, 1);
    const struct vg_event *e = find_ev(&r, VG_EV_HOLDER_MEMORY, 100);
    assert_non_null(e);
    assert_true(e->prev_known && e->prev == 2 * GiB);
    assert_true(e->mem_known && e->mem == 2 * GiB + 12 * MiB);
    assert_string_equal(msg(e), "PID 100 on GPU 1 (GPU-11111111): 2 GiB -> 2.0 GiB (+12 MiB), "
                                    "alice: python train.py");
    step(&r, basic(2 * GiB + 12 * MiB, 50), false);
    assert_int_equal(r.ev.n, 0);
    /* PID 100 reused by another process (another start time): one left, one appeared */
    step(&r, basic(2 * GiB + 12 * MiB, 999), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_HOLDER_LEFT), 1);
    assert_int_equal(count(&r, VG_EV_HOLDER_APPEARED), 1);
    assert_int_equal(r.ev.n, 2);
    assert_true(r.ev.v[0].type == VG_EV_HOLDER_LEFT); /* left first */
    run_release(&r);
}

static void test_engine_alerts(void **state)
{
    (void)state;
    struct vg_expect_set set;
    vg_expect_set_init(&set);
    assert_int_equal(vg_expect_parse(&set, "1=bob", NULL), 0);
    assert_int_equal(vg_expect_parse(&set, "GPU-0000=none", NULL), 0);
    struct run r;
    run_init(&r);
    r.hw.expect = &set;
    step(&r, basic(2 * GiB, 50), false);
    dump(&r);
    /* alice's 100 on GPU 1 (bob only): warning; 200 on GPU 0 holds only the node: none */
    assert_int_equal(count(&r, VG_EV_ALERT), 1);
    const struct vg_event *e = find_ev(&r, VG_EV_ALERT, 100);
    assert_non_null(e);
    assert_int_equal(e->severity, VG_SEV_WARNING);
    assert_string_equal(e->alert, VG_EXPECT_UNEXPECTED_HOLDER);
    assert_string_equal(e->expect, "1=bob");
    assert_string_equal(msg(e), "GPU 1 (GPU-11111111) may carry only bob (expect 1=bob): "
                                    "PID 100 holds 2 GiB, alice: python train.py");
    /* the same: no new alert even though memory changed a little */
    step(&r, basic(2 * GiB + MiB, 50), false);
    assert_int_equal(count(&r, VG_EV_ALERT), 0);
    /* GPU 0 now carries memory nobody listed holds: gpu-not-empty, critical */
    struct world w;
    world_init(&w);
    world_gpus(&w, 3 * GiB, 2 * GiB);
    fx_gproc(&w.l.gpus[1], 100, 2 * GiB, VG_PTYPE_COMPUTE);
    fx_fd(world_proc(&w, 100, 50, "python train.py"), 1);
    fx_fd(world_proc(&w, 200, 77, "python worker"), 2);
    step(&r, world_snap(&w), false);
    dump(&r);
    e = find_ev(&r, VG_EV_ALERT, 0);
    assert_non_null(e);
    assert_string_equal(e->alert, VG_EXPECT_GPU_NOT_EMPTY);
    assert_int_equal(e->severity, VG_SEV_CRITICAL);
    assert_false(e->pid_known);
    /* resolved: cleared once */
    step(&r, basic(2 * GiB, 50), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_ALERT_CLEARED), 1);
    assert_int_equal(count(&r, VG_EV_ALERT), 0);
    assert_null(vg_watch_view_problem(r.view));
    run_release(&r);
    vg_expect_set_release(&set);
}

static struct vg_snapshot *idle_world(unsigned sm)
{
    struct world w;
    world_init(&w);
    world_gpus(&w, 0, 2 * GiB);
    fx_gproc(&w.l.gpus[1], 100, 2 * GiB, VG_PTYPE_COMPUTE);
    w.l.gpus[1].known |= VG_GPU_K_PROC_UTIL;
    w.l.gpus[1].procs[0].util_known = true;
    w.l.gpus[1].procs[0].sm_util = sm;
    w.l.gpus[1].util_gpu = sm; /* its only holder: the GPU's own figure agrees */
    fx_fd(world_proc(&w, 100, 50, "jupyter kernel"), 1);
    return world_snap(&w);
}

/* Events of one type for one rule. */
static size_t count_rule(const struct run *r, enum vg_event_type type, const char *rule)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ev.n; i++)
        n += r->ev.v[i].type == type && r->ev.v[i].rule && strcmp(r->ev.v[i].rule, rule) == 0;
    return n;
}

/*
 * A holder that does no work: one sample is enough to call its memory its framework's cache
 * (allocator-cache, info); after idle_after_ms the long view says idle-holder instead, and
 * work ends both.
 */
static void test_engine_idle(void **state)
{
    (void)state;
    struct run r;
    run_init(&r);
    r.hw.idle_after_ms = 2500;
    step(&r, idle_world(0), false); /* idle since t=1000 */
    assert_int_equal(count(&r, VG_EV_FINDING_PRESENT), 1);
    assert_int_equal(count_rule(&r, VG_EV_FINDING_PRESENT, "allocator-cache"), 1);
    step(&r, idle_world(0), false); /* 1 s */
    step(&r, idle_world(0), false); /* 2 s */
    assert_int_equal(count(&r, VG_EV_FINDING_OPENED), 0);
    step(&r, idle_world(0), false); /* 3 s >= 2.5 s */
    dump(&r);
    const struct vg_event *e = find_ev(&r, VG_EV_FINDING_OPENED, 100);
    assert_non_null(e);
    assert_string_equal(e->rule, "idle-holder");
    /* the long view takes over from the one-sample explanation */
    assert_int_equal(count_rule(&r, VG_EV_FINDING_CLOSED, "allocator-cache"), 1);
    step(&r, idle_world(0), false);
    assert_int_equal(r.ev.n, 0);
    /* it works again: closed, and the idle time starts over */
    step(&r, idle_world(40), false);
    dump(&r);
    assert_int_equal(count_rule(&r, VG_EV_FINDING_CLOSED, "idle-holder"), 1);
    step(&r, idle_world(0), false);
    assert_int_equal(count_rule(&r, VG_EV_FINDING_OPENED, "allocator-cache"), 1);
    step(&r, idle_world(0), false);
    assert_int_equal(count(&r, VG_EV_FINDING_OPENED), 0);
    run_release(&r);
}

static void test_engine_gpu_lost_back(void **state)
{
    (void)state;
    struct run r;
    run_init(&r);
    step(&r, basic(2 * GiB, 50), false);
    struct world w;
    world_init(&w);
    world_gpus(&w, 0, 2 * GiB);
    w.l.gpus[1].lost = true;
    fx_gproc(&w.l.gpus[1], 100, 2 * GiB, VG_PTYPE_COMPUTE);
    fx_fd(world_proc(&w, 100, 50, "python train.py"), 1);
    fx_fd(world_proc(&w, 200, 77, "python worker"), 2);
    step(&r, world_snap(&w), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_GPU_LOST), 1);
    assert_int_equal(r.ev.v[0].severity, VG_SEV_CRITICAL);
    step(&r, basic(2 * GiB, 50), false);
    assert_int_equal(count(&r, VG_EV_GPU_BACK), 1);
    /* GPU 1 no longer listed at all (the count dropped): lost; listed again: back */
    world_init(&w);
    fx_gpu(&w.l, "GPU-00000000-0000", "A100", 2, 80 * GiB, 0, 512 * MiB);
    fx_fd(world_proc(&w, 200, 77, "python worker"), 2);
    step(&r, world_snap(&w), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_GPU_LOST), 1);
    assert_int_equal(count(&r, VG_EV_HOLDER_LEFT), 1);
    step(&r, basic(2 * GiB, 50), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_GPU_BACK), 1);
    assert_int_equal(count(&r, VG_EV_GPU_APPEARED), 0);
    run_release(&r);
}

static void test_engine_frozen_while_hung(void **state)
{
    (void)state;
    struct vg_expect_set set;
    vg_expect_set_init(&set);
    assert_int_equal(vg_expect_parse(&set, "1=bob", NULL), 0);
    struct run r;
    run_init(&r);
    r.hw.expect = &set;
    /* 100: NVML + fd on GPU 1; 300: NVML only on GPU 1 (another namespace: not in /proc) */
    struct world w;
    world_init(&w);
    world_gpus(&w, 0, 3 * GiB);
    fx_gproc(&w.l.gpus[1], 100, 2 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(&w.l.gpus[1], 4000000, GiB, VG_PTYPE_COMPUTE);
    fx_fd(world_proc(&w, 100, 50, "python train.py"), 1);
    step(&r, world_snap(&w), false);
    size_t findings = count(&r, VG_EV_FINDING_PRESENT);
    assert_true(findings >= 1); /* foreign-pid at least */
    assert_int_equal(count(&r, VG_EV_ALERT), 2);

    /* The driver hangs; /proc still shows 100 holding the node of GPU 1 (minor 1) and a new
     * holder 500 on minor 2 (GPU 0). */
    world_init(&w);
    fx_fd(world_proc(&w, 100, 50, "python train.py"), 1);
    fx_fd(world_proc(&w, 500, 60, "python new.py"), 2);
    step(&r, world_snap_nodriver(&w), true);
    dump(&r);
    assert_true(vg_watch_view_frozen(r.view));
    assert_int_equal(count(&r, VG_EV_DRIVER_HUNG), 1);
    const struct vg_event *e = find_ev(&r, VG_EV_HOLDER_APPEARED, 500);
    assert_non_null(e);
    assert_string_equal(msg(e),
                        "PID 500 on GPU 0 (GPU-00000000): device node only, alice: python new.py");
    /* nothing else: no GPU, finding or alert closes; 100 keeps its memory; 4000000 is kept */
    assert_int_equal(r.ev.n, 2);

    /* still hung: silence */
    world_init(&w);
    fx_fd(world_proc(&w, 100, 50, "python train.py"), 1);
    fx_fd(world_proc(&w, 500, 60, "python new.py"), 2);
    step(&r, world_snap_nodriver(&w), true);
    assert_int_equal(r.ev.n, 0);

    /* 100 exits while the driver is hung: it leaves */
    r.alive = false;
    world_init(&w);
    fx_fd(world_proc(&w, 500, 60, "python new.py"), 2);
    step(&r, world_snap_nodriver(&w), true);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_HOLDER_LEFT), 1);
    assert_non_null(find_ev(&r, VG_EV_HOLDER_LEFT, 100));
    assert_int_equal(r.ev.n, 1);

    /* recovery: the same world as before the hang, minus 100 */
    world_init(&w);
    world_gpus(&w, 0, GiB);
    fx_gproc(&w.l.gpus[1], 4000000, GiB, VG_PTYPE_COMPUTE);
    fx_fd(world_proc(&w, 500, 60, "python new.py"), 2);
    step(&r, world_snap(&w), false);
    dump(&r);
    assert_int_equal(count(&r, VG_EV_DRIVER_RECOVERED), 1);
    assert_int_equal(count(&r, VG_EV_HOLDER_LEFT) + count(&r, VG_EV_HOLDER_APPEARED), 0);
    assert_int_equal(count(&r, VG_EV_GPU_LOST) + count(&r, VG_EV_GPU_BACK), 0);
    /* 100's alert is gone with it; 4000000's stays */
    assert_int_equal(count(&r, VG_EV_ALERT_CLEARED), 1);
    assert_int_equal(count(&r, VG_EV_ALERT), 0);
    run_release(&r);
    vg_expect_set_release(&set);
}

/* check's verdict (rules/health.c): the same judgement as watch, state from its outcome. */
static void test_health_verdict(void **state)
{
    (void)state;
    struct vg_expect_set set;
    vg_expect_set_init(&set);
    assert_int_equal(vg_expect_parse(&set, "1=bob", NULL), 0);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    ro.check_shell = false;
    /* alice's holder on GPU 1, expected to carry only bob's: an alert, a warning */
    struct vg_snapshot *snap = basic(2 * GiB, 50);
    struct vg_findings fs;
    vg_findings_init(&fs);
    assert_int_equal(vg_health_judge(snap, &ro, &set, 10 * MiB, &fs, NULL), 0);
    size_t nalerts = 0;
    for (size_t i = 0; i < fs.n; i++)
        if (fs.v[i].kind == VG_FINDING_ALERT) {
            nalerts++;
            assert_string_equal(fs.v[i].rule, VG_EXPECT_UNEXPECTED_HOLDER);
            assert_string_equal(fs.v[i].expect, "1=bob");
            assert_int_equal(fs.v[i].nevidence, 1);
        }
    assert_int_equal(nalerts, 1);
    assert_int_equal(vg_health_lost(snap) + vg_health_hung(snap), 0);
    assert_true(vg_health_driver_view(snap));
    enum vg_health_state st = vg_health_state(snap, &fs);
    assert_true(st == VG_HEALTH_WARNING || st == VG_HEALTH_CRITICAL);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    /* no driver view: the expectation cannot be checked, the state is not OK */
    struct world w;
    world_init(&w);
    snap = world_snap_nodriver(&w);
    vg_findings_init(&fs);
    assert_int_equal(vg_health_judge(snap, &ro, &set, 10 * MiB, &fs, NULL), 0);
    assert_non_null(fs.unchecked);
    assert_false(vg_health_driver_view(snap));
    assert_int_equal(vg_health_state(snap, &fs), VG_HEALTH_UNKNOWN);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    vg_expect_set_release(&set);
}

static void test_event_render(void **state)
{
    (void)state;
    struct run r;
    run_init(&r);
    step(&r, basic(2 * GiB, 50), false);
    const struct vg_event *e = find_ev(&r, VG_EV_HOLDER_PRESENT, 100);
    struct timespec when = {.tv_sec = 1700000000};
    struct vg_buf b;
    vg_buf_init(&b, 0);
    assert_int_equal(vg_render_event_text(e, &when, NULL, &b), 0);
    assert_string_equal(vg_buf_str(&b), "2023-11-14T22:13:20Z holder-present PID 100 on GPU 1 "
                                        "(GPU-11111111): 2 GiB, alice: python train.py\n");
    vg_buf_reset(&b);
    assert_int_equal(vg_render_event_json(e, &when, 7, &b), 0);
    assert_string_equal(vg_buf_str(&b),
                        "{\"schema\":\"vramguard.event/1\",\"time\":\"2023-11-14T22:13:20Z\","
                        "\"sample\":7,\"event\":\"holder-present\",\"severity\":\"info\","
                        "\"message\":\"PID 100 on GPU 1 (GPU-11111111): 2 GiB, alice: python "
                        "train.py\",\"gpu\":1,\"gpu_uuid\":\"GPU-11111111-1111\","
                        "\"mig_device\":null,\"gpus\":[1],\"pid\":100,\"pids\":[100],"
                        "\"user\":\"alice\",\"command\":\"python train.py\","
                        "\"memory\":2147483648,\"previous_memory\":null,\"rule\":null,"
                        "\"alert\":null,\"expect\":null,\"driver_error\":null}\n");
    vg_buf_release(&b);
    run_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults_and_file),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_merge),
        cmocka_unit_test(test_config_full_scan),
        cmocka_unit_test(test_exec_split),
        cmocka_unit_test(test_engine_present_then_silence),
        cmocka_unit_test(test_engine_memory_and_reuse),
        cmocka_unit_test(test_engine_alerts),
        cmocka_unit_test(test_engine_idle),
        cmocka_unit_test(test_engine_gpu_lost_back),
        cmocka_unit_test(test_engine_frozen_while_hung),
        cmocka_unit_test(test_event_render),
        cmocka_unit_test(test_health_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
