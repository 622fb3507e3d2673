"""`token`: every request to a remote agent but its public card needs `Authorization: Bearer <token>`.

Refused requests never reach the request handler, so they are not delegations. Over HTTP an ASGI middleware
answers 401; over gRPC an interceptor aborts with UNAUTHENTICATED (0.3's `GetAgentCard` stays open: it is how
a 0.3 gRPC client reads the public card). Each refusal is counted, so a test can see the agent was turned away.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import AgentCard
from starlette.types import ASGIApp, Receive, Scope, Send

PUBLIC_CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_DENIED = "this agent needs Authorization: Bearer <token>"


def bearer_ok(authorization: str | None, token: str) -> bool:
    if not authorization:
        return False
    scheme, _, presented = authorization.partition(" ")
    # compare_digest: a wrong token takes as long to reject whatever it starts with
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


class HttpGate:
    def __init__(self, app: ASGIApp, token: str, refused: Callable[[str], None]) -> None:
        self.app = app
        self.token = token
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_CARD_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if bearer_ok(headers.get("authorization"), self.token):
            await self.app(scope, receive, send)
            return
        self.refused("http")
        body = json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": _DENIED}}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="tamesu"')]})
        await send({"type": "http.response.body", "body": body})


class GrpcGate(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    def __init__(self, token: str, refused: Callable[[str], None]) -> None:
        self.token = token
        self.refused = refused

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method = details.method or ""
        metadata = {k.lower(): v for k, v in (details.invocation_metadata or ())}
        authorization = metadata.get("authorization")
        if isinstance(authorization, bytes):
            authorization = authorization.decode("utf-8", "replace")
        if handler is None or method.endswith("/GetAgentCard") or bearer_ok(authorization, self.token):
            return handler
        self.refused("grpc")
        return _denying(handler)


def authorization_of(context: ServerCallContext) -> str | None:
    """The Authorization header (HTTP) or metadata (gRPC) of a request the SDK is handling."""
    headers = context.state.get("headers")
    if isinstance(headers, dict):
        value = headers.get("authorization")
        return value if isinstance(value, str) else None
    grpc_context = context.state.get("grpc_context")
    for key, value in (grpc_context.invocation_metadata() or ()) if grpc_context is not None else ():
        if key.lower() == "authorization":
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return None


def extended_card_guard(public: AgentCard, token: str | None
                        ) -> Callable[[AgentCard, ServerCallContext], Awaitable[AgentCard]]:
    """The handler's card modifier: the extended card to a caller with the token, the public one otherwise.
    Only 0.3's gRPC `GetAgentCard` gets here without the token (the gates stop every other request)."""

    async def modifier(extended: AgentCard, context: ServerCallContext) -> AgentCard:
        return extended if token is None or bearer_ok(authorization_of(context), token) else public

    return modifier


def _denying(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    async def unary(request: object, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, _DENIED)

    async def streaming(request: object, context: grpc.aio.ServicerContext) -> object:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, _DENIED)
        yield  # pragma: no cover - abort raises

    kwargs = {"request_deserializer": handler.request_deserializer,
              "response_serializer": handler.response_serializer}
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(streaming, **kwargs)
    return grpc.unary_unary_rpc_method_handler(unary, **kwargs)
