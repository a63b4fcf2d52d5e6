/*
 * Fuzz target: /proc/PID/fdinfo/N, the two parsers of proc/fdinfo.c: a descriptor's open flags
 * (vg_proc_parse_fdinfo_flags, which tells an O_PATH descriptor from an open file) and an
 * io_uring's registered files (vg_proc_parse_uring_files). Invariants: flags either parse to a
 * value whose octal digits the text holds after "flags:", or fail with -EINVAL untouched; the
 * ring's files are handed over as non-empty slices inside the input, never "<none>", no more of
 * them than the UserFiles count says, and any failure is -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

struct seen {
    const char *buf;
    size_t size, n;
};

static int on_file(void *arg, const char *path, size_t len)
{
    struct seen *s = arg;
    FUZZ_CHECK(len > 0);
    FUZZ_CHECK(path >= s->buf && path + len <= s->buf + s->size);
    FUZZ_CHECK(memchr(path, '\n', len) == NULL);
    FUZZ_CHECK(!(len == 6 && memcmp(path, "<none>", 6) == 0));
    s->n++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    uint64_t flags = 7;
    int rc = vg_proc_parse_fdinfo_flags(buf, size, &flags);
    if (rc == 0) {
        char text[32];
        int n = snprintf(text, sizeof text, "%llo", (unsigned long long)flags);
        FUZZ_CHECK(n > 0 && memmem(buf, size, "flags:", 6) != NULL);
        /* the digits, perhaps after leading zeros, are in the text */
        FUZZ_CHECK(memmem(buf, size, text, (size_t)n) != NULL);
    } else {
        FUZZ_CHECK(rc == -EINVAL && flags == 7);
    }
    struct seen s = {buf, size, 0};
    rc = vg_proc_parse_uring_files(buf, size, on_file, &s);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL);
    /* each file is one line after "UserFiles:": never more files than lines */
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += buf[i] == '\n';
    FUZZ_CHECK(s.n <= lines);
    free(buf);
    return 0;
}
