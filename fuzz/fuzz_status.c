/*
 * Fuzz target: /proc/PID/status (vg_proc_parse_status: the real uid, the NSpid chain and the
 * SigIgn mask). Invariants: the chain is NULL exactly when empty, every pid in it is in
 * 1..INT_MAX; the mask is known or not, nothing else is marked read; failure leaves the struct
 * untouched; a second parse gives the same answer and replaces the chain without leaking it.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

static void check(const struct vg_proc *p)
{
    FUZZ_CHECK((p->known & ~VG_PROC_K_SIGIGN) == VG_PROC_K_STATUS);
    FUZZ_CHECK((p->nspid == NULL) == (p->nnspid == 0));
    for (size_t i = 0; i < p->nnspid; i++)
        FUZZ_CHECK(p->nspid[i] > 0 && p->nspid[i] <= INT_MAX);
    FUZZ_CHECK(p->uid != (uid_t)-1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_status(buf, size, &p);
    if (rc == 0) {
        check(&p);
        size_t n = p.nnspid;
        uid_t uid = p.uid;
        unsigned known = p.known;
        uint64_t ign = p.sig_ignored;
        FUZZ_CHECK(vg_proc_parse_status(buf, size, &p) == 0);
        check(&p);
        FUZZ_CHECK(p.nnspid == n && p.uid == uid && p.known == known && p.sig_ignored == ign);
    } else {
        FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM);
        FUZZ_CHECK(p.known == 0 && p.nspid == NULL && p.nnspid == 0);
    }
    vg_proc_release(&p);
    free(buf);
    return 0;
}
