/*
 * pidfd primitives and our own place in the process tree (see signal.h). glibc 2.36 has
 * wrappers, older ones do not, so the system calls are made directly.
 */
#include "proc/signal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proc/internal.h"
#include "proc/proc.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/parse.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* Deepest process tree we walk; real ones are a few dozen levels at most. */
#define VG_ANCESTORS_MAX 4096

int vg_proc_pidfd_open(pid_t pid, int *fd)
{
    if (pid <= 0)
        return -ESRCH;
    long r = syscall(SYS_pidfd_open, pid, 0);
    if (r < 0)
        return errno == EINVAL ? -ESRCH : -errno;
    *fd = (int)r;
    return 0;
}

int vg_proc_pidfd_signal(int fd, int sig)
{
    if (syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) < 0)
        return -errno;
    return 0;
}

int vg_proc_pidfd_exited(int fd, unsigned timeout_ms)
{
    unsigned long long deadline = vg_clock_ms() + timeout_ms;
    for (;;) {
        unsigned long long now = vg_clock_ms();
        int wait = now >= deadline ? 0 : (int)(deadline - now);
        struct pollfd pfd = {fd, POLLIN, 0};
        int r = poll(&pfd, 1, wait);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r > 0)
            return (pfd.revents & (POLLIN | POLLHUP)) ? 1 : -EIO;
        if (vg_clock_ms() >= deadline)
            return 0;
    }
}

int vg_proc_self_pid(int proc_root_fd, pid_t *pid)
{
    char link[32];
    ssize_t n = readlinkat(proc_root_fd, "self", link, sizeof(link) - 1);
    if (n <= 0)
        return n < 0 ? -errno : -ENOENT;
    link[n] = '\0';
    int64_t v;
    /* A procfs of a PID namespace we are not in shows no number for us (or "0"). */
    if (vg_parse_i64(link, 1, INT_MAX, &v) != 0)
        return -ENOENT;
    *pid = (pid_t)v;
    return 0;
}

static int vg_stat_ppid(int proc_root_fd, pid_t pid, pid_t *ppid)
{
    char path[32], buf[1024];
    size_t len;
    vg_proc_pid_str(pid, path);
    size_t off = strlen(path);
    memcpy(path + off, "/stat", sizeof("/stat"));
    int rc = vg_file_read_small(proc_root_fd, path, buf, sizeof(buf), &len);
    if (rc)
        return rc;
    struct vg_proc p;
    memset(&p, 0, sizeof(p));
    rc = vg_proc_parse_stat(buf, len, &p);
    *ppid = p.ppid;
    vg_proc_release(&p);
    return rc;
}

int vg_proc_ancestors(int proc_root_fd, pid_t pid, pid_t **out, size_t *n, struct vg_err *err)
{
    pid_t *v = NULL;
    size_t len = 0, cap = 0;
    pid_t cur = pid;
    while (cur > 1 && len < VG_ANCESTORS_MAX) {
        pid_t ppid;
        if (vg_stat_ppid(proc_root_fd, cur, &ppid) != 0 || ppid <= 0)
            break;
        if (VG_ARRAY_GROW(v, cap, len + 1)) {
            free(v);
            return vg_err_set(err, -ENOMEM, "out of memory listing our ancestors");
        }
        v[len++] = ppid;
        cur = ppid;
    }
    *out = v;
    *n = len;
    return 0;
}
