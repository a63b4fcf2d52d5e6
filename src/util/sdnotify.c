/*
 * The sd_notify protocol, the watchdog's period and $JOURNAL_STREAM (see sdnotify.h): small
 * enough to implement here rather than link libsystemd for a datagram and two getenv()s.
 */
#include "util/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/parse.h"

int vg_sd_notify(const char *state, struct vg_err *err)
{
    const char *path = secure_getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    /* An abstract name ('@' for the leading NUL) or an absolute path; nothing else is a
     * socket systemd gives (sd_notify(3) refuses the rest too). */
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
        return vg_err_set(err, -EINVAL, "NOTIFY_SOCKET '%s' is not a socket address", path);
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return vg_err_set(err, -errno, "cannot open a socket for NOTIFY_SOCKET: %s",
                          strerror(errno));
    size_t sl = strlen(state);
    ssize_t w = sendto(fd, state, sl, MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    int e = errno;
    close(fd);
    if (w < 0)
        return vg_err_set(err, -e, "cannot notify the service manager at '%s': %s", path,
                          strerror(e));
    if ((size_t)w != sl)
        return vg_err_set(err, -EMSGSIZE, "notification to '%s' cut short", path);
    return 1;
}

uint64_t vg_sd_watchdog_usec(void)
{
    const char *usec = secure_getenv("WATCHDOG_USEC");
    uint64_t v;
    if (!usec || vg_parse_u64(usec, &v) != 0 || v == 0)
        return 0;
    const char *pid = secure_getenv("WATCHDOG_PID");
    uint64_t p;
    if (pid && (vg_parse_u64(pid, &p) != 0 || p != (uint64_t)getpid()))
        return 0;
    return v;
}

void vg_sd_watchdog_init(struct vg_sd_watchdog *wd, uint64_t now_ms)
{
    uint64_t usec = vg_sd_watchdog_usec();
    /* half the period, as sd_watchdog_enabled(3) advises; at least 1 ms */
    wd->every_ms = usec ? (usec / 2000 ? usec / 2000 : 1) : 0;
    wd->next_ms = now_ms;
}

int vg_sd_watchdog_tick(struct vg_sd_watchdog *wd, uint64_t now_ms, struct vg_err *err)
{
    if (!wd->every_ms || now_ms < wd->next_ms)
        return 0;
    wd->next_ms = now_ms + wd->every_ms;
    return vg_sd_notify("WATCHDOG=1", err);
}

uint64_t vg_sd_watchdog_wait_ms(const struct vg_sd_watchdog *wd, uint64_t now_ms)
{
    if (!wd->every_ms)
        return UINT64_MAX;
    return now_ms >= wd->next_ms ? 0 : wd->next_ms - now_ms;
}

bool vg_sd_journal_stream(int fd)
{
    const char *js = getenv("JOURNAL_STREAM");
    if (!js || !*js)
        return false;
    const char *colon = strchr(js, ':');
    if (!colon)
        return false;
    uint64_t d, ino;
    if (vg_parse_u64n(js, (size_t)(colon - js), &d) != 0 || vg_parse_u64(colon + 1, &ino) != 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return false;
    return (uint64_t)st.st_dev == d && (uint64_t)st.st_ino == ino;
}
