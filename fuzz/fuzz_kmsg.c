/*
 * Fuzz target: the kernel log's Xid reports (proc/kmsg.c): one record through the strict
 * parser (vg_proc_parse_kmsg_xid), and the input as a stand-in file's lines through the
 * bounded log (vg_kmsg_log_add). Invariants: the parser returns a record kind or -EINVAL with
 * a reason; an Xid's name and message lie inside the record, a known pid is positive; the log
 * keeps at most VG_KMSG_XID_KEEP events per device and VG_KMSG_DEVS_MAX devices, and never
 * fewer kept than counted up to that bound.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proc/kmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_kmsg_xid_view v;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_proc_parse_kmsg_xid(buf, size, &v, &err);
    FUZZ_CHECK(rc == -EINVAL || rc == VG_KMSG_REC_OTHER || rc == VG_KMSG_REC_XID ||
               rc == VG_KMSG_REC_FOREIGN);
    FUZZ_CHECK(rc != -EINVAL || err.msg != NULL);
    if (rc == VG_KMSG_REC_XID) {
        FUZZ_CHECK(!v.name || (v.name >= buf && v.name + v.name_len <= buf + size));
        FUZZ_CHECK(!v.msg_len || (v.msg >= buf && v.msg + v.msg_len <= buf + size));
        FUZZ_CHECK(!v.pid_known || v.pid > 0);
        FUZZ_CHECK(v.level <= 7 && v.code <= 0xffff);
    }
    vg_err_release(&err);

    struct vg_kmsg_log log;
    vg_kmsg_log_init(&log);
    const char *p = buf, *end = buf + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        FUZZ_CHECK(vg_kmsg_log_add(&log, p, (size_t)(e - p)) == 0);
        p = nl ? nl + 1 : end;
    }
    FUZZ_CHECK(log.ndevs <= VG_KMSG_DEVS_MAX);
    for (size_t i = 0; i < log.ndevs; i++) {
        FUZZ_CHECK(log.devs[i].nxid <= VG_KMSG_XID_KEEP && log.devs[i].count >= 1);
        FUZZ_CHECK(log.devs[i].nxid ==
                   (log.devs[i].count < VG_KMSG_XID_KEEP ? log.devs[i].count : VG_KMSG_XID_KEEP));
        for (size_t k = 0; k < log.devs[i].nxid; k++)
            FUZZ_CHECK(log.devs[i].xid[k].msg != NULL);
    }
    vg_kmsg_log_release(&log);
    free(buf);
    return 0;
}
