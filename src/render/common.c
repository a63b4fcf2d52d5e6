/*
 * Words shared by the text and JSON renderers, so both name things the same way.
 */
#include "render/render.h"

#include <stdio.h>
#include <string.h>

#include "gpu/nvml_abi.h"

const char *vg_render_seen(unsigned seen)
{
    if ((seen & VG_SEEN_NVML) && (seen & VG_SEEN_FD))
        return "both";
    return (seen & VG_SEEN_NVML) ? "nvml" : "fd";
}

const char *vg_render_compute_mode(unsigned mode)
{
    switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT: return "default";
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD: return "exclusive_thread";
    case NVML_COMPUTEMODE_PROHIBITED: return "prohibited";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: return "exclusive_process";
    default: return "unknown";
    }
}

const char *vg_render_types_short(unsigned types)
{
    static const char *const names[8] = {"-", "C", "G", "C+G", "M", "C+M", "G+M", "C+G+M"};
    return names[types & 7];
}

void vg_render_short_uuid(const char *uuid, char *out, size_t n)
{
    if (!uuid) {
        snprintf(out, n, "n/a");
        return;
    }
    /* "GPU-" or "MIG-" then 8 hex digits is enough to tell GPUs apart and to type. */
    const char *dash = strchr(uuid, '-');
    size_t keep = dash ? (size_t)(dash - uuid) + 1 + 8 : 12;
    if (keep > strlen(uuid))
        keep = strlen(uuid);
    if (keep >= n)
        keep = n - 1;
    memcpy(out, uuid, keep);
    out[keep] = '\0';
}
