/*
 * Fuzz target: a driver's UUID on its way to text output and to CUDA_VISIBLE_DEVICES: the
 * well-formedness check (vg_visible_uuid_ok) and the escaped short form (vg_text_short_uuid).
 * Invariants: an accepted UUID is "GPU-"/"MIG-" + 8-4-4-4-12 hex digits or the older
 * "MIG-GPU-...-/GI/CI" form, so it holds no comma, blank or control byte, has the exact
 * length of its form and is accepted again after a round trip through itself; the short form,
 * for every buffer size from 16 to 40, is NUL-terminated inside the buffer, writes nothing past
 * it and holds no control character (C0, DEL, C1), whatever the input.
 */
#include <string.h>

#include "fuzz.h"
#include "model/visible.h"
#include "util/text.h"

static int vg_fuzz_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    size_t len = strlen(s); /* a NUL in the input ends the C string, as for the driver's */
    if (vg_visible_uuid_ok(s)) {
        FUZZ_CHECK(strncmp(s, "GPU-", 4) == 0 || strncmp(s, "MIG-", 4) == 0);
        FUZZ_CHECK(len == 40 || (strncmp(s, "MIG-GPU-", 8) == 0 && len >= 48));
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            FUZZ_CHECK(c > 0x20 && c < 0x7f && c != ',');
            FUZZ_CHECK(vg_fuzz_hex((char)c) || c == '-' || c == '/' || strchr("GPUMI", c));
        }
        char *copy = strdup(s);
        FUZZ_CHECK(copy && vg_visible_uuid_ok(copy));
        free(copy);
    }
    for (size_t n = 16; n <= 40; n++) {
        char out[41];
        memset(out, 'Z', sizeof out);
        vg_text_short_uuid(s, out, n);
        size_t olen = strnlen(out, n);
        FUZZ_CHECK(olen < n);
        for (size_t i = 0; i < olen; i++) {
            unsigned char c = (unsigned char)out[i];
            FUZZ_CHECK(c >= 0x20 && c != 0x7f);
            /* no C1 control either (U+0080..U+009F, 0xC2 0x80..0x9F in UTF-8) */
            FUZZ_CHECK(!(c == 0xC2 && i + 1 < olen && (unsigned char)out[i + 1] < 0xA0));
        }
        FUZZ_CHECK(out[n] == 'Z'); /* nothing written past the buffer */
    }
    free(s);
    return 0;
}
