"""Streamed answers read off an aiohttp response, event by event: server-sent events as the HTML standard parses
them, and newline-delimited JSON (Ollama's API streams it unless told not to; FastAPI agents often do)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import aiohttp
import httpx

from tamesu.conversation import TurnError
from tamesu.net.clients import os_reason
from tamesu.net.direct import chunks
from tamesu.targets.rest.body import Reading, bounded_chunks, lines
from tamesu.targets.rest.http import parse_body, text_encoding
from tamesu.targets.rest.stream_errors import stream_failure

DONE = "[DONE]"
"""The sentinel OpenAI-style streams send as the last data; it is no event of its own."""
FIELDS = ("", "data", "event", "id", "retry")
"""The fields of an event stream (the empty one is a comment's)."""
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines",
                "application/jsonlines")
"""Content types of a stream of JSON documents, one a line."""


def is_stream(content_type: str) -> bool:
    """An answer read event by event (`content_type` in lower case)."""
    return content_type.startswith(("text/event-stream", *NDJSON_TYPES))


def stream_events(response: aiohttp.ClientResponse, content_type: str, clock: Callable[[], float], reading: Reading
                  ) -> AsyncGenerator[tuple[object, float], None]:
    """The events of a stream `is_stream` says is one, by its kind."""
    if content_type.startswith(NDJSON_TYPES):
        return ndjson_events(response, clock, reading)
    return sse_events(response, clock, reading)


async def ndjson_events(response: aiohttp.ClientResponse, clock: Callable[[], float], reading: Reading
                        ) -> AsyncGenerator[tuple[object, float], None]:
    """Yield (event, arrival ms) for each line that is not blank: parsed JSON, or the text when it is not JSON."""
    try:
        headers = response.headers
        pieces = bounded_chunks(chunks(response), headers.get("content-encoding", ""), reading)
        async for line in lines(pieces, text_encoding(headers), reading):
            if line.strip():
                yield _event([line.strip()]), clock()
    except httpx.HTTPError as exc:
        raise TurnError(f"the stream broke off: {os_reason(exc)}", status=response.status) from exc


async def sse_events(response: aiohttp.ClientResponse, clock: Callable[[], float], reading: Reading
                     ) -> AsyncGenerator[tuple[object, float], None]:
    """Yield (event, arrival ms) for each event's data: parsed JSON, or the text when it is not JSON.

    Multi-line data is joined with newlines; comments, `id:` and `retry:` fields carry no reply, nor does
    `event:`, except `event: error`: the agent saying the turn failed (Anthropic's streams, gateways), a TurnError.
    Reading stops at `reading.limit` bytes (`reading.cut` is then set): an event not finished by then is
    dropped.
    """
    data: list[str] = []
    name = ""
    came = False
    stray: str | None = None
    """The first line that is no field of an event stream: a body that only says it is one."""
    try:
        headers = response.headers
        pieces = bounded_chunks(chunks(response), headers.get("content-encoding", ""), reading)
        first = True
        async for line in lines(pieces, text_encoding(headers), reading):
            if first:  # the HTML standard: one leading byte order mark is no part of the stream
                line, first = line.removeprefix("\ufeff"), False
            if line:
                field, _, value = line.partition(":")
                if field == "data":
                    data.append(value.removeprefix(" "))
                elif field == "event":
                    name = value.removeprefix(" ")
                elif stray is None and field not in FIELDS:
                    stray = line
                continue
            if data:
                if name == "error":
                    raise stream_failure(_event(data), response.status)
                came = True
                yield _event(data), clock()
                data = []
            name = ""
    except httpx.HTTPError as exc:
        raise TurnError(f"the event stream broke off: {os_reason(exc)}", status=response.status) from exc
    if data and not reading.cut:
        if name == "error":
            raise stream_failure(_event(data), response.status)
        yield _event(data), clock()
    elif not came and stray is not None:
        # read as a stream, it was no event at all, and the agent "said nothing" while its words were right there
        shown = stray if len(stray) <= 200 else stray[:200] + "..."
        raise TurnError(f"the agent answered text/event-stream, but its body is no event stream (no data: line; it "
                        f"began: {shown}): is it a JSON or text answer sent with the wrong content type?",
                        status=response.status)


def _event(data: list[str]) -> object:
    text = "\n".join(data)
    if text.strip() == DONE:
        return DONE
    parsed = parse_body(text)
    return "" if parsed is None else parsed
