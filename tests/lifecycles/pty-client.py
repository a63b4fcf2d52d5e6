#!/usr/bin/python3
"""tests/lifecycles/pty-client.py CMD ARGS...: runs CMD on a real terminal, as sshd runs a login.

The attached tmux and screen cases of the lab start their client here: the child gets a fresh
pseudo-terminal (80x24, TERM=xterm) as its controlling terminal and leads its own session on
it, as a login shell does; this process holds the master side and reads (and drops) what the
client draws, as a terminal emulator does, until the client exits (tmux detach-client, screen
-d) or the master is hung up. Nothing is ever typed: input comes from tmux send-keys and screen
-X stuff, as in the detached cases. Exits with the client's status.
"""

import fcntl
import os
import pty
import struct
import sys
import termios


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: pty-client.py CMD ARGS...")
    pid, master = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        os.environ["TERM"] = "xterm"
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        finally:
            os._exit(127)
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the client's side closed (it exited)
            break
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    main()
