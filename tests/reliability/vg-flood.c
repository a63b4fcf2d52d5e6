/*
 * vg-flood: connection floods against `vramguard serve` for the reliability tests
 * (tests/cli/t0706-serve-flood.bats). It opens COUNT TCP connections to 127.0.0.1:PORT and
 * keeps them open the way an attacker would, reopening each one the server closes, so that the
 * test can check that normal scrapes are still answered meanwhile.
 *
 *   vg-flood --port PORT --count N --mode idle|slowloris [--source ADDR] [--seconds S]
 *            [--rate R] [--once] [--stats FILE]
 *
 *   idle       connect and send nothing
 *   slowloris  send the start of a request ("GET /metrics HTTP/1.1\r\nHost: x\r\n") and then
 *              one byte of an endless header every second, so the connection never goes idle
 *
 * With --once, a connection the server closes stays closed (to count what the server keeps).
 * At most R connects a second (default 2000), so the flood leaves the two cores of a CI machine
 * some room. --source binds each connection to ADDR first (another loopback address, 127.0.0.2: a second
 * client as far as the server can tell). FILE is rewritten every 200 ms with one line,
 * "open O connected C closed K failed F", where O is how many are open now, C how many
 * connections were ever established, K how many the server closed (or reset) and F how many
 * connects failed; "ready" is appended once the first COUNT connects have completed (or failed).
 * Everything is non-blocking: a full listen backlog delays connects, it never blocks the tool.
 * Exits 0 after S seconds (default 60: nothing outlives a test for long) or at SIGTERM/SIGINT,
 * 1 on a setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum mode { M_IDLE, M_SLOW };

struct conn {
    int fd;
    bool connected;
    size_t sent;      /* bytes of the request head sent (slowloris, request) */
    double next_byte; /* slowloris: when the next byte goes */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long arg_long(const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "vg-flood: bad number '%s'\n", s);
        exit(1);
    }
    return v;
}

static const char head[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";

static struct sockaddr_in dst, src;
static bool use_src;
static enum mode mode;
static unsigned long n_connected, n_closed, n_failed;

static int open_conn(struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    c->connected = false;
    c->sent = 0;
    c->next_byte = 0;
    if (c->fd < 0)
        return -1;
    if (use_src && bind(c->fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    if (connect(c->fd, (struct sockaddr *)&dst, sizeof(dst)) == 0) {
        c->connected = true;
        n_connected++;
    } else if (errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

static void close_conn(struct conn *c, bool by_server)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->connected = false;
    if (by_server)
        n_closed++;
}

/* Send what this mode sends next; false when the server closed the connection. */
static bool feed(struct conn *c, double now)
{
    size_t len = sizeof(head) - 1;
    if (mode == M_IDLE)
        return true;
    if (c->sent < len) {
        ssize_t w = send(c->fd, head + c->sent, len - c->sent, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR;
        c->sent += (size_t)w;
        c->next_byte = now + 1.0;
        return true;
    }
    if (now >= c->next_byte) {
        /* An endless header value, one byte a second. */
        ssize_t w = send(c->fd, "X-a: b\r\n" + (c->sent++ % 3), 1, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        c->next_byte = now + 1.0;
    }
    return true;
}

static void write_stats(const char *path, size_t open_now, bool ready)
{
    if (!path)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return;
    fprintf(f, "open %zu connected %lu closed %lu failed %lu\n%s", open_now, n_connected,
            n_closed, n_failed, ready ? "ready\n" : "");
    if (fclose(f) == 0)
        rename(tmp, path);
}

int main(int argc, char **argv)
{
    long port = 0, count = 0, seconds = 60, rate = 2000;
    bool once = false;
    const char *stats = NULL, *source = NULL, *mname = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--once") == 0) {
            once = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "vg-flood: '%s' needs a value\n", a);
            return 1;
        }
        if (strcmp(a, "--port") == 0)
            port = arg_long(v, 1, 65535);
        else if (strcmp(a, "--count") == 0)
            count = arg_long(v, 1, 100000);
        else if (strcmp(a, "--seconds") == 0)
            seconds = arg_long(v, 1, 3600);
        else if (strcmp(a, "--rate") == 0)
            rate = arg_long(v, 1, 1000000);
        else if (strcmp(a, "--mode") == 0)
            mname = v;
        else if (strcmp(a, "--stats") == 0)
            stats = v;
        else if (strcmp(a, "--source") == 0)
            source = v;
        else {
            fprintf(stderr, "vg-flood: unknown option '%s'\n", a);
            return 1;
        }
        i++;
    }
    if (!port || !count || !mname) {
        fprintf(stderr, "usage: vg-flood --port PORT --count N --mode idle|slowloris "
                        "[--source ADDR] [--seconds S] [--rate R] [--once] [--stats FILE]\n");
        return 1;
    }
    if (strcmp(mname, "idle") == 0)
        mode = M_IDLE;
    else if (strcmp(mname, "slowloris") == 0)
        mode = M_SLOW;
    else {
        fprintf(stderr, "vg-flood: unknown mode '%s'\n", mname);
        return 1;
    }
    dst.sin_family = AF_INET;
    dst.sin_port = htons((uint16_t)port);
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (source) {
        src.sin_family = AF_INET;
        if (inet_pton(AF_INET, source, &src.sin_addr) != 1) {
            fprintf(stderr, "vg-flood: bad --source '%s'\n", source);
            return 1;
        }
        use_src = true;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)count + 64) {
        rl.rlim_cur = (rlim_t)count + 64 <= rl.rlim_max ? (rlim_t)count + 64 : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct conn *cs = calloc((size_t)count, sizeof(*cs));
    struct pollfd *pfd = calloc((size_t)count, sizeof(*pfd));
    if (!cs || !pfd) {
        fprintf(stderr, "vg-flood: out of memory\n");
        return 1;
    }
    for (long i = 0; i < count; i++)
        cs[i].fd = -1;
    double t0 = now_s(), end = t0 + (double)seconds, last_stats = 0, tokens = 0, last = t0;
    long opened = 0;
    bool ready = false;
    while (!stop && now_s() < end) {
        double now = now_s();
        /* The first COUNT connects go out at the rate, then any the server closed are opened
         * again at the same rate. */
        tokens += (now - last) * (double)rate;
        if (tokens > (double)rate / 10 + 1)
            tokens = (double)rate / 10 + 1;
        last = now;
        for (long i = 0; i < count && tokens >= 1; i++) {
            if (cs[i].fd >= 0 || (once && i < opened))
                continue;
            if (i >= opened)
                opened = i + 1;
            tokens -= 1;
            if (open_conn(&cs[i]) != 0)
                n_failed++;
        }
        size_t open_now = 0, pending = 0;
        for (long i = 0; i < count; i++) {
            struct conn *c = &cs[i];
            pfd[i].fd = c->fd;
            pfd[i].events = c->fd < 0 ? 0 : c->connected ? POLLIN : POLLOUT;
            pfd[i].revents = 0;
            if (c->fd >= 0) {
                open_now++;
                pending += !c->connected;
            }
        }
        if (!ready && opened >= count && pending == 0) {
            ready = true;
            write_stats(stats, open_now, ready);
        }
        poll(pfd, (nfds_t)count, 20);
        now = now_s();
        for (long i = 0; i < count; i++) {
            struct conn *c = &cs[i];
            if (c->fd < 0)
                continue;
            short re = pfd[i].revents;
            if (!c->connected) {
                if (!re)
                    continue;
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    n_failed++;
                    close_conn(c, false);
                    continue;
                }
                c->connected = true;
                n_connected++;
            }
            if (re & (POLLIN | POLLHUP | POLLERR)) {
                /* Whatever the server says (an error status, a timeout notice) is read and
                 * dropped; only the end of the stream or an error closes our side. */
                char buf[512];
                ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    close_conn(c, true);
                    continue;
                }
            }
            if (!feed(c, now))
                close_conn(c, true);
        }
        if (now - last_stats >= 0.2) {
            size_t o = 0;
            for (long i = 0; i < count; i++)
                o += cs[i].fd >= 0;
            write_stats(stats, o, ready);
            last_stats = now;
        }
    }
    size_t o = 0;
    for (long i = 0; i < count; i++) {
        o += cs[i].fd >= 0;
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    }
    write_stats(stats, o, ready);
    free(cs);
    free(pfd);
    return 0;
}
