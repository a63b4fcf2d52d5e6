/*
 * Renderers turn a snapshot into text: a table for people, JSON for scripts. They never read
 * the system; everything comes from the snapshot. Output is appended to a caller-owned
 * struct vg_buf so the command decides where it goes.
 */
#ifndef VG_RENDER_RENDER_H
#define VG_RENDER_RENDER_H

#include <stdbool.h>

#include "model/snapshot.h"
#include "rules/rules.h"
#include "util/buf.h"
#include "util/text.h" /* vg_text_short_uuid(), which renderers and rules share */

#define VG_JSON_SCHEMA_STATUS "vramguard.status/1"

struct vg_render_opts {
    bool color;
    unsigned width; /* terminal columns to fit the command column into; 0 = no limit */
    bool verbose;   /* --verbose: name what could not be read */
};

int vg_render_status_text(const struct vg_snapshot *snap, const struct vg_render_opts *ro,
                          struct vg_buf *out);
int vg_render_status_json(const struct vg_snapshot *snap, const struct vg_render_opts *ro,
                          struct vg_buf *out);

/* Shared vocabulary, so text and JSON say the same words. */
/* How a holder was seen: "both" (the driver lists it and it holds the node), "nvml", "fd" (the
 * node only, by a descriptor and perhaps a mapping too), "map" (the node only, mapped only). */
const char *vg_render_seen(unsigned seen);
/* The same in words: "driver and device node", "driver only", "device node only", "device node
 * only (mapped)". */
const char *vg_render_seen_words(unsigned seen);
/* Why processes could not be read, from the causes the scan saw (VG_PROC_ACC_*): "run as root
 * to see other users' processes", "vramguard lacks CAP_SYS_PTRACE ...". Appended to out. */
void vg_render_access_hint(struct vg_buf *out, unsigned access);
/* What a VG_SNAP_UNCHECKED_* bit means, as a phrase ("the driver's process list failed"). */
const char *vg_render_unchecked_text(unsigned bit);
/* What the snapshot could not read (processes, descriptor tables, holder environments) and
 * why, as one "Not seen: ..." line (nothing when everything was read); and as the JSON "unread"
 * object every document that judges carries. */
struct vg_style;
struct vg_json;
void vg_render_unread_text(struct vg_buf *out, const struct vg_snapshot *snap,
                           const struct vg_style *st);
void vg_render_unread_json(struct vg_json *j, const struct vg_snapshot *snap);
/* For --verbose: the processes whose open files could not be read, named (PID, owner, command)
 * as far as the scan could, with "and N more" past the scan's bound; nothing when none. */
void vg_render_unread_names(struct vg_buf *out, const struct vg_snapshot *snap,
                            const struct vg_style *st);
/* For --verbose: how the holders were found, after "scan: ": "kernel (a BPF task_file iterator
 * ...)" or "/proc (--scan=proc)" (proc_asked: the user chose /proc) or "/proc (the kernel scan
 * did not run: WHY)". */
void vg_render_scan_note(struct vg_buf *out, const struct vg_snapshot *snap, bool proc_asked);
/* A snapshot read from a record (--replay, model/record.h) says so before anything else: a line
 * naming the file and when it was recorded, that what follows is not this host now (nothing
 * for a live snapshot); and in JSON the "replay" member every document about a snapshot has,
 * {"file": FILE} or null. */
void vg_render_replay_text(struct vg_buf *out, const struct vg_snapshot *snap,
                           const struct vg_style *st);
void vg_render_replay_json(struct vg_json *j, const struct vg_snapshot *snap);
/* The VG_PROC_ACC_* causes as stable ids ("not-root", "no-ptrace", "no-dac-read", "hidepid",
 * "user-namespace", "unknown"), for JSON; bit is one of them. */
const char *vg_render_access_id(unsigned bit);
const char *vg_render_compute_mode(unsigned mode); /* "default", "exclusive_process", ... */
/* "C", "G", "M", "C+G"...; "-" when none. */
const char *vg_render_types_short(unsigned types);

/* Findings (doctor, check). The filter, when non-NULL, selects what to show. */

#define VG_JSON_SCHEMA_DOCTOR "vramguard.doctor/1"

struct vg_finding_filter {
    bool by_gpu;
    size_t gpu; /* index into the snapshot's GPU list */
    bool by_pid;
    pid_t pid;
};

bool vg_render_finding_selected(const struct vg_finding *f, const struct vg_finding_filter *flt);
/* One finding as doctor's and check's "findings" arrays have it (docs/json.md). */
void vg_render_finding_json(struct vg_json *j, const struct vg_snapshot *snap,
                            const struct vg_finding *f);

int vg_render_doctor_text(const struct vg_snapshot *snap, const struct vg_findings *fs,
                          const struct vg_finding_filter *flt, const struct vg_render_opts *ro,
                          struct vg_buf *out);
/* `doctor --list --json`: the rules, in run order, as a vramguard.rules/1 document. */
#define VG_JSON_SCHEMA_RULES "vramguard.rules/1"
int vg_render_rules_json(struct vg_buf *out);

int vg_render_doctor_json(const struct vg_snapshot *snap, const struct vg_findings *fs,
                          const struct vg_finding_filter *flt, struct vg_buf *out);

/* `visible`: how a CUDA_VISIBLE_DEVICES value resolves on this host. */
#include "model/visible.h"

#define VG_JSON_SCHEMA_VISIBLE "vramguard.visible/1"

int vg_render_visible_text(const struct vg_snapshot *snap, const struct vg_visible *v,
                           const char *value, const char *order, const struct vg_render_opts *ro,
                           struct vg_buf *out);
int vg_render_visible_json(const struct vg_snapshot *snap, const struct vg_visible *v,
                           const char *value, const char *order, struct vg_buf *out);

#endif
