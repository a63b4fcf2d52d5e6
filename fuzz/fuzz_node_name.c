/*
 * Fuzz target: the name of an entry of --dev DIR (vg_proc_parse_node_name), which says what a
 * stand-in node counts as. Invariants: a match is exactly a name starting with "nvidia"; a GPU
 * is "nvidia" followed by the plain decimal (no leading zero) of a minor 0..253; every other
 * kind has minor 0; no match means kind NONE.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    enum vg_dev_kind kind = (enum vg_dev_kind)-1;
    unsigned minor = 12345;
    int r = vg_proc_parse_node_name(buf, size, &kind, &minor);
    bool prefixed = size >= 6 && memcmp(buf, "nvidia", 6) == 0;
    FUZZ_CHECK(r == (prefixed ? 1 : 0));
    if (r == 0)
        FUZZ_CHECK(kind == VG_DEV_NONE);
    else
        FUZZ_CHECK(kind == VG_DEV_GPU || kind == VG_DEV_CTL || kind == VG_DEV_UVM ||
                   kind == VG_DEV_OTHER);
    if (kind == VG_DEV_GPU) {
        FUZZ_CHECK(minor <= VG_DEV_GPU_MINOR_MAX);
        char name[32];
        int n = snprintf(name, sizeof name, "nvidia%u", minor);
        FUZZ_CHECK(n > 0 && (size_t)n == size && memcmp(buf, name, size) == 0);
    } else {
        FUZZ_CHECK(minor == 0);
    }
    free(buf);
    return 0;
}
