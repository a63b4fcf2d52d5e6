/*
 * The HTTP side of `vramguard serve`, on libmicrohttpd: GET /metrics copies the collector's
 * latest exposition, GET /healthz says whether collection is alive, anything else is 404 or
 * 405 (serve/route.h decides which).
 *
 * Bounded so that no client can hurt the others: a few event-driven threads (epoll) serve every
 * connection, so a slow client holds a connection slot, never a thread; at most
 * max_connections at once (more wait in the listen backlog); each request's headers must fit in
 * memory_limit bytes (a longer request line or header is answered with an error and closed);
 * a connection idle for conn_timeout_s is closed by libmicrohttpd, and one that has spent
 * longer than that on a single request (a client trickling one byte a second never goes idle)
 * is shut down by vg_http_reap(). A good request keeps its connection open for the next one;
 * errors, and requests announcing a body (never read), close it.
 *
 * Ownership: vg_http_start() takes over the listening socket and returns a server that
 * vg_http_stop() stops (closing every connection) and frees.
 */
#ifndef VG_SERVE_HTTP_H
#define VG_SERVE_HTTP_H

#include <stddef.h>

#include "serve/collector.h"
#include "util/err.h"

struct vg_http_opts {
    int listen_fd;            /* bound and listening, non-blocking; owned from the call on */
    unsigned threads;         /* event threads (default 2) */
    unsigned max_connections; /* default 256 */
    unsigned conn_timeout_s;  /* default 10 */
    size_t memory_limit;      /* per connection, for the request head; default 16 KiB */
    struct vg_collector *collector;
    vg_serve_log_fn log; /* libmicrohttpd's own complaints; NULL: dropped */
    void *log_arg;
};

struct vg_http;

int vg_http_start(const struct vg_http_opts *o, struct vg_http **out, struct vg_err *err);
/* Shut down connections that have spent more than conn_timeout_s on one request. Call about
 * once a second from any thread. */
void vg_http_reap(struct vg_http *h);
void vg_http_stop(struct vg_http *h);

#endif
