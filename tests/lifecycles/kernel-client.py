#!/usr/bin/python3
"""tests/lifecycles/kernel-client.py READY JOB.PY ARGS...: the Jupyter case's launcher.

A real Jupyter kernel (ipykernel), started by jupyter_client's KernelManager as a notebook
server starts one (in a session of its own, JPY_PARENT_PID set), is made to run job.py inside
itself (--in-kernel): the kernel is the job's main, its workers are forked from it. READY gets
the kernel's pid once the job's pidfile is written. Then the manager stays and polls the kernel
every half second as a server does (which reaps it when it dies), until it is killed.
"""

import os
import sys
import time

from jupyter_client.manager import KernelManager


def main():
    ready, jobpy, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    code = ("import sys\nsys.path.insert(0, %r)\nimport job\n_lab_job = job.main(%r)\n"
            % (os.path.dirname(jobpy), args + ["--in-kernel"]))
    reply = kc.execute_interactive(code, timeout=60)
    if reply["content"]["status"] != "ok":
        sys.exit("kernel-client: the job failed in the kernel: %r" % reply["content"])
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % km.provisioner.process.pid)
    os.rename(tmp, ready)
    while True:
        km.is_alive()
        time.sleep(0.5)


if __name__ == "__main__":
    main()
