/*
 * The HTTP server of `vramguard serve` (see http.h) on libmicrohttpd's internal event threads.
 * Per-connection bookkeeping (a slot per open connection: its client, whether a request is
 * being answered, and since when it is in its current phase) lets vg_http_reap() end
 * connections that trickle a request forever, which libmicrohttpd's inactivity timeout alone
 * cannot catch, and lets a new connection make room when the table is full.
 *
 * Why not libmicrohttpd's own limits: MHD_OPTION_CONNECTION_LIMIT stops accepting when full,
 * so 256 idle sockets leave a scrape waiting in the listen backlog until they time out; and
 * MHD_OPTION_PER_IP_CONNECTION_LIMIT refuses the newest connection of a client over its limit,
 * which on a shared address (loopback, a NAT) is the scrape itself. Here the newcomer is kept
 * and the connection that has waited longest without a request in progress goes instead.
 * libmicrohttpd's limit stays, set higher, as the hard bound.
 */
#include "cmd/serve_http.h"

#include <errno.h>
#include <linux/tcp.h> /* TCP_INFO with tcpi_bytes_received, which glibc's header lacks */
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "render/metrics.h"
#include "cmd/serve_route.h"

/* How often the pressure summary may be logged. */
#define VG_HTTP_PRESSURE_LOG_S 60

struct vg_conn_slot {
    bool used;
    bool shut;                /* already shut down (reaper, or to make room) */
    bool busy;                /* a request is being answered */
    unsigned tried;           /* vg_http_victim() looked at it in pass `tried` */
    int fd;                   /* valid while used: libmicrohttpd closes it only after the
                               * CLOSED notification, which frees the slot under the lock */
    unsigned char client[16]; /* the client's address: IPv4 (and IPv4-mapped) in 4 bytes,
                               * IPv6 as its /64 in 8; the rest zero */
    struct timespec since;    /* CLOCK_MONOTONIC: start of the current phase (waiting for a
                               * request, or answering one) */
};

struct vg_http {
    struct MHD_Daemon *d;
    struct vg_http_opts o;
    pthread_mutex_t lock; /* guards slots and the counters below */
    struct vg_conn_slot *slots;
    size_t nslots;
    unsigned hard_limit;       /* libmicrohttpd's connection limit */
    size_t open;               /* used and not shut */
    unsigned gen;              /* vg_http_victim() passes */
    size_t *order;             /* nslots scratch indices for vg_http_enforce() */
    uint64_t evicted, refused; /* since the last pressure log */
    struct timespec pressure_logged;
};

static double vg_http_age(const struct timespec *now, const struct timespec *t)
{
    return (double)(now->tv_sec - t->tv_sec) + (double)(now->tv_nsec - t->tv_nsec) / 1e9;
}

/* The part of a client's address that counts as "one client". */
static void vg_http_client_key(const struct sockaddr *sa, unsigned char key[16])
{
    memset(key, 0, 16);
    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, mapped, 12) == 0) {
            memcpy(key, a + 12, 4);
        } else {
            /* One host usually has a whole /64: per address would be no limit at all. */
            memcpy(key, a, 8);
            key[15] = 6;
        }
    }
}

/* Close slot s (its socket: libmicrohttpd then sees the end and closes the connection).
 * Under the lock. */
static void vg_http_shut(struct vg_http *h, struct vg_conn_slot *s)
{
    /* shutdown(), not close(): the descriptor stays libmicrohttpd's. */
    shutdown(s->fd, SHUT_RDWR);
    s->shut = true;
    h->open--;
}

/* A connection may be closed to make room once it has waited this long without a request in
 * progress: a silent one (never sent a byte) after VG_HTTP_SILENT_MS, any other (a request head
 * still arriving, or idle after an answer) after VG_HTTP_SLOW_HEAD_MS. A real client's request
 * follows its connection within a round trip. */
#define VG_HTTP_SILENT_MS 250u
#define VG_HTTP_SLOW_HEAD_MS 1000u
/* How many of the longest-waiting connections a new one looks at before giving up on making
 * room (each look costs two system calls). */
#define VG_HTTP_VICTIM_TRIES 8

/* Bytes the client has ever sent on fd (the kernel's count, which includes what nobody has
 * read yet), or -1 when the kernel does not say (Linux before 4.1). */
static long long vg_http_bytes_in(int fd)
{
    struct tcp_info ti;
    memset(&ti, 0, sizeof(ti));
    socklen_t len = sizeof(ti);
    size_t need = offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < need)
        return -1;
    return (long long)ti.tcpi_bytes_received;
}

/*
 * May s be closed to make room? Only when no request is being answered and none is waiting to be
 * read, and it has waited long enough (see VG_HTTP_SILENT_MS). A scrape is safe: its request
 * reaches the socket right after the connection (and is counted before anyone reads it), and is
 * answered in milliseconds.
 */
static bool vg_http_evictable(const struct vg_conn_slot *s, const struct timespec *now)
{
    double ms = vg_http_age(now, &s->since) * 1000.0;
    if (ms < VG_HTTP_SILENT_MS)
        return false;
    int unread = 0;
    if (ioctl(s->fd, FIONREAD, &unread) != 0 || unread > 0)
        return false;
    return ms >= VG_HTTP_SLOW_HEAD_MS || vg_http_bytes_in(s->fd) == 0;
}

/* The connection (of client key, or of anyone when key is NULL) that has waited longest and may
 * be closed to make room, or NULL. Under the lock. */
static struct vg_conn_slot *vg_http_victim(struct vg_http *h, const unsigned char *key,
                                           const struct vg_conn_slot *except)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    h->gen++;
    for (int t = 0; t < VG_HTTP_VICTIM_TRIES; t++) {
        struct vg_conn_slot *best = NULL;
        for (size_t i = 0; i < h->nslots; i++) {
            struct vg_conn_slot *s = &h->slots[i];
            if (s == except || !s->used || s->shut || s->busy || s->tried == h->gen)
                continue;
            if (key && memcmp(s->client, key, 16) != 0)
                continue;
            if (!best || vg_http_age(&best->since, &s->since) > 0)
                best = s;
        }
        if (!best)
            return NULL;
        if (vg_http_evictable(best, &now))
            return best;
        best->tried = h->gen;
    }
    return NULL;
}

/* A new connection in slot n: keep within the per-client and the overall limits by closing the
 * longest-waiting connection of the same client, or of anyone. A client over its limit with
 * nothing to give up has its new connection refused only when that many of its requests are
 * being answered at once; otherwise (its connections have requests waiting to be read) the
 * newcomer stays for now, as when the whole table has nothing to give up: libmicrohttpd's hard
 * limit bounds both. Under the lock. */
static void vg_http_make_room(struct vg_http *h, struct vg_conn_slot *n)
{
    size_t mine = 0, busy = 0;
    for (size_t i = 0; i < h->nslots; i++) {
        const struct vg_conn_slot *s = &h->slots[i];
        if (s->used && !s->shut && memcmp(s->client, n->client, 16) == 0) {
            mine++;
            busy += s->busy;
        }
    }
    if (mine > h->o.max_per_client) {
        struct vg_conn_slot *v = vg_http_victim(h, n->client, n);
        if (v) {
            vg_http_shut(h, v);
            h->evicted++;
        } else if (busy >= h->o.max_per_client) {
            vg_http_shut(h, n);
            h->refused++;
        }
        return;
    }
    if (h->open > h->o.max_connections) {
        struct vg_conn_slot *v = vg_http_victim(h, NULL, n);
        if (v) {
            vg_http_shut(h, v);
            h->evicted++;
        }
    }
}

static void vg_http_logger(void *cls, const char *fmt, va_list ap)
{
    struct vg_http *h = cls;
    char msg[512];
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (n <= 0 || !h->o.log)
        return;
    /* libmicrohttpd ends its messages with a newline; ours are one line without. */
    size_t len = strlen(msg);
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == '\r'))
        msg[--len] = '\0';
    h->o.log(h->o.log_arg, msg);
}

static void vg_http_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe)
{
    struct vg_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!ci)
            return;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&h->lock);
        for (size_t i = 0; i < h->nslots; i++) {
            struct vg_conn_slot *s = &h->slots[i];
            if (s->used)
                continue;
            *s = (struct vg_conn_slot){.used = true, .fd = ci->connect_fd, .since = now};
            vg_http_client_key(ai ? ai->client_addr : NULL, s->client);
            h->open++;
            *socket_context = (void *)(uintptr_t)(i + 1);
            vg_http_make_room(h, s);
            break;
        }
        pthread_mutex_unlock(&h->lock);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        uintptr_t slot = (uintptr_t)*socket_context;
        if (slot == 0 || slot > h->nslots)
            return;
        pthread_mutex_lock(&h->lock);
        struct vg_conn_slot *s = &h->slots[slot - 1];
        if (!s->shut)
            h->open--;
        s->used = false;
        pthread_mutex_unlock(&h->lock);
        *socket_context = NULL;
    }
}

/* A request head has arrived (busy) or its answer is done (waiting again): the connection's
 * clock starts again. */
static void vg_http_phase(struct vg_http *h, struct MHD_Connection *c, bool busy)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    uintptr_t slot = ci ? (uintptr_t)ci->socket_context : 0;
    if (slot == 0 || slot > h->nslots)
        return;
    pthread_mutex_lock(&h->lock);
    h->slots[slot - 1].busy = busy;
    clock_gettime(CLOCK_MONOTONIC, &h->slots[slot - 1].since);
    pthread_mutex_unlock(&h->lock);
}

static void vg_http_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)req_cls;
    (void)toe;
    vg_http_phase(cls, c, false);
}

static void vg_http_nofree(void *p)
{
    (void)p;
}

static struct MHD_Response *vg_http_static(const char *body)
{
    return MHD_create_response_from_buffer_with_free_callback(strlen(body), (void *)body,
                                                              vg_http_nofree);
}

static struct MHD_Response *vg_http_healthz(struct vg_http *h, unsigned *status)
{
    struct vg_collector_health hl;
    vg_collector_health(h->o.collector, &hl);
    char body[256];
    if (hl.stalled) {
        *status = MHD_HTTP_SERVICE_UNAVAILABLE;
        snprintf(body, sizeof(body), "stalled: no collection has finished for %.0f s\n",
                 hl.age_seconds);
    } else {
        *status = MHD_HTTP_OK;
        snprintf(body, sizeof(body), "ok: the last collection finished %.1f s ago and %s\n",
                 hl.age_seconds,
                 hl.success ? "succeeded" : "failed (see vramguard_last_collect_success)");
    }
    size_t n = strlen(body);
    char *copy = malloc(n);
    if (!copy)
        return NULL;
    memcpy(copy, body, n);
    return MHD_create_response_from_buffer_with_free_callback(n, copy, free);
}

/* Does the request announce a body? */
static bool vg_http_has_body(struct MHD_Connection *c)
{
    const char *len =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) !=
               NULL ||
           (len && strcmp(len, "0") != 0);
}

static enum MHD_Result vg_http_access(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **req_cls)
{
    static int second_call;
    struct vg_http *h = cls;
    (void)version;
    (void)upload_data;
    if (*req_cls == NULL)
        vg_http_phase(h, c, true);

    struct vg_serve_reply r;
    vg_serve_route(method, url, &r);
    /* libmicrohttpd closes the connection after a response queued in the first call for a
     * request, which is what an error deserves (a body it would otherwise have to read is
     * never read). A good request without a body is answered in the second call, so the
     * connection can stay open for the next scrape. */
    if (*req_cls == NULL && r.status == 200 && !vg_http_has_body(c)) {
        *req_cls = &second_call;
        return MHD_YES;
    }
    *upload_data_size = 0;
    unsigned status = r.status;
    const char *type = "text/plain; charset=utf-8";
    struct MHD_Response *resp = NULL;
    switch (r.route) {
    case VG_SERVE_METRICS: {
        size_t len;
        char *data = vg_collector_copy(h->o.collector, &len);
        if (data) {
            resp = MHD_create_response_from_buffer_with_free_callback(len, data, free);
            if (!resp)
                free(data);
        }
        type = VG_METRICS_CONTENT_TYPE;
        break;
    }
    case VG_SERVE_HEALTHZ:
        resp = vg_http_healthz(h, &status);
        break;
    case VG_SERVE_NOT_FOUND:
    case VG_SERVE_BAD_METHOD:
        resp = vg_http_static(r.body);
        break;
    }
    if (!resp) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        resp = vg_http_static("out of memory\n");
        if (!resp)
            return MHD_NO; /* libmicrohttpd closes the connection */
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r.allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r.allow);
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

int vg_http_start(const struct vg_http_opts *o, struct vg_http **out, struct vg_err *err)
{
    *out = NULL;
    struct vg_http *h = calloc(1, sizeof(*h));
    if (!h) {
        close(o->listen_fd);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    h->o = *o;
    if (!h->o.threads)
        h->o.threads = 2;
    if (!h->o.max_connections)
        h->o.max_connections = 256;
    if (!h->o.max_per_client)
        h->o.max_per_client = VG_HTTP_MAX_PER_CLIENT;
    if (!h->o.conn_timeout_s)
        h->o.conn_timeout_s = 10;
    if (!h->o.memory_limit)
        h->o.memory_limit = 16 * 1024;
    /* libmicrohttpd's own limit is the hard bound: room for connections that arrive while no
     * open one can give way (all being answered, or just arrived), and for those shut to make
     * room that it has not closed yet. It shares the limit out among its threads; a few spare
     * slots cover connections it has just accepted before it counts them. */
    h->hard_limit = h->o.max_connections + h->o.max_connections / 4 + 8;
    h->nslots = (size_t)h->hard_limit + h->o.threads + 8;
    h->slots = calloc(h->nslots, sizeof(*h->slots));
    h->order = calloc(h->nslots, sizeof(*h->order));
    if (!h->slots || !h->order) {
        free(h->slots);
        free(h->order);
        free(h);
        close(o->listen_fd);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&h->lock, NULL);

    unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD;
    if (h->o.log)
        flags |= MHD_USE_ERROR_LOG;
    /* clang-format off */
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, vg_http_access, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->o.listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)h->o.threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)h->hard_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)h->o.conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)h->o.memory_limit,
        MHD_OPTION_NOTIFY_CONNECTION, vg_http_notify, h,
        MHD_OPTION_NOTIFY_COMPLETED, vg_http_completed, h,
        MHD_OPTION_EXTERNAL_LOGGER, vg_http_logger, h,
        MHD_OPTION_END);
    /* clang-format on */
    if (!h->d) {
        int e = errno ? errno : EIO;
        close(h->o.listen_fd);
        pthread_mutex_destroy(&h->lock);
        free(h->slots);
        free(h->order);
        free(h);
        return vg_err_set(err, -e, "cannot start the HTTP server (libmicrohttpd): %s", strerror(e));
    }
    *out = h;
    return 0;
}

/* qsort_r orders: by client, then longest-waiting first; or longest-waiting first. */
static int vg_http_by_client(const void *a, const void *b, void *arg)
{
    const struct vg_http *h = arg;
    const struct vg_conn_slot *x = &h->slots[*(const size_t *)a];
    const struct vg_conn_slot *y = &h->slots[*(const size_t *)b];
    int c = memcmp(x->client, y->client, 16);
    if (c)
        return c;
    double d = vg_http_age(&y->since, &x->since);
    return d > 0 ? -1 : d < 0;
}

static int vg_http_by_age(const void *a, const void *b, void *arg)
{
    const struct vg_http *h = arg;
    const struct vg_conn_slot *x = &h->slots[*(const size_t *)a];
    const struct vg_conn_slot *y = &h->slots[*(const size_t *)b];
    double d = vg_http_age(&y->since, &x->since);
    return d > 0 ? -1 : d < 0;
}

/*
 * The limits, enforced without waiting for a new connection: connections let in while nothing
 * could give way (slow heads younger than a second) become evictable later, and when the table
 * is at libmicrohttpd's hard limit no new connection arrives to close them. Each client over
 * max_per_client, then the whole table over max_connections, gives up its longest-waiting
 * evictable connections. Under the lock; order (an array of nslots) is scratch space.
 */
static void vg_http_enforce(struct vg_http *h, size_t *order, const struct timespec *now)
{
    size_t n = 0;
    for (size_t i = 0; i < h->nslots; i++)
        if (h->slots[i].used && !h->slots[i].shut)
            order[n++] = i;
    qsort_r(order, n, sizeof(*order), vg_http_by_client, h);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && memcmp(h->slots[order[j]].client, h->slots[order[i]].client, 16) == 0)
            j++;
        size_t mine = j - i;
        for (size_t k = i; k < j && mine > h->o.max_per_client; k++) {
            struct vg_conn_slot *s = &h->slots[order[k]];
            if (!s->busy && vg_http_evictable(s, now)) {
                vg_http_shut(h, s);
                h->evicted++;
                mine--;
            }
        }
        i = j;
    }
    if (h->open <= h->o.max_connections)
        return;
    n = 0;
    for (size_t i = 0; i < h->nslots; i++)
        if (h->slots[i].used && !h->slots[i].shut && !h->slots[i].busy)
            order[n++] = i;
    qsort_r(order, n, sizeof(*order), vg_http_by_age, h);
    for (size_t k = 0; k < n && h->open > h->o.max_connections; k++) {
        struct vg_conn_slot *s = &h->slots[order[k]];
        if (vg_http_evictable(s, now)) {
            vg_http_shut(h, s);
            h->evicted++;
        }
    }
}

void vg_http_reap(struct vg_http *h)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t evicted = 0, refused = 0;
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->nslots; i++) {
        struct vg_conn_slot *s = &h->slots[i];
        if (!s->used || s->shut)
            continue;
        /* A request trickled in, or an answer read, for longer than the timeout. */
        if (vg_http_age(&now, &s->since) > (double)h->o.conn_timeout_s)
            vg_http_shut(h, s);
    }
    vg_http_enforce(h, h->order, &now);
    if ((h->evicted || h->refused) &&
        vg_http_age(&now, &h->pressure_logged) >= VG_HTTP_PRESSURE_LOG_S) {
        evicted = h->evicted;
        refused = h->refused;
        h->evicted = h->refused = 0;
        h->pressure_logged = now;
    }
    pthread_mutex_unlock(&h->lock);
    /* Said once a minute at most: under a flood this would otherwise be a line per socket. */
    if ((evicted || refused) && h->o.notice) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "connections full: %llu waiting without a request were closed to make room, "
                 "%llu refused from clients with %u requests in progress, since the last such "
                 "report",
                 (unsigned long long)evicted, (unsigned long long)refused, h->o.max_per_client);
        h->o.notice(h->o.log_arg, msg);
    }
}

void vg_http_stop(struct vg_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->lock);
    free(h->slots);
    free(h->order);
    free(h);
}
