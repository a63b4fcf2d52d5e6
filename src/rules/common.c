/*
 * Shared vocabulary of the rules (see internal.h): labels for GPUs and processes in evidence
 * lines, and the per-process reading of CUDA_VISIBLE_DEVICES.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/render.h"
#include "rules/internal.h"
#include "util/parse.h"

void vg_rule_gpu_label(const struct vg_snapshot *snap, size_t gpu, char *out, size_t n)
{
    if (gpu >= snap->gpus.ngpus) {
        snprintf(out, n, "an unknown GPU");
        return;
    }
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    char uuid[32];
    vg_render_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
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
    if (!known || vg_fmt_size(bytes, out, n) != 0)
        snprintf(out, n, "an unknown amount");
}

void vg_rule_proc_visible_release(struct vg_proc_visible *pv)
{
    free(pv->allowed);
    free(pv->subset);
    vg_visible_release(&pv->vis);
    memset(pv, 0, sizeof(*pv));
}

/* NVIDIA_VISIBLE_DEVICES (the container toolkit's variable): "all", "none", "void", or host
 * indices / UUIDs. Returns the subset as host GPU indices; false when it does not restrict. */
static bool vg_rule_container_subset(const struct vg_snapshot *snap, const char *nvd,
                                     size_t **subset, size_t *n)
{
    *subset = NULL;
    *n = 0;
    if (!nvd || strcmp(nvd, "all") == 0 || nvd[0] == '\0')
        return false;
    size_t ngpus = snap->gpus.ngpus;
    size_t *v = calloc(ngpus ? ngpus : 1, sizeof(*v));
    if (!v)
        return false;
    if (strcmp(nvd, "none") != 0 && strcmp(nvd, "void") != 0) {
        char *copy = strdup(nvd);
        if (!copy) {
            free(v);
            return false;
        }
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            uint64_t idx;
            for (size_t g = 0; g < ngpus; g++) {
                const struct vg_gpu *gp = &snap->gpus.gpus[g];
                bool match = (vg_parse_u64(tok, &idx) == 0 && idx == gp->index) ||
                             ((gp->known & VG_GPU_K_UUID) && gp->uuid &&
                              strcmp(gp->uuid, tok) == 0);
                bool dup = false;
                for (size_t k = 0; k < *n; k++)
                    dup |= v[k] == g;
                if (match && !dup && *n < ngpus)
                    v[(*n)++] = g;
            }
        }
        free(copy);
    }
    *subset = v;
    return true;
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
    bool restricted = vg_rule_container_subset(snap, nvd, &pv->subset, &pv->nsubset);

    /* Resolve against the GPUs this process can see: a shallow view of the list, never
     * released as a list. */
    struct vg_gpu_list view = snap->gpus;
    struct vg_gpu *gv = NULL;
    if (restricted) {
        gv = calloc(pv->nsubset ? pv->nsubset : 1, sizeof(*gv));
        if (!gv) {
            vg_rule_proc_visible_release(pv);
            return false;
        }
        for (size_t i = 0; i < pv->nsubset; i++)
            gv[i] = snap->gpus.gpus[pv->subset[i]];
        view.gpus = gv;
        view.ngpus = pv->nsubset;
    }
    int rc = vg_visible_resolve(value, order, &view, &pv->vis, NULL);
    free(gv);
    if (rc) {
        vg_rule_proc_visible_release(pv);
        return false;
    }
    for (size_t i = 0; i < pv->vis.ndevices; i++) {
        size_t g = pv->vis.devices[i].gpu;
        size_t host = restricted ? pv->subset[g] : g;
        if (host < ngpus)
            pv->allowed[host] = true;
    }
    return true;
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

void vg_rule_job_key(const struct vg_proc *p, char *out, size_t n)
{
    if (p->env[VG_ENV_TORCHELASTIC_RUN_ID])
        snprintf(out, n, "TORCHELASTIC_RUN_ID=%.80s", p->env[VG_ENV_TORCHELASTIC_RUN_ID]);
    else if (p->env[VG_ENV_SLURM_JOB_ID])
        snprintf(out, n, "SLURM_JOB_ID=%.80s", p->env[VG_ENV_SLURM_JOB_ID]);
    else if (p->known & VG_PROC_K_STAT)
        snprintf(out, n, "session %d", (int)p->sid);
    else
        snprintf(out, n, "PID %d", (int)p->pid);
}
