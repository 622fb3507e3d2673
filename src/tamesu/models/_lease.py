"""SDK clients lent one call at a time, so no connection pool is shared by concurrent conversations.

httpcore scans every connection of a pool on each request and on each response's close (`has_expired` on
each one), so one SDK client shared by N conversations costs O(N) per call: at 100 at once that scan was a
fifth of tamesu's CPU. A lease hands each concurrent call a client of its own, most recently returned first
(its connection is warm), and makes a new one only when every client is busy: the number of clients is the
peak number of calls in flight, and each pool holds about one connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

Client = TypeVar("Client")


class ClientLease(Generic[Client]):
    def __init__(self, make: Callable[[], Client], close: Callable[[Client], Awaitable[object]]) -> None:
        self._make = make
        self._close = close
        self._idle: list[Client] = []
        self._every: list[Client] = []

    @property
    def size(self) -> int:
        """How many clients exist (the peak of concurrent calls so far)."""
        return len(self._every)

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        if self._idle:
            lent = self._idle.pop()
        else:
            lent = self._make()
            self._every.append(lent)
        try:
            yield lent
        finally:
            self._idle.append(lent)

    async def aclose(self) -> None:
        every, self._every, self._idle = self._every, [], []
        # closing is best effort: one stuck pool must not keep the others open
        await asyncio.gather(*(self._close(client) for client in every), return_exceptions=True)
