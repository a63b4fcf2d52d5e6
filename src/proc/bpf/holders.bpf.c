/*
 * The in-kernel holder scan's programs (see src/proc/kscan.c): a task_file iterator, the
 * mechanism `bpftool pids` uses, and a task_vma iterator. The kernel calls the first once per
 * open descriptor of every task (threads that share their leader's table are skipped by the
 * kernel), the second once per memory mapping, and each writes one struct vg_krec
 * (kscan_rec.h) into the iterator's output for each descriptor or mapped file that may be an
 * NVIDIA node: a character device of one of the driver's majors, or a file with the
 * filesystem and inode number of one of --dev DIR's nodes matched by inode (any file on such a
 * filesystem when there are more than VG_KREC_INOS of them; userspace confirms either way). Every
 * other descriptor costs a few loads and compares, nothing else: that is the point.
 *
 * Descriptors of the reading process itself are all written: userspace holds O_PATH
 * descriptors of DIR's nodes while it reads, to check that the kernel names them as statx does
 * (see kscan.c). Processes are numbered in the PID namespace of the --proc view (view_ns, its
 * inode number); tasks outside it are skipped. The program's settings are read-only data set
 * before load.
 */
#include "proc/bpf/vg_core.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "proc/kscan_rec.h"

#define S_IFMT 00170000
#define S_IFCHR 0020000
/* The kernel's dev_t: 12 bits of major above 20 of minor. */
#define VG_KMINORBITS 20
/* Deepest PID namespace nesting the kernel allows is 32. */
#define VG_PIDNS_LEVELS 33

/* One struct each, so that userspace finds every field at a known offset of the section. */
const volatile struct vg_kcfg cfg;
/* The task the last call was about and its numbers in the view (one namespace walk per task),
 * and whether the view's init (pid 1) was walked: the view's namespace is one this iterator
 * walks. */
struct vg_kstate st;

/* The number of the task behind pid in the namespace with inode number ns; 0 when none. */
static __u32 vg_nr_in(struct pid *p, __u32 ns)
{
    if (!p)
        return 0;
    __u32 level = BPF_CORE_READ(p, level);
    __u64 base = (__u64)p + bpf_core_field_offset(struct pid, numbers);
    for (__u32 i = 0; i < VG_PIDNS_LEVELS; i++) {
        if (i > level)
            break;
        struct upid up;
        if (bpf_probe_read_kernel(&up, sizeof(up), (void *)(base + i * sizeof(struct upid))))
            return 0;
        if (up.ns && BPF_CORE_READ(up.ns, ns.inum) == ns)
            return (__u32)up.nr;
    }
    return 0;
}

static bool vg_interesting(__u32 mode, __u32 rdev, __u32 dev, __u64 ino)
{
    if ((mode & S_IFMT) == S_IFCHR) {
        __u32 major = rdev >> VG_KMINORBITS;
        for (int i = 0; i < VG_KREC_MAJORS; i++)
            if (cfg.majors[i] && cfg.majors[i] == major)
                return true;
    }
    bool fs = false;
    for (int i = 0; i < VG_KREC_FS && !fs; i++) {
        if ((__u32)i >= cfg.nfs)
            break;
        fs = cfg.fs_devs[i] == dev;
    }
    if (!fs || cfg.nino == 0)
        return fs;
    /* a stand-in's filesystem holds every other file too (the tests' /tmp): by inode */
    for (int i = 0; i < VG_KREC_INOS; i++) {
        if ((__u32)i >= cfg.nino)
            break;
        if (cfg.inos[i] == ino)
            return true;
    }
    return false;
}

/* The task's numbers in the view, worked out once per task; false when it is outside. */
static bool vg_task_in_view(struct task_struct *task)
{
    if ((__u64)task != st.last_task) {
        st.last_task = (__u64)task;
        st.last_pid = vg_nr_in(task->group_leader->thread_pid, cfg.view_ns);
        st.last_tid = vg_nr_in(task->thread_pid, cfg.view_ns);
        st.last_in_view = st.last_pid != 0;
        if (st.last_pid == 1)
            st.saw_view_init = 1;
    }
    return st.last_in_view;
}

/* One record for file (a descriptor fd, or a mapping: flags VG_KREC_MAP) when it may be an
 * NVIDIA node, or always (self: the reading process's own descriptors, its checks). */
static void vg_record(struct seq_file *seq, struct file *file, __u32 fd, __u32 flags, bool self)
{
    /* Direct loads through the iterator's BTF pointers (the verifier makes them fault-safe):
     * far cheaper than a bpf_probe_read_kernel call each, and this runs for every descriptor. */
    struct dentry *dentry = file->f_path.dentry;
    struct inode *inode = dentry ? dentry->d_inode : 0;
    if (!inode)
        return;
    __u32 mode = inode->i_mode;
    __u32 rdev = inode->i_rdev;
    struct super_block *sb = inode->i_sb;
    __u32 dev = sb ? sb->s_dev : 0;
    __u64 ino = inode->i_ino;
    if (!self && !vg_interesting(mode, rdev, dev, ino))
        return;
    if (!(flags & VG_KREC_MAP) && (file->f_flags & VG_KREC_O_PATH))
        flags |= VG_KREC_PATH;
    struct vg_krec r = {
        .magic = VG_KREC_MAGIC,
        .flags = flags | (self ? VG_KREC_SELF : 0),
        .pid = st.last_pid,
        .tid = st.last_tid,
        .fd = fd,
        .mode = mode,
        .rdev_major = rdev >> VG_KMINORBITS,
        .rdev_minor = rdev & ((1u << VG_KMINORBITS) - 1),
        .dev_major = dev >> VG_KMINORBITS,
        .dev_minor = dev & ((1u << VG_KMINORBITS) - 1),
        .ino = ino,
    };
    bpf_seq_write(seq, &r, sizeof(r));
}

SEC("iter/task_file")
int vg_holders(struct bpf_iter__task_file *ctx)
{
    struct task_struct *task = ctx->task;
    struct file *file = ctx->file;
    if (!task || !file || !vg_task_in_view(task))
        return 0;
    bool self = task->tgid == (int)(bpf_get_current_pid_tgid() >> 32);
    vg_record(ctx->meta->seq, file, ctx->fd, 0, self);
    return 0;
}

/* The same for every file-backed memory mapping of every task (threads that share their
 * leader's address space are skipped by the kernel): a process that closed its descriptors of
 * a node but keeps CUDA's mappings of it holds it all the same. Never unfiltered: the checks
 * are descriptors. */
SEC("iter/task_vma")
int vg_mapped(struct bpf_iter__task_vma *ctx)
{
    struct task_struct *task = ctx->task;
    struct vm_area_struct *vma = ctx->vma;
    if (!task || !vma || !vg_task_in_view(task))
        return 0;
    struct file *file = vma->vm_file;
    if (file)
        vg_record(ctx->meta->seq, file, 0xffffffffu, VG_KREC_MAP, false);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
