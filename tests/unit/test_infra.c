/*
 * Unit tests for act/infra.c: infrastructure known by what it is. Table-driven: a name hint
 * (comm or argv[0]) with a good or bad executable (path, owner, mode, directories, deleted or
 * replaced, unreadable), then the hand-off's baseline over uid and cgroup; and the reading of
 * the exe facts from a real process (proc/exe.c) through vg_proc_read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "act/infra.h"
#include "act/kill.h"
#include "proc/proc.h"

/* How the executable looks. */
enum exe_shape {
    EXE_GOOD,     /* root's, 0755, root's directories, the path still names it */
    EXE_UNKNOWN,  /* the link could not be read */
    EXE_NO_STAT,  /* the link, but not the file */
    EXE_NO_WALK,  /* the file, but the path could not be walked */
    EXE_USER,     /* owned by a user */
    EXE_WRITABLE, /* root's, but group-writable */
    EXE_BAD_DIRS, /* in a directory others may write */
    EXE_DELETED,  /* " (deleted)" */
    EXE_REPLACED, /* the path now names another file */
};

static struct vg_proc mk(const char *comm, const char *cmdline, const char *exe,
                         enum exe_shape shape, uid_t uid, const char *cgroup)
{
    struct vg_proc p;
    memset(&p, 0, sizeof(p));
    p.pid = 4242;
    p.ppid = 1;
    p.state = 'S';
    p.uid = uid;
    p.comm = (char *)comm;
    p.cmdline = (char *)cmdline;
    p.cgroup = (char *)cgroup;
    p.known = VG_PROC_K_STAT | VG_PROC_K_STATUS | VG_PROC_K_CMDLINE;
    if (cgroup)
        p.known |= VG_PROC_K_CGROUP;
    if (shape == EXE_UNKNOWN)
        return p;
    p.exe = (char *)exe;
    p.known |= VG_PROC_K_EXE;
    p.exe_deleted = shape == EXE_DELETED;
    if (shape == EXE_NO_STAT)
        return p;
    p.known |= VG_PROC_K_EXE_STAT;
    p.exe_uid = shape == EXE_USER ? 65534 : 0;
    p.exe_mode = shape == EXE_WRITABLE ? 0100775 : 0100755;
    if (shape == EXE_NO_WALK)
        return p;
    p.known |= VG_PROC_K_EXE_PATH;
    p.exe_dirs_trusted = shape != EXE_BAD_DIRS;
    p.exe_path_same = shape != EXE_REPLACED && shape != EXE_DELETED;
    return p;
}

static void test_judge(void **state)
{
    (void)state;
    static const struct {
        const char *comm, *cmdline, *exe;
        enum exe_shape shape;
        enum vg_infra_kind want;
        const char *name;
        unsigned fact; /* one fact that must be among them (0: none checked) */
    } cases[] = {
        /* the real programs, where distributions put them */
        {"Xorg", "/usr/lib/xorg/Xorg :0", "/usr/lib/xorg/Xorg", EXE_GOOD, VG_INFRA_PROVEN, "Xorg",
         VG_INFRA_F_EXE_INTACT},
        {"Xorg", "/usr/libexec/Xorg vt1", "/usr/libexec/Xorg", EXE_GOOD, VG_INFRA_PROVEN, "Xorg",
         0},
        {"X", "X :0", "/usr/lib/xorg/Xorg", EXE_GOOD, VG_INFRA_PROVEN, "X", 0},
        {"nvidia-persiste", "/usr/bin/nvidia-persistenced --user nvidia-persistenced",
         "/usr/bin/nvidia-persistenced", EXE_GOOD, VG_INFRA_PROVEN, "nvidia-persistenced", 0},
        {"gdm-x-session", "/usr/libexec/gdm-x-session", "/usr/libexec/gdm-x-session", EXE_GOOD,
         VG_INFRA_PROVEN, "gdm*", 0},
        {"kwin_wayland", "/usr/bin/kwin_wayland", "/usr/bin/kwin_wayland", EXE_GOOD,
         VG_INFRA_PROVEN, "kwin_*", 0},
        {"nv-fabricmanage", "nv-fabricmanager -c x", "/usr/bin/nv-fabricmanager", EXE_GOOD,
         VG_INFRA_PROVEN, "nv-fabricmanager", 0},
        {"dcgm-exporter", "/usr/bin/dcgm-exporter", "/usr/bin/dcgm-exporter", EXE_GOOD,
         VG_INFRA_PROVEN, "dcgm-exporter", 0},
        /* argv[0] as the hint, comm something else */
        {"python3", "/usr/bin/nv-hostengine -n", "/usr/bin/nv-hostengine", EXE_GOOD,
         VG_INFRA_PROVEN, "nv-hostengine", 0},
        /* impostors: a name chosen with prctl or argv[0], another program behind it */
        {"Xorg", "python train.py", "/usr/bin/python3.11", EXE_GOOD, VG_INFRA_IMPOSTOR, "Xorg",
         VG_INFRA_F_EXE_OTHER},
        {"python3", "nvidia-smi -l 1", "/usr/bin/python3.11", EXE_GOOD, VG_INFRA_IMPOSTOR,
         "nvidia-smi", VG_INFRA_F_EXE_OTHER},
        {"vramguard", "vramguard watch", "/opt/job/bin/leftover", EXE_GOOD, VG_INFRA_IMPOSTOR,
         "vramguard", VG_INFRA_F_EXE_OTHER},
        {"gdm-x-session", "x", "/usr/bin/sleep", EXE_GOOD, VG_INFRA_IMPOSTOR, "gdm*", 0},
        /* the right basename in a place a user can write, or a file a user owns */
        {"Xorg", "Xorg", "/tmp/x/Xorg", EXE_GOOD, VG_INFRA_IMPOSTOR, "Xorg",
         VG_INFRA_F_DIRS_UNTRUSTED},
        {"Xorg", "Xorg", "/home/alice/bin/Xorg", EXE_GOOD, VG_INFRA_IMPOSTOR, "Xorg", 0},
        {"Xorg", "Xorg", "/dev/shm/Xorg", EXE_GOOD, VG_INFRA_IMPOSTOR, "Xorg", 0},
        {"Xorg", "Xorg", "/opt/x/Xorg", EXE_USER, VG_INFRA_IMPOSTOR, "Xorg",
         VG_INFRA_F_EXE_UNTRUSTED},
        {"Xorg", "Xorg", "/opt/x/Xorg", EXE_WRITABLE, VG_INFRA_IMPOSTOR, "Xorg",
         VG_INFRA_F_EXE_UNTRUSTED},
        {"Xorg", "Xorg", "/opt/x/Xorg", EXE_BAD_DIRS, VG_INFRA_IMPOSTOR, "Xorg",
         VG_INFRA_F_DIRS_UNTRUSTED},
        /* what could not be checked, or no longer holds: unproven */
        {"Xorg", "Xorg", NULL, EXE_UNKNOWN, VG_INFRA_UNPROVEN, "Xorg", VG_INFRA_F_EXE_UNKNOWN},
        {"Xorg", "Xorg", "/usr/lib/xorg/Xorg", EXE_NO_STAT, VG_INFRA_UNPROVEN, "Xorg", 0},
        {"Xorg", "Xorg", "/usr/lib/xorg/Xorg", EXE_NO_WALK, VG_INFRA_UNPROVEN, "Xorg", 0},
        {"nvidia-persiste", "nvidia-persistenced", "/usr/bin/nvidia-persistenced", EXE_DELETED,
         VG_INFRA_UNPROVEN, "nvidia-persistenced", VG_INFRA_F_EXE_DELETED},
        {"Xorg", "Xorg", "/usr/lib/xorg/Xorg", EXE_REPLACED, VG_INFRA_UNPROVEN, "Xorg",
         VG_INFRA_F_EXE_DELETED},
        /* no hint: nothing to prove, whatever it runs */
        {"python", "python train.py --name Xorg", "/usr/lib/xorg/Xorg", EXE_GOOD, VG_INFRA_NONE,
         NULL, 0},
        {"Xorgish", "/opt/Xorgish", "/opt/Xorgish", EXE_GOOD, VG_INFRA_NONE, NULL, 0},
        {"nv-fabricmanag", "x", "/usr/bin/nv-fabricmanager", EXE_GOOD, VG_INFRA_NONE, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vg_proc p =
            mk(cases[i].comm, cases[i].cmdline, cases[i].exe, cases[i].shape, 0, NULL);
        struct vg_infra inf;
        vg_infra_judge(&p, &inf);
        if (inf.kind != cases[i].want)
            print_error("case %zu (%s, %s): kind %d, want %d\n", i, cases[i].comm,
                        cases[i].exe ? cases[i].exe : "-", (int)inf.kind, (int)cases[i].want);
        assert_int_equal(inf.kind, cases[i].want);
        if (cases[i].name)
            assert_string_equal(inf.name, cases[i].name);
        else
            assert_null(inf.name);
        if (cases[i].fact)
            assert_true(inf.facts & cases[i].fact);
        /* what signalling refuses: proven and unproven, never an impostor */
        bool protect = cases[i].want == VG_INFRA_PROVEN || cases[i].want == VG_INFRA_UNPROVEN;
        assert_int_equal(vg_kill_protected_name(&p) != NULL, protect);
    }
}

static void test_baseline(void **state)
{
    (void)state;
    static const struct {
        enum exe_shape shape;
        uid_t uid;
        const char *cgroup;
        bool job_uid_known;
        uid_t job_uid;
        bool want;
        unsigned fact;
    } cases[] = {
        {EXE_GOOD, 0, "/system.slice/display-manager.service", true, 1000, true,
         VG_INFRA_F_SERVICE},
        {EXE_GOOD, 0, NULL, true, 1000, true, VG_INFRA_F_SYSTEM_UID},
        {EXE_GOOD, 0, "/", false, 0, true, 0},
        {EXE_GOOD, 120, "/user.slice/user-120.slice/session-c1.scope", true, 1000, true, 0},
        {EXE_GOOD, 999, "/system.slice/nvidia-persistenced.service", true, 1000, true, 0},
        /* a person's uid, nobody included: never */
        {EXE_GOOD, 1000, "/system.slice/x.service", false, 0, false, VG_INFRA_F_USER_UID},
        {EXE_GOOD, 65534, "/system.slice/x.service", true, 1000, false, VG_INFRA_F_USER_UID},
        /* the job's uid: never, unless root's job and a system service's root process */
        {EXE_GOOD, 1000, NULL, true, 1000, false, VG_INFRA_F_JOB_UID},
        {EXE_GOOD, 0, "/system.slice/nvidia-dcgm.service", true, 0, true, VG_INFRA_F_JOB_UID},
        {EXE_GOOD, 0, "/", true, 0, false, VG_INFRA_F_JOB_UID},
        /* a job's cgroup, a user's service manager: never */
        {EXE_GOOD, 0, "/system.slice/slurmstepd.scope/job_42/step_0", true, 1000, false,
         VG_INFRA_F_JOB_CGROUP},
        {EXE_GOOD, 0, "/user.slice/user-1000.slice/user@1000.service/app.slice/x.service", true,
         2000, false, VG_INFRA_F_USER_MANAGER},
        /* not proven: never counted, whoever runs it */
        {EXE_UNKNOWN, 0, "/system.slice/display-manager.service", true, 1000, false, 0},
        {EXE_DELETED, 0, "/system.slice/nvidia-persistenced.service", true, 1000, false, 0},
        {EXE_USER, 0, "/system.slice/display-manager.service", true, 1000, false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vg_proc p = mk("Xorg", "/usr/lib/xorg/Xorg", "/usr/lib/xorg/Xorg", cases[i].shape,
                              cases[i].uid, cases[i].cgroup);
        struct vg_infra inf;
        vg_infra_judge(&p, &inf);
        bool got = vg_infra_baseline(&p, cases[i].job_uid_known, cases[i].job_uid, &inf);
        if (got != cases[i].want)
            print_error("case %zu: uid %u cgroup %s: %d\n", i, (unsigned)cases[i].uid,
                        cases[i].cgroup ? cases[i].cgroup : "-", got);
        assert_int_equal(got, cases[i].want);
        if (cases[i].fact)
            assert_true(inf.facts & cases[i].fact);
    }
    /* the uid unknown: a person's, for all that can be told */
    struct vg_proc p = mk("Xorg", "Xorg", "/usr/lib/xorg/Xorg", EXE_GOOD, 0, NULL);
    p.known &= ~(unsigned)VG_PROC_K_STATUS;
    struct vg_infra inf;
    vg_infra_judge(&p, &inf);
    assert_false(vg_infra_baseline(&p, false, 0, &inf));
    assert_true(inf.facts & VG_INFRA_F_USER_UID);
}

/* The kill policy: an impostor is an ordinary process; a hand-off's job's own uid is never
 * protected, whatever it runs. */
static void test_kill_policy(void **state)
{
    (void)state;
    struct vg_kill_ctx ctx = {.self = 9000, .ruid = 0};
    struct vg_proc fake = mk("Xorg", "Xorg", "/tmp/leftover", EXE_GOOD, 65534, NULL);
    assert_int_equal(vg_kill_check(&fake, &ctx, NULL), VG_KILL_ALLOWED);
    struct vg_proc real = mk("Xorg", "Xorg", "/usr/lib/xorg/Xorg", EXE_GOOD, 1000, NULL);
    assert_int_equal(vg_kill_check(&real, &ctx, NULL), VG_KILL_PROTECTED);
    ctx.job_uid_known = true;
    ctx.job_uid = 1000;
    assert_int_equal(vg_kill_check(&real, &ctx, NULL), VG_KILL_ALLOWED);
    ctx.job_uid = 1001;
    assert_int_equal(vg_kill_check(&real, &ctx, NULL), VG_KILL_PROTECTED);
}

/* proc/exe.c on this very process: the test binary is not deleted, the path names it. */
static void test_read_self(void **state)
{
    (void)state;
    int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read(root, getpid(), NULL, &p, &err), 0);
    assert_true(p.known & VG_PROC_K_EXE);
    assert_non_null(p.exe);
    /* the file this process runs: the test binary, or under valgrind valgrind's own tool
     * (which /proc shows, while valgrind answers the process's own readlink with the test's) */
    if (!getenv("VG_VALGRIND"))
        assert_non_null(strstr(p.exe, "test_infra"));
    assert_false(p.exe_deleted);
    assert_true(p.known & VG_PROC_K_EXE_STAT);
    assert_int_equal(p.exe_uid, geteuid());
    assert_true(p.known & VG_PROC_K_EXE_PATH);
    assert_true(p.exe_path_same);
    vg_proc_release(&p);
    vg_err_release(&err);
    close(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_baseline),
        cmocka_unit_test(test_kill_policy),
        cmocka_unit_test(test_read_self),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
