/*
 * Unit tests for src/util/sdnotify: the datagrams a service manager would receive (on a socket
 * the test binds, by path and abstract), the watchdog's period and pacing, and the
 * $JOURNAL_STREAM match.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/err.h"
#include "util/sdnotify.h"

/* A datagram socket bound where NOTIFY_SOCKET will say: a path, or an abstract name ('@'). */
static int bind_receiver(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    assert_true(n < sizeof(sa.sun_path));
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    assert_int_equal(
        bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)),
        0);
    return fd;
}

/* The next datagram, NUL-terminated, or "" when none is waiting. */
static const char *receive(int fd, char *buf, size_t n)
{
    ssize_t r = recv(fd, buf, n - 1, 0);
    buf[r > 0 ? r : 0] = '\0';
    return buf;
}

static void test_notify_unset(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(vg_sd_notify("READY=1", NULL), 0);
    setenv("NOTIFY_SOCKET", "", 1);
    assert_int_equal(vg_sd_notify("READY=1", NULL), 0);
    unsetenv("NOTIFY_SOCKET");
}

static void test_notify_path(void **state)
{
    (void)state;
    char dir[] = "/tmp/vg-sdnotify-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/notify", dir);
    int fd = bind_receiver(path);
    setenv("NOTIFY_SOCKET", path, 1);
    char buf[256];
    assert_int_equal(vg_sd_notify("READY=1", NULL), 1);
    assert_string_equal(receive(fd, buf, sizeof(buf)), "READY=1");
    assert_int_equal(vg_sd_notify("STOPPING=1\nSTATUS=bye", NULL), 1);
    assert_string_equal(receive(fd, buf, sizeof(buf)), "STOPPING=1\nSTATUS=bye");
    assert_string_equal(receive(fd, buf, sizeof(buf)), "");
    close(fd);
    /* nobody listening any more: an error with a message, never a crash or a hang */
    struct vg_err err = VG_ERR_INIT;
    assert_true(vg_sd_notify("READY=1", &err) < 0);
    assert_non_null(strstr(vg_err_msg(&err), path));
    vg_err_release(&err);
    unlink(path);
    rmdir(dir);
    unsetenv("NOTIFY_SOCKET");
}

static void test_notify_abstract(void **state)
{
    (void)state;
    char name[64];
    snprintf(name, sizeof(name), "@vg-sdnotify-test-%d", (int)getpid());
    int fd = bind_receiver(name);
    setenv("NOTIFY_SOCKET", name, 1);
    char buf[256];
    assert_int_equal(vg_sd_notify("WATCHDOG=1", NULL), 1);
    assert_string_equal(receive(fd, buf, sizeof(buf)), "WATCHDOG=1");
    close(fd);
    /* neither absolute nor abstract: refused */
    setenv("NOTIFY_SOCKET", "relative/sock", 1);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_sd_notify("READY=1", &err), -EINVAL);
    vg_err_release(&err);
    unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog(void **state)
{
    (void)state;
    char pid[24], other[24];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    snprintf(other, sizeof(other), "%d", (int)getpid() + 1);
    unsetenv("WATCHDOG_PID");
    unsetenv("WATCHDOG_USEC");
    assert_int_equal(vg_sd_watchdog_usec(), 0);
    setenv("WATCHDOG_USEC", "20000000", 1);
    assert_int_equal(vg_sd_watchdog_usec(), 20000000);
    setenv("WATCHDOG_PID", pid, 1);
    assert_int_equal(vg_sd_watchdog_usec(), 20000000);
    setenv("WATCHDOG_PID", other, 1); /* inherited from a parent: not ours */
    assert_int_equal(vg_sd_watchdog_usec(), 0);
    setenv("WATCHDOG_PID", pid, 1);
    setenv("WATCHDOG_USEC", "soon", 1);
    assert_int_equal(vg_sd_watchdog_usec(), 0);

    /* pacing: half the period, the first ping at once, none in between */
    char name[64];
    snprintf(name, sizeof(name), "@vg-sdnotify-wd-%d", (int)getpid());
    int fd = bind_receiver(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "20000000", 1);
    struct vg_sd_watchdog wd;
    vg_sd_watchdog_init(&wd, 1000);
    assert_int_equal(wd.every_ms, 10000);
    assert_int_equal(vg_sd_watchdog_wait_ms(&wd, 1000), 0);
    char buf[64];
    assert_int_equal(vg_sd_watchdog_tick(&wd, 1000, NULL), 1);
    assert_string_equal(receive(fd, buf, sizeof(buf)), "WATCHDOG=1");
    assert_int_equal(vg_sd_watchdog_wait_ms(&wd, 4000), 7000);
    assert_int_equal(vg_sd_watchdog_tick(&wd, 10999, NULL), 0);
    assert_string_equal(receive(fd, buf, sizeof(buf)), "");
    assert_int_equal(vg_sd_watchdog_tick(&wd, 11000, NULL), 1);
    assert_string_equal(receive(fd, buf, sizeof(buf)), "WATCHDOG=1");
    close(fd);

    /* no watchdog: never a ping, never a deadline */
    unsetenv("WATCHDOG_USEC");
    vg_sd_watchdog_init(&wd, 1000);
    assert_int_equal(vg_sd_watchdog_tick(&wd, 99999, NULL), 0);
    assert_true(vg_sd_watchdog_wait_ms(&wd, 1000) == UINT64_MAX);
    unsetenv("WATCHDOG_PID");
    unsetenv("NOTIFY_SOCKET");
}

static void test_journal_stream(void **state)
{
    (void)state;
    char path[] = "/tmp/vg-sdnotify-js-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char js[64];
    unsetenv("JOURNAL_STREAM");
    assert_false(vg_sd_journal_stream(fd));
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    assert_true(vg_sd_journal_stream(fd));
    /* another inode: the stream was redirected since systemd set it up */
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    setenv("JOURNAL_STREAM", js, 1);
    assert_false(vg_sd_journal_stream(fd));
    setenv("JOURNAL_STREAM", "garbage", 1);
    assert_false(vg_sd_journal_stream(fd));
    setenv("JOURNAL_STREAM", ":12", 1);
    assert_false(vg_sd_journal_stream(fd));
    unsetenv("JOURNAL_STREAM");
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify_unset),   cmocka_unit_test(test_notify_path),
        cmocka_unit_test(test_notify_abstract), cmocka_unit_test(test_watchdog),
        cmocka_unit_test(test_journal_stream),
    };
    return cmocka_run_group_tests_name("sdnotify", tests, NULL, NULL);
}
