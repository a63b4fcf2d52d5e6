/*
 * Phase two of the scan: everything about one process except its fds, read relative to its
 * pid directory fd, for the few processes that hold an NVIDIA node or that the caller asked
 * about. Each file is optional: a missing or unreadable one leaves its fields unknown. What
 * ends the process's reading early is evidence that it exited: stat missing or empty, or any
 * later file missing while stat is gone too (a fake or odd procfs may simply lack a file).
 * Denied files set c->denied so the scan counts the process once in n_denied.
 *
 * With a cache (a long-running command), stat, status, exe and threads are read every time and
 * the stable files (cmdline, environ, cgroup, maps) only when the cache does not know the
 * process.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/file.h"

typedef int (*vg_parse_fn)(const char *buf, size_t len, struct vg_proc *p);

/* Sort out a failed read: 0 to go on with the field unknown, or -ENOENT / -ENOMEM. */
static int vg_detail_failed(struct vg_proc_ctx *c, int pid_fd, int rc)
{
    if (rc == -ENOMEM)
        return rc;
    if (vg_proc_err_gone(rc))
        return vg_proc_gone(pid_fd) ? -ENOENT : 0;
    if (vg_proc_err_denied(rc))
        c->denied = true;
    return 0;
}

static bool vg_is_zombie(const struct vg_proc *p)
{
    return (p->known & VG_PROC_K_STAT) && (p->state == 'Z' || p->state == 'X');
}

/* Read and parse one file into p. empty_unknown: an empty file from a zombie says nothing
 * (its memory is gone), so the field stays unknown rather than "nothing set". */
static int vg_detail_file(struct vg_proc_ctx *c, int pid_fd, const char *name, size_t max,
                          vg_parse_fn parse, bool empty_unknown, struct vg_proc *p)
{
    int rc = vg_proc_ctx_read(c, pid_fd, name, max);
    if (rc < 0)
        return vg_detail_failed(c, pid_fd, rc);
    if (empty_unknown && c->file.len == 0 && vg_is_zombie(p))
        return 0;
    rc = parse(vg_buf_str(&c->file), c->file.len, p);
    return rc == -ENOMEM ? rc : 0;
}

static int vg_detail_stat(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    char small[512];
    size_t len = 0;
    const char *buf = small;
    int rc = vg_file_read_small(pid_fd, "stat", small, sizeof(small), &len);
    if (rc == -E2BIG) {
        rc = vg_proc_ctx_read(c, pid_fd, "stat", VG_PROC_STAT_MAX);
        buf = c->file.data;
        len = c->file.len;
    }
    if (vg_proc_err_gone(rc) || (rc == 0 && len == 0))
        return -ENOENT;
    if (rc < 0)
        return vg_detail_failed(c, pid_fd, rc);
    rc = vg_proc_parse_stat(buf, len, p);
    return rc == -ENOMEM ? rc : 0;
}

/* Whether pid's directory exists under the procfs root; pid 0 (no parent, no session) counts
 * as alive, and so does an answer other than "no such entry", to never invent an orphan. */
static bool vg_pid_alive(int root_fd, pid_t pid)
{
    if (pid <= 0)
        return true;
    char name[16];
    vg_proc_pid_str(pid, name);
    return faccessat(root_fd, name, F_OK, 0) == 0 || errno != ENOENT;
}

/*
 * Whether the leader of a session or process group (pid) still runs. A leader that exited but
 * that its parent has not reaped is a zombie: its entry is still there, and so is its PID for
 * the group, yet the job it led has ended (a crashed main process under a launcher that does
 * not wait). A zombie leader whose other threads still run is a live process (zombie-holder's
 * case): status's Threads counts them. Unreadable files say nothing, so they count as alive,
 * never as an invented death.
 */
static bool vg_leader_alive(struct vg_proc_ctx *c, pid_t pid, bool *zombie)
{
    *zombie = false;
    if (pid <= 1)
        return true;
    if (!vg_pid_alive(c->root_fd, pid))
        return false;
    char path[32];
    vg_proc_pid_str(pid, path);
    size_t n = strlen(path);
    memcpy(path + n, "/stat", 6);
    struct vg_proc lead = {0};
    bool alive = true;
    if (vg_proc_ctx_read(c, c->root_fd, path, VG_PROC_STAT_MAX) == 0 &&
        vg_proc_parse_stat(vg_buf_str(&c->file), c->file.len, &lead) == 0 &&
        (lead.state == 'Z' || lead.state == 'X')) {
        memcpy(path + n, "/status", 8);
        if (vg_proc_ctx_read(c, c->root_fd, path, VG_PROC_STATUS_MAX) == 0 &&
            vg_proc_parse_status(vg_buf_str(&c->file), c->file.len, &lead) == 0 &&
            lead.threads_status == 1)
            alive = false;
        else if (lead.state == 'X')
            alive = false;
    }
    vg_proc_release(&lead);
    *zombie = !alive;
    return alive;
}

/*
 * Whether the parent lives, its session, and whether it is the init of its PID namespace:
 * how an orphan adopted by init, a subreaper or a container's init is told from a child of the
 * process that started it. Read fresh every scan (a parent may die). Liveness comes from
 * reading the parent's stat, so a live parent costs no separate check. A parent younger than the
 * process is not its parent (the parent died and its pid was reused between the two reads): then
 * nothing more is known, nor when its files cannot be read.
 */
static int vg_detail_parent(struct vg_proc_ctx *c, struct vg_proc *p)
{
    p->parent_alive = true;
    if (p->ppid <= 0)
        return 0;
    char path[32];
    vg_proc_pid_str(p->ppid, path);
    size_t n = strlen(path);
    struct vg_proc par = {0};
    memcpy(path + n, "/stat", 6);
    int rc = vg_proc_ctx_read(c, c->root_fd, path, VG_PROC_STAT_MAX);
    /* pid 1 is alive by definition, even in a procfs root without it (tests, chroots); a
     * missing stat in a directory that exists (an odd procfs) is not a death either */
    if (rc == -ENOENT && p->ppid != 1)
        p->parent_alive = vg_pid_alive(c->root_fd, p->ppid);
    if (rc == 0)
        rc = vg_proc_parse_stat(vg_buf_str(&c->file), c->file.len, &par);
    if (rc == 0 && par.start_ticks <= p->start_ticks) {
        memcpy(path + n, "/status", 8);
        if (vg_proc_ctx_read(c, c->root_fd, path, VG_PROC_STATUS_MAX) == 0 &&
            (rc = vg_proc_parse_status(vg_buf_str(&c->file), c->file.len, &par)) == 0 &&
            par.nnspid > 0) {
            p->parent_known = true;
            p->parent_sid = par.sid;
            p->parent_pgid = par.pgid;
            p->parent_ns_init = par.nspid[par.nnspid - 1] == 1;
        }
    }
    vg_proc_release(&par);
    return rc == -ENOMEM ? rc : 0;
}

/* The files whose content a (pid, start time, comm) cannot change: what the cache keeps. */
static const struct vg_detail_def {
    const char *name;
    size_t max;
    vg_parse_fn parse;
    bool empty_unknown;
} vg_stable_files[] = {
    {"cmdline", VG_PROC_CMDLINE_MAX, vg_proc_parse_cmdline, false},
    {"environ", VG_PROC_ENVIRON_MAX, vg_proc_parse_environ, true},
    {"cgroup", VG_PROC_CGROUP_MAX, vg_proc_parse_cgroup, false},
    {"maps", VG_PROC_MAPS_MAX, vg_proc_parse_maps, true},
};
#define VG_MAPS_FILE (sizeof(vg_stable_files) / sizeof(vg_stable_files[0]) - 1)

static int vg_detail_def_read(struct vg_proc_ctx *c, int pid_fd, const struct vg_detail_def *d,
                              struct vg_proc *p)
{
    return vg_detail_file(c, pid_fd, d->name, d->max, d->parse, d->empty_unknown, p);
}

/* Command line, environment, cgroup, maps and user name: from the cache when it knows this
 * process (maps again when its NVIDIA descriptors changed), else read, and remembered; maps
 * not at all when phase one read them. */
static int vg_detail_stable(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    /* phase one read the maps already (scan.c), for the nodes mapped and the libraries */
    bool maps_read = (p->known & VG_PROC_K_MAPS) != 0;
    bool denied_before = c->denied, maps_stale = false;
    int hit = 0, rc = 0;
    c->denied = false;
    if (c->cache && (hit = vg_proc_cache_fill(c->cache, p, &c->denied, &maps_stale)) < 0)
        return hit;
    for (size_t i = 0; i < sizeof(vg_stable_files) / sizeof(vg_stable_files[0]) && !rc; i++)
        if ((!hit || (maps_stale && i == VG_MAPS_FILE)) && !(i == VG_MAPS_FILE && maps_read))
            rc = vg_detail_def_read(c, pid_fd, &vg_stable_files[i], p);
    if (!rc && (p->known & VG_PROC_K_STATUS) && !(p->known & VG_PROC_K_USER)) {
        rc = vg_proc_user_name(c, p->uid, &p->user);
        if (!rc)
            p->known |= VG_PROC_K_USER;
    }
    if (!rc && c->cache && (!hit || maps_stale))
        rc = vg_proc_cache_store(c->cache, p, c->denied);
    c->denied = c->denied || denied_before;
    return rc;
}

int vg_proc_read_details(struct vg_proc_ctx *c, int pid_fd, struct vg_proc *p)
{
    int rc = vg_detail_stat(c, pid_fd, p);
    if (rc)
        return rc;
    rc = vg_detail_file(c, pid_fd, "status", VG_PROC_STATUS_MAX, vg_proc_parse_status, false, p);
    if (rc)
        return rc;
    rc = vg_detail_stable(c, pid_fd, p);
    if (rc)
        return rc;
    /* never cached: an exec under the same name and pid (or prctl PR_SET_MM_EXE_FILE) changes
     * it, and it is what infrastructure is judged by (act/infra.h) */
    if ((rc = vg_proc_read_exe(pid_fd, p, &c->denied)) < 0)
        return rc;

    rc = vg_proc_read_threads(c, pid_fd, p);
    if (rc < 0 && (rc = vg_detail_failed(c, pid_fd, rc)) < 0)
        return rc;
    if (p->known & VG_PROC_K_STAT) {
        /* a process's own leadership says nothing of another leader, and it runs */
        p->sid_alive = p->sid == p->pid || vg_leader_alive(c, p->sid, &p->sid_zombie);
        p->pgid_alive = p->pgid == p->pid || vg_leader_alive(c, p->pgid, &p->pgid_zombie);
        if ((rc = vg_detail_parent(c, p)) < 0)
            return rc;
    }
    return 0;
}

int vg_proc_read_cpu(int proc_root_fd, pid_t pid, uint64_t start_ticks, uint64_t *cpu_ticks)
{
    char path[32];
    vg_proc_pid_str(pid, path);
    size_t n = strlen(path);
    memcpy(path + n, "/stat", 6);
    /* A stat line is a few hundred bytes; a comm full of odd bytes cannot make it longer
     * than this, and a longer one is an error rather than a cut. */
    char buf[1024];
    size_t len = 0;
    int rc = vg_file_read_small(proc_root_fd, path, buf, sizeof(buf), &len);
    if (rc)
        return vg_proc_err_gone(rc) ? -ESRCH : rc;
    if (len == 0)
        return -ESRCH;
    struct vg_proc now = {0};
    rc = vg_proc_parse_stat(buf, len, &now);
    if (rc == 0 && now.start_ticks != start_ticks)
        rc = -ESRCH;
    if (rc == 0)
        *cpu_ticks = now.cpu_ticks;
    vg_proc_release(&now);
    return rc;
}

int vg_proc_alive(const char *proc_root, pid_t pid, bool start_known, uint64_t start_ticks)
{
    const char *root = proc_root && *proc_root ? proc_root : "/proc";
    char path[4096 + 32], buf[1024]; /* buf: as in vg_proc_read_cpu */
    int n = snprintf(path, sizeof(path), "%s/%d/stat", root, (int)pid);
    if (n < 0 || (size_t)n >= sizeof(path) || pid <= 0)
        return 0; /* no such path can name a process */
    size_t len = 0;
    int rc = vg_file_read_small(AT_FDCWD, path, buf, sizeof(buf), &len);
    if (rc == -ENOENT || rc == -ESRCH || (rc == 0 && len == 0))
        return 0;
    if (rc != 0)
        return rc;
    if (!start_known)
        return 1;
    struct vg_proc now = {0};
    rc = vg_proc_parse_stat(buf, len, &now);
    if (rc == 0)
        rc = now.start_ticks == start_ticks;
    vg_proc_release(&now);
    return rc;
}
