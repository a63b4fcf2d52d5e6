/*
 * Alert commands for `watch --exec`: one child per alert, started without blocking sampling,
 * reaped asynchronously, killed when it outlives its timeout.
 *
 * - The command line is split into words like a shell would split plain words and quotes
 *   ('...', "...", backslash), but nothing is expanded and no shell runs: `$HOME`, `*`, `|`
 *   and `;` are just characters. With shell set, it runs as `/bin/sh -c CMD` instead.
 * - The child gets the caller's NAME=VALUE pairs added to vramguard's environment (after
 *   removing every inherited VRAMGUARD_* variable), the given bytes on stdin (from an
 *   in-memory file, so any size is written without blocking), its stdout sent to our stderr
 *   (it must not corrupt the event stream), default signal dispositions, and a process group
 *   of its own.
 * - At the timeout its process group gets SIGTERM, and SIGKILL one second later.
 * - At most max_running run at once; an alert beyond that is dropped and counted.
 *
 * Ownership: vg_alert_new()/vg_alert_free(); free does not wait for or kill children (call
 * vg_alert_wait() or vg_alert_stop_all() first). Single-threaded; the caller reaps through
 * vg_alert_poll() when SIGCHLD arrives and at vg_alert_next_ms().
 */
#ifndef VG_ACT_ALERT_H
#define VG_ACT_ALERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define VG_ALERT_MAX_RUNNING 8u

struct vg_alert;

struct vg_alert_stats {
    uint64_t started, dropped, failed, timed_out;
    int last_exit; /* the last child to finish: its exit status, 128 + N when signal N ended
                    * it, -1 when none has finished or it was stopped or timed out */
};

/* cmd: the command line; shell: run it through /bin/sh -c. -EINVAL (unbalanced quote, empty
 * command) with a message; -ENOMEM. */
int vg_alert_new(const char *cmd, bool shell, uint64_t timeout_ms, unsigned max_running,
                 struct vg_alert **out, struct vg_err *err);
void vg_alert_free(struct vg_alert *x);

/* What the messages call the command and who stops it ("alert command" and "watch" unless
 * set); both borrowed, static strings. */
void vg_alert_set_names(struct vg_alert *x, const char *what, const char *owner);

/* Replace the command and timeout (SIGHUP); running children are not touched. */
int vg_alert_configure(struct vg_alert *x, const char *cmd, bool shell, uint64_t timeout_ms,
                       struct vg_err *err);

/* Start the command for one alert. env: n "NAME=VALUE" strings. Returns 0 when started, 1 when
 * dropped (max_running already run), or a negative errno with err saying why it could not be
 * started (the caller reports it and goes on). */
int vg_alert_run(struct vg_alert *x, const char *const *env, size_t nenv, const char *in,
                 size_t inlen, uint64_t now_ms, struct vg_err *err);

/* Reap finished children and act on timeouts. report(ctx, line) is called for each child that
 * failed (non-zero exit, killed by a signal, or timed out) with a one-line message. */
void vg_alert_poll(struct vg_alert *x, uint64_t now_ms, void (*report)(void *ctx, const char *msg),
                   void *ctx);

/* Milliseconds until the next timeout action is due (0: now), or UINT64_MAX when none. */
uint64_t vg_alert_next_ms(const struct vg_alert *x, uint64_t now_ms);

size_t vg_alert_running(const struct vg_alert *x);
void vg_alert_stats(const struct vg_alert *x, struct vg_alert_stats *out);

/* Wait (polling, bounded by each child's own timeout) until none runs. */
void vg_alert_wait(struct vg_alert *x, void (*report)(void *ctx, const char *msg), void *ctx);

/* Stop every child still running, now: SIGTERM to its process group, SIGKILL after the grace
 * period (1 s), reaped. Bounded (about 3 s in all) even when one will not die; report says so
 * for each. For the owner's exit, so no alert command outlives it. */
void vg_alert_stop_all(struct vg_alert *x, void (*report)(void *ctx, const char *msg), void *ctx);

/* Split a command line into words (exposed for tests). *argv is a NULL-terminated heap array
 * freed with vg_alert_argv_free(). */
int vg_alert_split(const char *cmd, char ***argv, struct vg_err *err);
void vg_alert_argv_free(char **argv);

#endif
