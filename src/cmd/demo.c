/*
 * `vramguard demo`: the whole product on a machine without GPUs. It builds a simulated host,
 * clearly labelled as one: the project's fake NVML driver answers for four GPUs, and real
 * processes (the test helper, exec'd under command lines that read like real jobs) are put into
 * the classic bad states: a CUDA_VISIBLE_DEVICES set too late, DDP ranks leaving contexts on
 * GPU 0, an orphaned DataLoader worker holding a device file, TensorFlow preallocating a GPU,
 * and a PID from another namespace. Then it runs `status` and `doctor` against that host, and
 * removes every process and file it made.
 *
 * The simulated host itself, its staging and the keeper process that owns it, are act/demo.h's:
 * this file parses, forks the keeper, shows the simulation in its own process and words what
 * the keeper reports. The command:
 *   - blocks SIGINT, SIGTERM, SIGHUP (a closed terminal) and SIGQUIT and acts on them after
 *     the keeper has cleaned up; the exit status is then 128 + the signal;
 *   - ignores SIGPIPE: a reader that goes away (`demo | head -1`) is an EPIPE, which ends the
 *     demo quietly (exit 0), and any other write error ends it with a message (exit 70).
 *
 * `--keep[=DUR]` leaves the simulation as it was once shown, until `vramguard demo --stop`
 * (the keeper listens on a Unix socket in the user's runtime directory, named after $TMPDIR,
 * and answers only its own user or root) or until DUR (default 1h) has passed: then the keeper
 * removes everything, as at --stop.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "act/demo.h"
#include "cmd/cmd.h"

/* Where `make install` puts the helper and the fake driver (the Makefile passes its PKGLIBDIR). */
#ifndef VG_PKGLIBDIR
#define VG_PKGLIBDIR "/usr/local/lib/vramguard"
#endif

static const char vg_demo_help[] =
    "usage: vramguard demo [--keep[=DUR]] [--helper PATH] [--fake-nvml PATH]\n"
    "       vramguard demo --stop\n"
    "\n"
    "A simulation of a busy 4-GPU host, for machines without a GPU: the project's fake NVML\n"
    "driver plus real processes in the classic bad states, diagnosed with `status` and\n"
    "`doctor`. Everything it starts is stopped and removed when it ends: also on Ctrl-C,\n"
    "SIGTERM, a closed terminal, or a reader that goes away (`demo | head`). On a host with\n"
    "NVIDIA GPUs, run `vramguard doctor` instead.\n"
    "\n"
    "Options:\n";

static const char vg_demo_help_tail[] =
    "\n"
    "Both are looked for in $VRAMGUARD_DEMO_DIR, then next to the vramguard binary (the build\n"
    "tree), then in " VG_PKGLIBDIR " (an installed copy).\n"
    "\n"
    "Exit status: 0 done (also when the reader went away); 1 --stop with nothing to stop, or a\n"
    "kept simulation already running; 128+N after signal N (everything removed first); 70 the\n"
    "simulation could not be staged, or the output could not be written.\n"
    "\n";

static void vg_demo_say_result(FILE *f, const struct vg_demo_result *res, const char *dir)
{
    fprintf(f, "\nSimulation cleaned up: %zu processes stopped", res->stopped);
    if (res->survivors)
        fprintf(f, " (%zu outlived SIGKILL: in the kernel's hands)", res->survivors);
    if (res->dir_removed)
        fprintf(f, ", %s removed.\n", dir);
    else
        fprintf(f, "; %s could not be removed.\n", dir);
}

/* Has the reader of stdout gone away (a pipe with no reader, a hung-up terminal)? */
static bool vg_demo_out_gone(void)
{
    struct pollfd p = {STDOUT_FILENO, 0, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

/* The end of a write: 0, or the errno of a failed one (stdio keeps it in ferror). */
static int vg_demo_flush(FILE *f)
{
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return 0;
    return errno ? errno : EIO;
}

/* What the command shows, in its own process; the keeper has staged the host in dir. Returns
 * 0, or the errno of a write that failed. */
static int vg_demo_show(struct vg_global *g, const char *dir, const char *fake, bool keep,
                        const char *keep_text, const sigset_t *blocked)
{
    /* dir is the keeper's, made with 64 bytes to spare (vg_demo_stage), and read back into a
     * buffer of that size: these always fit. */
    char scen[PATH_MAX + 96], devdir[PATH_MAX + 96];
    snprintf(scen, sizeof(scen), "%s/scenario", dir);
    snprintf(devdir, sizeof(devdir), "%s/dev", dir);
    /* The one variable left: the fake driver, a library loaded into this process, reads its
     * scenario from its environment at every call (tests/fake-nvml/README.md); what status and
     * doctor show is passed as structs and --nvml/--dev in dg. */
    setenv("FAKE_NVML_SCENARIO", scen, 1);
    struct vg_global dg = *g;
    dg.nvml_path = fake;
    dg.dev_dir = devdir;
    int err = 0;
    if (!g->json) {
        printf("$ vramguard status\n");
        if ((err = vg_demo_flush(stdout)) != 0)
            goto out;
        vg_cmd_status_show(&dg, &(struct vg_cmd_status_req){.no_nvml = false});
        if (vg_demo_pending(blocked) || vg_demo_out_gone())
            goto out;
        printf("$ vramguard doctor\n");
        if ((err = vg_demo_flush(stdout)) != 0)
            goto out;
    }
    vg_cmd_doctor_show(&dg, &(struct vg_cmd_doctor_req){.check_shell = false});
    if (vg_demo_pending(blocked))
        goto out;
    if (vg_demo_out_gone()) {
        err = EPIPE;
        goto out;
    }
    if (keep) {
        FILE *f = g->json ? stderr : stdout;
        fprintf(f,
                "\nThe simulation keeps running, as it is, until 'vramguard demo --stop' (or "
                "for %s): try\n"
                "  FAKE_NVML_SCENARIO=%s vramguard --nvml %s --dev %s doctor\n",
                keep_text, scen, fake, devdir);
        err = vg_demo_flush(f);
    }
out:
    unsetenv("FAKE_NVML_SCENARIO");
    if (!err && vg_demo_out_gone())
        err = EPIPE;
    return err;
}

/* `demo --stop`: the kept simulation of this user, if any. */
static int vg_demo_stop_kept(void)
{
    struct vg_err err = VG_ERR_INIT;
    int fd = -1;
    pid_t peer = 0;
    int rc = vg_demo_connect_kept(&fd, &peer, &err);
    if (rc == -ENOENT) {
        vg_cmd_error("demo", "--stop: no simulation kept by 'vramguard demo --keep' is running");
        return VG_EXIT_WARN;
    }
    if (rc == 1) {
        vg_cmd_error("demo",
                     "--stop: the demo's socket is held by another user's process "
                     "(PID %d); not ours to stop",
                     (int)peer);
        return VG_EXIT_WARN;
    }
    if (rc)
        return vg_cmd_fail("demo", &err, VG_EXIT_SOFTWARE, "--stop");
    struct vg_demo_result res = {0};
    rc = vg_demo_request_stop(fd, &res, VG_DEMO_STOP_WAIT_MS);
    close(fd);
    if (rc) {
        vg_cmd_error("demo", "--stop: the kept simulation did not confirm: %s", strerror(-rc));
        return VG_EXIT_SOFTWARE;
    }
    printf("Simulation cleaned up: %zu processes stopped%s%s.\n", res.stopped,
           res.survivors ? " (some outlived SIGKILL)" : "",
           res.dir_removed ? ", its directory removed" : "; its directory could not be removed");
    return vg_demo_flush(stdout) ? VG_EXIT_SOFTWARE : VG_EXIT_OK;
}

/* What demo's options ask for. */
struct vg_demo_args {
    const char *helper_arg, *fake_arg, *keep_text;
    bool keep, stop;
    uint64_t keep_ms;
};

/* --keep comes back to the parse, to keep its text too. */
enum { VG_DEMO_KEEP = VG_OPT_FIRST_LOCAL };

#define VG_DEMO_AT(member) VG_OPT_AT(0, struct vg_demo_args, member)

const struct vg_opt vg_demo_opts[] = {
    {"helper", 0, VG_OPT_ARG_REQUIRED, "PATH",
     "the process helper (default: found beside the binary)", 0, NULL,
     VG_OPT_VAL(VG_DEMO_AT(helper_arg), .kind = VG_OPT_K_STR)},
    {"fake-nvml", 0, VG_OPT_ARG_REQUIRED, "PATH",
     "the fake libnvidia-ml.so.1 (default: found beside the binary)", 0, NULL,
     VG_OPT_VAL(VG_DEMO_AT(fake_arg), .kind = VG_OPT_K_STR)},
    {"keep", 0, VG_OPT_ARG_OPTIONAL, "DUR",
     "leave the simulation running as it is, for other commands to try,\n"
     "until `vramguard demo --stop` or for DUR (default 1h; 1s to 12h);\n"
     "then it is removed whole. One per user and $TMPDIR at a time",
     VG_DEMO_KEEP, NULL,
     VG_OPT_VAL(VG_DEMO_AT(keep_ms), VG_OPT_GIVEN(struct vg_demo_args, keep),
                .kind = VG_OPT_K_DURATION, .min = 1000, .max = VG_DEMO_KEEP_MAX_MS,
                .takes = "a duration between 1s and 12h (e.g. 30m)", .then_code = true)},
    {"stop", 0, VG_OPT_ARG_NONE, NULL, "stop and remove the simulation a --keep left running", 0,
     NULL, VG_OPT_VAL(VG_DEMO_AT(stop), .kind = VG_OPT_K_SET)},
    VG_OPT_TABLE_END,
};

/* The command line into a; --stop is carried out here. -1 to go on, else an exit status. */
static int vg_demo_parse(struct vg_global *g, int argc, char **argv, struct vg_demo_args *a)
{
    /* .operands: demo says "unexpected argument" without the pointer to --help itself. */
    struct vg_cmd_parse p = {
        VG_CMD_PARSE(demo), .g = g, .argc = argc, .argv = argv, .operands = true, .dst = {a},
    };
    int c;
    while ((c = vg_cmd_next_opt(&p)) == VG_DEMO_KEEP)
        if (optarg)
            a->keep_text = optarg;
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (optind < argc) {
        vg_cmd_error("demo", "unexpected argument '%s'", argv[optind]);
        return VG_EXIT_USAGE;
    }
    if (a->stop && (a->keep || a->helper_arg || a->fake_arg)) {
        vg_cmd_error("demo", "--stop takes no other option");
        return VG_EXIT_USAGE;
    }
    if (a->stop)
        return vg_demo_stop_kept();
    return -1;
}

/* Show the staged simulation in dir and, with --keep, hand it over to live on: true when it
 * was kept (*fd is then closed), else the caller stops it. The keeper's answer is read into
 * line, the buffer dir points into. *status: set on an error. */
static bool vg_demo_present(struct vg_global *g, const struct vg_demo_args *a, const char *dir,
                            const char *fake, int *fd, const sigset_t *block, char *line, size_t n,
                            int *status)
{
    /* With --json, stdout carries only the doctor document; the label goes to stderr. */
    FILE *label = g->json ? stderr : stdout;
    fprintf(label,
            "SIMULATION: a made-up 4-GPU host (fake NVIDIA driver + real processes in %s).\n"
            "On a machine with NVIDIA GPUs, run 'vramguard doctor' for the real thing.\n\n"
            "Staged: a job whose CUDA_VISIBLE_DEVICES came too late; three DDP ranks that\n"
            "touched cuda:0 first; a DataLoader worker orphaned by a crash; TensorFlow\n"
            "preallocating a GPU; and memory held from another container.\n\n",
            dir);
    int err = vg_demo_flush(label);
    if (!err && !vg_demo_pending(block))
        err = vg_demo_show(g, dir, fake, a->keep, a->keep_text, block);
    int sig = vg_demo_pending(block);
    if (err && err != EPIPE && !sig) {
        vg_cmd_error("demo", "cannot write the output: %s", strerror(err));
        *status = VG_EXIT_SOFTWARE;
    }
    if (a->keep && !err && !sig) {
        if (vg_demo_request_keep(*fd, line, n)) {
            close(*fd);
            *fd = -1;
            return true; /* it lives on, in its own session; init reaps it */
        }
        vg_cmd_error("demo", "--keep: the simulation's keeper did not answer; removing it");
        *status = VG_EXIT_SOFTWARE;
    }
    return false;
}

/* The helper and the fake driver demo runs (PATH_MAX bytes each). -1 to go on, else an exit
 * status. */
static int vg_demo_paths(const struct vg_demo_args *a, char *helper, char *fake)
{
    if (vg_demo_find(a->helper_arg, "vg-helper", "tests/vg-helper", VG_PKGLIBDIR, helper,
                     PATH_MAX)) {
        vg_cmd_error("demo", "cannot find the process helper vg-helper (build it with 'make', "
                             "or pass --helper PATH)");
        return VG_EXIT_UNKNOWN;
    }
    if (vg_demo_find(a->fake_arg, "libnvidia-ml.so.1", "fake-nvml/full/libnvidia-ml.so.1",
                     VG_PKGLIBDIR, fake, PATH_MAX)) {
        vg_cmd_error("demo", "cannot find the fake driver libnvidia-ml.so.1 (build it with "
                             "'make', or pass --fake-nvml PATH)");
        return VG_EXIT_UNKNOWN;
    }
    return -1;
}

/* Interruptions wait until the simulation is cleaned up; a reader that goes away is an EPIPE,
 * not a death. Called before the fork: the keeper starts with them blocked too. */
static void vg_demo_block_signals(sigset_t *block, sigset_t *old)
{
    sigemptyset(block);
    sigaddset(block, SIGINT);
    sigaddset(block, SIGTERM);
    sigaddset(block, SIGHUP);
    sigaddset(block, SIGQUIT);
    sigprocmask(SIG_BLOCK, block, old);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, NULL);
}

/* Stop the simulation: the keeper removes everything and says what it did; dir is where it
 * was staged (NULL when staging failed). *status: set on an error. */
static void vg_demo_stop_staged(struct vg_global *g, int *fd, pid_t keeper, const char *dir,
                                int *status)
{
    char dirbuf[PATH_MAX + 64];
    snprintf(dirbuf, sizeof(dirbuf), "%s", dir ? dir : "the simulation's directory");
    struct vg_demo_result res = {0};
    int rc = vg_demo_request_stop(*fd, &res, VG_DEMO_STAGE_WAIT_MS + VG_DEMO_STOP_WAIT_MS);
    close(*fd);
    *fd = -1;
    waitpid(keeper, NULL, 0);
    if (rc) {
        vg_cmd_error("demo", "the simulation's keeper did not confirm the clean-up: %s",
                     strerror(-rc));
        *status = VG_EXIT_SOFTWARE;
    } else if (dir && !g->json && !vg_demo_out_gone()) {
        vg_demo_say_result(stdout, &res, dirbuf);
        fflush(stdout);
    } else if (dir && (res.survivors || !res.dir_removed)) {
        vg_demo_say_result(stderr, &res, dirbuf);
    }
}

/* With --keep, the socket a later --stop reaches (*lsock); the pair the keeper answers on.
 * An exit status. */
static int vg_demo_sockets(struct vg_demo *d, bool keep, int *lsock, int pair[2])
{
    struct vg_err err = VG_ERR_INIT;
    int rc = keep ? vg_demo_keep_socket(d, lsock, &err) : 0;
    if (rc == -EADDRINUSE) {
        vg_cmd_error("demo", "--keep: a kept simulation is already running (stop it with "
                             "'vramguard demo --stop')");
        return VG_EXIT_WARN;
    } else if (rc) {
        return vg_cmd_fail("demo", &err, VG_EXIT_SOFTWARE, "--keep: cannot listen for --stop");
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        vg_cmd_error("demo", "cannot create a socket pair: %s", strerror(errno));
        return VG_EXIT_SOFTWARE;
    }
    return VG_EXIT_OK;
}

int vg_cmd_demo(struct vg_global *g, int argc, char **argv)
{
    struct vg_demo_args a = {.keep_text = "1h", .keep_ms = VG_DEMO_KEEP_DEFAULT_MS};
    int status = vg_demo_parse(g, argc, argv, &a);
    if (status >= 0)
        return status;
    /* A simulation needs no privileges; with them, the helper and the fake driver it runs and
     * loads (--helper, --fake-nvml, $VRAMGUARD_DEMO_DIR) would be the caller's code. */
    if (vg_cmd_refuse_elevated("demo", "demo",
                               "a simulation needs no privileges, and it would run its helper "
                               "and load its fake driver with them; run an ordinary copy"))
        return VG_EXIT_USAGE;

    struct vg_demo d = {.alive_rd = -1, .alive_wr = -1};
    char helper[PATH_MAX], fake[PATH_MAX];
    if ((status = vg_demo_paths(&a, helper, fake)) >= 0)
        return status;
    d.helper = helper;
    d.fake = fake;
    uint64_t life_ms = a.keep ? a.keep_ms : VG_DEMO_SHOW_MAX_MS;
    uint64_t life_s = life_ms / 1000 + VG_DEMO_SHOW_MAX_MS / 1000 + VG_DEMO_LIFETIME_MARGIN_S;
    d.lifetime_s = (unsigned)(life_s > 86400 ? 86400 : life_s);

    sigset_t block, old;
    vg_demo_block_signals(&block, &old);

    int lsock = -1, pair[2] = {-1, -1};
    status = VG_EXIT_OK;
    if ((status = vg_demo_sockets(&d, a.keep, &lsock, pair)) != VG_EXIT_OK)
        goto restore;
    int rc;
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t keeper = fork();
    if (keeper < 0) {
        vg_cmd_error("demo", "cannot start the simulation's keeper: %s", strerror(errno));
        status = VG_EXIT_SOFTWARE;
        goto restore;
    }
    if (keeper == 0) {
        close(pair[0]);
        return vg_demo_keeper(&d, pair[1], lsock, a.keep_ms) ? VG_EXIT_SOFTWARE : VG_EXIT_OK;
    }
    close(pair[1]);
    pair[1] = -1;
    if (lsock >= 0) {
        close(lsock);
        lsock = -1;
    }

    /* The keeper stages; a signal meanwhile ends the wait (the stop below waits for it). */
    char line[PATH_MAX + 64];
    int sig = 0;
    const char *dir = NULL;
    rc = vg_demo_wait_staged(pair[0], &block, line, sizeof(line), &sig, &dir);
    if (sig) {
        /* Interrupted while staging: straight to the clean-up. */
    } else if (!dir) {
        vg_cmd_error("demo", "cannot stage the simulation: %s", strerror(-rc));
        status = VG_EXIT_SOFTWARE;
    } else if (vg_demo_present(g, &a, dir, fake, &pair[0], &block, line, sizeof(line), &status)) {
        goto restore;
    }

    vg_demo_stop_staged(g, &pair[0], keeper, dir, &status);

restore:
    if (pair[0] >= 0)
        close(pair[0]);
    if (pair[1] >= 0)
        close(pair[1]);
    if (lsock >= 0)
        close(lsock);
    sig = vg_demo_pending(&block);
    /* SIGPIPE stays ignored: what stdio still holds for a reader that is gone must not kill
     * the process at exit. */
    sigprocmask(SIG_SETMASK, &old, NULL); /* a pending signal is delivered here */
    return sig ? 128 + sig : status;
}
