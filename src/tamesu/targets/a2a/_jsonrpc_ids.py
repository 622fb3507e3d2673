"""A JSON-RPC reply whose `id` is not the request's is a protocol error (the SDK does not check it).

The check sits under the SDK, in the httpx transport of the session's client: a JSON reply is read and
compared whole, an event stream is compared event by event as it passes. Both A2A versions (1.0 and 0.3) use
the same JSON-RPC envelope, so one check serves both. The same place says an answer that is no A2A answer at
all (`_not_a2a`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx

from tamesu.targets.a2a._not_a2a import NotA2A, not_a2a, sends_a_message

_MISSING = object()


class JsonRpcIdMismatch(httpx.DecodingError):
    """Raised from the transport; `agent_error` reports it by its own words."""


def _request_id(request: httpx.Request) -> object:
    if request.method != "POST" or "json" not in request.headers.get("content-type", ""):
        return _MISSING
    try:
        payload = json.loads(request.content)
    except (ValueError, httpx.RequestNotRead):
        return _MISSING
    if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0" or "id" not in payload:
        return _MISSING
    return payload["id"]


def _check(expected: object, document: object, request: httpx.Request) -> None:
    if not isinstance(document, dict) or "jsonrpc" not in document:
        return
    got = document.get("id", _MISSING)
    # a parse error may answer id null: the server could not read the request's id
    if got is None and isinstance(document.get("error"), dict):
        return
    if got is _MISSING or got != expected or type(got) is not type(expected):
        shown = "no id" if got is _MISSING else f"id {json.dumps(got)[:60]}"
        raise JsonRpcIdMismatch(f"protocol error: the JSON-RPC reply has {shown}, not the request's id "
                                f"{json.dumps(expected)[:60]}", request=request)


class _CheckedEvents(httpx.AsyncByteStream):
    """Passes an event stream through unchanged, checking the id of each `data:` line that is JSON-RPC."""

    def __init__(self, inner: httpx.AsyncByteStream, expected: object, request: httpx.Request) -> None:
        self._inner = inner
        self._expected = expected
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        async for chunk in self._inner:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._line(line)
            yield chunk
        self._line(pending)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        try:
            document = json.loads(line[5:])
        except (ValueError, RecursionError):
            return
        _check(self._expected, document, self._request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class IdCheckingTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        expected = _request_id(request)
        response = await self._inner.handle_async_request(request)
        jsonrpc = expected is not _MISSING
        # what a server that is no A2A endpoint answered (a web page, another API's JSON) is said as such
        shaped = (jsonrpc or sends_a_message(request)) and 200 <= response.status_code < 300
        if not jsonrpc and not shaped:
            return response
        content_type = response.headers.get("content-type", "").lower()
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        if content_type.startswith("text/event-stream"):
            if not jsonrpc:
                return response
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=_CheckedEvents(stream, expected, request), extensions=response.extensions)
        if "json" not in content_type and not shaped:
            return response
        try:
            body = b"".join([part async for part in stream])
        finally:
            await stream.aclose()
        if shaped and (said := not_a2a(response.status_code, content_type, body, jsonrpc)) is not None:
            raise NotA2A(said, request)
        try:
            document = json.loads(body) if jsonrpc and "json" in content_type else None
        except ValueError:  # not JSON: the SDK says so
            document = None
        except RecursionError:  # the SDK's own reading would end the run's test as a bug of tamesu's
            raise httpx.DecodingError("the answer is JSON nested deeper than Python reads", request=request) from None
        if jsonrpc:
            _check(expected, document, request)
        return httpx.Response(response.status_code, headers=response.headers, content=body,
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()
