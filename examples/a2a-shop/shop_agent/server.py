"""The shop's two servers, wired to one a2a-sdk request handler.

    HTTP  http://HOST:PORT/.well-known/agent-card.json   the public card
          http://HOST:PORT/a2a   (and /a2a/)             JSON-RPC, A2A 1.0 (SendMessage...) and 0.3 (message/send...)
          http://HOST:PORT/rest/...                      HTTP+JSON, A2A 1.0 (/rest/message:send...)
          http://HOST:PORT/rest/v1/...                   HTTP+JSON, A2A 0.3 (/rest/v1/message:send...)
    gRPC  HOST:GRPC_PORT                                 lf.a2a.v1.A2AService (1.0) and a2a.v1.A2AService (0.3)

Tasks stay in an in-memory store for the life of the process, which is what lets a client read them again
(tasks/get), resubscribe to a running one, or continue one that waits for input.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass

import grpc
import uvicorn
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import AgentCard, SendMessageRequest, Task
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from shop_agent.auth import ExtendedCardGate, guard_extended_card
from shop_agent.card import Endpoints, extended_card, public_card
from shop_agent.executor import ShopExecutor
from shop_agent.logic import Shop
from shop_agent.push import SettledTaskPushSender, VersionedPushConfigStore
from shop_agent.wire import GrpcContextBuilder, HttpContextBuilder

JSONRPC_PATHS = ("/a2a", "/a2a/")
REST_PREFIX = "/rest"


@dataclass(frozen=True)
class Settings:
    token: str
    word_delay: float = 0.02
    host: str = "127.0.0.1"
    http_port: int = 0
    grpc_port: int = 0
    versions: tuple[str, ...] = ("1.0", "0.3")
    """What the card offers (see `Endpoints.versions`)."""


class ContinuingContextBuilder(SimpleRequestContextBuilder):
    """A follow-up that names its task but not its context joins the task's context.

    Without this the SDK gives such a message a fresh context id, and the task's own events then disagree
    with the request about which context they belong to.
    """

    def __init__(self, tasks: InMemoryTaskStore) -> None:
        super().__init__()
        self._tasks = tasks

    async def build(self, context: ServerCallContext, params: SendMessageRequest | None = None,
                    task_id: str | None = None, context_id: str | None = None,
                    task: Task | None = None) -> RequestContext:
        if task_id and not context_id:
            stored = await self._tasks.get(task_id, context)
            if stored is not None:
                context_id = stored.context_id
        return await super().build(context, params, task_id, context_id, task)


class ShopServer:
    """Binds both ports at `start()` (0 picks free ones), serves until `stop()`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._grpc: grpc.aio.Server | None = None
        self._http: uvicorn.Server | None = None
        self._http_task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        self._handler: DefaultRequestHandler | None = None
        self._push: SettledTaskPushSender | None = None
        self.endpoints: Endpoints | None = None

    @property
    def origin(self) -> str:
        assert self.endpoints is not None, "start() first"
        return self.endpoints.jsonrpc.removesuffix(JSONRPC_PATHS[0])

    async def start(self) -> ShopServer:
        host = self.settings.host
        self._grpc = grpc.aio.server()
        grpc_port = self._grpc.add_insecure_port(f"{host}:{self.settings.grpc_port}")
        self._sock = _bind(host, self.settings.http_port)
        origin = f"http://{host}:{self._sock.getsockname()[1]}"
        self.endpoints = Endpoints(jsonrpc=origin + JSONRPC_PATHS[0], rest=origin + REST_PREFIX,
                                   grpc_host=host, grpc_port=grpc_port, versions=self.settings.versions)
        public, extended = public_card(self.endpoints), extended_card(self.endpoints)

        tasks = InMemoryTaskStore()
        configs = VersionedPushConfigStore()
        self._push = SettledTaskPushSender(tasks, configs)
        self._handler = DefaultRequestHandler(
            agent_executor=ShopExecutor(Shop(), self.settings.token, self.settings.word_delay),
            task_store=tasks, agent_card=public,
            push_config_store=configs, push_sender=self._push,
            request_context_builder=ContinuingContextBuilder(tasks),
            extended_agent_card=extended, extended_card_modifier=guard_extended_card(public, self.settings.token),
            # a task left waiting for input is let go of after ten minutes; a late answer reloads it
            interrupted_task_timeout=600,
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(
            GrpcHandler(self._handler, GrpcContextBuilder("1.0")), self._grpc)
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(
            CompatGrpcHandler(self._handler, GrpcContextBuilder("0.3")), self._grpc)
        await self._grpc.start()

        config = uvicorn.Config(self._app(public), log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2)
        self._http = uvicorn.Server(config)
        self._http_task = asyncio.create_task(self._http.serve(sockets=[self._sock]))
        while not self._http.started:
            if self._http_task.done():
                await self._http_task  # raises what stopped it
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.01)
        return self

    def _app(self, public: AgentCard) -> Starlette:
        assert self._handler is not None
        context_builder = HttpContextBuilder(REST_PREFIX)
        # the card changes only when the process restarts on other ports, so caches may keep it a while
        routes: list[BaseRoute] = [*create_agent_card_routes(public, cache_control="public, max-age=300")]
        for path in JSONRPC_PATHS:
            routes += create_jsonrpc_routes(self._handler, path, context_builder=context_builder,
                                            enable_v0_3_compat=True)
        routes += create_rest_routes(self._handler, context_builder=context_builder, enable_v0_3_compat=True,
                                     path_prefix=REST_PREFIX)
        gate = Middleware(ExtendedCardGate, token=self.settings.token, jsonrpc_paths=frozenset(JSONRPC_PATHS))
        return Starlette(routes=routes, middleware=[gate])

    async def wait(self) -> None:
        """Until the HTTP server stops (after `stop()`, or on its own)."""
        if self._http_task is not None:
            await asyncio.shield(self._http_task)

    async def stop(self) -> None:
        if self._http is not None and self._http_task is not None:
            self._http.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._http_task), timeout=5)
            except TimeoutError:
                self._http_task.cancel()
                with contextlib.suppress(BaseException):
                    await self._http_task
        if self._grpc is not None:
            await self._grpc.stop(grace=1)
        if self._handler is not None:
            await self._handler.aclose()  # ends the agent's tasks still running or waiting for input
        if self._push is not None:
            await self._push.aclose()
        if self._sock is not None:
            self._sock.close()


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
