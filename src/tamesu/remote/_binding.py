"""Which binding and protocol version a request to a remote agent came in on (recorded with each delegation).

The SDK does not tell the executor, so the call-context builders tag each context: HTTP requests by path (the
JSON-RPC endpoints, else HTTP+JSON, whose 0.3 paths start with `/v1/`), gRPC by which of the two services
(1.0, 0.3 compat) was called. JSON-RPC's version is read from the method the dispatcher records later: 0.3
methods have a slash (`message/send`), 1.0 ones do not (`SendMessage`).
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultGrpcServerCallContextBuilder
from a2a.server.routes import DefaultServerCallContextBuilder
from starlette.requests import Request

JSONRPC_PATHS = ("/", "/a2a", "/a2a/")
_BINDING, _VERSION = "tamesu_binding", "tamesu_version"


class HttpTagger(DefaultServerCallContextBuilder):
    def __init__(self, extra_jsonrpc: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._jsonrpc = (*JSONRPC_PATHS, *extra_jsonrpc)

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        path = request.url.path
        if path in self._jsonrpc:
            context.state[_BINDING] = "jsonrpc"
        else:
            context.state[_BINDING] = "http"
            context.state[_VERSION] = "0.3" if path.startswith("/v1/") else "1.0"
        return context


class GrpcTagger(DefaultGrpcServerCallContextBuilder):
    def __init__(self, version: str) -> None:
        super().__init__()
        self._version = version

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        built = super().build(context)
        built.state[_BINDING] = "grpc"
        built.state[_VERSION] = self._version
        return built


def binding_of(context: ServerCallContext | None) -> tuple[str, str]:
    """(binding, version) of the request: `jsonrpc`/`http`/`grpc`, `1.0`/`0.3`."""
    state: Mapping[str, object] = context.state if context is not None else {}
    binding = str(state.get(_BINDING) or "unknown")
    version = state.get(_VERSION)
    if version is None:
        version = "0.3" if "/" in str(state.get("method") or "") else "1.0"
    return binding, str(version)
