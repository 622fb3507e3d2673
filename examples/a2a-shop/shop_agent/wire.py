"""Which protocol version a request came in on, and who sent what credentials, whatever the binding.

The SDK hands the executor and the stores a `ServerCallContext` without saying whether the caller spoke A2A 1.0
or 0.3. The shop needs to know for one thing: a push notification is shaped by the version of the request that
asked for it. The context builders below tag each context; `wire_version` reads the tag.
"""

from __future__ import annotations

import hmac
from typing import Literal

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultGrpcServerCallContextBuilder
from a2a.server.routes import DefaultServerCallContextBuilder
from starlette.requests import Request

Version = Literal["1.0", "0.3"]
_TAG = "shop_wire_version"


class HttpContextBuilder(DefaultServerCallContextBuilder):
    """Tags HTTP+JSON requests: 0.3 paths live under `/v1/`. JSON-RPC is told apart by its method instead,
    which the dispatcher records after this runs (`message/send` is 0.3, `SendMessage` is 1.0)."""

    def __init__(self, rest_prefix: str) -> None:
        super().__init__()
        self._rest_prefix = rest_prefix

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        path = request.url.path
        if f"{self._rest_prefix}/" in path:  # also under a tenant: /{tenant}/rest/...
            context.state[_TAG] = "0.3" if f"{self._rest_prefix}/v1/" in path else "1.0"
        return context


class GrpcContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The 1.0 and 0.3 gRPC services are separate servicers, so each gets a builder that knows its version."""

    def __init__(self, version: Version) -> None:
        super().__init__()
        self._version = version

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        built = super().build(context)
        built.state[_TAG] = self._version
        return built


def wire_version(context: ServerCallContext) -> Version:
    tagged = context.state.get(_TAG)
    if tagged in ("1.0", "0.3"):
        return tagged  # type: ignore[no-any-return]
    method = str(context.state.get("method") or "")
    return "0.3" if "/" in method else "1.0"


def presented_authorization(context: ServerCallContext) -> str | None:
    """The Authorization header (HTTP) or metadata (gRPC) of the request, if any."""
    headers = context.state.get("headers")
    if isinstance(headers, dict):
        value = headers.get("authorization")
        return value if isinstance(value, str) else None
    grpc_context = context.state.get("grpc_context")
    if grpc_context is not None:
        for key, value in grpc_context.invocation_metadata() or ():
            if key.lower() == "authorization":
                return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return None


def bearer_matches(authorization: str | None, token: str) -> bool:
    if not authorization or not token:
        return False
    scheme, _, presented = authorization.partition(" ")
    # compare_digest so a wrong token takes as long to reject whatever its first characters are
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())
