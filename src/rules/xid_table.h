/*
 * The Xid codes vramguard knows: one table (xid_table.c) of each code's meaning, the action
 * NVIDIA's Xid catalogue recommends, and the verdict class it gives a GPU: wedged (the GPU
 * needs a reset, a reboot or a hardware check before another job), dirty (the GPU works but
 * something of the failed job or a pending repair needs attention first) or noted (an
 * application's own fault: the GPU is fine). docs/diagnoses.md ("xid") shows the table and its
 * sources. A code the table lacks is dirty, said as unknown, never healthy by default.
 *
 * The class of a code can be changed per run (doctor's --xid-fatal, --xid-dirty, --xid-noted:
 * lists of codes in vg_rule_opts), so a site that treats Xid 13 as fatal, or 63 as noted, says
 * so once. Static data only; nothing here allocates.
 */
#ifndef VG_RULES_XID_TABLE_H
#define VG_RULES_XID_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "rules/rules.h"

enum vg_xid_class { VG_XID_NOTED, VG_XID_DIRTY, VG_XID_WEDGED };

/* NVIDIA's recommended immediate action (the catalogue's resolution buckets). */
enum vg_xid_action {
    VG_XID_ACT_NONE,        /* IGNORE: informational */
    VG_XID_ACT_RESTART_APP, /* RESTART_APP: the application's fault; restart it */
    VG_XID_ACT_RESET_GPU,   /* RESET_GPU: reset the GPU once nothing holds it */
    VG_XID_ACT_REBOOT,      /* RESTART_BM: reboot the node */
    VG_XID_ACT_CHECK_HW,    /* CHECK_MECHANICALS / CONTACT_SUPPORT: the hardware, its seating,
                             * power and cooling; the vendor if it repeats */
    VG_XID_ACT_RECOVERY,    /* XID_154_EVAL: do what the driver's recovery action field says */
};

struct vg_xid_info {
    unsigned code;
    const char *meaning; /* one line */
    enum vg_xid_action action;
    enum vg_xid_class cls; /* the default class */
};

/* The table, sorted by code. */
const struct vg_xid_info *vg_xid_table(size_t *n);
/* The entry of code, or NULL when the table lacks it. */
const struct vg_xid_info *vg_xid_find(unsigned code);
/* The class code has in this run: a list of opts first (--xid-fatal, --xid-dirty,
 * --xid-noted), else the table's, else VG_XID_DIRTY. *overridden says whether a list set it. */
enum vg_xid_class vg_xid_class_of(const struct vg_rule_opts *opts, unsigned code, bool *overridden);
/* "wedged", "dirty", "noted" */
const char *vg_xid_class_str(enum vg_xid_class c);
/* A stable id for JSON ("restart-app", "reset-gpu", "reboot", "check-hardware",
 * "recovery-action", "none") and a sentence for people. */
const char *vg_xid_action_id(enum vg_xid_action a);
const char *vg_xid_action_text(enum vg_xid_action a);
/* Whether list is a comma-separated list of Xid codes (1 to 65535; spaces around entries
 * allowed): 0, or -EINVAL naming the entry in err. */
int vg_xid_list_check(const char *list, struct vg_err *err);

#endif
