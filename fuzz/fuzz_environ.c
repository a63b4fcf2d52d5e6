/*
 * Fuzz target: /proc/PID/environ (vg_proc_parse_environ). Only allow-listed variables may come
 * out. Invariants: every value kept is really in the input as "NAME=value" followed by a NUL or
 * the end, and it is the FIRST entry with that exact name (getenv semantics); a name that
 * appears as an entry of its own is never missed.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

/* The first entry named name in buf: its value and length; NULL when none. */
static const char *first_entry(const char *buf, size_t len, const char *name, size_t *vlen)
{
    size_t k = strlen(name);
    for (size_t i = 0; i < len;) {
        const char *e = buf + i;
        const char *nul = memchr(e, '\0', len - i);
        size_t n = nul ? (size_t)(nul - e) : len - i;
        if (n > k && memcmp(e, name, k) == 0 && e[k] == '=') {
            *vlen = n - k - 1;
            return e + k + 1;
        }
        i += n + 1;
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_environ(buf, size, &p);
    FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
    if (rc == 0) {
        FUZZ_CHECK(p.known == VG_PROC_K_ENV);
        for (int v = 0; v < VG_ENV_COUNT; v++) {
            size_t vlen = 0;
            const char *want = first_entry(buf, size, vg_env_name((enum vg_env_var)v), &vlen);
            if (!want) {
                FUZZ_CHECK(p.env[v] == NULL);
                continue;
            }
            FUZZ_CHECK(p.env[v] != NULL);
            /* A value with a NUL inside cannot exist: entries end at the NUL. */
            FUZZ_CHECK(strlen(p.env[v]) == vlen);
            FUZZ_CHECK(memcmp(p.env[v], want, vlen) == 0);
        }
        FUZZ_CHECK(vg_proc_parse_environ(buf, size, &p) == 0); /* replaces, no leak */
    }
    vg_proc_release(&p);
    free(buf);
    return 0;
}
