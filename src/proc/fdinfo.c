/*
 * /proc/PID/fdinfo/N, the two things vramguard asks of it (fds.c): a descriptor's open flags,
 * to tell an O_PATH descriptor (a path, no open of the device) from an open file, and an
 * io_uring's registered files, which hold their files open with no descriptor in fd/ (a node
 * registered and then closed is held by the ring alone). Both parsers are strict and never
 * read past len: the text comes from the kernel, but a --proc view may be a copy.
 */
#include "proc/internal.h"

#include <errno.h>
#include <string.h>

/* The value of the line "key" (key includes the colon) at the start of a line of buf: its
 * first byte after blanks and its length up to the line's end; NULL when there is none. */
static const char *vg_fdinfo_value(const char *buf, size_t len, const char *key, size_t *n)
{
    size_t kn = strlen(key);
    for (size_t i = 0; i + kn <= len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len;
        if (end - i >= kn && memcmp(buf + i, key, kn) == 0) {
            size_t v = i + kn;
            while (v < end && (buf[v] == '\t' || buf[v] == ' '))
                v++;
            *n = end - v;
            return buf + v;
        }
        i = end + 1;
    }
    return NULL;
}

int vg_proc_parse_fdinfo_flags(const char *buf, size_t len, uint64_t *flags)
{
    size_t n;
    const char *v = vg_fdinfo_value(buf, len, "flags:", &n);
    if (!v || n == 0 || n > 22)
        return -EINVAL;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '7' || x > (UINT64_MAX >> 3))
            return -EINVAL;
        x = x << 3 | (uint64_t)(v[i] - '0');
    }
    *flags = x;
    return 0;
}

int vg_proc_parse_uring_files(const char *buf, size_t len, vg_proc_uring_file_fn fn, void *arg)
{
    size_t n;
    const char *v = vg_fdinfo_value(buf, len, "UserFiles:", &n);
    if (!v)
        return 0; /* not a ring, or a kernel that does not list them */
    uint64_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || count > UINT32_MAX)
            return -EINVAL;
        count = count * 10 + (uint64_t)(v[i] - '0');
    }
    if (n == 0)
        return -EINVAL;
    /* the entries follow, one a line: blanks, the slot, ": ", then the file's path (or, before
     * Linux 6.x, its last name only; "<none>" for an empty slot) to the end of the line */
    size_t at = (size_t)(v - buf) + n;
    for (uint64_t k = 0; k < count; k++) {
        if (at >= len || buf[at] != '\n')
            return k ? 0 : -EINVAL; /* the kernel cut a long list short: what was read stands */
        if (++at == len && k)
            return 0;
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len;
        size_t i = at;
        while (i < end && buf[i] == ' ')
            i++;
        size_t digits = i;
        while (i < end && buf[i] >= '0' && buf[i] <= '9')
            i++;
        if (i == digits || i + 2 > end || buf[i] != ':' || buf[i + 1] != ' ')
            return -EINVAL;
        const char *path = buf + i + 2;
        size_t plen = end - (i + 2);
        if (!(plen == 6 && memcmp(path, "<none>", 6) == 0) && plen > 0) {
            int rc = fn(arg, path, plen);
            if (rc)
                return rc;
        }
        at = end;
    }
    return 0;
}
