/*
 * Fuzz target: what `vramguard serve` decides from a request (vg_serve_route: method and path
 * -> route and status) and from --listen (vg_serve_parse_listen, vg_serve_addr_format). The
 * input is "METHOD\0PATH\0LISTEN". Invariants: only /metrics and /healthz with GET or HEAD are
 * 200, any other path 404, another method on them 405 with an Allow header; a listen address
 * that parses formats back (into any buffer size, never past it) to text that parses to the
 * same address.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "cmd/serve_route.h"

/* The next NUL-terminated piece of s (within end), or "" when there is none. */
static const char *piece(const char **s, const char *end)
{
    const char *p = *s;
    if (p >= end)
        return "";
    *s = p + strlen(p) + 1;
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_cstr(data, size);
    const char *cur = buf, *end = buf + size;
    const char *method = piece(&cur, end);
    const char *path = piece(&cur, end);
    const char *listen = piece(&cur, end);

    struct vg_serve_reply r;
    vg_serve_route(method, path, &r);
    int known = !strcmp(path, "/metrics") || !strcmp(path, "/healthz");
    int good_method = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!known) {
        FUZZ_CHECK(r.route == VG_SERVE_NOT_FOUND && r.status == 404 && r.body && !r.allow);
    } else if (!good_method) {
        FUZZ_CHECK(r.route == VG_SERVE_BAD_METHOD && r.status == 405 && r.body && r.allow);
    } else {
        FUZZ_CHECK(r.status == 200 && !r.body && !r.allow);
        FUZZ_CHECK(r.route == (!strcmp(path, "/metrics") ? VG_SERVE_METRICS : VG_SERVE_HEALTHZ));
    }
    vg_serve_route(NULL, NULL, &r);
    FUZZ_CHECK(r.status == 404);

    struct vg_serve_addr a;
    struct vg_err err = VG_ERR_INIT;
    if (vg_serve_parse_listen(listen, &a, &err) == 0) {
        FUZZ_CHECK(a.ss.ss_family == AF_INET || a.ss.ss_family == AF_INET6);
        FUZZ_CHECK(a.len > 0 && a.len <= sizeof(a.ss));
        char text[128];
        vg_serve_addr_format((const struct sockaddr *)&a.ss, a.len, text, sizeof text);
        size_t len = strlen(text);
        for (size_t n = 1; n <= len + 1; n++) {
            char *small = malloc(n);
            if (!small)
                abort();
            vg_serve_addr_format((const struct sockaddr *)&a.ss, a.len, small, n);
            FUZZ_CHECK(strlen(small) == (n <= len ? n - 1 : len));
            free(small);
        }
        struct vg_serve_addr b;
        FUZZ_CHECK(vg_serve_parse_listen(text, &b, &err) == 0);
        FUZZ_CHECK(b.len == a.len && memcmp(&b.ss, &a.ss, a.len) == 0 && b.loopback == a.loopback);
    } else {
        FUZZ_CHECK(vg_err_msg(&err)[0]);
    }
    vg_err_release(&err);
    free(buf);
    return 0;
}
