"""The page's script calls still out (fetch, XHR), each with when it was sent: a widget whose answer a call it made
after the user's words still fetches has not written that answer yet, however quiet its messages are. Not a
websocket nor an event source: a widget may keep one open for the whole conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from playwright.async_api import Page, Request

_CALLS = ("fetch", "xhr")
_POLL = 0.05


class Calls:
    def __init__(self, page: Page, now_ms: Callable[[], float]) -> None:
        self._now_ms = now_ms
        self._out: dict[Request, float] = {}
        page.on("request", self._sent)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _sent(self, request: Request) -> None:
        if request.resource_type in _CALLS:
            self._out[request] = self._now_ms()

    def _ended(self, request: Request) -> None:
        self._out.pop(request, None)

    def out_since(self, since_ms: float) -> list[Request]:
        """The calls sent at `since_ms` or later that have not ended."""
        return [request for request, sent in self._out.items() if sent >= since_ms]

    async def ended(self, calls: list[Request], deadline: float) -> bool:
        """Waits for `calls` to end, until `deadline` (the loop's time); whether they did. Only these: a widget that
        polls sends the next call as one ends."""
        loop = asyncio.get_running_loop()
        while any(call in self._out for call in calls):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL)
        return True
