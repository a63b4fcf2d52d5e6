/*
 * Building the snapshot (see snapshot.h): driver first, under a deadline, so that the PIDs it
 * reports can be read from /proc in the same pass as the device-node holders; then the join.
 *
 * Nothing here is quadratic in the number of GPUs, holdings or processes, whatever the driver
 * or /proc report: lookups go through sorted indexes (by minor number, by (GPU, PID)) and
 * binary search, and sums saturate.
 */
#include "model/snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "gpu/collect.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/sat.h"

struct vg_snapshot *vg_snap_new(void)
{
    struct vg_snapshot *snap = calloc(1, sizeof(*snap));
    if (!snap)
        return NULL;
    vg_gpu_list_init(&snap->gpus);
    vg_proc_table_init(&snap->procs);
    clock_gettime(CLOCK_REALTIME, &snap->taken_at);
    return snap;
}

void vg_snap_free(struct vg_snapshot *snap)
{
    if (!snap)
        return;
    free(snap->proc_root);
    free(snap->dev_dir);
    free(snap->replay);
    free(snap->driver_error);
    vg_gpu_list_release(&snap->gpus);
    free(snap->per_gpu);
    vg_proc_table_release(&snap->procs);
    vg_proc_pci_release(&snap->pci);
    free(snap->holdings);
    vg_kmsg_log_release(&snap->kmsg);
    free(snap->xid_devs);
    free(snap);
}

/* Growable holdings array used during assembly. */
struct vg_hold_vec {
    struct vg_holding *v;
    size_t n, cap;
};

static struct vg_holding *vg_hold_push(struct vg_hold_vec *hv)
{
    struct vg_holding *h = VG_ARRAY_PUSH(hv->v, hv->n, hv->cap);
    if (!h)
        return NULL;
    h->mig = -1;
    return h;
}

static int vg_hold_add_nvml(struct vg_hold_vec *hv, size_t gi, int mig, const struct vg_gpu *g,
                            const struct vg_gpu_proc *p)
{
    struct vg_holding *h = vg_hold_push(hv);
    if (!h)
        return -ENOMEM;
    h->gpu = gi;
    h->mig = mig;
    h->minor = g->minor;
    h->minor_known = (g->known & VG_GPU_K_MINOR) != 0;
    h->pid = (pid_t)p->pid;
    h->seen = VG_SEEN_NVML;
    h->types = p->types;
    h->used_known = p->used_known;
    h->used_bytes = p->used_bytes;
    h->bogus_pid = p->bogus_pid;
    return 0;
}

/* NVML's lists. On a MIG-enabled GPU the MIG devices' own lists are authoritative (they carry
 * per-instance memory); the parent's list only adds PIDs no MIG device reported (looked up in
 * the MIG devices' PIDs, sorted). */
static int vg_snap_join_nvml(struct vg_hold_vec *hv, const struct vg_gpu_list *gpus)
{
    pid_t *mig_pids = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t gi = 0; gi < gpus->ngpus && !rc; gi++) {
        const struct vg_gpu *g = &gpus->gpus[gi];
        size_t nmig_pids = 0;
        for (size_t m = 0; m < g->nmig && !rc; m++) {
            const struct vg_gpu *mg = &g->mig[m];
            for (size_t k = 0; k < mg->nprocs && !rc; k++) {
                if ((rc = VG_ARRAY_GROW(mig_pids, cap, nmig_pids + 1)) != 0)
                    break;
                mig_pids[nmig_pids++] = (pid_t)mg->procs[k].pid;
                rc = vg_hold_add_nvml(hv, gi, (int)m, g, &mg->procs[k]);
            }
        }
        if (nmig_pids > 1)
            qsort(mig_pids, nmig_pids, sizeof(*mig_pids), vg_array_cmp_pid);
        for (size_t k = 0; k < g->nprocs && !rc; k++) {
            const struct vg_gpu_proc *p = &g->procs[k];
            pid_t pid = (pid_t)p->pid;
            if (nmig_pids && bsearch(&pid, mig_pids, nmig_pids, sizeof(pid), vg_array_cmp_pid))
                continue;
            rc = vg_hold_add_nvml(hv, gi, -1, g, p);
        }
    }
    free(mig_pids);
    return rc;
}

/* GPUs by minor number, for the device-node join: (minor, GPU) pairs sorted by minor, the
 * first GPU listed winning when a driver gives two the same minor (as vg_gpu_list_by_minor). */
struct vg_minor_ix {
    unsigned minor;
    size_t gpu;
};

static int vg_cmp_minor_ix(const void *a, const void *b)
{
    const struct vg_minor_ix *x = a, *y = b;
    if (x->minor != y->minor)
        return x->minor < y->minor ? -1 : 1;
    return x->gpu < y->gpu ? -1 : x->gpu > y->gpu;
}

static size_t vg_minor_ix_find(const struct vg_minor_ix *ix, size_t n, unsigned minor)
{
    const struct vg_minor_ix key = {.minor = minor, .gpu = 0}; /* the first of that minor */
    size_t lo = vg_array_lower_bound(&key, ix, n, sizeof(*ix), vg_cmp_minor_ix);
    return lo < n && ix[lo].minor == minor ? ix[lo].gpu : VG_SNAP_NO_GPU;
}

/* The NVML holdings by (GPU, PID): positions into the holdings vector. */
struct vg_hold_ix {
    size_t gpu;
    pid_t pid;
    size_t pos;
};

static int vg_cmp_hold_ix(const void *a, const void *b)
{
    const struct vg_hold_ix *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* How p holds its k-th GPU minor, as VG_SEEN_* bits (a table made without the how: by fd). */
static unsigned vg_snap_seen_by(const struct vg_proc *p, size_t k)
{
    unsigned by = p->dev_minors_by ? p->dev_minors_by[k] : VG_PROC_BY_FD;
    return ((by & VG_PROC_BY_FD) ? VG_SEEN_FD : 0) | ((by & VG_PROC_BY_MAP) ? VG_SEEN_MAP : 0);
}

/* Device-node holders: mark what NVML already listed, add the rest as node-only (by descriptor,
 * mapping or both). Each lookup is a
 * binary search: a host where many processes hold nodes and the driver lists many PIDs costs
 * (holdings + descriptors) x log, never their product. */
static int vg_snap_join_fds(struct vg_hold_vec *hv, const struct vg_gpu_list *gpus,
                            const struct vg_proc_table *procs)
{
    size_t nnvml = hv->n, nminor = 0;
    struct vg_minor_ix *mix = gpus->ngpus ? calloc(gpus->ngpus, sizeof(*mix)) : NULL;
    struct vg_hold_ix *hix = nnvml ? calloc(nnvml, sizeof(*hix)) : NULL;
    if ((gpus->ngpus && !mix) || (nnvml && !hix)) {
        free(mix);
        free(hix);
        return -ENOMEM;
    }
    for (size_t gi = 0; gi < gpus->ngpus; gi++)
        if (gpus->gpus[gi].known & VG_GPU_K_MINOR)
            mix[nminor++] = (struct vg_minor_ix){gpus->gpus[gi].minor, gi};
    if (nminor > 1)
        qsort(mix, nminor, sizeof(*mix), vg_cmp_minor_ix);
    for (size_t j = 0; j < nnvml; j++)
        hix[j] = (struct vg_hold_ix){hv->v[j].gpu, hv->v[j].pid, j};
    if (nnvml > 1)
        qsort(hix, nnvml, sizeof(*hix), vg_cmp_hold_ix);

    int rc = 0;
    for (size_t i = 0; i < procs->n && !rc; i++) {
        const struct vg_proc *p = &procs->procs[i];
        for (size_t k = 0; k < p->ndev_minors && !rc; k++) {
            unsigned minor = p->dev_minors[k];
            unsigned seen = vg_snap_seen_by(p, k);
            size_t gi = vg_minor_ix_find(mix, nminor, minor);
            bool marked = false;
            if (gi != VG_SNAP_NO_GPU) {
                /* the first index entry for (gi, pid), then every one after it */
                struct vg_hold_ix key = {gi, p->pid, 0};
                size_t lo = vg_array_lower_bound(&key, hix, nnvml, sizeof(*hix), vg_cmp_hold_ix);
                for (; lo < nnvml && hix[lo].gpu == gi && hix[lo].pid == p->pid; lo++) {
                    hv->v[hix[lo].pos].seen |= seen;
                    marked = true;
                }
            }
            if (marked)
                continue;
            struct vg_holding *h = vg_hold_push(hv);
            if (!h) {
                rc = -ENOMEM;
                break;
            }
            h->gpu = gi;
            h->minor = minor;
            h->minor_known = true;
            h->pid = p->pid;
            h->seen = seen;
        }
    }
    free(mix);
    free(hix);
    return rc;
}

/*
 * Whether the driver's entry h names a process other than the one this procfs shows under its
 * PID. A process with a context on a GPU holds that GPU's device node open (and the control
 * node) for as long as the context lives, so one whose descriptors were read and show no node
 * of the GPU is not the process the driver means: the driver keeps a dead process's PID listed
 * for a while, and PIDs are reused. A zombie has closed its descriptors and is its own case
 * (zombie-holder); unread descriptors prove nothing either way.
 */
static bool vg_snap_stale(const struct vg_gpu_list *gpus, const struct vg_holding *h)
{
    const struct vg_proc *p = h->proc;
    if (!(h->seen & VG_SEEN_NVML) || (h->seen & VG_SEEN_NODE) || !(p->known & VG_PROC_K_FDS) ||
        !(p->known & VG_PROC_K_STAT) || p->state == 'Z' || p->state == 'X')
        return false;
    const struct vg_gpu *g = h->gpu < gpus->ngpus ? &gpus->gpus[h->gpu] : NULL;
    if (g && (g->known & VG_GPU_K_MINOR)) {
        for (size_t k = 0; k < p->ndev_minors; k++)
            if (p->dev_minors[k] == g->minor)
                return false;
        return true;
    }
    /* which node is the GPU's is unknown: only a process holding no NVIDIA node at all is
     * surely not the driver's */
    return p->dev_fd_count == 0 && p->dev_map_count == 0 && !p->has_ctl && !p->has_uvm;
}

static int vg_hold_cmp(const void *a, const void *b)
{
    const struct vg_holding *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    if (x->gpu == VG_SNAP_NO_GPU && x->minor != y->minor)
        return x->minor < y->minor ? -1 : 1;
    if (x->mig != y->mig)
        return x->mig < y->mig ? -1 : 1;
    /* Compare as unsigned so bogus PIDs (UINT32_MAX reads as -1) sort last. */
    if ((uint32_t)x->pid != (uint32_t)y->pid)
        return (uint32_t)x->pid < (uint32_t)y->pid ? -1 : 1;
    return 0;
}

static void vg_snap_sum(struct vg_snapshot *snap)
{
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->gpu == VG_SNAP_NO_GPU)
            continue;
        struct vg_snap_gpu *s = &snap->per_gpu[h->gpu];
        s->nholders++;
        /* the driver's figures are not trusted to be sane: saturate, never wrap */
        if (h->used_known)
            s->held_bytes = vg_sat_add(s->held_bytes, h->used_bytes);
        else if (h->seen & VG_SEEN_NVML)
            s->nholders_unknown++;
    }
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++) {
        const struct vg_gpu *g = &snap->gpus.gpus[gi];
        struct vg_snap_gpu *s = &snap->per_gpu[gi];
        /* Without the process lists nothing can be attributed, so nothing can be called
         * unexplained either. */
        if (!(g->known & VG_GPU_K_MEM) || !(g->known & VG_GPU_K_PROCS))
            continue;
        s->unexplained_known = true;
        s->unexplained_bytes = g->mem_used > s->held_bytes ? g->mem_used - s->held_bytes : 0;
        s->unexplained_has_reserved = !(g->known & VG_GPU_K_RESERVED);
        s->unexplained_upper_bound = s->nholders_unknown > 0;
    }
}

int vg_snap_assemble(struct vg_snapshot *snap, struct vg_gpu_list *gpus, bool driver_ok,
                     struct vg_proc_table *procs, struct vg_err *err)
{
    snap->gpus = *gpus;
    vg_gpu_list_init(gpus);
    snap->procs = *procs;
    vg_proc_table_init(procs);
    snap->driver_ok = driver_ok;

    if (snap->gpus.ngpus) {
        snap->per_gpu = calloc(snap->gpus.ngpus, sizeof(*snap->per_gpu));
        if (!snap->per_gpu)
            return vg_err_set(err, -ENOMEM, "out of memory");
    }

    struct vg_hold_vec hv = {0};
    int rc = vg_snap_join_nvml(&hv, &snap->gpus);
    if (!rc)
        rc = vg_snap_join_fds(&hv, &snap->gpus, &snap->procs);
    if (rc) {
        free(hv.v);
        return vg_err_set(err, rc, "out of memory");
    }
    for (size_t i = 0; i < hv.n; i++) {
        struct vg_holding *h = &hv.v[i];
        h->proc = h->bogus_pid ? NULL : vg_proc_table_find(&snap->procs, h->pid);
        if (h->proc && vg_snap_stale(&snap->gpus, h)) {
            h->stale = true;
            h->stale_proc = h->proc;
            h->proc = NULL;
        }
    }
    if (hv.n)
        qsort(hv.v, hv.n, sizeof(*hv.v), vg_hold_cmp);
    snap->holdings = hv.v;
    snap->nholdings = hv.n;
    vg_snap_sum(snap);
    return 0;
}

int vg_snap_nvml_pids(const struct vg_gpu_list *gpus, pid_t **out, size_t *n)
{
    size_t cap = 0;
    for (size_t gi = 0; gi < gpus->ngpus; gi++) {
        cap += gpus->gpus[gi].nprocs;
        for (size_t m = 0; m < gpus->gpus[gi].nmig; m++)
            cap += gpus->gpus[gi].mig[m].nprocs;
    }
    *out = NULL;
    *n = 0;
    if (!cap)
        return 0;
    pid_t *v = malloc(cap * sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    for (size_t gi = 0; gi < gpus->ngpus; gi++) {
        const struct vg_gpu *g = &gpus->gpus[gi];
        for (size_t j = 0; j < g->nprocs; j++)
            if (!g->procs[j].bogus_pid)
                v[k++] = (pid_t)g->procs[j].pid;
        for (size_t m = 0; m < g->nmig; m++)
            for (size_t j = 0; j < g->mig[m].nprocs; j++)
                if (!g->mig[m].procs[j].bogus_pid)
                    v[k++] = (pid_t)g->mig[m].procs[j].pid;
    }
    *out = v;
    *n = k;
    return 0;
}

int vg_snap_begin(const char *proc_root, const char *dev_dir, struct vg_snapshot **snap,
                  struct vg_snap_parts *parts, struct vg_err *err)
{
    vg_gpu_list_init(&parts->gpus);
    vg_proc_table_init(&parts->procs);
    parts->want = NULL;
    parts->nwant = 0;
    struct vg_snapshot *s = vg_snap_new();
    if (s && (s->proc_root = strdup(proc_root)) && (s->dev_dir = strdup(dev_dir))) {
        *snap = s;
        return 0;
    }
    vg_snap_free(s);
    *snap = NULL;
    return vg_err_set(err, -ENOMEM, "out of memory");
}

void vg_snap_parts_release(struct vg_snap_parts *parts)
{
    free(parts->want);
    parts->want = NULL;
    parts->nwant = 0;
    vg_gpu_list_release(&parts->gpus);
    vg_proc_table_release(&parts->procs);
}

int vg_snap_build(const struct vg_snap_opts *opts, struct vg_snapshot **out, struct vg_err *err)
{
    *out = NULL;
    const char *proc_root = opts->proc_root ? opts->proc_root : "/proc";
    const char *dev_dir = opts->dev_dir ? opts->dev_dir : "/dev";
    struct vg_snapshot *snap;
    struct vg_snap_parts pt;
    int rc = vg_snap_begin(proc_root, dev_dir, &snap, &pt, err);
    if (rc)
        return rc;

    unsigned parts = opts->parts ? opts->parts : VG_SNAP_PART_ALL;
    bool driver_ok = false;
    if (!(parts & VG_SNAP_PART_GPUS)) {
        if (!(snap->driver_error = strdup("the driver was not asked"))) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
    } else if (!opts->skip_nvml) {
        struct vg_err nerr = VG_ERR_INIT;
        unsigned timeout = opts->nvml_timeout_ms ? opts->nvml_timeout_ms : VG_SNAP_NVML_TIMEOUT_MS;
        rc = vg_gpu_collect(opts->nvml_path, timeout, &pt.gpus, &nerr);
        if (rc == -ENOMEM) {
            vg_err_set(err, rc, "%s", vg_err_msg(&nerr));
            vg_err_release(&nerr);
            goto fail;
        }
        driver_ok = rc == 0;
        snap->driver_hung = rc == -ETIMEDOUT;
        if (!driver_ok && !(snap->driver_error = strdup(vg_err_msg(&nerr)))) {
            vg_err_release(&nerr);
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
        vg_err_release(&nerr);
        if (vg_proc_pci_read(opts->sys_root, &snap->pci) != 0) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
    } else if (!(snap->driver_error = strdup("the driver was not asked (--no-nvml)"))) {
        rc = vg_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }

    rc = vg_snap_nvml_pids(&pt.gpus, &pt.want, &pt.nwant);
    if (rc) {
        vg_err_set(err, rc, "out of memory");
        goto fail;
    }
    /* Before /proc, so that the processes the Xids name are read in full: their user, cgroup
     * and job are the Xid's. */
    if (opts->read_kmsg && (parts & VG_SNAP_PART_PROCS)) {
        if ((rc = vg_proc_read_kmsg(opts->kmsg_path, &snap->kmsg, err)) != 0 ||
            (rc = vg_snap_xid_pids(&snap->kmsg, &pt.want, &pt.nwant)) != 0) {
            if (!err->msg)
                vg_err_set(err, rc, "out of memory");
            goto fail;
        }
    }
    struct vg_proc_opts popts = {
        .proc_root = proc_root,
        .dev_dir = dev_dir,
        .want = pt.want,
        .nwant = pt.nwant,
        .all = opts->all_procs,
        .scan = (enum vg_proc_scan_mode)opts->scan,
    };
    rc = parts & VG_SNAP_PART_PROCS ? vg_proc_scan(&popts, &pt.procs, err) : 0;
    if (rc)
        goto fail;
    snap->scanned_ms = vg_clock_ms();
    rc = vg_snap_assemble(snap, &pt.gpus, driver_ok, &pt.procs, err);
    if (rc || (rc = vg_snap_join_xids(snap, err)) != 0)
        goto fail;
    vg_snap_parts_release(&pt);
    *out = snap;
    return 0;

fail:
    vg_snap_parts_release(&pt);
    vg_snap_free(snap);
    return rc;
}

static int vg_snap_cmp_gpu(const void *key, const void *elem)
{
    size_t gpu = *(const size_t *)key, other = ((const struct vg_holding *)elem)->gpu;
    return gpu < other ? -1 : gpu > other;
}

/* The first holding whose GPU is at least gpu (holdings are sorted by GPU). */
static size_t vg_snap_lower(const struct vg_snapshot *snap, size_t gpu)
{
    return vg_array_lower_bound(&gpu, snap->holdings, snap->nholdings, sizeof(*snap->holdings),
                                vg_snap_cmp_gpu);
}

void vg_snap_gpu_holdings(const struct vg_snapshot *snap, size_t gpu, size_t *first, size_t *count)
{
    /* called once per GPU by every renderer: two binary searches, not a walk from the start */
    size_t i = vg_snap_lower(snap, gpu);
    size_t j = gpu == VG_SNAP_NO_GPU ? snap->nholdings : vg_snap_lower(snap, gpu + 1);
    *first = i;
    *count = j - i;
}

/* The snapshot's own process entry for pid, to fill in while finishing it. */
static struct vg_proc *vg_snap_proc_mut(struct vg_snapshot *snap, pid_t pid)
{
    const struct vg_proc *p = vg_proc_table_find(&snap->procs, pid);
    return p ? &snap->procs.procs[p - snap->procs.procs] : NULL;
}

void vg_snap_measure_activity(struct vg_snapshot *snap, const pid_t *pids, size_t n,
                              unsigned window_ms)
{
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || window_ms == 0 || n == 0)
        return;
    int root_fd = open(snap->proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return;
    vg_clock_sleep_until(snap->scanned_ms + window_ms);
    uint64_t now = vg_clock_ms();
    for (size_t i = 0; i < n; i++) {
        struct vg_proc *p = vg_snap_proc_mut(snap, pids[i]);
        uint64_t ticks;
        if (!p || !(p->known & VG_PROC_K_STAT) ||
            vg_proc_read_cpu(root_fd, p->pid, p->start_ticks, &ticks) != 0)
            continue;
        uint64_t used = ticks >= p->cpu_ticks ? ticks - p->cpu_ticks : 0;
        uint64_t span = now - snap->scanned_ms;
        p->activity_known = true;
        p->activity_ms = span > UINT32_MAX ? UINT32_MAX : (unsigned)span;
        p->activity_cpu_ms = used * 1000u / (uint64_t)hz;
    }
    close(root_fd);
}

void vg_snap_activity_since(struct vg_snapshot *snap, const struct vg_snap_cpu_marks *prev)
{
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || !prev || !prev->n || snap->scanned_ms <= prev->at_ms)
        return;
    uint64_t span = snap->scanned_ms - prev->at_ms;
    for (size_t i = 0; i < snap->procs.n; i++) {
        struct vg_proc *p = &snap->procs.procs[i];
        struct vg_snap_cpu_mark key = {.pid = p->pid};
        const struct vg_snap_cpu_mark *q =
            bsearch(&key, prev->v, prev->n, sizeof(*prev->v), vg_array_cmp_pid);
        if (!q || !(p->known & VG_PROC_K_STAT) || q->start_ticks != p->start_ticks)
            continue;
        uint64_t used = p->cpu_ticks >= q->cpu_ticks ? p->cpu_ticks - q->cpu_ticks : 0;
        p->activity_known = true;
        p->activity_ms = span > UINT32_MAX ? UINT32_MAX : (unsigned)span;
        p->activity_cpu_ms = used * 1000u / (uint64_t)hz;
    }
}

int vg_snap_cpu_marks_take(const struct vg_snapshot *snap, struct vg_snap_cpu_marks *m)
{
    vg_snap_cpu_marks_release(m);
    if (snap->procs.n && !(m->v = malloc(snap->procs.n * sizeof(*m->v))))
        return -ENOMEM;
    for (size_t i = 0; i < snap->procs.n; i++) {
        const struct vg_proc *p = &snap->procs.procs[i];
        if (p->known & VG_PROC_K_STAT)
            m->v[m->n++] = (struct vg_snap_cpu_mark){p->pid, p->start_ticks, p->cpu_ticks};
    }
    m->at_ms = snap->scanned_ms;
    return 0;
}

void vg_snap_cpu_marks_release(struct vg_snap_cpu_marks *m)
{
    free(m->v);
    memset(m, 0, sizeof(*m));
}

unsigned vg_snap_gpu_unchecked(const struct vg_snapshot *snap, size_t gpu)
{
    unsigned u = vg_snap_holders_may_hide(snap) ? VG_SNAP_UNCHECKED_DESCRIPTORS : 0;
    if (!snap->driver_ok || gpu >= snap->gpus.ngpus)
        return u | VG_SNAP_UNCHECKED_DRIVER;
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    if (g->lost)
        u |= VG_SNAP_UNCHECKED_LOST;
    if (g->hung)
        u |= VG_SNAP_UNCHECKED_HUNG;
    if (!(g->known & VG_GPU_K_MEM))
        u |= VG_SNAP_UNCHECKED_MEMORY;
    if (!(g->known & VG_GPU_K_PROCS))
        u |= VG_SNAP_UNCHECKED_PROCESSES;
    if (!(g->known & VG_GPU_K_MINOR))
        u |= VG_SNAP_UNCHECKED_MINOR;
    return u;
}

const char *vg_snap_unchecked_id(unsigned bit)
{
    switch (bit) {
    case VG_SNAP_UNCHECKED_DRIVER:
        return "driver";
    case VG_SNAP_UNCHECKED_LOST:
        return "lost";
    case VG_SNAP_UNCHECKED_MEMORY:
        return "memory";
    case VG_SNAP_UNCHECKED_PROCESSES:
        return "processes";
    case VG_SNAP_UNCHECKED_MINOR:
        return "minor";
    case VG_SNAP_UNCHECKED_DESCRIPTORS:
        return "descriptors";
    case VG_SNAP_UNCHECKED_HUNG:
        return "hung";
    }
    return NULL;
}

bool vg_snap_holders_may_hide(const struct vg_snapshot *snap)
{
    return snap->procs.n_fd_unread || (snap->procs.access & VG_PROC_ACC_HIDEPID);
}

size_t vg_snap_unread_envs(const struct vg_snapshot *snap)
{
    /* holdings are sorted by GPU, not process: each process counts once, so mark the entries
     * of the process table (by index) rather than look back over the holdings */
    if (!snap->procs.n)
        return 0;
    unsigned char *seen = calloc(snap->procs.n, 1);
    size_t n = 0;
    for (size_t i = 0; i < snap->nholdings; i++) {
        const struct vg_proc *p = snap->holdings[i].proc;
        if (!p || (p->known & VG_PROC_K_ENV) ||
            ((p->known & VG_PROC_K_STAT) && (p->state == 'Z' || p->state == 'X')))
            continue;
        size_t k = (size_t)(p - snap->procs.procs);
        if (seen && k < snap->procs.n) {
            n += !seen[k];
            seen[k] = 1;
        } else if (!seen) {
            n++; /* out of memory: an upper bound rather than a wrong "none" */
        }
    }
    free(seen);
    return n;
}

bool vg_snap_path_only(const struct vg_proc *p)
{
    return (p->known & VG_PROC_K_FDS) &&
           (p->npath_minors > 0 ||
            (p->dev_path_count > 0 && p->dev_fd_count == 0 && p->dev_map_count == 0));
}
