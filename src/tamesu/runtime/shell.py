"""A shell command of the user's (a hook, a `command` check) run to its end, in a process group of its own.

Its output goes to an unnamed temporary file, not a pipe: a command that leaves a process behind it (`./agent &`,
as hooks start agents) is done when its shell exits. Through a pipe, tamesu waited for every process holding the
pipe's end, so `sleep 600 & echo started` ran into its timeout, and the pipe's transport, still open when the
run ended, printed "Event loop is closed" at exit.

What the command leaves running in its group ends with tamesu (`children.own_group`: even a process started with
`env -i`, which no environment mark finds); with `keep=False` (a `command` check) it ends with the command."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from dataclasses import dataclass
from typing import IO

from tamesu.runtime.children import own_group, reap

MAX_OUTPUT_BYTES = 1_000_000
"""The most of a command's output kept (its end): a check reads its last lines, a hook's failure its last three."""


@dataclass
class ShellOutcome:
    code: int | None
    """The exit code; None when the command was killed for running past its timeout."""
    output: str
    """Its stdout and stderr together (the last MAX_OUTPUT_BYTES), as written by then."""


async def run_shell(command: str, cwd: str | os.PathLike[str], env: dict[str, str], timeout: float, *,
                    keep: bool = True) -> ShellOutcome:
    """Run `command` with `sh`; past `timeout`, or when cancelled, its whole process group is killed, and when it
    ends unless `keep` (a hook's `./agent &` lives on until tamesu ends). A command holding a NUL byte (no
    command line can) raises ValueError saying so."""
    if "\0" in command:
        shown = command.replace("\0", "\\0")
        raise ValueError(f"`{shown}` holds a NUL byte, which no command line can")
    with tempfile.TemporaryFile() as sink:
        process = await asyncio.create_subprocess_shell(
            command, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=sink,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        own_group(process.pid)
        code: int | None = None
        ended = False
        try:
            code = await asyncio.wait_for(process.wait(), timeout)
            ended = True
        except TimeoutError:
            kill_group(process.pid)
            await process.wait()
        finally:
            # cancelled (Ctrl-C, SIGTERM, the test's timeout): the command and what it started end now
            if process.returncode is None:
                kill_group(process.pid)
                await reap(process)
            if not (keep and ended):
                kill_group(process.pid)  # what it left in its group (`env -i daemon &` too) ends with it
                own_group(process.pid, owned=False)
            elif not _lives(process.pid):
                # it left nothing running: its number is free for any new process, never the watchdog's to kill
                own_group(process.pid, owned=False)
        return ShellOutcome(code, _tail(sink))


def _lives(pgid: int) -> bool:
    """Whether any process is left in group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _tail(sink: IO[bytes]) -> str:
    size = sink.seek(0, os.SEEK_END)
    sink.seek(max(0, size - MAX_OUTPUT_BYTES))
    return sink.read().decode(errors="replace")
