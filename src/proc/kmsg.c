/*
 * The kernel log's Xid reports (kmsg.h): the strict parser of one /dev/kmsg record, the bounded
 * log of what was read, and the two readers (the device, record by record without blocking;
 * a stand-in file, line by line).
 *
 * The forms of the driver's line this parser takes (docs/diagnoses.md, "xid"):
 *     NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
 *     NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off ...
 *     NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping ...
 *     NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 0) ...
 *     NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff
 * (newer drivers, without pid and name, and the oldest ones without "PCI:").
 */
#include "proc/kmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/array.h"
#include "util/buf.h"
#include "util/parse.h"

#define VG_KMSG_PATH "/dev/kmsg"
/* A record of the device is at most 8 KiB (CONSOLE_EXT_LOG_MAX, its dictionary included). */
#define VG_KMSG_REC_MAX 8192
/* A stand-in file larger than this is refused (the real ring is a few MiB at most). */
#define VG_KMSG_FILE_MAX ((size_t)64 << 20)

/* ------------------------------------------------------------------------ the parser */

/* The span [s, end) up to the first c, or end. */
static const char *vg_kmsg_find(const char *s, const char *end, char c)
{
    const char *p = memchr(s, c, (size_t)(end - s));
    return p ? p : end;
}

/* "PRIO,SEQ,TIMESTAMP,FLAGS[,MORE...]" over [s, end): the numbers into out. */
static int vg_kmsg_prefix(const char *s, const char *end, struct vg_kmsg_xid_view *out,
                          unsigned *facility, struct vg_err *err)
{
    uint64_t v[3];
    for (int i = 0; i < 3; i++) {
        const char *comma = vg_kmsg_find(s, end, ',');
        if (comma == end || vg_parse_u64n(s, (size_t)(comma - s), &v[i]) != 0)
            return vg_err_set(err, -EINVAL,
                              "a kernel log record's %s is not a number followed by ','",
                              i == 0   ? "priority"
                              : i == 1 ? "sequence number"
                                       : "timestamp");
        s = comma + 1;
    }
    if (s == end)
        return vg_err_set(err, -EINVAL, "a kernel log record has no flags field");
    if (v[0] > 0xffffu)
        return vg_err_set(err, -EINVAL, "a kernel log record's priority is out of range");
    out->level = (unsigned)(v[0] & 7);
    *facility = (unsigned)(v[0] >> 3);
    out->seq = v[1];
    out->ts_us = v[2];
    return 0;
}

/* What follows "<code>, " in an Xid line: an optional "pid=", an optional "name=", then the
 * message. */
static int vg_kmsg_xid_tail(const char *s, const char *end, struct vg_kmsg_xid_view *out,
                            struct vg_err *err)
{
    if (vg_parse_starts(s, (size_t)(end - s), "pid=")) {
        const char *v = s + 4, *comma = vg_kmsg_find(v, end, ',');
        size_t n = (size_t)(comma - v);
        uint64_t pid;
        if (vg_parse_is(v, n, "<unknown>") || vg_parse_is(v, n, "'<unknown>'")) {
            out->pid_known = false;
        } else if (vg_parse_u64n(v, n, &pid) == 0 && pid > 0 && pid <= VG_PID_MAX) {
            out->pid_known = true;
            out->pid = (pid_t)pid;
        } else {
            return vg_err_set(err, -EINVAL, "an Xid report's pid= is neither a PID nor <unknown>");
        }
        s = comma;
        if (s < end && (end - s < 2 || s[1] != ' '))
            return vg_err_set(err, -EINVAL, "an Xid report's pid= is not followed by ', '");
        s = s < end ? s + 2 : s;
    }
    if (vg_parse_starts(s, (size_t)(end - s), "name=")) {
        const char *v = s + 5, *stop = v;
        /* the name ends at the first ", " (a process name with one in it is cut there) */
        while (stop < end && !(stop[0] == ',' && stop + 1 < end && stop[1] == ' '))
            stop++;
        size_t n = (size_t)(stop - v);
        if (n && !vg_parse_is(v, n, "<unknown>") && !vg_parse_is(v, n, "'<unknown>'")) {
            out->name = v;
            out->name_len = n;
        }
        s = stop < end ? stop + 2 : stop;
    }
    out->msg = s;
    out->msg_len = (size_t)(end - s);
    return 0;
}

/* "NVRM: Xid (" already matched; s is after it. */
static int vg_kmsg_xid(const char *s, const char *end, struct vg_kmsg_xid_view *out,
                       struct vg_err *err)
{
    if (vg_parse_starts(s, (size_t)(end - s), "PCI:"))
        s += 4;
    const char *close = vg_kmsg_find(s, end, ')');
    if (close == end || vg_pci_parse(s, (size_t)(close - s), &out->pci) != 0)
        return vg_err_set(err, -EINVAL, "an Xid report's PCI address is malformed");
    s = close + 1;
    if (end - s < 2 || s[0] != ':' || s[1] != ' ')
        return vg_err_set(err, -EINVAL, "an Xid report's PCI address is not followed by ': '");
    s += 2;
    const char *comma = vg_kmsg_find(s, end, ',');
    uint64_t code;
    if (vg_parse_u64n(s, (size_t)(comma - s), &code) != 0 || code > 0xffffu)
        return vg_err_set(err, -EINVAL, "an Xid report's code is not a number");
    out->code = (unsigned)code;
    s = comma;
    if (s == end) {
        out->msg = s;
        return 0;
    }
    if (end - s < 2 || s[1] != ' ')
        return vg_err_set(err, -EINVAL, "an Xid report's code is not followed by ', '");
    return vg_kmsg_xid_tail(s + 2, end, out, err);
}

int vg_proc_parse_kmsg_xid(const char *rec, size_t len, struct vg_kmsg_xid_view *out,
                           struct vg_err *err)
{
    *out = (struct vg_kmsg_xid_view){0};
    const char *end = rec + len;
    const char *nl = vg_kmsg_find(rec, end, '\n');
    const char *semi = vg_kmsg_find(rec, nl, ';');
    if (semi == nl)
        return vg_err_set(err, -EINVAL, "a kernel log record has no ';' before its message");
    unsigned facility = 0;
    int rc = vg_kmsg_prefix(rec, semi, out, &facility, err);
    if (rc)
        return rc;
    /* Continuation lines (" KEY=VALUE", the record's dictionary) follow the message. */
    for (const char *p = nl; p < end;) {
        p++;
        if (p == end)
            break;
        if (*p != ' ')
            return vg_err_set(err, -EINVAL,
                              "a kernel log record's continuation line does "
                              "not start with a space");
        p = vg_kmsg_find(p, end, '\n');
    }
    const char *msg = semi + 1;
    static const char lead[] = "NVRM: Xid (";
    if (!vg_parse_starts(msg, (size_t)(nl - msg), lead))
        return VG_KMSG_REC_OTHER;
    /* User space may write to the log (as root), but never with the kernel's facility. */
    if (facility != 0)
        return VG_KMSG_REC_FOREIGN;
    rc = vg_kmsg_xid(msg + sizeof(lead) - 1, nl, out, err);
    return rc ? rc : VG_KMSG_REC_XID;
}

/* ------------------------------------------------------------------------ the log */

void vg_kmsg_log_init(struct vg_kmsg_log *log)
{
    *log = (struct vg_kmsg_log){0};
}

static void vg_kmsg_xid_release(struct vg_kmsg_xid *x)
{
    free(x->name);
    free(x->msg);
}

void vg_kmsg_log_release(struct vg_kmsg_log *log)
{
    for (size_t i = 0; i < log->ndevs; i++) {
        for (size_t k = 0; k < log->devs[i].nxid; k++)
            vg_kmsg_xid_release(&log->devs[i].xid[k]);
        free(log->devs[i].xid);
    }
    free(log->devs);
    free(log->path);
    free(log->why);
    vg_kmsg_log_init(log);
}

static char *vg_kmsg_dup(const char *s, size_t n)
{
    return strndup(s ? s : "", n > VG_KMSG_TEXT_MAX ? VG_KMSG_TEXT_MAX : n);
}

/* The device entry for pci: found, added, or NULL when VG_KMSG_DEVS_MAX are tracked already
 * (*oom set when adding ran out of memory). */
static struct vg_kmsg_xid_dev *vg_kmsg_dev(struct vg_kmsg_log *log, const struct vg_pci_addr *pci,
                                           bool *oom)
{
    for (size_t i = 0; i < log->ndevs; i++)
        if (vg_pci_same_device(&log->devs[i].pci, pci))
            return &log->devs[i];
    if (log->ndevs == VG_KMSG_DEVS_MAX)
        return NULL;
    struct vg_kmsg_xid_dev *d = VG_ARRAY_PUSH(log->devs, log->ndevs, log->devs_cap);
    if (!d) {
        *oom = true;
        return NULL;
    }
    *d = (struct vg_kmsg_xid_dev){.pci = *pci};
    d->pci.fn_known = false;
    d->pci.fn = 0;
    if (!(d->xid = calloc(VG_KMSG_XID_KEEP, sizeof(*d->xid)))) {
        log->ndevs--;
        *oom = true;
        return NULL;
    }
    return d;
}

static int vg_kmsg_keep(struct vg_kmsg_log *log, const struct vg_kmsg_xid_view *v)
{
    bool oom = false;
    struct vg_kmsg_xid_dev *d = vg_kmsg_dev(log, &v->pci, &oom);
    if (oom)
        return -ENOMEM;
    if (!d) {
        log->n_other_dev++;
        return 0;
    }
    struct vg_kmsg_xid x = {
        .seq = v->seq,
        .ts_us = v->ts_us,
        .code = v->code,
        .pid_known = v->pid_known,
        .pid = v->pid,
        .name = v->name ? vg_kmsg_dup(v->name, v->name_len) : NULL,
        .msg = vg_kmsg_dup(v->msg, v->msg_len),
    };
    if (!x.msg || (v->name && !x.name)) {
        vg_kmsg_xid_release(&x);
        return -ENOMEM;
    }
    if (d->nxid == VG_KMSG_XID_KEEP) {
        vg_kmsg_xid_release(&d->xid[0]);
        memmove(d->xid, d->xid + 1, (VG_KMSG_XID_KEEP - 1) * sizeof(*d->xid));
        d->nxid--;
    }
    d->xid[d->nxid++] = x;
    d->count++;
    size_t c = 0;
    while (c < d->ncodes && d->codes[c].code != v->code)
        c++;
    if (c == d->ncodes && d->ncodes < VG_KMSG_CODES_MAX)
        d->codes[d->ncodes++] = (struct vg_kmsg_code){.code = v->code};
    if (c < d->ncodes) {
        d->codes[c].count++;
        d->codes[c].last_ts_us = v->ts_us;
    } else {
        d->n_other_codes++;
    }
    return 0;
}

/* Sequence numbers: a gap, or a first record after the boot's first, is records lost. */
static void vg_kmsg_follow(struct vg_kmsg_log *log, uint64_t seq)
{
    if (!log->first_known) {
        log->first_known = true;
        log->first_seq = seq;
        if (seq > 0) {
            log->lost = true;
            log->n_lost += seq;
        }
    } else if (seq > log->last_seq + 1) {
        log->lost = true;
        log->n_lost += seq - log->last_seq - 1;
    }
    if (log->n_records == 0 || seq > log->last_seq)
        log->last_seq = seq;
}

int vg_kmsg_log_add(struct vg_kmsg_log *log, const char *rec, size_t len)
{
    struct vg_kmsg_xid_view v;
    struct vg_err err = VG_ERR_INIT;
    int kind = vg_proc_parse_kmsg_xid(rec, len, &v, &err);
    vg_err_release(&err);
    if (kind < 0) {
        log->n_malformed++;
        return 0;
    }
    vg_kmsg_follow(log, v.seq);
    log->n_records++;
    if (kind == VG_KMSG_REC_FOREIGN)
        log->n_foreign++;
    return kind == VG_KMSG_REC_XID ? vg_kmsg_keep(log, &v) : 0;
}

int vg_kmsg_log_scan(struct vg_kmsg_log *log, vg_kmsg_next_fn next, void *ctx)
{
    char *buf = malloc(VG_KMSG_REC_MAX);
    if (!buf)
        return -ENOMEM;
    int rc = 0;
    for (;;) {
        size_t len = 0;
        int r = next(ctx, buf, VG_KMSG_REC_MAX, &len);
        if (r == -EPIPE) {
            log->lost = true;
            continue;
        }
        if (r == -EAGAIN) {
            log->state = VG_KMSG_READ;
            break;
        }
        if (r < 0) {
            log->state = VG_KMSG_UNREADABLE;
            free(log->why);
            log->why = NULL;
            struct vg_buf b;
            vg_buf_init(&b, 0);
            vg_buf_printf(&b, "cannot read '%s': %s", log->path ? log->path : VG_KMSG_PATH,
                          strerror(-r));
            if (b.err || !(log->why = strdup(vg_buf_str(&b))))
                rc = -ENOMEM;
            vg_buf_release(&b);
            break;
        }
        if ((rc = vg_kmsg_log_add(log, buf, len)) != 0)
            break;
    }
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------------ the readers */

/* The device: one record per read(); EAGAIN at the end of the ring (O_NONBLOCK). */
static int vg_kmsg_next_dev(void *ctx, char *buf, size_t cap, size_t *len)
{
    int fd = *(int *)ctx;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n > 0) {
            *len = (size_t)n;
            return 0;
        }
        if (n == 0)
            return -EAGAIN; /* not the kernel's log (e.g. /dev/null): nothing more */
        if (errno == EINTR)
            continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

/* A stand-in file in memory: a record is a line and the lines after it that start with a
 * space. */
struct vg_kmsg_mem {
    const char *p, *end;
};

static int vg_kmsg_next_mem(void *ctx, char *buf, size_t cap, size_t *len)
{
    struct vg_kmsg_mem *m = ctx;
    while (m->p < m->end && *m->p == '\n')
        m->p++;
    if (m->p >= m->end)
        return -EAGAIN;
    const char *s = m->p, *e = vg_kmsg_find(s, m->end, '\n');
    while (e < m->end && e + 1 < m->end && e[1] == ' ')
        e = vg_kmsg_find(e + 1, m->end, '\n');
    m->p = e < m->end ? e + 1 : e;
    size_t n = (size_t)(e - s);
    if (n > cap)
        n = cap; /* longer than any record: cut, and it will not parse */
    memcpy(buf, s, n);
    *len = n;
    return 0;
}

static int vg_kmsg_unreadable(struct vg_kmsg_log *log, int code, struct vg_err *err)
{
    log->state = VG_KMSG_UNREADABLE;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "cannot open '%s': %s", log->path, strerror(code));
    if (code == EACCES || code == EPERM)
        vg_buf_adds(&b, " (the kernel log needs root or CAP_SYSLOG when kernel.dmesg_restrict "
                        "is 1)");
    else if (code == ENOENT)
        vg_buf_adds(&b, " (a container without the host's /dev/kmsg?)");
    int rc = b.err || !(log->why = strdup(vg_buf_str(&b)))
                 ? vg_err_set(err, -ENOMEM, "out of memory")
                 : 0;
    vg_buf_release(&b);
    return rc;
}

int vg_proc_read_kmsg(const char *path, struct vg_kmsg_log *log, struct vg_err *err)
{
    vg_kmsg_log_release(log);
    if (!(log->path = strdup(path ? path : VG_KMSG_PATH)))
        return vg_err_set(err, -ENOMEM, "out of memory");
    int fd = open(log->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return vg_kmsg_unreadable(log, errno, err);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return vg_kmsg_unreadable(log, e, err);
    }
    int rc;
    if (S_ISCHR(st.st_mode)) {
        rc = vg_kmsg_log_scan(log, vg_kmsg_next_dev, &fd);
    } else if (!S_ISREG(st.st_mode)) {
        close(fd);
        return vg_kmsg_unreadable(log, EINVAL, err);
    } else {
        struct vg_buf b;
        vg_buf_init(&b, VG_KMSG_FILE_MAX);
        char chunk[65536];
        ssize_t n;
        while ((n = read(fd, chunk, sizeof(chunk))) > 0 || (n < 0 && errno == EINTR))
            if (n > 0 && vg_buf_add(&b, chunk, (size_t)n) != 0)
                break;
        int e = n < 0 ? errno : b.err ? E2BIG : 0;
        if (e) {
            vg_buf_release(&b);
            close(fd);
            return vg_kmsg_unreadable(log, e, err);
        }
        struct vg_kmsg_mem m = {b.data, b.data + b.len};
        rc = vg_kmsg_log_scan(log, vg_kmsg_next_mem, &m);
        vg_buf_release(&b);
    }
    close(fd);
    return rc ? vg_err_set(err, rc, "out of memory while reading the kernel log") : 0;
}
