/*
 * Infrastructure by what it is (see infra.h): the table of names and the executables each is
 * installed as, and the judgement over a process's executable, uid and cgroup.
 *
 * Why the two uses decide differently on UNPROVEN (named like infrastructure, the executable
 * unreadable, deleted or replaced):
 *   - signalling refuses it. What a refusal costs is a leftover that stays, and that is said:
 *     clean's plan lists it as refused, and the memory it holds stays on the GPU for the
 *     verdicts to see. What signalling costs when wrong is a display server or the persistence
 *     daemon killed on a shared host, and UNPROVEN is exactly how a real daemon looks after a
 *     package upgrade replaced its binary. A leftover cannot make itself UNPROVEN on a host
 *     vramguard reads as root: a file it wrote is its own (IMPOSTOR), and it cannot delete a
 *     root-owned one.
 *   - a hand-off's baseline does not count it. Counting is what would hide memory: the GPU
 *     would pass as clean for the next job while something unproven holds it. So only PROVEN
 *     counts, and unproven infrastructure is a holder: dirty, with the reason naming it. A
 *     real daemon with a replaced binary drains the node until it is restarted, which is the
 *     fix anyway (it runs code that is no longer installed).
 */
#include "act/infra.h"

#include <string.h>
#include <sys/stat.h>

/* One program: the names it runs under (the hint) and the basenames its executable is
 * installed as. A trailing '*' matches any name starting with what precedes it; exe NULL: the
 * same patterns as the name. */
static const struct vg_infra_def {
    const char *name;
    const char *const *exe;
} vg_infra_table[] = {
    {"Xorg", (const char *const[]){"Xorg", "Xorg.bin", NULL}},
    {"X", (const char *const[]){"X", "Xorg", "Xorg.bin", NULL}},
    {"Xwayland", NULL},
    {"gnome-shell", NULL},
    {"gnome-session*", NULL},
    {"mutter", NULL},
    {"kwin", (const char *const[]){"kwin*", NULL}},
    {"kwin_*", NULL},
    {"plasmashell", NULL},
    {"sddm*", NULL},
    {"gdm*", NULL},
    {"lightdm", NULL},
    {"weston", NULL},
    {"sway", NULL},
    {"Hyprland", NULL},
    {"gamescope*", NULL},
    {"nvidia-persistenced", NULL},
    {"nv-hostengine", NULL},
    {"dcgm-exporter", NULL},
    {"nv-fabricmanager", NULL},
    {"nvidia-fabricmanager",
     (const char *const[]){"nvidia-fabricmanager", "nv-fabricmanager", NULL}},
    {"nvidia-cuda-mps-control", NULL},
    {"nvidia-cuda-mps-server", NULL},
    {"nvidia-smi", NULL},
    {"nvidia-powerd", NULL},
    {"nvidia-device-plugin", NULL},
    {"vramguard", NULL},
};

/* Places a user can write, refused whatever their modes say (the directory walk refuses them
 * too, by owner and mode; this says why in fewer words when the walk could not be made). */
static const char *const vg_infra_user_dirs[] = {"/tmp/",  "/var/tmp/",  "/dev/shm/",
                                                 "/home/", "/run/user/", NULL};

/* The kernel keeps TASK_COMM_LEN - 1 bytes of a process name. */
#define VG_COMM_MAX 15

static bool vg_name_matches(const char *pattern, const char *name, size_t len, bool cut)
{
    size_t plen = strlen(pattern);
    if (plen && pattern[plen - 1] == '*')
        return len >= plen - 1 && memcmp(name, pattern, plen - 1) == 0;
    if (len == plen && memcmp(name, pattern, plen) == 0)
        return true;
    /* comm "nvidia-persiste" is what "nvidia-persistenced" looks like in /proc/PID/stat. */
    return cut && len == VG_COMM_MAX && plen > VG_COMM_MAX && memcmp(name, pattern, len) == 0;
}

static const struct vg_infra_def *vg_infra_hint(const char *name, size_t len, bool cut)
{
    if (!name || len == 0)
        return NULL;
    for (size_t i = 0; i < sizeof(vg_infra_table) / sizeof(vg_infra_table[0]); i++)
        if (vg_name_matches(vg_infra_table[i].name, name, len, cut))
            return &vg_infra_table[i];
    return NULL;
}

static bool vg_infra_exe_named(const struct vg_infra_def *d, const char *base)
{
    if (!d->exe)
        return vg_name_matches(d->name, base, strlen(base), false);
    for (size_t i = 0; d->exe[i]; i++)
        if (vg_name_matches(d->exe[i], base, strlen(base), false))
            return true;
    return false;
}

/* The facts of p's executable against what d installs as. */
static unsigned vg_infra_exe_facts(const struct vg_proc *p, const struct vg_infra_def *d)
{
    if (!(p->known & VG_PROC_K_EXE) || !p->exe)
        return VG_INFRA_F_EXE_UNKNOWN;
    unsigned f = 0;
    const char *slash = strrchr(p->exe, '/');
    f |= vg_infra_exe_named(d, slash ? slash + 1 : p->exe) ? VG_INFRA_F_EXE_PROGRAM
                                                           : VG_INFRA_F_EXE_OTHER;
    for (size_t i = 0; vg_infra_user_dirs[i]; i++)
        if (strncmp(p->exe, vg_infra_user_dirs[i], strlen(vg_infra_user_dirs[i])) == 0)
            f |= VG_INFRA_F_DIRS_UNTRUSTED;
    if (p->exe_deleted)
        f |= VG_INFRA_F_EXE_DELETED;
    if (!(p->known & VG_PROC_K_EXE_STAT))
        f |= VG_INFRA_F_EXE_UNKNOWN;
    else if (S_ISREG(p->exe_mode) && p->exe_uid == 0 && !(p->exe_mode & (S_IWGRP | S_IWOTH)))
        f |= VG_INFRA_F_EXE_ROOT;
    else
        f |= VG_INFRA_F_EXE_UNTRUSTED;
    if (!(p->known & VG_PROC_K_EXE_PATH)) {
        f |= VG_INFRA_F_EXE_UNKNOWN;
    } else {
        f |= p->exe_dirs_trusted ? 0 : VG_INFRA_F_DIRS_UNTRUSTED;
        f |= p->exe_path_same ? VG_INFRA_F_EXE_INTACT : VG_INFRA_F_EXE_DELETED;
    }
    if ((p->known & VG_PROC_K_EXE_PATH) && p->exe_dirs_trusted && !(f & VG_INFRA_F_DIRS_UNTRUSTED))
        f |= VG_INFRA_F_DIRS_ROOT;
    return f;
}

/* Evidence against decides (another program, a file or directory a user could write); then
 * what could not be read or no longer holds; only all of it for proves. */
static enum vg_infra_kind vg_infra_kind_of(unsigned f)
{
    if (f & (VG_INFRA_F_EXE_OTHER | VG_INFRA_F_EXE_UNTRUSTED | VG_INFRA_F_DIRS_UNTRUSTED))
        return VG_INFRA_IMPOSTOR;
    if (f & (VG_INFRA_F_EXE_UNKNOWN | VG_INFRA_F_EXE_DELETED))
        return VG_INFRA_UNPROVEN;
    return VG_INFRA_PROVEN;
}

static void vg_infra_try(const struct vg_proc *p, const struct vg_infra_def *d,
                         struct vg_infra *out)
{
    if (!d)
        return;
    unsigned f = vg_infra_exe_facts(p, d);
    enum vg_infra_kind k = vg_infra_kind_of(f);
    if (out->kind == VG_INFRA_NONE || k > out->kind)
        *out = (struct vg_infra){k, d->name, f};
}

void vg_infra_judge(const struct vg_proc *p, struct vg_infra *out)
{
    *out = (struct vg_infra){VG_INFRA_NONE, NULL, 0};
    if ((p->known & VG_PROC_K_STAT) && p->comm)
        vg_infra_try(p, vg_infra_hint(p->comm, strlen(p->comm), true), out);
    if ((p->known & VG_PROC_K_CMDLINE) && p->cmdline) {
        /* argv[0]'s basename: the cmdline is the arguments joined by spaces, so argv[0] ends
         * at the first space (a program path with a space in it is no hint). */
        const char *a0 = p->cmdline;
        size_t n = strcspn(a0, " ");
        const char *slash = memrchr(a0, '/', n);
        if (slash) {
            n -= (size_t)(slash + 1 - a0);
            a0 = slash + 1;
        }
        vg_infra_try(p, vg_infra_hint(a0, n, false), out);
    }
}

/* Whether some component of the cgroup path starts with prefix (and, with suffix, ends so). */
static bool vg_infra_cgroup_has(const char *cg, const char *prefix, const char *suffix)
{
    size_t pl = strlen(prefix), sl = suffix ? strlen(suffix) : 0;
    for (const char *s = cg;; s++) {
        size_t len = strcspn(s, "/");
        if (len >= pl + sl && strncmp(s, prefix, pl) == 0 &&
            (!suffix || strncmp(s + len - sl, suffix, sl) == 0))
            return true;
        s += len;
        if (!*s)
            return false;
    }
}

/* A system service: the component after "system.slice" is NAME.service (systemd's cgroup
 * v2 path "/system.slice/nvidia-persistenced.service", or v1's name=systemd path). */
static bool vg_infra_service(const char *cg)
{
    const char *s = strstr(cg, "system.slice/");
    if (!s || (s != cg && s[-1] != '/'))
        return false;
    s += strlen("system.slice/");
    size_t len = strcspn(s, "/"), sl = strlen(".service");
    return len > sl && strncmp(s + len - sl, ".service", sl) == 0;
}

bool vg_infra_baseline(const struct vg_proc *p, bool job_uid_known, uid_t job_uid,
                       struct vg_infra *inf)
{
    bool uid_known = (p->known & VG_PROC_K_STATUS) != 0;
    bool system = uid_known && p->uid <= VG_INFRA_SYS_UID_MAX;
    bool job = uid_known && job_uid_known && p->uid == job_uid;
    inf->facts |= system ? VG_INFRA_F_SYSTEM_UID : VG_INFRA_F_USER_UID;
    if (job)
        inf->facts |= VG_INFRA_F_JOB_UID;
    bool service = false;
    if ((p->known & VG_PROC_K_CGROUP) && p->cgroup) {
        if (vg_infra_cgroup_has(p->cgroup, "job_", NULL))
            inf->facts |= VG_INFRA_F_JOB_CGROUP;
        if (vg_infra_cgroup_has(p->cgroup, "user@", ".service"))
            inf->facts |= VG_INFRA_F_USER_MANAGER;
        if ((service = vg_infra_service(p->cgroup)))
            inf->facts |= VG_INFRA_F_SERVICE;
    }
    if (inf->kind != VG_INFRA_PROVEN || !system ||
        (inf->facts & (VG_INFRA_F_JOB_CGROUP | VG_INFRA_F_USER_MANAGER)))
        return false;
    /* The job's uid is never infrastructure, except that a root job's would make every root
     * daemon the job's: a root process then counts with a system service to show for it. */
    return !job || (job_uid == 0 && service);
}

const char *vg_infra_fact_id(unsigned bit)
{
    switch (bit) {
    case VG_INFRA_F_EXE_PROGRAM:
        return "exe-program";
    case VG_INFRA_F_EXE_ROOT:
        return "exe-root";
    case VG_INFRA_F_DIRS_ROOT:
        return "dirs-root";
    case VG_INFRA_F_EXE_INTACT:
        return "exe-intact";
    case VG_INFRA_F_EXE_UNKNOWN:
        return "exe-unknown";
    case VG_INFRA_F_EXE_OTHER:
        return "exe-other";
    case VG_INFRA_F_EXE_UNTRUSTED:
        return "exe-untrusted";
    case VG_INFRA_F_DIRS_UNTRUSTED:
        return "dirs-untrusted";
    case VG_INFRA_F_EXE_DELETED:
        return "exe-deleted";
    case VG_INFRA_F_SYSTEM_UID:
        return "system-uid";
    case VG_INFRA_F_USER_UID:
        return "user-uid";
    case VG_INFRA_F_JOB_UID:
        return "job-uid";
    case VG_INFRA_F_SERVICE:
        return "service-cgroup";
    case VG_INFRA_F_JOB_CGROUP:
        return "job-cgroup";
    case VG_INFRA_F_USER_MANAGER:
        return "user-manager";
    }
    return "unknown";
}
