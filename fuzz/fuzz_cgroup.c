/*
 * Fuzz target: /proc/PID/cgroup (vg_proc_parse_cgroup: container id and pod UID). Paths are
 * whatever a container runtime or a hostile process's cgroup names make them. Invariants: a
 * container id is exactly 64 hex digits found in the input; a pod UID is 32 hex digits or a
 * dashed UUID; the cgroup path is a piece of the input; failure leaves the struct untouched.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_cgroup(buf, size, &p);
    if (rc == 0) {
        FUZZ_CHECK(p.known == VG_PROC_K_CGROUP);
        if (p.cgroup)
            FUZZ_CHECK(strlen(p.cgroup) <= size);
        if (p.container_id) {
            FUZZ_CHECK(strlen(p.container_id) == 64);
            for (size_t i = 0; i < 64; i++)
                FUZZ_CHECK(is_hex(p.container_id[i]));
            FUZZ_CHECK(memmem(buf, size, p.container_id, 64) != NULL);
            FUZZ_CHECK(p.cgroup != NULL);
        }
        if (p.pod_uid) {
            size_t n = strlen(p.pod_uid);
            FUZZ_CHECK(n == 32 || n == 36);
            for (size_t i = 0; i < n; i++) {
                int sep = n == 36 && (i == 8 || i == 13 || i == 18 || i == 23);
                FUZZ_CHECK(sep ? p.pod_uid[i] == '-' : is_hex(p.pod_uid[i]));
            }
            FUZZ_CHECK(p.cgroup != NULL);
        }
        FUZZ_CHECK(vg_proc_parse_cgroup(buf, size, &p) == 0); /* replaces, no leak */
    } else {
        FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM);
        FUZZ_CHECK(p.known == 0 && !p.cgroup && !p.container_id && !p.pod_uid);
    }
    vg_proc_release(&p);
    free(buf);
    return 0;
}
