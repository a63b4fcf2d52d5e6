/*
 * The Xid table (xid_table.h). Meanings and actions follow NVIDIA's Xid catalogue
 * (docs.nvidia.com/deploy/xid-errors: "Analyzing Xid Errors with the Xid Catalog", its
 * resolution buckets; the older "Xid Errors" table for the causes; "Dynamic Page Retirement"
 * and the row-remapping guide for 48, 63 and 64), written in our own words. The class is
 * vramguard's: what the GPU needs before the next job (docs/diagnoses.md, "xid").
 */
#include "rules/xid_table.h"

#include <errno.h>
#include <string.h>

#include "util/parse.h"

/* Sorted by code. */
static const struct vg_xid_info vg_xid_tab[] = {
    {8,
     "GPU stopped processing: a channel timed out (an application's work hung, or a "
     "driver fault)",
     VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {13,
     "graphics engine exception: an application's kernel faulted (an out-of-range "
     "access, an illegal instruction)",
     VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {31, "GPU memory page fault: an application touched memory it had not mapped",
     VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {32, "invalid or corrupted push buffer stream (the commands sent to the GPU)",
     VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {43, "GPU stopped processing: the driver reset a faulting application's channel",
     VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {45,
     "preemptive cleanup: the driver tore down a channel after an earlier error or a "
     "killed process",
     VG_XID_ACT_NONE, VG_XID_NOTED},
    {48, "double-bit ECC error: an uncorrectable memory error", VG_XID_ACT_RESET_GPU,
     VG_XID_WEDGED},
    {61, "internal micro-controller breakpoint or warning", VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {62, "internal micro-controller halt", VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {63, "ECC page retirement or row remapping recorded: pending until the GPU is reset",
     VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {64, "ECC page retirement or row remapping failed to be recorded", VG_XID_ACT_CHECK_HW,
     VG_XID_WEDGED},
    {68, "video decoder (NVDEC) exception", VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {69, "graphics engine class error: an application's invalid command", VG_XID_ACT_RESTART_APP,
     VG_XID_NOTED},
    {74, "NVLink error", VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {79, "GPU has fallen off the bus: the host can no longer reach it over PCIe", VG_XID_ACT_REBOOT,
     VG_XID_WEDGED},
    {92, "high single-bit ECC error rate (corrected)", VG_XID_ACT_NONE, VG_XID_NOTED},
    {94, "contained ECC error: the application that hit it was stopped, others go on",
     VG_XID_ACT_RESTART_APP, VG_XID_DIRTY},
    {95, "uncontained ECC error: every application on the GPU is affected", VG_XID_ACT_RESET_GPU,
     VG_XID_WEDGED},
    {109, "context switch timeout", VG_XID_ACT_RESTART_APP, VG_XID_NOTED},
    {119, "GSP RPC timeout: the GPU's system processor stopped answering the driver",
     VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {120, "GSP error: the GPU's system processor reported a fault", VG_XID_ACT_RESET_GPU,
     VG_XID_WEDGED},
    {121, "C2C link error (the chip-to-chip link of a Grace Hopper or Blackwell module)",
     VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {140, "unrecovered ECC error", VG_XID_ACT_RESET_GPU, VG_XID_WEDGED},
    {143, "GPU initialization failure", VG_XID_ACT_CHECK_HW, VG_XID_WEDGED},
    {154, "GPU recovery action changed: the driver says what recovery the GPU needs",
     VG_XID_ACT_RECOVERY, VG_XID_DIRTY},
};

const struct vg_xid_info *vg_xid_table(size_t *n)
{
    *n = sizeof(vg_xid_tab) / sizeof(vg_xid_tab[0]);
    return vg_xid_tab;
}

const struct vg_xid_info *vg_xid_find(unsigned code)
{
    size_t n;
    const struct vg_xid_info *t = vg_xid_table(&n);
    for (size_t i = 0; i < n && t[i].code <= code; i++)
        if (t[i].code == code)
            return &t[i];
    return NULL;
}

/* Whether the list (already checked) names code. */
static bool vg_xid_listed(const char *list, unsigned code)
{
    const char *pos = list, *tok;
    size_t len;
    while (list && vg_parse_list_next(&pos, " ", &tok, &len)) {
        uint64_t v;
        if (len && vg_parse_u64n(tok, len, &v) == 0 && v == code)
            return true;
    }
    return false;
}

enum vg_xid_class vg_xid_class_of(const struct vg_rule_opts *opts, unsigned code, bool *overridden)
{
    *overridden = true;
    /* the most severe list that names it wins */
    if (opts && vg_xid_listed(opts->xid_wedged, code))
        return VG_XID_WEDGED;
    if (opts && vg_xid_listed(opts->xid_dirty, code))
        return VG_XID_DIRTY;
    if (opts && vg_xid_listed(opts->xid_noted, code))
        return VG_XID_NOTED;
    *overridden = false;
    const struct vg_xid_info *x = vg_xid_find(code);
    return x ? x->cls : VG_XID_DIRTY;
}

const char *vg_xid_class_str(enum vg_xid_class c)
{
    return c == VG_XID_WEDGED ? "wedged" : c == VG_XID_DIRTY ? "dirty" : "noted";
}

const char *vg_xid_action_id(enum vg_xid_action a)
{
    switch (a) {
    case VG_XID_ACT_RESTART_APP:
        return "restart-app";
    case VG_XID_ACT_RESET_GPU:
        return "reset-gpu";
    case VG_XID_ACT_REBOOT:
        return "reboot";
    case VG_XID_ACT_CHECK_HW:
        return "check-hardware";
    case VG_XID_ACT_RECOVERY:
        return "recovery-action";
    case VG_XID_ACT_NONE:
        break;
    }
    return "none";
}

const char *vg_xid_action_text(enum vg_xid_action a)
{
    switch (a) {
    case VG_XID_ACT_RESTART_APP:
        return "restart the application (its own fault; the GPU needs nothing)";
    case VG_XID_ACT_RESET_GPU:
        return "reset the GPU once nothing holds it";
    case VG_XID_ACT_REBOOT:
        return "reboot the node; if it repeats, check the GPU's seating, power and cooling";
    case VG_XID_ACT_CHECK_HW:
        return "reset the GPU, and have its hardware checked if it repeats";
    case VG_XID_ACT_RECOVERY:
        return "do what the driver's recovery action says (nvidia-smi -q, \"Recovery Action\")";
    case VG_XID_ACT_NONE:
        break;
    }
    return "nothing: informational";
}

int vg_xid_list_check(const char *list, struct vg_err *err)
{
    const char *pos = list, *tok;
    size_t len;
    while (vg_parse_list_next(&pos, " ", &tok, &len)) {
        uint64_t v;
        if (!len || vg_parse_u64n(tok, len, &v) != 0 || v == 0 || v > 0xffffu)
            return vg_err_set(err, -EINVAL, "'%.*s' is not an Xid code (1 to 65535)", (int)len,
                              tok);
    }
    return 0;
}
