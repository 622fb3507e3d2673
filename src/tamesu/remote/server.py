"""One remote agent's servers, in the run's event loop, on a2a-sdk's server side.

    HTTP  URL/.well-known/agent-card.json     the public card
          URL (POST /), URL/a2a               JSON-RPC, A2A 1.0 (SendMessage...) and 0.3 (message/send...)
          URL/message:send, URL/tasks/...     HTTP+JSON, A2A 1.0
          URL/v1/message:send, URL/v1/...     HTTP+JSON, A2A 0.3
    gRPC  127.0.0.1:GRPC_PORT                 lf.a2a.v1.A2AService (1.0) and a2a.v1.A2AService (0.3)

Tasks, push configs and push notifications are the SDK's own (in-memory, for the life of the run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import grpc
import httpx
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore, InMemoryTaskStore
from a2a.types import a2a_pb2_grpc
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from tamesu._serve import LoopServer
from tamesu.conversation import Session
from tamesu.remote._binding import JSONRPC_PATHS, GrpcTagger, HttpTagger
from tamesu.remote.card import Addresses, extended_card, public_card
from tamesu.remote.executor import Delegation, ScriptedExecutor
from tamesu.remote.gate import GrpcGate, HttpGate, extended_card_guard
from tamesu.remote.spec import RemoteAgentSpec, split_addr

PUSH_TIMEOUT = 5.0
"""A push notification that the listener does not take within this long is dropped (best effort)."""


class _Later:
    """An ASGI app given after the socket is bound: the app's card needs the port the socket got."""

    def __init__(self) -> None:
        self.app: Starlette | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "served before the app was set"
        await self.app(scope, receive, send)


class RemoteAgentServer:
    """Binds its ports at `start()`, serves until `stop()`; `stop` is safe after a failed start, and twice."""

    def __init__(self, name: str, spec: RemoteAgentSpec, session: Session, token: str | None,
                 record: Callable[[Delegation], None], refused: Callable[[str, str], None]) -> None:
        self.name = name
        self.spec = spec
        self._session = session
        self._token = token
        self._record = record
        self._refused = refused
        self._http: LoopServer | None = None
        self._grpc: grpc.aio.Server | None = None
        self._handler: DefaultRequestHandler | None = None
        self._push_client: httpx.AsyncClient | None = None
        self._app = _Later()
        self.url = ""
        self.grpc_addr = ""


    async def start(self) -> RemoteAgentServer:
        host, port = split_addr(self.spec.addr) if self.spec.addr else ("127.0.0.1", 0)
        try:
            self._http = LoopServer(self._app, host, port)
        except OSError as exc:
            raise OSError(f"remote agent {self.name}: cannot listen on {host}:{port}: {exc.strerror}") from exc
        self.url = self._http.url
        interceptors = [GrpcGate(self._token, lambda b: self._refused(self.name, b))] if self._token else []
        self._grpc = grpc.aio.server(interceptors=interceptors)
        grpc_port = self._grpc.add_insecure_port(f"{host}:0")
        self.grpc_addr = f"{host}:{grpc_port}"
        at = Addresses(origin=self.url, grpc=self.grpc_addr)
        public = public_card(self.name, self.spec, at, self._token)
        configs = InMemoryPushNotificationConfigStore()
        self._push_client = httpx.AsyncClient(timeout=PUSH_TIMEOUT)
        self._handler = DefaultRequestHandler(
            agent_executor=ScriptedExecutor(self.name, self.spec, self._session, self._record),
            task_store=InMemoryTaskStore(), agent_card=public, push_config_store=configs,
            push_sender=BasePushNotificationSender(self._push_client, configs),
            extended_agent_card=extended_card(self.name, self.spec, at, self._token),
            extended_card_modifier=extended_card_guard(public, self._token),
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(self._handler, GrpcTagger("1.0")), self._grpc)
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(
            CompatGrpcHandler(self._handler, GrpcTagger("0.3")), self._grpc)
        self._app.app = self._starlette(public)
        await self._grpc.start()
        await self._http.start()
        return self

    def _starlette(self, public: Any) -> Starlette:
        assert self._handler is not None
        tagger = HttpTagger()
        routes: list[BaseRoute] = [*create_agent_card_routes(public)]
        for path in JSONRPC_PATHS:
            routes += create_jsonrpc_routes(self._handler, path, context_builder=tagger, enable_v0_3_compat=True)
        routes += create_rest_routes(self._handler, context_builder=tagger, enable_v0_3_compat=True)
        middleware = ([Middleware(HttpGate, token=self._token, refused=lambda b: self._refused(self.name, b))]
                      if self._token else [])
        return Starlette(routes=routes, middleware=middleware)

    async def stop(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.stop()
        if self._grpc is not None:
            server, self._grpc = self._grpc, None
            await server.stop(grace=1)
        if self._handler is not None:
            handler, self._handler = self._handler, None
            with contextlib.suppress(Exception):
                await handler.aclose()  # ends tasks still running or waiting for input
        if self._push_client is not None:
            client, self._push_client = self._push_client, None
            await client.aclose()
