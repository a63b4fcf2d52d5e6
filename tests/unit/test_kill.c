/*
 * act/kill.c's driver re-check (vg_kill_nvml_lists), through the fake driver: what it answers
 * when the driver lists the process, lists every GPU without it, leaves a GPU's list unknown,
 * or hangs, and that a driver which hung once costs one stop one timeout, not one per target
 * (issue 27: the epilog's bound). The signalling itself is tested through act/settle.h
 * (test_settle.c) and the CLI.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "act/kill.h"
#include "util/clock.h"

#define FAKE_FULL VG_TEST_BUILD_DIR "/fake-nvml/full/libnvidia-ml.so.1"

struct fx {
    char path[64];
};

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->path, sizeof(f->path), "/tmp/vg-kill-XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    close(fd);
    setenv("FAKE_NVML_SCENARIO", f->path, 1);
    unsetenv("FAKE_NVML_LOG");
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    unlink(f->path);
    unsetenv("FAKE_NVML_SCENARIO");
    free(f);
    return 0;
}

/* Two GPUs, pid 4242 on GPU 1, and the extra lines. */
static void fx_scenario(const struct fx *f, const char *extra)
{
    FILE *s = fopen(f->path, "w");
    assert_non_null(s);
    fprintf(s,
            "driver 550.54.15\ncuda 12040\n"
            "gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=\"H100\" minor=0 "
            "total=80GiB\n"
            "gpu index=1 uuid=GPU-11111111-0000-0000-0000-000000000000 name=\"H100\" minor=1 "
            "total=80GiB\n"
            "proc gpu=1 pid=4242 type=compute mem=1GiB\n%s",
            extra);
    assert_int_equal(fclose(s), 0);
}

static void test_listed_or_not(void **state)
{
    struct fx *f = *state;
    fx_scenario(f, "");
    struct vg_kill_nvml n = {.path = FAKE_FULL, .timeout_ms = 5000};
    assert_int_equal(vg_kill_nvml_lists(&n, 4242), 1);
    assert_int_equal(vg_kill_nvml_lists(&n, 4243), 0);
    assert_false(n.hung);
}

/* GPU 0 refuses every process list: 4242 is still found on GPU 1, but "not listed" cannot be
 * said of anyone (it used to be 0: the target's GPU claim taken as gone). */
static void test_list_unknown(void **state)
{
    struct fx *f = *state;
    char extra[1024] = "";
    static const char *const kinds[] = {"Compute", "Graphics", "MPSCompute"};
    static const char *const vers[] = {"_v3", "_v2", ""};
    for (size_t k = 0; k < 3; k++)
        for (size_t v = 0; v < 3; v++) {
            size_t len = strlen(extra);
            snprintf(extra + len, sizeof(extra) - len,
                     "error func=nvmlDeviceGet%sRunningProcesses%s gpu=0 code=3\n", kinds[k],
                     vers[v]);
        }
    fx_scenario(f, extra);
    struct vg_kill_nvml n = {.path = FAKE_FULL, .timeout_ms = 5000};
    assert_int_equal(vg_kill_nvml_lists(&n, 4242), 1);
    assert_int_equal(vg_kill_nvml_lists(&n, 4243), -1);
    assert_false(n.hung);
}

/* A driver hanging in GPU 1's list: the first ask waits out the timeout and cannot tell; every
 * later one answers at once (well under the timeout, on any load). */
static void test_hung_once(void **state)
{
    struct fx *f = *state;
    fx_scenario(f, "hang func=nvmlDeviceGetComputeRunningProcesses_v3 gpu=1 seconds=20\n");
    struct vg_kill_nvml n = {.path = FAKE_FULL, .timeout_ms = 400};
    uint64_t t0 = vg_clock_ms();
    assert_int_equal(vg_kill_nvml_lists(&n, 4242), -1);
    uint64_t t1 = vg_clock_ms();
    assert_true(n.hung);
    assert_true(t1 - t0 >= 300);
    for (int i = 0; i < 16; i++)
        assert_int_equal(vg_kill_nvml_lists(&n, 4242 + i), -1);
    uint64_t t2 = vg_clock_ms();
    print_message("first ask %llu ms, 16 more %llu ms\n", (unsigned long long)(t1 - t0),
                  (unsigned long long)(t2 - t1));
    assert_true(t2 - t1 < 400); /* was 16 x 400 ms */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_listed_or_not, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_list_unknown, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_hung_once, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("kill", tests, NULL, NULL);
}
