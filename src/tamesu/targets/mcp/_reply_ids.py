"""A reply over streamable HTTP under an id tamesu never sent: said, and the call it was meant for failed at once.

Over HTTP the answer to a request comes in the body of its own POST, so whose answer it is is known without the id.
The SDK looks only at the id all the same: a JSON body under an id no request had is dropped without a word (the
call then waits out `call_timeout`, "the tool did not answer"), and a reply in the POST's event stream is given
the request's id whatever it carried (the answer to some other call taken as this one's). Here, beneath the SDK in
the HTTP client's transport, such a reply is replaced by a JSON-RPC error under the request's own id that names
both ids, and `on_stray(id, [the request's id])` is told (the stdio transport's `mcp_stray_reply`). A reply with
no id (`null`: the server could not read the request) and the server's own requests and notifications pass.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx2
import mcp_types
from mcp.shared.dispatcher import coerce_request_id

OnStray = Callable[[object, list[object]], object]
_NONE = object()


def _request(request: httpx2.Request) -> tuple[object, str]:
    """The id and method of a JSON-RPC request the POST carries, or `_NONE`."""
    if request.method != "POST":
        return _NONE, ""
    try:
        payload = json.loads(request.content)
    except (ValueError, RecursionError, httpx2.RequestNotRead):
        return _NONE, ""
    if not isinstance(payload, dict) or "method" not in payload or payload.get("id") is None:
        return _NONE, ""
    return payload["id"], str(payload["method"])


def _same(one: object, other: object) -> bool:
    # as the SDK correlates them: "7" answers 7
    def key(value: object) -> object:
        return coerce_request_id(value) if isinstance(value, str | int) and not isinstance(value, bool) else value

    return key(one) == key(other)


class _Check:
    def __init__(self, expected: object, method: str, on_stray: OnStray | None) -> None:
        self.expected, self.method, self._on_stray = expected, method, on_stray

    def replaced(self, text: bytes) -> bytes | None:
        """The error to hand the SDK in place of `text`, when it is a reply under another id; else None."""
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            return None  # not JSON: the SDK says so
        if not isinstance(document, dict) or "method" in document or not ({"result", "error"} & document.keys()):
            return None
        got = document.get("id")
        if got is None or _same(got, self.expected):
            return None
        if self._on_stray is not None:
            self._on_stray(got, [self.expected])
        error = mcp_types.JSONRPCError(jsonrpc="2.0", id=self.expected, error=mcp_types.ErrorData(
            code=mcp_types.INVALID_REQUEST,
            message=f"protocol error: the server answered the {self.method} with id {json.dumps(got)[:60]}, not "
                    f"the request's id {json.dumps(self.expected)[:60]}"))
        return error.model_dump_json(by_alias=True, exclude_none=True).encode()


class _CheckedEvents(httpx2.AsyncByteStream):
    """The event stream line by line, a `data:` line that is a reply under another id replaced."""

    def __init__(self, inner: httpx2.AsyncByteStream, check: _Check) -> None:
        self._inner, self._check = inner, check

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        async for chunk in self._inner:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if lines:
                yield b"".join(self._line(line) + b"\n" for line in lines)
        if pending:
            yield self._line(pending)

    def _line(self, line: bytes) -> bytes:
        if not line.startswith(b"data:"):
            return line
        replaced = self._check.replaced(line[5:])
        return line if replaced is None else b"data: " + replaced + (b"\r" if line.endswith(b"\r") else b"")

    async def aclose(self) -> None:
        await self._inner.aclose()


class StrayReplyTransport(httpx2.AsyncBaseTransport):
    """`inner`, with each reply to a POSTed request checked against the request's id."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, on_stray: OnStray | None = None) -> None:
        self._inner, self._on_stray = inner, on_stray

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        expected, method = _request(request)
        response = await self._inner.handle_async_request(request)
        if expected is _NONE or response.status_code >= 300:
            return response
        check = _Check(expected, method, self._on_stray)
        content_type = response.headers.get("content-type", "").lower()
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        if content_type.startswith("text/event-stream"):
            return httpx2.Response(response.status_code, headers=response.headers,
                                   stream=_CheckedEvents(stream, check), extensions=response.extensions)
        if not content_type.startswith("application/json"):
            return response
        try:
            body = b"".join([part async for part in stream])
        finally:
            await stream.aclose()
        replaced = check.replaced(body)
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        return httpx2.Response(response.status_code, headers=headers, content=body if replaced is None else replaced,
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()
