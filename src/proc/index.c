/*
 * The index behind incremental scans (see proc.h): one small record per process the last scan
 * listed, sorted by pid, so that the next scan, which lists the pids in the same order, finds
 * each process's record by walking forward instead of searching. A holder's record also keeps
 * the numbers of its NVIDIA descriptors (in one pool per index), by which the next incremental
 * scan reads it again instead of walking its whole table.
 *
 * A scan builds the next index beside the current one and swaps them only when it completes;
 * a scan that fails leaves the index unprimed, so the one after it is a full scan.
 */
#include "proc/internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/parse.h"

/* One scan's records: the entries, sorted by pid, and their descriptor numbers (fds_off, nfds). */
struct vg_ix_scan {
    struct vg_proc_index_entry *v;
    size_t n, cap;
    unsigned *fds;
    size_t nfds, capfds;
};

struct vg_proc_index {
    struct vg_ix_scan cur;  /* the last completed scan */
    struct vg_ix_scan next; /* being built by the scan in progress */
    size_t cursor;          /* forward position in cur */
    bool primed;
    bool have_last_pid;
    pid_t last_pid;
};

int vg_proc_index_new(struct vg_proc_index **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void vg_proc_index_free(struct vg_proc_index *idx)
{
    if (!idx)
        return;
    free(idx->cur.v);
    free(idx->cur.fds);
    free(idx->next.v);
    free(idx->next.fds);
    free(idx);
}

bool vg_proc_index_primed(const struct vg_proc_index *idx)
{
    return idx && idx->primed;
}

size_t vg_proc_index_size(const struct vg_proc_index *idx)
{
    return idx && idx->primed ? idx->cur.n : 0;
}

void vg_proc_index_begin(struct vg_proc_index *idx)
{
    idx->next.n = 0;
    idx->next.nfds = 0;
    idx->cursor = 0;
}

const struct vg_proc_index_entry *vg_proc_index_prev(struct vg_proc_index *idx, pid_t pid)
{
    if (!idx->primed)
        return NULL;
    while (idx->cursor < idx->cur.n && idx->cur.v[idx->cursor].pid < pid)
        idx->cursor++;
    if (idx->cursor < idx->cur.n && idx->cur.v[idx->cursor].pid == pid)
        return &idx->cur.v[idx->cursor];
    return NULL;
}

bool vg_proc_index_new_pid(const struct vg_proc_index *idx, bool have_last, pid_t last, pid_t pid)
{
    if (!have_last || !idx->have_last_pid)
        return false;
    pid_t from = idx->last_pid;
    if (last >= from)
        return pid > from && pid <= last;
    /* The allocator wrapped around pid_max (or was moved back by a write to ns_last_pid): every
     * pid above the old mark and every one up to the new mark may have been allocated. */
    return pid > from || pid <= last;
}

int vg_proc_index_add(struct vg_proc_index *idx, pid_t pid, uint64_t ino, unsigned flags)
{
    struct vg_ix_scan *x = &idx->next;
    if (VG_ARRAY_GROW(x->v, x->cap, x->n + 1))
        return -ENOMEM;
    x->v[x->n++] = (struct vg_proc_index_entry){.pid = pid, .ino = ino, .flags = flags};
    return 0;
}

int vg_proc_index_add_fds(struct vg_proc_index *idx, const unsigned *fds, size_t n)
{
    struct vg_ix_scan *x = &idx->next;
    if (!x->n || !n || n > VG_PROC_IX_FDS_MAX)
        return 0;
    if (n > UINT32_MAX - x->nfds)
        return 0; /* no room to say where: the holder is walked in full next time */
    if (VG_ARRAY_GROW(x->fds, x->capfds, x->nfds + n))
        return -ENOMEM;
    struct vg_proc_index_entry *e = &x->v[x->n - 1];
    e->fds_off = (uint32_t)x->nfds;
    e->nfds = (uint32_t)n;
    memcpy(x->fds + x->nfds, fds, n * sizeof(*fds));
    x->nfds += n;
    return 0;
}

const unsigned *vg_proc_index_fds(const struct vg_proc_index *idx,
                                  const struct vg_proc_index_entry *e, size_t *n)
{
    *n = e->nfds;
    return e->nfds ? idx->cur.fds + e->fds_off : NULL;
}

void vg_proc_index_commit(struct vg_proc_index *idx, bool have_last, pid_t last)
{
    struct vg_ix_scan t = idx->cur;
    idx->cur = idx->next;
    idx->next = t; /* its buffers are reused by the next scan */
    idx->next.n = 0;
    idx->next.nfds = 0;
    idx->cursor = 0;
    idx->have_last_pid = have_last;
    idx->last_pid = last;
    idx->primed = true;
}

void vg_proc_index_abort(struct vg_proc_index *idx)
{
    idx->primed = false;
    idx->cur.n = idx->next.n = 0;
    idx->cur.nfds = idx->next.nfds = 0;
    idx->cursor = 0;
    idx->have_last_pid = false;
}

int vg_proc_parse_loadavg_pid(const char *buf, size_t len, pid_t *pid)
{
    /* "0.35 1.40 2.03 2/80 19215\n": the fifth field is the pid allocated last */
    size_t i = 0;
    for (int field = 0; field < 4; field++) {
        while (i < len && buf[i] != ' ')
            i++;
        if (i == len)
            return -EINVAL;
        while (i < len && buf[i] == ' ')
            i++;
    }
    long long v = 0;
    size_t start = i;
    while (i < len && buf[i] >= '0' && buf[i] <= '9') {
        v = v * 10 + (buf[i] - '0');
        if (v > VG_PID_MAX)
            return -EINVAL;
        i++;
    }
    if (i == start || (i < len && buf[i] != '\n' && buf[i] != ' '))
        return -EINVAL;
    *pid = (pid_t)v;
    return 0;
}
