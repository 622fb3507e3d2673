"""Nothing tamesu starts outlives it, however tamesu ends (even SIGKILL).

Every process tamesu starts (hooks, `command` assertions, MCP servers, and whatever those start in turn)
inherits `TAMESU_OWNERS`, a list of tokens, one per tamesu process above it. When the `tamesu` command
starts, it adds a fresh token and starts a watchdog: a small process in a session of its own that waits for
its stdin (a pipe only tamesu holds) to close. The pipe closes when tamesu exits, whichever way it exits, and
the watchdog then kills every process whose environment carries the token. Marking by environment, not by
registering pids, leaves no window in which a child is started but not yet known, and reaches grandchildren
in process groups of their own. A child that clears its environment escapes; nothing tamesu starts does.

Only the command line (`tamesu.cli.main.entry`) arms it: a library caller (pytest, a notebook) owns its own
processes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import secrets
import subprocess
import sys

OWNERS_VAR = "TAMESU_OWNERS"
_WAIT_ON_EXIT = 3.0
"""How long a normal exit waits for the watchdog to end the leftovers, so the shell sees them gone."""

# The watchdog: ignores the terminal's signals (Ctrl-C reaches the whole foreground group), reads stdin to its
# end, then SIGKILLs every process whose environment holds the token, one by one (never a process group: the
# group may be the user's shell pipeline). Three passes: a process may fork while a pass runs.
_WATCHDOG = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
token = sys.argv[1].encode()
while os.read(0, 4096):
    pass
me = os.getpid()
def marked(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    for item in env.split(b"\0"):
        if item.startswith(b"TAMESU_OWNERS="):
            return token in item[len("TAMESU_OWNERS="):].split(b":")
    return False
for _ in range(3):
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me and marked(name):
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
"""

_watchdog: subprocess.Popen[bytes] | None = None


def arm() -> None:
    """Mark this process's future children and start the watchdog (once; Linux only, elsewhere a no-op)."""
    global _watchdog
    if _watchdog is not None or not os.path.isdir("/proc/self"):
        return
    token = secrets.token_hex(8)
    inherited = os.environ.get(OWNERS_VAR, "")
    try:
        _watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, token], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        )
    except OSError:
        return  # no watchdog: children are still ended on every path tamesu itself controls
    # set after the watchdog starts, so it does not count itself among the marked
    os.environ[OWNERS_VAR] = f"{inherited}:{token}" if inherited else token
    atexit.register(disarm)


def disarm() -> None:
    """Close the pipe (what the watchdog waits for) and give it a moment to end what is left."""
    global _watchdog
    watchdog, _watchdog = _watchdog, None
    if watchdog is None:
        return
    with contextlib.suppress(OSError):
        if watchdog.stdin is not None:
            watchdog.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watchdog.wait(_WAIT_ON_EXIT)


def owner_env() -> dict[str, str]:
    """What a child started with an environment of its own (not a copy of ours) needs to be marked."""
    value = os.environ.get(OWNERS_VAR)
    return {OWNERS_VAR: value} if value else {}


async def reap(process: asyncio.subprocess.Process, timeout: float = 2.0) -> None:
    """Wait (briefly, even while being cancelled) for a killed child, so the loop does not close on it."""
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout)
