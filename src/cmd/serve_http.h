/*
 * The HTTP side of `vramguard serve`, on libmicrohttpd: GET /metrics copies the collector's
 * latest exposition, GET /healthz says whether collection is alive, anything else is 404 or
 * 405 (cmd/serve_route.h decides which).
 *
 * Bounded so that no client can hurt the others: a few event-driven threads (epoll) serve every
 * connection, so a slow client holds a connection slot, never a thread; each request's headers
 * must fit in memory_limit bytes (a longer request line or header is answered with an error and
 * closed); a connection idle for conn_timeout_s is closed by libmicrohttpd, and one that has
 * spent longer than that on a single request (a client trickling one byte a second never goes
 * idle) is shut down by vg_http_reap(). A good request keeps its connection open for the next
 * one; errors, and requests announcing a body (never read), close it.
 *
 * Floods of idle or trickling connections cannot starve a scrape: at most max_connections are
 * kept open, and a new connection beyond that makes room by closing the one that has waited
 * longest without a request in progress: silent for a quarter of a second, or still sending its
 * request head (or idle after an answer) for a second. Never one being answered or with request
 * bytes not read yet: a scrape's request follows its connection within a round trip and is
 * answered in milliseconds. vg_http_reap() applies the same limits to connections let in while
 * nothing could give way. A client address
 * (IPv4, or an IPv6 /64) holding more than max_per_client connections gives up its own
 * longest-waiting one for its new one; a client with max_per_client requests being answered at
 * once has its new connection refused. When nothing can give way, up to max_connections / 4 + 8
 * more are let in, and beyond that they wait in the listen backlog.
 *
 * Ownership: vg_http_start() takes over the listening socket and returns a server that
 * vg_http_stop() stops (closing every connection) and frees.
 */
#ifndef VG_CMD_SERVE_HTTP_H
#define VG_CMD_SERVE_HTTP_H

#include <stddef.h>

#include "model/collector.h"
#include "util/err.h"

#define VG_HTTP_MAX_PER_CLIENT 32u

struct vg_http_opts {
    int listen_fd;            /* bound and listening, non-blocking; owned from the call on */
    unsigned threads;         /* event threads (default 2) */
    unsigned max_connections; /* default 256 */
    unsigned max_per_client;  /* default VG_HTTP_MAX_PER_CLIENT */
    unsigned conn_timeout_s;  /* default 10 */
    size_t memory_limit;      /* per connection, for the request head; default 16 KiB */
    struct vg_collector *collector;
    vg_serve_log_fn log;    /* libmicrohttpd's own complaints; NULL: dropped */
    vg_serve_log_fn notice; /* connection pressure, once a minute at most; NULL: dropped */
    void *log_arg;          /* for both */
};

struct vg_http;

int vg_http_start(const struct vg_http_opts *o, struct vg_http **out, struct vg_err *err);
/* Shut down connections that have spent more than conn_timeout_s on one request, and enforce
 * the connection limits on those let in while nothing could give way. Call a few times a second
 * from any thread. */
void vg_http_reap(struct vg_http *h);
void vg_http_stop(struct vg_http *h);

#endif
