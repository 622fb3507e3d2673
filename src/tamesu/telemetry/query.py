"""`traces.query`: each trace of a run fetched from the tracing backend the agent exports to (Jaeger or Tempo).

A backend stores a trace a little after the agent exported it: a trace it does not have yet (404, or an
answer without spans) is asked for again, backing off, until `patience` has passed (at most `_ATTEMPTS`
requests); then it is `not_found`, which the run says. A backend that cannot be reached, answers an error
or something that is no trace is a `QueryError` (exit 3). Every request has the query's `timeout`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx

from tamesu.errors import InfraError
from tamesu.matching import one_line
from tamesu.net.clients import async_client, os_reason
from tamesu.net.urls import shown_url
from tamesu.telemetry.backends import jaeger_spans, tempo_spans
from tamesu.telemetry.spans import BadExport, Span

_ATTEMPTS = 30
_FIRST_PAUSE = 0.1
_LONGEST_PAUSE = 1.0
_AT_ONCE = 8
"""Traces of one run fetched at the same time."""
MAX_ANSWER = 64 * 1024 * 1024
_NO_TRACE = "0" * 31 + "1"
"""The trace asked for to see that the backend answers at all: no agent made it."""


class QueryError(InfraError):
    """The tracing backend cannot be reached or does not answer as Jaeger or Tempo does."""


@dataclass
class Fetched:
    spans: list[Span] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    """Trace ids the backend still did not have when patience ran out."""


class TraceQuery:
    def __init__(self, kind: str, base_url: str, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.base_url = base_url
        self.timeout = timeout
        self.headers = {"accept": "application/json", **(headers or {})}
        """`traces.query.headers`, their templates filled in: a token, a tenant."""

    @property
    def name(self) -> str:
        # a `user:password@` in the URL is sent as the backend's basic auth, never said: this name is in every
        # line, event and warning about the backend
        return f"{self.kind} at {shown_url(self.base_url)}"

    def url(self, trace_id: str) -> str:
        return f"{self.base_url}/api/traces/{trace_id}"

    async def check(self) -> None:
        """That the backend answers (any HTTP answer, a 404 for a trace no one made included)."""
        async with async_client(self.timeout) as client:
            await self._get(client, _NO_TRACE)

    async def fetch_all(self, trace_ids: Iterable[str], patience: float) -> Fetched:
        fetched = Fetched()
        gate = asyncio.Semaphore(_AT_ONCE)
        deadline = time.monotonic() + patience

        async def one(client: httpx.AsyncClient, trace_id: str) -> None:
            async with gate:
                spans = await self._fetch(client, trace_id, deadline)
            if spans is None:
                fetched.not_found.append(trace_id)
            else:
                fetched.spans.extend(spans)

        async with async_client(self.timeout) as client:
            await asyncio.gather(*(one(client, trace_id) for trace_id in dict.fromkeys(trace_ids)))
        return fetched

    async def _fetch(self, client: httpx.AsyncClient, trace_id: str, deadline: float) -> list[Span] | None:
        pause = _FIRST_PAUSE
        for _ in range(_ATTEMPTS):
            spans = await self._get(client, trace_id)
            if spans:
                return spans
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, _LONGEST_PAUSE)
        return None

    async def _get(self, client: httpx.AsyncClient, trace_id: str) -> list[Span] | None:
        """The trace's spans; None while the backend does not have it."""
        url = self.url(trace_id)
        try:
            response = await client.get(url, headers=self.headers)
        except httpx.TimeoutException:
            raise QueryError(f"traces.query: {self.name} did not answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise QueryError(f"traces.query: {self.name} cannot be reached: {os_reason(exc)}") from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            hint = " (check traces.query's credentials: its headers, or a user:password@ in its URL)" \
                if response.status_code in (401, 403) else ""
            raise QueryError(f"traces.query: {self.name} answered {response.status_code} for {shown_url(url)}: "
                             f"{one_line(response.text, 200)}{hint}")
        if len(response.content) > MAX_ANSWER:
            raise QueryError(f"traces.query: {self.name} answered more than {MAX_ANSWER // 2**20} MiB for "
                             f"{shown_url(url)}")
        try:
            document = json.loads(response.content)
            return (jaeger_spans if self.kind == "jaeger" else tempo_spans)(document)
        except (ValueError, BadExport) as exc:
            raise QueryError(f"traces.query: {self.name} answered what is no {self.kind} trace for {shown_url(url)}: "
                             f"{one_line(str(exc), 200)}") from None
