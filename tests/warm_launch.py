"""`python -I -S warm_launch.py SOCKET SCRIPT ARGS`: runs `python SCRIPT ARGS` as a fork of the warm zygote
listening on SOCKET (tests/forked.py, `script_command`), standing in for it as its caller sees it;
`SOCKET -m tamesu ARGS`: `python -m tamesu ARGS` as a fork of the same zygote (`tamesu_command`).

Only the standard library, no site: it starts in a few milliseconds. Its stdin, stdout and stderr go to the
fork, and it keeps none of them open itself, so the caller sees the fork's end of file; SIGTERM, SIGINT and
SIGHUP are passed on (one that comes before the fork's pid is known, once it is); it exits with the fork's
code, or by the fork's signal. When it is killed (SIGKILL, which nothing can pass on) its connection closes and
the zygote kills the fork.
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

PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
AGAIN_S = 2.0
AGAIN_TIMES = 3
"""A signal passed on is passed again within AGAIN_S while the fork runs, at most AGAIN_TIMES times: now and
then (1 in some 300 SIGTERMs in a tight loop, never with a plain interpreter) a fork of the zygote takes a
signal its Python handler then never runs, and a caller that waits for it to stop would wait for good."""


def main() -> None:
    path, script, *args = sys.argv[1:]
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    request = {"script": script, "args": args, "cwd": os.getcwd(), "env": dict(os.environ), "nice": nice}
    if script == "-m":  # `-m tamesu ARGS`, to the tamesu zygote (`tamesu_command`)
        request = {"args": args[1:], "cwd": os.getcwd(), "env": dict(os.environ), "nice": nice}
    body = json.dumps(request).encode()
    fork = 0
    signals: list[int] = []

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        signals.append(signum)
        if fork:
            with contextlib.suppress(ProcessLookupError):  # it has just ended
                os.kill(fork, signum)

    for signum in PASSED_ON:  # before the fork exists: one that comes meanwhile is passed on once it does
        signal.signal(signum, pass_on)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    socket.send_fds(connection, [struct.pack("!I", len(body))], [0, 1, 2])
    connection.sendall(body)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    replies = _Lines(connection)
    fork = int(replies.next(None) or "0")
    for signum in signals:
        with contextlib.suppress(ProcessLookupError):
            os.kill(fork, signum)
    again = 0
    # woken every AGAIN_S, signal or not: Python resumes a recv a signal interrupted as it was, so when the wait
    # had no timeout (no signal yet as it began), a signal the fork then lost was never passed again and its
    # caller waited for good (a test's launcher, 30 s, in a fresh clone's run)
    while (line := replies.next(AGAIN_S)) is None:
        if signals and again < AGAIN_TIMES:
            again += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(fork, signals[-1])
    code = int(line) if line.strip() else 1
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


class _Lines:
    """Lines from the zygote, each within a timeout (a file from `makefile` cannot be read after one)."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.received = b""

    def next(self, timeout: float | None) -> str | None:
        """The next line; what is left at the end; None when `timeout` passes first."""
        self.connection.settimeout(timeout)
        while b"\n" not in self.received:
            try:
                chunk = self.connection.recv(64)
            except TimeoutError:
                return None
            if not chunk:
                rest, self.received = self.received, b""
                return rest.decode()
            self.received += chunk
        line, _, self.received = self.received.partition(b"\n")
        return line.decode()


if __name__ == "__main__":
    main()
