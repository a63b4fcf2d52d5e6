/*
 * Whole-file reads relative to a directory fd (see file.h). procfs generates content per read,
 * so the loop reads until read() returns 0 rather than trusting st_size.
 */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int vg_file_open(int dirfd, const char *path)
{
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    return fd < 0 ? -errno : fd;
}

/* Read fd to its end into out; closes fd. */
static int vg_file_read_fd(int fd, struct vg_buf *out)
{
    vg_buf_reset(out);
    int rc = 0;
    for (;;) {
        if (out->len == out->max) {
            /* At the maximum: one more byte would prove the file is too long. */
            char c;
            ssize_t n = read(fd, &c, 1);
            if (n < 0 && errno == EINTR)
                continue;
            rc = n == 0 ? 0 : (n < 0 ? -errno : -E2BIG);
            break;
        }
        if (out->cap < out->len + 1 + 1024) {
            size_t want = out->len < 4096 ? 4096 : out->len;
            if (want > out->max - out->len)
                want = out->max - out->len;
            rc = vg_buf_reserve(out, want);
            if (rc)
                break;
        }
        size_t room = out->cap - out->len - 1;
        if (room > out->max - out->len)
            room = out->max - out->len;
        ssize_t n = read(fd, out->data + out->len, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        out->len += (size_t)n;
        out->data[out->len] = '\0';
    }
    close(fd);
    return rc;
}

int vg_file_read_at(int dirfd, const char *path, struct vg_buf *out)
{
    int fd = vg_file_open(dirfd, path);
    if (fd < 0)
        return fd;
    return vg_file_read_fd(fd, out);
}

int vg_file_read_regular(int dirfd, const char *path, struct vg_buf *out)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the type is
     * checked on the opened descriptor, so a file swapped after a stat() cannot slip in. */
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    return vg_file_read_fd(fd, out);
}

int vg_file_read_small(int dirfd, const char *path, char *buf, size_t n, size_t *len)
{
    int fd = vg_file_open(dirfd, path);
    if (fd < 0)
        return fd;
    size_t got = 0;
    int rc = 0;
    for (;;) {
        if (got == n - 1) {
            char c;
            ssize_t r = read(fd, &c, 1);
            if (r > 0)
                rc = -E2BIG;
            else if (r < 0)
                rc = -errno;
            break;
        }
        ssize_t r = read(fd, buf + got, n - 1 - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    if (len)
        *len = got;
    return rc;
}
