#!/usr/bin/python3
"""tests/lifecycles/job.py: the one "training job" every lifecycle case of the lab starts.

It does what a CUDA program with DataLoader workers does to the device side, on the stand-in
nodes of vg_fake_dev: the main process opens DEVDIR/nvidia0, nvidia1, nvidiactl and nvidia-uvm,
maps nvidia0 (and, with --map, a stand-in libcuda.so.1) as CUDA does, and only then starts its
workers, which inherit the descriptors and the mappings (with fork; spawn and forkserver
workers start afresh and inherit nothing, as in the field). Workers just sleep, as stuck
DataLoader workers do (--busy: they spin instead). When everything is in place it writes
PIDFILE atomically, one "ROLE PID" a line (main, worker), and sleeps until killed.

Every process logs a SIGTERM it receives to --signal-log ("PID TERM", one write on an O_APPEND
descriptor) and then dies of it, so a test sees who `vramguard clean --force` signalled.
SIGHUP keeps whatever disposition the process was started with (nohup ignores it).

How the workers start (--workers): fork (os.fork), mp-fork, mp-spawn, mp-forkserver
(multiprocessing.Pool with that start method), futures (concurrent.futures.ProcessPoolExecutor
with Python's default context). --daemonize daemon3 calls libc's daemon(0, 0) first (fork,
setsid), --daemonize double forks, calls setsid and forks again, as classic daemons do.
--in-kernel: for the Jupyter case, run inside the calling process (the kernel) and return once
the workers are started instead of sleeping.
"""

import argparse
import ctypes
import os
import signal
import sys
import time

LOG_FD = None


def log_signal(signum, _frame):
    if LOG_FD is not None:
        os.write(LOG_FD, b"%d %s\n" % (os.getpid(), signal.Signals(signum).name[3:].encode()))
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def worker_loop(busy=False):
    signal.signal(signal.SIGTERM, log_signal)
    while True:
        if busy:
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                pass
        else:
            time.sleep(3600)


def pool_task(_):
    return os.getpid()


def stuck_task(busy):
    # A worker stuck in its task, as a DataLoader worker blocked on its queue or its data: an
    # idle pool worker waiting for a task would instead see the task queue's EOF when the main
    # dies, and exit (multiprocessing.pool's workers close their copy of the writer).
    worker_loop(busy)


def pool_init(log_path, busy):
    # A pool worker: log SIGTERM like the others; with --busy, spin in the initializer (the
    # worker never takes a task, like one stuck in its loop).
    global LOG_FD
    if log_path:
        LOG_FD = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    signal.signal(signal.SIGTERM, log_signal)
    if busy:
        worker_loop(True)


def daemonize(how):
    if how == "daemon3":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.daemon(0, 0) != 0:
            sys.exit("job.py: daemon(0, 0) failed: errno %d" % ctypes.get_errno())
    elif how == "double":
        if os.fork():
            os._exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
        os.chdir("/")


def open_nodes(devdir, maps):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    fds = []
    for name in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"):
        # Not O_CLOEXEC: the real driver's descriptors are inherited by fork (and lost on exec).
        fds.append(os.open(os.path.join(devdir, name), os.O_RDWR))
    # A stand-in node is an empty regular file: one page maps fine and is never touched.
    targets = [fds[2]] + [os.open(m, os.O_RDONLY) for m in maps]
    for fd in targets:
        p = libc.mmap(None, 4096, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
        if p in (None, ctypes.c_void_p(-1).value):
            sys.exit("job.py: mmap failed: errno %d" % ctypes.get_errno())
    for fd in targets[1:]:
        os.close(fd)  # the mapping keeps the file, as after dlopen()
    return fds


def start_workers(how, n, log_path, busy):
    """Starts n workers; returns their pids and what keeps them (a pool)."""
    pids = []
    if how == "fork":
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                worker_loop(busy)
                os._exit(0)
            pids.append(pid)
        return pids, None
    import multiprocessing as mp
    if how == "futures":
        import concurrent.futures as cf
        ex = cf.ProcessPoolExecutor(max_workers=n, initializer=pool_init,
                                    initargs=(log_path, False))
        # The executor starts its processes with the first tasks; n stuck tasks take n workers.
        for _ in range(n):
            ex.submit(stuck_task, busy)
        procs = ex._processes
    else:
        method = {"mp-fork": "fork", "mp-spawn": "spawn", "mp-forkserver": "forkserver"}[how]
        ex = mp.get_context(method).Pool(n, initializer=pool_init, initargs=(log_path, False))
        for _ in range(n):
            ex.apply_async(stuck_task, (busy,))
        procs = {p.pid: p for p in ex._pool}
    # Ready when every worker runs its task (it has taken it off the queue).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(procs) >= n and all(task_taken(pid) for pid in procs):
            break
        time.sleep(0.05)
    return sorted(procs), ex


def task_taken(pid):
    """Whether the pool worker pid has left the task queue's read (its state is S either
    way; its wait channel tells a pipe read from a sleep)."""
    try:
        with open("/proc/%d/wchan" % pid) as f:
            w = f.read().strip()
    except OSError:
        return False
    return w not in ("pipe_read", "pipe_wait", "unix_stream_read_generic", "futex_wait_queue")


def main(argv=None):
    global LOG_FD
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", required=True)
    ap.add_argument("--pidfile", required=True)
    ap.add_argument("--signal-log")
    ap.add_argument("--map", action="append", default=[])
    ap.add_argument("--workers", default="fork",
                    choices=["fork", "mp-fork", "mp-spawn", "mp-forkserver", "futures"])
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--daemonize", choices=["daemon3", "double"])
    ap.add_argument("--in-kernel", action="store_true")
    a = ap.parse_args(argv)

    if a.daemonize:
        daemonize(a.daemonize)
    if a.signal_log:
        LOG_FD = os.open(a.signal_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                         0o644)
    signal.signal(signal.SIGTERM, log_signal)
    fds = open_nodes(a.dev, a.map)
    pids, keep = start_workers(a.workers, a.n, a.signal_log, a.busy)
    tmp = "%s.tmp.%d" % (a.pidfile, os.getpid())
    with open(tmp, "w") as f:
        f.write("main %d\n" % os.getpid())
        for p in pids:
            f.write("worker %d\n" % p)
    os.rename(tmp, a.pidfile)
    if a.in_kernel:
        return fds, keep
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
