/*
 * Fuzz target: the in-kernel holder scan's records (vg_proc_parse_krecs), what the BPF iterator
 * wrote, read back before any of it is trusted. The set matched against has the registered
 * NVIDIA major alone (no /proc/devices, no --dev nodes); two check descriptors (3 and 4) stand
 * for the reading process's O_PATH descriptors of --dev nodes. Invariants: 0, -EINVAL or
 * -ENOMEM; -EINVAL exactly when the length is not a whole number of records or a record is
 * malformed (magic, flags, pids), and then nothing is returned; on 0 the pids are strictly
 * ascending, each is the pid of a record of a character device of major 195 (a descriptor or a
 * memory mapping) that is not a check descriptor, and every such record's pid is there; a check
 * descriptor (never a mapping) is seen when a record of the reading process names it with its
 * identity, differs when one names another.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "proc/kscan_rec.h"
#include "proc/proc.h"

#define NREC sizeof(struct vg_krec)

static bool rec_ok(const struct vg_krec *r)
{
    return r->magic == VG_KREC_MAGIC &&
           !(r->flags & ~(VG_KREC_SELF | VG_KREC_MAP | VG_KREC_PATH)) && r->pid != 0 &&
           r->pid <= 0x7fffffffu && r->tid <= 0x7fffffffu;
}

static bool is_check(const struct vg_krec *r)
{
    return (r->flags & VG_KREC_SELF) && !(r->flags & VG_KREC_MAP) && (r->fd == 3 || r->fd == 4);
}

static bool is_holder(const struct vg_krec *r)
{
    return !is_check(r) && S_ISCHR(r->mode) && r->rdev_major == VG_DEV_NVIDIA_MAJOR;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc_devset *ds = NULL;
    if (vg_proc_devset_new(-1, "/nonexistent/vramguard-fuzz", &ds) != 0)
        abort();
    struct vg_proc_kcal cal[2] = {
        {.fd = 3, .id = {.dev_major = 0, .dev_minor = 5, .ino = 42}},
        {.fd = 4, .id = {.dev_major = 8, .dev_minor = 1, .ino = 7}},
    };
    pid_t *pids = (pid_t *)1;
    size_t n = 99;
    int rc = vg_proc_parse_krecs(buf, size, ds, cal, 2, &pids, &n);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    bool valid = size % NREC == 0;
    for (size_t i = 0; valid && i < size / NREC; i++) {
        struct vg_krec r;
        memcpy(&r, buf + i * NREC, NREC);
        valid = rec_ok(&r);
    }
    FUZZ_CHECK((rc == -EINVAL) == !valid);
    if (rc != 0) {
        FUZZ_CHECK(pids == NULL && n == 0);
    } else {
        for (size_t k = 1; k < n; k++)
            FUZZ_CHECK(pids[k - 1] < pids[k]);
        bool seen[2] = {false, false}, differs[2] = {false, false};
        for (size_t i = 0; i < size / NREC; i++) {
            struct vg_krec r;
            memcpy(&r, buf + i * NREC, NREC);
            if (is_check(&r)) {
                size_t c = r.fd - 3;
                bool same = r.dev_major == cal[c].id.dev_major &&
                            r.dev_minor == cal[c].id.dev_minor && r.ino == cal[c].id.ino;
                seen[c] |= same;
                differs[c] |= !same;
            }
            if (!is_holder(&r))
                continue;
            bool found = false;
            for (size_t k = 0; k < n && !found; k++)
                found = pids[k] == (pid_t)r.pid;
            FUZZ_CHECK(found);
        }
        for (size_t k = 0; k < n; k++) {
            bool from = false;
            for (size_t i = 0; i < size / NREC && !from; i++) {
                struct vg_krec r;
                memcpy(&r, buf + i * NREC, NREC);
                from = is_holder(&r) && (pid_t)r.pid == pids[k];
            }
            FUZZ_CHECK(from);
        }
        for (size_t c = 0; c < 2; c++)
            FUZZ_CHECK(cal[c].seen == seen[c] && cal[c].differs == differs[c]);
        free(pids);
    }
    vg_proc_devset_free(ds);
    free(buf);
    return 0;
}
