"""When a failed model call is tried again, how long the client waits first, and what that wait is called.

The wait is the model's time, not the agent's: a test's `timeout` or a model target's `turn_timeout` that runs out
while the client sleeps on a server's `Retry-After` keeps the wait's name (which model, how many attempts made, the
last failure), so the run says the model was being waited on instead of blaming the agent (`queueing.asking`).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

from tamesu.models.base import ModelError, ModelRequest
from tamesu.models.queueing import asking
from tamesu.models.spec import ModelSpec

BACKOFF_BASE = 0.5
"""Seconds before the first retry; doubled each time (0.5, 1, 2, 4, 8...)."""
BACKOFF_CAP, RETRY_AFTER_CAP = 8.0, 30.0
"""The longest a server's Retry-After is honoured; a longer wait is not worth holding a test run for."""
RETRY_FLOOR = 0.25
"""The shortest wait before retry N+1 is this times 2**N, whatever Retry-After says: `Retry-After: 0` from a
server that is still overloaded must not become a burst of calls (four in a few milliseconds)."""
RETRY_SPREAD = 0.25
"""How far past a server's Retry-After retries are spread (a fraction of the wait)."""

Sleep = Callable[[float], Awaitable[Any]]


def delay(attempt: int, error: ModelError) -> float:
    """Seconds to wait after attempt `attempt` (0-based) failed with `error`."""
    # jittered, so conversations refused together (one 429 to a thousand) do not all come back together: a
    # server's Retry-After is the least wait, spread over a quarter more; else half the backoff, plus up to
    # as much again at random
    if error.retry_after is not None:
        floor = min(RETRY_FLOOR * 2.0**attempt, BACKOFF_CAP)
        least = min(max(error.retry_after, floor), RETRY_AFTER_CAP)
        return least + random.uniform(0, max(least, floor) * RETRY_SPREAD)
    ceiling = min(BACKOFF_BASE * 2.0**attempt, BACKOFF_CAP)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def call_name(request: ModelRequest, spec: ModelSpec) -> str:
    """How a deadline that passes during a call names it: `the simulator's call to openai:gpt-4o`."""
    return f"the {request.purpose}'s call to {spec.provider}:{spec.model}"


def last_failure(error: ModelError, label: str) -> str:
    """The failure a retry follows, short: `HTTP 429`, else the error's words without the model's name."""
    if error.status is not None:
        return f"HTTP {error.status}"
    said = str(error).removeprefix(f"{label}: ")
    return said if len(said) <= 80 else f"{said[:79]}…"


async def wait_to_retry(sleep: Sleep, seconds: float, request: ModelRequest, spec: ModelSpec, error: ModelError,
                        made: int, tries: int, label: str) -> None:
    """Sleep before attempt `made + 1`; a deadline that passes meanwhile is the model's, named with the wait."""
    what = (f"{call_name(request, spec)}, waiting {seconds:.1f}s to retry after {last_failure(error, label)} "
            f"({made} of {tries} attempts made)")
    with asking(what):
        await sleep(seconds)
