"""One way to stop a run: Ctrl-C (SIGINT) and SIGTERM, whatever servers are up.

Inside `run_stoppable`, the first signal calls what registered with `gentle_stop` (the engine's Runner ends
the conversations in flight, starts no new run, lets every target, remote agent, listener and hook close in
order and writes run.json), or, when nothing registered, cancels the main task so that every `finally` below
it runs. A second signal cancels the main task, which cuts a slow cleanup short; the watchdog of
`tamesu.runtime.children` ends whatever processes are left. `Interrupted` carries the exit code the shell expects:
128 + the signal's number (130 after Ctrl-C, 143 after SIGTERM).

uvicorn servers never touch the process's signal handlers (`tamesu.net.serve` turns that off), so a listener or
remote agent started mid-run cannot swallow the signal or restore the handlers in the wrong order.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Each stops a run as Ctrl-C does. SIGHUP too: a terminal or ssh session that closes under a run would kill it
by default, leaving no `run.json` and no report of the tests that had finished."""
_received: list[int] = []
_gentle: list[Callable[[int], None]] = []
"""What the first signal does instead of cancelling everything (a Runner ends its runs in flight)."""


class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")
        self.said: str | None = None
        """What the run kept, once a command has said it (the line is not printed twice)."""

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def exit_before_the_run() -> None:
    """Before a run starts (loading suites, validating) and after it, Ctrl-C, SIGTERM and SIGHUP exit at once
    with 130, 143 and 129, quietly: nothing has been started that would need closing. `run_stoppable` takes over
    while a run runs."""

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for signum in _STOPPING:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(signum, leave)


def received() -> int | None:
    """The first stopping signal this process received during `run_stoppable`, if any."""
    return _received[0] if _received else None


def exit_code_if_interrupted() -> int | None:
    signum = received()
    return None if signum is None else 128 + signum


@contextlib.contextmanager
def gentle_stop(callback: Callable[[int], None]) -> Iterator[None]:
    """While inside, the first SIGINT/SIGTERM/SIGHUP calls `callback(signum)` instead of cancelling the main task;
    the caller then ends its work and raises `Interrupted` itself. A second signal still cancels."""
    _gentle.append(callback)
    try:
        yield
    finally:
        _gentle.remove(callback)


def run_stoppable(main: Coroutine[Any, Any, T], ends_run: bool = True) -> T:
    """`asyncio.run(main)`, where SIGINT, SIGTERM and SIGHUP cancel `main` and raise `Interrupted` once it has ended.
    `ends_run`: what the run started once (the speech workers) ends with `main`; the pytest plug-in's items, each a
    run, keep them for the next item (the interpreter's exit ends them)."""
    from tamesu.runtime.cleanup import run_ended

    _received.clear()
    try:
        return asyncio.run(_guarded(main))
    except (asyncio.CancelledError, KeyboardInterrupt):
        if _received:
            raise Interrupted(_received[0]) from None
        raise Interrupted(signal.SIGINT) from None
    finally:
        if ends_run:
            run_ended()  # what the run started once (a pool of workers) ends with it


async def _guarded(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(signum: int) -> None:
        _received.append(signum)
        if len(_received) == 1 and _gentle:
            for callback in list(_gentle):
                callback(signum)
        else:
            task.cancel()

    installed = []
    for signum in _STOPPING:
        try:
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or no signals here: Ctrl-C still raises KeyboardInterrupt
    try:
        result = await main
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        if installed:
            # the loop's removal puts back Python's own handlers (Ctrl-C a KeyboardInterrupt, which click turns into
            # "Aborted!" and exit 1; SIGTERM a death by the signal): a signal while the reports are written exits
            # 128 + the signal, as one before the run does
            exit_before_the_run()
    return result
