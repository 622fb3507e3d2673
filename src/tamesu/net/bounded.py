"""`max_response_bytes` under an SDK: an httpx transport that stops reading an answer at the limit.

The a2a and mcp targets and the model providers read through SDKs that take an httpx client (a2a-sdk:
httpx; the MCP, openai and anthropic SDKs: httpx2, the same API): the SDK reads every body whole, so the bound
sits in the transport beneath it (here, not under targets: the models package uses it too). A provider's
client is shared by the model target, judges and simulators, so its transport takes the limit of the call
being made (`bounded_reading`, which the model target sets around its own calls). An
answer that says (Content-Length) or turns out to be longer than the limit is refused, never half-parsed: an
SDK cannot read half a JSON document, so the call fails with `ResponseTooLarge` (the module's DecodingError,
which the SDK passes on as an HTTP error) and the refusal is recorded as a `response_truncated` event, the
name the rest target and `bounds` use.

Compressed answers would be decoded above the transport, where a 60 kB gzip body can become 20 MB, so the
transport asks for none (`Accept-Encoding: identity`); an answer compressed anyway is counted as it came.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from types import ModuleType
from typing import Any

Record = Callable[[str, int, int | None], None]
"""Told of a refused answer: its note, the bytes read, the length it declared (or None)."""

_READING: ContextVar[tuple[int, Record | None] | None] = ContextVar("tamesu_bounded_reading", default=None)
"""The limit of the calls made in this context, for a transport shared by callers with different limits (a
model provider's client serves the model target, the judge and the simulator alike)."""


@contextlib.contextmanager
def bounded_reading(limit: int, record: Record | None = None) -> Iterator[None]:
    """Calls made inside read at most `limit` bytes of each answer through a transport made without one."""
    token = _READING.set((limit, record))
    try:
        yield
    finally:
        _READING.reset(token)


def too_large_note(limit: int, read: int, declared: int | None) -> str:
    total = f" of {declared:,}" if declared is not None else " (the agent sent more)"
    return f"the answer was larger than max_response_bytes ({limit:,}): read {read:,} bytes{total}, then refused"


def is_too_large(exc: BaseException) -> bool:
    """Whether `exc` (or what it was raised from) is a refusal of this module."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 10:
        if getattr(current, "too_large", False):
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


def bounded_transport(module: ModuleType, inner: object, limit: int | None, record: Record | None = None) -> Any:
    """`inner` (an `AsyncBaseTransport` of `module`: httpx or httpx2) reading at most `limit` bytes of each
    answer's body; `record` is told of each refusal. With `limit` None, the limit is `bounded_reading`'s
    where the call is made, and a call made outside one is not bounded."""
    return _classes(module)[1](inner, limit, record)


def too_large_error(module: ModuleType) -> type[Exception]:
    """The exception this module raises for `module` (httpx or httpx2)."""
    error: type[Exception] = _classes(module)[0]
    return error


@functools.cache
def _classes(module: Any) -> tuple[Any, Any]:
    class ResponseTooLarge(module.DecodingError):  # type: ignore[misc]  # httpx's or httpx2's class, chosen at run time
        too_large = True

    class Capped(module.AsyncByteStream):  # type: ignore[misc]  # httpx's or httpx2's class, chosen at run time
        def __init__(self, inner: Any, limit: int, declared: int | None, request: Any, record: Record | None):
            self._inner, self._limit, self._declared = inner, limit, declared
            self._request, self._record = request, record
            self.read = 0

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                self.read += len(chunk)
                if self.read > self._limit:
                    raise self._refuse(self.read)
                yield chunk

        def _refuse(self, read: int) -> Exception:
            note = too_large_note(self._limit, read, self._declared)
            if self._record is not None:
                self._record(note, read, self._declared)
            return ResponseTooLarge(note, request=self._request)

        async def aclose(self) -> None:
            await self._inner.aclose()

    class BoundedTransport(module.AsyncBaseTransport):  # type: ignore[misc]  # httpx's or httpx2's class, chosen at run time
        def __init__(self, inner: Any, limit: int | None, record: Record | None) -> None:
            self._inner, self._limit, self._record = inner, limit, record

        async def handle_async_request(self, request: Any) -> object:
            limit, record = (self._limit, self._record) if self._limit is not None else _READING.get() or (None, None)
            if limit is None:
                return await self._inner.handle_async_request(request)
            request.headers["accept-encoding"] = "identity"
            response = await self._inner.handle_async_request(request)
            length = response.headers.get("content-length", "")
            declared = int(length) if length.isdigit() else None
            stream = Capped(response.stream, limit, declared, request, record)
            if declared is not None and declared > limit:
                await response.stream.aclose()  # not a byte of it is read: the connection is dropped
                raise stream._refuse(0)
            return module.Response(response.status_code, headers=response.headers, stream=stream,
                                   extensions=response.extensions)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return ResponseTooLarge, BoundedTransport
