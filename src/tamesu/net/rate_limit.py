"""An agent (or the gateway in front of it) that answers HTTP 429 to tests run side by side: the request is sent
again after the wait it asked for, a bounded number of times.

The rest target applies the rule around its own client; the a2a and mcp targets read through SDKs that take an
httpx client, so there the rule is an httpx transport beneath the SDK (`rate_limited_transport`): the SDK sees
only the answer after the waits, and the last 429 when the limit never lifted.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tamesu.net.retry_after import retry_after_from_headers

WAIT_CAP_S = 30.0
"""The longest wait a Retry-After is honoured for (a gateway asking for an hour would hold the run)."""

OnRateLimited = Callable[[str, int, float | None, float], None]
"""Told before each wait: the request's URL, the attempt refused (1, 2...), the Retry-After asked (or None), the
wait in seconds."""


def said_as_events(event: Callable[..., object], mask: Callable[[str], str]) -> OnRateLimited:
    """What every route tells of a wait: a `rate_limited` event (`event`, a session's) with the URL as `mask`
    shows it (its secrets masked)."""
    def said(url: str, attempt: int, asked: float | None, wait: float) -> None:
        event("rate_limited", url=mask(url), attempt=attempt, retry_after_s=asked, wait_s=round(wait, 3))
    return said


def still_limited(times: int, runs_going: int) -> str:
    """What a line says of a 429 that outlasted the sends again, and what to do: fewer runs at once only when runs
    went side by side when it came (`runs_going`, this one included: with one, no other run of tamesu's was asking
    the agent, whatever --parallel allowed)."""
    if runs_going > 1:
        advice = f"lower --parallel ({runs_going} runs were going when it came) or raise its limit"
    else:
        advice = "raise its limit or rate_limit_retries (one run at a time: no other of tamesu's was asking it)"
    return f"the agent answered HTTP 429 (too many requests) {times} times: {advice}"


def rate_limit_wait(asked: float | None, backoff: float, retried: int) -> float:
    """What the agent asked for, else a doubling `backoff`; never more than `WAIT_CAP_S`. A Retry-After of no time
    (`0`, a date already past) asks for no wait in particular: sent again at once, each request was refused in
    the same millisecond, a burst at a limit that had just refused."""
    return min(asked if asked else backoff * 2**retried, WAIT_CAP_S)


@dataclass(frozen=True)
class RateLimit:
    """How a route meets a 429: sent again at most `retries` times, waiting as asked or a doubling `backoff`."""

    retries: int
    backoff: float
    on_limited: OnRateLimited


def rate_limited_transport(module: ModuleType, inner: object, limit: RateLimit | None) -> Any:
    """`inner` (an `AsyncBaseTransport` of `module`: httpx or httpx2) sending a request the agent answered 429
    again, as `limit` says; a request whose body cannot be read twice (a stream) is never sent again."""
    if limit is None or limit.retries == 0:
        return inner
    transport: type[Any] = _transport_class(module)
    return transport(inner, limit)


@functools.cache
def _transport_class(module: Any) -> type[Any]:
    class RateLimitedTransport(module.AsyncBaseTransport):  # type: ignore[misc]  # httpx's or httpx2's class, chosen at run time
        def __init__(self, inner: Any, limit: RateLimit) -> None:
            self._inner, self._limit = inner, limit
            self._gave_up = False
            """A request was still refused after every retry: the others that follow it on this connection (an
            SDK's own, after the failure) are not waited for again."""

        async def handle_async_request(self, request: Any) -> object:
            limit = self._limit
            for retried in range(limit.retries + 1):
                response = await self._inner.handle_async_request(request)
                if response.status_code == 429 and retried == limit.retries:
                    self._gave_up = True
                if response.status_code != 429 or retried == limit.retries or self._gave_up \
                        or not isinstance(request.stream, module.ByteStream):
                    return response
                asked = retry_after_from_headers(response.headers)
                await response.aclose()
                wait = rate_limit_wait(asked, limit.backoff, retried)
                limit.on_limited(str(request.url), retried + 1, asked, wait)
                await asyncio.sleep(wait)
            raise AssertionError("unreachable: the last attempt's answer is returned")

        async def aclose(self) -> None:
            await self._inner.aclose()

    return RateLimitedTransport
