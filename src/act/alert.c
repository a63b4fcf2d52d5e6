/*
 * Alert commands (see exec.h), started with posix_spawn so a child never runs our code
 * between fork and exec, and watched from the caller's event loop.
 */
#include "act/alert.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "act/note.h"
#include "act/stop.h"
#include "util/array.h"
#include "util/buf.h"
#include "util/clock.h"

extern char **environ;

#define VG_ALERT_KILL_GRACE_MS 1000u

struct vg_alert_child {
    pid_t pid;
    uint64_t deadline; /* SIGTERM at this time */
    bool termed;       /* SIGTERM sent; SIGKILL at deadline + grace */
    bool stopped;      /* by vg_alert_stop_all(), not by its own timeout */
};

struct vg_alert {
    char **argv;
    uint64_t timeout_ms;
    unsigned max_running;
    struct vg_alert_child *kids;
    size_t nkids, kids_cap;
    struct vg_alert_stats stats;
    const char *what, *owner; /* for messages */
};

void vg_alert_argv_free(char **argv)
{
    if (!argv)
        return;
    for (char **a = argv; *a; a++)
        free(*a);
    free(argv);
}

int vg_alert_split(const char *cmd, char ***out, struct vg_err *err)
{
    *out = NULL;
    char **argv = NULL;
    size_t n = 0, cap = 0;
    struct vg_buf w;
    vg_buf_init(&w, 0);
    const char *s = cmd;
    int rc = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n')
            s++;
        if (!*s)
            break;
        vg_buf_reset(&w);
        bool any = false;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
            any = true;
            if (*s == '\'') {
                const char *end = strchr(s + 1, '\'');
                if (!end) {
                    rc = vg_err_set(err, -EINVAL, "exec: unbalanced ' in '%s'", cmd);
                    goto out;
                }
                vg_buf_add(&w, s + 1, (size_t)(end - s - 1));
                s = end + 1;
            } else if (*s == '"') {
                s++;
                while (*s && *s != '"') {
                    if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
                        s++;
                    vg_buf_addc(&w, *s++);
                }
                if (*s != '"') {
                    rc = vg_err_set(err, -EINVAL, "exec: unbalanced \" in '%s'", cmd);
                    goto out;
                }
                s++;
            } else if (*s == '\\' && s[1]) {
                vg_buf_addc(&w, s[1]);
                s += 2;
            } else {
                vg_buf_addc(&w, *s++);
            }
        }
        if (!any)
            continue;
        if (VG_ARRAY_GROW(argv, cap, n + 2)) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        argv[n] = w.err ? NULL : strdup(vg_buf_str(&w));
        argv[n + 1] = NULL;
        if (!argv[n]) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        n++;
    }
    if (n == 0)
        rc = vg_err_set(err, -EINVAL, "exec: the command is empty");
out:
    vg_buf_release(&w);
    if (rc) {
        vg_alert_argv_free(argv);
        return rc;
    }
    *out = argv;
    return 0;
}

static int vg_alert_argv(const char *cmd, bool shell, char ***argv, struct vg_err *err)
{
    if (!shell)
        return vg_alert_split(cmd, argv, err);
    if (!*cmd)
        return vg_err_set(err, -EINVAL, "exec: the command is empty");
    char **a = calloc(4, sizeof(*a));
    if (!a || !(a[0] = strdup("/bin/sh")) || !(a[1] = strdup("-c")) || !(a[2] = strdup(cmd))) {
        vg_alert_argv_free(a);
        return vg_err_set(err, -ENOMEM, "out of memory");
    }
    *argv = a;
    return 0;
}

int vg_alert_new(const char *cmd, bool shell, uint64_t timeout_ms, unsigned max_running,
                 struct vg_alert **out, struct vg_err *err)
{
    *out = NULL;
    struct vg_alert *x = calloc(1, sizeof(*x));
    if (!x)
        return vg_err_set(err, -ENOMEM, "out of memory");
    int rc = vg_alert_argv(cmd, shell, &x->argv, err);
    if (rc) {
        free(x);
        return rc;
    }
    x->timeout_ms = timeout_ms;
    x->max_running = max_running ? max_running : VG_ALERT_MAX_RUNNING;
    x->stats.last_exit = -1;
    vg_alert_set_names(x, NULL, NULL);
    *out = x;
    return 0;
}

void vg_alert_set_names(struct vg_alert *x, const char *what, const char *owner)
{
    x->what = what ? what : "alert command";
    x->owner = owner ? owner : "watch";
}

void vg_alert_free(struct vg_alert *x)
{
    if (!x)
        return;
    vg_alert_argv_free(x->argv);
    free(x->kids);
    free(x);
}

int vg_alert_configure(struct vg_alert *x, const char *cmd, bool shell, uint64_t timeout_ms,
                       struct vg_err *err)
{
    char **argv;
    int rc = vg_alert_argv(cmd, shell, &argv, err);
    if (rc)
        return rc;
    vg_alert_argv_free(x->argv);
    x->argv = argv;
    x->timeout_ms = timeout_ms;
    return 0;
}

/* vramguard's environment without VRAMGUARD_*, then env. NULL on out of memory. */
static char **vg_alert_envp(const char *const *env, size_t nenv)
{
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    char **envp = calloc(n + nenv + 1, sizeof(*envp));
    if (!envp)
        return NULL;
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "VRAMGUARD_", 10) != 0)
            envp[k++] = *e;
    for (size_t i = 0; i < nenv; i++)
        envp[k++] = (char *)env[i];
    envp[k] = NULL;
    return envp;
}

/* The stdin of the child: an in-memory file holding in, positioned at its start. */
static int vg_alert_stdin(const char *in, size_t inlen)
{
    int fd = memfd_create("vramguard-event", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    while (off < inlen) {
        ssize_t w = write(fd, in + off, inlen - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            return -e;
        }
        off += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int vg_alert_spawn(struct vg_alert *x, char **envp, int in_fd, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc)
        return rc;
    if ((rc = posix_spawnattr_init(&at)) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return rc;
    }
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(&defaults, sigs[i]);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    if (!rc)
        rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                               POSIX_SPAWN_SETSIGDEF);
    if (!rc)
        rc = posix_spawnattr_setpgroup(&at, 0);
    if (!rc)
        rc = posix_spawnattr_setsigmask(&at, &none);
    if (!rc)
        rc = posix_spawnattr_setsigdefault(&at, &defaults);
    if (!rc)
        rc = posix_spawnp(pid, x->argv[0], &fa, &at, x->argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

int vg_alert_run(struct vg_alert *x, const char *const *env, size_t nenv, const char *in,
                 size_t inlen, uint64_t now_ms, struct vg_err *err)
{
    if (x->nkids >= x->max_running) {
        x->stats.dropped++;
        return 1;
    }
    if (VG_ARRAY_GROW(x->kids, x->kids_cap, x->nkids + 1))
        return vg_err_set(err, -ENOMEM, "out of memory");
    char **envp = vg_alert_envp(env, nenv);
    if (!envp)
        return vg_err_set(err, -ENOMEM, "out of memory");
    int in_fd = vg_alert_stdin(in, inlen);
    if (in_fd < 0) {
        free(envp);
        x->stats.failed++;
        return vg_err_set(err, in_fd, "cannot prepare the %s's input: %s", x->what,
                          strerror(-in_fd));
    }
    pid_t pid = -1;
    int rc = vg_alert_spawn(x, envp, in_fd, &pid);
    close(in_fd);
    free(envp);
    if (rc) {
        x->stats.failed++;
        return vg_err_set(err, -rc, "cannot run '%s': %s", x->argv[0], strerror(rc));
    }
    x->kids[x->nkids++] = (struct vg_alert_child){
        .pid = pid,
        .deadline = now_ms + x->timeout_ms,
    };
    x->stats.started++;
    return 0;
}

static void vg_alert_say(void (*report)(void *, const char *), void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void vg_alert_say(void (*report)(void *, const char *), void *ctx, const char *fmt, ...)
{
    /* whole, however long the command it names (was cut at 255 bytes without a mark) */
    va_list ap;
    va_start(ap, fmt);
    vg_note_v(report, ctx, "(a message about a command vramguard ran was lost: out of memory)", fmt,
              ap);
    va_end(ap);
}

void vg_alert_poll(struct vg_alert *x, uint64_t now_ms, void (*report)(void *ctx, const char *msg),
                   void *ctx)
{
    size_t k = 0;
    for (size_t i = 0; i < x->nkids; i++) {
        struct vg_alert_child *c = &x->kids[i];
        int st;
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid || (r < 0 && errno == ECHILD)) {
            if (r < 0) {
                continue;
            } else if (c->termed && c->stopped) {
                x->stats.last_exit = -1;
                vg_alert_say(report, ctx, "%s (PID %d) stopped: %s is exiting", x->what,
                             (int)c->pid, x->owner);
            } else if (c->termed) {
                x->stats.timed_out++;
                x->stats.last_exit = -1;
                vg_alert_say(report, ctx,
                             "%s (PID %d) did not finish within %llu ms and was killed", x->what,
                             (int)c->pid, (unsigned long long)x->timeout_ms);
            } else if (WIFEXITED(st)) {
                x->stats.last_exit = WEXITSTATUS(st);
                if (WEXITSTATUS(st) != 0) {
                    x->stats.failed++;
                    vg_alert_say(report, ctx, "%s (PID %d) exited with status %d", x->what,
                                 (int)c->pid, WEXITSTATUS(st));
                }
            } else if (WIFSIGNALED(st)) {
                x->stats.failed++;
                x->stats.last_exit = 128 + WTERMSIG(st);
                vg_alert_say(report, ctx, "%s (PID %d) was killed by signal %d", x->what,
                             (int)c->pid, WTERMSIG(st));
            }
            continue;
        }
        vg_stop_group_step(c->pid, c->deadline, VG_ALERT_KILL_GRACE_MS, &c->termed, now_ms);
        x->kids[k++] = *c;
    }
    x->nkids = k;
}

uint64_t vg_alert_next_ms(const struct vg_alert *x, uint64_t now_ms)
{
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; x && i < x->nkids; i++) {
        uint64_t at =
            vg_stop_group_due(x->kids[i].deadline, VG_ALERT_KILL_GRACE_MS, x->kids[i].termed);
        uint64_t in = at > now_ms ? at - now_ms : 0;
        if (in < best)
            best = in;
    }
    return best;
}

size_t vg_alert_running(const struct vg_alert *x)
{
    return x ? x->nkids : 0;
}

void vg_alert_stats(const struct vg_alert *x, struct vg_alert_stats *out)
{
    *out = x->stats;
}

/* How long, after SIGKILL, vg_alert_stop_all() waits for the kernel to end them. */
#define VG_ALERT_STOP_KILL_WAIT_MS 2000u

void vg_alert_wait(struct vg_alert *x, void (*report)(void *ctx, const char *msg), void *ctx)
{
    /* Bounded: each child is killed at its deadline, SIGKILLed a second later. */
    while (x && x->nkids) {
        vg_alert_poll(x, vg_clock_ms(), report, ctx);
        if (x->nkids) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

void vg_alert_stop_all(struct vg_alert *x, void (*report)(void *ctx, const char *msg), void *ctx)
{
    if (!x || !x->nkids)
        return;
    /* The same sequence as a timeout, due now: vg_alert_poll() sends SIGTERM to each process
     * group, SIGKILL after the grace period, and reaps. */
    uint64_t now = vg_clock_ms();
    for (size_t i = 0; i < x->nkids; i++) {
        struct vg_alert_child *c = &x->kids[i];
        c->stopped = true;
        if (!c->termed || c->deadline > now)
            c->deadline = now;
    }
    uint64_t give_up = now + VG_ALERT_KILL_GRACE_MS + VG_ALERT_STOP_KILL_WAIT_MS;
    for (;;) {
        now = vg_clock_ms();
        vg_alert_poll(x, now, report, ctx);
        if (!x->nkids || now >= give_up)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < x->nkids; i++)
        vg_alert_say(report, ctx, "%s (PID %d) outlived SIGKILL; left to init", x->what,
                     (int)x->kids[i].pid);
}
