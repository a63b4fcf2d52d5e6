/*
 * vg-helper: puts real processes into the states vramguard diagnoses, so the CLI tests can run on
 * a machine without GPUs. It sets up what its options ask for, reports that it is ready (a pidfile
 * written atomically, and/or "ready\n" on a descriptor), then waits until SIGTERM, SIGINT, SIGHUP
 * or its lifetime runs out. Every process it creates uses the same deadline, so nothing outlives
 * a test by more than --lifetime even if the test forgets to clean up.
 *
 *   vg-helper [options] [-- ARGS...]
 *
 *   --open PATH        open PATH read-only WITHOUT O_CLOEXEC and keep it open (repeatable); the
 *                      point is workers inheriting device fds, as /dev/nvidia* are in real jobs
 *   --open-path PATH   the same with O_PATH (repeatable): holds a real device node that no
 *                      driver would answer an open of (mknod c 195 N on a host without GPUs)
 *   --thread-open PATH a thread of the carrier takes a descriptor table of its own
 *                      (unshare(CLONE_FILES)) and opens PATH read-only in it (repeatable): a
 *                      node in no table that /proc/PID/fd shows, only in task/TID/fd
 *   --uring PATH       open PATH, register it in an io_uring (IORING_REGISTER_FILES) and close
 *                      the descriptor (repeatable: one ring holds them all): the ring alone
 *                      keeps the file open; fd/ shows only anon_inode:[io_uring]
 *   --open-dir DIR     open every non-directory entry of DIR, device nodes with O_PATH, the
 *                      rest read-only, none with O_CLOEXEC (repeatable; RLIMIT_NOFILE raised to
 *                      its hard limit): one process holding thousands of nodes
 *   --map PATH         mmap PATH (PROT_READ, MAP_PRIVATE) so it shows in /proc/PID/maps, and
 *                      close it (repeatable); an empty file is mapped as one page, which is never
 *                      touched: a mapped library, or a device node held only by mapping, as a
 *                      CUDA worker that closed its inherited descriptors holds /dev/nvidiaN
 *                      (a character device that maps, such as c 1 5, works too)
 *   --env NAME=VALUE   put NAME=VALUE in the exec-time environment (repeatable): /proc/PID/environ
 *                      shows only what execve() was given, so the helper re-executes itself
 *                      (/proc/self/exe, same argv) with the new environment when it differs
 *   --clear-env        the re-executed environment holds only the --env variables
 *   --comm NAME        prctl(PR_SET_NAME): the comm of the main process and, unless
 *                      --child-comm says otherwise, of its children (at most 15 bytes kept)
 *   --child-comm NAME  comm of the --children workers
 *   --children N       fork N workers that inherit fds, environment and maps and sleep (DataLoader
 *                      workers); they die with their parent (PR_SET_PDEATHSIG, SIGKILL)
 *   --children-outlive the --children workers live on when their parent dies (until their
 *                      lifetime ends), as stuck DataLoader workers of a crashed main do
 *   --zombie           fork a child that exits at once and is never reaped (repeatable: one
 *                      zombie each)
 *   --zombie-leader    the main thread exits (SYS_exit) while a second thread keeps running and
 *                      the fds stay open: the leader shows Z in /proc/PID/stat, the live thread
 *                      is under /proc/PID/task/ (fds, environ and maps only through task/TID/)
 *   --dstate           a thread blocks in uninterruptible sleep (state D): it clone()s with
 *                      CLONE_VFORK and the child sleeps, so the thread waits in the kernel for it
 *   --orphan           fork; the child carries all the state and the original process exits once
 *                      the child is set up, so the child is reparented (to init or the nearest
 *                      subreaper); the exit status of the original process is 0 once the child
 *                      is set up, 1 if it failed
 *   --setsid           with --orphan: an intermediate process starts a new session, forks the
 *                      carrier and exits, so the carrier is left in a session and process group
 *                      whose leader is gone (the original process exits with its status)
 *   --pgrp             with --orphan: the process that forks the carrier and exits first leads
 *                      its own process group (as a job-control shell puts each job in one), so
 *                      the carrier's group leader is gone: a worker of a dead main process
 *   --own-group        the carrier leads its own process group (setpgid), as the main process
 *                      of a job started from an interactive shell does
 *   --reaper           first of all, the original process forks a child subreaper
 *                      (PR_SET_CHILD_SUBREAPER) that stays until the end, reaping what exits,
 *                      and runs the rest below it; the original exits 0 (systemd --user, tini,
 *                      or a shell that adopts orphans). As pid 1 of a PID namespace the
 *                      original stays itself: a container's init
 *   --reaper-setsid    with --reaper: the subreaper starts a new session first (a login shell)
 *   --leader           a child starts a new session and stays until the end as its leader (a
 *                      login shell, a tmux pane's shell), running the rest below it; the
 *                      process that forked it exits 0
 *   --ignore-hup       ignore SIGHUP (SIG_IGN, shown in SigIgn), as nohup does; children too
 *   --busy PCT         a thread of the carrier burns about PCT% of one CPU (1..100): a job that
 *                      works
 *   --signal-log FILE  every process appends "PID SIGNAME" to FILE for each signal it takes,
 *                      before acting on it (what a test needs to know who was signalled)
 *   --uid USER         after opening and mapping (as root), drop to USER (name or number) with
 *                      its group (or --gid), no supplementary groups, dumpable again; the
 *                      pidfile's directory must then be writable by USER
 *   --gid GID          the group for --uid (default: the user's, or GID = UID when numeric)
 *   --pidfile FILE     when fully ready, write "ROLE PID" lines to FILE.tmp.PID, then rename it
 *                      to FILE (see below)
 *   --ready-fd N       when fully ready, write "ready\n" to descriptor N and close it
 *   --lifetime SEC     exit after SEC seconds whatever happens (default 120, 1..86400)
 *   --alive-fd N       N is the read end of a pipe (inherited, kept in every process created):
 *                      once set up, exit as at SIGTERM when it reports end of file, that is when
 *                      every holder of the write end is gone (vramguard demo's keeper, even one
 *                      killed with SIGKILL)
 *   --ignore-term      ignore SIGTERM (SIG_IGN, so /proc/PID/status SigIgn shows it); children too
 *   --exit-on-term     exit 0 on SIGTERM (the default; for readability of tests)
 *   --help             this text
 *   -- ARGS...         ignored; they only show in /proc/PID/cmdline (e.g. "-- python train.py")
 *
 * Pidfile: one "ROLE PID" line each, in this order:
 *   main PID       the process carrying the state (with --zombie-leader, the Z leader)
 *   orphan PID     with --orphan: the same pid as main
 *   parent PID     with --orphan: the process that forked the carrier and exited (with --setsid,
 *                  the dead session leader: the carrier's sid)
 *   thread TID     with --zombie-leader: the live thread
 *   tables TID     with --thread-open: the thread with its own descriptor table
 *   dstate TID     with --dstate: the thread in D state
 *   vfork PID      with --dstate: the child that thread waits for
 *   child PID      one per --children worker
 *   zombie PID     one per --zombie
 *
 * "Ready" means: every fd open, every map in place, the environment applied, workers started
 * (with their comm and death signal), zombies exited, the leader zombie, the D thread in D, and
 * with --orphan the original process gone and the carrier reparented.
 *
 * Descriptors other than 0-2, --ready-fd and --alive-fd that the helper inherits are closed at
 * start, so
 * /proc/PID/fd shows only what the options asked for. Every wait is bounded by the deadline;
 * signals are taken synchronously with sigtimedwait(), so there are no handlers and no busy
 * loops (the few state polls sleep 2 ms between reads). Errors go to stderr as
 * "vg-helper: ..." with exit status 1 (2 for usage errors). Once set up, processes leave with
 * _exit(): there is nothing to flush, and a zombie leader must not run exit-time hooks.
 */
#include <dirent.h>
#include <linux/io_uring.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ITEMS 64 /* --open, --map, --env each */
#define MAX_CHILDREN 64
#define MAX_ZOMBIES 16
#define MAX_LIFETIME 86400L
#define POLL_NS 2000000L /* between reads of /proc while waiting for a state */

extern char **environ;

static const char usage_text[] =
    "usage: vg-helper [options] [-- ARGS...]\n"
    "Puts real processes into the states vramguard diagnoses (tests only).\n"
    "\n"
    "  --open PATH        keep PATH open, inheritable (no O_CLOEXEC); repeatable\n"
    "  --open-path PATH   the same with O_PATH (real device nodes no driver answers)\n"
    "  --uring PATH       register PATH in an io_uring and close its descriptor; repeatable\n"
    "  --thread-open PATH a thread takes its own descriptor table (unshare CLONE_FILES), opens "
    "PATH\n"
    "  --open-dir DIR     open every non-directory entry of DIR (nodes with O_PATH)\n"
    "  --map PATH         mmap PATH read-only so it shows in /proc/PID/maps; repeatable\n"
    "  --env NAME=VALUE   set in the exec-time environment (re-exec); repeatable\n"
    "  --clear-env        exec-time environment holds only the --env variables\n"
    "  --comm NAME        prctl(PR_SET_NAME) for the main process (and children)\n"
    "  --child-comm NAME  comm of the --children workers\n"
    "  --children N       fork N workers inheriting fds/env/maps (die with the parent)\n"
    "  --children-outlive the workers outlive their parent (until their lifetime ends)\n"
    "  --zombie           fork a child that exits and is never reaped; repeatable\n"
    "  --zombie-leader    main thread exits, a second thread keeps running with the fds\n"
    "  --dstate           a thread sits in state D (waits on a CLONE_VFORK child)\n"
    "  --orphan           a child carries the state; the original process exits\n"
    "  --setsid           with --orphan: the carrier's session leader is gone too\n"
    "  --pgrp             with --orphan: the exiting parent led its own process group\n"
    "  --own-group        the carrier leads its own process group\n"
    "  --reaper           a child subreaper stays above everything (the original exits)\n"
    "  --reaper-setsid    with --reaper: the subreaper leads a new session\n"
    "  --leader           a child session leader stays above the rest (the forker exits)\n"
    "  --ignore-hup       ignore SIGHUP, as nohup does\n"
    "  --busy PCT         a thread of the carrier burns about PCT% of one CPU\n"
    "  --signal-log FILE  append \"PID SIGNAME\" to FILE for every signal taken\n"
    "  --uid USER         drop to USER (name or number) after opening/mapping (root only)\n"
    "  --gid GID          group for --uid (default: the user's, or GID = UID)\n"
    "  --pidfile FILE     when ready, write \"ROLE PID\" lines atomically (tmp + rename)\n"
    "  --ready-fd N       when ready, write \"ready\\n\" to fd N and close it\n"
    "  --lifetime SEC     exit after SEC seconds whatever happens (default 120)\n"
    "  --alive-fd N       exit when pipe end N reports end of file (its writer is gone)\n"
    "  --ignore-term      ignore SIGTERM\n"
    "  --exit-on-term     exit 0 on SIGTERM (default)\n"
    "  --help             this text\n"
    "  -- ARGS...         ignored; only visible in /proc/PID/cmdline\n"
    "Options may instead come from $VG_HELPER_OPTS (blank-separated); argv is then ignored,\n"
    "so the command line can look like the simulated program (vramguard demo uses this).\n"
    "\n"
    "Pidfile roles, in order: main, orphan (= main, with --orphan), parent (with --orphan),\n"
    "thread (--zombie-leader), dstate and vfork (--dstate), child (each worker), zombie,\n"
    "reaper (--reaper), leader (--leader).\n"
    "Exit status: 0 at SIGTERM/SIGINT/SIGHUP or the end of the lifetime, 1 on errors, 2 on\n"
    "usage errors.\n";

static struct {
    const char *open_paths[MAX_ITEMS];
    size_t n_open;
    const char *opath_paths[MAX_ITEMS];
    size_t n_opath;
    const char *thread_open[MAX_ITEMS];
    size_t n_thread_open;
    const char *uring[MAX_ITEMS];
    size_t n_uring;
    const char *open_dirs[MAX_ITEMS];
    size_t n_open_dir;
    const char *map_paths[MAX_ITEMS];
    size_t n_map;
    const char *env[MAX_ITEMS];
    size_t n_env;
    bool clear_env;
    const char *comm;
    const char *child_comm;
    unsigned long children;
    bool children_outlive;
    unsigned long zombies;
    bool zombie_leader;
    bool dstate;
    bool orphan;
    bool setsid;
    bool pgrp;
    bool own_group;
    bool reaper;
    bool reaper_setsid;
    bool leader;
    bool ignore_hup;
    unsigned long busy;
    const char *signal_log;
    const char *uid_arg;
    const char *gid_arg;
    const char *pidfile;
    int ready_fd;
    int alive_fd;
    long lifetime;
    bool ignore_term;
} opt = {.ready_fd = -1, .alive_fd = -1, .lifetime = 120};

/* Runtime state of the carrier (the process holding everything). */
static struct timespec deadline; /* CLOCK_MONOTONIC; shared by every process created */
static sigset_t wait_set;        /* blocked everywhere, taken with sigtimedwait() */
static pid_t parent_pid;         /* --orphan: the process that forked the carrier */
static int orphan_sock = -1;     /* --orphan: carrier's end of the handshake socket */
static pid_t child_pids[MAX_CHILDREN];
static pid_t zombie_pids[MAX_ZOMBIES];
static pid_t leader_tid, thread_tid, dstate_tid, vfork_pid;
static pid_t reaper_pid, session_leader_pid; /* --reaper, --leader: the processes that stay */
/* The argument area as the kernel shows it in /proc/PID/cmdline: a process that stays (a
 * subreaper, a login shell) runs another program than the job below it, so it says so there
 * (a fork would otherwise show the job's command line, as a worker does). */
static char *arg_area;
static size_t arg_area_len;

static void set_title(const char *title)
{
    if (!arg_area || arg_area_len < 2)
        return;
    size_t n = strlen(title);
    if (n > arg_area_len - 1)
        n = arg_area_len - 1;
    memset(arg_area, 0, arg_area_len);
    memcpy(arg_area, title, n);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void vmessage(const char *fmt, va_list ap, int errnum)
{
    char msg[512];

    vsnprintf(msg, sizeof msg, fmt, ap); /* a truncated error message is still an error */
    if (errnum)
        fprintf(stderr, "vg-helper: %s: %s\n", msg, strerror(errnum));
    else
        fprintf(stderr, "vg-helper: %s\n", msg);
}

static void die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(fmt, ap, 0);
    va_end(ap);
    _exit(1);
}

static void die_errno(const char *fmt, ...)
{
    int errnum = errno;
    va_list ap;

    va_start(ap, fmt);
    vmessage(fmt, ap, errnum);
    va_end(ap);
    _exit(1);
}

static void usage_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(fmt, ap, 0);
    va_end(ap);
    fputs("try 'vg-helper --help'\n", stderr);
    _exit(2);
}

static pid_t my_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* Strict decimal: digits only, no sign, no spaces, within [min, max]. */
static unsigned long parse_number(const char *s, unsigned long min, unsigned long max,
                                  const char *what)
{
    char *end;
    unsigned long v;

    if (s[0] < '0' || s[0] > '9')
        usage_error("%s: '%s' is not a number", what, s);
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end != '\0')
        usage_error("%s: '%s' is not a number", what, s);
    if (v < min || v > max)
        usage_error("%s: %s is out of range (%lu..%lu)", what, s, min, max);
    return v;
}

static void add_item(const char **list, size_t *n, const char *item, const char *what)
{
    if (*n >= MAX_ITEMS)
        usage_error("too many %s (at most %d)", what, MAX_ITEMS);
    list[(*n)++] = item;
}

enum {
    OPT_OPEN = 256,
    OPT_MAP,
    OPT_ENV,
    OPT_CLEAR_ENV,
    OPT_COMM,
    OPT_CHILD_COMM,
    OPT_CHILDREN_OUTLIVE,
    OPT_CHILDREN,
    OPT_OPEN_PATH,
    OPT_THREAD_OPEN,
    OPT_URING,
    OPT_OPEN_DIR,
    OPT_ZOMBIE,
    OPT_ZOMBIE_LEADER,
    OPT_DSTATE,
    OPT_ORPHAN,
    OPT_SETSID,
    OPT_PGRP,
    OPT_OWN_GROUP,
    OPT_REAPER,
    OPT_REAPER_SETSID,
    OPT_LEADER,
    OPT_IGNORE_HUP,
    OPT_BUSY,
    OPT_SIGNAL_LOG,
    OPT_UID,
    OPT_GID,
    OPT_PIDFILE,
    OPT_READY_FD,
    OPT_ALIVE_FD,
    OPT_LIFETIME,
    OPT_IGNORE_TERM,
    OPT_EXIT_ON_TERM,
    OPT_HELP,
};

static void parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"open", required_argument, NULL, OPT_OPEN},
        {"open-path", required_argument, NULL, OPT_OPEN_PATH},
        {"thread-open", required_argument, NULL, OPT_THREAD_OPEN},
        {"uring", required_argument, NULL, OPT_URING},
        {"open-dir", required_argument, NULL, OPT_OPEN_DIR},
        {"map", required_argument, NULL, OPT_MAP},
        {"env", required_argument, NULL, OPT_ENV},
        {"clear-env", no_argument, NULL, OPT_CLEAR_ENV},
        {"comm", required_argument, NULL, OPT_COMM},
        {"child-comm", required_argument, NULL, OPT_CHILD_COMM},
        {"children-outlive", no_argument, NULL, OPT_CHILDREN_OUTLIVE},
        {"children", required_argument, NULL, OPT_CHILDREN},
        {"zombie", no_argument, NULL, OPT_ZOMBIE},
        {"zombie-leader", no_argument, NULL, OPT_ZOMBIE_LEADER},
        {"dstate", no_argument, NULL, OPT_DSTATE},
        {"orphan", no_argument, NULL, OPT_ORPHAN},
        {"setsid", no_argument, NULL, OPT_SETSID},
        {"pgrp", no_argument, NULL, OPT_PGRP},
        {"own-group", no_argument, NULL, OPT_OWN_GROUP},
        {"reaper", no_argument, NULL, OPT_REAPER},
        {"reaper-setsid", no_argument, NULL, OPT_REAPER_SETSID},
        {"leader", no_argument, NULL, OPT_LEADER},
        {"ignore-hup", no_argument, NULL, OPT_IGNORE_HUP},
        {"busy", required_argument, NULL, OPT_BUSY},
        {"signal-log", required_argument, NULL, OPT_SIGNAL_LOG},
        {"uid", required_argument, NULL, OPT_UID},
        {"gid", required_argument, NULL, OPT_GID},
        {"pidfile", required_argument, NULL, OPT_PIDFILE},
        {"ready-fd", required_argument, NULL, OPT_READY_FD},
        {"alive-fd", required_argument, NULL, OPT_ALIVE_FD},
        {"lifetime", required_argument, NULL, OPT_LIFETIME},
        {"ignore-term", no_argument, NULL, OPT_IGNORE_TERM},
        {"exit-on-term", no_argument, NULL, OPT_EXIT_ON_TERM},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0; /* our own messages, without argv[0]'s full path */
    while ((c = getopt_long(argc, argv, "+:", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_OPEN:
            add_item(opt.open_paths, &opt.n_open, optarg, "--open");
            break;
        case OPT_OPEN_PATH:
            add_item(opt.opath_paths, &opt.n_opath, optarg, "--open-path");
            break;
        case OPT_URING:
            add_item(opt.uring, &opt.n_uring, optarg, "--uring");
            break;
        case OPT_THREAD_OPEN:
            add_item(opt.thread_open, &opt.n_thread_open, optarg, "--thread-open");
            break;
        case OPT_OPEN_DIR:
            add_item(opt.open_dirs, &opt.n_open_dir, optarg, "--open-dir");
            break;
        case OPT_MAP:
            add_item(opt.map_paths, &opt.n_map, optarg, "--map");
            break;
        case OPT_ENV: {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg)
                usage_error("--env: expected NAME=VALUE, got '%s'", optarg);
            add_item(opt.env, &opt.n_env, optarg, "--env");
            break;
        }
        case OPT_CLEAR_ENV:
            opt.clear_env = true;
            break;
        case OPT_COMM:
            opt.comm = optarg;
            break;
        case OPT_CHILDREN_OUTLIVE:
            opt.children_outlive = true;
            break;
        case OPT_CHILD_COMM:
            opt.child_comm = optarg;
            break;
        case OPT_CHILDREN:
            opt.children = parse_number(optarg, 0, MAX_CHILDREN, "--children");
            break;
        case OPT_ZOMBIE:
            if (opt.zombies >= MAX_ZOMBIES)
                usage_error("too many --zombie (at most %d)", MAX_ZOMBIES);
            opt.zombies++;
            break;
        case OPT_ZOMBIE_LEADER:
            opt.zombie_leader = true;
            break;
        case OPT_DSTATE:
            opt.dstate = true;
            break;
        case OPT_ORPHAN:
            opt.orphan = true;
            break;
        case OPT_SETSID:
            opt.setsid = true;
            break;
        case OPT_PGRP:
            opt.pgrp = true;
            break;
        case OPT_OWN_GROUP:
            opt.own_group = true;
            break;
        case OPT_REAPER:
            opt.reaper = true;
            break;
        case OPT_REAPER_SETSID:
            opt.reaper_setsid = true;
            break;
        case OPT_LEADER:
            opt.leader = true;
            break;
        case OPT_IGNORE_HUP:
            opt.ignore_hup = true;
            break;
        case OPT_BUSY:
            opt.busy = parse_number(optarg, 1, 100, "--busy");
            break;
        case OPT_SIGNAL_LOG:
            opt.signal_log = optarg;
            break;
        case OPT_UID:
            opt.uid_arg = optarg;
            break;
        case OPT_GID:
            opt.gid_arg = optarg;
            break;
        case OPT_PIDFILE:
            opt.pidfile = optarg;
            break;
        case OPT_READY_FD:
            opt.ready_fd = (int)parse_number(optarg, 0, 1 << 20, "--ready-fd");
            break;
        case OPT_ALIVE_FD:
            opt.alive_fd = (int)parse_number(optarg, 0, 1 << 20, "--alive-fd");
            break;
        case OPT_LIFETIME:
            opt.lifetime = (long)parse_number(optarg, 1, MAX_LIFETIME, "--lifetime");
            break;
        case OPT_IGNORE_TERM:
            opt.ignore_term = true;
            break;
        case OPT_EXIT_ON_TERM:
            opt.ignore_term = false;
            break;
        case OPT_HELP:
            fputs(usage_text, stdout);
            fflush(stdout);
            _exit(0);
        case ':':
            usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    /* Anything left (after "--" or a first non-option) is only there to be seen in cmdline. */
    if (opt.setsid && !opt.orphan)
        usage_error("--setsid only makes sense with --orphan");
    if (opt.pgrp && (!opt.orphan || opt.setsid))
        usage_error("--pgrp only makes sense with --orphan and without --setsid");
    if (opt.reaper_setsid && !opt.reaper)
        usage_error("--reaper-setsid needs --reaper");
    if (opt.gid_arg && !opt.uid_arg)
        usage_error("--gid needs --uid");
    if (opt.ready_fd >= 0 && opt.ready_fd <= 2)
        usage_error("--ready-fd: use a descriptor above 2");
    if (opt.alive_fd >= 0 && (opt.alive_fd <= 2 || opt.alive_fd == opt.ready_fd))
        usage_error("--alive-fd: use a descriptor above 2, not --ready-fd's");
}

/* ---- environment ------------------------------------------------------------------------- */

static size_t name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

/* The value --env wants for the variable of entry, or NULL; the last --env of a name wins. */
static const char *wanted_entry(const char *entry)
{
    size_t len = name_len(entry);

    for (size_t i = opt.n_env; i-- > 0;) {
        if (name_len(opt.env[i]) == len && strncmp(opt.env[i], entry, len) == 0)
            return opt.env[i];
    }
    return NULL;
}

static bool env_is_applied(void)
{
    size_t n_present = 0;

    for (char **e = environ; *e; e++) {
        const char *want = wanted_entry(*e);
        if (want) {
            if (strcmp(want, *e) != 0)
                return false;
            n_present++;
        } else if (opt.clear_env) {
            return false;
        }
    }
    /* Every distinct wanted name must be present exactly once. */
    for (size_t i = 0; i < opt.n_env; i++) {
        if (wanted_entry(opt.env[i]) != opt.env[i])
            continue; /* overridden by a later --env */
        n_present--;
        if (n_present == (size_t)-1)
            return false;
    }
    return n_present == 0;
}

/*
 * /proc/PID/environ shows the environment execve() was given, not setenv()'s: re-execute the
 * same binary with the same argv and the new environment. After the exec the environment
 * matches, so this happens at most once without any marker in argv or the environment.
 */
static void apply_env(char **argv)
{
    size_t n = 0, cap;
    char **envp;

    if ((opt.n_env == 0 && !opt.clear_env) || env_is_applied())
        return;
    for (char **e = environ; *e; e++)
        n++;
    cap = n + opt.n_env + 1;
    envp = calloc(cap, sizeof *envp);
    if (!envp)
        die("out of memory");
    n = 0;
    if (!opt.clear_env) {
        for (char **e = environ; *e; e++) {
            if (!wanted_entry(*e))
                envp[n++] = *e;
        }
    }
    for (size_t i = 0; i < opt.n_env; i++) {
        if (wanted_entry(opt.env[i]) == opt.env[i])
            envp[n++] = (char *)opt.env[i];
    }
    envp[n] = NULL;
    execve("/proc/self/exe", argv, envp);
    die_errno("cannot re-execute /proc/self/exe to apply --env");
}

/* ---- time, signals, waiting -------------------------------------------------------------- */

static void set_deadline(void)
{
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += opt.lifetime;
}

/* Time left until the deadline; false when it has passed. */
static bool time_left(struct timespec *left)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    left->tv_sec = deadline.tv_sec - now.tv_sec;
    left->tv_nsec = deadline.tv_nsec - now.tv_nsec;
    if (left->tv_nsec < 0) {
        left->tv_nsec += 1000000000L;
        left->tv_sec--;
    }
    return left->tv_sec > 0 || (left->tv_sec == 0 && left->tv_nsec > 0);
}

static int ms_left(void)
{
    struct timespec left;

    if (!time_left(&left))
        return 0;
    if (left.tv_sec > 86400 * 2)
        return 86400 * 2 * 1000;
    return (int)(left.tv_sec * 1000 + left.tv_nsec / 1000000) + 1;
}

/*
 * Signals are never handled asynchronously: SIGTERM (unless ignored), SIGINT, SIGHUP and
 * SIGCHLD are blocked in every thread and process and taken with sigtimedwait(). Dispositions
 * and masks survive execve(), and bash starts background jobs with SIGINT ignored, so reset
 * them explicitly.
 */
static void setup_signals(void)
{
    struct sigaction sa;
    sigset_t none;

    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = opt.ignore_hup ? SIG_IGN : SIG_DFL;
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &sa, NULL); /* SIG_IGN would reap zombies behind our back */
    sigaction(SIGQUIT, &sa, NULL);
    sa.sa_handler = opt.ignore_term ? SIG_IGN : SIG_DFL;
    sigaction(SIGTERM, &sa, NULL);
    if (opt.ready_fd >= 0) {
        sa.sa_handler = SIG_IGN; /* a closed reader gives EPIPE, reported as an error */
        sigaction(SIGPIPE, &sa, NULL);
    }

    sigemptyset(&wait_set);
    sigaddset(&wait_set, SIGINT);
    if (!opt.ignore_hup)
        sigaddset(&wait_set, SIGHUP);
    sigaddset(&wait_set, SIGCHLD);
    if (!opt.ignore_term)
        sigaddset(&wait_set, SIGTERM);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    sigprocmask(SIG_BLOCK, &wait_set, NULL);
}

/*
 * Waits for one signal of set until the deadline: returns the signal, or 0 once the deadline
 * has passed. Only async-signal-safe calls: also used in the CLONE_VFORK child.
 */
static int wait_signal_until(const sigset_t *set, const struct timespec *until)
{
    for (;;) {
        struct timespec now, left;
        int sig;

        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = until->tv_sec - now.tv_sec;
        left.tv_nsec = until->tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) {
            left.tv_nsec += 1000000000L;
            left.tv_sec--;
        }
        if (left.tv_sec < 0 || (left.tv_sec == 0 && left.tv_nsec == 0))
            return 0;
        sig = sigtimedwait(set, NULL, &left);
        if (sig > 0)
            return sig;
        if (errno != EINTR && errno != EAGAIN)
            return 0;
        /* EINTR (e.g. after SIGSTOP/SIGCONT) or EAGAIN (timeout): recompute what is left. */
    }
}

static int wait_signal(const sigset_t *set)
{
    return wait_signal_until(set, &deadline);
}

/* Sleeps POLL_NS, never past the deadline; false once the deadline has passed. */
static bool nap(void)
{
    struct timespec left, step = {0, POLL_NS};

    if (!time_left(&left))
        return false;
    if (left.tv_sec == 0 && left.tv_nsec < step.tv_nsec)
        step = left;
    while (nanosleep(&step, &step) != 0 && errno == EINTR)
        ;
    return true;
}

static void reap_workers(void)
{
    for (unsigned long i = 0; i < opt.children; i++) {
        if (child_pids[i] > 0 && waitpid(child_pids[i], NULL, WNOHANG) == child_pids[i])
            child_pids[i] = 0;
    }
}

/*
 * The end state of every process: sleep until SIGTERM/SIGINT/SIGHUP or the deadline. Workers
 * that die are reaped (a killed DataLoader worker must not stay a zombie of ours); --zombie
 * children never are.
 */
static void log_signal(int sig)
{
    char line[64];
    int fd, n;

    if (!opt.signal_log || sig == SIGCHLD)
        return;
    n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), sigabbrev_np(sig));
    fd = open(opt.signal_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || n <= 0)
        return;
    /* one write on O_APPEND: lines of several processes never interleave */
    if (write(fd, line, (size_t)n) < 0) {
        /* nothing to do: the test will see the line missing */
    }
    close(fd);
}

static void __attribute__((noreturn)) idle_until_end(void)
{
    /* With --alive-fd the signals come through a signalfd, polled with the pipe. */
    int sfd = opt.alive_fd >= 0 ? signalfd(-1, &wait_set, SFD_CLOEXEC) : -1;
    if (opt.alive_fd >= 0 && sfd < 0)
        die_errno("signalfd");
    for (;;) {
        int sig;
        if (sfd >= 0) {
            struct pollfd p[2] = {{sfd, POLLIN, 0}, {opt.alive_fd, POLLIN, 0}};
            int r = poll(p, 2, ms_left());
            if (r < 0 && errno != EINTR)
                die_errno("poll");
            if (p[1].revents)
                _exit(0); /* end of file (or an error): the owner is gone */
            if (r <= 0 || !(p[0].revents & POLLIN)) {
                if (ms_left() == 0)
                    _exit(0);
                continue;
            }
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
                continue;
            sig = (int)si.ssi_signo;
        } else {
            sig = wait_signal(&wait_set);
        }
        log_signal(sig);
        if (sig == 0 || sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
            _exit(0);
        if (sig == SIGCHLD)
            reap_workers();
    }
}

/* State letter of /proc/PID/task/TID/stat, parsed after the last ')'; 0 if unreadable. */
static char task_state(pid_t pid, pid_t tid)
{
    char path[64], buf[1024];
    ssize_t n;
    int fd;
    char *p;

    if (snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid) >=
        (int)sizeof path)
        return 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return 0;
    return p[2];
}

static void wait_task_state(pid_t pid, pid_t tid, char want, const char *what)
{
    while (task_state(pid, tid) != want) {
        if (!nap())
            die("%s (task %d) did not reach state %c before the lifetime ran out", what, (int)tid,
                want);
    }
}

/* ---- setup ------------------------------------------------------------------------------- */

/* Close every inherited descriptor above 2 but --ready-fd: /proc/PID/fd shows only ours. */
static void close_stray_fds(void)
{
    int fds[256];
    size_t n = 0;
    bool more = true;

    while (more) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;

        if (!d)
            die_errno("cannot list /proc/self/fd");
        more = false;
        n = 0;
        while ((de = readdir(d)) != NULL) {
            char *end;
            long fd = strtol(de->d_name, &end, 10);
            if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end)
                continue;
            if (fd <= 2 || fd == opt.ready_fd || fd == opt.alive_fd || fd == dirfd(d))
                continue;
            if (n == sizeof fds / sizeof fds[0]) {
                more = true;
                break;
            }
            fds[n++] = (int)fd;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
    }
    if (opt.ready_fd >= 0) {
        if (fcntl(opt.ready_fd, F_SETFD, FD_CLOEXEC) < 0)
            die_errno("--ready-fd %d", opt.ready_fd);
    }
}

/* ---- files held by an io_uring alone (--uring) --------------------------------------------- */

static void register_uring(void)
{
    struct io_uring_params params;
    memset(&params, 0, sizeof(params));
    long ring = syscall(__NR_io_uring_setup, 4, &params);
    if (ring < 0)
        die_errno("--uring: io_uring_setup");
    int fds[MAX_ITEMS];
    for (size_t i = 0; i < opt.n_uring; i++)
        if ((fds[i] = open(opt.uring[i], O_RDONLY | O_CLOEXEC)) < 0)
            die_errno("--uring: cannot open '%s'", opt.uring[i]);
    if (syscall(__NR_io_uring_register, (int)ring, IORING_REGISTER_FILES, fds,
                (unsigned)opt.n_uring) < 0)
        die_errno("--uring: io_uring_register");
    for (size_t i = 0; i < opt.n_uring; i++)
        close(fds[i]);
}

/* Every non-directory entry of one directory, kept open (see --open-dir). */
static void open_dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        die_errno("cannot list '%s'", path);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            die_errno("cannot stat '%s/%s'", path, e->d_name);
        if (S_ISDIR(st.st_mode))
            continue;
        int flags =
            S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? O_PATH : O_RDONLY | O_NOCTTY | O_NONBLOCK;
        if (openat(dirfd(d), e->d_name, flags) < 0)
            die_errno("cannot open '%s/%s'", path, e->d_name);
    }
    closedir(d);
}

static void open_files(void)
{
    for (size_t i = 0; i < opt.n_open; i++) {
        /* Deliberately without O_CLOEXEC: workers and re-executed programs inherit it. */
        int fd = open(opt.open_paths[i], O_RDONLY | O_NOCTTY);
        if (fd < 0)
            die_errno("cannot open '%s'", opt.open_paths[i]);
    }
    for (size_t i = 0; i < opt.n_opath; i++)
        if (open(opt.opath_paths[i], O_PATH) < 0)
            die_errno("cannot open '%s' (O_PATH)", opt.opath_paths[i]);
    if (opt.n_uring)
        register_uring();
    if (opt.n_open_dir) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    for (size_t i = 0; i < opt.n_open_dir; i++)
        open_dir_entries(opt.open_dirs[i]);
}

static void map_files(void)
{
    long page = sysconf(_SC_PAGESIZE);

    for (size_t i = 0; i < opt.n_map; i++) {
        const char *path = opt.map_paths[i];
        struct stat st;
        size_t len;
        void *p;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
            die_errno("cannot open '%s' to map it", path);
        if (fstat(fd, &st) < 0)
            die_errno("cannot stat '%s'", path);
        if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
            die("cannot map '%s': not a regular file or character device", path);
        /* An empty file maps fine with a nonzero length; the page is never touched. */
        len = st.st_size > 0 ? (size_t)st.st_size : (size_t)page;
        p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            die_errno("cannot map '%s'", path);
        close(fd); /* the mapping keeps the file, as after dlopen() */
    }
}

static void set_comm(const char *name)
{
    if (name && prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL) < 0)
        die_errno("cannot set comm to '%s'", name);
}

static void drop_privileges(void)
{
    uid_t uid;
    gid_t gid;

    if (!opt.uid_arg)
        return;
    if (geteuid() != 0)
        die("--uid needs root");
    if (opt.uid_arg[0] >= '0' && opt.uid_arg[0] <= '9') {
        uid = (uid_t)parse_number(opt.uid_arg, 0, 0xfffffffeUL, "--uid");
        gid = (gid_t)uid;
    } else {
        struct passwd *pw = getpwnam(opt.uid_arg);
        if (!pw)
            die("--uid: no user '%s'", opt.uid_arg);
        uid = pw->pw_uid;
        gid = pw->pw_gid;
    }
    if (opt.gid_arg)
        gid = (gid_t)parse_number(opt.gid_arg, 0, 0xfffffffeUL, "--gid");
    if (setgroups(0, NULL) < 0)
        die_errno("setgroups");
    if (setresgid(gid, gid, gid) < 0)
        die_errno("cannot switch to gid %u", (unsigned)gid);
    if (setresuid(uid, uid, uid) < 0)
        die_errno("cannot switch to uid %u", (unsigned)uid);
    /* A process started by that user is dumpable; a setuid() one is not unless told so. */
    if (prctl(PR_SET_DUMPABLE, 1UL, 0UL, 0UL, 0UL) < 0)
        die_errno("PR_SET_DUMPABLE");
}

/* Descriptors that only the carrier may keep: closed in every other process it creates. */
static void close_internal_fds(void)
{
    if (opt.ready_fd >= 0)
        close(opt.ready_fd);
    if (orphan_sock >= 0)
        close(orphan_sock);
}

/*
 * Called first thing in a worker or the CLONE_VFORK child: die with the thread that forked us,
 * and check that it is not already gone (the death signal would never come).
 */
static void die_with_parent(pid_t expected_parent)
{
    if (prctl(PR_SET_PDEATHSIG, (unsigned long)SIGKILL, 0UL, 0UL, 0UL) < 0)
        _exit(1);
    if (getppid() != expected_parent)
        _exit(0);
}

static void spawn_workers(void)
{
    pid_t self = getpid();
    int ready[2];

    if (opt.children == 0)
        return;
    if (pipe2(ready, O_CLOEXEC) < 0)
        die_errno("pipe");
    for (unsigned long i = 0; i < opt.children; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die_errno("cannot fork worker %lu", i);
        if (pid == 0) {
            char c = 'w';
            if (!opt.children_outlive)
                die_with_parent(self);
            else if (getppid() != self)
                _exit(0);
            close_internal_fds();
            close(ready[0]);
            set_comm(opt.child_comm);
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            close(ready[1]);
            opt.children = 0; /* no workers of its own to reap */
            idle_until_end();
        }
        child_pids[i] = pid;
    }
    close(ready[1]);
    /* Each worker writes one byte once set up; EOF before that means one died. */
    for (unsigned long got = 0; got < opt.children;) {
        char buf[MAX_CHILDREN];
        struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
        int r = poll(&pfd, 1, ms_left());
        ssize_t n;

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die_errno("poll");
        if (r == 0)
            die("workers did not get ready before the lifetime ran out");
        n = read(ready[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("a worker died while starting");
        got += (unsigned long)n;
    }
    close(ready[0]);
}

static void spawn_zombies(void)
{
    for (unsigned long i = 0; i < opt.zombies; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die_errno("cannot fork zombie");
        if (pid == 0)
            _exit(0);
        zombie_pids[i] = pid;
    }
}

/* Without reaping: waitid(WNOWAIT) leaves the child a zombie. */
static void wait_zombies(void)
{
    for (unsigned long i = 0; i < opt.zombies; i++) {
        for (;;) {
            siginfo_t si;
            sigset_t chld;

            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)zombie_pids[i], &si, WEXITED | WNOHANG | WNOWAIT) < 0 &&
                errno != EINTR)
                die_errno("waitid %d", (int)zombie_pids[i]);
            if (si.si_pid == zombie_pids[i])
                break;
            sigemptyset(&chld);
            sigaddset(&chld, SIGCHLD);
            if (wait_signal(&chld) == 0)
                die("zombie %d did not exit before the lifetime ran out", (int)zombie_pids[i]);
        }
    }
}

/* ---- D state ----------------------------------------------------------------------------- */

static int dstate_pipe[2] = {-1, -1};

/*
 * clone(CLONE_VFORK) without CLONE_VM: the child gets its own copy of memory, as with fork(),
 * but the calling thread waits in the kernel (TASK_KILLABLE, shown as D) until the child exits
 * or execs. The child only makes async-signal-safe calls.
 */
static void *dstate_main(void *arg)
{
    pid_t self = getpid();
    pid_t tid = my_tid();
    pid_t child;

    (void)arg;
    if (write(dstate_pipe[1], &tid, sizeof tid) != (ssize_t)sizeof tid)
        die_errno("dstate thread: cannot report its tid");
    child =
        (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_VFORK | SIGCHLD), NULL, NULL, NULL, NULL);
    if (child < 0)
        die_errno("dstate thread: clone(CLONE_VFORK)");
    if (child == 0) {
        pid_t me = (pid_t)syscall(SYS_getpid);
        die_with_parent(self);
        close_internal_fds();
        if (write(dstate_pipe[1], &me, sizeof me) != (ssize_t)sizeof me)
            _exit(1);
        for (;;) {
            int sig = wait_signal(&wait_set);
            if (sig != SIGCHLD)
                _exit(0);
        }
    }
    /* The child has exited (killed, or the lifetime ended): collect it and let the thread go. */
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    return NULL;
}

static void read_exact(int fd, void *buf, size_t len, const char *what)
{
    size_t got = 0;

    while (got < len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, ms_left());
        ssize_t n;

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die_errno("poll");
        if (r == 0)
            die("%s: no answer before the lifetime ran out", what);
        n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die_errno("%s", what);
        if (n == 0)
            die("%s: it exited", what);
        got += (size_t)n;
    }
}

static void start_dstate(void)
{
    pthread_t t;
    int rc;

    if (!opt.dstate)
        return;
    if (pipe2(dstate_pipe, O_CLOEXEC) < 0)
        die_errno("pipe");
    rc = pthread_create(&t, NULL, dstate_main, NULL);
    if (rc != 0) {
        errno = rc;
        die_errno("cannot start the dstate thread");
    }
    pthread_detach(t);
    read_exact(dstate_pipe[0], &dstate_tid, sizeof dstate_tid, "dstate thread");
    read_exact(dstate_pipe[0], &vfork_pid, sizeof vfork_pid, "dstate child");
    wait_task_state(getpid(), dstate_tid, 'D', "the dstate thread");
    /* Keep dstate_pipe open: the CLONE_VFORK child has a copy; nothing else reads it. */
}

/* ---- orphans ----------------------------------------------------------------------------- */

/* Waits (bounded) for child to exit and returns its exit status, 1 if it was killed. */
static int wait_child_status(pid_t child)
{
    sigset_t chld;

    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        int status;
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        if (r < 0 && errno != EINTR)
            die_errno("waitpid %d", (int)child);
        if (wait_signal(&chld) == 0)
            die("process %d did not exit before the lifetime ran out", (int)child);
    }
}

/*
 * --orphan: returns in the carrier only. The launcher (the original process, or with --setsid
 * an intermediate session leader) forks the carrier, waits until the carrier says it is set up,
 * then exits; the carrier later waits for that exit and for its reparenting.
 */
static void become_orphan(void)
{
    int sv[2];
    pid_t pid;

    if (opt.setsid) {
        /* The original may lead a process group (setsid() fails then): a fresh child never
         * does, so it becomes the session leader that will be gone. */
        pid = fork();
        if (pid < 0)
            die_errno("fork");
        if (pid > 0) {
            close_internal_fds();
            _exit(wait_child_status(pid));
        }
        if (setsid() < 0)
            die_errno("setsid");
    }
    if (opt.pgrp && setpgid(0, 0) < 0)
        die_errno("setpgid");
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        die_errno("socketpair");
    parent_pid = getpid();
    pid = fork();
    if (pid < 0)
        die_errno("fork");
    if (pid > 0) {
        char c = 0;
        close(sv[1]);
        close_internal_fds();
        read_exact(sv[0], &c, 1, "the orphan carrier did not get set up"); /* dies on EOF */
        _exit(c == 'k' ? 0 : 1);
    }
    close(sv[0]);
    orphan_sock = sv[1];
}

/* In the carrier, once set up: let the launcher exit and wait until we are reparented. */
static void finish_orphan(void)
{
    char c = 'k', buf[16];

    if (orphan_sock < 0)
        return;
    if (write(orphan_sock, &c, 1) != 1)
        die_errno("cannot tell the launcher we are set up");
    for (;;) {
        struct pollfd pfd = {.fd = orphan_sock, .events = POLLIN};
        int r = poll(&pfd, 1, ms_left());
        ssize_t n;

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die_errno("poll");
        if (r == 0)
            die("the launcher %d did not exit before the lifetime ran out", (int)parent_pid);
        n = read(orphan_sock, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            break; /* the launcher closed its end: it is exiting */
        if (n < 0 && errno != EINTR)
            die_errno("read");
    }
    close(orphan_sock);
    orphan_sock = -1;
    /* Its descriptors close before the kernel reparents its children: wait for the latter. */
    while (getppid() == parent_pid) {
        if (!nap())
            die("not reparented before the lifetime ran out");
    }
}

/* ---- processes that stay above the rest (--reaper, --leader) ------------------------------ */

/* Reap whatever exits (adopted orphans included) until a signal ends us or the lifetime runs
 * out: what a subreaper or a login shell does while its descendants live. */
static void __attribute__((noreturn)) stay_until_end(void)
{
    set_title("vg-helper-stays");
    for (;;) {
        int sig = wait_signal(&wait_set);
        log_signal(sig);
        if (sig == 0 || sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
            _exit(0);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
}

/*
 * Fork a process that stays: it starts a new session and/or becomes a child subreaper as
 * asked, forks the rest of the chain and waits until the end. The calling process exits 0 (it
 * was only the launcher); the function returns in the rest of the chain, with the stayer's pid.
 * A fresh child never leads a process group, so setsid() cannot fail for that reason.
 */
static pid_t fork_stayer(bool new_session, bool subreaper)
{
    /* As pid 1 of a PID namespace (unshare --pid --fork vg-helper --reaper ...) the helper is
     * the namespace's init, a container's tini: it stays itself, since its exit would end
     * everything below it. */
    if (subreaper && getpid() == 1 && !new_session) {
        pid_t rest = fork();
        if (rest < 0)
            die_errno("fork");
        if (rest > 0)
            stay_until_end();
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0)
        die_errno("fork");
    if (pid > 0) {
        close_internal_fds();
        _exit(0);
    }
    if (new_session && setsid() < 0)
        die_errno("setsid");
    if (subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL) < 0)
        die_errno("PR_SET_CHILD_SUBREAPER");
    pid_t self = getpid();
    pid = fork();
    if (pid < 0)
        die_errno("fork");
    if (pid > 0)
        stay_until_end();
    return self;
}

/* ---- a thread with a descriptor table of its own (--thread-open) ------------------------- */

static pid_t tables_tid;
static int tables_pipe[2] = {-1, -1};

static void *tables_main(void *arg)
{
    (void)arg;
    char ok = 1;
    if (unshare(CLONE_FILES) != 0)
        ok = 0;
    for (size_t i = 0; ok && i < opt.n_thread_open; i++)
        if (open(opt.thread_open[i], O_RDONLY) < 0)
            ok = 0;
    tables_tid = my_tid();
    if (write(tables_pipe[1], &ok, 1) != 1)
        ok = 0;
    /* this table's copies of the pipe (unshare copied the whole table) */
    close(tables_pipe[0]);
    close(tables_pipe[1]);
    struct timespec left;
    while (ok && time_left(&left))
        nanosleep(&left, NULL);
    return NULL;
}

static void start_thread_tables(void)
{
    if (!opt.n_thread_open)
        return;
    if (pipe2(tables_pipe, O_CLOEXEC) != 0)
        die_errno("cannot make a pipe for --thread-open");
    pthread_t t;
    int rc = pthread_create(&t, NULL, tables_main, NULL);
    if (rc != 0) {
        errno = rc;
        die_errno("cannot start the --thread-open thread");
    }
    pthread_detach(t);
    struct pollfd pfd = {.fd = tables_pipe[0], .events = POLLIN};
    char ok = 0;
    if (poll(&pfd, 1, ms_left()) != 1 || read(tables_pipe[0], &ok, 1) != 1 || !ok)
        die("--thread-open: the thread could not take its own table or open its files");
    /* only now: before the thread's unshare, this table was its table too */
    close(tables_pipe[0]);
    close(tables_pipe[1]);
}

/* ---- a job that works (--busy) ----------------------------------------------------------- */

/* Spin for busy ms out of every 100 until the deadline: CPU time that moves. */
static void *busy_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec start, now, left;
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
            clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000L + (now.tv_nsec - start.tv_nsec) / 1000000L <
                 (long)opt.busy);
        if (!time_left(&left))
            return NULL;
        if (opt.busy < 100) {
            struct timespec nap_for = {0, (long)(100 - opt.busy) * 1000000L};
            while (nanosleep(&nap_for, &nap_for) != 0 && errno == EINTR)
                ;
        }
    }
}

static void start_busy(void)
{
    pthread_t t;
    int rc;

    if (!opt.busy)
        return;
    rc = pthread_create(&t, NULL, busy_main, NULL);
    if (rc != 0) {
        errno = rc;
        die_errno("cannot start the --busy thread");
    }
    pthread_detach(t);
}

/* ---- readiness --------------------------------------------------------------------------- */

static void add_line(char *buf, size_t size, size_t *len, const char *role, pid_t pid)
{
    int n = snprintf(buf + *len, size - *len, "%s %d\n", role, (int)pid);
    if (n < 0 || (size_t)n >= size - *len)
        die("pidfile contents too long");
    *len += (size_t)n;
}

static void write_all(int fd, const char *buf, size_t len, const char *what)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die_errno("cannot write %s", what);
        buf += n;
        len -= (size_t)n;
    }
}

static void report_ready(void)
{
    char buf[4096], tmp[4096];
    size_t len = 0;
    int fd, n;

    if (opt.pidfile) {
        add_line(buf, sizeof buf, &len, "main", getpid());
        if (opt.orphan) {
            add_line(buf, sizeof buf, &len, "orphan", getpid());
            add_line(buf, sizeof buf, &len, "parent", parent_pid);
        }
        if (opt.zombie_leader)
            add_line(buf, sizeof buf, &len, "thread", thread_tid);
        if (opt.n_thread_open)
            add_line(buf, sizeof buf, &len, "tables", tables_tid);
        if (opt.dstate) {
            add_line(buf, sizeof buf, &len, "dstate", dstate_tid);
            add_line(buf, sizeof buf, &len, "vfork", vfork_pid);
        }
        for (unsigned long i = 0; i < opt.children; i++)
            add_line(buf, sizeof buf, &len, "child", child_pids[i]);
        for (unsigned long i = 0; i < opt.zombies; i++)
            add_line(buf, sizeof buf, &len, "zombie", zombie_pids[i]);
        if (opt.reaper)
            add_line(buf, sizeof buf, &len, "reaper", reaper_pid);
        if (opt.leader)
            add_line(buf, sizeof buf, &len, "leader", session_leader_pid);

        n = snprintf(tmp, sizeof tmp, "%s.tmp.%d", opt.pidfile, (int)getpid());
        if (n < 0 || (size_t)n >= sizeof tmp)
            die("--pidfile path too long");
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
            die_errno("cannot create '%s'%s", tmp,
                      opt.uid_arg ? " (with --uid, its directory must be writable by that user)"
                                  : "");
        write_all(fd, buf, len, tmp);
        if (close(fd) < 0)
            die_errno("cannot write '%s'", tmp);
        if (rename(tmp, opt.pidfile) < 0)
            die_errno("cannot rename '%s' to '%s'", tmp, opt.pidfile);
    }
    if (opt.ready_fd >= 0) {
        write_all(opt.ready_fd, "ready\n", 6, "to --ready-fd");
        close(opt.ready_fd);
        opt.ready_fd = -1;
    }
}

/* ---- the carrier ------------------------------------------------------------------------- */

/* Everything after the process-wide state is in place; runs in the live thread with
 * --zombie-leader, in the main thread otherwise. */
static void *carry_rest(void *arg)
{
    (void)arg;
    thread_tid = my_tid();
    spawn_workers();
    spawn_zombies();
    start_dstate();
    start_busy();
    start_thread_tables();
    finish_orphan();
    if (opt.zombie_leader)
        wait_task_state(getpid(), leader_tid, 'Z', "the exited main thread");
    wait_zombies();
    report_ready();
    idle_until_end();
}

/*
 * VG_HELPER_OPTS: options given through the environment (split on blanks, no quoting) instead
 * of the command line, so that the whole command line is free to look like the program being
 * simulated: `vramguard demo` execs the helper as "python train.py --epochs 90" and its
 * processes then read like a real job in every listing. argv is then ignored entirely.
 */
static char **opts_from_env(char *argv0, int *argc)
{
    const char *env = getenv("VG_HELPER_OPTS");
    if (!env)
        return NULL;
    char *copy = strdup(env);
    size_t cap = 2;
    for (const char *p = env; *p; p++)
        cap += *p == ' ' || *p == '\t';
    char **v = calloc(cap + 1, sizeof(*v));
    if (!copy || !v)
        die("out of memory");
    int n = 0;
    v[n++] = argv0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
        v[n++] = tok;
    v[n] = NULL;
    *argc = n;
    return v; /* lives as long as the process */
}

int main(int argc, char **argv)
{
    if (argc > 0) {
        arg_area = argv[0];
        arg_area_len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) + 1 - argv[0]);
    }
    int eargc = 0;
    char **eargv = opts_from_env(argv[0], &eargc);
    if (eargv)
        parse_args(eargc, eargv);
    else
        parse_args(argc, argv);
    apply_env(argv);
    setup_signals();
    set_deadline();
    close_stray_fds();
    if (opt.reaper)
        reaper_pid = fork_stayer(opt.reaper_setsid, true);
    if (opt.leader)
        session_leader_pid = fork_stayer(true, false);
    if (opt.orphan)
        become_orphan();
    if (opt.own_group && setpgid(0, 0) < 0)
        die_errno("setpgid");

    open_files();
    map_files();
    set_comm(opt.comm);
    drop_privileges();

    if (opt.zombie_leader) {
        pthread_t t;
        int rc;

        leader_tid = getpid();
        rc = pthread_create(&t, NULL, carry_rest, NULL);
        if (rc != 0) {
            errno = rc;
            die_errno("cannot start the surviving thread");
        }
        /* Not pthread_exit(): that could run exit-time hooks; only this thread must go. */
        syscall(SYS_exit, 0);
    }
    carry_rest(NULL);
    return 0;
}
