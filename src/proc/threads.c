/*
 * /proc/PID/task/TID/stat: the state of every thread. A process whose main thread is a zombie
 * can still hold GPU memory through a live thread, and a thread in D state inside the driver
 * is why some memory cannot be freed by any signal; both need per-thread states, which the
 * process's own stat does not give.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util/file.h"

int vg_proc_read_threads(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    int td = openat(pid_fd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (td < 0)
        return -errno;
    unsigned n = 0, d = 0, live = 0;
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, td, c->dents, c->dents_cap);
    const char *name;
    int rc;
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0) {
        pid_t tid;
        if (!vg_proc_name_pid(name, &tid))
            continue;
        char path[32];
        char stat[512];
        size_t len;
        vg_proc_pid_str(tid, path);
        size_t pl = strlen(path);
        memcpy(path + pl, "/stat", 6);
        const char *buf = stat;
        int r = vg_file_read_small(td, path, stat, sizeof(stat), &len);
        if (r == -E2BIG) {
            r = vg_proc_ctx_read(c, td, path, VG_PROC_STAT_MAX);
            buf = c->file.data;
            len = c->file.len;
        }
        if (vg_proc_err_gone(r) || (r == 0 && len == 0))
            continue; /* the thread exited */
        if (r == -ENOMEM) {
            rc = r;
            break;
        }
        char st;
        if (r < 0 || vg_proc_parse_stat_state(buf, len, &st) < 0) {
            rc = r < 0 ? r : -EINVAL;
            break;
        }
        n++;
        if (st == 'D')
            d++;
        if (st != 'Z' && st != 'X' && st != 'x')
            live++;
    }
    close(td);
    if (rc < 0)
        return rc;
    p->nthreads = n;
    p->threads_d = d;
    p->threads_live = live;
    p->known |= VG_PROC_K_THREADS;
    return 0;
}
