/*
 * How a CUDA_VISIBLE_DEVICES value, with CUDA_DEVICE_ORDER, resolves to physical GPUs on a host:
 * which GPU (or MIG device) a CUDA program sees as cuda:0, cuda:1, ..., where CUDA stops reading
 * the list and why. Pure: it reads only its arguments.
 *
 * The rules, as CUDA applies them (sources in visible.c):
 *   - unset: every GPU, in CUDA_DEVICE_ORDER; set but empty (or only "-1"): none;
 *   - entries are comma-separated; blanks around an entry are ignored;
 *   - an entry is an integer index into CUDA's enumeration order, a "GPU-" / "MIG-" UUID, or a
 *     unique prefix of one (including the "GPU-" part);
 *   - the list ends at the first entry that is not valid: a bad or negative index, an unknown
 *     or ambiguous UUID, an empty entry, a duplicate, or (conservatively) an entry whose form
 *     differs from the first entry's; everything after it is ignored;
 *   - integer indices follow CUDA_DEVICE_ORDER: FASTEST_FIRST (the default: higher compute
 *     capability first, ties by PCI bus id) or PCI_BUS_ID (bus order, i.e. NVML's and
 *     nvidia-smi's order);
 *   - a process can use one MIG device only: the first one the list names (a GPU in MIG mode
 *     named by index or GPU UUID stands for its first MIG device); later MIG entries are
 *     ignored.
 *
 * Ownership: struct vg_visible owns its arrays and strings; vg_visible_release() frees them.
 */
#ifndef VG_MODEL_VISIBLE_H
#define VG_MODEL_VISIBLE_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/gpu.h"
#include "util/err.h"

enum vg_vis_order { VG_ORDER_FASTEST_FIRST, VG_ORDER_PCI_BUS_ID };

enum vg_vis_problem {
    VG_VIS_OK,
    VG_VIS_EMPTY_ENTRY,    /* "0,,1" */
    VG_VIS_NEGATIVE,       /* "-1": the conventional way to hide every GPU */
    VG_VIS_BAD_INDEX,      /* not a number, or no such index */
    VG_VIS_UNKNOWN_UUID,   /* no GPU or MIG device has this UUID (prefix) */
    VG_VIS_AMBIGUOUS_UUID, /* the prefix matches several devices */
    VG_VIS_DUPLICATE,      /* names a device already in the list */
    VG_VIS_MIXED,          /* an index after UUIDs or a UUID after indices */
    VG_VIS_EXTRA_MIG,      /* a second MIG device: ignored, not a cut */
    VG_VIS_AFTER_CUT,      /* comes after the entry where CUDA stopped */
};

struct vg_vis_entry {
    char *text; /* the entry with surrounding blanks removed */
    enum vg_vis_problem problem;
    size_t gpu; /* index into the GPU list, when resolved */
    int mig;    /* MIG device index under it, or -1 */
};

struct vg_vis_device {
    size_t gpu; /* index into the GPU list */
    int mig;    /* MIG device index, or -1 for the whole GPU */
};

struct vg_visible {
    bool set; /* the variable was set */
    enum vg_vis_order order;
    bool order_invalid; /* CUDA_DEVICE_ORDER had a value CUDA ignores */
    struct vg_vis_entry *entries;
    size_t nentries;
    size_t cut;                    /* index of the entry CUDA stopped at; nentries when none */
    struct vg_vis_device *devices; /* cuda:0, cuda:1, ... */
    size_t ndevices, devices_cap;
    size_t *enum_order; /* CUDA's enumeration of the whole host: enum_order[i] is the GPU
                         * list index of CUDA ordinal i when the variable is unset */
    size_t nenum;
    bool order_differs; /* enum_order differs from NVML (nvidia-smi) order */
    char *corrected;    /* a value without the problems, or NULL when there are none */
};

/* value NULL = unset; order NULL = unset. */
int vg_visible_resolve(const char *value, const char *order, const struct vg_gpu_list *gpus,
                       struct vg_visible *out, struct vg_err *err);
void vg_visible_release(struct vg_visible *v);

/* "bad index", "unknown UUID", ... for messages. */
const char *vg_vis_problem_str(enum vg_vis_problem p);

/* Whether uuid is a well-formed NVML UUID, the only kind that may become (part of) a
 * CUDA_VISIBLE_DEVICES value: "GPU-" or "MIG-" then 8-4-4-4-12 hex digits, or the older MIG form
 * "MIG-GPU-" + those + "/GI/CI" (decimal). A driver's string is not trusted to be one: a comma
 * would split it into several entries, a blank or a control character would be cut or reach a
 * terminal. A suggested value (corrected) leaves out devices whose UUID is not well-formed, as
 * those whose UUID is unknown. */
bool vg_visible_uuid_ok(const char *uuid);

#endif
