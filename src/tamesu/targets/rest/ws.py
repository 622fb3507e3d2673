"""One websocket per session: a reader task stamps every message as it arrives, turns take them in order."""

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
from tamesu.targets.rest.http import parse_body, with_connect_retries
from tamesu.targets.ws_open import Closed, unreachable
from tamesu.telemetry.traceparent import sent_trace_id, with_traceparent

# Messages waiting for a turn; beyond this the reader stops reading, so the agent feels back-pressure.
QUEUE_LIMIT = 10_000
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


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
            raise InfraError(f"{what}: websocket {masked}: {exc}") from exc
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

    async def receive(self) -> tuple[Any, float, int]:
        """The next message: parsed, when it arrived, and its size as sent (bytes, or characters of text)."""
        item = await self._queue.get()
        if isinstance(item, Closed):
            self._queue.put_nowait(item)
            raise TurnError(item.describe())
        return item

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._conn.close()
        self._reader.cancel()
        # wait() neither raises the reader's cancellation nor swallows one aimed at close() itself.
        await asyncio.wait([self._reader], timeout=2)
