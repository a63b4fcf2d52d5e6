/*
 * Reading whole small files relative to a directory fd, the way /proc must be read: openat with
 * O_CLOEXEC, read() until EOF (procfs files report size 0 and may be longer than one page), no
 * stdio. The caller owns the struct vg_buf passed in; its max bounds how much is read, and a file
 * longer than that is an error (-E2BIG), never silently cut.
 */
#ifndef VG_UTIL_FILE_H
#define VG_UTIL_FILE_H

#include <stddef.h>

#include "util/buf.h"

/* Replace the contents of out with the file's bytes. Returns 0 or a negative errno
 * (-ENOENT/-ESRCH for a vanished process, -EACCES/-EPERM when not allowed, -E2BIG when longer
 * than out->max). */
int vg_file_read_at(int dirfd, const char *path, struct vg_buf *out);

/* Like vg_file_read_at, for files a person names (configuration): never blocks in open() on a
 * FIFO or a device, and reads only regular files; -EINVAL when path is anything else. */
int vg_file_read_regular(int dirfd, const char *path, struct vg_buf *out);

/* Read into a caller buffer of n bytes (n >= 1), NUL-terminated; *len gets the byte count.
 * Returns -E2BIG when the file does not fit, which lets hot paths avoid allocation. */
int vg_file_read_small(int dirfd, const char *path, char *buf, size_t n, size_t *len);

#endif
