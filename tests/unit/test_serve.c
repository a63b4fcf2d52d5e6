/*
 * Unit tests for the pure parts of `vramguard serve` (src/cmd/serve_route.c): what each method and
 * path gets, hostile inputs included, and --listen parsing with the loopback decision.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmd/serve_route.h"

static void route_is(const char *method, const char *path, enum vg_serve_route route,
                     unsigned status)
{
    struct vg_serve_reply r;
    vg_serve_route(method, path, &r);
    assert_int_equal(r.route, route);
    assert_int_equal(r.status, status);
    if (status == 405) {
        assert_string_equal(r.allow, "GET, HEAD");
        assert_non_null(r.body);
    } else {
        assert_null(r.allow);
    }
    if (status == 404)
        assert_non_null(r.body);
}

static void test_routes(void **state)
{
    (void)state;
    route_is("GET", "/metrics", VG_SERVE_METRICS, 200);
    route_is("HEAD", "/metrics", VG_SERVE_METRICS, 200);
    route_is("GET", "/healthz", VG_SERVE_HEALTHZ, 200);
    route_is("POST", "/metrics", VG_SERVE_BAD_METHOD, 405);
    route_is("DELETE", "/healthz", VG_SERVE_BAD_METHOD, 405);
    route_is("get", "/metrics", VG_SERVE_BAD_METHOD, 405);
    route_is("", "/metrics", VG_SERVE_BAD_METHOD, 405);
    route_is(NULL, "/metrics", VG_SERVE_BAD_METHOD, 405);
    route_is("GET", "/", VG_SERVE_NOT_FOUND, 404);
    route_is("GET", "/metrics/", VG_SERVE_NOT_FOUND, 404);
    route_is("GET", "/metricsx", VG_SERVE_NOT_FOUND, 404);
    route_is("GET", "/METRICS", VG_SERVE_NOT_FOUND, 404);
    route_is("GET", "//metrics", VG_SERVE_NOT_FOUND, 404);
    route_is("GET", "", VG_SERVE_NOT_FOUND, 404);
    route_is("GET", NULL, VG_SERVE_NOT_FOUND, 404);
    route_is("PUT", "/nope", VG_SERVE_NOT_FOUND, 404);

    /* A long path is just another unknown path. */
    size_t n = 1u << 20;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, 'a', n);
    big[0] = '/';
    big[n] = '\0';
    route_is("GET", big, VG_SERVE_NOT_FOUND, 404);
    route_is(big, "/metrics", VG_SERVE_BAD_METHOD, 405);
    free(big);
}

static void listen_ok(const char *s, int family, const char *host, unsigned port, bool loopback)
{
    struct vg_serve_addr a;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_serve_parse_listen(s, &a, &err), 0);
    assert_int_equal(a.ss.ss_family, family);
    assert_int_equal(a.loopback, loopback);
    char text[96];
    vg_serve_addr_format((const struct sockaddr *)&a.ss, a.len, text, sizeof(text));
    char want[96];
    if (family == AF_INET)
        snprintf(want, sizeof(want), "%s:%u", host, port);
    else
        snprintf(want, sizeof(want), "[%s]:%u", host, port);
    assert_string_equal(text, want);
    vg_err_release(&err);
}

static void test_listen(void **state)
{
    (void)state;
    listen_ok("127.0.0.1:19835", AF_INET, "127.0.0.1", 19835, true);
    listen_ok("127.1.2.3:0", AF_INET, "127.1.2.3", 0, true);
    listen_ok("localhost:80", AF_INET, "127.0.0.1", 80, true);
    listen_ok(":19835", AF_INET, "0.0.0.0", 19835, false);
    listen_ok("0.0.0.0:19835", AF_INET, "0.0.0.0", 19835, false);
    listen_ok("10.1.2.3:65535", AF_INET, "10.1.2.3", 65535, false);
    listen_ok("[::1]:19835", AF_INET6, "::1", 19835, true);
    listen_ok("[::]:19835", AF_INET6, "::", 19835, false);
    listen_ok("[::ffff:127.0.0.1]:1", AF_INET6, "::ffff:127.0.0.1", 1, true);
    listen_ok("[fe80::1]:1", AF_INET6, "fe80::1", 1, false);

    static const char *const bad[] = {
        "",
        "19835",
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:65536",
        "127.0.0.1:-1",
        "127.0.0.1:1x",
        "127.0.0.1: 1",
        "::1:19835",
        "[::1:19835",
        "[]:1",
        "[::1]x:1",
        "example.com:80",
        "256.0.0.1:80",
        "1.2.3:80",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
        NULL};
    for (size_t i = 0; bad[i]; i++) {
        struct vg_serve_addr a;
        struct vg_err err = VG_ERR_INIT;
        assert_int_equal(vg_serve_parse_listen(bad[i], &a, &err), -EINVAL);
        assert_non_null(err.msg);
        vg_err_release(&err);
    }
    struct vg_serve_addr a;
    assert_int_equal(vg_serve_parse_listen(NULL, &a, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_listen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
