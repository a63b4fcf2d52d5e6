/*
 * Unit tests for the GPU health rules (src/rules/gpu_health.c) over hand-made snapshots: each
 * rule fires on its fact with the fix it should give, stays quiet on a healthy GPU, and never
 * fires (nor reads as healthy) on a fact the driver did not give.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "rules/rules.h"

#define GiB (1ull << 30)

struct host {
    struct vg_gpu_list l;
    struct vg_proc_table t;
    struct vg_snapshot *snap;
    struct vg_findings fs;
    struct vg_rule_opts ro;
};

/* n healthy H100s with every health fact known. */
static void host_init(struct host *h, size_t n)
{
    static const char *const uuids[] = {"GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2", "GPU-dddd-3"};
    memset(h, 0, sizeof(*h));
    vg_gpu_list_init(&h->l);
    vg_proc_table_init(&h->t);
    for (size_t i = 0; i < n; i++)
        fx_health(fx_gpu(&h->l, uuids[i], "NVIDIA H100", (unsigned)i, 80 * GiB, 0, 0));
    vg_findings_init(&h->fs);
    vg_rule_opts_init(&h->ro);
}

static void host_assemble(struct host *h)
{
    h->snap = fx_assemble(&h->l, &h->t);
}

static void host_judge(struct host *h)
{
    struct vg_err err = VG_ERR_INIT;
    if (!h->snap)
        host_assemble(h);
    assert_int_equal(vg_rules_run(h->snap, &h->ro, &h->fs, &err), 0);
}

static void host_release(struct host *h)
{
    vg_findings_release(&h->fs);
    vg_snap_free(h->snap);
}

static const struct vg_finding *finding(const struct host *h, const char *rule)
{
    for (size_t i = 0; i < h->fs.n; i++)
        if (strcmp(h->fs.v[i].rule, rule) == 0)
            return &h->fs.v[i];
    return NULL;
}

static bool fixed(const struct vg_finding *f, const char *text)
{
    for (size_t i = 0; f && i < f->nfix; i++)
        if (strstr(f->fix[i], text))
            return true;
    return false;
}

static bool said(const struct vg_finding *f, const char *text)
{
    for (size_t i = 0; f && i < f->nevidence; i++)
        if (strstr(f->evidence[i], text))
            return true;
    return false;
}

/* A healthy host: no health finding. */
static void test_healthy(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    h.l.gpus[0].health.ecc_vol_corr = 40; /* corrected errors are the ECC doing its job */
    h.l.gpus[0].health.clocks = VG_CLK_GPU_IDLE | VG_CLK_SW_POWER_CAP; /* not brakes */
    host_judge(&h);
    assert_int_equal(h.fs.n, 0);
    host_release(&h);
}

/* Unknown is not healthy, and not a finding either: nothing fires on a GPU whose driver gave
 * no health fact, whatever the zeroed values say. */
static void test_unknown_fires_nothing(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    struct vg_gpu_health *g = &h.l.gpus[0].health;
    g->ecc_vol_uncorr = 3;
    g->remap_pending = g->remap_failure = g->retired_pending = true;
    g->recovery = VG_RECOVERY_NODE_REBOOT;
    g->clocks = VG_CLK_HW_SLOWDOWN;
    g->known = 0;
    host_judge(&h);
    assert_int_equal(h.fs.n, 0);
    host_release(&h);
}

/* A reset fix names the holders that block it (the daemons with how to stop them) and the
 * exact command. */
static void test_remap_pending_names_holders(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    h.l.gpus[1].health.remap_pending = true;
    h.l.gpus[1].health.remap_uncorr = 2;
    h.l.gpus[1].persistence = true;
    h.l.gpus[1].known |= VG_GPU_K_PERSIST;
    struct vg_proc *p = fx_proc(&h.t, 900, "nvidia-persiste", "/usr/bin/nvidia-persistenced", 'S');
    fx_fd(p, 1);
    p = fx_proc(&h.t, 4242, "python", "python train.py", 'S');
    fx_fd(p, 1);
    fx_gproc(&h.l.gpus[1], 4242, 2 * GiB, VG_PTYPE_COMPUTE);
    host_judge(&h);
    const struct vg_finding *f = finding(&h, "remap-pending");
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_CRITICAL);
    assert_int_equal(f->ngpus, 1);
    assert_int_equal(f->gpus[0], 1);
    assert_non_null(strstr(f->title, "GPU 1"));
    assert_true(said(f, "2 for uncorrectable errors"));
    assert_true(fixed(f, "the remap happens at the next GPU reset; a reset needs the GPU free: "
                         "stop its holders (PIDs 900 nvidia-persiste, 4242 python), then "
                         "`nvidia-smi -r -i GPU-bbbb-1`"));
    assert_true(fixed(f, "`systemctl stop nvidia-persistenced` for the reset"));
    assert_null(finding(&h, "remap-failed"));
    host_release(&h);
}

static void test_remap_failed_over_pending(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    h.l.gpus[0].health.remap_pending = h.l.gpus[0].health.remap_failure = true;
    host_judge(&h);
    assert_non_null(finding(&h, "remap-failed"));
    assert_null(finding(&h, "remap-pending")); /* one situation, one finding */
    assert_true(fixed(finding(&h, "remap-failed"), "RMA"));
    host_release(&h);
}

static void test_ecc_and_retirement(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    struct vg_gpu_health *g = &h.l.gpus[0].health;
    g->ecc_vol_uncorr = 2;
    g->ecc_agg_uncorr = 5;
    g->retired_pending = true;
    g->retired_dbe = 1;
    host_judge(&h);
    const struct vg_finding *f = finding(&h, "ecc-uncorrected");
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_CRITICAL);
    assert_true(said(f, "2 uncorrected, 0 corrected"));
    assert_true(said(f, "(aggregate): 5 uncorrected"));
    assert_true(fixed(f, "no process holds the GPU: `nvidia-smi -r -i GPU-aaaa-0`"));
    f = finding(&h, "retirement-pending");
    assert_non_null(f);
    assert_true(said(f, "0 for multiple single-bit errors, 1 for double-bit"));
    /* aggregate alone is history: no finding */
    vg_findings_release(&h.fs);
    vg_findings_init(&h.fs);
    h.snap->gpus.gpus[0].health.ecc_vol_uncorr = 0;
    h.snap->gpus.gpus[0].health.retired_pending = false;
    host_judge(&h);
    assert_int_equal(h.fs.n, 0);
    host_release(&h);
}

static void test_recovery_actions(void **state)
{
    (void)state;
    static const struct {
        unsigned action;
        enum vg_severity sev;
        const char *fix;
    } cases[] = {
        {VG_RECOVERY_GPU_RESET, VG_SEV_CRITICAL, "`nvidia-smi -r -i GPU-aaaa-0`"},
        {VG_RECOVERY_NODE_REBOOT, VG_SEV_CRITICAL, "then reboot it"},
        {VG_RECOVERY_DRAIN_P2P, VG_SEV_WARNING, "peer-to-peer"},
        {VG_RECOVERY_DRAIN_AND_RESET, VG_SEV_CRITICAL, "reduced capacity"},
        {9, VG_SEV_CRITICAL, "nvmlDeviceGpuRecoveryAction_t"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct host h;
        host_init(&h, 1);
        h.l.gpus[0].health.recovery = cases[i].action;
        host_judge(&h);
        const struct vg_finding *f = finding(&h, "recovery-action");
        assert_non_null(f);
        assert_int_equal(f->severity, cases[i].sev);
        if (!fixed(f, cases[i].fix))
            fail_msg("action %u: no fix with '%s'", cases[i].action, cases[i].fix);
        host_release(&h);
    }
}

static void test_throttled(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    struct vg_gpu *g = &h.l.gpus[0];
    g->health.clocks = VG_CLK_HW_THERMAL | VG_CLK_GPU_IDLE;
    g->temp_c = 91;
    g->known |= VG_GPU_K_TEMP;
    host_judge(&h);
    const struct vg_finding *f = finding(&h, "throttled");
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_WARNING);
    assert_non_null(strstr(f->title, "HW thermal slowdown"));
    assert_true(said(f, "temperature 91 C"));
    assert_true(fixed(f, "airflow"));
    assert_true(fixed(f, "no reset is needed"));
    host_release(&h);
}

/* gpu-missing: --expect-gpus decides when given; else the PCI bus, at medium confidence, with
 * the addresses the driver does not show. */
static void test_gpu_missing(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 2);
    h.l.gpus[0].pci_bus = 0x17;
    h.l.gpus[1].pci_bus = 0x18;
    h.l.gpus[0].known |= VG_GPU_K_PCI;
    h.l.gpus[1].known |= VG_GPU_K_PCI;
    host_assemble(&h);
    fx_pci(h.snap, 3);
    host_judge(&h);
    const struct vg_finding *f = finding(&h, "gpu-missing");
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_CRITICAL);
    assert_int_equal(f->confidence, VG_CONF_MEDIUM);
    assert_non_null(strstr(f->title, "the driver shows 2 of 3"));
    assert_true(said(f, "0000:19:00.0 is on the bus, not in the driver's list"));
    assert_false(said(f, "0000:17:00.0"));
    vg_findings_release(&h.fs);
    vg_findings_init(&h.fs);
    h.ro.expect_gpus_set = true;
    h.ro.expect_gpus = 2; /* what the person says wins over the bus */
    host_judge(&h);
    assert_null(finding(&h, "gpu-missing"));
    vg_findings_release(&h.fs);
    vg_findings_init(&h.fs);
    h.ro.expect_gpus = 4;
    host_judge(&h);
    f = finding(&h, "gpu-missing");
    assert_non_null(f);
    assert_int_equal(f->confidence, VG_CONF_HIGH);
    assert_true(said(f, "--expect-gpus 4"));
    host_release(&h);
}

/* No sysfs and no --expect-gpus: nothing is expected, nothing is missing. */
static void test_gpu_missing_unknown_bus(void **state)
{
    (void)state;
    struct host h;
    host_init(&h, 1);
    host_judge(&h);
    assert_null(finding(&h, "gpu-missing"));
    host_release(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy),
        cmocka_unit_test(test_unknown_fires_nothing),
        cmocka_unit_test(test_remap_pending_names_holders),
        cmocka_unit_test(test_remap_failed_over_pending),
        cmocka_unit_test(test_ecc_and_retirement),
        cmocka_unit_test(test_recovery_actions),
        cmocka_unit_test(test_throttled),
        cmocka_unit_test(test_gpu_missing),
        cmocka_unit_test(test_gpu_missing_unknown_bus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
