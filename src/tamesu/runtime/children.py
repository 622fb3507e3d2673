"""Nothing tamesu starts outlives it, however tamesu ends (even SIGKILL).

Every process tamesu starts (hooks, `command` assertions, MCP servers, and whatever those start in turn)
inherits `TAMESU_OWNERS`, a list of tokens, one per tamesu process above it. When the `tamesu` command
starts, it adds a fresh token and starts a watchdog: a small process in a session of its own that waits for
its stdin (a pipe only tamesu holds) to close. The pipe closes when tamesu exits, whichever way it exits, and
the watchdog then kills every process whose environment carries the token. Marking by environment, not by
registering pids, leaves no window in which a child is started but not yet known, and reaches grandchildren
in process groups of their own. A child that clears its environment (`env -i`, a daemon's own clean start)
carries no mark: the process groups tamesu makes for the shells of hooks and `command` checks are told to the
watchdog (a line each on its stdin, `own_group`), and it kills them too, whole.

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
# end (each line `N:START`, a process group tamesu made for a shell of its own, led by the process N that started
# at START, or `-N`: group N has ended and is not its to kill: the number may be a new process's by then), then
# SIGKILLs those groups and every process whose environment holds the token, one by one (never another group:
# it may be the user's shell pipeline). A group is killed only while no process N lives that started at another
# time: once every process of a group has ended, Linux may give its number to a new process, whose own group
# (a job of the user's shell, a daemon's session) is a stranger's; while one of the group lives, the number is
# taken. Passes until one kills nothing, three at most: a process may fork
# while a pass runs. It is a POSIX shell and one grep a pass (~4 ms of CPU): a Python interpreter spent ~12 ms
# starting and ~8 ms scanning, on every `tamesu run`. Each pass's grep also reads a line that must match from
# its stdin: a grep that does not list it (no -z for NUL-separated lines, whatever its exit code, or no grep at
# all) hands the scan to the same loop in Python (`_SCAN`).
_WATCHDOG = r"""
trap '' INT TERM HUP QUIT
ours() {
  { read -r stat < "/proc/$1/stat"; } 2>/dev/null || return 0
  want=$2
  set -- ${stat##*') '}
  shift 19
  [ "$1" = "$want" ]
}
groups=
while read -r line; do
  case $line in
    ''|*[!0-9:-]*) ;;
    -*) kept=; for group in $groups; do [ "${group%%:*}" = "${line#-}" ] || kept="$kept $group"; done
        groups=$kept ;;
    *:*) groups="$groups $line" ;;
  esac
done
for _ in 1 2 3; do
  for group in $groups; do
    ours "${group%%:*}" "${group#*:}" && kill -s KILL -- "-${group%%:*}" 2>/dev/null
  done
  found=$(printf 'TAMESU_OWNERS=%s\0' "$1" |
          grep -lzs -e "^TAMESU_OWNERS=\(.*:\)\{0,1\}$1\(:.*\)\{0,1\}\$" - /proc/[0-9]*/environ)
  case $found in
    *"(standard input)"*) ;;
    *) exec "$2" -I -S -c "$3" "$1" $groups ;;
  esac
  killed=
  for file in $found; do
    case $file in
      /proc/*/environ)
        pid=${file#/proc/}; pid=${pid%/environ}
        if [ "$pid" != "$$" ] && kill -9 "$pid" 2>/dev/null; then killed=1; fi ;;
    esac
  done
  [ -n "$killed" ] || break
done
"""

_SCAN = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
token = sys.argv[1].encode()
read = b""
while chunk := os.read(0, 4096):
    read += chunk
groups = []
for line in [*sys.argv[2:], *read.decode(errors="replace").split()]:
    number, _, start = line.partition(":")
    if line.startswith("-") and line[1:].isdigit():
        groups = [(g, s) for g, s in groups if g != int(line[1:])]
    elif number.isdigit() and int(number) > 1 and start:
        groups.append((int(number), start))
me = os.getpid()
def ours(group, start):
    try:
        with open(f"/proc/{group}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat.rsplit(b")", 1)[1].split()[19].decode() == start
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
    killed = False
    for group, start in groups:
        try:
            if ours(group, start):
                os.killpg(group, signal.SIGKILL)
        except (OSError, IndexError):
            pass
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me and marked(name):
            try:
                os.kill(int(name), signal.SIGKILL)
                killed = True
            except OSError:
                pass
    if not killed:
        break
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
        _watchdog = _start_watchdog(token)
    except OSError:
        return  # no watchdog: children are still ended on every path tamesu itself controls
    # set after the watchdog starts, so it does not count itself among the marked
    os.environ[OWNERS_VAR] = f"{inherited}:{token}" if inherited else token
    atexit.register(disarm)


def _start_watchdog(token: str) -> subprocess.Popen[bytes]:
    """The shell watchdog, or the Python one where there is no /bin/sh."""
    for command in (["/bin/sh", "-c", _WATCHDOG, "watchdog", token, sys.executable, _SCAN],
                    [sys.executable, "-I", "-S", "-c", _SCAN, token]):
        try:
            return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except OSError as exc:
            failed = exc  # no /bin/sh: the Python watchdog
    raise failed


def disarm() -> None:
    """Close the pipe (what the watchdog waits for) and give it a moment to end what is left."""
    global _watchdog
    watchdog, _watchdog = _watchdog, None
    if watchdog is None:
        return
    with contextlib.suppress(OSError):
        if watchdog.stdin is not None:
            watchdog.stdin.close()
    # a signal while it waits (a second Ctrl-C) cuts the wait short, quietly: the watchdog ends the rest alone
    with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt, SystemExit):
        watchdog.wait(_WAIT_ON_EXIT)


def own_group(pgid: int, owned: bool = True) -> None:
    """Tell the watchdog of a process group tamesu made (a hook's or a `command` check's shell, as its leader):
    it is killed whole when tamesu ends, with what a child that cleared its environment left in it. `owned=False`:
    the group was killed already, and its number is no longer tamesu's."""
    watchdog = _watchdog
    if watchdog is None or watchdog.stdin is None:
        return
    line = f"{pgid}:{_started(pgid)}" if owned else f"-{pgid}"
    with contextlib.suppress(OSError, ValueError):  # a watchdog gone: the marked are still ended on our paths
        watchdog.stdin.write(f"{line}\n".encode())
        watchdog.stdin.flush()


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot: the 22nd field of /proc's stat, after the name in
    parentheses), "0" when it has ended: with its number, what tells it from a later process given the same."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "0"


def owner_env() -> dict[str, str]:
    """What a child started with an environment of its own (not a copy of ours) needs to be marked."""
    value = os.environ.get(OWNERS_VAR)
    return {OWNERS_VAR: value} if value else {}


async def reap(process: asyncio.subprocess.Process, timeout: float = 2.0) -> None:
    """Wait (briefly, even while being cancelled) for a killed child, so the loop does not close on it."""
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout)
