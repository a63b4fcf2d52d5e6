/*
 * /proc/PID/cmdline: the argument vector as NUL-separated strings, shown joined by single
 * spaces. The final NUL is optional (a process may rewrite its argv, setproctitle style) and
 * trailing NUL padding is dropped; an empty file (kernel threads, zombies) gives "" rather
 * than unknown. Bytes are kept as they are: escaping for a terminal is the renderer's job.
 * Longer than VG_PROC_CMDLINE_MAX is -E2BIG and the field stays unknown, never cut.
 */
#include "proc/internal.h"

#include <errno.h>
#include <stdlib.h>

int vg_proc_parse_cmdline(const char *buf, size_t len, struct vg_proc *p)
{
    if (!buf && len)
        return -EINVAL;
    if (len > VG_PROC_CMDLINE_MAX)
        return -E2BIG;
    while (len > 0 && buf[len - 1] == '\0')
        len--;
    char *s = vg_proc_strndup(buf ? buf : "", len);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\0')
            s[i] = ' ';
    free(p->cmdline);
    p->cmdline = s;
    p->known |= VG_PROC_K_CMDLINE;
    return 0;
}
