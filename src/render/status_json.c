/*
 * `status --json`: the snapshot as a documented, versioned JSON document (docs/json.md).
 * Unknown values are null, never 0; every field is always present so scripts can rely on the
 * shape.
 */
#include <stdio.h>
#include <string.h>

#include "render/json.h"
#include "render/render.h"

static void vg_json_errors(struct vg_json *j, const struct vg_gpu_error *errs, size_t n)
{
    vg_json_key(j, "errors");
    vg_json_arr_begin(j);
    for (size_t i = 0; i < n; i++) {
        vg_json_obj_begin(j);
        vg_json_kstr(j, "function", errs[i].func);
        vg_json_ki64(j, "code", errs[i].status);
        vg_json_kstr(j, "message", errs[i].msg);
        vg_json_obj_end(j);
    }
    vg_json_arr_end(j);
}

static void vg_json_proc_fields(struct vg_json *j, const struct vg_proc *p)
{
    bool st = p && (p->known & VG_PROC_K_STAT);
    bool su = p && (p->known & VG_PROC_K_STATUS);
    vg_json_key(j, "user");
    vg_json_str(j, p && (p->known & VG_PROC_K_USER) ? p->user : NULL);
    vg_json_key(j, "uid");
    if (su)
        vg_json_u64(j, p->uid);
    else
        vg_json_null(j);
    vg_json_key(j, "state");
    if (st)
        vg_json_strn(j, &p->state, 1);
    else
        vg_json_null(j);
    vg_json_key(j, "ppid");
    if (st)
        vg_json_i64(j, p->ppid);
    else
        vg_json_null(j);
    vg_json_ku64_opt(j, "start_ticks", st, st ? p->start_ticks : 0);
    vg_json_kstr(j, "comm", st ? p->comm : NULL);
    vg_json_kstr(j, "command", p ? p->cmdline : NULL);
    vg_json_kstr(j, "container", p ? p->container_id : NULL);
    vg_json_kstr(j, "pod_uid", p ? p->pod_uid : NULL);
    vg_json_key(j, "nspid");
    if (su && p->nnspid) {
        vg_json_arr_begin(j);
        for (size_t i = 0; i < p->nnspid; i++)
            vg_json_i64(j, p->nspid[i]);
        vg_json_arr_end(j);
    } else {
        vg_json_null(j);
    }
    /* The nodes it holds, as it named them (display only; at most VG_PROC_NODES_MAX, the rest
     * counted): null when its descriptors could not be read. */
    bool fds = p && (p->known & VG_PROC_K_FDS);
    vg_json_key(j, "device_nodes");
    if (fds) {
        vg_json_arr_begin(j);
        for (size_t i = 0; i < p->ndev_paths; i++)
            vg_json_str(j, p->dev_paths[i]);
        vg_json_arr_end(j);
    } else {
        vg_json_null(j);
    }
    vg_json_ku64_opt(j, "device_nodes_more", fds, fds ? p->dev_nodes_more : 0);
}

static void vg_json_holder(struct vg_json *j, const struct vg_snapshot *snap,
                           const struct vg_holding *h)
{
    (void)snap;
    vg_json_obj_begin(j);
    vg_json_ku64(j, "pid", (uint32_t)h->pid);
    vg_json_ku64_opt(j, "memory", h->used_known, h->used_bytes);
    vg_json_key(j, "types");
    vg_json_arr_begin(j);
    if (h->types & VG_PTYPE_COMPUTE)
        vg_json_str(j, "compute");
    if (h->types & VG_PTYPE_GRAPHICS)
        vg_json_str(j, "graphics");
    if (h->types & VG_PTYPE_MPS)
        vg_json_str(j, "mps");
    vg_json_arr_end(j);
    vg_json_kstr(j, "seen_by", vg_render_seen(h->seen));
    /* A stale entry: the PID is in this /proc, but names another process (described below,
     * for what it is), which holds no node of the GPU. */
    const struct vg_proc *p = h->proc ? h->proc : h->stale_proc;
    vg_json_kbool(j, "in_proc", p != NULL);
    vg_json_kbool(j, "stale", h->stale);
    vg_json_kbool(j, "bogus_pid", h->bogus_pid);
    vg_json_key(j, "mig_device");
    if (h->mig >= 0)
        vg_json_i64(j, h->mig);
    else
        vg_json_null(j);
    vg_json_proc_fields(j, p);
    vg_json_obj_end(j);
}

static void vg_json_memory(struct vg_json *j, const struct vg_gpu *g, const struct vg_snap_gpu *s)
{
    bool mem = g->known & VG_GPU_K_MEM;
    vg_json_key(j, "memory");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "total", mem, g->mem_total);
    vg_json_ku64_opt(j, "used", mem, g->mem_used);
    vg_json_ku64_opt(j, "free", mem, g->mem_free);
    vg_json_ku64_opt(j, "reserved", g->known & VG_GPU_K_RESERVED, g->mem_reserved);
    if (s) {
        vg_json_ku64(j, "held_by_holders", s->held_bytes);
        vg_json_ku64_opt(j, "unexplained", s->unexplained_known, s->unexplained_bytes);
        vg_json_kbool(j, "unexplained_includes_reserved", s->unexplained_has_reserved);
        vg_json_kbool(j, "unexplained_is_upper_bound", s->unexplained_upper_bound);
    }
    vg_json_obj_end(j);
}

static void vg_json_gpu_ident(struct vg_json *j, const struct vg_gpu *g)
{
    vg_json_ku64(j, "index", g->index);
    vg_json_kstr(j, "uuid", (g->known & VG_GPU_K_UUID) ? g->uuid : NULL);
    vg_json_kstr(j, "name", (g->known & VG_GPU_K_NAME) ? g->name : NULL);
}

static void vg_json_holders_of(struct vg_json *j, const struct vg_snapshot *snap, size_t gi,
                               int mig)
{
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    vg_json_key(j, "holders");
    vg_json_arr_begin(j);
    for (size_t i = first; i < first + count; i++)
        if (snap->holdings[i].mig == mig)
            vg_json_holder(j, snap, &snap->holdings[i]);
    vg_json_arr_end(j);
}

static void vg_json_mig(struct vg_json *j, const struct vg_snapshot *snap, size_t gi)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    vg_json_key(j, "mig_devices");
    vg_json_arr_begin(j);
    for (size_t m = 0; m < g->nmig; m++) {
        const struct vg_gpu *mg = &g->mig[m];
        bool inst = mg->known & VG_GPU_K_INSTANCE;
        vg_json_obj_begin(j);
        vg_json_gpu_ident(j, mg);
        vg_json_ku64_opt(j, "gpu_instance", inst, mg->gpu_instance);
        vg_json_ku64_opt(j, "compute_instance", inst, mg->compute_instance);
        vg_json_memory(j, mg, NULL);
        vg_json_holders_of(j, snap, gi, (int)m);
        vg_json_errors(j, mg->errors, mg->nerrors);
        vg_json_obj_end(j);
    }
    vg_json_arr_end(j);
}

/* The GPU's health facts (gpu.h, struct vg_gpu_health): each member null when unknown. */
static void vg_json_health(struct vg_json *j, const struct vg_gpu *g)
{
    const struct vg_gpu_health *h = &g->health;
    unsigned k = h->known;
    vg_json_key(j, "health");
    vg_json_obj_begin(j);
    vg_json_key(j, "ecc");
    vg_json_obj_begin(j);
    vg_json_kbool_opt(j, "current", k & VG_GH_K_ECC_MODE, h->ecc_current);
    vg_json_kbool_opt(j, "pending", k & VG_GH_K_ECC_MODE, h->ecc_pending);
    vg_json_key(j, "volatile");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "corrected", k & VG_GH_K_ECC_VOL_CORR, h->ecc_vol_corr);
    vg_json_ku64_opt(j, "uncorrected", k & VG_GH_K_ECC_VOL_UNCORR, h->ecc_vol_uncorr);
    vg_json_obj_end(j);
    vg_json_key(j, "aggregate");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "corrected", k & VG_GH_K_ECC_AGG_CORR, h->ecc_agg_corr);
    vg_json_ku64_opt(j, "uncorrected", k & VG_GH_K_ECC_AGG_UNCORR, h->ecc_agg_uncorr);
    vg_json_obj_end(j);
    vg_json_obj_end(j);
    vg_json_key(j, "retired_pages");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "single_bit", k & VG_GH_K_RETIRED_SBE, h->retired_sbe);
    vg_json_ku64_opt(j, "double_bit", k & VG_GH_K_RETIRED_DBE, h->retired_dbe);
    vg_json_kbool_opt(j, "pending", k & VG_GH_K_RETIRED_PENDING, h->retired_pending);
    vg_json_obj_end(j);
    vg_json_key(j, "remapped_rows");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "corrected", k & VG_GH_K_REMAP, h->remap_corr);
    vg_json_ku64_opt(j, "uncorrected", k & VG_GH_K_REMAP, h->remap_uncorr);
    vg_json_kbool_opt(j, "pending", k & VG_GH_K_REMAP, h->remap_pending);
    vg_json_kbool_opt(j, "failure", k & VG_GH_K_REMAP, h->remap_failure);
    vg_json_obj_end(j);
    const char *action = vg_gpu_recovery_name(h->recovery);
    vg_json_kstr(j, "recovery_action", k & VG_GH_K_RECOVERY ? (action ? action : "unknown") : NULL);
    vg_json_ku64_opt(j, "recovery_action_code", k & VG_GH_K_RECOVERY, h->recovery);
    vg_json_key(j, "clock_event_reasons");
    if (k & VG_GH_K_CLOCKS) {
        size_t n;
        const struct vg_gpu_clock_reason *r = vg_gpu_clock_reasons(&n);
        vg_json_arr_begin(j);
        for (size_t i = 0; i < n; i++)
            if (h->clocks & r[i].bit)
                vg_json_str(j, r[i].name);
        vg_json_arr_end(j);
    } else {
        vg_json_null(j);
    }
    vg_json_obj_end(j);
}

static void vg_json_gpu(struct vg_json *j, const struct vg_snapshot *snap, size_t gi)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    const struct vg_snap_gpu *s = &snap->per_gpu[gi];
    vg_json_obj_begin(j);
    vg_json_gpu_ident(j, g);
    vg_json_ku64_opt(j, "minor", g->known & VG_GPU_K_MINOR, g->minor);
    vg_json_kstr(j, "pci_bus_id", (g->known & VG_GPU_K_PCI) ? g->pci_bus_id : NULL);
    vg_json_kbool(j, "lost", g->lost);
    vg_json_kbool(j, "hung", g->hung);
    vg_json_memory(j, g, s);
    vg_json_key(j, "utilization");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "gpu", g->known & VG_GPU_K_UTIL, g->util_gpu);
    vg_json_ku64_opt(j, "memory", g->known & VG_GPU_K_UTIL, g->util_mem);
    vg_json_obj_end(j);
    vg_json_key(j, "compute_capability");
    if (g->known & VG_GPU_K_CC) {
        char cc[32];
        snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
        vg_json_str(j, cc);
    } else {
        vg_json_null(j);
    }
    vg_json_kbool_opt(j, "persistence_mode", g->known & VG_GPU_K_PERSIST, g->persistence);
    vg_json_kstr(j, "compute_mode",
                 (g->known & VG_GPU_K_COMPUTE_MODE) ? vg_render_compute_mode(g->compute_mode)
                                                    : NULL);
    vg_json_key(j, "mig_mode");
    vg_json_obj_begin(j);
    vg_json_kbool_opt(j, "current", g->known & VG_GPU_K_MIG_MODE, g->mig_current);
    vg_json_kbool_opt(j, "pending", g->known & VG_GPU_K_MIG_MODE, g->mig_pending);
    vg_json_obj_end(j);
    vg_json_health(j, g);
    vg_json_kbool(j, "processes_known", g->known & VG_GPU_K_PROCS);
    vg_json_ku64(j, "holder_count", s->nholders);
    vg_json_holders_of(j, snap, gi, -1);
    vg_json_mig(j, snap, gi);
    vg_json_errors(j, g->errors, g->nerrors);
    vg_json_obj_end(j);
}

static void vg_json_driver(struct vg_json *j, const struct vg_snapshot *snap)
{
    const struct vg_gpu_list *l = &snap->gpus;
    vg_json_key(j, "driver");
    vg_json_obj_begin(j);
    vg_json_kbool(j, "available", snap->driver_ok);
    vg_json_kstr(j, "error", snap->driver_error);
    vg_json_kstr(j, "library", l->library);
    vg_json_kstr(j, "driver_version", l->driver_version);
    vg_json_kstr(j, "nvml_version", l->nvml_version);
    vg_json_key(j, "cuda_version");
    if (l->cuda_version > 0) {
        char v[32];
        snprintf(v, sizeof(v), "%d.%d", l->cuda_version / 1000, (l->cuda_version % 1000) / 10);
        vg_json_str(j, v);
    } else {
        vg_json_null(j);
    }
    vg_json_kstr(j, "memory_api", l->mem_api);
    vg_json_kstr(j, "process_api", l->proc_api);
    vg_json_kbool(j, "process_stride_535", l->proc_stride_535);
    vg_json_errors(j, l->errors, l->nerrors);
    vg_json_obj_end(j);
}

int vg_render_status_json(const struct vg_snapshot *snap, const struct vg_render_opts *ro,
                          struct vg_buf *out)
{
    (void)ro;
    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, VG_JSON_SCHEMA_STATUS, &snap->taken_at);
    vg_render_replay_json(&j, snap);
    vg_json_key(&j, "host");
    vg_json_obj_begin(&j);
    vg_json_kstr(&j, "proc_root", snap->proc_root);
    vg_json_kstr(&j, "dev_dir", snap->dev_dir);
    vg_json_ku64(&j, "pid_namespace_depth", (uint64_t)snap->procs.self_nspid_depth);
    vg_json_kstr(&j, "pid_namespace", vg_proc_pidns_id(snap->procs.pidns));
    vg_json_obj_end(&j);
    vg_json_driver(&j, snap);
    vg_json_key(&j, "gpus");
    vg_json_arr_begin(&j);
    for (size_t gi = 0; gi < snap->gpus.ngpus; gi++)
        vg_json_gpu(&j, snap, gi);
    vg_json_arr_end(&j);
    /* Device-node holders whose minor matches no GPU the driver reported (or no driver). */
    vg_json_key(&j, "unmatched_holders");
    vg_json_arr_begin(&j);
    size_t first, count;
    vg_snap_gpu_holdings(snap, VG_SNAP_NO_GPU, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        vg_json_obj_begin(&j);
        vg_json_ku64(&j, "minor", snap->holdings[i].minor);
        vg_json_key(&j, "holder");
        vg_json_holder(&j, snap, &snap->holdings[i]);
        vg_json_obj_end(&j);
    }
    vg_json_arr_end(&j);
    /* Processes holding nodes through O_PATH descriptors only: no holders (issue 27). */
    vg_json_key(&j, "path_only");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < snap->procs.n; i++) {
        const struct vg_proc *p = &snap->procs.procs[i];
        if (!vg_snap_path_only(p))
            continue;
        vg_json_obj_begin(&j);
        vg_json_ku64(&j, "pid", (uint64_t)p->pid);
        vg_json_key(&j, "minors");
        vg_json_arr_begin(&j);
        for (size_t k = 0; k < p->npath_minors; k++)
            vg_json_u64(&j, p->path_minors[k]);
        vg_json_arr_end(&j);
        vg_json_key(&j, "gpus");
        vg_json_arr_begin(&j);
        for (size_t k = 0; k < p->npath_minors; k++) {
            const struct vg_gpu *g = vg_gpu_list_by_minor(&snap->gpus, p->path_minors[k]);
            if (g)
                vg_json_u64(&j, g->index);
        }
        vg_json_arr_end(&j);
        vg_json_ku64(&j, "descriptors", p->dev_path_count);
        vg_json_proc_fields(&j, p);
        vg_json_obj_end(&j);
    }
    vg_json_arr_end(&j);
    vg_json_key(&j, "scan");
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "processes", snap->procs.n_scanned);
    vg_json_ku64(&j, "vanished", snap->procs.n_vanished);
    vg_json_ku64(&j, "denied", snap->procs.n_denied);
    /* which scan found the holders, and why that one: the kernel's (its mappings walked in the
     * kernel too, or read from /proc), or /proc's with the reason the kernel's did not run
     * (null: it was not asked for, --scan=proc) */
    const struct vg_proc_table *t = &snap->procs;
    vg_json_kstr(&j, "method", t->kernel_scan ? "kernel" : "proc");
    vg_json_kstr(&j, "maps", t->kernel_scan && t->kernel_scan_maps ? "kernel" : "proc");
    vg_json_kstr(&j, "reason", t->kernel_scan ? NULL : t->scan_note);
    vg_json_obj_end(&j);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}
