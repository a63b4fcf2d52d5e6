/*
 * bench/timeit: run one command and report what it cost, for bench/run.
 *
 *   timeit [-t SECONDS] [-o FILE] -- COMMAND [ARG...]
 *
 * Writes one line to FILE (default: stderr), "WALL USER SYS MAXRSS_KB STATUS": wall-clock seconds
 * (CLOCK_MONOTONIC), user and system CPU seconds and peak resident set in KiB from wait4()
 * (which include any descendants the command waited for, e.g. lsof's helper processes), and
 * the exit status (128+N for signal N). The command's own stdout/stderr pass through.
 * With -t (default 300), the command is killed with SIGKILL after that many seconds and
 * STATUS is 124: no wait in the benchmark is unbounded.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;
static pid_t child;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
    kill(child, SIGKILL);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double limit = 300;
    const char *outpath = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "+t:o:")) != -1) {
        if (opt == 'o') {
            outpath = optarg;
        } else if (opt == 't') {
            char *end;
            limit = strtod(optarg, &end);
            if (*end || limit <= 0) {
                fprintf(stderr, "timeit: -t wants a positive number of seconds\n");
                return 64;
            }
        } else {
            fprintf(stderr, "usage: timeit [-t SECONDS] [-o FILE] -- COMMAND [ARG...]\n");
            return 64;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: timeit [-t SECONDS] [-o FILE] -- COMMAND [ARG...]\n");
        return 64;
    }
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("timeit: fork");
        return 70;
    }
    if (pid == 0) {
        execvp(argv[optind], argv + optind);
        fprintf(stderr, "timeit: %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    child = pid;
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {0};
    it.it_value.tv_sec = (time_t)limit;
    it.it_value.tv_usec = (suseconds_t)((limit - (double)(time_t)limit) * 1e6);
    setitimer(ITIMER_REAL, &it, NULL);
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("timeit: wait4");
            return 70;
        }
    }
    double wall = now() - t0;
    int rc = timed_out             ? 124
             : WIFEXITED(status)   ? WEXITSTATUS(status)
             : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                   : 70;
    FILE *out = outpath ? fopen(outpath, "we") : stderr;
    if (!out) {
        perror("timeit: -o");
        return 70;
    }
    fprintf(out, "%.4f %.4f %.4f %ld %d\n", wall,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss, rc);
    if (out != stderr && fclose(out) != 0) {
        perror("timeit: -o");
        return 70;
    }
    return rc;
}
