/*
 * The scan's result: a pid-sorted array of struct vg_proc that owns every string and array its
 * entries point to. Lookups are binary searches, since the snapshot joins each NVML process
 * with its /proc entry.
 */
#include "proc/proc.h"

#include <stdlib.h>
#include <string.h>

#include "util/array.h"

void vg_proc_release(struct vg_proc *p)
{
    if (!p)
        return;
    free(p->comm);
    free(p->nspid);
    free(p->user);
    free(p->cmdline);
    free(p->exe);
    for (int v = 0; v < VG_ENV_COUNT; v++)
        free(p->env[v]);
    free(p->cgroup);
    free(p->container_id);
    free(p->pod_uid);
    free(p->dev_minors);
    free(p->dev_minors_by);
    free(p->path_minors);
    for (size_t i = 0; i < p->ndev_paths; i++)
        free(p->dev_paths[i]);
    free(p->dev_paths);
    memset(p, 0, sizeof(*p));
}

void vg_proc_table_init(struct vg_proc_table *t)
{
    memset(t, 0, sizeof(*t));
}

void vg_proc_table_release(struct vg_proc_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        vg_proc_release(&t->procs[i]);
    free(t->procs);
    for (size_t i = 0; i < t->nunread; i++) {
        free(t->unread[i].user);
        free(t->unread[i].comm);
    }
    free(t->unread);
    for (size_t i = 0; i < t->nkin; i++)
        free(t->kin[i].cmdline);
    free(t->kin);
    free(t->scan_note);
    memset(t, 0, sizeof(*t));
}

const struct vg_proc *vg_proc_table_find(const struct vg_proc_table *t, pid_t pid)
{
    if (!t)
        return NULL;
    size_t i = vg_array_lower_bound(&pid, t->procs, t->n, sizeof(*t->procs), vg_array_cmp_pid);
    return i < t->n && t->procs[i].pid == pid ? &t->procs[i] : NULL;
}
