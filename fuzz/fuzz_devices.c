/*
 * Fuzz target: /proc/devices (vg_proc_parse_devices), whose majors decide which character
 * devices are NVIDIA nodes. Invariants: 0 or -EINVAL, and -EINVAL leaves every major 0 (the
 * caller then uses the registered NVIDIA major alone); every major found is 1..4095 and its
 * decimal, a space and "nvidia" appear in the text.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

static void check_major(const char *buf, size_t size, unsigned major)
{
    if (major == 0)
        return;
    FUZZ_CHECK(major <= 4095);
    char text[32];
    int n = snprintf(text, sizeof text, "%u nvidia", major);
    FUZZ_CHECK(n > 0 && memmem(buf, size, text, (size_t)n) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_dev_majors m;
    memset(&m, 0x5a, sizeof(m));
    int rc = vg_proc_parse_devices(buf, size, &m);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL);
    if (rc == -EINVAL) {
        FUZZ_CHECK(m.nvidia == 0 && m.uvm == 0);
        for (size_t k = 0; k < VG_DEV_OTHER_MAJORS; k++)
            FUZZ_CHECK(m.other[k] == 0);
    }
    check_major(buf, size, m.nvidia);
    check_major(buf, size, m.uvm);
    for (size_t k = 0; k < VG_DEV_OTHER_MAJORS; k++)
        check_major(buf, size, m.other[k]);
    free(buf);
    return 0;
}
