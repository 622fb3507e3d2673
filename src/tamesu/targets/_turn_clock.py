"""A model target's turn deadline, standing still while a model request waits at `max_concurrent`.

The wait is tamesu's queue, not the agent (`tamesu.models.queueing`); the turn says how long it waited (a
`model_queued` event), since its latency, measured from the user's words to the answer, still holds the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from tamesu.conversation import Session
from tamesu.models.queueing import Clock, clock


@contextlib.asynccontextmanager
async def turn_deadline(session: Session, limit: float) -> AsyncIterator[Clock]:
    """`asyncio.timeout(limit)` whose deadline moves on by every wait for a place at the model; the clock's `cut`
    names a wait for the model's retry that the deadline passed in (then the model, not its answer, took the time)."""
    async with asyncio.timeout(limit) as scope, clock(scope) as waits:
        try:
            yield waits
        finally:
            if waits.waited >= 0.001:
                session.event("model_queued", waited_s=round(waits.waited, 3),
                              note="the turn's model requests waited for a place at max_concurrent: not counted "
                                   "in turn_timeout, but in the turn's latency")
