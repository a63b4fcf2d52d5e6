/*
 * Who listens on a TCP port: the socket's inode from the kernel's table (net/tcp and
 * net/tcp6 under the procfs root: the network namespace of the reader), then the process
 * that holds it (a descriptor in PID/fd whose link reads "socket:[INODE]"). For `serve`, so
 * that "address already in use" names the other exporter instead of leaving the admin to run
 * ss -ltnp. Best effort: another user's fd directory is only readable with privileges, and
 * a socket whose holder cannot be seen is reported as such, never guessed.
 */
#include "proc/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

#define VG_TCP_LISTEN 0x0A
/* /proc/net/tcp of a busy host is a few MiB at most (150 bytes a socket). */
#define VG_NET_TCP_MAX ((size_t)256 << 20)

/* One whitespace-separated field of a line: its start and length; false past the end. */
static bool vg_sock_field(const char **p, const char *end, const char **f, size_t *n)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t')
        e++;
    *p = e;
    *f = s;
    *n = (size_t)(e - s);
    return e > s;
}

static bool vg_sock_hex(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 16)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = vg_parse_hex_digit(c);
        if (d < 0)
            return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

int vg_proc_parse_tcp_listen(const char *buf, size_t len, uint16_t port, uint64_t *inodes,
                             size_t cap, size_t *n)
{
    *n = 0;
    const char *p = buf, *end = buf + len;
    bool header = true;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *q = p;
        p = nl ? nl + 1 : end;
        if (header) { /* "  sl  local_address rem_address   st ..." */
            header = false;
            continue;
        }
        const char *f[10];
        size_t fn[10];
        size_t i = 0;
        for (; i < 10 && vg_sock_field(&q, le, &f[i], &fn[i]); i++)
            ;
        if (i < 10)
            continue; /* not a socket line */
        /* local_address is ADDR:PORT in hex; st is the state; the tenth field the inode */
        const char *colon = memchr(f[1], ':', fn[1]);
        uint64_t lport, st, ino;
        if (!colon || !vg_sock_hex(colon + 1, (size_t)(f[1] + fn[1] - colon - 1), &lport) ||
            !vg_sock_hex(f[3], fn[3], &st) || vg_parse_u64n(f[9], fn[9], &ino) != 0)
            continue;
        if (lport != port || st != VG_TCP_LISTEN || ino == 0)
            continue;
        if (*n == cap)
            return -E2BIG;
        inodes[(*n)++] = ino;
    }
    return 0;
}

/* Does any descriptor of the process (its fd directory open as dfd) hold one of the inodes? */
static bool vg_sock_held(int dfd, const uint64_t *inodes, size_t n)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return false;
    }
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        char link[64];
        ssize_t r = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        if (r <= 9 || memcmp(link, "socket:[", 8) != 0 || link[r - 1] != ']')
            continue;
        uint64_t ino;
        if (vg_parse_u64n(link + 8, (size_t)r - 9, &ino) != 0)
            continue;
        for (size_t i = 0; i < n && !found; i++)
            found = inodes[i] == ino;
    }
    closedir(d);
    return found;
}

int vg_proc_port_listener(const char *proc_root, uint16_t port, pid_t *pid, char **comm,
                          struct vg_err *err)
{
    *pid = 0;
    *comm = NULL;
    if (!proc_root)
        proc_root = "/proc";
    int root = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return vg_err_set(err, -errno, "cannot open '%s': %s", proc_root, strerror(errno));
    uint64_t inodes[16];
    size_t n = 0;
    int rc = 0;
    struct vg_buf b;
    vg_buf_init(&b, VG_NET_TCP_MAX);
    static const char *const tables[] = {"net/tcp", "net/tcp6"};
    for (size_t t = 0; t < 2; t++) {
        size_t got = 0;
        if (vg_file_read_at(root, tables[t], &b) != 0)
            continue; /* no IPv6, say */
        if (vg_proc_parse_tcp_listen(b.data ? b.data : "", b.len, port, inodes + n,
                                     sizeof(inodes) / sizeof(inodes[0]) - n, &got) != 0) {
            n = sizeof(inodes) / sizeof(inodes[0]); /* enough to look for */
            break;
        }
        n += got;
    }
    vg_buf_release(&b);
    if (n == 0)
        goto out; /* nobody listens there that this namespace shows */
    rc = 1;       /* a listener, whether or not its process is found */
    DIR *d = fdopendir(dup(root));
    if (!d)
        goto out;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t p;
        if (vg_parse_u64(e->d_name, &p) != 0 || p == 0 || p > INT32_MAX)
            continue;
        char path[32]; /* "PID/comm": a pid has at most 10 digits */
        snprintf(path, sizeof(path), "%llu/fd", (unsigned long long)p);
        int fdd = openat(root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fdd < 0)
            continue; /* gone, or not ours to read */
        if (!vg_sock_held(fdd, inodes, n))
            continue;
        *pid = (pid_t)p;
        char name[64];
        size_t len = 0;
        snprintf(path, sizeof(path), "%llu/comm", (unsigned long long)p);
        if (vg_file_read_small(root, path, name, sizeof(name), &len) == 0) {
            while (len > 0 && name[len - 1] == '\n')
                name[--len] = '\0';
            *comm = strdup(name);
        }
        break;
    }
    closedir(d);
out:
    close(root);
    return rc;
}
