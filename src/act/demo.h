/*
 * The simulated host of `vramguard demo`: its staging and its keeper. The keeper is a process
 * of its own (forked by the command before anything is staged), in a session of its own, that
 * makes the simulation's directory in $TMPDIR, starts the simulated processes (the test helper,
 * exec'd under command lines that read like real jobs, in the classic bad states) with their
 * end of a pipe only the keeper writes to, writes the fake driver's scenario, and removes
 * everything when told to, when the command is gone (its end of a socket pair reads end of
 * file, even after SIGKILL), or when its deadline passes. With --keep it listens on a Unix
 * socket in the user's own runtime directory (act/lock.h) for `demo --stop`, answering only its
 * own user or root.
 *
 * The keeper and the command speak one line at a time over the socket pair: the keeper says
 * "ready DIR" or "error ERRNO" once staged, the command "keep" (answered "kept") or "stop",
 * and the keeper "done STOPPED SURVIVORS REMOVED" when everything is removed. Nothing here
 * prints: the keeper's standard streams are /dev/null, and every result comes back as data
 * (struct vg_demo_result) or an error (struct vg_err) for cmd/demo.c to word.
 *
 * Ownership: struct vg_demo is the keeper's (the command fills helper, fake and lifetime_s
 * before the fork; helper and fake are borrowed); vg_demo_keeper() frees what it tracked.
 */
#ifndef VG_ACT_DEMO_H
#define VG_ACT_DEMO_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "act/stop.h"
#include "util/err.h"

/* --keep's default and longest lifetime, and the limit on a demo that is not kept (its
 * command is bounded by the driver timeouts; this only bounds a stopped terminal). */
#define VG_DEMO_KEEP_DEFAULT_MS (3600u * 1000u)
#define VG_DEMO_KEEP_MAX_MS (12u * 3600u * 1000u)
#define VG_DEMO_SHOW_MAX_MS (3600u * 1000u)
/* The helpers' own lifetime beyond the keeper's deadline: they exit with the keeper anyway. */
#define VG_DEMO_LIFETIME_MARGIN_S 300u
/* How long the command waits for the keeper: to stage (each helper is bounded by 10 s), and
 * to clean up (SIGTERM, 2 s, SIGKILL, 5 s). */
#define VG_DEMO_STAGE_WAIT_MS 120000
#define VG_DEMO_STOP_WAIT_MS 30000

/* One simulated process we started (or that our helper left behind as an orphan). */
struct vg_demo_proc {
    pid_t pid;
    struct vg_stop stop; /* its pidfd pins the identity: signals go to this process or nobody */
    bool child;          /* our own child, not yet reaped */
};

/* The keeper's state: everything it made. */
struct vg_demo {
    char dir[PATH_MAX];
    const char *helper;
    const char *fake;
    struct vg_demo_proc *procs; /* grows: every process is tracked, however many */
    size_t nprocs, cap;
    int alive_rd, alive_wr; /* the helpers' pipe: they hold the read end, we the write end */
    unsigned lifetime_s;    /* the helpers' --lifetime */
    bool dir_made;
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* --keep's socket; "": none */
};

/* What the keeper reports when done. */
struct vg_demo_result {
    size_t stopped, survivors;
    bool dir_removed;
};

/* The helper or the fake driver into out (n bytes): given (the option) when readable, else
 * NAME in $VRAMGUARD_DEMO_DIR, build_rel beside the binary (the build tree), then NAME in
 * pkglibdir (an installed copy). 0 or a negative errno. */
int vg_demo_find(const char *given, const char *name, const char *build_rel, const char *pkglibdir,
                 char *out, size_t n);

/* --keep's own socket, bound before anything is staged so a second --keep fails at once; its
 * path into d->sock (the keeper removes it). A socket left by a keeper that died (nobody
 * listens) is replaced. 0, -EADDRINUSE (a kept simulation runs; no message), or another
 * negative errno with a message. */
int vg_demo_keep_socket(struct vg_demo *d, int *out, struct vg_err *err);

/* `demo --stop`'s way to the kept simulation: 0, connected to its socket (*fd); 1: the socket
 * is held by another user's process (*peer); -ENOENT: none runs (no message); another negative
 * errno with a message. */
int vg_demo_connect_kept(int *fd, pid_t *peer, struct vg_err *err);

/* The keeper (in the forked child): a session of its own, stage, report on ctl, wait, clean
 * up, report. lsock: --keep's socket (-1: none); keep_ms: how long a kept simulation lives.
 * 0, or the negative errno staging failed with (the keeper's exit status is the caller's). */
int vg_demo_keeper(struct vg_demo *d, int ctl, int lsock, uint64_t keep_ms);

/* The command's wait for the keeper to stage, line (n bytes) its answer's buffer: 0 with *dir
 * pointing into line; a negative errno (the keeper's own when it says so); a blocked signal
 * pending meanwhile ends the wait (*sig). */
int vg_demo_wait_staged(int fd, const sigset_t *block, char *line, size_t n, int *sig,
                        const char **dir);

/* Ask the keeper at fd to keep the simulation: true once it has answered "kept". */
bool vg_demo_request_keep(int fd, char *line, size_t n);

/* Ask the keeper at fd to stop and wait (bounded) for its "done" line; a keeper still staging
 * answers "ready" or "error" first, which is skipped. 0 or a negative errno. */
int vg_demo_request_stop(int fd, struct vg_demo_result *res, int timeout_ms);

/* The first of the blocked signals that is pending, or 0. */
int vg_demo_pending(const sigset_t *blocked);

#endif
