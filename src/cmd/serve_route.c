/*
 * Request classification and --listen parsing for `vramguard serve` (see route.h): small pure
 * functions, kept apart from the server so fuzzers can hammer them.
 */
#include "cmd/serve_route.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/parse.h"

void vg_serve_route(const char *method, const char *path, struct vg_serve_reply *r)
{
    method = method ? method : "";
    path = path ? path : "";
    memset(r, 0, sizeof(*r));
    if (strcmp(path, "/metrics") == 0) {
        r->route = VG_SERVE_METRICS;
    } else if (strcmp(path, "/healthz") == 0) {
        r->route = VG_SERVE_HEALTHZ;
    } else {
        r->route = VG_SERVE_NOT_FOUND;
        r->status = 404;
        r->body = "not found: vramguard serves /metrics and /healthz\n";
        return;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        r->route = VG_SERVE_BAD_METHOD;
        r->status = 405;
        r->body = "method not allowed: use GET\n";
        r->allow = "GET, HEAD";
        return;
    }
    r->status = 200;
}

static bool vg_v4_loopback(const struct in_addr *a)
{
    return (ntohl(a->s_addr) >> 24) == 127;
}

int vg_serve_parse_listen(const char *s, struct vg_serve_addr *a, struct vg_err *err)
{
    memset(a, 0, sizeof(*a));
    if (!s || !*s)
        return vg_err_set(err, -EINVAL, "--listen takes HOST:PORT, e.g. %s",
                          VG_SERVE_LISTEN_DEFAULT);
    const char *colon = strrchr(s, ':');
    if (!colon)
        return vg_err_set(err, -EINVAL, "--listen takes HOST:PORT (e.g. %s), not '%s'",
                          VG_SERVE_LISTEN_DEFAULT, s);
    uint64_t port;
    if (vg_parse_u64(colon + 1, &port) != 0 || port > 65535)
        return vg_err_set(err, -EINVAL, "--listen: '%s' is not a port number (0-65535)", colon + 1);
    size_t hlen = (size_t)(colon - s);
    char host[64];
    if (hlen >= sizeof(host))
        return vg_err_set(err, -EINVAL, "--listen: the host part of '%s' is too long", s);
    memcpy(host, s, hlen);
    host[hlen] = '\0';

    struct sockaddr_in *v4 = (struct sockaddr_in *)&a->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->ss;
    if (hlen == 0) {
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (strcmp(host, "localhost") == 0) {
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (host[0] == '[') {
        if (hlen < 3 || host[hlen - 1] != ']')
            return vg_err_set(err, -EINVAL, "--listen: '%s' is not a bracketed IPv6 address", host);
        host[hlen - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) != 1)
            return vg_err_set(err, -EINVAL, "--listen: '%s' is not an IPv6 address", host + 1);
        v6->sin6_family = AF_INET6;
    } else if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
    } else {
        return vg_err_set(err, -EINVAL,
                          "--listen: '%s' is not an IPv4 address, [IPv6 address] or localhost "
                          "(host names are not resolved)",
                          host);
    }
    if (v4->sin_family == AF_INET) {
        v4->sin_port = htons((uint16_t)port);
        a->len = sizeof(*v4);
        a->loopback = vg_v4_loopback(&v4->sin_addr);
    } else {
        v6->sin6_port = htons((uint16_t)port);
        a->len = sizeof(*v6);
        const struct in6_addr *ad = &v6->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(ad)) {
            a->loopback = true;
        } else if (IN6_IS_ADDR_V4MAPPED(ad)) {
            struct in_addr m;
            memcpy(&m, &ad->s6_addr[12], 4);
            a->loopback = vg_v4_loopback(&m);
        }
    }
    return 0;
}

void vg_serve_addr_format(const struct sockaddr *sa, socklen_t len, char *out, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (n == 0)
        return;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
        port = ntohs(v4->sin_port);
        snprintf(out, n, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
        port = ntohs(v6->sin6_port);
        snprintf(out, n, "[%s]:%u", host, port);
    } else {
        snprintf(out, n, "?");
    }
}
