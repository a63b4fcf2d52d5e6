/*
 * Unit tests for the collector's make mode (src/model/collector.c), the one `top` samples
 * through: the first object made in the calling thread (or none, with first_in_thread), taken
 * once; an object nobody took replaced and dropped, never leaked (every object made is either
 * taken or dropped); the first failure since the last take kept for the taker, a make error's
 * message or "out of memory" without one; a poke collecting at once; the interval changed
 * from the next wait on; health saying how many collections ran.
 *
 * The sampler reads an empty procfs with the driver skipped, so a collection is quick and
 * needs no GPU; waits are bounded polls, never sleeps that a slow machine could outrun.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/collector.h"
#include "util/err.h"

#define HOUR_MS (3600u * 1000u)

static char g_proc[] = "/tmp/vg-test-collector-XXXXXX"; /* an empty procfs */

/* What make and drop saw; the collector calls make from one thread at a time, drop from the
 * collector's thread or from free, so a mutex keeps the counts whole. */
struct script {
    pthread_mutex_t lock;
    unsigned made;    /* objects made */
    unsigned dropped; /* objects dropped */
    unsigned calls;   /* make called */
    unsigned fail;    /* the first `fail` calls fail */
    bool fail_silent; /* failing without a message */
};

static struct script g_s;

static int make(void *arg, struct vg_snapshot *snap, bool hung, void **out, struct vg_err *err)
{
    struct script *s = arg;
    assert_ptr_equal(s, &g_s);
    assert_non_null(snap);
    assert_false(hung);
    vg_snap_free(snap); /* taken over: freed also on failure */
    pthread_mutex_lock(&s->lock);
    unsigned call = ++s->calls;
    bool fail = call <= s->fail;
    if (!fail)
        s->made++;
    pthread_mutex_unlock(&s->lock);
    if (fail)
        return s->fail_silent ? -ENOMEM : vg_err_set(err, -EIO, "boom %u", call);
    unsigned *obj = malloc(sizeof(*obj));
    assert_non_null(obj);
    *obj = call;
    *out = obj;
    return 0;
}

static void drop(void *obj)
{
    pthread_mutex_lock(&g_s.lock);
    g_s.dropped++;
    pthread_mutex_unlock(&g_s.lock);
    free(obj);
}

static unsigned calls(void)
{
    pthread_mutex_lock(&g_s.lock);
    unsigned n = g_s.calls;
    pthread_mutex_unlock(&g_s.lock);
    return n;
}

static int setup(void **state)
{
    (void)state;
    pthread_mutex_destroy(&g_s.lock);
    memset(&g_s, 0, sizeof(g_s));
    pthread_mutex_init(&g_s.lock, NULL);
    return 0;
}

static struct vg_collector_opts opts(uint64_t interval_ms, bool first_in_thread)
{
    return (struct vg_collector_opts){
        .sampler = {.proc_root = g_proc, .dev_dir = g_proc, .skip_nvml = true},
        .make = make,
        .drop = drop,
        .arg = &g_s,
        .interval_ms = interval_ms,
        .first_in_thread = first_in_thread,
    };
}

static struct vg_collector *new_collector(uint64_t interval_ms, bool first_in_thread)
{
    struct vg_collector_opts o = opts(interval_ms, first_in_thread);
    struct vg_collector *c = NULL;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_collector_new(&o, &c, &err);
    if (rc)
        fail_msg("vg_collector_new: %s", vg_err_msg(&err));
    assert_non_null(c);
    return c;
}

static void start(struct vg_collector *c)
{
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_collector_start(c, &err), 0);
}

/* Take until an object comes (at most 10 s), the errors seen on the way freed. */
static unsigned *take_within(struct vg_collector *c)
{
    for (int i = 0; i < 2000; i++) {
        unsigned *obj = vg_collector_take(c, NULL);
        if (obj)
            return obj;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fail_msg("no object made within 10 s");
    return NULL;
}

static void wait_calls(unsigned n)
{
    for (int i = 0; i < 2000 && calls() < n; i++) {
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(calls() >= n);
}

/* The first collection runs in new(): its object is there at once, taken once, with no
 * failure; health counts it. */
static void test_first_in_caller(void **state)
{
    (void)state;
    struct vg_collector *c = new_collector(HOUR_MS, false);
    assert_int_equal(calls(), 1);
    struct vg_collector_health h;
    vg_collector_health(c, &h);
    assert_int_equal(h.collections, 1);
    assert_false(h.busy);
    assert_false(h.stalled);
    char *error = (char *)"unset";
    unsigned *obj = vg_collector_take(c, &error);
    assert_non_null(obj);
    assert_int_equal(*obj, 1);
    assert_null(error);
    free(obj);
    assert_null(vg_collector_take(c, &error));
    assert_null(error);
    vg_collector_free(c);
    assert_int_equal(g_s.dropped, 0);
}

/* first_in_thread: new() returns before any collection; the thread makes the first at once,
 * without waiting an interval. */
static void test_first_in_thread(void **state)
{
    (void)state;
    struct vg_collector *c = new_collector(HOUR_MS, true);
    assert_int_equal(calls(), 0);
    assert_null(vg_collector_take(c, NULL));
    start(c);
    unsigned *obj = take_within(c);
    assert_int_equal(*obj, 1);
    free(obj);
    vg_collector_free(c);
}

/* Objects nobody took are replaced by newer ones and dropped; the one left at free is dropped
 * too: every object made is taken or dropped. */
static void test_untaken_dropped(void **state)
{
    (void)state;
    struct vg_collector *c = new_collector(1, false);
    start(c);
    wait_calls(5);
    unsigned *obj = take_within(c);
    assert_true(*obj >= 5);
    free(obj);
    vg_collector_free(c);
    assert_int_equal(g_s.made, g_s.calls);
    assert_true(g_s.dropped >= 3);
    /* made = dropped + taken, with exactly one taken */
    assert_int_equal(g_s.made, g_s.dropped + 1);
}

/* A failed make leaves no object and its message for the taker; only the first failure since
 * the last take is kept; a later success brings an object again. */
static void test_failure_kept(void **state)
{
    (void)state;
    g_s.fail = 2;
    struct vg_collector *c = new_collector(HOUR_MS, false);
    char *error = NULL;
    assert_null(vg_collector_take(c, &error));
    assert_non_null(error);
    assert_string_equal(error, "boom 1");
    free(error);
    start(c);
    vg_collector_poke(c); /* fails again: boom 2 */
    wait_calls(2);
    vg_collector_poke(c); /* succeeds, boom 2 still kept */
    wait_calls(3);
    unsigned *obj = NULL;
    error = NULL;
    for (int i = 0; i < 2000 && !obj; i++) {
        char *e = NULL;
        obj = vg_collector_take(c, &e);
        if (e && !error)
            error = e;
        else
            free(e);
        if (!obj)
            nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
    }
    assert_non_null(obj);
    assert_non_null(error);
    assert_string_equal(error, "boom 2");
    free(error);
    assert_true(*obj >= 3);
    free(obj);
    vg_collector_free(c);
}

/* A make error without a message reads "out of memory". */
static void test_failure_silent(void **state)
{
    (void)state;
    g_s.fail = 1;
    g_s.fail_silent = true;
    struct vg_collector *c = new_collector(HOUR_MS, false);
    char *error = NULL;
    assert_null(vg_collector_take(c, &error));
    assert_non_null(error);
    assert_string_equal(error, "out of memory");
    free(error);
    vg_collector_free(c);
}

/* An unreadable /proc fails the collection (the sampler's message kept), not new(): top
 * shows the failure instead of refusing to start. */
static void test_unreadable_proc(void **state)
{
    (void)state;
    struct vg_collector_opts o = opts(HOUR_MS, false);
    o.sampler.proc_root = "/nonexistent/vg-test-collector";
    struct vg_collector *c = NULL;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_collector_new(&o, &c, &err), 0);
    char *error = NULL;
    assert_null(vg_collector_take(c, &error));
    assert_non_null(error);
    assert_true(strlen(error) > 0);
    free(error);
    assert_int_equal(calls(), 0);
    struct vg_collector_health h;
    vg_collector_health(c, &h);
    assert_int_equal(h.collections, 1);
    vg_collector_free(c);
}

/* A poke collects at once, whatever the interval; a new interval counts from the next wait. */
static void test_poke_and_interval(void **state)
{
    (void)state;
    struct vg_collector *c = new_collector(HOUR_MS, false);
    free(vg_collector_take(c, NULL));
    start(c);
    vg_collector_poke(c);
    unsigned *obj = take_within(c);
    assert_int_equal(*obj, 2);
    free(obj);
    vg_collector_set_interval(c, 1);
    vg_collector_poke(c); /* ends the hour-long wait; the next ones are 1 ms apart */
    wait_calls(6);
    vg_collector_free(c);
    assert_int_equal(g_s.made, g_s.calls);
}

int main(void)
{
    if (!mkdtemp(g_proc)) {
        perror("mkdtemp");
        return 1;
    }
    pthread_mutex_init(&g_s.lock, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_first_in_caller, setup),
        cmocka_unit_test_setup(test_first_in_thread, setup),
        cmocka_unit_test_setup(test_untaken_dropped, setup),
        cmocka_unit_test_setup(test_failure_kept, setup),
        cmocka_unit_test_setup(test_failure_silent, setup),
        cmocka_unit_test_setup(test_unreadable_proc, setup),
        cmocka_unit_test_setup(test_poke_and_interval, setup),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(g_proc);
    return rc;
}
