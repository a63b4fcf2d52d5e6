/*
 * vg-churn: process churn for the reliability tests (tests/cli/t0805-churn.bats). Forks
 * short-lived children as fast as it can, for a set time or count, so that a scan of /proc
 * keeps meeting processes that appear, vanish and (once the kernel's PID counter wraps) come
 * back under a reused PID.
 *
 *   vg-churn --dev PATH --log FILE [--seconds S] [--max N] [--rate R] [--hold-every K]
 *            [--live L]
 *
 * Every K-th child (default 4) names itself "churn-holder" and opens PATH (a fake device node)
 * before it sleeps (0-100 ms); the others name themselves "churn-plain", hold nothing and
 * live 0-20 ms; at most L (default 200) are alive at once, and at most R (default: no limit) are
 * started per second, so the machine stays usable for the commands under test. At the end FILE gets one line per child,
 * "H PID" or "P PID", then "# started N holders H wrapped W signalled X": W is 1 when a PID
 * lower than an earlier one was handed out (the counter wrapped, so PIDs were reused), X the
 * children that died of a signal (some other process signalled them: must be 0 unless a test
 * means it). Exit 0, or 1 on a setup error. Every child is reaped before it exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long arg_long(const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "vg-churn: bad number '%s'\n", s);
        exit(1);
    }
    return v;
}

static void child(const char *dev, int holder, unsigned seed)
{
    prctl(PR_SET_NAME, holder ? "churn-holder" : "churn-plain", 0, 0, 0);
    if (holder && open(dev, O_RDONLY) < 0)
        _exit(3);
    /* Holders live longer (0-100 ms), so that scans meet many of them mid-exit. */
    struct timespec ts = {0, (long)(seed % (holder ? 100 : 20)) * 1000000L};
    nanosleep(&ts, NULL);
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *dev = NULL, *log = NULL;
    double seconds = 10;
    long max = 100000, every = 4, live_max = 200, rate = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "vg-churn: %s needs a value\n", argv[i]);
            return 1;
        }
        if (!strcmp(argv[i], "--dev"))
            dev = argv[++i];
        else if (!strcmp(argv[i], "--log"))
            log = argv[++i];
        else if (!strcmp(argv[i], "--seconds"))
            seconds = (double)arg_long(argv[++i], 1, 3600);
        else if (!strcmp(argv[i], "--max"))
            max = arg_long(argv[++i], 1, 10000000);
        else if (!strcmp(argv[i], "--hold-every"))
            every = arg_long(argv[++i], 1, 1000000);
        else if (!strcmp(argv[i], "--rate"))
            rate = arg_long(argv[++i], 1, 1000000);
        else if (!strcmp(argv[i], "--live"))
            live_max = arg_long(argv[++i], 1, 10000);
        else {
            fprintf(stderr, "vg-churn: unknown option '%s'\n", argv[i]);
            return 1;
        }
    }
    if (!dev || !log) {
        fprintf(stderr, "usage: vg-churn --dev PATH --log FILE [--seconds S] [--max N] "
                        "[--rate R] [--hold-every K] [--live L]\n");
        return 1;
    }
    FILE *out = fopen(log, "we");
    if (!out) {
        fprintf(stderr, "vg-churn: %s: %s\n", log, strerror(errno));
        return 1;
    }
    double start = now_s(), end = start + seconds;
    long started = 0, holders = 0, live = 0, signalled = 0;
    pid_t last = 0;
    int wrapped = 0;
    while (started < max && now_s() < end) {
        if (rate && started >= (long)((now_s() - start) * (double)rate)) {
            struct timespec ts = {0, 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        while (live >= live_max) {
            int st;
            pid_t r = waitpid(-1, &st, 0);
            if (r > 0) {
                live--;
                signalled += WIFSIGNALED(st);
            } else if (errno != EINTR)
                break;
        }
        int holder = started % every == 0;
        pid_t pid = fork();
        if (pid == 0)
            child(dev, holder, (unsigned)started * 2654435761u);
        if (pid < 0) {
            if (errno == EAGAIN) {
                struct timespec ts = {0, 1000000L};
                nanosleep(&ts, NULL);
                continue;
            }
            fprintf(stderr, "vg-churn: fork: %s\n", strerror(errno));
            break;
        }
        fprintf(out, "%c %ld\n", holder ? 'H' : 'P', (long)pid);
        started++;
        holders += holder;
        live++;
        if (pid < last)
            wrapped = 1;
        last = pid;
        int st;
        pid_t r;
        while ((r = waitpid(-1, &st, WNOHANG)) > 0) {
            live--;
            signalled += WIFSIGNALED(st);
        }
    }
    while (live > 0) {
        int st;
        pid_t r = waitpid(-1, &st, 0);
        if (r > 0) {
            live--;
            signalled += WIFSIGNALED(st);
        } else if (errno != EINTR)
            break;
    }
    fprintf(out, "# started %ld holders %ld wrapped %d signalled %ld\n", started, holders, wrapped,
            signalled);
    return fclose(out) == 0 ? 0 : 1;
}
