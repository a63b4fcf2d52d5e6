/*
 * Fuzz target: durations from the command line and config (vg_parse_duration_ms, e.g.
 * --interval 500ms, --older-than 2h, --nvml-timeout 10s). Invariants: a plain decimal integer
 * N is N seconds, exactly when a double holds it; "Nms" is N; failure leaves the output
 * untouched; nothing but a digit or '.' may start a valid duration.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "util/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    uint64_t ms = 0xdeadbeef;
    int rc = vg_parse_duration_ms(s, &ms);
    if (rc == 0)
        FUZZ_CHECK((s[0] >= '0' && s[0] <= '9') || s[0] == '.');
    else
        FUZZ_CHECK((rc == -EINVAL || rc == -ERANGE) && ms == 0xdeadbeef);

    uint64_t plain;
    if (vg_parse_u64(s, &plain) == 0 && plain <= (1ull << 42))
        FUZZ_CHECK(rc == 0 && ms == plain * 1000);
    size_t n = strlen(s);
    if (n > 2 && n < 16 && strcmp(s + n - 2, "ms") == 0 && vg_parse_u64n(s, n - 2, &plain) == 0)
        FUZZ_CHECK(rc == 0 && ms == plain);
    free(s);
    return 0;
}
