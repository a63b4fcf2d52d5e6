/*
 * Infrastructure: the programs that hold GPUs on purpose (display servers, the persistence
 * daemon, DCGM, the fabric manager, MPS, monitors, vramguard), known by what they are, never by
 * a name the process chose. A process sets its comm with prctl(PR_SET_NAME) and its argv[0]
 * with exec, so a leftover of a job can call itself Xorg; it cannot make the file it runs a
 * root-owned Xorg binary in directories only root can change, nor give itself a system uid.
 *
 * The name is a hint that picks which program to check for (a table: name -> the executable
 * basenames that program is installed as); the evidence decides (struct vg_infra's facts):
 *   - the executable (/proc/PID/exe, proc/exe.c): its basename is one the table accepts for
 *     the name; the file is owned by root and writable by neither group nor others; every
 *     directory from the process's root down to it is too (so /tmp, /home, /dev/shm and
 *     anything a user can write are out); and the path still names that very file (a deleted
 *     or replaced executable proves nothing any more);
 *   - for a hand-off's baseline also the uid (root or a system uid, never the job's own) and
 *     the cgroup (never a job's, never a user's service manager; a system service's counts for).
 * Any accepted basename in any trusted place is accepted, rather than a list of paths: Xorg is
 * /usr/lib/xorg/Xorg on Debian, /usr/libexec/Xorg on Fedora, somewhere in /nix/store on NixOS,
 * /usr/bin/dcgm-exporter in its container; what makes it infrastructure is that root put it
 * there, which is what the owner and directory checks prove.
 *
 * Decisions per use (the reasons are in infra.c):
 *   - signalling (clean, top, the epilog's stop: act/kill.h): never signalled when PROVEN or
 *     UNPROVEN (named so, and what it runs could not be checked, or was deleted or replaced:
 *     a package upgrade leaves a real daemon so). Refusing hides no memory: the plan lists the
 *     refusal and the holder stays a holder. An IMPOSTOR (named so, but running another
 *     program, or one a user could have written) is an ordinary process.
 *   - a hand-off's baseline (act/handoff.h): only PROVEN infrastructure run by root or a
 *     system uid, not the job's uid, outside any job's cgroup and any user's service manager
 *     (vg_infra_baseline); anything else that holds the GPU is a holder: dirty.
 * vramguard itself and its ancestors are known by PID (act/kill.h's context), not here.
 *
 * Pure functions over a struct vg_proc; names are static strings.
 */
#ifndef VG_ACT_INFRA_H
#define VG_ACT_INFRA_H

#include <stdbool.h>
#include <sys/types.h>

#include "proc/proc.h"

enum vg_infra_kind {
    VG_INFRA_NONE,     /* named like no infrastructure */
    VG_INFRA_IMPOSTOR, /* named like it, but runs another program, or one a user could write */
    VG_INFRA_UNPROVEN, /* named like it; what it runs could not be read, or was deleted or
                        * replaced since it started */
    VG_INFRA_PROVEN,   /* runs a root-owned, intact copy of the program it is named for */
};

/* The facts, as bits (for the JSON and the words). */
enum {
    VG_INFRA_F_EXE_PROGRAM = 1u << 0,    /* its executable is named as that program installs */
    VG_INFRA_F_EXE_ROOT = 1u << 1,       /* the file is root's, writable by no one else */
    VG_INFRA_F_DIRS_ROOT = 1u << 2,      /* so is every directory down to it */
    VG_INFRA_F_EXE_INTACT = 1u << 3,     /* the path still names the file it runs */
    VG_INFRA_F_EXE_UNKNOWN = 1u << 4,    /* some of that could not be read */
    VG_INFRA_F_EXE_OTHER = 1u << 5,      /* it runs another program */
    VG_INFRA_F_EXE_UNTRUSTED = 1u << 6,  /* the file is not root's, or others may write it */
    VG_INFRA_F_DIRS_UNTRUSTED = 1u << 7, /* a directory down to it is not root's, or others may
                                          * write it (/tmp, /home, /dev/shm ...) */
    VG_INFRA_F_EXE_DELETED = 1u << 8,    /* deleted or replaced since it started */
    /* vg_infra_baseline's */
    VG_INFRA_F_SYSTEM_UID = 1u << 9,    /* root or a system uid */
    VG_INFRA_F_USER_UID = 1u << 10,     /* a person's uid (nobody included), or unknown */
    VG_INFRA_F_JOB_UID = 1u << 11,      /* the job's own uid */
    VG_INFRA_F_SERVICE = 1u << 12,      /* a system service's cgroup (system.slice/X.service) */
    VG_INFRA_F_JOB_CGROUP = 1u << 13,   /* a scheduler job's cgroup (a job_N component) */
    VG_INFRA_F_USER_MANAGER = 1u << 14, /* under a user's service manager (user@UID.service) */
    VG_INFRA_F_LAST = VG_INFRA_F_USER_MANAGER,
};

/* "exe-program", "exe-root", "dirs-root", "exe-intact", "exe-unknown", "exe-other",
 * "exe-untrusted", "dirs-untrusted", "exe-deleted", "system-uid", "user-uid", "job-uid",
 * "service-cgroup", "job-cgroup", "user-manager"; bit is one of them. */
const char *vg_infra_fact_id(unsigned bit);

/* Root or a system uid (1 .. VG_INFRA_SYS_UID_MAX, the SYS_UID_MAX of login.defs' defaults);
 * nobody (65534) is not one. */
#define VG_INFRA_SYS_UID_MAX 999u

struct vg_infra {
    enum vg_infra_kind kind;
    const char *name; /* the program it is named for (the table's); NULL with NONE */
    unsigned facts;   /* VG_INFRA_F_* */
};

/* What p is, from its comm or argv[0]'s basename (the hint; comm is cut to 15 bytes by the
 * kernel, so a 15-byte comm hints at a longer name it starts) and its executable. */
void vg_infra_judge(const struct vg_proc *p, struct vg_infra *out);

/* For a hand-off: whether what p holds is infrastructure's, expected, counted into the
 * baseline. inf is vg_infra_judge's and gains the uid and cgroup facts. True only for PROVEN,
 * run by root or a system uid that is not the job's (job_uid_known), in no job's cgroup and
 * under no user's service manager. The job's uid is never infrastructure, with one exception:
 * a root job (uid 0) would make every root daemon the job's, so for it a root process counts
 * only with a system service's cgroup to show for it. */
bool vg_infra_baseline(const struct vg_proc *p, bool job_uid_known, uid_t job_uid,
                       struct vg_infra *inf);

#endif
