/*
 * The job's process tree as /proc shows it: one process's identity (pid + start time), and
 * every live descendant of a process. We are the job's child subreaper, so orphaned and
 * double-forked workers are re-parented to us and stay descendants; setsid() changes nothing
 * to parentage. A zombie counts as alive only while one of its threads still runs (a "zombie
 * leader" keeps its threads' descriptors, and so its GPU).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "act/job.h"
#include "proc/proc.h"
#include "util/array.h"
#include "util/file.h"
#include "util/parse.h"

int vg_job_procs_add(struct vg_job_procs *ps, const struct vg_job_proc *p)
{
    if (VG_ARRAY_GROW(ps->v, ps->cap, ps->n + 1))
        return -ENOMEM;
    ps->v[ps->n++] = *p;
    return 0;
}

bool vg_job_procs_has(const struct vg_job_procs *ps, pid_t pid, uint64_t start)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->v[i].pid == pid && (start == 0 || ps->v[i].start == 0 || ps->v[i].start == start))
            return true;
    return false;
}

void vg_job_procs_release(struct vg_job_procs *ps)
{
    free(ps->v);
    ps->v = NULL;
    ps->n = ps->cap = 0;
}

/* One stat line through proc/'s parser (the one that knows comm may hold ')' and spaces).
 * comm is kept for messages only: cut to what fits (the kernel's is 15 bytes). */
static int vg_job_parse_stat(const char *buf, size_t len, struct vg_job_proc *p, pid_t *ppid)
{
    struct vg_proc vp;
    memset(&vp, 0, sizeof(vp));
    int rc = vg_proc_parse_stat(buf, len, &vp);
    if (rc) {
        vg_proc_release(&vp);
        return rc;
    }
    snprintf(p->comm, sizeof(p->comm), "%s", vp.comm);
    p->state = vp.state;
    p->start = vp.start_ticks;
    if (ppid)
        *ppid = vp.ppid;
    vg_proc_release(&vp);
    return 0;
}

int vg_job_proc_read(int proc_fd, pid_t pid, struct vg_job_proc *p, pid_t *ppid)
{
    char path[32], buf[1024];
    size_t len;
    snprintf(path, sizeof(path), "%ld/stat", (long)pid);
    memset(p, 0, sizeof(*p));
    int rc = vg_file_read_small(proc_fd, path, buf, sizeof(buf), &len);
    if (rc)
        return rc == -ENOENT || rc == -ESRCH ? -ENOENT : rc;
    p->pid = pid;
    return vg_job_parse_stat(buf, len, p, ppid);
}

/* A zombie leader still runs while one of its threads does. */
static bool vg_job_zombie_live(int proc_fd, pid_t pid)
{
    char path[32];
    snprintf(path, sizeof(path), "%ld/task", (long)pid);
    int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return false;
    }
    bool live = false;
    struct dirent *de;
    while (!live && (de = readdir(d)) != NULL) {
        uint64_t tid;
        if (vg_parse_u64(de->d_name, &tid) || tid > INT32_MAX)
            continue;
        char sp[64], buf[1024];
        size_t len;
        snprintf(sp, sizeof(sp), "%ld/task/%llu/stat", (long)pid, (unsigned long long)tid);
        struct vg_job_proc t;
        if (vg_file_read_small(proc_fd, sp, buf, sizeof(buf), &len) == 0 &&
            vg_job_parse_stat(buf, len, &t, NULL) == 0 && t.state != 'Z' && t.state != 'X')
            live = true;
    }
    closedir(d);
    return live;
}

bool vg_job_proc_live(int proc_fd, const struct vg_job_proc *p)
{
    return (p->state != 'Z' && p->state != 'X') || vg_job_zombie_live(proc_fd, p->pid);
}

struct vg_job_node {
    struct vg_job_proc p;
    pid_t ppid;
    bool in;
};

int vg_job_descendants(int proc_fd, pid_t root, struct vg_job_procs *out, struct vg_err *err)
{
    int fd = openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return vg_err_set(err, -errno, "cannot open /proc: %s", strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return vg_err_set(err, -errno, "cannot read /proc: %s", strerror(errno));
    }
    struct vg_job_node *nodes = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t pid;
        if (vg_parse_u64(de->d_name, &pid) || pid == 0 || pid > INT32_MAX)
            continue;
        struct vg_job_node nd = {0};
        if (vg_job_proc_read(proc_fd, (pid_t)pid, &nd.p, &nd.ppid) != 0)
            continue; /* gone meanwhile, or unreadable: not ours to judge */
        if (VG_ARRAY_GROW(nodes, cap, n + 1)) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        nodes[n++] = nd;
    }
    /* Grow the set from root until it stops changing (the tree is shallow); parents are
     * found by binary search over the pid-sorted table (p.pid leads a node). */
    qsort(nodes, n, sizeof(*nodes), vg_array_cmp_pid);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            if (nodes[i].in || nodes[i].p.pid == root)
                continue;
            bool parent_in = nodes[i].ppid == root;
            if (!parent_in) {
                struct vg_job_node key = {.p = {.pid = nodes[i].ppid}};
                const struct vg_job_node *par =
                    bsearch(&key, nodes, n, sizeof(*nodes), vg_array_cmp_pid);
                parent_in = par && par->in;
            }
            if (parent_in) {
                nodes[i].in = true;
                changed = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!nodes[i].in)
            continue;
        if (!vg_job_proc_live(proc_fd, &nodes[i].p))
            continue;
        if (vg_job_procs_add(out, &nodes[i].p)) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
out:
    free(nodes);
    closedir(d);
    return rc;
}
