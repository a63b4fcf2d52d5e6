/*
 * Fuzz target: byte sizes from the command line and config (vg_parse_size, e.g. --min-free
 * 20GiB, --min-free 0.5) and their rendering (vg_fmt_size). Byte 0 bit 0: fractions allowed;
 * the rest is the text. Invariants: a plain decimal integer means that many bytes, exactly when
 * a double holds it; a fraction is in [0, 1]; failures leave the outputs untouched; rendering
 * into any buffer size either fits, NUL-terminated, or says -ENOSPC without writing past it.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "util/parse.h"

static void check_fmt(uint64_t bytes)
{
    char big[64];
    FUZZ_CHECK(vg_fmt_size(bytes, big, sizeof big) == 0);
    size_t len = strlen(big);
    FUZZ_CHECK(len > 2 && len < 16);
    for (size_t n = 1; n <= len + 1; n++) {
        char *small = malloc(n);
        if (!small)
            abort();
        int rc = vg_fmt_size(bytes, small, n);
        if (n <= len)
            FUZZ_CHECK(rc == -ENOSPC);
        else
            FUZZ_CHECK(rc == 0 && strcmp(small, big) == 0);
        free(small);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool allow_fraction = data[0] & 1;
    char *s = fuzz_cstr(data + 1, size - 1);

    uint64_t bytes = 0xdeadbeef;
    bool is_fraction = true;
    double fraction = -7.0;
    int rc = vg_parse_size(s, allow_fraction, &bytes, &is_fraction, &fraction);
    if (rc == 0) {
        if (is_fraction) {
            FUZZ_CHECK(allow_fraction);
            FUZZ_CHECK(fraction >= 0.0 && fraction <= 1.0);
            FUZZ_CHECK(bytes == 0xdeadbeef);
        } else {
            FUZZ_CHECK(fraction == -7.0);
            check_fmt(bytes);
        }
        FUZZ_CHECK((s[0] >= '0' && s[0] <= '9') || s[0] == '.');
    } else {
        FUZZ_CHECK(rc == -EINVAL || rc == -ERANGE);
        FUZZ_CHECK(bytes == 0xdeadbeef && is_fraction && fraction == -7.0);
    }

    uint64_t plain;
    if (vg_parse_u64(s, &plain) == 0 && plain <= (1ull << 53)) {
        FUZZ_CHECK(rc == 0 && !is_fraction && bytes == plain);
    }
    int64_t sv;
    if (vg_parse_i64(s, -1000, 1000, &sv) == 0)
        FUZZ_CHECK(sv >= -1000 && sv <= 1000);
    free(s);
    return 0;
}
