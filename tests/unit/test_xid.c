/*
 * Unit tests for the Xids of a snapshot and the rule xid (src/model/snap_xid.c,
 * src/rules/xid.c, src/rules/xid_table.c), over hand-made snapshots and kernel logs:
 *  - the join: a log's "0000:3b:00" is NVML's "00000000:3B:00.0"; a device no GPU is at stays
 *    apart; the process an Xid names is joined while it is that process (not one that started
 *    after the Xid, nor one of another name under the same PID);
 *  - the rule: Xid 79 naming a live process of a Slurm job is critical, names the job, user and
 *    cgroup, and says to reboot; Xid 13 is info; a code the table lacks is a warning; a wedged
 *    code pushed out of the kept Xids by later ones still decides; --xid-fatal and
 *    --xid-noted reclassify; the holders that block a reset are named;
 *  - the table: sorted, every code once, the list check;
 *  - the record: a snapshot with Xids round-trips (write, read, write: the same bytes) and
 *    joins again.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "model/record.h"
#include "rules/rules.h"
#include "rules/xid_table.h"

static void add(struct vg_snapshot *s, const char *rec)
{
    s->kmsg.state = VG_KMSG_READ;
    assert_int_equal(vg_kmsg_log_add(&s->kmsg, rec, strlen(rec)), 0);
}

/* Two GPUs (at 17:00 and 3b:00); PID 500 (python, Slurm job 812, user alice) holds GPU 1; PID
 * 600 started long after boot. */
static struct vg_snapshot *host(void)
{
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    fx_gpu(&l, "GPU-aaaa", "NVIDIA H100", 0, 80ull << 30, 1ull << 30, 0);
    struct vg_gpu *g1 = fx_gpu(&l, "GPU-bbbb", "NVIDIA H100", 1, 80ull << 30, 1ull << 30, 0);
    free(g1->pci_bus_id);
    g1->pci_bus_id = fx_strdup("00000000:3B:00.0");
    fx_gproc(g1, 500, 1ull << 30, VG_PTYPE_COMPUTE);
    struct vg_proc *p = fx_proc(&t, 500, "python", "python train.py", 'S');
    p->cgroup = fx_strdup("/system.slice/slurmstepd.scope/job_812");
    p->env[VG_ENV_SLURM_JOB_ID] = fx_strdup("812");
    p->known |= VG_PROC_K_ENV;
    fx_fd(p, 1);
    struct vg_proc *q = fx_proc(&t, 600, "python", "python other.py", 'S');
    q->start_ticks = 100000; /* 1000 s after boot at 100 Hz */
    q->known |= VG_PROC_K_STAT;
    return fx_assemble(&l, &t);
}

static void run_rules(const struct vg_snapshot *s, const struct vg_rule_opts *o,
                      struct vg_findings *fs)
{
    struct vg_rule_opts def;
    vg_rule_opts_init(&def);
    vg_findings_init(fs);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(s, o ? o : &def, fs, &err), 0);
}

static const struct vg_finding *find_xid(const struct vg_findings *fs, size_t nth)
{
    for (size_t i = 0; i < fs->n; i++)
        if (!strcmp(fs->v[i].rule, "xid") && nth-- == 0)
            return &fs->v[i];
    return NULL;
}

static bool has_text(char **v, size_t n, const char *needle)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(v[i], needle))
            return true;
    return false;
}

static void test_join(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    add(s, "4,0,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=500, name=python, GPU has "
           "fallen off the bus.");
    add(s, "4,1,6000000,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=600, name=python, x");
    add(s, "4,2,7000000,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=500, name=bash, x");
    add(s, "4,3,8000000,-;NVRM: Xid (PCI:0000:c1:00): 79, pid=999, name=gone, y");
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_join_xids(s, &err), 0);
    assert_int_equal(s->nxid_devs, 2);
    const struct vg_snap_xid_dev *j = vg_snap_gpu_xids(s, 1);
    assert_non_null(j);
    assert_null(vg_snap_gpu_xids(s, 0));
    assert_int_equal(j->gpu, 1);
    assert_non_null(j->proc[0]);
    assert_int_equal(j->proc[0]->pid, 500);
    assert_null(j->proc[1]); /* started 1000 s after boot, after the Xid */
    assert_true(j->stale[1]);
    assert_null(j->proc[2]); /* another name under the PID */
    assert_true(j->stale[2]);
    assert_int_equal(s->xid_devs[1].gpu, VG_SNAP_NO_GPU);
    assert_null(s->xid_devs[1].proc[0]);
    assert_false(s->xid_devs[1].stale[0]);

    /* the PIDs the build reads in full */
    pid_t *want = NULL;
    size_t nwant = 0;
    assert_int_equal(vg_snap_xid_pids(&s->kmsg, &want, &nwant), 0);
    assert_int_equal(nwant, 4);
    free(want);
    vg_snap_free(s);
}

static void test_rule_79_job(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    add(s, "4,0,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=500, name=python, GPU has "
           "fallen off the bus.");
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_join_xids(s, &err), 0);
    struct vg_findings fs;
    run_rules(s, NULL, &fs);
    const struct vg_finding *f = find_xid(&fs, 0);
    assert_non_null(f);
    assert_int_equal(f->severity, VG_SEV_CRITICAL);
    assert_int_equal(f->ngpus, 1);
    assert_int_equal(f->gpus[0], 1);
    assert_int_equal(f->npids, 1);
    assert_int_equal(f->pids[0], 500);
    assert_non_null(strstr(f->title, "Xid 79"));
    assert_non_null(strstr(f->title, "wedged"));
    assert_true(has_text(f->evidence, f->nevidence, "Slurm job 812"));
    assert_true(has_text(f->evidence, f->nevidence, "user alice"));
    assert_true(has_text(f->evidence, f->nevidence, "job_812"));
    assert_true(has_text(f->fix, f->nfix, "reboot"));
    vg_findings_release(&fs);
    vg_snap_free(s);
}

static void test_rule_classes(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    add(s, "4,0,1,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=500, name=python, Graphics Exception");
    add(s, "4,1,2,-;NVRM: Xid (PCI:00000000:17:00): 4242, a code nobody knows");
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_join_xids(s, &err), 0);
    struct vg_findings fs;
    run_rules(s, NULL, &fs);
    /* GPU 0 first (the driver's order), then GPU 1 */
    const struct vg_finding *f0 = find_xid(&fs, 0), *f1 = find_xid(&fs, 1);
    assert_non_null(f0);
    assert_non_null(f1);
    assert_int_equal(f0->gpus[0], 0);
    assert_int_equal(f0->severity, VG_SEV_WARNING);
    assert_true(has_text(f0->evidence, f0->nevidence, "unknown codes are dirty"));
    assert_int_equal(f1->severity, VG_SEV_INFO);
    assert_true(has_text(f1->fix, f1->nfix, "nothing on the GPU"));
    vg_findings_release(&fs);

    /* reclassified: 13 fatal, 4242 noted */
    struct vg_rule_opts o;
    vg_rule_opts_init(&o);
    o.xid_wedged = "13, 31";
    o.xid_noted = "4242";
    run_rules(s, &o, &fs);
    f0 = find_xid(&fs, 0);
    f1 = find_xid(&fs, 1);
    assert_int_equal(f0->severity, VG_SEV_INFO);
    assert_int_equal(f1->severity, VG_SEV_CRITICAL);
    assert_true(has_text(f1->evidence, f1->nevidence, "set by the command line"));
    /* a reset is blocked by the GPU's holder */
    assert_true(has_text(f1->fix, f1->nfix, "PID 500"));
    vg_findings_release(&fs);
    vg_snap_free(s);
}

static void test_rule_pushed_out(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    add(s, "4,0,1,-;NVRM: Xid (PCI:0000:3b:00): 48, double bit");
    char rec[128];
    for (unsigned i = 1; i <= 20; i++) {
        snprintf(rec, sizeof(rec), "4,%u,%u,-;NVRM: Xid (PCI:0000:3b:00): 13, x", i, i);
        add(s, rec);
    }
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_join_xids(s, &err), 0);
    struct vg_findings fs;
    run_rules(s, NULL, &fs);
    const struct vg_finding *f = find_xid(&fs, 0);
    assert_int_equal(f->severity, VG_SEV_CRITICAL);
    assert_non_null(strstr(f->title, "21 Xid errors"));
    assert_non_null(strstr(f->title, "Xid 48"));
    assert_true(has_text(f->evidence, f->nevidence, "13 earlier Xids"));
    vg_findings_release(&fs);
    vg_snap_free(s);
}

static void test_table(void **state)
{
    (void)state;
    size_t n;
    const struct vg_xid_info *t = vg_xid_table(&n);
    for (size_t i = 1; i < n; i++)
        assert_true(t[i - 1].code < t[i].code);
    assert_int_equal(vg_xid_find(79)->cls, VG_XID_WEDGED);
    assert_int_equal(vg_xid_find(13)->cls, VG_XID_NOTED);
    assert_null(vg_xid_find(4242));
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_xid_list_check("13,31", &err), 0);
    assert_int_equal(vg_xid_list_check(" 13 , 31 ", &err), 0);
    assert_int_equal(vg_xid_list_check("13,,31", &err), -EINVAL);
    assert_int_equal(vg_xid_list_check("0", &err), -EINVAL);
    assert_int_equal(vg_xid_list_check("65536", &err), -EINVAL);
    assert_int_equal(vg_xid_list_check("x", &err), -EINVAL);
    vg_err_release(&err);
}

static void test_record(void **state)
{
    (void)state;
    struct vg_snapshot *s = host();
    add(s, "4,3,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=500, name=python, GPU has "
           "fallen off the bus \"quoted\"\\x0a.");
    add(s, "4,4,6000000,-;NVRM: Xid (PCI:0000:3b:00): 13, x");
    add(s, "4,9,6000000,-;NVRM: Xid (PCI:0001:c1:00): 13");
    s->kmsg.path = fx_strdup("/dev/kmsg");
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_join_xids(s, &err), 0);
    struct vg_buf b1, b2;
    vg_buf_init(&b1, 0);
    vg_buf_init(&b2, 0);
    assert_int_equal(vg_snap_record_write(s, &b1, &err), 0);
    struct vg_snapshot *r = NULL;
    int rc = vg_snap_record_parse(b1.data, b1.len, "t", &r, &err);
    if (rc)
        fail_msg("%s", vg_err_msg(&err));
    assert_int_equal(vg_snap_record_write(r, &b2, &err), 0);
    assert_int_equal(b1.len, b2.len);
    assert_memory_equal(b1.data, b2.data, b1.len);
    assert_int_equal(r->kmsg.state, VG_KMSG_READ);
    assert_true(r->kmsg.lost);
    assert_int_equal(r->kmsg.ndevs, 2);
    assert_int_equal(r->kmsg.devs[0].count, 2);
    assert_int_equal(r->kmsg.devs[0].ncodes, 2);
    assert_string_equal(r->kmsg.devs[0].xid[0].name, "python");
    assert_int_equal(r->xid_devs[0].gpu, 1);
    assert_non_null(r->xid_devs[0].proc[0]);
    assert_int_equal(r->xid_devs[1].gpu, VG_SNAP_NO_GPU);
    assert_int_equal(r->kmsg.devs[1].pci.domain, 1);
    vg_snap_free(r);

    /* strict: an xid before any device, a state given twice, a bad code line */
    const char *bad[] = {"kmsg\nstate read\nxid\nseq 1\n", "kmsg\nstate read\nstate read\n",
                         "kmsg\nstate read\nxid_dev\npci 0000:3b:00\ncode 79 x 1\n",
                         "kmsg\nxid_dev\npci 0000:3b:00\n", "kmsg\nstate maybe\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        /* the snapshot's text up to "end", the bad part, then "end" */
        struct vg_buf t;
        vg_buf_init(&t, 0);
        const char *k = strstr(b1.data, "kmsg\n");
        assert_non_null(k);
        vg_buf_add(&t, b1.data, (size_t)(k - b1.data));
        vg_buf_adds(&t, bad[i]);
        vg_buf_adds(&t, "end\n");
        r = NULL;
        assert_int_equal(vg_snap_record_parse(t.data, t.len, "t", &r, &err), -EINVAL);
        assert_null(r);
        vg_buf_release(&t);
    }
    vg_err_release(&err);
    vg_buf_release(&b1);
    vg_buf_release(&b2);
    vg_snap_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join),         cmocka_unit_test(test_rule_79_job),
        cmocka_unit_test(test_rule_classes), cmocka_unit_test(test_rule_pushed_out),
        cmocka_unit_test(test_table),        cmocka_unit_test(test_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
