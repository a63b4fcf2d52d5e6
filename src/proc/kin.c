/*
 * Session kin: the live processes that hold nothing, of the sessions of holders whose job may
 * have ended (adopted, or a leader of theirs gone). The scan reads only holders, so without
 * this a session looks empty where a launcher that holds no GPU still runs: a worker's worker
 * whose own parent died then looks like what is left of an ended job, and a daemon's lone
 * shape cannot be told from a worker whose siblings hold nothing. Read only when such a
 * holder exists (not for one that leads its own session, as services and daemons do), so a host
 * whose holders are children of live parents pays nothing; with one, every scan (a watch or
 * serve sample too) reads one stat per process, and the command line of the few in those
 * sessions.
 */
#include "proc/internal.h"
#include "util/array.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Whether a holder's job may have ended, as far as its stat and parent say. One that leads its
 * own session (a service under systemd, a setsid daemon) shares it only with what it started,
 * which the census would not weigh: it asks for none. */
static bool vg_kin_wanted(const struct vg_proc *p)
{
    if (!(p->known & VG_PROC_K_STAT) || p->state == 'Z' || p->state == 'X' || p->sid == p->pid)
        return false;
    return p->ppid == 1 || !p->parent_alive || !p->pgid_alive || !p->sid_alive ||
           (p->parent_known && (p->parent_ns_init || p->parent_sid != p->sid));
}

/* The sessions to take a census of, sorted; *n 0 when there are none. */
static int vg_kin_sessions(const struct vg_proc_table *t, pid_t **sids, size_t *n)
{
    *sids = NULL;
    *n = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!vg_kin_wanted(&t->procs[i]))
            continue;
        if (!*sids && !(*sids = malloc(t->n * sizeof(**sids))))
            return -ENOMEM;
        (*sids)[(*n)++] = t->procs[i].sid;
    }
    if (*n > 1)
        qsort(*sids, *n, sizeof(**sids), vg_array_cmp_pid);
    return 0;
}

static int vg_kin_add(struct vg_proc_table *t, size_t *cap, const struct vg_proc *q)
{
    if (VG_ARRAY_GROW(t->kin, *cap, t->nkin + 1))
        return -ENOMEM;
    struct vg_proc_kin *k = &t->kin[t->nkin++];
    *k = (struct vg_proc_kin){.pid = q->pid,
                              .ppid = q->ppid,
                              .pgid = q->pgid,
                              .sid = q->sid,
                              .start_ticks = q->start_ticks,
                              .state = q->state,
                              .cmdline = q->cmdline};
    return 0;
}

/* One process: kept when it is of a wanted session and not already in the table. A process
 * that vanished or cannot be read is simply not kin: the census says who is there, and one
 * missing makes a session look emptier, which only the weight of "alone" reads. */
static int vg_kin_one(struct vg_proc_ctx *c, struct vg_proc_table *t, const pid_t *sids,
                      size_t nsids, pid_t pid, size_t *cap)
{
    if (vg_proc_table_find(t, pid))
        return 0;
    char path[32];
    vg_proc_pid_str(pid, path);
    size_t n = strlen(path);
    memcpy(path + n, "/stat", 6);
    struct vg_proc q = {0};
    q.pid = pid;
    int rc = vg_proc_ctx_read(c, c->root_fd, path, VG_PROC_STAT_MAX);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0 || vg_proc_parse_stat(vg_buf_str(&c->file), c->file.len, &q) != 0 ||
        !bsearch(&q.sid, sids, nsids, sizeof(*sids), vg_array_cmp_pid)) {
        vg_proc_release(&q);
        return 0;
    }
    memcpy(path + n, "/cmdline", 9);
    if (vg_proc_ctx_read(c, c->root_fd, path, VG_PROC_CMDLINE_MAX) == 0 &&
        vg_proc_parse_cmdline(vg_buf_str(&c->file), c->file.len, &q) == -ENOMEM) {
        vg_proc_release(&q);
        return -ENOMEM;
    }
    rc = vg_kin_add(t, cap, &q);
    if (rc == 0)
        q.cmdline = NULL; /* the kin entry owns it now */
    vg_proc_release(&q);
    return rc;
}

int vg_proc_read_kin(struct vg_proc_ctx *c, const pid_t *pids, size_t npids,
                     struct vg_proc_table *t)
{
    pid_t *sids = NULL;
    size_t nsids = 0, cap = 0;
    int rc = vg_kin_sessions(t, &sids, &nsids);
    for (size_t i = 0; rc == 0 && nsids && i < npids; i++)
        rc = vg_kin_one(c, t, sids, nsids, pids[i], &cap);
    free(sids);
    return rc;
}
