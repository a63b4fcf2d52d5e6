/*
 * Fuzz target: /proc/PID/cmdline (vg_proc_parse_cmdline). Invariants: the result is the input
 * with trailing NULs dropped and inner NULs made spaces, so its length is exactly that many
 * bytes (an inner NUL must never cut the command line short), and every other byte is kept.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_cmdline(buf, size, &p);
    FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
    if (rc == 0) {
        size_t want = size;
        while (want > 0 && buf[want - 1] == '\0')
            want--;
        FUZZ_CHECK(p.known == VG_PROC_K_CMDLINE && p.cmdline != NULL);
        FUZZ_CHECK(strlen(p.cmdline) == want);
        for (size_t i = 0; i < want; i++)
            FUZZ_CHECK(p.cmdline[i] == (buf[i] ? buf[i] : ' '));
        FUZZ_CHECK(vg_proc_parse_cmdline(buf, size, &p) == 0); /* replaces, no leak */
    }
    vg_proc_release(&p);
    free(buf);
    return 0;
}
