"""At most so many requests to one model's server at once (`max_concurrent`), the others waiting their turn.

A local server answers one or a few requests at a time (Ollama, llama.cpp) and queues the rest: with twenty
conversations at once every request waited in that queue with its timeout running, so the run ended in model
timeouts and retries that made the queue longer. Waiting here instead, a request's timeout starts when it is
sent, and a turn's `turn_timeout` stands still (`queueing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

from tamesu.models._retries import call_name
from tamesu.models.base import ModelRequest
from tamesu.models.queueing import asking, queued
from tamesu.models.spec import ModelSpec


class Gate:
    """`limit` holders at once (no limit: None). A semaphore per event loop, since asyncio's belongs to one."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
            weakref.WeakKeyDictionary()

    def held(self, request: ModelRequest | None = None,
             spec: ModelSpec | None = None) -> contextlib.AbstractAsyncContextManager[None]:
        """A place for `request`; a deadline that passes while it waits or is answered keeps the name of a call of
        tamesu's own model (a model target's is the agent's)."""
        own = None if request is None or spec is None or request.purpose == "target" else call_name(request, spec)
        # no place to take (no `max_concurrent`, nearly every model): no semaphore, nor a generator's context
        # manager entered on every call
        return _Unlimited(asking(own)) if self.limit is None else self._limited(own)

    @contextlib.asynccontextmanager
    async def _limited(self, own: str | None) -> AsyncIterator[None]:
        with asking(own):
            async with self._held():
                yield

    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        assert self.limit is not None  # held() enters this only with a limit
        loop = asyncio.get_running_loop()
        semaphore = self._by_loop.get(loop)
        if semaphore is None:
            semaphore = self._by_loop[loop] = asyncio.Semaphore(self.limit)
        if semaphore.locked():  # every place taken: a wait of tamesu's, which no turn's clock counts
            async with queued():
                await semaphore.acquire()
        else:
            await semaphore.acquire()
        try:
            yield
        finally:
            semaphore.release()


class _Unlimited:
    """`Gate.held` without a limit: only the deadline's naming (`asking`) around the call."""

    def __init__(self, naming: asking) -> None:
        self._naming = naming

    async def __aenter__(self) -> None:
        self._naming.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self._naming.__exit__()
