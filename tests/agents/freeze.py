"""A test agent holding its client still (SIGSTOP) at a moment when the client's event loop is idle: what the
agent sends meanwhile waits in the client's socket, and the client reads it all at once when let go, late.

That is a client starved of CPU, made on purpose and to the millisecond instead of by loading the machine. The
client is found by its end of the agent's own TCP connection (both on this machine, 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

EPOLL_WAITS = {232, 281, 441}
"""x86-64's epoll_wait, epoll_pwait and epoll_pwait2: an asyncio loop waiting for work."""


def _hex_port(port: int) -> str:
    return f"0100007F:{port:04X}"


def _socket_line(client_port: int, server_port: int) -> list[str] | None:
    """The client's end of the connection in /proc/net/tcp (local 127.0.0.1:client_port)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == _hex_port(client_port) and fields[2] == _hex_port(server_port):
            return fields
    return None


def unread_bytes(client_port: int, server_port: int) -> int:
    """What the client's kernel holds for it that it has not read yet (-1: the connection is gone)."""
    fields = _socket_line(client_port, server_port)
    return -1 if fields is None else int(fields[4].split(":")[1], 16)


def owner(client_port: int, server_port: int) -> int | None:
    """The pid of the process that holds the client's end of the connection."""
    fields = _socket_line(client_port, server_port)
    if fields is None:
        return None
    target = f"socket:[{fields[9]}]"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                return int(entry.name)
        except OSError:  # another user's process, or one that ended while we looked
            continue
    return None


def idle_loop(pid: int) -> bool:
    """Whether the (stopped) process's main thread is in its event loop's wait, with nothing ready to run (a
    wait with a timeout of 0 means callbacks are queued)."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 4 and fields[0].isdigit() and int(fields[0]) in EPOLL_WAITS and int(fields[4], 16) != 0


def stop_when_idle(pid: int, client_port: int, server_port: int) -> bool:
    """SIGSTOP the client once it has read all that came and its loop waits with nothing to do; False (and the
    client running) when that moment was not caught on this try."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "Tt":
        if time.monotonic() > deadline:
            break
        time.sleep(0.001)
    if idle_loop(pid) and unread_bytes(client_port, server_port) == 0:
        return True
    os.kill(pid, signal.SIGCONT)
    return False


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)
