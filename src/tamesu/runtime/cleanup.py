"""Cleanup that a cancellation cannot cut short (bounded in time instead).

A run stopped by Ctrl-C or SIGTERM is cancelled, and every `finally` below it awaits its cleanup while more
cancellations may arrive (each level of `gather` passes one on). A server left half-stopped is worse than a
second of waiting: a gRPC server that outlives the event loop crashes the interpreter at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def finish(work: Awaitable[T], timeout: float) -> T | None:
    """Await `work` to its end or for `timeout` seconds, whatever is cancelled meanwhile; then re-raise the
    cancellation, if one came. Returns None when the time ran out (the work is then cancelled)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not task.done():
        left = deadline - loop.time()
        if left <= 0:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({task}, timeout=1)
            break
        try:
            await asyncio.wait({task}, timeout=left)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    if task.done() and not task.cancelled():
        return task.result()
    return None


_at_run_end: list[Callable[[], None]] = []


def on_run_end(callback: Callable[[], None]) -> None:
    """Call `callback` when the run ends, however it ends (`tamesu.runtime.signals.run_stoppable` calls
    `run_ended`): what a run started once (a worker pool) ends with it, not with the interpreter."""
    if callback not in _at_run_end:
        _at_run_end.append(callback)


def run_ended() -> None:
    callbacks = list(_at_run_end)
    _at_run_end.clear()
    for callback in callbacks:
        with contextlib.suppress(Exception):
            callback()
