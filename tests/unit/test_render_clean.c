/*
 * Unit tests for render/clean.c, clean's words: the plan (who would be stopped, who is not
 * touched and why, who is left alone), the memory at stake per GPU (only the planned targets'
 * figures, found by PID in the plan), what happened after --force (each outcome, freed and
 * still held per GPU, the findings left that concern the plan), the reset step, every refusal
 * sentence, and the JSON document. Over a hand-made snapshot (fixture.h) and a hand-made plan
 * (act/plan.h), so each line's cause is in the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "fixture.h"
#include "act/plan.h"
#include "render/clean.h"

#define GiB (1ull << 30)

static const char *const U0 = "GPU-00000000-0000-0000-0000-000000000000";
static const char *const U1 = "GPU-11111111-1111-1111-1111-111111111111";

/* GPU 0: 10 GiB used, 4 of them PID 100's, 1 each PID 300's, 400's and 500's, and PID 150
 * holding only its device node (3 GiB unexplained). GPU 1: PID 200's job, 2 GiB. With after,
 * the snapshot after the stop: 100 and 150 gone, 6 GiB still used on GPU 0. */
static struct vg_snapshot *host(bool after)
{
    struct vg_gpu_list l = {0};
    struct vg_proc_table t = {0};
    fx_gpu(&l, U0, "NVIDIA H100", 0, 80 * GiB, after ? 6 * GiB : 10 * GiB, 0);
    fx_gpu(&l, U1, "NVIDIA H100", 1, 80 * GiB, 2 * GiB, 0);
    struct vg_gpu *g0 = &l.gpus[0], *g1 = &l.gpus[1]; /* after the last growth */
    static const struct {
        pid_t pid;
        uint64_t mem; /* 0: device node only */
        unsigned minor;
        char state;
        bool gone_after;
    } holders[] = {
        {100, 4 * GiB, 0, 'S', true},  {150, 0, 0, 'S', true},        {200, 2 * GiB, 1, 'R', false},
        {300, 1 * GiB, 0, 'Z', false}, {400, 1 * GiB, 0, 'S', false}, {500, 1 * GiB, 0, 'S', false},
    };
    for (size_t i = 0; i < sizeof(holders) / sizeof(holders[0]); i++) {
        if (after && holders[i].gone_after)
            continue;
        if (holders[i].mem)
            fx_gproc(holders[i].minor ? g1 : g0, (uint32_t)holders[i].pid, holders[i].mem,
                     VG_PTYPE_COMPUTE);
        struct vg_proc *p =
            fx_proc(&t, holders[i].pid, "python", "python train.py", holders[i].state);
        if (holders[i].state != 'Z')
            fx_fd(p, holders[i].minor);
    }
    return fx_assemble(&l, &t);
}

static size_t gpu0[] = {0};
static size_t scope[] = {0, 1};

/* The plan of `clean --gpu 0` on host(false), by pid: two targets, two refusals, one left. */
static struct vg_plan_entry entries[] = {
    {.id = {.pid = 100, .start_ticks = 1000, .uid = 1000, .nvml = true},
     .signal = true,
     .reason = "orphan-holder",
     .finding = "PID 100 holds GPU memory; its job is gone",
     .state = 'S',
     .user = "alice",
     .cmdline = "python train.py",
     .gpus = gpu0,
     .ngpus = 1,
     .seen = VG_SEEN_NVML | VG_SEEN_FD,
     .mem_known = true,
     .mem_bytes = 4 * GiB},
    {.id = {.pid = 150, .start_ticks = 1100, .uid = 1000},
     .signal = true,
     .state = 'S',
     .user = "alice",
     .comm = "python",
     .gpus = gpu0,
     .ngpus = 1,
     .seen = VG_SEEN_FD},
    {.id = {.pid = 300, .uid = 1000},
     .refusal = VG_KILL_ZOMBIE,
     .act_on = 250,
     .reason = "zombie-holder",
     .finding = "PID 300 is a zombie holding GPU memory",
     .state = 'Z',
     .user = "alice",
     .cmdline = "",
     .comm = "python",
     .gpus = gpu0,
     .ngpus = 1,
     .seen = VG_SEEN_NVML,
     .mem_known = true,
     .mem_bytes = 1 * GiB},
    {.id = {.pid = 400, .uid = 1001},
     .refusal = VG_KILL_OTHER_USER,
     .state = 'S',
     .user = "bob",
     .cmdline = "python serve.py",
     .gpus = gpu0,
     .ngpus = 1,
     .seen = VG_SEEN_NVML | VG_SEEN_FD,
     .mem_known = true,
     .mem_bytes = 1 * GiB},
    {.id = {.pid = 500, .uid = 1000},
     .leave = true,
     .refusal = VG_KILL_NOT_LEFTOVER,
     .verdict = "it detached on purpose (setsid)",
     .state = 'S',
     .user = "alice",
     .cmdline = "python notebook.py",
     .gpus = gpu0,
     .ngpus = 1,
     .seen = VG_SEEN_NVML | VG_SEEN_FD,
     .mem_known = true,
     .mem_bytes = 1 * GiB},
};

static const struct vg_plan plan = {
    .v = entries, .n = 5, .nsignal = 2, .nrefused = 2, .nleft = 1, .scope = scope, .nscope = 2};

static const struct vg_render_opts ro = {0};

static char *text_of(const struct vg_clean_view *v)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    assert_int_equal(vg_render_clean_text(v, &ro, &b), 0);
    char *s = vg_buf_steal(&b);
    vg_buf_release(&b);
    assert_non_null(s);
    return s;
}

/* text holds line (a whole line, or several) */
static void has(const char *text, const char *line)
{
    if (strstr(text, line))
        return;
    fprintf(stderr, "missing:\n%s\n--- in:\n%s\n", line, text);
    fail();
}

static void test_plan_text(void **state)
{
    (void)state;
    struct vg_snapshot *before = host(false);
    struct vg_clean_view v = {
        .before = before, .plan = &plan, .filters = "--gpu 0", .grace_ms = 5000};
    char *t = text_of(&v);
    has(t, "Plan (dry run: nothing was signalled; add --force to act).\n\n"
           "Would stop 2 processes (SIGTERM, then SIGKILL after 5.0s):\n"
           "  PID 100  alice  GPU 0  4 GiB\n"
           "    python train.py\n"
           "    why: orphan-holder: PID 100 holds GPU memory; its job is gone\n"
           "  PID 150  alice  GPU 0  device node only\n"
           "    [python]\n"
           "    why: holds the GPU and matches --gpu 0\n\n");
    has(t, "Will not touch 2 processes:\n  PID 300  alice  GPU 0  1 GiB  state Z\n");
    has(t, "    not touched: a zombie (defunct): vramguard never signals one; act on its parent, "
           "PID 250,");
    has(t, "  PID 400  bob  GPU 0  1 GiB\n    python serve.py\n"
           "    why: holds the GPU and matches --gpu 0\n"
           "    not touched: belongs to bob, another user, and you are not root: ask its owner, "
           "or run as root\n");
    has(t, "Left alone: 1 process that looks orphaned but is not a sure leftover:\n"
           "  PID 500  alice  GPU 0  1 GiB\n    python notebook.py\n");
    has(t, "    left alone: not a leftover: it detached on purpose (setsid)\n");
    /* Only the targets' memory counts (4 GiB, not the refused 2 GiB); the node-only target
     * likely frees what no process accounts for; GPU 1 has no target. */
    has(t, "Memory at stake:\n"
           "  GPU 0  NVIDIA H100  GPU-00000000: 10 GiB of 80 GiB used; stopping 2 processes frees "
           "the 4 GiB the driver attributes to them, and likely frees the 3 GiB no listed "
           "process accounts for\n"
           "  GPU 1  NVIDIA H100  GPU-11111111: 2 GiB of 80 GiB used; nothing to stop here\n");
    assert_null(strstr(t, "Memory after"));
    assert_null(strstr(t, "GPU reset"));
    free(t);

    /* Nothing planned: said by what was asked. */
    const struct vg_plan empty = {.scope = gpu0, .nscope = 1};
    v.plan = &empty;
    t = text_of(&v);
    has(t, "No process holding a GPU matches --gpu 0.\n\n");
    assert_null(strstr(t, "stopping"));
    free(t);
    v.filters = "";
    t = text_of(&v);
    has(t, "Nothing to clean: no leftover of a finished job holds a GPU.\n\n");
    has(t, "  GPU 0  NVIDIA H100  GPU-00000000: 10 GiB of 80 GiB used; nothing to stop here\n");
    free(t);
    vg_snap_free(before);
}

static void test_after_text(void **state)
{
    (void)state;
    struct vg_snapshot *before = host(false), *after = host(true);
    struct vg_kill kills[5];
    for (size_t i = 0; i < 5; i++)
        vg_kill_init(&kills[i], &entries[i].id);
    kills[0].outcome = VG_KILL_TERMINATED;
    kills[0].stop.exit_ms = 300;
    kills[1].outcome = VG_KILL_GONE;
    /* What doctor still finds: one finding about a planned PID, one about neither a planned
     * PID nor a GPU in scope (not shown). */
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_finding *f = vg_finding_add(&fs, "zombie-holder", VG_SEV_WARNING);
    vg_finding_title(&fs, f, "PID 300 is a zombie holding GPU memory");
    vg_finding_pid(&fs, f, 300);
    vg_finding_fix(&fs, f, "act on its parent, PID 250");
    f = vg_finding_add(&fs, "foreign-pid", VG_SEV_INFO);
    vg_finding_title(&fs, f, "not about this plan");
    vg_finding_pid(&fs, f, 999);
    assert_int_equal(fs.err, 0);
    struct vg_clean_view v = {.before = before,
                              .plan = &plan,
                              .filters = "--gpu 0",
                              .force = true,
                              .grace_ms = 5000,
                              .kills = kills,
                              .after = after,
                              .after_findings = &fs};
    char *t = text_of(&v);
    has(t, "Clean: SIGTERM through a pidfd after re-checking each process, SIGKILL 5.0s later "
           "if it is still there.\n\n2 targets:\n  PID 100  alice  GPU 0  4 GiB\n");
    has(t, "    result: exited after SIGTERM (0.3s)\n");
    has(t, "Memory before:\n  GPU 0");
    has(t, "\nMemory after:\n"
           "  GPU 0  NVIDIA H100  GPU-00000000: freed 4 GiB; now 6 GiB of 80 GiB used, 3 holders, "
           "3 GiB held by no listed process\n"
           "  GPU 1  NVIDIA H100  GPU-11111111: nothing freed; now 2 GiB of 80 GiB used, 1 "
           "holder\n");
    has(t, "\nStill found (vramguard doctor says):\n"
           "  WARNING zombie-holder: PID 300 is a zombie holding GPU memory\n"
           "    fix: act on its parent, PID 250\n");
    assert_null(strstr(t, "not about this plan"));
    free(t);

    /* Nothing left that concerns the plan. */
    struct vg_findings none;
    vg_findings_init(&none);
    v.after_findings = &none;
    t = text_of(&v);
    has(t, "\nNothing left to fix on these GPUs (vramguard doctor finds no problem concerning "
           "them).\n");
    free(t);

    /* The driver gone after the stop: said, not guessed. */
    after->driver_ok = false;
    t = text_of(&v);
    has(t, "  GPU 0  NVIDIA H100  GPU-00000000: cannot tell now (the driver's view is "
           "unavailable)\n");
    free(t);

    for (size_t i = 0; i < 5; i++)
        vg_kill_release(&kills[i]);
    vg_findings_release(&none);
    vg_findings_release(&fs);
    vg_snap_free(after);
    vg_snap_free(before);
}

static void test_resets_text(void **state)
{
    (void)state;
    struct vg_snapshot *before = host(false);
    struct vg_reset rs[] = {
        {.uuid = U0, .index = 0, .held = 3 * GiB},
        {.uuid = U1, .index = 1, .held = 2 * GiB, .attempted = true, .exit_status = 0},
        {.uuid = U1, .index = 1, .held = 2 * GiB, .attempted = true, .exit_status = 3},
        {.uuid = U1, .index = 1, .held = 2 * GiB, .attempted = true, .exit_status = -9},
        {.uuid = U1, .index = 1, .held = 2 * GiB, .refused = "a GPU reset needs root"},
    };
    const struct vg_plan empty = {.scope = scope, .nscope = 2};
    struct vg_clean_view v = {.before = before, .plan = &empty, .resets = rs, .nresets = 5};
    char *t = text_of(&v);
    has(t, "\nGPU reset: memory held with no process left; only a reset (or a reboot) frees it.\n"
           "  GPU 0: 3 GiB held.\n"
           "    nvidia-smi --gpu-reset -i GPU-00000000-0000-0000-0000-000000000000\n"
           "    'vramguard clean --gpu 0 --reset --force', as root, runs it after checking again "
           "that nothing holds the GPU\n");
    has(t, "    ran it: nvidia-smi exited 0\n");
    has(t, "    ran it: nvidia-smi exited 3\n");
    has(t, "    ran it: nvidia-smi was killed by signal 9\n");
    has(t, "    not run: a GPU reset needs root\n");
    has(t, "  Preconditions:\n    - ");
    for (size_t i = 0; vg_clean_reset_preconditions[i]; i++)
        has(t, vg_clean_reset_preconditions[i]);
    free(t);

    /* Asked for (--reset --force) and neither run nor refused: no advice to ask for it. */
    v.reset = v.force = true;
    v.nresets = 1;
    t = text_of(&v);
    assert_null(strstr(t, "as root, runs it"));
    free(t);
    vg_snap_free(before);
}

static void test_refusals(void **state)
{
    (void)state;
    struct vg_plan_entry e = {.id = {.pid = 42, .start_ticks = 500, .uid = 1001}};
    struct vg_buf b;
    struct vg_kill k = {.now_start_ticks = 900, .now_uid = 1001};
    static const struct {
        enum vg_kill_refusal r;
        const char *user, *verdict, *protected_name;
        const struct vg_kill *k;
        const char *want;
    } cases[] = {
        {VG_KILL_INIT, NULL, NULL, NULL, NULL, "PID 1 (init) is never signalled"},
        {VG_KILL_SELF, NULL, NULL, NULL, NULL, "this is vramguard itself"},
        {VG_KILL_OTHER_USER, NULL, NULL, NULL, NULL,
         "belongs to uid 1001, another user, and you are not root: ask its owner, or run as "
         "root"},
        {VG_KILL_PROTECTED, NULL, NULL, "nvidia-persistenced", NULL,
         "infrastructure (nvidia-persistenced): never signalled by a cleanup; stop its service "
         "yourself if it really must go"},
        {VG_KILL_UNSURE, NULL, "its parent may come back", NULL, NULL,
         "not a sure leftover: its parent may come back. Stop it by name if it is one: "
         "vramguard clean --pid 42 --force"},
        {VG_KILL_NOT_LEFTOVER, NULL, NULL, NULL, NULL, "not a leftover: it detached on purpose"},
        {VG_KILL_RELEASED, NULL, NULL, NULL, NULL, "it no longer holds the GPU: left alone"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e.user = (char *)cases[i].user;
        e.verdict = cases[i].verdict;
        e.protected_name = cases[i].protected_name;
        vg_buf_init(&b, 0);
        vg_render_clean_refusal(&b, &e, cases[i].r, cases[i].k);
        assert_string_equal(vg_buf_str(&b), cases[i].want);
        vg_buf_release(&b);
    }
    /* At signal time: the identity that changed, with both figures. */
    vg_buf_init(&b, 0);
    vg_render_clean_refusal(&b, &e, VG_KILL_CHANGED, &k);
    assert_string_equal(vg_buf_str(&b), "its start time changed since the plan (500 -> 900 "
                                        "ticks after boot): the PID now names another process");
    vg_buf_release(&b);
    k.now_start_ticks = 500;
    k.now_uid = 0;
    vg_buf_init(&b, 0);
    vg_render_clean_refusal(&b, &e, VG_KILL_CHANGED, &k);
    assert_string_equal(vg_buf_str(&b), "its owner changed since the plan (uid 1001 -> 0)");
    vg_buf_release(&b);
    /* hidepid: most likely hidden, not gone */
    e.hidden = true;
    vg_buf_init(&b, 0);
    vg_render_clean_refusal(&b, &e, VG_KILL_NOT_VISIBLE, NULL);
    has(vg_buf_str(&b), "mounted with hidepid");
    vg_buf_release(&b);
}

static void test_json(void **state)
{
    (void)state;
    struct vg_snapshot *before = host(false);
    const struct vg_plan_opts o = {.by_gpu = true, .gpu = 0};
    struct vg_clean_view v = {
        .before = before, .plan = &plan, .opts = &o, .filters = "--gpu 0", .grace_ms = 5000};
    struct vg_buf b;
    vg_buf_init(&b, 0);
    assert_int_equal(vg_render_clean_json(&v, &b), 0);
    const char *j = vg_buf_str(&b);
    has(j, "\"schema\": \"vramguard.clean/1\"");
    has(j, "\"mode\": \"plan\"");
    /* every entry, in the plan's order */
    const char *p100 = strstr(j, "\"pid\": 100"), *p500 = strstr(j, "\"pid\": 500");
    assert_non_null(p100);
    assert_non_null(p500);
    assert_true(p100 < p500);
    /* nothing to reset: no preconditions */
    has(j, "\"reset_preconditions\": []");
    vg_buf_release(&b);
    vg_snap_free(before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_text),   cmocka_unit_test(test_after_text),
        cmocka_unit_test(test_resets_text), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
