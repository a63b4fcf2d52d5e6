/*
 * Fuzz target: /proc/loadavg's last-pid field (vg_proc_parse_loadavg_pid), which incremental
 * scans use to bound the pids allocated between two samples. Invariants: success gives a pid
 * in 0..INT_MAX that the text spells in decimal after the fourth space-separated field;
 * failure is -EINVAL and leaves the output untouched.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    pid_t pid = -7;
    int rc = vg_proc_parse_loadavg_pid(buf, size, &pid);
    if (rc == 0) {
        FUZZ_CHECK(pid >= 0 && pid <= INT_MAX);
        char text[16];
        int n = snprintf(text, sizeof text, "%d", (int)pid);
        /* the digits are in the text (leading zeros allowed) */
        FUZZ_CHECK(n > 0 && memmem(buf, size, text, (size_t)n) != NULL);
    } else {
        FUZZ_CHECK(rc == -EINVAL);
        FUZZ_CHECK(pid == -7);
    }
    free(buf);
    return 0;
}
