/*
 * The records the in-kernel holder scan's BPF program (bpf/holders.bpf.c) writes and kscan.c
 * reads back, and the program's settings: shared by both sides, so plain C types only (the BPF
 * side has no libc). One record per descriptor, or memory mapping, that may be an NVIDIA node,
 * fixed size, in the order the kernel walked the tasks. Device numbers are split into major and
 * minor already.
 */
#ifndef VG_PROC_KSCAN_REC_H
#define VG_PROC_KSCAN_REC_H

#define VG_KREC_MAGIC 0x76676b72u /* "vgkr": a record that is not one is a parse error */
#define VG_KREC_SELF 1u           /* a descriptor of the reading process itself */
#define VG_KREC_MAP 2u            /* a memory mapping of the file, not a descriptor (fd unused) */
#define VG_KREC_PATH 4u           /* an O_PATH descriptor: a path, no open of the device */
#define VG_KREC_O_PATH                                                                             \
    010000000u /* O_PATH in a file's f_flags (the uapi value, every arch                           \
                * vramguard builds for) */
/* Character-device majors the program matches (vg_dev_majors: nvidia, uvm, 4 others). */
#define VG_KREC_MAJORS 6
/* Filesystems of --dev DIR's inode-matched nodes the program lets through. */
#define VG_KREC_FS 8
/* Their inode numbers, when there are no more than this: only those files are let through;
 * with more, every file on those filesystems is (and userspace sorts them out). */
#define VG_KREC_INOS 32

struct vg_krec {
    unsigned int magic;
    unsigned int flags;
    unsigned int pid; /* the thread group, numbered in the --proc view's PID namespace */
    unsigned int tid; /* the task whose descriptor table this is (same numbering) */
    unsigned int fd;
    unsigned int mode; /* the inode's i_mode */
    unsigned int rdev_major, rdev_minor;
    unsigned int dev_major, dev_minor; /* the inode's filesystem */
    unsigned long long ino;
};

/* The program's read-only settings (its .rodata, set before load). */
struct vg_kcfg {
    unsigned int majors[VG_KREC_MAJORS]; /* 0: unused */
    unsigned int fs_devs[VG_KREC_FS];    /* kernel dev_t: major << 20 | minor */
    unsigned int nfs;
    unsigned int view_ns; /* inode number of the --proc view's PID namespace */
    unsigned long long inos[VG_KREC_INOS];
    unsigned int nino; /* 0: no inode filter */
};

/* The program's state between calls (its .bss): reset before every run. */
struct vg_kstate {
    unsigned long long last_task; /* the task the last call was about (an address) */
    unsigned int last_pid, last_tid, last_in_view;
    unsigned int saw_view_init; /* the view's pid 1 was walked */
};

#endif
