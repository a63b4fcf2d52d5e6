/*
 * Unit tests for the kernel log's Xid reports (src/proc/kmsg.c) and PCI addresses
 * (src/util/pci.c):
 *  - the parser over the driver's forms: pid and name (r470 to r550), pid='<unknown>' and
 *    name=<unknown> (newer drivers), pid without a name, neither (the catalogue's examples),
 *    the oldest form without "PCI:", records with continuation lines and a caller field;
 *  - what is no Xid (another message, user space writing "NVRM: Xid" with its own facility)
 *    and garbage (every malformed prefix and Xid line gives -EINVAL with a reason);
 *  - the log: bounded per device (the last VG_KMSG_XID_KEEP with a count of all), records
 *    lost (EPIPE, a gap in the sequence numbers, a ring that no longer starts at record 0),
 *    a read that fails midway (unreadable, what was read kept), the stand-in file reader, an
 *    unopenable path (said, never "no Xid").
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

#include "proc/kmsg.h"
#include "util/pci.h"

static int parse(const char *rec, struct vg_kmsg_xid_view *v)
{
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_proc_parse_kmsg_xid(rec, strlen(rec), v, &err);
    if (rc < 0)
        assert_non_null(vg_err_msg(&err));
    vg_err_release(&err);
    return rc;
}

static bool span_is(const char *s, size_t n, const char *lit)
{
    return s && n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static void test_pci(void **state)
{
    (void)state;
    struct vg_pci_addr a, b;
    assert_int_equal(vg_pci_parse("0000:3b:00", 10, &a), 0);
    assert_int_equal(vg_pci_parse("00000000:3B:00.0", 16, &b), 0);
    assert_true(vg_pci_same_device(&a, &b));
    assert_true(b.fn_known);
    assert_false(a.fn_known);
    assert_int_equal(vg_pci_parse("00000009:01:00.0", 16, &b), 0);
    assert_int_equal(b.domain, 9);
    assert_false(vg_pci_same_device(&a, &b));
    assert_int_equal(vg_pci_parse("3b:00.0", 7, &b), 0);
    assert_true(vg_pci_same_device(&a, &b));
    char text[VG_PCI_TEXT_MAX];
    vg_pci_format(&a, text, sizeof(text));
    assert_string_equal(text, "0000:3b:00");
    const char *bad[] = {"", ":", "0000:3g:00", "0000:3b", "000000000:3b:00", "0000:3b:00.8",
                         "0000:3b:00.", "0000:3b:20", "0:0:0:0", "0000:3b:00.0.1", "3b.0:00"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(vg_pci_parse(bad[i], strlen(bad[i]), &b), -EINVAL);
}

static void test_parse_forms(void **state)
{
    (void)state;
    struct vg_kmsg_xid_view v;
    assert_int_equal(parse("4,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
                           "name=python, GPU has fallen off the bus.",
                           &v),
                     VG_KMSG_REC_XID);
    assert_int_equal(v.seq, 1234);
    assert_int_equal(v.ts_us, 5678901);
    assert_int_equal(v.level, 4);
    assert_int_equal(v.code, 79);
    assert_int_equal(v.pci.bus, 0x3b);
    assert_true(v.pid_known);
    assert_int_equal(v.pid, 1234);
    assert_true(span_is(v.name, v.name_len, "python"));
    assert_true(span_is(v.msg, v.msg_len, "GPU has fallen off the bus."));

    /* newer drivers: the process unknown to the driver */
    assert_int_equal(parse("4,7,100,-;NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', "
                           "name=<unknown>, GPU has fallen off the bus.",
                           &v),
                     VG_KMSG_REC_XID);
    assert_false(v.pid_known);
    assert_null(v.name);
    assert_int_equal(v.pci.bus, 0xc1);
    assert_true(span_is(v.msg, v.msg_len, "GPU has fallen off the bus."));

    /* a pid without a name */
    assert_int_equal(parse("4,8,100,-;NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: "
                           "New row marked for remapping, reset gpu to activate.",
                           &v),
                     VG_KMSG_REC_XID);
    assert_int_equal(v.pid, 1896);
    assert_null(v.name);
    assert_true(span_is(v.msg, v.msg_len,
                        "Row Remapper: New row marked for remapping, reset gpu to activate."));

    /* neither; a message with commas and parentheses */
    assert_int_equal(parse("4,9,100,-;NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp "
                           "Exception on (GPC 0, TPC 0): Out Of Range Address",
                           &v),
                     VG_KMSG_REC_XID);
    assert_int_equal(v.code, 13);
    assert_false(v.pid_known);
    assert_true(span_is(v.msg, v.msg_len,
                        "Graphics SM Warp Exception on (GPC 0, TPC 0): Out Of Range Address"));

    /* the oldest form, without "PCI:"; a caller field; continuation lines */
    assert_int_equal(parse("3,10,269516977,-,caller=T42;NVRM: Xid (0000:01:00): 3, C 00000005 "
                           "SC 00000007\n SUBSYSTEM=pci\n DEVICE=+pci:0000:01:00.0\n",
                           &v),
                     VG_KMSG_REC_XID);
    assert_int_equal(v.code, 3);
    assert_int_equal(v.seq, 10);
    assert_true(span_is(v.msg, v.msg_len, "C 00000005 SC 00000007"));

    /* a code alone; a domain of eight digits */
    assert_int_equal(parse("4,11,1,c;NVRM: Xid (PCI:00000009:01:00): 154", &v), VG_KMSG_REC_XID);
    assert_int_equal(v.code, 154);
    assert_int_equal(v.pci.domain, 9);
    assert_int_equal(v.msg_len, 0);
}

static void test_parse_not_xid(void **state)
{
    (void)state;
    struct vg_kmsg_xid_view v;
    assert_int_equal(parse("6,0,0,-;Linux version 6.8.0", &v), VG_KMSG_REC_OTHER);
    assert_int_equal(parse("4,2,3,-;NVRM: GPU at PCI:0000:01:00: GPU-1234", &v), VG_KMSG_REC_OTHER);
    assert_int_equal(parse("4,2,3,-;", &v), VG_KMSG_REC_OTHER);
    /* user space (facility user, 1 << 3 | level) writing the driver's words */
    assert_int_equal(parse("12,5,6,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=init, x", &v),
                     VG_KMSG_REC_FOREIGN);
}

static void test_parse_garbage(void **state)
{
    (void)state;
    struct vg_kmsg_xid_view v;
    const char *bad[] = {
        "",
        "no semicolon",
        "4,1,2;NVRM: Xid (PCI:0000:3b:00): 79, x",
        "x,1,2,-;NVRM",
        "4,-1,2,-;NVRM",
        "4,1,2,;NVRM",
        "99999999,1,2,-;x",
        "4,1,18446744073709551616,-;x",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00) 79",
        "4,1,2,-;NVRM: Xid (PCI:zz:3b:00): 79, x",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): , x",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79x, x",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 99999999, x",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79,x",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=abc, name=x, y",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, y",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=12,y",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, x\nnot a continuation",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i], &v) != -EINVAL)
            fail_msg("accepted: %s", bad[i]);
    }
}

/* A scripted source of records for vg_kmsg_log_scan: "EPIPE" and "FAIL" are errors. */
struct script {
    const char *const *recs;
    size_t i, n;
};

static int next_script(void *ctx, char *buf, size_t cap, size_t *len)
{
    struct script *s = ctx;
    if (s->i == s->n)
        return -EAGAIN;
    const char *r = s->recs[s->i++];
    if (!strcmp(r, "EPIPE"))
        return -EPIPE;
    if (!strcmp(r, "FAIL"))
        return -EIO;
    *len = strlen(r) < cap ? strlen(r) : cap;
    memcpy(buf, r, *len);
    return 0;
}

static void test_log_bounded(void **state)
{
    (void)state;
    struct vg_kmsg_log log;
    vg_kmsg_log_init(&log);
    char rec[160];
    for (unsigned i = 0; i < 20; i++) {
        int n = snprintf(rec, sizeof(rec),
                         "4,%u,%u,-;NVRM: Xid (PCI:0000:3b:00): %u, pid=%u, name=w, m%u", i,
                         1000 * i, 13 + (i % 2) * 18, 100 + i, i);
        assert_true(n > 0 && (size_t)n < sizeof(rec));
        assert_int_equal(vg_kmsg_log_add(&log, rec, (size_t)n), 0);
    }
    assert_int_equal(vg_kmsg_log_add(&log, "4,20,1,-;NVRM: Xid (PCI:0000:3c:00): 79, x", 41), 0);
    assert_int_equal(vg_kmsg_log_add(&log, "garbage", 7), 0);
    assert_int_equal(log.ndevs, 2);
    assert_int_equal(log.devs[0].count, 20);
    assert_int_equal(log.devs[0].nxid, VG_KMSG_XID_KEEP);
    assert_int_equal(log.devs[0].xid[0].seq, 20 - VG_KMSG_XID_KEEP);
    assert_int_equal(log.devs[0].xid[VG_KMSG_XID_KEEP - 1].seq, 19);
    assert_string_equal(log.devs[0].xid[VG_KMSG_XID_KEEP - 1].msg, "m19");
    assert_string_equal(log.devs[0].xid[0].name, "w");
    assert_int_equal(log.devs[1].count, 1);
    /* every code counted, even those no longer kept */
    assert_int_equal(log.devs[0].ncodes, 2);
    assert_int_equal(log.devs[0].codes[0].code, 13);
    assert_int_equal(log.devs[0].codes[0].count, 10);
    assert_int_equal(log.devs[0].codes[1].code, 31);
    assert_int_equal(log.devs[0].codes[1].last_ts_us, 19000);
    assert_int_equal(log.n_malformed, 1);
    assert_int_equal(log.n_records, 21);
    assert_false(log.lost);
    vg_kmsg_log_release(&log);

    /* more devices than kept: counted only */
    vg_kmsg_log_init(&log);
    for (unsigned i = 0; i < VG_KMSG_DEVS_MAX + 3; i++) {
        int n = snprintf(rec, sizeof(rec), "4,%u,1,-;NVRM: Xid (PCI:0001:%02x:%02x): 13, x", i,
                         i / 32, i % 32);
        assert_int_equal(vg_kmsg_log_add(&log, rec, (size_t)n), 0);
    }
    assert_int_equal(log.ndevs, VG_KMSG_DEVS_MAX);
    assert_int_equal(log.n_other_dev, 3);
    vg_kmsg_log_release(&log);
}

static void test_log_lost(void **state)
{
    (void)state;
    static const char *const recs[] = {
        "6,5,1,-;the ring starts at record 5",
        "4,6,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=a, b",
        "EPIPE",
        "6,10,3,-;three records were overwritten",
        "6,11,4,-;x",
    };
    struct script s = {recs, 0, 5};
    struct vg_kmsg_log log;
    vg_kmsg_log_init(&log);
    assert_int_equal(vg_kmsg_log_scan(&log, next_script, &s), 0);
    assert_int_equal(log.state, VG_KMSG_READ);
    assert_true(log.lost);
    assert_int_equal(log.n_lost, 5 + 3);
    assert_int_equal(log.first_seq, 5);
    assert_int_equal(log.last_seq, 11);
    assert_int_equal(log.ndevs, 1);
    vg_kmsg_log_release(&log);

    /* a read that fails midway: unreadable, with what was read kept */
    static const char *const fail[] = {
        "4,0,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=a, b",
        "FAIL",
        "4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=a, b",
    };
    struct script f = {fail, 0, 3};
    vg_kmsg_log_init(&log);
    assert_int_equal(vg_kmsg_log_scan(&log, next_script, &f), 0);
    assert_int_equal(log.state, VG_KMSG_UNREADABLE);
    assert_non_null(strstr(log.why, "cannot read"));
    assert_int_equal(log.devs[0].count, 1);
    vg_kmsg_log_release(&log);
}

static void test_read_file(void **state)
{
    (void)state;
    char path[] = "/tmp/vg-test-kmsg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "6,0,0,-;Linux version\n"
                        "4,1,10,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=42, name=python, GPU has "
                        "fallen off the bus.\n"
                        " SUBSYSTEM=pci\n"
                        "\n"
                        "4,2,20,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=42, name=python, x\n"
                        "this line is garbage\n";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    struct vg_kmsg_log log;
    vg_kmsg_log_init(&log);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read_kmsg(path, &log, &err), 0);
    assert_int_equal(log.state, VG_KMSG_READ);
    assert_int_equal(log.n_records, 3);
    assert_int_equal(log.n_malformed, 1);
    assert_int_equal(log.devs[0].count, 2);
    assert_int_equal(log.devs[0].xid[0].code, 79);
    assert_int_equal(log.devs[0].xid[0].pid, 42);
    assert_false(log.lost);
    unlink(path);

    /* a path that cannot be opened: said, never "no Xid" */
    assert_int_equal(vg_proc_read_kmsg("/nonexistent/kmsg", &log, &err), 0);
    assert_int_equal(log.state, VG_KMSG_UNREADABLE);
    assert_non_null(strstr(log.why, "cannot open '/nonexistent/kmsg'"));
    assert_int_equal(log.ndevs, 0);
    /* a directory is no log */
    assert_int_equal(vg_proc_read_kmsg("/tmp", &log, &err), 0);
    assert_int_equal(log.state, VG_KMSG_UNREADABLE);
    vg_kmsg_log_release(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pci),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_parse_not_xid),
        cmocka_unit_test(test_parse_garbage),
        cmocka_unit_test(test_log_bounded),
        cmocka_unit_test(test_log_lost),
        cmocka_unit_test(test_read_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
