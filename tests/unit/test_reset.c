/*
 * Unit tests for act/reset.c, the GPU reset of `clean --reset --force`: which GPUs of a plan's
 * scope only a reset can free (hand-made snapshots before and after the stop, matched by UUID,
 * never when a holder could hide), and the checks before each reset: root only, a well-formed
 * UUID, nvidia-smi in PATH, a fresh look that shows the GPU listed and free. The run itself is
 * a stand-in nvidia-smi script that records its arguments and exits as told.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "act/plan.h"
#include "act/reset.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static const char *const U0 = "GPU-00000000-0000-0000-0000-000000000000";
static const char *const U1 = "GPU-11111111-1111-1111-1111-111111111111";
static const char *const U2 = "GPU-22222222-2222-2222-2222-222222222222";
static const char *const U3 = "GPU-33333333-3333-3333-3333-333333333333";

/* Four GPUs, 6 GiB used on each but GPU 3 (100 MiB): GPU 0 held by nobody, GPU 1 by PID 100
 * (5 GiB of it, through NVML and its descriptor) unless holder is false, GPU 2 held by nobody
 * but of unknown minor number (its node could hide a holder), GPU 3 under the threshold. */
static struct vg_snapshot *host(bool holder)
{
    struct vg_gpu_list l = {0};
    struct vg_proc_table t = {0};
    fx_gpu(&l, U0, "NVIDIA H100", 0, 80 * GiB, 6 * GiB, 0);
    fx_gpu(&l, U1, "NVIDIA H100", 1, 80 * GiB, 6 * GiB, 0);
    fx_gpu(&l, U2, "NVIDIA H100", 2, 80 * GiB, 6 * GiB, 0);
    fx_gpu(&l, U3, "NVIDIA H100", 3, 80 * GiB, 100 * MiB, 0);
    l.gpus[2].known &= ~VG_GPU_K_MINOR; /* through l.gpus: each fx_gpu() may move the list */
    if (holder) {
        fx_gproc(&l.gpus[1], 100, 5 * GiB, VG_PTYPE_COMPUTE);
        fx_fd(fx_proc(&t, 100, "python", "python train.py", 'S'), 1);
    }
    return fx_assemble(&l, &t);
}

static const size_t all_gpus[] = {0, 1, 2, 3};

static struct vg_plan scope_of(const size_t *gpus, size_t n)
{
    return (struct vg_plan){.scope = (size_t *)gpus, .nscope = n};
}

static void test_needed(void **state)
{
    (void)state;
    struct vg_snapshot *before = host(true);
    struct vg_plan plan = scope_of(all_gpus, 4);
    struct vg_reset *rs;
    size_t n;

    /* Only GPU 0: GPU 1 is held, GPU 2's node is unknown, GPU 3 is under the threshold. */
    assert_int_equal(vg_reset_needed(&plan, before, before, 1 * GiB, &rs, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(rs[0].uuid, before->gpus.gpus[0].uuid); /* borrowed from before */
    assert_int_equal(rs[0].index, 0);
    assert_int_equal(rs[0].held, 6 * GiB);
    assert_false(rs[0].attempted);
    assert_null(rs[0].refused);
    free(rs);

    /* After the stop the holder of GPU 1 is gone and its memory stayed: GPU 1 too. */
    struct vg_snapshot *after = host(false);
    assert_int_equal(vg_reset_needed(&plan, before, after, 1 * GiB, &rs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rs[0].uuid, U0);
    assert_string_equal(rs[1].uuid, U1);
    assert_int_equal(rs[1].index, 1);
    free(rs);

    /* Only the plan's scope; a GPU whose UUID the plan's snapshot does not know is skipped. */
    static const size_t some[] = {1, 3};
    plan = scope_of(some, 2);
    assert_int_equal(vg_reset_needed(&plan, before, after, 1 * GiB, &rs, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rs[0].uuid, U1);
    free(rs);
    before->gpus.gpus[1].known &= ~VG_GPU_K_UUID;
    assert_int_equal(vg_reset_needed(&plan, before, after, 1 * GiB, &rs, &n), 0);
    assert_int_equal(n, 0);
    assert_null(rs);
    before->gpus.gpus[1].known |= VG_GPU_K_UUID;

    /* A lower threshold takes GPU 3 in. */
    assert_int_equal(vg_reset_needed(&plan, before, after, 10 * MiB, &rs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rs[1].uuid, U3);
    free(rs);

    /* Descriptors that could not be read could hide a holder: never a reset. */
    plan = scope_of(all_gpus, 4);
    after->procs.n_fd_unread = 1;
    assert_int_equal(vg_reset_needed(&plan, before, after, 1 * GiB, &rs, &n), 0);
    assert_int_equal(n, 0);
    after->procs.n_fd_unread = 0;
    after->procs.access |= VG_PROC_ACC_HIDEPID;
    assert_int_equal(vg_reset_needed(&plan, before, after, 1 * GiB, &rs, &n), 0);
    assert_int_equal(n, 0);

    vg_snap_free(after);
    vg_snap_free(before);
}

/* ------------------------------------------------------------------------------ the run */

/* What the look before each reset answers. */
enum look_answer { LOOK_FAIL, LOOK_FREE, LOOK_HELD, LOOK_NO_DRIVER, LOOK_GONE };

struct look {
    enum look_answer answer;
    unsigned calls;
};

static int look_fn(void *ctx, struct vg_snapshot **snap)
{
    struct look *lk = ctx;
    lk->calls++;
    switch (lk->answer) {
    case LOOK_FAIL:
        return -1;
    case LOOK_FREE:
        *snap = host(false);
        return 0;
    case LOOK_HELD:
        *snap = host(true);
        return 0;
    case LOOK_NO_DRIVER:
        *snap = host(false);
        (*snap)->driver_ok = false;
        return 0;
    case LOOK_GONE: {
        struct vg_gpu_list l = {0};
        struct vg_proc_table t = {0};
        fx_gpu(&l, U0, "NVIDIA H100", 0, 80 * GiB, 6 * GiB, 0);
        *snap = fx_assemble(&l, &t);
        return 0;
    }
    }
    return -1;
}

/* One reset to run of GPU uuid, as vg_reset_needed() gives it. */
static struct vg_reset reset_of(const char *uuid, unsigned index)
{
    return (struct vg_reset){.uuid = uuid, .index = index, .held = 6 * GiB};
}

static void test_run_nothing(void **state)
{
    (void)state;
    struct look lk = {.answer = LOOK_FAIL};
    vg_reset_run(NULL, 0, look_fn, &lk);
    assert_int_equal(lk.calls, 0);
}

static void test_run_not_root(void **state)
{
    (void)state;
    if (getuid() == 0 && geteuid() == 0)
        skip(); /* the refusal is for everyone else */
    struct look lk = {.answer = LOOK_FREE};
    struct vg_reset r = reset_of(U0, 0);
    vg_reset_run(&r, 1, look_fn, &lk);
    assert_false(r.attempted);
    assert_string_equal(r.refused, "a GPU reset needs root");
    assert_int_equal(lk.calls, 0);
}

/* A directory with a stand-in nvidia-smi that writes its arguments to args and exits with
 * status (or, status < 0, is killed by signal -status); PATH points there while a test runs. */
struct smi {
    char dir[4096], args[4200];
    char *path; /* the PATH to restore */
};

static void smi_setup(struct smi *s, int status)
{
    memset(s, 0, sizeof(*s));
    /* in the build directory, which runs binaries: /tmp may be mounted noexec */
    snprintf(s->dir, sizeof(s->dir), "%s/tests/reset-smi.XXXXXX", VG_TEST_BUILD_DIR);
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->args, sizeof(s->args), "%s/args", s->dir);
    char script[4200];
    snprintf(script, sizeof(script), "%s/nvidia-smi", s->dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$@\" >%s\n", s->args);
    if (status < 0)
        fprintf(f, "kill -%d $$\n", -status);
    fprintf(f, "exit %d\n", status < 0 ? 0 : status);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(script, 0755), 0);
    const char *old = getenv("PATH");
    s->path = old ? fx_strdup(old) : NULL;
    assert_int_equal(setenv("PATH", s->dir, 1), 0);
}

static void smi_teardown(struct smi *s)
{
    char script[4200];
    snprintf(script, sizeof(script), "%s/nvidia-smi", s->dir);
    unlink(script);
    unlink(s->args);
    rmdir(s->dir);
    if (s->path)
        setenv("PATH", s->path, 1);
    else
        unsetenv("PATH");
    free(s->path);
}

/* What the stand-in was given, one argument a line; "" when it did not run. */
static void smi_args(const struct smi *s, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(s->args, "r");
    if (!f)
        return;
    size_t got = fread(out, 1, n - 1, f);
    out[got] = '\0';
    fclose(f);
}

static void test_run_refusals(void **state)
{
    (void)state;
    if (getuid() != 0 || geteuid() != 0)
        skip(); /* each check below comes after the one for root */
    struct smi s;
    smi_setup(&s, 0);
    char got[256];

    /* nvidia-smi -i takes a list: a UUID with a comma in it is never passed on. */
    struct look lk = {.answer = LOOK_FREE};
    struct vg_reset r = reset_of("GPU-0,GPU-1", 0);
    vg_reset_run(&r, 1, look_fn, &lk);
    assert_false(r.attempted);
    assert_non_null(strstr(r.refused, "not a well-formed UUID"));
    assert_int_equal(lk.calls, 0);

    /* Each answer of the look before the reset that forbids it. */
    static const struct {
        enum look_answer answer;
        const char *refused;
    } cases[] = {
        {LOOK_FAIL, "could not look again before the reset"},
        {LOOK_HELD, "a process holds the GPU again: not reset"},
        {LOOK_NO_DRIVER, "the driver's view is unavailable: cannot check that the GPU is free"},
        {LOOK_GONE, "the GPU is gone from the driver's list"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lk = (struct look){.answer = cases[i].answer};
        r = reset_of(U1, 1);
        vg_reset_run(&r, 1, look_fn, &lk);
        assert_int_equal(lk.calls, 1);
        assert_false(r.attempted);
        assert_string_equal(r.refused, cases[i].refused);
    }
    smi_args(&s, got, sizeof(got));
    assert_string_equal(got, ""); /* never run */

    /* No nvidia-smi in PATH: said, and nothing looked at. */
    assert_int_equal(setenv("PATH", "/nonexistent", 1), 0);
    lk = (struct look){.answer = LOOK_FREE};
    r = reset_of(U0, 0);
    vg_reset_run(&r, 1, look_fn, &lk);
    assert_string_equal(r.refused, "nvidia-smi is not in PATH");
    assert_int_equal(lk.calls, 0);
    smi_teardown(&s);
}

static void test_run_resets(void **state)
{
    (void)state;
    if (getuid() != 0 || geteuid() != 0)
        skip();
    struct smi s;
    char got[256];

    /* A free GPU: nvidia-smi --gpu-reset -i UUID, its exit status kept; a refused one beside
     * it does not stop the next. */
    smi_setup(&s, 3);
    struct look lk = {.answer = LOOK_FREE};
    struct vg_reset rs[] = {reset_of("GPU-bad", 2), reset_of(U0, 0)};
    vg_reset_run(rs, 2, look_fn, &lk);
    assert_non_null(rs[0].refused);
    assert_false(rs[0].attempted);
    assert_null(rs[1].refused);
    assert_true(rs[1].attempted);
    assert_int_equal(rs[1].exit_status, 3);
    assert_int_equal(lk.calls, 1);
    smi_args(&s, got, sizeof(got));
    assert_string_equal(got, "--gpu-reset\n-i\nGPU-00000000-0000-0000-0000-000000000000\n");
    smi_teardown(&s);

    /* Killed by a signal: its number, negative. */
    smi_setup(&s, -15);
    lk = (struct look){.answer = LOOK_FREE};
    struct vg_reset r = reset_of(U1, 1);
    vg_reset_run(&r, 1, look_fn, &lk);
    assert_true(r.attempted);
    assert_int_equal(r.exit_status, -15);
    smi_teardown(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needed),       cmocka_unit_test(test_run_nothing),
        cmocka_unit_test(test_run_not_root), cmocka_unit_test(test_run_refusals),
        cmocka_unit_test(test_run_resets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
