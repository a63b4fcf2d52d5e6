/*
 * bench/spawner: the synthetic host for bench/run. Forks N children that each hold M file
 * descriptors (pipes, sockets and regular files; stdin/out/err included in M) and sleep;
 * K of them also hold a GPU device node DIR/nvidia<G> plus DIR/nvidiactl and DIR/nvidia-uvm.
 * It prints one "PID GPU" line per holder on stdout, then "ready", and waits.
 *
 *   spawner -n N -m M -k K -d DIR [-g GPUS] [-t MAX_SECONDS]
 *
 * The shared descriptors are opened once here and inherited by fork (so N children cost N
 * forks, not N*M opens); a holder swaps three of them for its device nodes, keeping M. The
 * device nodes are plain files that bench/run creates under DIR: readlink, fuser and lsof see
 * them exactly as they would see /dev/nvidia*.
 *
 * Cleanup on every path: SIGTERM, SIGINT, SIGHUP, its parent (bench/run) exiting, or
 * MAX_SECONDS (default 900) passing make it SIGKILL and reap every child; each child also
 * has PR_SET_PDEATHSIG(SIGKILL), so even a SIGKILL of this process leaves nothing behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VG_HIGH_FD 4096

static pid_t *kids;
static long nkids;

static void die(const char *what)
{
    fprintf(stderr, "spawner: %s: %s\n", what, strerror(errno));
    for (long i = 0; i < nkids; i++)
        kill(kids[i], SIGKILL);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    exit(1);
}

static long arg_long(const char *s, long lo, long hi, const char *name)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "spawner: -%s wants a number in %ld..%ld\n", name, lo, hi);
        exit(64);
    }
    return v;
}

/* Child: stdio on /dev/null, the shared set, device nodes for a holder; then sleep until
 * killed. fds 3..top-1 are the shared set; ready is the write end of the readiness pipe, which
 * is closed once written, so the child holds exactly top descriptors. */
static void child(int ready, int gpu, const char *dir, int top)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
        _exit(1);
    if (gpu >= 0) {
        /* Swap the three highest shared descriptors for the device nodes. */
        char path[4096];
        const char *names[3] = {NULL, "nvidiactl", "nvidia-uvm"};
        char gname[32];
        snprintf(gname, sizeof(gname), "nvidia%d", gpu);
        names[0] = gname;
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || dup2(fd, top - 1 - i) < 0)
                _exit(1);
            close(fd);
        }
    }
    char c = 'r';
    if (write(ready, &c, 1) != 1)
        _exit(1);
    close(ready); /* ready == top: the child now holds exactly fds 0..top-1 */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    long n = 2000, m = 64, k = -1, gpus = 8, max_s = 900;
    const char *dir = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "n:m:k:d:g:t:")) != -1) {
        switch (opt) {
        case 'n':
            n = arg_long(optarg, 1, 30000, "n");
            break;
        case 'm':
            m = arg_long(optarg, 8, 1000, "m");
            break;
        case 'k':
            k = arg_long(optarg, 0, 30000, "k");
            break;
        case 'g':
            gpus = arg_long(optarg, 1, 64, "g");
            break;
        case 't':
            max_s = arg_long(optarg, 1, 86400, "t");
            break;
        case 'd':
            dir = optarg;
            break;
        default:
            fprintf(stderr, "usage: spawner -n N -m M -k K -d DIR [-g GPUS] [-t MAX_SECONDS]\n");
            return 64;
        }
    }
    if (!dir) {
        fprintf(stderr, "spawner: -d DIR is required\n");
        return 64;
    }
    if (k < 0)
        k = n / 20;
    if (k > n)
        k = n;

    /* Signals are taken synchronously (sigtimedwait) so cleanup never runs in a handler. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGPIPE);
    sigprocmask(SIG_BLOCK, &set, NULL);
    pid_t parent = getppid();
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    /* The shared set at fds 3..m-1: pipes, socket pairs and regular files in turn. */
    int devnull = open("/dev/null", O_RDWR);
    int hi = devnull < 0 ? -1 : fcntl(devnull, F_DUPFD, VG_HIGH_FD + 1000);
    if (hi < 0)
        die("open /dev/null");
    close(devnull);
    devnull = hi;
    int fds[1024], nf = 0;
    char path[4096];
    for (int kind = 0; nf < m - 3; kind = (kind + 1) % 3) {
        int pair[2];
        if (kind == 0 && pipe(pair) == 0) {
            fds[nf++] = pair[0];
            if (nf < m - 3)
                fds[nf++] = pair[1];
            else
                close(pair[1]);
        } else if (kind == 1 && socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0) {
            fds[nf++] = pair[0];
            if (nf < m - 3)
                fds[nf++] = pair[1];
            else
                close(pair[1]);
        } else if (kind == 2) {
            snprintf(path, sizeof(path), "%s/data%d", dir, nf % 8);
            int fd = open(path, O_RDWR | O_CREAT, 0600);
            if (fd < 0)
                die(path);
            fds[nf++] = fd;
        } else {
            die("pipe/socketpair");
        }
    }
    /* Lay the set out at 3..3+nf-1 here, so a child inherits the final layout: through high
     * numbers first, since a pipe or file may already sit on a slot another one needs. */
    for (int j = 0; j < nf; j++) {
        int high = fcntl(fds[j], F_DUPFD, VG_HIGH_FD + j);
        if (high < 0)
            die("fcntl");
        close(fds[j]);
        fds[j] = high;
    }
    for (int j = 0; j < nf; j++) {
        if (dup2(fds[j], 3 + j) < 0)
            die("dup2");
        close(fds[j]);
    }
    int ready[2], rp[2];
    if (pipe(rp) < 0 || (ready[0] = fcntl(rp[0], F_DUPFD, VG_HIGH_FD)) < 0 ||
        (ready[1] = fcntl(rp[1], F_DUPFD, VG_HIGH_FD)) < 0)
        die("pipe");
    close(rp[0]);
    close(rp[1]);

    kids = calloc((size_t)n, sizeof(*kids));
    if (!kids)
        die("calloc");
    int holder_every = k ? (int)(n / k) : 0;
    long nholders = 0;
    for (long i = 0; i < n; i++) {
        int gpu = -1;
        if (holder_every && i % holder_every == 0 && nholders < k)
            gpu = (int)(nholders++ % gpus);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            for (int j = 0; j < 3; j++)
                dup2(devnull, j);
            /* Whatever else bench/run's shell left open is not part of the M. */
            if (dup2(ready[1], 3 + nf) < 0 || close_range(4 + nf, ~0u, 0) < 0)
                _exit(1);
            ready[1] = 3 + nf;
            child(ready[1], gpu, dir, 3 + nf);
        }
        kids[nkids++] = pid;
        if (gpu >= 0)
            printf("%d %d\n", (int)pid, gpu);
    }
    close(ready[1]);
    close(devnull);
    for (int j = 0; j < nf; j++)
        close(3 + j);

    /* Wait for every child to say it is set up, bounded by the same deadline. */
    time_t deadline = time(NULL) + max_s;
    long got = 0;
    char buf[4096];
    while (got < n) {
        struct pollfd p = {.fd = ready[0], .events = POLLIN};
        int rc = poll(&p, 1, 1000);
        if (time(NULL) > deadline) {
            errno = ETIMEDOUT;
            die("children not ready");
        }
        if (rc <= 0)
            continue;
        ssize_t r = read(ready[0], buf, sizeof(buf));
        if (r <= 0) {
            errno = r < 0 ? errno : EPIPE;
            die("children not ready (one failed to open its descriptors?)");
        }
        got += r;
    }
    close(ready[0]);
    printf("ready\n");
    fflush(stdout);

    /* Stay until told to stop, the parent (bench/run) goes away, or the deadline. */
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
        int s = sigtimedwait(&set, NULL, &ts);
        if (s > 0 || time(NULL) > deadline || getppid() != parent)
            break;
    }
    for (long i = 0; i < nkids; i++)
        kill(kids[i], SIGKILL);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    return 0;
}
