/*
 * Snapshot records (see record.h): the writer and the strict reader of the text format.
 *
 * Each kind of object (the snapshot itself, the driver's list, a GPU or MIG device, a process
 * the driver lists, an error, the process table, a process, an unread process, kin) has one
 * table of its plain fields (key, type, offset, size), from which both the writer and the reader
 * work, so a field is named once. What is not a plain field (lists, the environment, enums with
 * static strings) is a few lines of its own in each direction.
 */
#include "model/record.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/array.h"
#include "util/file.h"
#include "util/parse.h"
#include "util/pci.h"

#define VG_REC_MAGIC "vramguard-snapshot"

/* ------------------------------------------------------------------------ field tables */

enum vg_rec_type {
    VG_REC_UNS,   /* an unsigned integer of size bytes */
    VG_REC_SIG,   /* a signed integer of size bytes */
    VG_REC_BOOL,  /* 0 or 1 */
    VG_REC_CHAR,  /* one byte, written as a string */
    VG_REC_STR,   /* char *, NULL left out */
    VG_REC_FLAGS, /* an unsigned bit set, by the names of a vg_rec_bit table */
};

struct vg_rec_bit {
    unsigned bit;
    const char *name;
};

struct vg_rec_field {
    const char *key;
    enum vg_rec_type type;
    size_t off, size;
    const struct vg_rec_bit *bits; /* VG_REC_FLAGS */
};

#define VG_REC_F(type, key, member, kind)                                                          \
    {                                                                                              \
        key, kind, offsetof(type, member), sizeof(((type *)0)->member), NULL                       \
    }
#define VG_REC_B(type, key, member, names)                                                         \
    {                                                                                              \
        key, VG_REC_FLAGS, offsetof(type, member), sizeof(((type *)0)->member), names              \
    }
#define VG_REC_END                                                                                 \
    {                                                                                              \
        NULL, VG_REC_UNS, 0, 0, NULL                                                               \
    }

static const struct vg_rec_bit vg_rec_gpu_known[] = {
    {VG_GPU_K_NAME, "name"},
    {VG_GPU_K_UUID, "uuid"},
    {VG_GPU_K_MINOR, "minor"},
    {VG_GPU_K_PCI, "pci"},
    {VG_GPU_K_MEM, "mem"},
    {VG_GPU_K_RESERVED, "reserved"},
    {VG_GPU_K_UTIL, "util"},
    {VG_GPU_K_CC, "cc"},
    {VG_GPU_K_PERSIST, "persistence"},
    {VG_GPU_K_COMPUTE_MODE, "compute-mode"},
    {VG_GPU_K_MIG_MODE, "mig-mode"},
    {VG_GPU_K_PROCS, "procs"},
    {VG_GPU_K_INSTANCE, "instance"},
    {VG_GPU_K_PROC_UTIL, "proc-util"},
    {VG_GPU_K_TEMP, "temp"},
    {VG_GPU_K_POWER, "power"},
    {VG_GPU_K_POWER_LIMIT, "power-limit"},
    {VG_GPU_K_FAN, "fan"},
    {0, NULL},
};

static const struct vg_rec_bit vg_rec_ptypes[] = {
    {VG_PTYPE_COMPUTE, "compute"},
    {VG_PTYPE_GRAPHICS, "graphics"},
    {VG_PTYPE_MPS, "mps"},
    {0, NULL},
};

static const struct vg_rec_bit vg_rec_proc_known[] = {
    {VG_PROC_K_STAT, "stat"},
    {VG_PROC_K_STATUS, "status"},
    {VG_PROC_K_CMDLINE, "cmdline"},
    {VG_PROC_K_ENV, "env"},
    {VG_PROC_K_CGROUP, "cgroup"},
    {VG_PROC_K_MAPS, "maps"},
    {VG_PROC_K_FDS, "fds"},
    {VG_PROC_K_THREADS, "threads"},
    {VG_PROC_K_USER, "user"},
    {VG_PROC_K_SIGIGN, "sigign"},
    /* what it runs (proc/exe.c) */
    {VG_PROC_K_EXE, "exe"},
    {VG_PROC_K_EXE_STAT, "exe-stat"},
    {VG_PROC_K_EXE_PATH, "exe-path"},
    {0, NULL},
};

static const struct vg_rec_bit vg_rec_libs[] = {
    {VG_LIB_CUDA, "cuda"},
    {VG_LIB_CUDART, "cudart"},
    {VG_LIB_NCCL, "nccl"},
    {VG_LIB_TORCH_CUDA, "torch"},
    {VG_LIB_TENSORFLOW, "tensorflow"},
    {VG_LIB_JAX, "jax"},
    {VG_LIB_NVML, "nvml"},
    {0, NULL},
};

static const struct vg_rec_bit vg_rec_access[] = {
    {VG_PROC_ACC_NOT_ROOT, "not-root"},
    {VG_PROC_ACC_NO_PTRACE, "no-ptrace"},
    {VG_PROC_ACC_NO_DAC_READ, "no-dac-read"},
    {VG_PROC_ACC_HIDEPID, "hidepid"},
    {VG_PROC_ACC_USERNS, "user-namespace"},
    {VG_PROC_ACC_UNKNOWN, "unknown"},
    {0, NULL},
};

static const struct vg_rec_bit vg_rec_by[] = {
    {VG_PROC_BY_FD, "fd"},
    {VG_PROC_BY_MAP, "map"},
    {0, NULL},
};

#define VG_S struct vg_snapshot
static const struct vg_rec_field vg_rec_snap_fields[] = {
    VG_REC_F(VG_S, "scanned_ms", scanned_ms, VG_REC_UNS),
    VG_REC_F(VG_S, "proc_root", proc_root, VG_REC_STR),
    VG_REC_F(VG_S, "dev_dir", dev_dir, VG_REC_STR),
    VG_REC_F(VG_S, "driver_ok", driver_ok, VG_REC_BOOL),
    VG_REC_F(VG_S, "driver_error", driver_error, VG_REC_STR),
    VG_REC_F(VG_S, "driver_hung", driver_hung, VG_REC_BOOL),
    VG_REC_END,
};
#undef VG_S

#define VG_L struct vg_gpu_list
static const struct vg_rec_field vg_rec_list_fields[] = {
    VG_REC_F(VG_L, "loaded", loaded, VG_REC_BOOL),
    VG_REC_F(VG_L, "library", library, VG_REC_STR),
    VG_REC_F(VG_L, "driver_version", driver_version, VG_REC_STR),
    VG_REC_F(VG_L, "nvml_version", nvml_version, VG_REC_STR),
    VG_REC_F(VG_L, "cuda_version", cuda_version, VG_REC_SIG),
    VG_REC_F(VG_L, "proc_stride_535", proc_stride_535, VG_REC_BOOL),
    VG_REC_END,
};
#undef VG_L

#define VG_G struct vg_gpu
static const struct vg_rec_field vg_rec_gpu_fields[] = {
    VG_REC_F(VG_G, "index", index, VG_REC_UNS),
    VG_REC_F(VG_G, "is_mig", is_mig, VG_REC_BOOL),
    VG_REC_B(VG_G, "known", known, vg_rec_gpu_known),
    VG_REC_F(VG_G, "name", name, VG_REC_STR),
    VG_REC_F(VG_G, "uuid", uuid, VG_REC_STR),
    VG_REC_F(VG_G, "minor", minor, VG_REC_UNS),
    VG_REC_F(VG_G, "pci_bus_id", pci_bus_id, VG_REC_STR),
    VG_REC_F(VG_G, "pci_domain", pci_domain, VG_REC_UNS),
    VG_REC_F(VG_G, "pci_bus", pci_bus, VG_REC_UNS),
    VG_REC_F(VG_G, "pci_device", pci_device, VG_REC_UNS),
    VG_REC_F(VG_G, "mem_total", mem_total, VG_REC_UNS),
    VG_REC_F(VG_G, "mem_used", mem_used, VG_REC_UNS),
    VG_REC_F(VG_G, "mem_free", mem_free, VG_REC_UNS),
    VG_REC_F(VG_G, "mem_reserved", mem_reserved, VG_REC_UNS),
    VG_REC_F(VG_G, "util_gpu", util_gpu, VG_REC_UNS),
    VG_REC_F(VG_G, "util_mem", util_mem, VG_REC_UNS),
    VG_REC_F(VG_G, "temp_c", temp_c, VG_REC_UNS),
    VG_REC_F(VG_G, "power_mw", power_mw, VG_REC_UNS),
    VG_REC_F(VG_G, "power_limit_mw", power_limit_mw, VG_REC_UNS),
    VG_REC_F(VG_G, "fan_pct", fan_pct, VG_REC_UNS),
    VG_REC_F(VG_G, "cc_major", cc_major, VG_REC_SIG),
    VG_REC_F(VG_G, "cc_minor", cc_minor, VG_REC_SIG),
    VG_REC_F(VG_G, "persistence", persistence, VG_REC_BOOL),
    VG_REC_F(VG_G, "compute_mode", compute_mode, VG_REC_UNS),
    VG_REC_F(VG_G, "mig_current", mig_current, VG_REC_UNS),
    VG_REC_F(VG_G, "mig_pending", mig_pending, VG_REC_UNS),
    VG_REC_F(VG_G, "gpu_instance", gpu_instance, VG_REC_UNS),
    VG_REC_F(VG_G, "compute_instance", compute_instance, VG_REC_UNS),
    VG_REC_F(VG_G, "lost", lost, VG_REC_BOOL),
    VG_REC_F(VG_G, "hung", hung, VG_REC_BOOL),
    VG_REC_END,
};
#undef VG_G

#define VG_P struct vg_gpu_proc
static const struct vg_rec_field vg_rec_gproc_fields[] = {
    VG_REC_F(VG_P, "pid", pid, VG_REC_UNS),
    VG_REC_B(VG_P, "types", types, vg_rec_ptypes),
    VG_REC_F(VG_P, "used_known", used_known, VG_REC_BOOL),
    VG_REC_F(VG_P, "used_bytes", used_bytes, VG_REC_UNS),
    VG_REC_F(VG_P, "instance_known", instance_known, VG_REC_BOOL),
    VG_REC_F(VG_P, "gpu_instance", gpu_instance, VG_REC_UNS),
    VG_REC_F(VG_P, "compute_instance", compute_instance, VG_REC_UNS),
    VG_REC_F(VG_P, "bogus_pid", bogus_pid, VG_REC_BOOL),
    VG_REC_F(VG_P, "util_known", util_known, VG_REC_BOOL),
    VG_REC_F(VG_P, "sm_util", sm_util, VG_REC_UNS),
    VG_REC_END,
};
#undef VG_P

#define VG_E struct vg_gpu_error
static const struct vg_rec_field vg_rec_error_fields[] = {
    VG_REC_F(VG_E, "func", func, VG_REC_STR),
    VG_REC_F(VG_E, "status", status, VG_REC_SIG),
    VG_REC_F(VG_E, "msg", msg, VG_REC_STR),
    VG_REC_END,
};
#undef VG_E

#define VG_T struct vg_proc_table
static const struct vg_rec_field vg_rec_table_fields[] = {
    VG_REC_F(VG_T, "n_scanned", n_scanned, VG_REC_UNS),
    VG_REC_F(VG_T, "n_carried", n_carried, VG_REC_UNS),
    VG_REC_F(VG_T, "incremental", incremental, VG_REC_BOOL),
    VG_REC_F(VG_T, "n_vanished", n_vanished, VG_REC_UNS),
    VG_REC_F(VG_T, "n_denied", n_denied, VG_REC_UNS),
    VG_REC_F(VG_T, "n_fd_unread", n_fd_unread, VG_REC_UNS),
    VG_REC_F(VG_T, "self_nspid_depth", self_nspid_depth, VG_REC_SIG),
    VG_REC_F(VG_T, "n_unread_kthreads", n_unread_kthreads, VG_REC_UNS),
    VG_REC_F(VG_T, "n_fd_by_kernel", n_fd_by_kernel, VG_REC_UNS),
    VG_REC_F(VG_T, "n_tables_unchecked", n_tables_unchecked, VG_REC_UNS),
    VG_REC_B(VG_T, "access", access, vg_rec_access),
    VG_REC_F(VG_T, "kernel_scan", kernel_scan, VG_REC_BOOL),
    VG_REC_F(VG_T, "kernel_scan_maps", kernel_scan_maps, VG_REC_BOOL),
    VG_REC_F(VG_T, "scan_note", scan_note, VG_REC_STR),
    VG_REC_END,
};
#undef VG_T

#define VG_U struct vg_proc_unread
static const struct vg_rec_field vg_rec_unread_fields[] = {
    VG_REC_F(VG_U, "pid", pid, VG_REC_SIG),
    VG_REC_F(VG_U, "wanted", wanted, VG_REC_BOOL),
    VG_REC_F(VG_U, "uid_known", uid_known, VG_REC_BOOL),
    VG_REC_F(VG_U, "uid", uid, VG_REC_UNS),
    VG_REC_F(VG_U, "user", user, VG_REC_STR),
    VG_REC_F(VG_U, "comm", comm, VG_REC_STR),
    VG_REC_END,
};
#undef VG_U

#define VG_K struct vg_proc_kin
static const struct vg_rec_field vg_rec_kin_fields[] = {
    VG_REC_F(VG_K, "pid", pid, VG_REC_SIG),
    VG_REC_F(VG_K, "ppid", ppid, VG_REC_SIG),
    VG_REC_F(VG_K, "pgid", pgid, VG_REC_SIG),
    VG_REC_F(VG_K, "sid", sid, VG_REC_SIG),
    VG_REC_F(VG_K, "start_ticks", start_ticks, VG_REC_UNS),
    VG_REC_F(VG_K, "state", state, VG_REC_CHAR),
    VG_REC_F(VG_K, "cmdline", cmdline, VG_REC_STR),
    VG_REC_END,
};
#undef VG_K

#define VG_KL struct vg_kmsg_log
static const struct vg_rec_field vg_rec_kmsg_fields[] = {
    VG_REC_F(VG_KL, "path", path, VG_REC_STR),
    VG_REC_F(VG_KL, "why", why, VG_REC_STR),
    VG_REC_F(VG_KL, "records", n_records, VG_REC_UNS),
    VG_REC_F(VG_KL, "malformed", n_malformed, VG_REC_UNS),
    VG_REC_F(VG_KL, "foreign", n_foreign, VG_REC_UNS),
    VG_REC_F(VG_KL, "other_devices", n_other_dev, VG_REC_UNS),
    VG_REC_F(VG_KL, "lost", lost, VG_REC_BOOL),
    VG_REC_F(VG_KL, "lost_records", n_lost, VG_REC_UNS),
    VG_REC_F(VG_KL, "first_known", first_known, VG_REC_BOOL),
    VG_REC_F(VG_KL, "first_seq", first_seq, VG_REC_UNS),
    VG_REC_F(VG_KL, "last_seq", last_seq, VG_REC_UNS),
    VG_REC_END,
};
#undef VG_KL

#define VG_KD struct vg_kmsg_xid_dev
static const struct vg_rec_field vg_rec_xid_dev_fields[] = {
    VG_REC_F(VG_KD, "count", count, VG_REC_UNS),
    VG_REC_F(VG_KD, "other_codes", n_other_codes, VG_REC_UNS),
    VG_REC_END,
};
#undef VG_KD

#define VG_KX struct vg_kmsg_xid
static const struct vg_rec_field vg_rec_xid_fields[] = {
    VG_REC_F(VG_KX, "seq", seq, VG_REC_UNS),   VG_REC_F(VG_KX, "ts_us", ts_us, VG_REC_UNS),
    VG_REC_F(VG_KX, "code", code, VG_REC_UNS), VG_REC_F(VG_KX, "pid_known", pid_known, VG_REC_BOOL),
    VG_REC_F(VG_KX, "pid", pid, VG_REC_SIG),   VG_REC_F(VG_KX, "name", name, VG_REC_STR),
    VG_REC_F(VG_KX, "msg", msg, VG_REC_STR),   VG_REC_END,
};
#undef VG_KX

#define VG_R struct vg_proc
static const struct vg_rec_field vg_rec_proc_fields[] = {
    VG_REC_F(VG_R, "pid", pid, VG_REC_SIG),
    VG_REC_B(VG_R, "known", known, vg_rec_proc_known),
    VG_REC_F(VG_R, "comm", comm, VG_REC_STR),
    VG_REC_F(VG_R, "state", state, VG_REC_CHAR),
    VG_REC_F(VG_R, "ppid", ppid, VG_REC_SIG),
    VG_REC_F(VG_R, "pgid", pgid, VG_REC_SIG),
    VG_REC_F(VG_R, "sid", sid, VG_REC_SIG),
    VG_REC_F(VG_R, "start_ticks", start_ticks, VG_REC_UNS),
    VG_REC_F(VG_R, "flags", flags, VG_REC_UNS),
    VG_REC_F(VG_R, "tty_nr", tty_nr, VG_REC_SIG),
    VG_REC_F(VG_R, "cpu_ticks", cpu_ticks, VG_REC_UNS),
    VG_REC_F(VG_R, "rss_known", rss_known, VG_REC_BOOL),
    VG_REC_F(VG_R, "rss_pages", rss_pages, VG_REC_UNS),
    VG_REC_F(VG_R, "uid", uid, VG_REC_UNS),
    VG_REC_F(VG_R, "sig_ignored", sig_ignored, VG_REC_UNS),
    VG_REC_F(VG_R, "user", user, VG_REC_STR),
    VG_REC_F(VG_R, "cmdline", cmdline, VG_REC_STR),
    VG_REC_F(VG_R, "exe", exe, VG_REC_STR),
    VG_REC_F(VG_R, "exe_deleted", exe_deleted, VG_REC_BOOL),
    VG_REC_F(VG_R, "exe_uid", exe_uid, VG_REC_UNS),
    VG_REC_F(VG_R, "exe_mode", exe_mode, VG_REC_UNS),
    VG_REC_F(VG_R, "exe_path_same", exe_path_same, VG_REC_BOOL),
    VG_REC_F(VG_R, "exe_dirs_trusted", exe_dirs_trusted, VG_REC_BOOL),
    VG_REC_F(VG_R, "cgroup", cgroup, VG_REC_STR),
    VG_REC_F(VG_R, "container_id", container_id, VG_REC_STR),
    VG_REC_F(VG_R, "pod_uid", pod_uid, VG_REC_STR),
    VG_REC_B(VG_R, "libs", libs, vg_rec_libs),
    VG_REC_F(VG_R, "dev_fd_count", dev_fd_count, VG_REC_UNS),
    VG_REC_F(VG_R, "dev_map_count", dev_map_count, VG_REC_UNS),
    VG_REC_F(VG_R, "dev_path_count", dev_path_count, VG_REC_UNS),
    VG_REC_F(VG_R, "has_ctl", has_ctl, VG_REC_BOOL),
    VG_REC_F(VG_R, "has_uvm", has_uvm, VG_REC_BOOL),
    VG_REC_F(VG_R, "fd_total", fd_total, VG_REC_UNS),
    VG_REC_F(VG_R, "fds_by_kernel", fds_by_kernel, VG_REC_BOOL),
    VG_REC_F(VG_R, "dev_nodes_more", dev_nodes_more, VG_REC_UNS),
    VG_REC_F(VG_R, "nthreads", nthreads, VG_REC_UNS),
    VG_REC_F(VG_R, "threads_d", threads_d, VG_REC_UNS),
    VG_REC_F(VG_R, "threads_live", threads_live, VG_REC_UNS),
    VG_REC_F(VG_R, "threads_status", threads_status, VG_REC_UNS),
    VG_REC_F(VG_R, "parent_alive", parent_alive, VG_REC_BOOL),
    VG_REC_F(VG_R, "parent_known", parent_known, VG_REC_BOOL),
    VG_REC_F(VG_R, "parent_sid", parent_sid, VG_REC_SIG),
    VG_REC_F(VG_R, "parent_pgid", parent_pgid, VG_REC_SIG),
    VG_REC_F(VG_R, "parent_ns_init", parent_ns_init, VG_REC_BOOL),
    VG_REC_F(VG_R, "sid_alive", sid_alive, VG_REC_BOOL),
    VG_REC_F(VG_R, "pgid_alive", pgid_alive, VG_REC_BOOL),
    VG_REC_F(VG_R, "sid_zombie", sid_zombie, VG_REC_BOOL),
    VG_REC_F(VG_R, "pgid_zombie", pgid_zombie, VG_REC_BOOL),
    VG_REC_F(VG_R, "activity_known", activity_known, VG_REC_BOOL),
    VG_REC_F(VG_R, "activity_ms", activity_ms, VG_REC_UNS),
    VG_REC_F(VG_R, "activity_cpu_ms", activity_cpu_ms, VG_REC_UNS),
    VG_REC_END,
};
#undef VG_R

/* ------------------------------------------------------------------------------ writing */

static uint64_t vg_rec_get_uns(const void *p, size_t size)
{
    switch (size) {
    case 1:
        return *(const uint8_t *)p;
    case 2:
        return *(const uint16_t *)p;
    case 4:
        return *(const uint32_t *)p;
    default:
        return *(const uint64_t *)p;
    }
}

static int64_t vg_rec_get_sig(const void *p, size_t size)
{
    switch (size) {
    case 1:
        return *(const int8_t *)p;
    case 2:
        return *(const int16_t *)p;
    case 4:
        return *(const int32_t *)p;
    default:
        return *(const int64_t *)p;
    }
}

/* A string value: in double quotes, with '\\', '"', control bytes and every byte outside
 * printable ASCII as escapes, so a record is one field a line whatever a process put in its
 * name, and plain ASCII. */
static void vg_rec_put_str(struct vg_buf *out, const char *s, size_t n)
{
    vg_buf_addc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '"')
            vg_buf_printf(out, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            vg_buf_printf(out, "\\x%02x", c);
        else
            vg_buf_addc(out, (char)c);
    }
    vg_buf_addc(out, '"');
}

static void vg_rec_put_bits(struct vg_buf *out, unsigned v, const struct vg_rec_bit *names)
{
    bool first = true;
    for (const struct vg_rec_bit *b = names; b->name; b++) {
        if (!(v & b->bit))
            continue;
        vg_buf_printf(out, "%s%s", first ? "" : ",", b->name);
        v &= ~b->bit;
        first = false;
    }
    if (v) /* a bit this version has no name for: kept, in hex */
        vg_buf_printf(out, "%s0x%x", first ? "" : ",", v);
}

static bool vg_rec_is_zero(const void *p, size_t size)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < size; i++)
        if (b[i])
            return false;
    return true;
}

/* The fields of one object, those that are not zero. */
static void vg_rec_put_fields(struct vg_buf *out, const void *obj, const struct vg_rec_field *t)
{
    for (const struct vg_rec_field *f = t; f->key; f++) {
        const char *p = (const char *)obj + f->off;
        if (vg_rec_is_zero(p, f->size))
            continue;
        vg_buf_printf(out, "%s ", f->key);
        switch (f->type) {
        case VG_REC_UNS:
            vg_buf_printf(out, "%" PRIu64, vg_rec_get_uns(p, f->size));
            break;
        case VG_REC_SIG:
            vg_buf_printf(out, "%" PRId64, vg_rec_get_sig(p, f->size));
            break;
        case VG_REC_BOOL:
            vg_buf_adds(out, "1");
            break;
        case VG_REC_CHAR:
            vg_rec_put_str(out, p, 1);
            break;
        case VG_REC_STR: {
            const char *s = *(char *const *)p;
            vg_rec_put_str(out, s, strlen(s));
            break;
        }
        case VG_REC_FLAGS:
            vg_rec_put_bits(out, (unsigned)vg_rec_get_uns(p, f->size), f->bits);
            break;
        }
        vg_buf_addc(out, '\n');
    }
}

static void vg_rec_put_errors(struct vg_buf *out, const struct vg_gpu_error *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        vg_buf_adds(out, "error\n");
        vg_rec_put_fields(out, &e[i], vg_rec_error_fields);
    }
}

static void vg_rec_put_gpu(struct vg_buf *out, const struct vg_gpu *g, const char *word)
{
    vg_buf_printf(out, "%s\n", word);
    vg_rec_put_fields(out, g, vg_rec_gpu_fields);
    for (size_t i = 0; i < g->nprocs; i++) {
        vg_buf_adds(out, "process\n");
        vg_rec_put_fields(out, &g->procs[i], vg_rec_gproc_fields);
    }
    vg_rec_put_errors(out, g->errors, g->nerrors);
    for (size_t m = 0; m < g->nmig; m++)
        vg_rec_put_gpu(out, &g->mig[m], "mig");
}

static void vg_rec_put_proc(struct vg_buf *out, const struct vg_proc *p)
{
    vg_buf_adds(out, "proc\n");
    vg_rec_put_fields(out, p, vg_rec_proc_fields);
    if (p->nnspid) {
        vg_buf_adds(out, "nspid");
        for (size_t i = 0; i < p->nnspid; i++)
            vg_buf_printf(out, " %d", (int)p->nspid[i]);
        vg_buf_addc(out, '\n');
    }
    for (int v = 0; v < VG_ENV_COUNT; v++) {
        if (!p->env[v])
            continue;
        vg_buf_printf(out, "env %s ", vg_env_name((enum vg_env_var)v));
        vg_rec_put_str(out, p->env[v], strlen(p->env[v]));
        vg_buf_addc(out, '\n');
    }
    for (size_t k = 0; k < p->ndev_minors; k++) {
        /* a table made without the how (hand-made ones) holds by descriptor, as the join
         * reads it */
        unsigned by = p->dev_minors_by ? p->dev_minors_by[k] : VG_PROC_BY_FD;
        vg_buf_printf(out, "dev %u ", p->dev_minors[k]);
        vg_rec_put_bits(out, by, vg_rec_by);
        vg_buf_addc(out, '\n');
    }
    for (size_t k = 0; k < p->npath_minors; k++)
        vg_buf_printf(out, "path_minor %u\n", p->path_minors[k]);
    for (size_t k = 0; k < p->ndev_paths; k++) {
        vg_buf_adds(out, "dev_path ");
        if (p->dev_paths[k])
            vg_rec_put_str(out, p->dev_paths[k], strlen(p->dev_paths[k]));
        else
            vg_buf_adds(out, "-");
        vg_buf_addc(out, '\n');
    }
}

/* The kernel log's Xids, when the command read the log: the log, each device, its codes and
 * the Xids it kept. */
static void vg_rec_put_kmsg(struct vg_buf *out, const struct vg_kmsg_log *log)
{
    if (log->state == VG_KMSG_NOT_ASKED)
        return;
    vg_buf_printf(out, "kmsg\nstate %s\n", log->state == VG_KMSG_READ ? "read" : "unreadable");
    vg_rec_put_fields(out, log, vg_rec_kmsg_fields);
    for (size_t i = 0; i < log->ndevs; i++) {
        const struct vg_kmsg_xid_dev *d = &log->devs[i];
        char bus[VG_PCI_TEXT_MAX];
        vg_pci_format(&d->pci, bus, sizeof(bus));
        vg_buf_printf(out, "xid_dev\npci %s\n", bus);
        vg_rec_put_fields(out, d, vg_rec_xid_dev_fields);
        for (size_t c = 0; c < d->ncodes; c++)
            vg_buf_printf(out, "code %u %" PRIu64 " %" PRIu64 "\n", d->codes[c].code,
                          d->codes[c].count, d->codes[c].last_ts_us);
        for (size_t k = 0; k < d->nxid; k++) {
            vg_buf_adds(out, "xid\n");
            vg_rec_put_fields(out, &d->xid[k], vg_rec_xid_fields);
        }
    }
}

int vg_snap_record_write(const struct vg_snapshot *snap, struct vg_buf *out, struct vg_err *err)
{
    vg_buf_printf(out, "%s %d\n", VG_REC_MAGIC, VG_SNAP_RECORD_VERSION);
    vg_buf_printf(out, "taken_at %lld.%09ld\n", (long long)snap->taken_at.tv_sec,
                  (long)snap->taken_at.tv_nsec);
    vg_rec_put_fields(out, snap, vg_rec_snap_fields);

    const struct vg_gpu_list *l = &snap->gpus;
    vg_buf_adds(out, "driver\n");
    vg_rec_put_fields(out, l, vg_rec_list_fields);
    if (l->proc_api)
        vg_buf_printf(out, "proc_api %s\n", l->proc_api);
    if (l->mem_api)
        vg_buf_printf(out, "mem_api %s\n", l->mem_api);
    vg_rec_put_errors(out, l->errors, l->nerrors);
    for (size_t i = 0; i < l->ngpus; i++)
        vg_rec_put_gpu(out, &l->gpus[i], "gpu");

    const struct vg_proc_table *t = &snap->procs;
    vg_buf_adds(out, "procs\n");
    vg_rec_put_fields(out, t, vg_rec_table_fields);
    const char *ns = vg_proc_pidns_id(t->pidns);
    if (ns)
        vg_buf_printf(out, "pidns %s\n", ns);
    for (size_t i = 0; i < t->nunread; i++) {
        vg_buf_adds(out, "unread\n");
        vg_rec_put_fields(out, &t->unread[i], vg_rec_unread_fields);
    }
    for (size_t i = 0; i < t->nkin; i++) {
        vg_buf_adds(out, "kin\n");
        vg_rec_put_fields(out, &t->kin[i], vg_rec_kin_fields);
    }
    for (size_t i = 0; i < t->n; i++)
        vg_rec_put_proc(out, &t->procs[i]);
    vg_rec_put_kmsg(out, &snap->kmsg);
    vg_buf_adds(out, "end\n");
    if (out->err)
        return vg_err_set(err, out->err, "cannot put the record together: %s",
                          out->err == -E2BIG ? "too large" : "out of memory");
    return 0;
}

int vg_snap_record_save(const struct vg_snapshot *snap, const char *path, struct vg_err *err)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_SNAP_RECORD_MAX);
    int rc = vg_snap_record_write(snap, &b, err);
    if (rc) {
        vg_buf_release(&b);
        return rc;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        vg_buf_release(&b);
        return vg_err_set(err, rc, "cannot write '%s': %s", path, strerror(-rc));
    }
    const char *p = vg_buf_str(&b);
    size_t left = b.len;
    while (left && !rc) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno != EINTR)
            rc = -errno;
        else if (n > 0) {
            p += n;
            left -= (size_t)n;
        }
    }
    if (close(fd) != 0 && !rc)
        rc = -errno;
    vg_buf_release(&b);
    if (rc)
        return vg_err_set(err, rc, "cannot write '%s': %s", path, strerror(-rc));
    return 0;
}

/* ------------------------------------------------------------------------------ reading */

/* What the line being read belongs to. */
enum vg_rec_obj {
    VG_REC_O_SNAP,
    VG_REC_O_DRIVER,
    VG_REC_O_ERROR,
    VG_REC_O_GPU,
    VG_REC_O_MIG,
    VG_REC_O_GPROC,
    VG_REC_O_PROCS,
    VG_REC_O_UNREAD,
    VG_REC_O_KIN,
    VG_REC_O_PROC,
    VG_REC_O_KMSG,
    VG_REC_O_XID_DEV,
    VG_REC_O_XID,
};

struct vg_rec_reader {
    const char *name;
    size_t line;
    struct vg_err *err;
    struct vg_snapshot *snap;
    struct vg_gpu_list gpus;
    struct vg_proc_table procs;
    enum vg_rec_obj obj;
    void *cur;    /* the object being filled */
    uint64_t set; /* its plain fields given so far, by table position */
    bool had_driver, had_procs;
    struct vg_gpu *gpu; /* the GPU (or MIG device) objects of process and error attach to */
    bool env_set[VG_ENV_COUNT];
    bool nspid_set, proc_api_set, mem_api_set, pidns_set, taken_at_set;
    bool had_kmsg, kmsg_state_set, pci_set;
};

/* Fail with "NAME:LINE: message". */
static int vg_rec_fail(struct vg_rec_reader *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int vg_rec_fail(struct vg_rec_reader *r, int code, const char *fmt, ...)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    va_list ap;
    va_start(ap, fmt);
    vg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (b.err)
        vg_err_set(r->err, -ENOMEM, "out of memory");
    else
        vg_err_set(r->err, code, "%s:%zu: %s", r->name, r->line, vg_buf_str(&b));
    vg_buf_release(&b);
    return code;
}

/* A quoted string value into a new heap string *out (its length in *outn: it may hold NULs
 * only where a one-byte field allows it). */
static int vg_rec_get_str(struct vg_rec_reader *r, const char *v, size_t n, char **out,
                          size_t *outn)
{
    if (n < 2 || v[0] != '"' || v[n - 1] != '"')
        return vg_rec_fail(r, -EINVAL, "a string value must be in double quotes");
    char *s = malloc(n - 1);
    if (!s)
        return vg_rec_fail(r, -ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 1; i < n - 1; i++) {
        char c = v[i];
        if (c == '"' || (unsigned char)c < 0x20 || (unsigned char)c >= 0x7f) {
            free(s);
            return vg_rec_fail(r, -EINVAL, "a string holds an unescaped '\"' or control byte");
        }
        if (c != '\\') {
            s[k++] = c;
            continue;
        }
        /* the text between the quotes is v[1 .. n-2]: an escape needs its bytes there */
        if (i + 1 < n - 1 && (v[i + 1] == '\\' || v[i + 1] == '"')) {
            s[k++] = v[++i];
            continue;
        }
        int hi = i + 3 < n - 1 && v[i + 1] == 'x' ? vg_parse_hex_digit(v[i + 2]) : -1;
        int lo = hi >= 0 ? vg_parse_hex_digit(v[i + 3]) : -1;
        if (hi < 0 || lo < 0) {
            free(s);
            return vg_rec_fail(r, -EINVAL, "a bad escape in a string (\\\\, \\\" or \\xHH)");
        }
        s[k++] = (char)(hi * 16 + lo);
        i += 3;
    }
    s[k] = '\0';
    *out = s;
    *outn = k;
    return 0;
}

static int vg_rec_get_bits(struct vg_rec_reader *r, const char *v, size_t n,
                           const struct vg_rec_bit *names, unsigned *out)
{
    unsigned bits = 0;
    const char *end = v + n;
    while (v < end) {
        const char *comma = memchr(v, ',', (size_t)(end - v));
        size_t len = comma ? (size_t)(comma - v) : (size_t)(end - v);
        const struct vg_rec_bit *b = names;
        while (b->name && !vg_parse_is(v, len, b->name))
            b++;
        uint64_t raw;
        if (b->name)
            bits |= b->bit;
        else if (len > 2 && vg_parse_starts(v, len, "0x")) {
            raw = 0;
            for (size_t i = 2; i < len; i++) {
                int d = vg_parse_hex_digit(v[i]);
                if (d < 0 || raw > (UINT32_MAX >> 4))
                    return vg_rec_fail(r, -EINVAL, "a bad bit '%.*s'", (int)len, v);
                raw = raw * 16 + (unsigned)d;
            }
            bits |= (unsigned)raw;
        } else
            return vg_rec_fail(r, -EINVAL, "unknown bit '%.*s'", (int)len, v);
        v += len + (comma ? 1 : 0);
        if (comma && v == end)
            return vg_rec_fail(r, -EINVAL, "a bit list ends in ','");
    }
    *out = bits;
    return 0;
}

static void vg_rec_set_uns(void *p, size_t size, uint64_t v)
{
    switch (size) {
    case 1:
        *(uint8_t *)p = (uint8_t)v;
        break;
    case 2:
        *(uint16_t *)p = (uint16_t)v;
        break;
    case 4:
        *(uint32_t *)p = (uint32_t)v;
        break;
    default:
        *(uint64_t *)p = v;
    }
}

static void vg_rec_set_sig(void *p, size_t size, int64_t v)
{
    switch (size) {
    case 1:
        *(int8_t *)p = (int8_t)v;
        break;
    case 2:
        *(int16_t *)p = (int16_t)v;
        break;
    case 4:
        *(int32_t *)p = (int32_t)v;
        break;
    default:
        *(int64_t *)p = v;
    }
}

/* One plain field's value into obj. */
static int vg_rec_store(struct vg_rec_reader *r, const struct vg_rec_field *f, void *obj,
                        const char *v, size_t n)
{
    char *p = (char *)obj + f->off;
    int bits = (int)(f->size * 8);
    switch (f->type) {
    case VG_REC_UNS: {
        uint64_t x;
        if (vg_parse_u64n(v, n, &x) || (bits < 64 && x >> bits))
            return vg_rec_fail(r, -EINVAL, "%s takes an unsigned %d-bit number", f->key, bits);
        vg_rec_set_uns(p, f->size, x);
        return 0;
    }
    case VG_REC_SIG: {
        int64_t x, max = bits < 64 ? ((int64_t)1 << (bits - 1)) - 1 : INT64_MAX;
        if (vg_parse_i64n(v, n, -max - 1, max, &x))
            return vg_rec_fail(r, -EINVAL, "%s takes a %d-bit number", f->key, bits);
        vg_rec_set_sig(p, f->size, x);
        return 0;
    }
    case VG_REC_BOOL:
        if (!vg_parse_is(v, n, "1") && !vg_parse_is(v, n, "0"))
            return vg_rec_fail(r, -EINVAL, "%s takes 0 or 1", f->key);
        *(bool *)p = v[0] == '1';
        return 0;
    case VG_REC_CHAR: {
        char *s;
        size_t len;
        int rc = vg_rec_get_str(r, v, n, &s, &len);
        if (rc)
            return rc;
        if (len != 1) {
            free(s);
            return vg_rec_fail(r, -EINVAL, "%s takes a string of one byte", f->key);
        }
        *p = s[0];
        free(s);
        return 0;
    }
    case VG_REC_STR: {
        char *s;
        size_t len;
        int rc = vg_rec_get_str(r, v, n, &s, &len);
        if (rc)
            return rc;
        if (strlen(s) != len) {
            free(s);
            return vg_rec_fail(r, -EINVAL, "%s holds a NUL byte", f->key);
        }
        *(char **)p = s;
        return 0;
    }
    case VG_REC_FLAGS: {
        unsigned x;
        int rc = vg_rec_get_bits(r, v, n, f->bits, &x);
        if (!rc)
            vg_rec_set_uns(p, f->size, x);
        return rc;
    }
    }
    return vg_rec_fail(r, -EINVAL, "internal error: field type");
}

/* key's row in t, by position; -1 when none. */
static int vg_rec_find(const struct vg_rec_field *t, const char *key, size_t n)
{
    for (int i = 0; t[i].key; i++)
        if (vg_parse_is(key, n, t[i].key))
            return i;
    return -1;
}

/* Append a zeroed element to *v (of *n elements of size bytes); NULL when out of memory. The
 * snapshot's structs keep no capacity, but every array the reader fills starts empty and grows
 * only here, so its capacity follows from its count: util/array's doubling from VG_ARRAY_MIN,
 * the smallest power of two times VG_ARRAY_MIN that holds n (0 for none). Appends stay
 * amortised O(1) instead of a realloc each. */
static void *vg_rec_push(void **v, size_t *n, size_t size)
{
    size_t cap = *n ? VG_ARRAY_MIN : 0;
    while (cap < *n && cap <= SIZE_MAX / 2)
        cap *= 2;
    if (cap < *n || cap > SIZE_MAX / size)
        cap = *n; /* past doubling's range: vg_array_grow() gave just what was needed */
    return vg_array_push(v, n, &cap, size);
}

static const char *vg_rec_obj_name(enum vg_rec_obj o)
{
    static const char *const names[] = {"the snapshot", "driver",  "error",  "gpu", "mig",
                                        "process",      "procs",   "unread", "kin", "proc",
                                        "kmsg",         "xid_dev", "xid"};
    return names[o];
}

static const struct vg_rec_field *vg_rec_table(enum vg_rec_obj o)
{
    switch (o) {
    case VG_REC_O_SNAP:
        return vg_rec_snap_fields;
    case VG_REC_O_DRIVER:
        return vg_rec_list_fields;
    case VG_REC_O_ERROR:
        return vg_rec_error_fields;
    case VG_REC_O_GPU:
    case VG_REC_O_MIG:
        return vg_rec_gpu_fields;
    case VG_REC_O_GPROC:
        return vg_rec_gproc_fields;
    case VG_REC_O_PROCS:
        return vg_rec_table_fields;
    case VG_REC_O_UNREAD:
        return vg_rec_unread_fields;
    case VG_REC_O_KIN:
        return vg_rec_kin_fields;
    case VG_REC_O_PROC:
        return vg_rec_proc_fields;
    case VG_REC_O_KMSG:
        return vg_rec_kmsg_fields;
    case VG_REC_O_XID_DEV:
        return vg_rec_xid_dev_fields;
    case VG_REC_O_XID:
        return vg_rec_xid_fields;
    }
    return NULL;
}

/* Checks on the object just finished that its readers rely on: sorted lists. */
static int vg_rec_close(struct vg_rec_reader *r)
{
    if (r->obj == VG_REC_O_GPROC && r->gpu->nprocs > 1) {
        const struct vg_gpu_proc *v = r->gpu->procs;
        size_t n = r->gpu->nprocs;
        if (v[n - 2].pid >= v[n - 1].pid)
            return vg_rec_fail(r, -EINVAL, "a GPU's processes must be in ascending pid order");
    }
    if (r->obj == VG_REC_O_PROC && r->procs.n > 1 &&
        r->procs.procs[r->procs.n - 2].pid >= r->procs.procs[r->procs.n - 1].pid)
        return vg_rec_fail(r, -EINVAL, "processes must be in ascending pid order");
    if (r->obj == VG_REC_O_UNREAD && r->procs.nunread > VG_PROC_UNREAD_MAX)
        return vg_rec_fail(r, -EINVAL, "more than %d unread processes", VG_PROC_UNREAD_MAX);
    if (r->obj == VG_REC_O_KMSG && !r->kmsg_state_set)
        return vg_rec_fail(r, -EINVAL, "a kmsg without its state");
    if (r->obj == VG_REC_O_XID_DEV && !r->pci_set)
        return vg_rec_fail(r, -EINVAL, "an xid_dev without its pci");
    if (r->obj == VG_REC_O_XID) {
        struct vg_kmsg_xid *x = r->cur;
        if (!x->msg && !(x->msg = strdup("")))
            return vg_rec_fail(r, -ENOMEM, "out of memory");
    }
    return 0;
}

/* An object's word: finish the current one, start the new one. 1 when word is one, 0 when it
 * is not, negative on error.
 * long: where each object may stand and where it is stored, one case per object of the format;
 * split, the halves would pass the reader and the object back and forth. */
static int vg_rec_open(struct vg_rec_reader *r, const char *w, size_t n)
{
    static const struct {
        const char *word;
        enum vg_rec_obj obj;
    } words[] = {
        {"driver", VG_REC_O_DRIVER}, {"error", VG_REC_O_ERROR},     {"gpu", VG_REC_O_GPU},
        {"mig", VG_REC_O_MIG},       {"process", VG_REC_O_GPROC},   {"procs", VG_REC_O_PROCS},
        {"unread", VG_REC_O_UNREAD}, {"kin", VG_REC_O_KIN},         {"proc", VG_REC_O_PROC},
        {"kmsg", VG_REC_O_KMSG},     {"xid_dev", VG_REC_O_XID_DEV}, {"xid", VG_REC_O_XID},
    };
    size_t i = 0;
    while (i < sizeof(words) / sizeof(words[0]) && !vg_parse_is(w, n, words[i].word))
        i++;
    if (i == sizeof(words) / sizeof(words[0]))
        return 0;
    int rc = vg_rec_close(r);
    if (rc)
        return rc;
    enum vg_rec_obj o = words[i].obj;
    /* where each may stand: the driver's parts after "driver", the table's after "procs" */
    bool in_driver = r->had_driver && !r->had_procs;
    struct vg_kmsg_log *log = &r->snap->kmsg;
    struct vg_kmsg_xid_dev *dev = log->ndevs ? &log->devs[log->ndevs - 1] : NULL;
    bool ok = o == VG_REC_O_KMSG      ? r->had_procs && !r->had_kmsg
              : o == VG_REC_O_XID_DEV ? r->had_kmsg && log->ndevs < VG_KMSG_DEVS_MAX
              : o == VG_REC_O_XID     ? dev && dev->nxid < VG_KMSG_XID_KEEP
              : r->had_kmsg           ? false
              : o == VG_REC_O_DRIVER  ? !r->had_driver
              : o == VG_REC_O_PROCS   ? r->had_driver && !r->had_procs
              : o == VG_REC_O_ERROR || o == VG_REC_O_GPU ? in_driver
              : o == VG_REC_O_MIG || o == VG_REC_O_GPROC ? in_driver && r->gpu
                                                         : r->had_procs;
    if (!ok)
        return vg_rec_fail(r, -EINVAL, "'%s' out of place", words[i].word);
    void *obj = NULL;
    struct vg_gpu *parent = r->gpus.ngpus ? &r->gpus.gpus[r->gpus.ngpus - 1] : NULL;
    switch (o) {
    case VG_REC_O_DRIVER:
        r->had_driver = true;
        obj = &r->gpus;
        break;
    case VG_REC_O_ERROR:
        obj = r->gpu ? vg_rec_push((void **)&r->gpu->errors, &r->gpu->nerrors,
                                   sizeof(struct vg_gpu_error))
                     : vg_rec_push((void **)&r->gpus.errors, &r->gpus.nerrors,
                                   sizeof(struct vg_gpu_error));
        break;
    case VG_REC_O_GPU:
        obj = r->gpu = vg_rec_push((void **)&r->gpus.gpus, &r->gpus.ngpus, sizeof(struct vg_gpu));
        break;
    case VG_REC_O_MIG:
        obj = r->gpu = vg_rec_push((void **)&parent->mig, &parent->nmig, sizeof(struct vg_gpu));
        break;
    case VG_REC_O_GPROC:
        obj = vg_rec_push((void **)&r->gpu->procs, &r->gpu->nprocs, sizeof(struct vg_gpu_proc));
        break;
    case VG_REC_O_PROCS:
        r->had_procs = true;
        obj = &r->procs;
        break;
    case VG_REC_O_UNREAD:
        obj = vg_rec_push((void **)&r->procs.unread, &r->procs.nunread,
                          sizeof(struct vg_proc_unread));
        break;
    case VG_REC_O_KIN:
        obj = vg_rec_push((void **)&r->procs.kin, &r->procs.nkin, sizeof(struct vg_proc_kin));
        break;
    case VG_REC_O_PROC:
        obj = vg_rec_push((void **)&r->procs.procs, &r->procs.n, sizeof(struct vg_proc));
        memset(r->env_set, 0, sizeof(r->env_set));
        r->nspid_set = false;
        break;
    case VG_REC_O_KMSG:
        r->had_kmsg = true;
        obj = log;
        break;
    case VG_REC_O_XID_DEV:
        obj = dev = vg_rec_push((void **)&log->devs, &log->ndevs, sizeof(*log->devs));
        log->devs_cap = log->ndevs;
        if (dev && !(dev->xid = calloc(VG_KMSG_XID_KEEP, sizeof(*dev->xid)))) {
            log->ndevs--;
            obj = NULL;
        }
        r->pci_set = false;
        break;
    case VG_REC_O_XID:
        obj = &dev->xid[dev->nxid++];
        break;
    case VG_REC_O_SNAP:
        break;
    }
    if (!obj)
        return vg_rec_fail(r, -ENOMEM, "out of memory");
    r->obj = o;
    r->cur = obj;
    r->set = 0;
    return 1;
}

/* The list fields of a process: nspid, env, dev, path_minor, dev_path. 1 when key was one.
 * long: one branch per list key, each its own strict parse; split, they would only pass r, p and
 * the line around. */
static int vg_rec_proc_list(struct vg_rec_reader *r, const char *k, size_t kn, const char *v,
                            size_t vn)
{
    struct vg_proc *p = r->cur;
    const char *end = v + vn;
    if (vg_parse_is(k, kn, "nspid")) {
        if (r->nspid_set)
            return vg_rec_fail(r, -EINVAL, "nspid given twice");
        r->nspid_set = true;
        while (v < end) {
            const char *sp = memchr(v, ' ', (size_t)(end - v));
            size_t len = sp ? (size_t)(sp - v) : (size_t)(end - v);
            int64_t x;
            if (vg_parse_i64n(v, len, 1, INT32_MAX, &x))
                return vg_rec_fail(r, -EINVAL, "nspid takes process ids");
            pid_t *slot = vg_rec_push((void **)&p->nspid, &p->nnspid, sizeof(pid_t));
            if (!slot)
                return vg_rec_fail(r, -ENOMEM, "out of memory");
            *slot = (pid_t)x;
            v += len + (sp ? 1 : 0);
        }
        return p->nnspid ? 1 : vg_rec_fail(r, -EINVAL, "nspid takes process ids");
    }
    if (vg_parse_is(k, kn, "env")) {
        const char *sp = memchr(v, ' ', vn);
        int var = 0;
        while (sp && var < VG_ENV_COUNT &&
               !vg_parse_is(v, (size_t)(sp - v), vg_env_name((enum vg_env_var)var)))
            var++;
        if (!sp || var == VG_ENV_COUNT)
            return vg_rec_fail(r, -EINVAL, "env takes a variable vramguard reads and a string");
        if (r->env_set[var])
            return vg_rec_fail(r, -EINVAL, "env %s given twice", vg_env_name(var));
        size_t len;
        int rc = vg_rec_get_str(r, sp + 1, (size_t)(end - sp - 1), &p->env[var], &len);
        if (rc)
            return rc;
        r->env_set[var] = true;
        return strlen(p->env[var]) == len ? 1 : vg_rec_fail(r, -EINVAL, "env holds a NUL byte");
    }
    if (vg_parse_is(k, kn, "dev")) {
        const char *sp = memchr(v, ' ', vn);
        uint64_t minor;
        unsigned by;
        if (!sp || vg_parse_u64n(v, (size_t)(sp - v), &minor) || minor > VG_DEV_GPU_MINOR_MAX)
            return vg_rec_fail(r, -EINVAL, "dev takes a GPU minor (0-%u) and how it is held",
                               VG_DEV_GPU_MINOR_MAX);
        int rc = vg_rec_get_bits(r, sp + 1, (size_t)(end - sp - 1), vg_rec_by, &by);
        if (rc)
            return rc;
        if (p->ndev_minors && p->dev_minors[p->ndev_minors - 1] >= minor)
            return vg_rec_fail(r, -EINVAL, "dev minors must be in ascending order");
        size_t n = p->ndev_minors, nb = p->ndev_minors;
        unsigned *m = vg_rec_push((void **)&p->dev_minors, &n, sizeof(unsigned));
        unsigned char *b = m ? vg_rec_push((void **)&p->dev_minors_by, &nb, 1) : NULL;
        if (!m || !b)
            return vg_rec_fail(r, -ENOMEM, "out of memory");
        *m = (unsigned)minor;
        *b = (unsigned char)by;
        p->ndev_minors = n;
        return 1;
    }
    if (vg_parse_is(k, kn, "path_minor")) {
        uint64_t minor;
        if (vg_parse_u64n(v, vn, &minor) || minor > VG_DEV_GPU_MINOR_MAX)
            return vg_rec_fail(r, -EINVAL, "path_minor takes a GPU minor (0-%u)",
                               VG_DEV_GPU_MINOR_MAX);
        if (p->npath_minors && p->path_minors[p->npath_minors - 1] >= minor)
            return vg_rec_fail(r, -EINVAL, "path_minor minors must be in ascending order");
        unsigned *m = vg_rec_push((void **)&p->path_minors, &p->npath_minors, sizeof(unsigned));
        if (!m)
            return vg_rec_fail(r, -ENOMEM, "out of memory");
        *m = (unsigned)minor;
        return 1;
    }
    if (vg_parse_is(k, kn, "dev_path")) {
        char **slot = vg_rec_push((void **)&p->dev_paths, &p->ndev_paths, sizeof(char *));
        if (!slot)
            return vg_rec_fail(r, -ENOMEM, "out of memory");
        if (vg_parse_is(v, vn, "-"))
            return 1;
        size_t len;
        int rc = vg_rec_get_str(r, v, vn, slot, &len);
        if (rc)
            return rc;
        return strlen(*slot) == len ? 1 : vg_rec_fail(r, -EINVAL, "dev_path holds a NUL byte");
    }
    return 0;
}

/* The kernel log's fields that are no plain field: its state, a device's pci and codes. */
static int vg_rec_kmsg_special(struct vg_rec_reader *r, const char *k, size_t kn, const char *v,
                               size_t vn)
{
    struct vg_kmsg_log *log = &r->snap->kmsg;
    if (r->obj == VG_REC_O_KMSG && vg_parse_is(k, kn, "state")) {
        bool read = vg_parse_is(v, vn, "read");
        if (r->kmsg_state_set || (!read && !vg_parse_is(v, vn, "unreadable")))
            return vg_rec_fail(r, -EINVAL, "state takes read or unreadable, once");
        log->state = read ? VG_KMSG_READ : VG_KMSG_UNREADABLE;
        r->kmsg_state_set = true;
        return 1;
    }
    if (r->obj != VG_REC_O_XID_DEV)
        return 0;
    struct vg_kmsg_xid_dev *d = r->cur;
    if (vg_parse_is(k, kn, "pci")) {
        if (r->pci_set || vg_pci_parse(v, vn, &d->pci) != 0)
            return vg_rec_fail(r, -EINVAL, "pci takes DOMAIN:BUS:DEVICE, once");
        r->pci_set = true;
        return 1;
    }
    if (!vg_parse_is(k, kn, "code"))
        return 0;
    const char *f[3], *end = v + vn;
    size_t fl[3];
    uint64_t x[3];
    for (int i = 0; i < 3; i++) {
        const char *sp = memchr(v, ' ', (size_t)(end - v));
        f[i] = v;
        fl[i] = (size_t)((i < 2 && sp ? sp : end) - v);
        v = i < 2 && sp ? sp + 1 : end;
        if (vg_parse_u64n(f[i], fl[i], &x[i]) != 0)
            return vg_rec_fail(r, -EINVAL, "code takes CODE COUNT LAST_TS_US");
    }
    if (d->ncodes == VG_KMSG_CODES_MAX || x[0] > 0xffffu)
        return vg_rec_fail(r, -EINVAL, "more than %d codes, or a code above 65535",
                           VG_KMSG_CODES_MAX);
    d->codes[d->ncodes++] = (struct vg_kmsg_code){(unsigned)x[0], x[1], x[2]};
    return 1;
}

/* The fields that are no plain field of a table. 1 when key was one, 0 when not. */
static int vg_rec_special(struct vg_rec_reader *r, const char *k, size_t kn, const char *v,
                          size_t vn)
{
    if (r->obj == VG_REC_O_SNAP && vg_parse_is(k, kn, "taken_at")) {
        if (r->taken_at_set)
            return vg_rec_fail(r, -EINVAL, "taken_at given twice");
        r->taken_at_set = true;
        const char *dot = memchr(v, '.', vn);
        int64_t sec, nsec;
        if (!dot || (size_t)(v + vn - dot - 1) != 9 ||
            vg_parse_i64n(v, (size_t)(dot - v), 0, INT64_MAX, &sec) ||
            vg_parse_i64n(dot + 1, 9, 0, 999999999, &nsec))
            return vg_rec_fail(r, -EINVAL, "taken_at takes SECONDS.NANOSECONDS (9 digits)");
        r->snap->taken_at.tv_sec = (time_t)sec;
        r->snap->taken_at.tv_nsec = (long)nsec;
        return 1;
    }
    if (r->obj == VG_REC_O_DRIVER &&
        (vg_parse_is(k, kn, "proc_api") || vg_parse_is(k, kn, "mem_api"))) {
        bool proc = k[0] == 'p';
        bool *given = proc ? &r->proc_api_set : &r->mem_api_set;
        const char **dst = proc ? &r->gpus.proc_api : &r->gpus.mem_api;
        /* the list points at static strings: the names the NVML client uses */
        static const char *const apis[] = {"v3", "v2", "v1"};
        size_t i = proc ? 0 : 1;
        while (i < 3 && !vg_parse_is(v, vn, apis[i]))
            i++;
        if (i == 3 || *given)
            return vg_rec_fail(r, -EINVAL, "%.*s takes %s, once", (int)kn, k,
                               proc ? "v3, v2 or v1" : "v2 or v1");
        *dst = apis[i];
        *given = true;
        return 1;
    }
    if (r->obj == VG_REC_O_PROCS && vg_parse_is(k, kn, "pidns")) {
        enum vg_proc_pidns ns = VG_PROC_PIDNS_UNKNOWN;
        if (vg_parse_is(v, vn, vg_proc_pidns_id(VG_PROC_PIDNS_INITIAL)))
            ns = VG_PROC_PIDNS_INITIAL;
        else if (vg_parse_is(v, vn, vg_proc_pidns_id(VG_PROC_PIDNS_NESTED)))
            ns = VG_PROC_PIDNS_NESTED;
        if (r->pidns_set || ns == VG_PROC_PIDNS_UNKNOWN)
            return vg_rec_fail(r, -EINVAL, "pidns takes initial or nested, once");
        r->procs.pidns = ns;
        r->pidns_set = true;
        return 1;
    }
    if (r->obj == VG_REC_O_PROC)
        return vg_rec_proc_list(r, k, kn, v, vn);
    if (r->obj == VG_REC_O_KMSG || r->obj == VG_REC_O_XID_DEV)
        return vg_rec_kmsg_special(r, k, kn, v, vn);
    return 0;
}

/* One line after the header. 1 at "end", else 0 or negative. */
static int vg_rec_line(struct vg_rec_reader *r, const char *s, size_t n)
{
    const char *sp = memchr(s, ' ', n);
    size_t kn = sp ? (size_t)(sp - s) : n;
    if (!sp) {
        if (vg_parse_is(s, n, "end")) {
            int rc = vg_rec_close(r);
            if (rc)
                return rc;
            if (!r->had_procs)
                return vg_rec_fail(r, -EINVAL, "the record has no 'procs'");
            /* every snapshot names where it was read: outputs show it */
            if (!r->snap->proc_root || !r->snap->dev_dir)
                return vg_rec_fail(r, -EINVAL, "the record has no %s",
                                   r->snap->proc_root ? "dev_dir" : "proc_root");
            return 1;
        }
        int rc = vg_rec_open(r, s, n);
        if (rc)
            return rc < 0 ? rc : 0;
        return vg_rec_fail(r, -EINVAL, "unknown word '%.*s' (or a field without a value)", (int)n,
                           s);
    }
    const char *v = sp + 1;
    size_t vn = n - kn - 1;
    if (vn == 0)
        return vg_rec_fail(r, -EINVAL, "'%.*s' without a value", (int)kn, s);
    const struct vg_rec_field *t = vg_rec_table(r->obj);
    int i = vg_rec_find(t, s, kn);
    if (i < 0) {
        int rc = vg_rec_special(r, s, kn, v, vn);
        if (rc)
            return rc < 0 ? rc : 0;
        return vg_rec_fail(r, -EINVAL, "unknown key '%.*s' in %s", (int)kn, s,
                           vg_rec_obj_name(r->obj));
    }
    if (r->set & ((uint64_t)1 << i))
        return vg_rec_fail(r, -EINVAL, "%s given twice", t[i].key);
    r->set |= (uint64_t)1 << i;
    return vg_rec_store(r, &t[i], r->cur, v, vn);
}

/* The first line: "vramguard-snapshot VERSION", of the version this reader knows. */
static int vg_rec_header(struct vg_rec_reader *r, const char *s, size_t n)
{
    const size_t mn = sizeof(VG_REC_MAGIC " ") - 1;
    uint64_t v;
    if (!vg_parse_starts(s, n, VG_REC_MAGIC " ") || vg_parse_u64n(s + mn, n - mn, &v))
        return vg_rec_fail(r, -EINVAL,
                           "not a vramguard snapshot record (no '" VG_REC_MAGIC " %d' header)",
                           VG_SNAP_RECORD_VERSION);
    if (v != VG_SNAP_RECORD_VERSION)
        return vg_rec_fail(r, -EINVAL,
                           "a record of another version (%" PRIu64 "; this vramguard reads "
                           "version %d)",
                           v, VG_SNAP_RECORD_VERSION);
    return 0;
}

int vg_snap_record_parse(const char *text, size_t len, const char *name, struct vg_snapshot **out,
                         struct vg_err *err)
{
    *out = NULL;
    struct vg_rec_reader r = {.name = name ? name : "record", .err = err};
    vg_gpu_list_init(&r.gpus);
    vg_proc_table_init(&r.procs);
    r.snap = vg_snap_new();
    if (!r.snap)
        return vg_err_set(err, -ENOMEM, "out of memory");
    r.snap->taken_at = (struct timespec){0};
    r.cur = r.snap;
    r.obj = VG_REC_O_SNAP;

    const char *at = text, *end = text + len, *line;
    size_t n;
    int rc = 0;
    bool header = false, done = false;
    while (!rc && vg_parse_line(&at, end, &line, &n)) {
        r.line++;
        if (done) {
            rc = vg_rec_fail(&r, -EINVAL, "text after 'end'");
            break;
        }
        if (n && line[0] == '#')
            continue;
        if (memchr(line, '\0', n) || (n && line[n - 1] == '\r')) {
            rc = vg_rec_fail(&r, -EINVAL, "a NUL byte or a carriage return in a line");
            break;
        }
        if (!header) {
            rc = vg_rec_header(&r, line, n);
            header = true;
            continue;
        }
        rc = vg_rec_line(&r, line, n);
        if (rc == 1) {
            done = true;
            rc = 0;
        }
    }
    if (!rc && !done) {
        r.line++;
        rc = vg_rec_fail(&r, -EINVAL,
                         header ? "the record ends before its 'end' line"
                                : "not a vramguard snapshot record (it is empty)");
    }
    if (!rc)
        rc = vg_snap_assemble(r.snap, &r.gpus, r.snap->driver_ok, &r.procs, err);
    if (!rc)
        rc = vg_snap_join_xids(r.snap, err);
    if (rc) {
        vg_gpu_list_release(&r.gpus);
        vg_proc_table_release(&r.procs);
        vg_snap_free(r.snap);
        return rc;
    }
    *out = r.snap;
    return 0;
}

int vg_snap_record_read(const char *path, struct vg_snapshot **out, struct vg_err *err)
{
    *out = NULL;
    struct vg_buf b;
    vg_buf_init(&b, VG_SNAP_RECORD_MAX);
    int rc = vg_file_read_regular(AT_FDCWD, path, &b);
    if (rc) {
        vg_buf_release(&b);
        return vg_err_set(err, rc, "cannot read '%s': %s", path,
                          rc == -E2BIG    ? "larger than a record may be"
                          : rc == -EINVAL ? "not a regular file"
                                          : strerror(-rc));
    }
    rc = vg_snap_record_parse(vg_buf_str(&b), b.len, path, out, err);
    vg_buf_release(&b);
    if (!rc && !((*out)->replay = strdup(path))) {
        vg_snap_free(*out);
        *out = NULL;
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    return rc;
}
