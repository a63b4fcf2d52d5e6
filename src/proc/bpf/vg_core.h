/*
 * The few kernel types the holder scan's BPF program (holders.bpf.c) reads, as CO-RE
 * definitions: only the fields it uses, each struct marked preserve_access_index so that libbpf
 * relocates every access against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load.
 * Field order and padding here do not matter; names and types do. Keeping these in the repo
 * means the build needs no BTF of the build machine (no `bpftool btf dump` step).
 */
#ifndef VG_CORE_H
#define VG_CORE_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u16 umode_t;
typedef __u32 dev_t;
typedef _Bool bool;
#define true 1
#define false 0

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct ns_common {
    unsigned int inum;
};

struct pid_namespace {
    struct ns_common ns;
};

struct upid {
    int nr;
    struct pid_namespace *ns;
};

struct pid {
    unsigned int level;
    struct upid numbers[1];
};

struct super_block {
    dev_t s_dev;
};

struct inode {
    umode_t i_mode;
    dev_t i_rdev;
    unsigned long i_ino;
    struct super_block *i_sb;
};

struct dentry {
    struct inode *d_inode;
};

struct path {
    struct dentry *dentry;
};

struct file {
    struct path f_path;
    unsigned int f_flags;
};

struct task_struct {
    int pid;
    int tgid;
    struct task_struct *group_leader;
    struct pid *thread_pid;
};

struct seq_file;

struct bpf_iter_meta {
    struct seq_file *seq;
};

struct bpf_iter__task_file {
    struct bpf_iter_meta *meta;
    struct task_struct *task;
    __u32 fd;
    struct file *file;
};

struct vm_area_struct {
    struct file *vm_file;
};

struct bpf_iter__task_vma {
    struct bpf_iter_meta *meta;
    struct task_struct *task;
    struct vm_area_struct *vma;
};

#pragma clang attribute pop

#endif
