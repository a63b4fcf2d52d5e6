/*
 * The kernel log's Xids joined to the snapshot (snapshot.h, vg_snap_join_xids): each device the
 * log names is matched to the GPU at that PCI address (the log writes "0000:3b:00", NVML
 * "00000000:3B:00.0": compared as numbers, util/pci.h), and each Xid kept to the process it
 * names, when this procfs shows that process and it is the one the driver meant: a PID is
 * reused, so a process that started after the Xid, or whose name is not the one the driver
 * gave, is another one (kept apart as stale, never named as the Xid's).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/snapshot.h"
#include "util/array.h"
#include "util/pci.h"

/* Slack for the start time (clock ticks are 10 ms, the log's clock and the start time's may
 * drift apart by a little). */
#define VG_XID_START_SLACK_US 2000000ull

/* Whether p is the process an Xid of this time and name meant. */
static bool vg_xid_same_proc(const struct vg_proc *p, const struct vg_kmsg_xid *x)
{
    long tck = sysconf(_SC_CLK_TCK);
    if ((p->known & VG_PROC_K_STAT) && tck > 0) {
        uint64_t start_us = p->start_ticks * (1000000ull / (uint64_t)tck);
        if (start_us > x->ts_us + VG_XID_START_SLACK_US)
            return false;
    }
    /* The driver prints the task's comm (at most 15 bytes): compare that much. */
    if (x->name && p->comm) {
        size_t n = strnlen(x->name, 15), m = strnlen(p->comm, 15);
        if (n != m || memcmp(x->name, p->comm, n) != 0)
            return false;
    }
    return true;
}

int vg_snap_join_xids(struct vg_snapshot *snap, struct vg_err *err)
{
    free(snap->xid_devs);
    snap->xid_devs = NULL;
    snap->nxid_devs = 0;
    if (!snap->kmsg.ndevs)
        return 0;
    snap->xid_devs = calloc(snap->kmsg.ndevs, sizeof(*snap->xid_devs));
    if (!snap->xid_devs)
        return vg_err_set(err, -ENOMEM, "out of memory");
    snap->nxid_devs = snap->kmsg.ndevs;
    for (size_t i = 0; i < snap->kmsg.ndevs; i++) {
        const struct vg_kmsg_xid_dev *d = &snap->kmsg.devs[i];
        struct vg_snap_xid_dev *j = &snap->xid_devs[i];
        j->dev = d;
        j->gpu = VG_SNAP_NO_GPU;
        for (size_t g = 0; snap->driver_ok && g < snap->gpus.ngpus; g++) {
            const struct vg_gpu *gp = &snap->gpus.gpus[g];
            struct vg_pci_addr a;
            if (!(gp->known & VG_GPU_K_PCI) || !gp->pci_bus_id ||
                vg_pci_parse(gp->pci_bus_id, strlen(gp->pci_bus_id), &a) != 0)
                continue;
            if (vg_pci_same_device(&a, &d->pci)) {
                j->gpu = g;
                break;
            }
        }
        for (size_t k = 0; k < d->nxid; k++) {
            const struct vg_kmsg_xid *x = &d->xid[k];
            if (!x->pid_known)
                continue;
            const struct vg_proc *p = vg_proc_table_find(&snap->procs, x->pid);
            if (!p)
                continue;
            if (vg_xid_same_proc(p, x))
                j->proc[k] = p;
            else
                j->stale[k] = true;
        }
    }
    return 0;
}

const struct vg_snap_xid_dev *vg_snap_gpu_xids(const struct vg_snapshot *snap, size_t gpu)
{
    for (size_t i = 0; i < snap->nxid_devs; i++)
        if (snap->xid_devs[i].gpu == gpu)
            return &snap->xid_devs[i];
    return NULL;
}

int vg_snap_xid_pids(const struct vg_kmsg_log *log, pid_t **want, size_t *nwant)
{
    size_t extra = 0;
    for (size_t i = 0; i < log->ndevs; i++)
        for (size_t k = 0; k < log->devs[i].nxid; k++)
            extra += log->devs[i].xid[k].pid_known;
    if (!extra)
        return 0;
    size_t cap = *nwant;
    if (VG_ARRAY_GROW(*want, cap, *nwant + extra) != 0)
        return -ENOMEM;
    for (size_t i = 0; i < log->ndevs; i++)
        for (size_t k = 0; k < log->devs[i].nxid; k++)
            if (log->devs[i].xid[k].pid_known)
                (*want)[(*nwant)++] = log->devs[i].xid[k].pid;
    return 0;
}
