/*
 * The kernel's log, for the NVIDIA driver's Xid reports: the records of /dev/kmsg (one per
 * read(), "PRIO,SEQ,TIMESTAMP_US,FLAGS;MESSAGE" and continuation lines " KEY=VALUE"), of
 * which the driver's read "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has
 * fallen off the bus." (docs/diagnoses.md, "xid", lists the forms).
 *
 * One-shot commands read the ring from its start without blocking: the boot's history so far.
 * What could not be read is said (vg_kmsg_log.state, why), never taken as "no Xid"; records the
 * ring overwrote before they were read are counted as lost.
 *
 * Ownership: struct vg_kmsg_log owns its devices, their events and every string in them;
 * release it with vg_kmsg_log_release(). The parser's view points into the record it was
 * given and owns nothing.
 */
#ifndef VG_PROC_KMSG_H
#define VG_PROC_KMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"
#include "util/pci.h"

/* What vg_proc_parse_kmsg_xid() found in one record. */
enum vg_kmsg_rec {
    VG_KMSG_REC_OTHER = 0,   /* a well-formed record that is no Xid report */
    VG_KMSG_REC_XID = 1,     /* an Xid report of the kernel's: the view is filled */
    VG_KMSG_REC_FOREIGN = 2, /* an Xid report written by user space (a facility other than
                              * the kernel's): not the driver's, never counted */
};

/* One Xid report as the record has it; strings point into the record (not terminated). */
struct vg_kmsg_xid_view {
    uint64_t seq;   /* the record's sequence number */
    uint64_t ts_us; /* microseconds since boot */
    unsigned level; /* the record's log level (0-7) */
    struct vg_pci_addr pci;
    unsigned code; /* the Xid */
    bool pid_known;
    pid_t pid;        /* the process the driver names ("pid=1234"); not "<unknown>" */
    const char *name; /* "name=python": NULL when not given or "<unknown>" */
    size_t name_len;
    const char *msg; /* the rest of the message, as the record escapes it */
    size_t msg_len;
};

/* Parse one record (the bytes one read() of /dev/kmsg returns, its continuation lines
 * included, or one line of a stand-in file). Strict: a record whose prefix is malformed, or
 * whose "NVRM: Xid (" message does not follow one of the known forms, gives -EINVAL and a
 * one-line reason in err; no input crashes it. Returns enum vg_kmsg_rec or -EINVAL. */
int vg_proc_parse_kmsg_xid(const char *rec, size_t len, struct vg_kmsg_xid_view *out,
                           struct vg_err *err);

/* The last VG_KMSG_XID_KEEP Xids of each GPU are kept, with a count of them all, for at most
 * VG_KMSG_DEVS_MAX distinct PCI devices (reports of any further device are only counted). */
#define VG_KMSG_XID_KEEP 8
#define VG_KMSG_DEVS_MAX 64
/* Each device also counts its distinct codes, at most this many (further codes are counted in
 * n_other_codes): what a verdict needs even after many later Xids pushed an early one out. */
#define VG_KMSG_CODES_MAX 16
/* A process name or message longer than this is cut (the driver's are far shorter). */
#define VG_KMSG_TEXT_MAX 512

struct vg_kmsg_xid {
    uint64_t seq, ts_us;
    unsigned code;
    bool pid_known;
    pid_t pid;
    char *name; /* NULL when not given */
    char *msg;  /* never NULL */
};

struct vg_kmsg_code {
    unsigned code;
    uint64_t count;
    uint64_t last_ts_us; /* the last of them, microseconds since boot */
};

struct vg_kmsg_xid_dev {
    struct vg_pci_addr pci;
    uint64_t count;                               /* every Xid of this device read */
    struct vg_kmsg_code codes[VG_KMSG_CODES_MAX]; /* in the order first seen */
    size_t ncodes;
    uint64_t n_other_codes;  /* Xids of codes beyond VG_KMSG_CODES_MAX */
    struct vg_kmsg_xid *xid; /* the last ones, oldest first: nxid <= VG_KMSG_XID_KEEP */
    size_t nxid;
};

enum vg_kmsg_state {
    VG_KMSG_NOT_ASKED = 0, /* the command did not read the log (watch, serve, a replay of an
                            * older record): nothing is said about Xids */
    VG_KMSG_READ,          /* read to its end */
    VG_KMSG_UNREADABLE,    /* could not be opened or read: why says so */
};

struct vg_kmsg_log {
    enum vg_kmsg_state state;
    char *path; /* what was read (owned) */
    char *why;  /* VG_KMSG_UNREADABLE: one line; else NULL */
    struct vg_kmsg_xid_dev *devs;
    size_t ndevs, devs_cap;
    uint64_t n_records;   /* records read */
    uint64_t n_malformed; /* records that did not parse (skipped) */
    uint64_t n_foreign;   /* Xid reports from user space (skipped) */
    uint64_t n_other_dev; /* Xids of devices beyond VG_KMSG_DEVS_MAX (counted only) */
    /* Records the ring overwrote before they were read: a read that said so (EPIPE), a gap in
     * the sequence numbers, or a first record after the boot's first. n_lost counts those the
     * numbers show (a lower bound: EPIPE does not say how many). */
    bool lost;
    uint64_t n_lost;
    bool first_known;
    uint64_t first_seq; /* the first record read */
    uint64_t last_seq;
};

void vg_kmsg_log_init(struct vg_kmsg_log *log);
void vg_kmsg_log_release(struct vg_kmsg_log *log);

/* Add one record to log (parse, count, keep). 0 or -ENOMEM; a malformed record is counted,
 * not an error. */
int vg_kmsg_log_add(struct vg_kmsg_log *log, const char *rec, size_t len);

/* Where records come from: next() fills buf (cap bytes) with one record and its length and
 * returns 0, -EPIPE when records were overwritten since the last one (it is called again),
 * -EAGAIN at the end, or another negative errno for a failure. */
typedef int (*vg_kmsg_next_fn)(void *ctx, char *buf, size_t cap, size_t *len);
/* Read every record next() gives into log: its state becomes VG_KMSG_READ, or
 * VG_KMSG_UNREADABLE when next() fails before the end (what was read stays). 0 or
 * -ENOMEM. */
int vg_kmsg_log_scan(struct vg_kmsg_log *log, vg_kmsg_next_fn next, void *ctx);

/* Read the log at path (NULL: /dev/kmsg): a character device record by record, from the
 * ring's start and without blocking; any other file (a stand-in of tests) line by line, lines
 * that start with a space being continuation lines. A log that cannot be opened or read is
 * VG_KMSG_UNREADABLE with why set ("cannot open '/dev/kmsg': permission denied"). 0, or
 * -ENOMEM with err set. */
int vg_proc_read_kmsg(const char *path, struct vg_kmsg_log *log, struct vg_err *err);

#endif
