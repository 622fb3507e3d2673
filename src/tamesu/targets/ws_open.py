"""Opening the one websocket an audio or realtime target talks over: `connect` retries for what never reached
the agent, and one line for a refused handshake or a bad URL (infrastructure errors, exit 3); closing it
again in the one order both need (`hang_up`); and how the agent closed it (`Closed`, which the rest target's
websocket reads too)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidMessage, InvalidStatus, InvalidURI, WebSocketException
from yarl import URL

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.net.clients import os_reason
from tamesu.net.proxies import websocket_proxy
from tamesu.net.tls import PLAIN_TO_TLS, TlsSpec, socket_tls, speaks_tls
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.http import with_connect_retries


@dataclass
class Closed:
    """How the agent closed the websocket, kept for the turn that reads on past it."""

    code: int | None
    reason: str

    def describe(self) -> str:
        code = "no close code" if self.code is None else f"code {self.code}"
        return f"the agent closed the websocket ({code}{', ' + self.reason if self.reason else ''})"


async def handshake_words(url: str, exc: WebSocketException, connect_spec: ConnectSpec) -> str:
    """What a handshake that failed says: a ws:// url whose server sent no HTTP answer at all, to a port that
    speaks TLS, is a wss:// one ("did not receive a valid HTTP response" named no cause); else its own words."""
    if isinstance(exc, InvalidMessage) and url.startswith("ws://"):
        with contextlib.suppress(ValueError):
            parsed = URL(url)
            if parsed.host and parsed.port and await speaks_tls(parsed.host, parsed.port, min(connect_spec.timeout, 3)):
                return PLAIN_TO_TLS
    return str(exc)


def unreachable(exc: BaseException) -> str | None:
    """Why the agent was never reached (worth a retry), or None for an answer it gave."""
    if isinstance(exc, InvalidStatus | InvalidURI | WebSocketException):
        return None
    if isinstance(exc, TimeoutError):
        return "connect timed out"
    if isinstance(exc, OSError):
        return os_reason(exc)
    return None


async def open_websocket(url: str, headers: dict[str, str], *, connect_spec: ConnectSpec, session: Session,
                         what: str, max_size: int, tls: TlsSpec | None = None) -> ClientConnection:
    """`tls`: the target's `tls:` block, for a wss:// url (the platform's store without one)."""
    masked = session.redactor.text(url)
    secure = socket_tls(tls) if url.startswith("wss://") else {"ssl": None}

    async def attempt() -> ClientConnection:
        # no permessage-deflate: audio barely compresses (base64 PCM by a quarter) and zlib cost ~60 us of the
        # event loop per 20 ms frame, 5% of a core at 16 conversations, on the loop every frame waits for
        return await connect(url, additional_headers=headers, open_timeout=connect_spec.timeout, **secure,
                             close_timeout=2, max_size=max_size, ping_interval=None, compression=None,
                             proxy=websocket_proxy(url))

    try:
        return await with_connect_retries(attempt, reason_of=unreachable, connect=connect_spec, session=session,
                                          what=what, url=url)
    except InvalidStatus as exc:
        raise InfraError(f"{what}: websocket handshake with {masked} refused: "
                         f"HTTP {exc.response.status_code}") from exc
    except (InvalidURI, WebSocketException) as exc:
        raise InfraError(f"{what}: websocket {masked}: {await handshake_words(url, exc, connect_spec)}") from exc
    except ValueError as exc:  # a URL a template made that is none (`ws://[::1`): it was 'internal error: ValueError'
        raise InfraError(f"{what}: websocket {masked}: not a URL ({exc})") from None


Line = tuple[asyncio.Task[None], asyncio.Event]
"""The silence an open phone line keeps sending between utterances: its task and the event that stops it."""


async def stop_line(line: Line | None) -> None:
    """Stop the line's silence (bounded: a send stuck on a dead socket does not hold the close)."""
    if line is not None:
        task, stop = line
        stop.set()
        await asyncio.wait([task], timeout=2)


async def hang_up(*, line: Line | None, ws: ClientConnection | None, reader: asyncio.Task[None] | None,
                  goodbye: Callable[[ClientConnection], Awaitable[None]] | None = None,
                  finish: Callable[[], Awaitable[None]] | None = None) -> None:
    """Close a connection in order: the line's silence stops, `goodbye` sends the wire's last messages (its
    failures are the closing socket's, not news), the socket closes, the reader is cancelled (2 s at most:
    nothing tamesu starts outlives it), then `finish` writes what the voice recorded."""
    await stop_line(line)
    if ws is not None:
        if goodbye is not None:
            with contextlib.suppress(Exception):
                await goodbye(ws)
        with contextlib.suppress(Exception):
            await ws.close()
    if reader is not None:
        reader.cancel()
        await asyncio.wait([reader], timeout=2)
    if finish is not None:
        await finish()
