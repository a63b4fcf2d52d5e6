/*
 * Words shared by the text and JSON renderers, so both name things the same way.
 */
#include "render/render.h"
#include "render/json.h"
#include "render/text.h"
#include "util/clock.h"

#include <stdio.h>
#include <string.h>

const char *vg_render_seen(unsigned seen)
{
    if ((seen & VG_SEEN_NVML) && (seen & VG_SEEN_NODE))
        return "both";
    if (seen & VG_SEEN_NVML)
        return "nvml";
    return (seen & VG_SEEN_FD) ? "fd" : "map";
}

const char *vg_render_seen_words(unsigned seen)
{
    if (seen & VG_SEEN_NVML)
        return (seen & VG_SEEN_NODE) ? "driver and device node" : "driver only";
    return (seen & VG_SEEN_FD) ? "device node only" : "device node only (mapped)";
}

const char *vg_render_compute_mode(unsigned mode)
{
    switch (mode) {
    case VG_COMPUTE_DEFAULT:
        return "default";
    case VG_COMPUTE_EXCLUSIVE_THREAD:
        return "exclusive_thread";
    case VG_COMPUTE_PROHIBITED:
        return "prohibited";
    case VG_COMPUTE_EXCLUSIVE_PROCESS:
        return "exclusive_process";
    default:
        return "unknown";
    }
}

const char *vg_render_types_short(unsigned types)
{
    static const char *const names[8] = {"-", "C", "G", "C+G", "M", "C+M", "G+M", "C+G+M"};
    return names[types & 7];
}

void vg_render_access_hint(struct vg_buf *out, unsigned access)
{
    if (access & VG_PROC_ACC_HIDEPID)
        vg_buf_adds(out, "/proc is mounted with hidepid: other users' processes are hidden; run "
                         "as root with CAP_SYS_PTRACE, or in the group the mount's gid= names");
    else if (access & VG_PROC_ACC_NOT_ROOT)
        vg_buf_adds(out, "vramguard is not root: run it as root to see other users' processes");
    else if (access & VG_PROC_ACC_USERNS)
        vg_buf_adds(out, "vramguard runs in a user namespace that does not map every user: run "
                         "it in the host's user namespace");
    else if (access & VG_PROC_ACC_NO_PTRACE)
        vg_buf_adds(out, "vramguard runs as root without CAP_SYS_PTRACE (a container?): other "
                         "users' descriptors and environments stay closed; grant it "
                         "(--cap-add SYS_PTRACE)");
    else if (access & VG_PROC_ACC_UNKNOWN)
        vg_buf_adds(out, "why could not be told (vramguard's own status is unreadable)");
    else
        vg_buf_adds(out, "although vramguard has root and CAP_SYS_PTRACE: a security module "
                         "(AppArmor, SELinux, Yama) or a process that is not dumpable refused");
}

const char *vg_render_access_id(unsigned bit)
{
    switch (bit) {
    case VG_PROC_ACC_NOT_ROOT:
        return "not-root";
    case VG_PROC_ACC_NO_PTRACE:
        return "no-ptrace";
    case VG_PROC_ACC_NO_DAC_READ:
        return "no-dac-read";
    case VG_PROC_ACC_HIDEPID:
        return "hidepid";
    case VG_PROC_ACC_USERNS:
        return "user-namespace";
    case VG_PROC_ACC_UNKNOWN:
        return "unknown";
    }
    return NULL;
}

const char *vg_render_unchecked_text(unsigned bit)
{
    switch (bit) {
    case VG_SNAP_UNCHECKED_DRIVER:
        return "the driver's view is unavailable";
    case VG_SNAP_UNCHECKED_LOST:
        return "the GPU is lost";
    case VG_SNAP_UNCHECKED_MEMORY:
        return "its memory figures could not be read";
    case VG_SNAP_UNCHECKED_PROCESSES:
        return "the driver's process list failed";
    case VG_SNAP_UNCHECKED_MINOR:
        return "its minor number is unknown, so its device node's "
               "holders cannot be told";
    case VG_SNAP_UNCHECKED_DESCRIPTORS:
        return "some processes' descriptors could not be read";
    case VG_SNAP_UNCHECKED_HUNG:
        return "a driver call for it did not return in time, so its "
               "figures and holders are unknown";
    }
    return "?";
}

void vg_render_replay_text(struct vg_buf *out, const struct vg_snapshot *snap,
                           const struct vg_style *st)
{
    if (!snap->replay)
        return;
    char ts[VG_CLOCK_ISO_SIZE];
    vg_clock_iso8601(snap->taken_at.tv_sec, ts, sizeof(ts));
    vg_buf_printf(out, "%sReplay%s of ", st->bold, st->reset);
    vg_text_escape_str(out, snap->replay, 0);
    vg_buf_printf(out, ", recorded %s: what vramguard saw then, not this host now.\n\n", ts);
}

void vg_render_replay_json(struct vg_json *j, const struct vg_snapshot *snap)
{
    vg_json_key(j, "replay");
    if (!snap->replay) {
        vg_json_null(j);
        return;
    }
    vg_json_obj_begin(j);
    vg_json_kstr(j, "file", snap->replay);
    vg_json_obj_end(j);
}

/* What could not be read at all, with its cause: every verdict above stands only for what was
 * seen. */
void vg_render_unread_text(struct vg_buf *out, const struct vg_snapshot *snap,
                           const struct vg_style *st)
{
    const struct vg_proc_table *t = &snap->procs;
    size_t envs = vg_snap_unread_envs(snap);
    bool hidepid = t->access & VG_PROC_ACC_HIDEPID;
    if (!t->n_fd_unread && !envs && !hidepid)
        return;
    vg_buf_printf(out, "%sNot seen:", st->yellow);
    if (hidepid)
        vg_buf_adds(out, " other users' processes are not even listed, so any GPU holders among "
                         "them are missing above;");
    if (t->n_fd_unread)
        vg_buf_printf(out,
                      " the open files of %zu process%s could not be read, so any GPU "
                      "holders among them are missing above;",
                      t->n_fd_unread, t->n_fd_unread == 1 ? "" : "es");
    if (envs)
        vg_buf_printf(out,
                      " the environment of %zu holder%s could not be read, so rules that "
                      "judge CUDA_VISIBLE_DEVICES and rank variables could not judge %s;",
                      envs, envs == 1 ? "" : "s", envs == 1 ? "it" : "them");
    vg_buf_adds(out, " ");
    vg_render_access_hint(out, t->access);
    vg_buf_printf(out, ".%s\n", st->reset);
}

/* Of the processes whose open files were not read, those neither named nor kernel threads. */
static size_t vg_unread_more(const struct vg_proc_table *t)
{
    size_t named = t->nunread + t->n_unread_kthreads;
    return t->n_fd_unread > named ? t->n_fd_unread - named : 0;
}

void vg_render_unread_names(struct vg_buf *out, const struct vg_snapshot *snap,
                            const struct vg_style *st)
{
    const struct vg_proc_table *t = &snap->procs;
    if (!t->n_fd_unread)
        return;
    vg_buf_printf(out, "%sOpen files not read:", st->yellow);
    for (size_t i = 0; i < t->nunread; i++) {
        const struct vg_proc_unread *u = &t->unread[i];
        vg_buf_printf(out, "%s PID %d (", i ? "," : "", (int)u->pid);
        if (u->user)
            vg_text_escape_str(out, u->user, 32);
        else
            vg_buf_adds(out, "owner unknown");
        vg_buf_adds(out, ", ");
        if (u->comm)
            vg_text_escape_str(out, u->comm, 32);
        else
            vg_buf_adds(out, "command unknown");
        vg_buf_addc(out, ')');
    }
    /* The list is bounded; the count is not: say how many are not named, never cut silently. */
    size_t more = vg_unread_more(t);
    if (more)
        vg_buf_printf(out, "%s and %zu more", t->nunread ? "," : "", more);
    if (t->n_unread_kthreads)
        vg_buf_printf(out, "%s %s%zu kernel thread%s", t->nunread || more ? "," : "",
                      t->nunread || more ? "and " : "", t->n_unread_kthreads,
                      t->n_unread_kthreads == 1 ? "" : "s");
    vg_buf_printf(out, ".%s\n", st->reset);
}

/* The processes whose descriptors could not be read, as far as the scan named them. */
static void vg_unread_list_json(struct vg_json *j, const struct vg_proc_table *t)
{
    vg_json_key(j, "list");
    vg_json_arr_begin(j);
    for (size_t i = 0; i < t->nunread; i++) {
        const struct vg_proc_unread *u = &t->unread[i];
        vg_json_obj_begin(j);
        vg_json_ku64(j, "pid", (uint64_t)u->pid);
        vg_json_ku64_opt(j, "uid", u->uid_known, u->uid);
        vg_json_kstr(j, "user", u->user);
        vg_json_kstr(j, "comm", u->comm);
        vg_json_obj_end(j);
    }
    vg_json_arr_end(j);
    vg_json_ku64(j, "list_more", vg_unread_more(t));
    vg_json_ku64(j, "kernel_threads", t->n_unread_kthreads);
    vg_json_ku64(j, "read_by_kernel", t->n_fd_by_kernel);
    vg_json_ku64(j, "thread_tables", t->n_tables_unchecked);
}

/* What could not be read, and the causes the scan saw. */
void vg_render_unread_json(struct vg_json *j, const struct vg_snapshot *snap)
{
    const struct vg_proc_table *t = &snap->procs;
    vg_json_key(j, "unread");
    vg_json_obj_begin(j);
    vg_json_ku64(j, "processes", t->n_denied);
    vg_json_ku64(j, "descriptors", t->n_fd_unread);
    vg_json_ku64(j, "environments", vg_snap_unread_envs(snap));
    vg_unread_list_json(j, t);
    bool hidden = t->access & VG_PROC_ACC_HIDEPID;
    vg_json_kbool(j, "hidden", hidden);
    vg_json_key(j, "causes");
    vg_json_arr_begin(j);
    for (unsigned bit = 1; (t->n_denied || hidden) && bit <= VG_PROC_ACC_UNKNOWN; bit <<= 1)
        if (t->access & bit)
            vg_json_str(j, vg_render_access_id(bit));
    vg_json_arr_end(j);
    vg_json_obj_end(j);
}

void vg_render_scan_note(struct vg_buf *out, const struct vg_snapshot *snap, bool proc_asked)
{
    if (snap->procs.kernel_scan) {
        const char *how = snap->procs.kernel_scan_maps
                              ? "BPF task_file and task_vma iterators found the holders; /proc "
                                "was read for them only"
                              : "a BPF task_file iterator found the holders by descriptor; this "
                                "kernel has no task_vma iterator, so /proc was read for them and "
                                "for every process's memory mappings";
        if (snap->procs.n_fd_by_kernel)
            vg_buf_printf(out,
                          "kernel (%s; where it refused the open files of %zu, the kernel "
                          "scan's records of them were used)",
                          how, snap->procs.n_fd_by_kernel);
        else
            vg_buf_printf(out, "kernel (%s)", how);
    } else if (proc_asked)
        vg_buf_adds(out, "/proc (--scan=proc)");
    else
        vg_buf_printf(out, "/proc (the kernel scan did not run: %s)",
                      snap->procs.scan_note ? snap->procs.scan_note : "unknown");
}
