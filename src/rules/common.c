/*
 * Shared vocabulary of the rules (see internal.h): labels for GPUs and processes in evidence
 * lines, and the per-process reading of CUDA_VISIBLE_DEVICES.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/internal.h"
#include "util/buf.h"
#include "util/parse.h"
#include "util/text.h"

void vg_rule_gpu_label(const struct vg_snapshot *snap, size_t gpu, char *out, size_t n)
{
    if (gpu >= snap->gpus.ngpus) {
        snprintf(out, n, "an unknown GPU");
        return;
    }
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    char uuid[32];
    vg_text_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
    snprintf(out, n, "GPU %u (%.60s, %s)", g->index,
             (g->known & VG_GPU_K_NAME) && g->name ? g->name : "name n/a", uuid);
}

void vg_rule_proc_label(pid_t pid, const struct vg_proc *p, char *out, size_t n)
{
    const char *what = p && p->cmdline && p->cmdline[0] ? p->cmdline : p ? p->comm : NULL;
    if (!what) {
        snprintf(out, n, "PID %u", (unsigned)pid);
        return;
    }
    size_t len = strlen(what);
    if (len > 60)
        snprintf(out, n, "PID %u (%.57s...)", (unsigned)pid, what);
    else
        snprintf(out, n, "PID %u (%s)", (unsigned)pid, what);
}

void vg_rule_size(bool known, uint64_t bytes, char *out, size_t n)
{
    vg_fmt_size_or(known, bytes, "an unknown amount", out, n);
}

void vg_rule_proc_visible_release(struct vg_proc_visible *pv)
{
    free(pv->allowed);
    free(pv->subset);
    vg_visible_release(&pv->vis);
    memset(pv, 0, sizeof(*pv));
}

/* One device a container was given: a host GPU, or one MIG device of it. */
struct vg_given {
    size_t gpu;
    int mig;
};

static int vg_given_cmp(const void *a, const void *b)
{
    const struct vg_given *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    return x->mig < y->mig ? -1 : x->mig > y->mig;
}

/* One NVIDIA_VISIBLE_DEVICES entry: a host index, "GPU:MIG" indices, a GPU UUID or a MIG UUID.
 * false when it names nothing on this host. */
static bool vg_given_parse(const struct vg_gpu_list *l, const char *tok, struct vg_given *out)
{
    uint64_t idx, mig;
    const char *colon = strchr(tok, ':');
    if (colon) {
        char gpu[24];
        size_t n = (size_t)(colon - tok);
        if (n == 0 || n >= sizeof(gpu))
            return false;
        memcpy(gpu, tok, n);
        gpu[n] = '\0';
        if (vg_parse_u64(gpu, &idx) || vg_parse_u64(colon + 1, &mig))
            return false;
        for (size_t g = 0; g < l->ngpus; g++)
            if (l->gpus[g].index == idx && mig < l->gpus[g].nmig) {
                *out = (struct vg_given){g, (int)mig};
                return true;
            }
        return false;
    }
    for (size_t g = 0; g < l->ngpus; g++) {
        const struct vg_gpu *gp = &l->gpus[g];
        if ((vg_parse_u64(tok, &idx) == 0 && idx == gp->index) ||
            ((gp->known & VG_GPU_K_UUID) && gp->uuid && strcmp(gp->uuid, tok) == 0)) {
            *out = (struct vg_given){g, -1};
            return true;
        }
        for (size_t m = 0; m < gp->nmig; m++) {
            const struct vg_gpu *md = &gp->mig[m];
            if ((md->known & VG_GPU_K_UUID) && md->uuid && strcmp(md->uuid, tok) == 0) {
                *out = (struct vg_given){g, (int)m};
                return true;
            }
        }
    }
    return false;
}

/*
 * NVIDIA_VISIBLE_DEVICES (the container toolkit's variable) of a containerised process: "all"
 * (or unset, or empty) gives every GPU; "none" and "void" none; otherwise host indices, UUIDs,
 * MIG UUIDs or "GPU:MIG" indices. The container's CUDA does not number what it was given in
 * the order of the variable: it sees the device nodes it was given and enumerates them as on
 * any host, by PCI bus (which is host index order) and then CUDA_DEVICE_ORDER. So the subset
 * is kept sorted by host index. Returns false when the variable does not restrict; on true,
 * *out holds the given devices (heap, *n of them; none for "none") and *unknown counts the
 * entries that named no device here.
 */
static bool vg_rule_container_subset(const struct vg_snapshot *snap, const char *nvd,
                                     struct vg_given **out, size_t *n, size_t *unknown)
{
    *out = NULL;
    *n = 0;
    *unknown = 0;
    if (!nvd || strcmp(nvd, "all") == 0 || nvd[0] == '\0')
        return false;
    const struct vg_gpu_list *l = &snap->gpus;
    struct vg_given *v = calloc(vg_parse_list_count(nvd), sizeof(*v));
    char *copy = strdup(nvd);
    if (!v || !copy) {
        free(v);
        free(copy);
        return false;
    }
    if (strcmp(nvd, "none") != 0 && strcmp(nvd, "void") != 0) {
        const char *pos = copy, *at;
        size_t len;
        while (vg_parse_list_next(&pos, NULL, &at, &len)) {
            if (!len)
                continue; /* "0,,1" names two devices */
            char *tok = copy + (at - copy);
            tok[len] = '\0'; /* its comma: pos is past it already */
            struct vg_given gv;
            if (!vg_given_parse(l, tok, &gv)) {
                (*unknown)++;
                continue;
            }
            bool dup = false;
            for (size_t k = 0; k < *n && !dup; k++)
                dup = v[k].gpu == gv.gpu && v[k].mig == gv.mig;
            if (!dup)
                v[(*n)++] = gv;
        }
    }
    free(copy);
    qsort(v, *n, sizeof(*v), vg_given_cmp);
    *out = v;
    return true;
}

/* The GPUs as the container sees them: one entry per host GPU it was given (in host order),
 * with only the MIG devices it was given. A shallow view: it borrows everything from the
 * snapshot's list and owns only its arrays (vg_rule_view_release). */
struct vg_rule_view {
    struct vg_gpu_list list;
    struct vg_gpu *gpus;
    struct vg_gpu *migs;
    size_t *host; /* host GPU index of each view GPU */
};

static void vg_rule_view_release(struct vg_rule_view *w)
{
    free(w->gpus);
    free(w->migs);
    free(w->host);
    memset(w, 0, sizeof(*w));
}

static int vg_rule_view_build(const struct vg_gpu_list *l, const struct vg_given *gv, size_t n,
                              struct vg_rule_view *w)
{
    memset(w, 0, sizeof(*w));
    w->list = *l;
    w->gpus = calloc(n ? n : 1, sizeof(*w->gpus));
    w->migs = calloc(n ? n : 1, sizeof(*w->migs));
    w->host = calloc(n ? n : 1, sizeof(*w->host));
    if (!w->gpus || !w->migs || !w->host) {
        vg_rule_view_release(w);
        return -ENOMEM;
    }
    size_t ng = 0, nm = 0;
    for (size_t i = 0; i < n; i++) {
        if (ng == 0 || w->host[ng - 1] != gv[i].gpu) {
            w->gpus[ng] = l->gpus[gv[i].gpu];
            w->host[ng] = gv[i].gpu;
            if (gv[i].mig >= 0) {
                w->gpus[ng].mig = &w->migs[nm];
                w->gpus[ng].nmig = 0;
            }
            ng++;
        }
        if (gv[i].mig >= 0) {
            /* sorted, so one parent's MIG devices are consecutive in migs */
            w->migs[nm++] = l->gpus[gv[i].gpu].mig[gv[i].mig];
            w->gpus[ng - 1].nmig++;
        }
    }
    w->list.gpus = w->gpus;
    w->list.ngpus = ng;
    return 0;
}

static bool vg_rule_resolve(const struct vg_snapshot *snap, const char *value, const char *order,
                            const char *nvd, struct vg_proc_visible *pv)
{
    memset(pv, 0, sizeof(*pv));
    size_t ngpus = snap->gpus.ngpus;
    if (!snap->driver_ok || !ngpus)
        return false;
    pv->value = value;
    pv->order = order;
    pv->allowed = calloc(ngpus, sizeof(*pv->allowed));
    if (!pv->allowed)
        return false;
    struct vg_given *given = NULL;
    size_t ngiven = 0;
    bool restricted = vg_rule_container_subset(snap, nvd, &given, &ngiven, &pv->nunknown);

    /* Resolve against the GPUs this process can see. */
    struct vg_rule_view view = {0};
    if (restricted && vg_rule_view_build(&snap->gpus, given, ngiven, &view) != 0) {
        free(given);
        vg_rule_proc_visible_release(pv);
        return false;
    }
    free(given);
    int rc =
        vg_visible_resolve(value, order, restricted ? &view.list : &snap->gpus, &pv->vis, NULL);
    if (rc) {
        vg_rule_view_release(&view);
        vg_rule_proc_visible_release(pv);
        return false;
    }
    if (restricted) {
        pv->subset = view.host;
        pv->nsubset = view.list.ngpus;
        view.host = NULL;
        /* the resolution speaks in view indices: make them host indices for every reader */
        for (size_t i = 0; i < pv->vis.ndevices; i++)
            pv->vis.devices[i].gpu = pv->subset[pv->vis.devices[i].gpu];
        for (size_t i = 0; i < pv->vis.nentries; i++)
            if (pv->vis.entries[i].gpu < pv->nsubset)
                pv->vis.entries[i].gpu = pv->subset[pv->vis.entries[i].gpu];
        for (size_t i = 0; i < pv->vis.nenum; i++)
            pv->vis.enum_order[i] = pv->subset[pv->vis.enum_order[i]];
    }
    vg_rule_view_release(&view);
    for (size_t i = 0; i < pv->vis.ndevices; i++)
        if (pv->vis.devices[i].gpu < ngpus)
            pv->allowed[pv->vis.devices[i].gpu] = true;
    return true;
}

void vg_rule_visible_evidence(struct vg_findings *out, struct vg_finding *f,
                              const struct vg_snapshot *snap, const struct vg_proc *p,
                              const struct vg_proc_visible *pv)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_MAX_DEFAULT);
    const char *order = pv->order && strcmp(pv->order, "PCI_BUS_ID") == 0
                            ? "in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)"
                            : "fastest first (CUDA_DEVICE_ORDER unset or not PCI_BUS_ID; PCI "
                              "bus order among equal GPUs)";
    if (pv->subset) {
        vg_buf_printf(&b, "it runs in container %.12s, which was given ",
                      p->container_id ? p->container_id : "?");
        if (pv->nsubset == 0)
            vg_buf_adds(&b, "no GPU");
        for (size_t i = 0; i < pv->nsubset; i++)
            vg_buf_printf(&b, "%sGPU %u", i ? (i + 1 == pv->nsubset ? " and " : ", ") : "",
                          snap->gpus.gpus[pv->subset[i]].index);
        vg_buf_printf(&b,
                      " (NVIDIA_VISIBLE_DEVICES=%.200s); its CUDA numbers them %s, not in "
                      "the variable's order",
                      p->env[VG_ENV_NVIDIA_VISIBLE_DEVICES], order);
    } else {
        vg_buf_printf(&b, "CUDA numbers this host's GPUs %s", order);
    }
    if (pv->value) {
        vg_buf_printf(&b, ": CUDA_VISIBLE_DEVICES=%.200s gives ", pv->value);
        if (pv->vis.ndevices == 0)
            vg_buf_adds(&b, "no GPU");
        for (size_t i = 0; i < pv->vis.ndevices; i++) {
            const struct vg_vis_device *d = &pv->vis.devices[i];
            vg_buf_printf(&b, "%scuda:%zu = GPU %u", i ? ", " : "", i,
                          d->gpu < snap->gpus.ngpus ? snap->gpus.gpus[d->gpu].index : 0u);
            if (d->mig >= 0)
                vg_buf_printf(&b, " MIG %d", d->mig);
        }
    }
    if (pv->nunknown)
        vg_buf_printf(&b, "; %zu entr%s of NVIDIA_VISIBLE_DEVICES name%s no device here",
                      pv->nunknown, pv->nunknown == 1 ? "y" : "ies", pv->nunknown == 1 ? "s" : "");
    if (b.err) {
        if (!out->err)
            out->err = b.err;
    } else {
        vg_finding_evidence(out, f, "%s", vg_buf_str(&b));
    }
    vg_buf_release(&b);
}

bool vg_rule_proc_visible(const struct vg_snapshot *snap, const struct vg_proc *p,
                          struct vg_proc_visible *pv)
{
    memset(pv, 0, sizeof(*pv));
    if (!p || !(p->known & VG_PROC_K_ENV))
        return false;
    /* The container toolkit's variable only restricts inside a container. */
    const char *nvd = p->container_id ? p->env[VG_ENV_NVIDIA_VISIBLE_DEVICES] : NULL;
    return vg_rule_resolve(snap, p->env[VG_ENV_CUDA_VISIBLE_DEVICES],
                           p->env[VG_ENV_CUDA_DEVICE_ORDER], nvd, pv);
}

bool vg_rule_host_visible(const struct vg_snapshot *snap, const char *value, const char *order,
                          struct vg_proc_visible *pv)
{
    return vg_rule_resolve(snap, value, order, NULL, pv);
}

bool vg_rule_has_rank(const struct vg_proc *p)
{
    if (!p || !(p->known & VG_PROC_K_ENV))
        return false;
    return p->env[VG_ENV_LOCAL_RANK] || p->env[VG_ENV_RANK] ||
           p->env[VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK] || p->env[VG_ENV_SLURM_LOCALID];
}

/* A launcher's run id that says something: torchrun's --rdzv-id defaults to "none", so every
 * plain torchrun job carries the same value. */
static const char *vg_rule_run_id(const struct vg_proc *p)
{
    const char *id = p->env[VG_ENV_TORCHELASTIC_RUN_ID];
    return id && id[0] && strcmp(id, "none") != 0 ? id : NULL;
}

bool vg_rule_parent_is_launcher(const struct vg_proc *p)
{
    /* Not once adopted by init, a container's init or a subreaper: then every orphan shares
     * that parent. A session leader's parent is in another session by its own doing
     * (torchrun starts each rank so), which says nothing about adoption. */
    return (p->known & VG_PROC_K_STAT) && p->ppid > 1 && p->parent_alive &&
           !(p->parent_known &&
             (p->parent_ns_init || (p->parent_sid != p->sid && p->sid != p->pid)));
}

void vg_rule_job_key(const struct vg_proc *p, char *key, size_t n, char *label, size_t ln)
{
    bool stat = p->known & VG_PROC_K_STAT;
    bool launcher = vg_rule_parent_is_launcher(p);
    const char *run = vg_rule_run_id(p), *slurm = p->env[VG_ENV_SLURM_JOB_ID];
    int w;
    if (launcher)
        w = snprintf(key, n, "parent %d", (int)p->ppid);
    else if (stat)
        w = snprintf(key, n, "session %d group %d", (int)p->sid, (int)p->pgid);
    else
        w = snprintf(key, n, "PID %d", (int)p->pid);
    size_t off = w > 0 && (size_t)w < n ? (size_t)w : n ? n - 1 : 0;
    static const enum vg_env_var ids[] = {VG_ENV_SLURM_JOB_ID, VG_ENV_SLURM_STEP_ID,
                                          VG_ENV_PMIX_NAMESPACE, VG_ENV_MASTER_ADDR,
                                          VG_ENV_MASTER_PORT};
    if (run && off < n)
        off += (size_t)snprintf(key + off, n - off, " run=%.100s", run);
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]) && off < n; i++)
        if (p->env[ids[i]])
            off += (size_t)snprintf(key + off, n - off, " %s=%.100s", vg_env_name(ids[i]),
                                    p->env[ids[i]]);
    if (run)
        snprintf(label, ln, "run id %.80s", run);
    else if (slurm)
        snprintf(label, ln, "Slurm job %.80s", slurm);
    else if (launcher)
        snprintf(label, ln, "launcher PID %d", (int)p->ppid);
    else if (stat)
        snprintf(label, ln, "session %d", (int)p->sid);
    else
        snprintf(label, ln, "PID %d", (int)p->pid);
}
