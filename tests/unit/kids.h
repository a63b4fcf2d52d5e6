/*
 * Real child processes for the unit tests of what stops processes (settle, the hand-off, top's
 * background stop): a child that sleeps (bounded) until the test ends it, ready when spawned,
 * optionally ignoring SIGTERM; its start time as /proc says; and the check that pidfds work
 * here (valgrind 3.19 does not know pidfd_open(2): the tests that signal skip, saying so).
 * kid_teardown (a cmocka teardown, or called at the end of a test) kills and reaps them all.
 */
#ifndef VG_TEST_KIDS_H
#define VG_TEST_KIDS_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/proc.h"

#define KIDS_MAX 8
static pid_t kids[KIDS_MAX];
static size_t nkids;

static inline pid_t kid_spawn(bool ignore_term)
{
    assert_true(nkids < KIDS_MAX);
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
        char c = 'r';
        if (write(pfd[1], &c, 1) != 1)
            _exit(1);
        for (int i = 0; i < 600; i++) /* bounded: the test ends it long before */
            usleep(100000);
        _exit(0);
    }
    close(pfd[1]);
    char c;
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    kids[nkids++] = pid;
    return pid;
}

static inline int kid_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < nkids; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    nkids = 0;
    return 0;
}

static inline uint64_t kid_start(pid_t pid)
{
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct vg_proc p;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_proc_read(fd, pid, "/dev", &p, &err), 0);
    uint64_t st = p.start_ticks;
    vg_proc_release(&p);
    vg_err_release(&err);
    close(fd);
    return st;
}

static inline bool kid_need_pidfd(void)
{
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    print_message("pidfd_open(2) is not available here (valgrind?): skipped\n");
    return false;
}

#endif
