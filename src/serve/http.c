/*
 * The HTTP server of `vramguard serve` (see http.h) on libmicrohttpd's internal event threads.
 * Per-connection bookkeeping (a slot per open connection, with the time its current request
 * started) lets vg_http_reap() end connections that trickle a request forever, which
 * libmicrohttpd's inactivity timeout alone cannot catch.
 */
#include "serve/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "render/metrics.h"
#include "serve/route.h"

struct vg_conn_slot {
    bool used;
    bool shut;             /* already shut down by the reaper */
    int fd;                /* valid while used: libmicrohttpd closes it only after the
                            * CLOSED notification, which frees the slot under the lock */
    struct timespec since; /* CLOCK_MONOTONIC: connection start or last request */
};

struct vg_http {
    struct MHD_Daemon *d;
    struct vg_http_opts o;
    pthread_mutex_t lock; /* guards slots */
    struct vg_conn_slot *slots;
    size_t nslots;
};

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
        if (!ci)
            return;
        pthread_mutex_lock(&h->lock);
        for (size_t i = 0; i < h->nslots; i++) {
            if (h->slots[i].used)
                continue;
            h->slots[i].used = true;
            h->slots[i].shut = false;
            h->slots[i].fd = ci->connect_fd;
            clock_gettime(CLOCK_MONOTONIC, &h->slots[i].since);
            *socket_context = (void *)(uintptr_t)(i + 1);
            break;
        }
        pthread_mutex_unlock(&h->lock);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        uintptr_t slot = (uintptr_t)*socket_context;
        if (slot == 0 || slot > h->nslots)
            return;
        pthread_mutex_lock(&h->lock);
        h->slots[slot - 1].used = false;
        pthread_mutex_unlock(&h->lock);
        *socket_context = NULL;
    }
}

/* A complete request arrived: its connection's clock starts again. */
static void vg_http_restart_clock(struct vg_http *h, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    uintptr_t slot = ci ? (uintptr_t)ci->socket_context : 0;
    if (slot == 0 || slot > h->nslots)
        return;
    pthread_mutex_lock(&h->lock);
    clock_gettime(CLOCK_MONOTONIC, &h->slots[slot - 1].since);
    pthread_mutex_unlock(&h->lock);
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
    vg_http_restart_clock(h, c);

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
    if (!h->o.conn_timeout_s)
        h->o.conn_timeout_s = 10;
    if (!h->o.memory_limit)
        h->o.memory_limit = 16 * 1024;
    /* libmicrohttpd shares the limit out among its threads; a few spare slots cover
     * connections it has just accepted before it counts them. */
    h->nslots = (size_t)h->o.max_connections + h->o.threads + 8;
    h->slots = calloc(h->nslots, sizeof(*h->slots));
    if (!h->slots) {
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
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)h->o.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)h->o.conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)h->o.memory_limit,
        MHD_OPTION_NOTIFY_CONNECTION, vg_http_notify, h,
        MHD_OPTION_EXTERNAL_LOGGER, vg_http_logger, h,
        MHD_OPTION_END);
    /* clang-format on */
    if (!h->d) {
        int e = errno ? errno : EIO;
        close(h->o.listen_fd);
        pthread_mutex_destroy(&h->lock);
        free(h->slots);
        free(h);
        return vg_err_set(err, -e, "cannot start the HTTP server (libmicrohttpd): %s", strerror(e));
    }
    *out = h;
    return 0;
}

void vg_http_reap(struct vg_http *h)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->nslots; i++) {
        struct vg_conn_slot *s = &h->slots[i];
        if (!s->used || s->shut)
            continue;
        double age =
            (double)(now.tv_sec - s->since.tv_sec) + (double)(now.tv_nsec - s->since.tv_nsec) / 1e9;
        if (age <= (double)h->o.conn_timeout_s)
            continue;
        /* shutdown(), not close(): the descriptor stays libmicrohttpd's, which sees the end
         * of the stream and closes the connection itself. */
        shutdown(s->fd, SHUT_RDWR);
        s->shut = true;
    }
    pthread_mutex_unlock(&h->lock);
}

void vg_http_stop(struct vg_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->lock);
    free(h->slots);
    free(h);
}
