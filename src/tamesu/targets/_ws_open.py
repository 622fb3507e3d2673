"""Opening the one websocket an audio or realtime target talks over: `connect` retries for what never reached
the agent, and one line for a refused handshake or a bad URL (infrastructure errors, exit 3)."""

from __future__ import annotations

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus, InvalidURI, WebSocketException

from tamesu._http import ssl_context
from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.suite.schema import ConnectSpec
from tamesu.targets._rest_http import os_reason, with_connect_retries


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
                         what: str, max_size: int) -> ClientConnection:
    masked = session.redactor.text(url)

    async def attempt() -> ClientConnection:
        return await connect(url, additional_headers=headers, open_timeout=connect_spec.timeout,
                             ssl=ssl_context() if url.startswith("wss://") else None, close_timeout=2,
                             max_size=max_size, ping_interval=None)

    try:
        return await with_connect_retries(attempt, reason_of=unreachable, connect=connect_spec, session=session,
                                          what=what, url=url)
    except InvalidStatus as exc:
        raise InfraError(f"{what}: websocket handshake with {masked} refused: "
                         f"HTTP {exc.response.status_code}") from exc
    except (InvalidURI, WebSocketException) as exc:
        raise InfraError(f"{what}: websocket {masked}: {exc}") from exc
