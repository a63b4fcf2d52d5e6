/*
 * Whether a procfs is the initial PID namespace's, the one the NVIDIA driver numbers processes
 * in. NSpid cannot tell: it is relative to the procfs mount, so a container with its own PID
 * namespace and its own /proc shows one level, as the host does. The namespace's inode can:
 * the initial PID namespace's is PROC_PID_INIT_INO (4026531836), fixed by the kernel.
 *
 * Which namespace's inode: the procfs's own. Its PID 1 lives in it, so 1/ns/pid names it, but
 * following that link needs ptrace access to PID 1 (root, or the owner of a container's init).
 * Otherwise our own (self/ns/pid, always readable): "self" resolves only in a procfs of our
 * namespace or an ancestor, so when ours is the initial one the procfs's is too, and when NSpid
 * has one level the procfs's namespace is ours. Past that: unknown, never a guess.
 *
 * One fallback, for a view where neither link can be followed (another procfs root as an
 * ordinary user): PID 2 being kthreadd, a kernel thread. Kernel threads live only in the initial
 * namespace and their flag cannot be set from user space, so seeing one proves "initial"; not
 * seeing one (hidepid hides root's processes) proves nothing.
 */
#include "proc/internal.h"
#include "proc/proc.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "util/file.h"

#define VG_PROC_PID_INIT_INO 4026531836ull /* PROC_PID_INIT_INO, include/linux/proc_ns.h */
#define VG_PF_KTHREAD 0x00200000u          /* PF_KTHREAD, the 9th field of stat */

/* The inode of the namespace link at root_fd/path; false when it cannot be followed. */
static bool vg_pidns_ino(int root_fd, const char *path, unsigned long long *ino)
{
    struct stat st;
    if (fstatat(root_fd, path, &st, 0) != 0)
        return false;
    *ino = (unsigned long long)st.st_ino;
    return true;
}

/* PID 2 is the kernel's kthreadd: only the initial namespace has kernel threads. */
static bool vg_pidns_kthreadd(int root_fd)
{
    char buf[1024];
    size_t len;
    if (vg_file_read_small(root_fd, "2/stat", buf, sizeof(buf), &len) != 0)
        return false;
    struct vg_proc p;
    memset(&p, 0, sizeof(p));
    bool host = vg_proc_parse_stat(buf, len, &p) == 0 && p.ppid == 0 && p.comm &&
                strcmp(p.comm, "kthreadd") == 0 && (p.flags & VG_PROC_PF_KTHREAD);
    vg_proc_release(&p);
    return host;
}

enum vg_proc_pidns vg_proc_pidns_read(int root_fd, pid_t self_depth)
{
    unsigned long long ino;
    if (vg_pidns_ino(root_fd, "1/ns/pid", &ino))
        return ino == VG_PROC_PID_INIT_INO ? VG_PROC_PIDNS_INITIAL : VG_PROC_PIDNS_NESTED;
    if (vg_pidns_ino(root_fd, "self/ns/pid", &ino)) {
        if (ino == VG_PROC_PID_INIT_INO)
            return VG_PROC_PIDNS_INITIAL;
        if (self_depth == 1)
            return VG_PROC_PIDNS_NESTED;
    }
    return vg_pidns_kthreadd(root_fd) ? VG_PROC_PIDNS_INITIAL : VG_PROC_PIDNS_UNKNOWN;
}

const char *vg_proc_pidns_id(enum vg_proc_pidns ns)
{
    switch (ns) {
    case VG_PROC_PIDNS_INITIAL:
        return "initial";
    case VG_PROC_PIDNS_NESTED:
        return "nested";
    case VG_PROC_PIDNS_UNKNOWN:
        break;
    }
    return NULL;
}
