"""One websocket per session: a reader task stamps every message as it arrives, turns take them in order, and
what the agent sends unasked waits in the same queue for a `wait_for` that listens (`read_unasked`) or the next
turn (which records it as `unsolicited`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI, WebSocketException

from tamesu.conversation import Session, TurnError
from tamesu.errors import InfraError
from tamesu.net.proxies import websocket_proxy
from tamesu.net.tls import TlsSpec, socket_tls
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.body import Reading
from tamesu.targets.rest.http import parse_body, with_connect_retries
from tamesu.targets.rest.read import StreamText
from tamesu.targets.rest.sse import DONE
from tamesu.targets.ws_open import Closed, handshake_words, unreachable
from tamesu.telemetry.traceparent import sent_trace_id, with_traceparent

# Messages waiting for a turn; beyond this the reader stops reading, so the agent feels back-pressure.
QUEUE_LIMIT = 10_000
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
UNASKED_QUIET_S = 1.0
"""What the agent sends unasked ends at `[DONE]`, where `response.final` holds, or once the socket has been quiet
this long: a greeting is seldom marked done (`{"text": "Welcome!"}`), and the messages of one come together.
A turn the user asked for never ends on quiet (an agent may think for long before it answers)."""

Message = tuple[Any, float, int]
"""A message parsed, when it arrived (session ms), and its size as sent."""


class WsLink:
    def __init__(self, conn: ClientConnection, session: Session) -> None:
        self._conn = conn
        self._session = session
        self._queue: asyncio.Queue[tuple[object, float, int] | Closed] = asyncio.Queue(QUEUE_LIMIT)
        self._reader = asyncio.create_task(self._read())
        self.sent = 0
        self.closed: Closed | None = None

    @classmethod
    async def connect(cls, url: str, headers: dict[str, str], *, connect_spec: ConnectSpec,
                      session: Session, what: str, tls: TlsSpec | None = None) -> WsLink:
        """`tls`: the target's `tls:` block, for a wss:// URL as for its HTTP requests."""
        masked = session.redactor.text(url)
        secure = socket_tls(tls) if url.startswith("wss://") else {}
        # the handshake comes before any turn: it carries the conversation's trace (tamesu.telemetry.traceparent)
        sent = with_traceparent(headers, session.conversation_trace)
        if (trace_id := sent_trace_id(headers, session.conversation_trace)) is not None:
            session.event("conversation_trace", trace_id=trace_id, sent_in=["websocket handshake header traceparent"])

        async def attempt() -> ClientConnection:
            return await connect(url, additional_headers=sent, open_timeout=connect_spec.timeout, **secure,
                                 close_timeout=2, max_size=MAX_MESSAGE_BYTES, proxy=websocket_proxy(url))

        try:
            conn = await with_connect_retries(attempt, reason_of=unreachable, connect=connect_spec,
                                              session=session, what=what, url=url)
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise InfraError(f"{what}: websocket handshake with {masked} refused: HTTP {status}") from exc
        except (InvalidURI, WebSocketException) as exc:
            raise InfraError(f"{what}: websocket {masked}: {await handshake_words(url, exc, connect_spec)}") from exc
        except ValueError as exc:  # a URL a template made that is none (`ws://[::1`): 'internal error: ValueError'
            raise InfraError(f"{what}: websocket {masked}: not a URL ({exc})") from None
        return cls(conn, session)

    async def _read(self) -> None:
        try:
            async for message in self._conn:
                at = self._session.now_ms()
                text = message.decode("utf-8", errors="replace") if isinstance(message, bytes) else message
                parsed = parse_body(text)
                await self._queue.put(("" if parsed is None else parsed, at, len(message)))
        except ConnectionClosed:
            pass
        finally:
            closed = Closed(self._conn.close_code, self._conn.close_reason or "")
            self.closed = closed
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(closed)

    def drain(self) -> list[object]:
        """Messages that arrived outside a turn (a greeting, events after the final one)."""
        pending: list[object] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, Closed):
                self._queue.put_nowait(item)
                break
            pending.append(item[0])
        return pending

    async def send(self, payload: str) -> None:
        if self.closed is not None:
            raise TurnError(self.closed.describe())
        try:
            await self._conn.send(payload)
        except ConnectionClosed as exc:
            raise TurnError(f"the agent closed the websocket: {exc}") from exc
        self.sent += 1

    async def receive(self) -> Message:
        """The next message: parsed, when it arrived, and its size as sent (bytes, or characters of text)."""
        item = await self._queue.get()
        if isinstance(item, Closed):
            self._queue.put_nowait(item)
            raise TurnError(item.describe())
        return item

    async def receive_within(self, seconds: float) -> Message | None:
        """The next message, or None when none came within `seconds` (a queued one is taken at once)."""
        try:
            async with asyncio.timeout(seconds):
                return await self.receive()
        except TimeoutError:
            return None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._conn.close()
        self._reader.cancel()
        # wait() neither raises the reader's cancellation nor swallows one aimed at close() itself.
        await asyncio.wait([self._reader], timeout=2)


async def read_answer(link: WsLink, stream: StreamText, reading: Reading, session: Session, *,
                      first: Message | None = None, quiet: float | None = None) -> float | None:
    """Messages (`first`, then the link's) into `stream` until `[DONE]` or `response.final` holds on one, or
    `reading.limit` is passed (the messages before it are the answer, as with an event stream cut at it); with
    `quiet`, also once no message came for that many seconds, or the agent closed the socket after one. Returns
    when the last message taken arrived (None when none was)."""
    completed_at: float | None = None
    while True:
        if first is not None:
            message, first = first, None
        elif quiet is None:
            message = await link.receive()
        else:
            try:
                got = await link.receive_within(quiet)
            except TurnError:  # closed: what it said before is the whole utterance; the next read says why
                return completed_at
            if got is None:
                return completed_at
            message = got
        event, completed_at, size = message
        reading.read += size
        if reading.read > reading.limit:
            reading.read -= size
            reading.cut = True
            reading.record(session, "the websocket answer")
            return completed_at
        if event == DONE or stream.add(event, completed_at):
            return completed_at


async def read_unasked(link: WsLink, stream: StreamText, reading: Reading, session: Session, *,
                       wait_s: float, turn_timeout: float) -> tuple[float, float] | None:
    """What the agent sends unasked (a `wait_for` listening), into `stream`: its first message waited for up to
    `wait_s` (one already queued, a greeting sent as the socket opened, is taken at once), the rest read as
    `read_answer` reads with `UNASKED_QUIET_S` of quiet as one more end, within `turn_timeout` of the first
    (TimeoutError past it). Returns when listening began (or the first message came, when earlier) and when the
    last message came; None when nothing came within `wait_s`. A socket closed before anything came raises
    TurnError, as a turn's read does."""
    began = session.now_ms()
    first = await link.receive_within(wait_s)
    if first is None:
        return None
    async with asyncio.timeout(turn_timeout):
        completed_at = await read_answer(link, stream, reading, session, first=first, quiet=UNASKED_QUIET_S)
    return min(began, first[1]), first[1] if completed_at is None else completed_at
