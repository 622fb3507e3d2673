"""The bearer token in front of the authenticated extended card.

a2a-sdk serves the extended card to anyone who asks; the shop wants the token first. Over HTTP the gate answers
401 before the SDK sees the request: GET `.../extendedAgentCard` (1.0) and `.../v1/card` (0.3) are told apart by
path, JSON-RPC's `GetExtendedAgentCard` (1.0) and `agent/getAuthenticatedExtendedCard` (0.3) by the method in the
body. Over gRPC, `guard_extended_card` (the handler's card modifier) aborts with UNAUTHENTICATED, except that a
0.3 `GetAgentCard` without credentials gets the public card: it is the only way a 0.3 gRPC client reads a card.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.errors import UnsupportedOperationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shop_agent.wire import bearer_matches, presented_authorization, wire_version

EXTENDED_CARD_METHODS = frozenset({"GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"})
_REST_CARD_SUFFIXES = ("/extendedAgentCard", "/v1/card")
_DENIED = "the extended agent card needs Authorization: Bearer <token>"


class ExtendedCardGate:
    """ASGI middleware: a request for the extended card without the right bearer token gets 401."""

    def __init__(self, app: ASGIApp, token: str, jsonrpc_paths: frozenset[str]) -> None:
        self.app = app
        self.token = token
        self.jsonrpc_paths = jsonrpc_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        wants_card = method == "GET" and path.endswith(_REST_CARD_SUFFIXES)
        if method == "POST" and path in self.jsonrpc_paths:
            body = await _read_body(receive)
            wants_card = _jsonrpc_method(body) in EXTENDED_CARD_METHODS
            receive = _replay(body, receive)
        if wants_card and not bearer_matches(_header(scope, b"authorization"), self.token):
            await _unauthorised(send)
            return
        await self.app(scope, receive, send)


def guard_extended_card(
    public: AgentCard, token: str,
) -> Callable[[AgentCard, ServerCallContext], Awaitable[AgentCard]]:
    """The request handler's `extended_card_modifier`: it decides who gets the extended card."""

    async def modifier(extended: AgentCard, context: ServerCallContext) -> AgentCard:
        authorization = presented_authorization(context)
        if bearer_matches(authorization, token):
            return extended
        grpc_context = context.state.get("grpc_context")
        if grpc_context is None:
            # HTTP requests reach this only past ExtendedCardGate; this guards an app mounted without it
            raise UnsupportedOperationError(message=_DENIED)
        if authorization is None and wire_version(context) == "0.3":
            return public
        await grpc_context.abort(grpc.StatusCode.UNAUTHENTICATED, _DENIED)
        raise AssertionError("grpc abort returns only by raising")

    return modifier


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once, as read; then the real channel, so a streamed answer still hears the client leave."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _jsonrpc_method(body: bytes) -> str | None:
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return None  # the dispatcher answers a parse error itself
    return parsed.get("method") if isinstance(parsed, dict) else None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _unauthorised(send: Send) -> None:
    body = json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": _DENIED}}).encode()
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="a2a-shop"'),
    ]})
    await send({"type": "http.response.body", "body": body})
