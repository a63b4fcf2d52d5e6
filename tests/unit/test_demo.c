/*
 * Unit tests for act/demo.c: the simulated host's keeper, through the parts the command meets:
 * finding the helper and the fake driver, the keeper's line protocol on a socket pair ("ready
 * DIR", "error ERRNO", "keep"/"kept", "stop"/"done ..."), a signal pending while waiting, and
 * a whole keeper (forked, as the command does) staging a simulation with the real helper and
 * removing it at "stop".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "act/demo.h"

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void say(int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static void test_find(void **state)
{
    (void)state;
    char out[PATH_MAX];
    assert_int_equal(vg_demo_find("/proc/self/status", "x", "x", "/nonexistent", out, sizeof(out)),
                     0);
    assert_string_equal(out, "/proc/self/status");
    assert_int_equal(vg_demo_find("/nonexistent/helper", "x", "x", "/", out, sizeof(out)), -ENOENT);
    unsetenv("VRAMGUARD_DEMO_DIR");
    assert_int_equal(
        vg_demo_find(NULL, "no-such-file", "no-such-file", "/nonexistent", out, sizeof(out)),
        -ENOENT);
    /* the installed copy's directory, last */
    assert_int_equal(vg_demo_find(NULL, "passwd", "no-such-file", "/etc", out, sizeof(out)), 0);
    assert_string_equal(out, "/etc/passwd");
    setenv("VRAMGUARD_DEMO_DIR", "/proc/self", 1);
    assert_int_equal(vg_demo_find(NULL, "status", "no-such-file", "/etc", out, sizeof(out)), 0);
    assert_string_equal(out, "/proc/self/status");
    unsetenv("VRAMGUARD_DEMO_DIR");
}

static void test_wait_staged(void **state)
{
    (void)state;
    sigset_t none;
    sigemptyset(&none);
    char line[PATH_MAX + 64];
    const char *dir;
    int sig, sv[2];

    pair(sv);
    say(sv[1], "ready /tmp/vramguard-demo-abc\n");
    assert_int_equal(vg_demo_wait_staged(sv[0], &none, line, sizeof(line), &sig, &dir), 0);
    assert_int_equal(sig, 0);
    assert_string_equal(dir, "/tmp/vramguard-demo-abc");
    close(sv[0]);
    close(sv[1]);

    pair(sv);
    say(sv[1], "error 28\n");
    assert_int_equal(vg_demo_wait_staged(sv[0], &none, line, sizeof(line), &sig, &dir), -ENOSPC);
    assert_null(dir);
    close(sv[0]);
    close(sv[1]);

    pair(sv);
    say(sv[1], "what\n");
    assert_int_equal(vg_demo_wait_staged(sv[0], &none, line, sizeof(line), &sig, &dir), -EPROTO);
    close(sv[1]); /* the keeper gone before a line */
    assert_int_equal(vg_demo_wait_staged(sv[0], &none, line, sizeof(line), &sig, &dir), -EPIPE);
    close(sv[0]);
}

/* A blocked signal pending ends the wait, and says which. */
static void test_pending(void **state)
{
    (void)state;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    assert_int_equal(vg_demo_pending(&block), 0);
    raise(SIGUSR1);
    assert_int_equal(vg_demo_pending(&block), SIGUSR1);
    int sv[2], sig;
    pair(sv);
    char line[64];
    const char *dir;
    assert_int_equal(vg_demo_wait_staged(sv[0], &block, line, sizeof(line), &sig, &dir), -EINTR);
    assert_int_equal(sig, SIGUSR1);
    assert_null(dir);
    close(sv[0]);
    close(sv[1]);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGUSR1, &ign, NULL); /* the pending one is dropped at the unblock */
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void test_keep_and_stop(void **state)
{
    (void)state;
    int sv[2];
    char line[64];
    pair(sv);
    say(sv[1], "kept\n");
    assert_true(vg_demo_request_keep(sv[0], line, sizeof(line)));
    assert_int_equal(read(sv[1], line, 5), 5);
    assert_memory_equal(line, "keep\n", 5);
    say(sv[1], "no\n");
    assert_false(vg_demo_request_keep(sv[0], line, sizeof(line)));
    close(sv[0]);
    close(sv[1]);

    pair(sv);
    /* a keeper still staging answers "ready" first: skipped */
    say(sv[1], "ready /tmp/x\ndone 7 1 0\n");
    struct vg_demo_result res = {0};
    assert_int_equal(vg_demo_request_stop(sv[0], &res, 2000), 0);
    assert_int_equal(res.stopped, 7);
    assert_int_equal(res.survivors, 1);
    assert_false(res.dir_removed);
    say(sv[1], "done what\n");
    assert_int_equal(vg_demo_request_stop(sv[0], &res, 2000), -EPROTO);
    assert_int_equal(vg_demo_request_stop(sv[0], &res, 100), -ETIMEDOUT);
    close(sv[0]);
    close(sv[1]);
}

/* The whole keeper, forked as the command forks it: it stages with the real helper, says
 * where, and at "stop" removes every process and the directory. */
static void test_keeper(void **state)
{
    (void)state;
    char helper[PATH_MAX], fake[PATH_MAX];
    snprintf(helper, sizeof(helper), "%s/tests/vg-helper", VG_TEST_BUILD_DIR);
    snprintf(fake, sizeof(fake), "%s/fake-nvml/full/libnvidia-ml.so.1", VG_TEST_BUILD_DIR);
    if (access(helper, X_OK) != 0)
        skip();
    char tmp[] = "/tmp/vg-test-demo-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    setenv("TMPDIR", tmp, 1);
    struct vg_demo d = {
        .alive_rd = -1, .alive_wr = -1, .helper = helper, .fake = fake, .lifetime_s = 60};
    int sv[2];
    pair(sv);
    pid_t keeper = fork();
    assert_true(keeper >= 0);
    if (keeper == 0) {
        close(sv[0]);
        _exit(vg_demo_keeper(&d, sv[1], -1, 0) ? 70 : 0);
    }
    close(sv[1]);
    sigset_t none;
    sigemptyset(&none);
    char line[PATH_MAX + 64];
    const char *dir;
    int sig;
    assert_int_equal(vg_demo_wait_staged(sv[0], &none, line, sizeof(line), &sig, &dir), 0);
    char scen[PATH_MAX + 96];
    snprintf(scen, sizeof(scen), "%s/scenario", dir);
    struct stat st;
    assert_int_equal(stat(scen, &st), 0);
    char saved[PATH_MAX + 64];
    snprintf(saved, sizeof(saved), "%s", dir);
    struct vg_demo_result res = {0};
    assert_int_equal(vg_demo_request_stop(sv[0], &res, 30000), 0);
    assert_true(res.stopped >= 5);
    assert_int_equal(res.survivors, 0);
    assert_true(res.dir_removed);
    assert_int_not_equal(stat(saved, &st), 0);
    int status;
    assert_int_equal(waitpid(keeper, &status, 0), keeper);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    rmdir(tmp);
    unsetenv("TMPDIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),    cmocka_unit_test(test_wait_staged),
        cmocka_unit_test(test_pending), cmocka_unit_test(test_keep_and_stop),
        cmocka_unit_test(test_keeper),
    };
    return cmocka_run_group_tests_name("demo", tests, NULL, NULL);
}
