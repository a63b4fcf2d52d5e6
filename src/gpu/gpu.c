/*
 * The driver's view as plain data (see gpu.h): setting up and tearing down a struct
 * vg_gpu_list, and finding a GPU by the minor number that names its /dev/nvidia<minor> node.
 *
 * This file knows nothing about NVML; the NVML client (nvml.c) fills the list and the snapshot
 * reads it. Keeping the release here means every consumer frees a list the same way, however
 * it was filled (tests build lists by hand).
 */
#include "gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

void vg_gpu_list_init(struct vg_gpu_list *list)
{
    memset(list, 0, sizeof *list);
}

static void vg_gpu_errors_free(struct vg_gpu_error *errors, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(errors[i].func);
        free(errors[i].msg);
    }
    free(errors);
}

void vg_gpu_release(struct vg_gpu *g)
{
    free(g->name);
    free(g->uuid);
    free(g->pci_bus_id);
    free(g->procs);
    for (size_t i = 0; i < g->nmig; i++)
        vg_gpu_release(&g->mig[i]);
    free(g->mig);
    vg_gpu_errors_free(g->errors, g->nerrors);
    memset(g, 0, sizeof *g);
}

void vg_gpu_list_release(struct vg_gpu_list *list)
{
    if (!list)
        return;
    free(list->library);
    free(list->driver_version);
    free(list->nvml_version);
    for (size_t i = 0; i < list->ngpus; i++)
        vg_gpu_release(&list->gpus[i]);
    free(list->gpus);
    vg_gpu_errors_free(list->errors, list->nerrors);
    vg_gpu_list_init(list);
}

const char *vg_gpu_recovery_name(unsigned action)
{
    static const char *const names[] = {
        [VG_RECOVERY_NONE] = "none",
        [VG_RECOVERY_GPU_RESET] = "gpu_reset",
        [VG_RECOVERY_NODE_REBOOT] = "node_reboot",
        [VG_RECOVERY_DRAIN_P2P] = "drain_p2p",
        [VG_RECOVERY_DRAIN_AND_RESET] = "drain_and_reset",
        [VG_RECOVERY_RECOVER_IMEX] = "recover_imex_domain",
        [VG_RECOVERY_BUS_RESET] = "bus_reset",
        [VG_RECOVERY_SYSTEM_REBOOT] = "system_reboot",
    };
    return action < sizeof names / sizeof names[0] ? names[action] : NULL;
}

const char *vg_gpu_recovery_text(unsigned action)
{
    static const char *const texts[] = {
        [VG_RECOVERY_NONE] = "no action",
        [VG_RECOVERY_GPU_RESET] = "a GPU reset",
        [VG_RECOVERY_NODE_REBOOT] = "a node reboot",
        [VG_RECOVERY_DRAIN_P2P] = "a drain of peer-to-peer traffic",
        [VG_RECOVERY_DRAIN_AND_RESET] = "a drain, then a GPU reset",
        [VG_RECOVERY_RECOVER_IMEX] = "a recovery of its IMEX domain",
        [VG_RECOVERY_BUS_RESET] = "a reset of its PCIe bus",
        [VG_RECOVERY_SYSTEM_REBOOT] = "a system reboot",
    };
    return action < sizeof texts / sizeof texts[0] ? texts[action] : NULL;
}

const struct vg_gpu_clock_reason *vg_gpu_clock_reasons(size_t *n)
{
    static const struct vg_gpu_clock_reason reasons[] = {
        {VG_CLK_GPU_IDLE, "gpu_idle"},
        {VG_CLK_APP_SETTING, "applications_clocks_setting"},
        {VG_CLK_SW_POWER_CAP, "sw_power_cap"},
        {VG_CLK_HW_SLOWDOWN, "hw_slowdown"},
        {VG_CLK_SYNC_BOOST, "sync_boost"},
        {VG_CLK_SW_THERMAL, "sw_thermal_slowdown"},
        {VG_CLK_HW_THERMAL, "hw_thermal_slowdown"},
        {VG_CLK_HW_POWER_BRAKE, "hw_power_brake_slowdown"},
        {VG_CLK_DISPLAY_SETTING, "display_clock_setting"},
    };
    *n = sizeof reasons / sizeof reasons[0];
    return reasons;
}

const struct vg_gpu *vg_gpu_list_by_minor(const struct vg_gpu_list *list, unsigned minor)
{
    for (size_t i = 0; i < list->ngpus; i++) {
        const struct vg_gpu *g = &list->gpus[i];
        if ((g->known & VG_GPU_K_MINOR) && g->minor == minor)
            return g;
    }
    return NULL;
}

bool vg_gpu_list_by_uuid(const struct vg_gpu_list *list, const char *uuid, size_t *pos)
{
    for (size_t i = 0; uuid && i < list->ngpus; i++) {
        const struct vg_gpu *g = &list->gpus[i];
        if ((g->known & VG_GPU_K_UUID) && g->uuid && strcmp(g->uuid, uuid) == 0) {
            *pos = i;
            return true;
        }
    }
    return false;
}

enum vg_gpu_lookup vg_gpu_list_lookup(const struct vg_gpu_list *list, const char *text, size_t *pos)
{
    uint64_t idx;
    if (vg_parse_u64(text, &idx) == 0) {
        for (size_t i = 0; i < list->ngpus; i++) {
            if (list->gpus[i].index == idx) {
                *pos = i;
                return VG_GPU_LOOKUP_OK;
            }
        }
        return VG_GPU_LOOKUP_NO_INDEX;
    }
    size_t hit = 0, hits = 0, len = strlen(text);
    for (size_t i = 0; len && i < list->ngpus; i++) {
        const struct vg_gpu *g = &list->gpus[i];
        if ((g->known & VG_GPU_K_UUID) && g->uuid && strncmp(g->uuid, text, len) == 0) {
            hit = i;
            hits++;
        }
    }
    if (hits == 1) {
        *pos = hit;
        return VG_GPU_LOOKUP_OK;
    }
    return hits ? VG_GPU_LOOKUP_SEVERAL : VG_GPU_LOOKUP_NO_UUID;
}

static int vg_gpu_cmp_proc(const void *key, const void *elem)
{
    uint32_t x = *(const uint32_t *)key, y = ((const struct vg_gpu_proc *)elem)->pid;
    return x < y ? -1 : x > y;
}

const struct vg_gpu_proc *vg_gpu_find_proc(const struct vg_gpu *g, uint32_t pid)
{
    if (!g->nprocs)
        return NULL;
    return bsearch(&pid, g->procs, g->nprocs, sizeof *g->procs, vg_gpu_cmp_proc);
}
