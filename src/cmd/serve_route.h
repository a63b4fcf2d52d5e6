/*
 * The pure parts of `vramguard serve`'s HTTP side, apart from the server so that unit tests
 * and fuzz targets can call them without a socket or libmicrohttpd: what a request gets
 * (method and path -> route and status), and what a --listen value means.
 *
 * Nothing here allocates; returned strings are static.
 */
#ifndef VG_CMD_SERVE_ROUTE_H
#define VG_CMD_SERVE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "util/err.h"

enum vg_serve_route {
    VG_SERVE_METRICS,    /* GET|HEAD /metrics: the last exposition, 200 */
    VG_SERVE_HEALTHZ,    /* GET|HEAD /healthz: 200, or 503 when collection has stalled */
    VG_SERVE_NOT_FOUND,  /* any other path: 404 */
    VG_SERVE_BAD_METHOD, /* /metrics or /healthz with another method: 405 */
};

struct vg_serve_reply {
    enum vg_serve_route route;
    unsigned status;   /* HTTP status; for VG_SERVE_HEALTHZ the caller may turn it to 503 */
    const char *body;  /* fixed body for 404 and 405; NULL for the other routes */
    const char *allow; /* the Allow header of a 405; NULL otherwise */
};

/* Classify a request. method and path are as the server received them (path without the
 * query string); NULL is treated as empty. Paths are matched exactly and methods case-
 * sensitively (RFC 9110): "/metrics/" and "get" are not /metrics and GET. An unknown path is
 * 404 whatever the method; a known path with a method other than GET or HEAD is 405. */
void vg_serve_route(const char *method, const char *path, struct vg_serve_reply *r);

/* A --listen value: "HOST:PORT" with HOST an IPv4 address, "[IPv6]" or "localhost", or
 * ":PORT" for every address. PORT 0 lets the kernel choose. */
struct vg_serve_addr {
    struct sockaddr_storage ss;
    socklen_t len;
    bool loopback; /* 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104 */
};

#define VG_SERVE_LISTEN_DEFAULT "127.0.0.1:19835"

int vg_serve_parse_listen(const char *s, struct vg_serve_addr *a, struct vg_err *err);

/* "127.0.0.1:19835" or "[::1]:19835" for a bound address; writes at most n bytes. */
void vg_serve_addr_format(const struct sockaddr *sa, socklen_t len, char *out, size_t n);

#endif
