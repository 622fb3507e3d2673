"""A turn's clock stands still while its model request waits for a place at `max_concurrent`.

The wait is tamesu's own queue (`_gate`), not the agent being slow: a model target's `turn_timeout` counted it,
so with `--parallel 4` and `max_concurrent: 1` the runs at the back of the queue failed "turn timed out", the
agent's fault, while the model answered each request well within time. A target runs its turn inside
`turn_clock(scope)`; a request that has to wait (`queued()`, around the wait) moves the scope's deadline on by
the time it waited, and the clock keeps the total for the target to say.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class TurnClock:
    scope: asyncio.Timeout
    """The turn's deadline."""
    waited: float = 0.0
    """Seconds the turn's requests waited for a place, in all."""


_CLOCK: ContextVar[TurnClock | None] = ContextVar("tamesu_turn_clock", default=None)


@contextlib.contextmanager
def turn_clock(scope: asyncio.Timeout) -> Iterator[TurnClock]:
    """Within it, a model request of this task that waits its turn does not spend `scope`'s time."""
    clock = TurnClock(scope)
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


@contextlib.asynccontextmanager
async def queued() -> AsyncIterator[None]:
    """Around a wait for a place: the turn's deadline, if there is one, moves on by the time waited."""
    clock = _CLOCK.get()
    if clock is None:
        yield
        return
    loop = asyncio.get_running_loop()
    started, deadline = loop.time(), clock.scope.when()
    clock.scope.reschedule(None)
    try:
        yield
    finally:
        waited = loop.time() - started
        clock.waited += waited
        if deadline is not None:
            clock.scope.reschedule(deadline + waited)
