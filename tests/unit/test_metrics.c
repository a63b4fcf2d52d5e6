/*
 * Unit tests for the Prometheus exposition (src/render/metrics.c) over hand-made snapshots and
 * findings: per-GPU series, memory by reason (a partition of used memory), the per-process
 * bound with its pid="other" series, MIG holders merged, unknown values absent (never 0), a
 * failed collection keeping the GPU list, label escaping, and --per-process parsing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fixture.h"
#include "render/metrics.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static const char *const G0 =
    "gpu=\"0\",uuid=\"GPU-aaaaaaaa-0000\",name=\"NVIDIA \\\"A\\\\100\\\"\"";
static const char *const G1 = "gpu=\"1\",uuid=\"GPU-bbbbbbbb-0000\",name=\"H100\"";

/* GPU 0: 80 GiB, 10 GiB used: PID 100 (5 GiB, driver and fd), PID 200 (1 GiB, orphan), PID 300
 * (fd only), PID 999 (2 GiB, not in /proc: foreign), PID 0 (1 MiB, bogus); the rest
 * unexplained. GPU 1: memory unknown; PID 100 with an unknown figure. */
static struct vg_snapshot *host(void)
{
    struct vg_gpu_list l;
    struct vg_proc_table t;
    vg_gpu_list_init(&l);
    vg_proc_table_init(&t);
    fx_gpu(&l, "GPU-aaaaaaaa-0000", "NVIDIA \"A\\100\"", 0, 80 * GiB, 10 * GiB, 512 * MiB);
    fx_gpu(&l, "GPU-bbbbbbbb-0000", "H100", 1, 80 * GiB, 0, 0);
    struct vg_gpu *g0 = &l.gpus[0], *g1 = &l.gpus[1]; /* fx_gpu moves the array */
    g1->known &= ~(unsigned)(VG_GPU_K_MEM | VG_GPU_K_RESERVED | VG_GPU_K_UTIL);
    g0->util_gpu = 42;
    fx_gproc(g0, 100, 5 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 200, 1 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 999, 2 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 0, 1 * MiB, VG_PTYPE_COMPUTE);
    fx_gproc(g1, 100, UINT64_MAX, VG_PTYPE_COMPUTE);
    struct vg_proc *p = fx_proc(&t, 100, "py\n\xff", "python train.py --secret=1", 'R');
    p->container_id = fx_strdup("0123abcd");
    p->pod_uid = fx_strdup("pod-1");
    fx_fd(p, 0);
    fx_proc(&t, 200, "worker", "python worker", 'S');
    fx_fd(fx_proc(&t, 300, "loader", "python loader", 'S'), 0);
    return fx_assemble(&l, &t);
}

static void findings(struct vg_findings *fs)
{
    vg_findings_init(fs);
    struct vg_finding *f = vg_finding_add(fs, "orphan-holder", VG_SEV_CRITICAL);
    vg_finding_pid(fs, f, 200);
    vg_finding_pid(fs, f, 300);
    vg_finding_gpu(fs, f, 0);
    f = vg_finding_add(fs, "foreign-pid", VG_SEV_WARNING);
    vg_finding_pid(fs, f, 999);
    vg_finding_gpu(fs, f, 0);
    f = vg_finding_add(fs, "d-state-holder", VG_SEV_WARNING);
    vg_finding_pid(fs, f, 100);
    vg_finding_gpu(fs, f, 0);
    vg_finding_gpu(fs, f, 1);
    f = vg_finding_add(fs, "invalid-visible", VG_SEV_WARNING);
    vg_finding_pid(fs, f, 100);
    assert_int_equal(fs->err, 0);
}

static struct vg_collector_stats ok_collect(void)
{
    struct vg_collector_stats st = {
        .success = true,
        .duration_seconds = 0.25,
        .timestamp_seconds = 1700000000.5,
        .last_success_known = true,
        .last_success_seconds = 1700000000.5,
        .collections = 3,
        .failures = 1,
        .driver_hangs = 1,
        .full_scans = 1,
        .incremental_scans = 2,
    };
    return st;
}

static char *render(const struct vg_snapshot *s, const struct vg_findings *fs,
                    const struct vg_collector_gpu_ids *ids, const struct vg_collector_stats *st,
                    const struct vg_metrics_opts *o)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    assert_int_equal(vg_metrics_render(s, fs, ids, st, o, &b), 0);
    char *text = vg_buf_steal(&b);
    assert_non_null(text);
    if (getenv("VG_TEST_DUMP"))
        fputs(text, stderr);
    return text;
}

/* Is there a line exactly "NAME{LABELS} VALUE"? */
static int has(const char *text, const char *name, const char *labels, const char *value)
{
    char line[1024];
    if (labels)
        snprintf(line, sizeof(line), "\n%s{%s} %s\n", name, labels, value);
    else
        snprintf(line, sizeof(line), "\n%s %s\n", name, value);
    return strstr(text, line) != NULL;
}

static int lines_of(const char *text, const char *name)
{
    char pre[256];
    snprintf(pre, sizeof(pre), "\n%s{", name);
    int n = 0;
    for (const char *p = text; (p = strstr(p, pre)) != NULL; p++)
        n++;
    return n;
}

static void test_gpu_and_collect(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    struct vg_findings fs;
    findings(&fs);
    struct vg_metrics_opts o;
    vg_metrics_opts_init(&o);
    o.version = "9.9.9";
    struct vg_collector_stats st = ok_collect();
    char *t = render(s, &fs, NULL, &st, &o);
    char l[512];

    assert_true(has(t, "vramguard_build_info", "version=\"9.9.9\"", "1"));
    assert_true(has(t, "vramguard_last_collect_success", NULL, "1"));
    assert_true(has(t, "vramguard_last_collect_duration_seconds", NULL, "0.250000"));
    assert_true(has(t, "vramguard_last_collect_timestamp_seconds", NULL, "1700000000.500"));
    assert_true(has(t, "vramguard_collections_total", NULL, "3"));
    assert_true(has(t, "vramguard_collect_failures_total", NULL, "1"));
    assert_true(has(t, "vramguard_driver_hangs_total", NULL, "1"));
    assert_non_null(strstr(t, "# TYPE vramguard_collections_total counter\n"));
    assert_true(has(t, "vramguard_scans_total", "kind=\"full\"", "1"));
    assert_true(has(t, "vramguard_scans_total", "kind=\"incremental\"", "2"));
    assert_int_equal(lines_of(t, "vramguard_scans_total"), 2);
    assert_non_null(strstr(t, "# TYPE vramguard_scans_total counter\n"));

    assert_true(has(t, "vramguard_gpu_memory_total_bytes", G0, "85899345920"));
    assert_true(has(t, "vramguard_gpu_memory_used_bytes", G0, "10737418240"));
    assert_true(has(t, "vramguard_gpu_memory_reserved_bytes", G0, "536870912"));
    assert_true(has(t, "vramguard_gpu_utilization_ratio", G0, "0.42"));
    assert_true(has(t, "vramguard_gpu_holders", G0, "5"));
    assert_true(has(t, "vramguard_gpu_holders", G1, "1"));
    /* GPU 1's memory is unknown: absent, never 0. */
    assert_int_equal(lines_of(t, "vramguard_gpu_memory_used_bytes"), 1);
    assert_int_equal(lines_of(t, "vramguard_gpu_memory_reserved_bytes"), 1);
    assert_int_equal(lines_of(t, "vramguard_gpu_utilization_ratio"), 1);

    /* By reason: a partition of GPU 0's 10 GiB. */
    snprintf(l, sizeof(l), "%s,reason=\"expected\"", G0);
    assert_true(has(t, "vramguard_gpu_memory_held_bytes", l, "5368709120"));
    snprintf(l, sizeof(l), "%s,reason=\"orphan\"", G0);
    assert_true(has(t, "vramguard_gpu_memory_held_bytes", l, "1073741824"));
    snprintf(l, sizeof(l), "%s,reason=\"foreign_pid\"", G0);
    assert_true(has(t, "vramguard_gpu_memory_held_bytes", l, "2147483648"));
    snprintf(l, sizeof(l), "%s,reason=\"zombie\"", G0);
    assert_true(has(t, "vramguard_gpu_memory_held_bytes", l, "0"));
    /* 10 GiB - 8 GiB - 1 MiB unexplained, plus the bogus PID's 1 MiB. */
    snprintf(l, sizeof(l), "%s,reason=\"unattributed\"", G0);
    assert_true(has(t, "vramguard_gpu_memory_held_bytes", l, "2147483648"));
    /* GPU 1: reasons known (process lists read), unattributed not (memory unknown). */
    snprintf(l, sizeof(l), "%s,reason=\"expected\"", G1);
    assert_true(has(t, "vramguard_gpu_memory_held_bytes", l, "0"));
    snprintf(l, sizeof(l), "%s,reason=\"unattributed\"", G1);
    assert_false(has(t, "vramguard_gpu_memory_held_bytes", l, "0"));
    assert_int_equal(lines_of(t, "vramguard_gpu_memory_held_bytes"), 7 + 6);

    /* Findings: counted per GPU; one about no GPU has no gpu label. */
    assert_true(has(t, "vramguard_findings",
                    "rule=\"orphan-holder\",severity=\"critical\",gpu=\"0\"", "1"));
    assert_true(has(t, "vramguard_findings",
                    "rule=\"d-state-holder\",severity=\"warning\",gpu=\"1\"", "1"));
    assert_true(has(t, "vramguard_findings", "rule=\"invalid-visible\",severity=\"warning\"", "1"));
    free(t);
    vg_findings_release(&fs);
    vg_snap_free(s);
}

static void test_holders(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    struct vg_findings fs;
    findings(&fs);
    struct vg_metrics_opts o;
    vg_metrics_opts_init(&o);
    struct vg_collector_stats st = ok_collect();
    char *t = render(s, &fs, NULL, &st, &o);

    /* Escaped labels; never the command line. */
    const char *p100 = "gpu=\"0\",uuid=\"GPU-aaaaaaaa-0000\",pid=\"100\",user=\"alice\","
                       "comm=\"py\\n\xEF\xBF\xBD\",container=\"0123abcd\",pod_uid=\"pod-1\","
                       "seen_by=\"both\"";
    assert_true(has(t, "vramguard_process_memory_bytes", p100, "5368709120"));
    assert_true(has(t, "vramguard_process_info", p100, "1"));
    assert_null(strstr(t, "train.py"));
    assert_null(strstr(t, "secret"));
    /* Device-node-only holder: info, no memory figure. */
    const char *p300 = "gpu=\"0\",uuid=\"GPU-aaaaaaaa-0000\",pid=\"300\",user=\"alice\","
                       "comm=\"loader\",seen_by=\"fd\"";
    assert_true(has(t, "vramguard_process_info", p300, "1"));
    assert_null(strstr(t, "vramguard_process_memory_bytes{gpu=\"0\",uuid=\"GPU-aaaaaaaa-0000\","
                          "pid=\"300\""));
    /* NVML without a figure (GPU 1): info only. */
    assert_null(strstr(t, "vramguard_process_memory_bytes{gpu=\"1\""));
    assert_non_null(strstr(t, "vramguard_process_info{gpu=\"1\",uuid=\"GPU-bbbbbbbb-0000\","
                              "pid=\"100\""));
    assert_true(has(t, "vramguard_process_memory_bytes",
                    "gpu=\"0\",uuid=\"GPU-aaaaaaaa-0000\",pid=\"0\",seen_by=\"nvml\"", "1048576"));
    assert_int_equal(lines_of(t, "vramguard_process_memory_bytes"), 4);
    assert_int_equal(lines_of(t, "vramguard_process_info"), 6);
    assert_null(strstr(t, ",pid=\"other\""));
    free(t);

    /* top:2 per GPU: PID 100 (5 GiB) and 999 (2 GiB) on GPU 0; the other three summed. */
    assert_int_equal(vg_metrics_parse_pp("top:2", &o), 0);
    t = render(s, &fs, NULL, &st, &o);
    assert_int_equal(lines_of(t, "vramguard_process_info"), 3);
    assert_true(has(t, "vramguard_process_memory_bytes",
                    "gpu=\"0\",uuid=\"GPU-aaaaaaaa-0000\",pid=\"other\"", "1074790400"));
    assert_true(has(t, "vramguard_process_other_holders", G0, "3"));
    assert_non_null(strstr(t, "pid=\"999\""));
    assert_null(strstr(t, "pid=\"200\""));
    free(t);

    assert_int_equal(vg_metrics_parse_pp("none", &o), 0);
    t = render(s, &fs, NULL, &st, &o);
    assert_null(strstr(t, "vramguard_process_"));
    assert_non_null(strstr(t, "vramguard_gpu_memory_held_bytes"));
    free(t);
    vg_findings_release(&fs);
    vg_snap_free(s);
}

static void test_mig_merged(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    struct vg_proc_table t;
    vg_gpu_list_init(&l);
    vg_proc_table_init(&t);
    struct vg_gpu *g = fx_gpu(&l, "GPU-cccccccc", "A100", 0, 80 * GiB, 6 * GiB, 0);
    fx_mig(g, "MIG-11111111", 10 * GiB);
    fx_mig(g, "MIG-22222222", 10 * GiB);
    fx_gproc(&g->mig[0], 500, 4 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(&g->mig[1], 500, 2 * GiB, VG_PTYPE_COMPUTE);
    fx_proc(&t, 500, "python", "python a.py", 'R');
    struct vg_snapshot *s = fx_assemble(&l, &t);
    struct vg_metrics_opts o;
    vg_metrics_opts_init(&o);
    struct vg_collector_stats st = ok_collect();
    char *text = render(s, NULL, NULL, &st, &o);
    assert_int_equal(lines_of(text, "vramguard_process_memory_bytes"), 1);
    assert_non_null(strstr(text, "pid=\"500\",user=\"alice\",comm=\"python\",seen_by=\"nvml\"} "
                                 "6442450944\n"));
    assert_true(
        has(text, "vramguard_gpu_holders", "gpu=\"0\",uuid=\"GPU-cccccccc\",name=\"A100\"", "1"));
    free(text);
    vg_snap_free(s);
}

/* A lying driver's figures: sums saturate at 2^64-1, they never wrap to a small number. One
 * process on two MIG devices with 2^63 each, and a second one with 2^63: the holder's series,
 * the memory by reason and the pid="other" sum are all 18446744073709551615. */
static void test_sums_saturate(void **state)
{
    (void)state;
    struct vg_gpu_list l;
    struct vg_proc_table t;
    vg_gpu_list_init(&l);
    vg_proc_table_init(&t);
    struct vg_gpu *g = fx_gpu(&l, "GPU-cccccccc", "A100", 0, 80 * GiB, 6 * GiB, 0);
    fx_mig(g, "MIG-11111111", 10 * GiB);
    fx_mig(g, "MIG-22222222", 10 * GiB);
    fx_gproc(&g->mig[0], 500, 1ull << 63, VG_PTYPE_COMPUTE);
    fx_gproc(&g->mig[1], 500, 1ull << 63, VG_PTYPE_COMPUTE);
    fx_gproc(&g->mig[1], 600, 1ull << 63, VG_PTYPE_COMPUTE);
    fx_gproc(&g->mig[1], 700, 1ull << 63, VG_PTYPE_COMPUTE);
    struct vg_snapshot *s = fx_assemble(&l, &t);
    assert_int_equal(s->per_gpu[0].held_bytes, UINT64_MAX);
    struct vg_metrics_opts o;
    vg_metrics_opts_init(&o);
    o.per_process = VG_METRICS_PP_TOP;
    o.top_n = 1;
    struct vg_collector_stats st = ok_collect();
    char *text = render(s, NULL, NULL, &st, &o);
    assert_non_null(strstr(text, "pid=\"500\",seen_by=\"nvml\"} 18446744073709551615\n"));
    assert_non_null(strstr(text, "pid=\"other\"} 18446744073709551615\n"));
    assert_true(has(text, "vramguard_gpu_memory_held_bytes",
                    "gpu=\"0\",uuid=\"GPU-cccccccc\",name=\"A100\",reason=\"expected\"",
                    "18446744073709551615"));
    free(text);
    vg_snap_free(s);
}

static void test_failed_collection(void **state)
{
    (void)state;
    struct vg_snapshot *good = host();
    struct vg_collector_gpu_ids ids;
    vg_collector_gpu_ids_init(&ids);
    assert_int_equal(vg_collector_gpu_ids_set(&ids, good), 0);
    vg_snap_free(good);

    /* The driver failed: /proc only. */
    struct vg_gpu_list l;
    struct vg_proc_table t;
    vg_gpu_list_init(&l);
    vg_proc_table_init(&t);
    fx_fd(fx_proc(&t, 300, "loader", "python loader", 'D'), 0);
    struct vg_snapshot *s = vg_snap_new();
    s->proc_root = fx_strdup("/proc");
    s->dev_dir = fx_strdup("/dev");
    assert_int_equal(vg_snap_assemble(s, &l, false, &t, NULL), 0);
    struct vg_findings fs;
    vg_findings_init(&fs);
    vg_finding_pid(&fs, vg_finding_add(&fs, "d-state-holder", VG_SEV_WARNING), 300);

    struct vg_metrics_opts o;
    vg_metrics_opts_init(&o);
    struct vg_collector_stats st = ok_collect();
    st.success = false;
    st.last_success_seconds = 1699999990;
    char *text = render(s, &fs, &ids, &st, &o);
    assert_true(has(text, "vramguard_last_collect_success", NULL, "0"));
    assert_true(
        has(text, "vramguard_last_successful_collect_timestamp_seconds", NULL, "1699999990.000"));
    /* The GPUs are still listed; their measurements are absent, not 0. */
    assert_int_equal(lines_of(text, "vramguard_gpu_info"), 2);
    assert_non_null(strstr(text, "vramguard_gpu_info{gpu=\"1\",uuid=\"GPU-bbbbbbbb-0000\","
                                 "name=\"H100\",pci_bus_id=\"00000000:17:00.0\",minor=\"1\"} 1\n"));
    assert_null(strstr(text, "vramguard_gpu_memory"));
    assert_null(strstr(text, "vramguard_gpu_holders"));
    assert_null(strstr(text, "vramguard_process_"));
    assert_true(
        has(text, "vramguard_findings", "rule=\"d-state-holder\",severity=\"warning\"", "1"));
    free(text);

    /* Not even /proc: status and the GPU list only. */
    text = render(NULL, NULL, &ids, &st, &o);
    assert_int_equal(lines_of(text, "vramguard_gpu_info"), 2);
    assert_null(strstr(text, "vramguard_findings"));
    assert_null(strstr(text, "vramguard_driver_info"));
    free(text);
    /* And never a successful collection yet: no GPU list at all. */
    st.last_success_known = false;
    text = render(NULL, NULL, NULL, &st, &o);
    assert_null(strstr(text, "vramguard_gpu_info"));
    assert_null(strstr(text, "vramguard_last_successful_collect_timestamp_seconds"));
    assert_non_null(strstr(text, "\nvramguard_last_collect_success 0\n"));
    free(text);

    vg_findings_release(&fs);
    vg_snap_free(s);
    vg_collector_gpu_ids_release(&ids);
}

static void test_escape(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    const char in[] = "a\"b\\c\nd\te\x01\x7f\xff\xc3\xa9\xed\xa0\x80z";
    assert_int_equal(vg_metrics_escape(&b, in, sizeof(in) - 1), 0);
    assert_string_equal(vg_buf_str(&b), "a\\\"b\\\\c\\nd\xEF\xBF\xBD"
                                        "e\xEF\xBF\xBD\xEF\xBF\xBD"
                                        "\xEF\xBF\xBD\xc3\xa9\xEF\xBF\xBD\xEF\xBF\xBD"
                                        "\xEF\xBF\xBDz");
    vg_buf_release(&b);
}

static void test_parse_pp(void **state)
{
    (void)state;
    struct vg_metrics_opts o;
    vg_metrics_opts_init(&o);
    assert_int_equal(o.per_process, VG_METRICS_PP_TOP);
    assert_int_equal(o.top_n, 10);
    assert_int_equal(vg_metrics_parse_pp("top:3", &o), 0);
    assert_int_equal(o.top_n, 3);
    assert_int_equal(vg_metrics_parse_pp("all", &o), 0);
    assert_int_equal(o.per_process, VG_METRICS_PP_ALL);
    static const char *const bad[] = {"",      "top",        "top:", "top:0",  "top:-1", "top:1x",
                                      "TOP:3", "top:100001", "some", "top: 3", NULL};
    for (size_t i = 0; bad[i]; i++)
        assert_int_equal(vg_metrics_parse_pp(bad[i], &o), -EINVAL);
    assert_int_equal(vg_metrics_parse_pp(NULL, &o), -EINVAL);
    assert_int_equal(o.per_process, VG_METRICS_PP_ALL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_and_collect),   cmocka_unit_test(test_holders),
        cmocka_unit_test(test_mig_merged),        cmocka_unit_test(test_sums_saturate),
        cmocka_unit_test(test_failed_collection), cmocka_unit_test(test_escape),
        cmocka_unit_test(test_parse_pp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
