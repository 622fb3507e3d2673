"""`python -I -S warm_launch.py SOCKET SCRIPT ARGS`: runs `python SCRIPT ARGS` as a fork of the warm script
zygote listening on SOCKET (tests/forked.py, `script_command`), standing in for it as its caller sees it;
`SOCKET -m tamesu ARGS`: `python -m tamesu ARGS` as a fork of the tamesu zygote (`tamesu_command`).

Only the standard library, no site: it starts in a few milliseconds. Its stdin, stdout and stderr go to the
fork, and it keeps none of them open itself, so the caller sees the fork's end of file; SIGTERM, SIGINT and
SIGHUP are passed on; it exits with the fork's code, or by the fork's signal. When it is killed (SIGKILL, which
nothing can pass on) its connection closes and the zygote kills the fork.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
from types import FrameType


def main() -> None:
    path, script, *args = sys.argv[1:]
    request = {"script": script, "args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
    if script == "-m":  # `-m tamesu ARGS`, to the tamesu zygote (`tamesu_command`)
        request = {"args": args[1:], "cwd": os.getcwd(), "env": dict(os.environ)}
    body = json.dumps(request).encode()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    socket.send_fds(connection, [struct.pack("!I", len(body))], [0, 1, 2])
    connection.sendall(body)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    replies = connection.makefile("r")
    pid = int(replies.readline())

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):  # it has just ended
            os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    line = replies.readline()
    code = int(line) if line.strip() else 1
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


if __name__ == "__main__":
    main()
