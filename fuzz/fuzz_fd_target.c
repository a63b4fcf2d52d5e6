/*
 * Fuzz target: an fd link target from /proc/PID/fd (vg_proc_parse_fd_target), against a few
 * device directories (--dev). The first input byte picks the directory, the rest is the
 * target. Invariants: a match starts with DIR/nvidia; a GPU node's minor is the decimal number
 * that ends the target, within 20 bits and without a leading zero; no match means kind NONE.
 */
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

static const char *const dirs[] = {NULL, "/dev", "/", "/tmp/vg/dev/", "", "dev", "/dev//"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *dir = dirs[data[0] % (sizeof dirs / sizeof dirs[0])];
    size--;
    data++;
    char *buf = fuzz_copy(data, size);

    enum vg_dev_kind kind = (enum vg_dev_kind)-1;
    unsigned minor = 12345;
    int r = vg_proc_parse_fd_target(buf, size, dir, &kind, &minor);
    FUZZ_CHECK(r == 0 || r == 1);
    if (r == 0) {
        FUZZ_CHECK(kind == VG_DEV_NONE);
    } else {
        FUZZ_CHECK(kind == VG_DEV_GPU || kind == VG_DEV_CTL || kind == VG_DEV_UVM ||
                   kind == VG_DEV_OTHER);
        FUZZ_CHECK(size >= 7 && memmem(buf, size, "/nvidia", 7) != NULL);
        if (dir && dir[0] && strcmp(dir, "/") != 0 && dir[0] == '/')
            FUZZ_CHECK(size > 4 && memcmp(buf, dir, 4) == 0);
    }
    if (kind == VG_DEV_GPU) {
        FUZZ_CHECK(minor < (1u << 20));
        char tail[16];
        int n = snprintf(tail, sizeof tail, "%u", minor);
        FUZZ_CHECK(n > 0 && (size_t)n < size);
        FUZZ_CHECK(memcmp(buf + size - (size_t)n, tail, (size_t)n) == 0);
        FUZZ_CHECK(memcmp(buf + size - (size_t)n - 7, "/nvidia", 7) == 0);
    } else {
        FUZZ_CHECK(kind != VG_DEV_GPU);
    }
    free(buf);
    return 0;
}
