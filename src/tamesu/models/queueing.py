"""Deadlines that stand still while a model request waits for a place at `max_concurrent`.

The wait is tamesu's own queue (`_gate`), not the agent being slow: a model target's `turn_timeout` and a test's
`timeout` counted it, so with `--parallel 6` and `max_concurrent: 1` the runs at the back of the queue failed
"turn timed out" (or "the test took longer than its timeout"), the agent's fault, while the model answered each
request well within time. A deadline is put under `clock(scope)`; a request that has to wait (`queued()`, around
the wait) moves the deadline of every clock it runs under on by the time it waited, and each clock keeps the
total for its owner to say.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Clock:
    scope: asyncio.Timeout
    """The deadline."""
    waited: float = 0.0
    """Seconds the requests under it waited for a place, in all."""
    cut: list[str] = field(default_factory=list)
    """tamesu's own model calls (the simulator's...) under way when the deadline passed: then it was not the agent
    that took the time."""


_CLOCKS: ContextVar[tuple[Clock, ...]] = ContextVar("tamesu_deadline_clocks", default=())


@contextlib.asynccontextmanager
async def clock(scope: asyncio.Timeout) -> AsyncIterator[Clock]:
    """Within it, a model request of this task that waits its turn does not spend `scope`'s time (async, to go in
    the same `async with` as the scope)."""
    own = Clock(scope)
    token = _CLOCKS.set((*_CLOCKS.get(), own))
    try:
        yield own
    finally:
        _CLOCKS.reset(token)


@contextlib.asynccontextmanager
async def queued() -> AsyncIterator[None]:
    """Around a wait for a place: each deadline it runs under moves on by the time waited."""
    clocks = _CLOCKS.get()
    if not clocks:
        yield
        return
    loop = asyncio.get_running_loop()
    started = loop.time()
    # a deadline that has just passed (its cancellation on its way) cannot be moved any more
    deadlines = [(each, each.scope.when()) for each in clocks if not each.scope.expired()]
    for each, _ in deadlines:
        each.scope.reschedule(None)
    try:
        yield
    finally:
        waited = loop.time() - started
        for each, deadline in deadlines:
            each.waited += waited
            # a deadline someone else moved meanwhile (Ctrl-C's stop moves it to now) is theirs: left as it is
            if deadline is not None and not each.scope.expired() and each.scope.when() is None:
                each.scope.reschedule(deadline + waited)


class asking:  # a context manager named as the function it was: a class, as one is entered every model call
    """Around a call of tamesu's own model (`what` names it; None: a model target's, the agent itself): a deadline
    that passes while it is under way keeps its name."""

    def __init__(self, what: str | None) -> None:
        self._what = what
        self._clocks = _CLOCKS.get() if what else ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        for each in self._clocks:
            if each.scope.expired() and self._what not in each.cut:
                each.cut.append(str(self._what))
