/*
 * /proc/PID/stat (and task/TID/stat): identity and job structure.
 *
 * The line is "pid (comm) state ppid pgrp session tty_nr tpgid flags ... starttime ...". comm
 * is whatever the process set with prctl(PR_SET_NAME) and may hold spaces, '(' , ')' and
 * newlines, so it is taken as everything between the first '(' and the LAST ')', and the
 * numbered fields are split only after that last ')': nothing the kernel writes there
 * contains a ')'. The buffer need not be NUL-terminated.
 */
#include "proc/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

/* Fields 3..22 of stat, the last one required being starttime (22); rss (24) is read when the
 * line has it (every kernel writes it; a short line only loses the figure). */
#define VG_STAT_FIELDS_AFTER_COMM 20
#define VG_STAT_FIELDS_WITH_RSS 22

struct vg_stat_field {
    const char *s;
    size_t n;
};

/* Locate comm; *rest is the byte after the last ')'. */
static int vg_stat_split(const char *buf, size_t len, const char **comm, size_t *comm_len,
                         const char **rest)
{
    const char *open = memchr(buf, '(', len);
    const char *close = memrchr(buf, ')', len);
    if (!open || !close || close < open)
        return -EINVAL;
    *comm = open + 1;
    *comm_len = (size_t)(close - open - 1);
    *rest = close + 1;
    return 0;
}

/* Split the space-separated fields after comm, up to max of them, stopping at a newline. */
static size_t vg_stat_fields(const char *s, const char *end, struct vg_stat_field *f, size_t max)
{
    size_t n = 0;
    while (s < end && n < max) {
        while (s < end && *s == ' ')
            s++;
        if (s >= end || *s == '\n' || *s == '\0')
            break;
        const char *b = s;
        while (s < end && *s != ' ' && *s != '\n' && *s != '\0')
            s++;
        f[n].s = b;
        f[n].n = (size_t)(s - b);
        n++;
    }
    return n;
}

static int vg_stat_pid(const struct vg_stat_field *f, pid_t *out)
{
    uint64_t v;
    if (vg_parse_u64n(f->s, f->n, &v) || v > INT_MAX)
        return -EINVAL;
    *out = (pid_t)v;
    return 0;
}

int vg_proc_parse_stat(const char *buf, size_t len, struct vg_proc *p)
{
    const char *comm, *rest;
    size_t comm_len;
    if (!buf || vg_stat_split(buf, len, &comm, &comm_len, &rest))
        return -EINVAL;

    /* "pid " before the '(' */
    const char *open = comm - 1;
    size_t pid_len = (size_t)(open - buf);
    if (pid_len < 2 || buf[pid_len - 1] != ' ')
        return -EINVAL;
    struct vg_stat_field pidf = {buf, pid_len - 1};
    pid_t pid;
    if (vg_stat_pid(&pidf, &pid))
        return -EINVAL;

    struct vg_stat_field f[VG_STAT_FIELDS_WITH_RSS];
    size_t nf = vg_stat_fields(rest, buf + len, f, VG_STAT_FIELDS_WITH_RSS);
    if (nf < VG_STAT_FIELDS_AFTER_COMM)
        return -EINVAL;
    /* f[k] is stat field k + 3 */
    if (f[0].n != 1)
        return -EINVAL;
    pid_t ppid, pgid, sid;
    uint64_t flags, start, utime, stime;
    int64_t tty;
    if (vg_stat_pid(&f[1], &ppid) || vg_stat_pid(&f[2], &pgid) || vg_stat_pid(&f[3], &sid))
        return -EINVAL;
    /* tty_nr is printed as a signed int */
    if (vg_parse_i64n(f[4].s, f[4].n, INT_MIN, INT_MAX, &tty))
        return -EINVAL;
    if (vg_parse_u64n(f[6].s, f[6].n, &flags) || flags > UINT_MAX)
        return -EINVAL;
    if (vg_parse_u64n(f[11].s, f[11].n, &utime) || vg_parse_u64n(f[12].s, f[12].n, &stime) ||
        utime > UINT64_MAX - stime)
        return -EINVAL;
    if (vg_parse_u64n(f[19].s, f[19].n, &start))
        return -EINVAL;
    uint64_t rss = 0;
    bool rss_known = nf > 21 && vg_parse_u64n(f[21].s, f[21].n, &rss) == 0;

    char *c = vg_proc_strndup(comm, comm_len);
    if (!c)
        return -ENOMEM;
    free(p->comm);
    p->comm = c;
    if (p->pid == 0)
        p->pid = pid;
    p->state = f[0].s[0];
    p->ppid = ppid;
    p->pgid = pgid;
    p->sid = sid;
    p->flags = (unsigned)flags;
    p->tty_nr = (int)tty;
    p->cpu_ticks = utime + stime;
    p->start_ticks = start;
    p->rss_known = rss_known;
    p->rss_pages = rss;
    p->known |= VG_PROC_K_STAT;
    return 0;
}

int vg_proc_parse_stat_state(const char *buf, size_t len, char *state)
{
    const char *comm, *rest;
    size_t comm_len;
    if (!buf || vg_stat_split(buf, len, &comm, &comm_len, &rest))
        return -EINVAL;
    struct vg_stat_field f[1];
    if (vg_stat_fields(rest, buf + len, f, 1) != 1 || f[0].n != 1)
        return -EINVAL;
    *state = f[0].s[0];
    return 0;
}
