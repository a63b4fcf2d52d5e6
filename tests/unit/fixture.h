/*
 * Hand-made snapshots for unit tests of the model, rules and renderers: builds the GPU list and
 * process table the way the NVML client and the /proc scanner would (heap-owned, so the real
 * release functions free them), then joins them with vg_snap_assemble().
 */
#ifndef VG_TEST_FIXTURE_H
#define VG_TEST_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "model/snapshot.h"

static inline char *fx_strdup(const char *s)
{
    char *p = s ? strdup(s) : NULL;
    if (s && !p)
        abort();
    return p;
}

static inline void *fx_grow(void *p, size_t n, size_t size)
{
    void *q = realloc(p, n * size);
    if (!q)
        abort();
    return q;
}

/* Append a GPU with everything known; returns it for further tweaks. */
static inline struct vg_gpu *fx_gpu(struct vg_gpu_list *l, const char *uuid, const char *name,
                                    unsigned minor, uint64_t total, uint64_t used,
                                    uint64_t reserved)
{
    l->gpus = fx_grow(l->gpus, l->ngpus + 1, sizeof(*l->gpus));
    struct vg_gpu *g = &l->gpus[l->ngpus];
    memset(g, 0, sizeof(*g));
    g->index = (unsigned)l->ngpus++;
    g->uuid = fx_strdup(uuid);
    g->name = fx_strdup(name);
    g->pci_bus_id = fx_strdup("00000000:17:00.0");
    g->minor = minor;
    g->mem_total = total;
    g->mem_used = used;
    g->mem_reserved = reserved;
    g->mem_free = total - used - reserved;
    g->util_gpu = 10;
    g->cc_major = 9;
    g->known = VG_GPU_K_NAME | VG_GPU_K_UUID | VG_GPU_K_MINOR | VG_GPU_K_PCI | VG_GPU_K_MEM |
               VG_GPU_K_RESERVED | VG_GPU_K_UTIL | VG_GPU_K_CC | VG_GPU_K_PROCS;
    return g;
}

static inline struct vg_gpu *fx_mig(struct vg_gpu *parent, const char *uuid, uint64_t total)
{
    parent->mig = fx_grow(parent->mig, parent->nmig + 1, sizeof(*parent->mig));
    struct vg_gpu *m = &parent->mig[parent->nmig];
    memset(m, 0, sizeof(*m));
    m->index = (unsigned)parent->nmig++;
    m->is_mig = true;
    m->uuid = fx_strdup(uuid);
    m->name = fx_strdup("MIG 1g.10gb");
    m->mem_total = total;
    m->known = VG_GPU_K_NAME | VG_GPU_K_UUID | VG_GPU_K_MEM | VG_GPU_K_PROCS;
    parent->mig_current = 1;
    parent->known |= VG_GPU_K_MIG_MODE;
    return m;
}

/* used == UINT64_MAX means "not available". Inserted in pid order, as the NVML client keeps
 * a process list (gpu.h). */
static inline void fx_gproc(struct vg_gpu *g, uint32_t pid, uint64_t used, unsigned types)
{
    g->procs = fx_grow(g->procs, g->nprocs + 1, sizeof(*g->procs));
    size_t at = g->nprocs;
    while (at > 0 && g->procs[at - 1].pid > pid)
        at--;
    memmove(&g->procs[at + 1], &g->procs[at], (g->nprocs - at) * sizeof(*g->procs));
    g->nprocs++;
    struct vg_gpu_proc *p = &g->procs[at];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->types = types;
    p->used_known = used != UINT64_MAX;
    p->used_bytes = p->used_known ? used : 0;
    p->bogus_pid = pid == 0 || pid == UINT32_MAX;
}

/* Append a process; keep calls in ascending pid order (the table is sorted). */
static inline struct vg_proc *fx_proc(struct vg_proc_table *t, pid_t pid, const char *comm,
                                      const char *cmdline, char state)
{
    t->procs = fx_grow(t->procs, t->n + 1, sizeof(*t->procs));
    struct vg_proc *p = &t->procs[t->n++];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->comm = fx_strdup(comm);
    p->cmdline = fx_strdup(cmdline);
    p->state = state;
    p->ppid = 1;
    p->uid = 1000;
    p->user = fx_strdup("alice");
    /* Descriptors count as read only once fx_fd() says what they hold (or a test sets
     * VG_PROC_K_FDS itself): a process whose descriptors were read and hold no node of a GPU
     * the driver lists it on is not the driver's process (a stale PID). */
    p->known = VG_PROC_K_STAT | VG_PROC_K_STATUS | VG_PROC_K_CMDLINE | VG_PROC_K_USER;
    t->n_scanned++;
    return p;
}

static inline void fx_fd(struct vg_proc *p, unsigned minor)
{
    p->known |= VG_PROC_K_FDS;
    p->dev_minors = fx_grow(p->dev_minors, p->ndev_minors + 1, sizeof(*p->dev_minors));
    p->dev_minors[p->ndev_minors++] = minor;
    p->dev_fd_count++;
}

/* What the snapshot measures of a process whose job may have ended: CPU time over a window
 * (cpu_ms of it used). */
static inline void fx_activity(struct vg_proc *p, unsigned window_ms, uint64_t cpu_ms)
{
    p->activity_known = true;
    p->activity_ms = window_ms;
    p->activity_cpu_ms = cpu_ms;
}

/* The driver's per-process utilisation sample for pid on g (the call answered for the GPU). */
static inline void fx_util(struct vg_gpu *g, uint32_t pid, unsigned pct)
{
    g->known |= VG_GPU_K_PROC_UTIL;
    for (size_t i = 0; i < g->nprocs; i++)
        if (g->procs[i].pid == pid) {
            g->procs[i].util_known = true;
            g->procs[i].sm_util = pct;
        }
}

/* Every health fact known and healthy on g (ECC on, no errors, nothing retired, remapped or
 * pending, no recovery action, clocks free): tests then set the one they mean. */
static inline struct vg_gpu_health *fx_health(struct vg_gpu *g)
{
    memset(&g->health, 0, sizeof g->health);
    g->health.known = VG_GH_K_ECC_MODE | VG_GH_K_ECC_VOL_CORR | VG_GH_K_ECC_VOL_UNCORR |
                      VG_GH_K_ECC_AGG_CORR | VG_GH_K_ECC_AGG_UNCORR | VG_GH_K_RETIRED_SBE |
                      VG_GH_K_RETIRED_DBE | VG_GH_K_RETIRED_PENDING | VG_GH_K_REMAP |
                      VG_GH_K_RECOVERY | VG_GH_K_CLOCKS;
    g->health.ecc_current = g->health.ecc_pending = true;
    return &g->health;
}

/* The NVIDIA GPUs on the PCI bus a snapshot says the host has (n addresses, bus 0x17 + i). */
static inline void fx_pci(struct vg_snapshot *s, size_t n)
{
    s->pci.known = true;
    s->pci.n = n;
    s->pci.devs = n ? fx_grow(NULL, n, sizeof(*s->pci.devs)) : NULL;
    for (size_t i = 0; i < n; i++)
        s->pci.devs[i] = (struct vg_pci_dev){0, 0x17 + (unsigned)i, 0, 0};
}

static inline struct vg_snapshot *fx_assemble(struct vg_gpu_list *l, struct vg_proc_table *t)
{
    struct vg_snapshot *s = vg_snap_new();
    if (!s)
        abort();
    s->proc_root = fx_strdup("/proc");
    s->dev_dir = fx_strdup("/dev");
    struct vg_err err = VG_ERR_INIT;
    if (vg_snap_assemble(s, l, true, t, &err) != 0)
        abort();
    return s;
}

#endif
