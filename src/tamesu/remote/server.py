"""One remote agent's servers, in the run's event loop, on a2a-sdk's server side.

    HTTP  URL/.well-known/agent-card.json     the public card
          URL (POST /), URL/a2a               JSON-RPC, A2A 1.0 (SendMessage...) and 0.3 (message/send...)
          URL/message:send, URL/tasks/...     HTTP+JSON, A2A 1.0
          URL/v1/message:send, URL/v1/...     HTTP+JSON, A2A 0.3
    gRPC  127.0.0.1:GRPC_PORT                 lf.a2a.v1.A2AService (1.0) and a2a.v1.A2AService (0.3)

Tasks and push configs are the SDK's own (in-memory, for the life of the run); push notifications are posted in
the shape of the version the caller spoke (`push`); one that went out on a kept-alive connection the caller's
listener had just closed is sent again once (a `resent` event naming the agent; `tamesu.net.aio`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

import grpc
import httpx
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import AgentCard, SendMessageRequest
from a2a.utils.errors import A2AError
from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.fuzzing import fuzz_for
from tamesu.net.clients import AsyncClient, client_options
from tamesu.net.grpc_channels import dial_target, grpc_channel
from tamesu.net.serve import LoopServer, reachable_host
from tamesu.net.tls import TlsError
from tamesu.net.unverified_grpc import UncheckedRelay
from tamesu.remote._binding import JSONRPC_PATHS, GrpcTagger, HttpTagger
from tamesu.remote._card_cache import CardCache
from tamesu.remote._grpc_relay import GrpcRelay
from tamesu.remote._push_relay import shown_push_url
from tamesu.remote.card import Addresses, extended_card, public_card
from tamesu.remote.executor import Delegation, Fuzzed, ScriptedExecutor, refused_delegation
from tamesu.remote.forward import CONNECT_TIMEOUT, Forwarding, ForwardProxy
from tamesu.remote.gate import GrpcGate, HttpGate, extended_card_guard
from tamesu.remote.push import VersionedConfigStore, VersionedPushSender
from tamesu.suite.remote_agents import RemoteAgentSpec
from tamesu.types import split_addr

PUSH_TIMEOUT = 5.0
"""A push notification that the listener does not take within this long is dropped (best effort)."""

STOP_GRACE = 1
"""Seconds a remote agent's stop lets a request in flight finish (uvicorn counts whole seconds)."""


class _Later:
    """An ASGI app given after the socket is bound: the app's card needs the port the socket got."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "served before the app was set"
        await self.app(scope, receive, send)


class RemoteAgentServer:
    """Binds its ports at `start()`, serves until `stop()`; `stop` is safe after a failed start, and twice."""

    def __init__(self, name: str, spec: RemoteAgentSpec, session: Session, token: str | None,
                 record: Callable[[Delegation], None], refused: Callable[[str, str], None],
                 fuzzed: Fuzzed,
                 forwarding: Forwarding | None = None) -> None:
        self.name = name
        self.spec = spec
        self._session = session
        self._token = token
        self._record = record
        self._refused = refused
        self._fuzzed = fuzzed
        self._http: LoopServer | None = None
        self._grpc: grpc.aio.Server | None = None
        self._handler: _CardHandler | None = None
        self._push_client: httpx.AsyncClient | None = None
        self._app = _Later()
        self.forwarding = forwarding
        self._proxy: ForwardProxy | None = None
        self.origin = ""
        self.url = ""
        """The agent's URL: its origin, or with `forward` the origin and the real URL's path (a stand-in)."""
        self.grpc_addr = ""
        self._relay_channel: grpc.aio.Channel | None = None
        self._unchecked: UncheckedRelay | None = None
        """A grpcs:// forward with `tls.verify: false`: the relay its channel goes through."""

    async def start(self) -> RemoteAgentServer:
        host, port = split_addr(self.spec.addr) if self.spec.addr else ("127.0.0.1", 0)
        try:
            # a delegation still being answered when the run ends (its turn timed out, a fuzzed delay) is of
            # no more use: cut after a second, not the 2 s every stop of the run waited for it
            self._http = LoopServer(self._app, host, port, grace=STOP_GRACE)
        except OSError as exc:
            raise OSError(f"remote agent {self.name}: cannot listen on {host}:{port}: {exc.strerror}") from exc
        self.origin = self.url = self._http.url
        if self.forwarding is not None:
            await self._start_forwarding(self.forwarding)
            return self
        self._grpc, self.grpc_addr = self._grpc_server(host)
        at = Addresses(origin=self.url, grpc=self.grpc_addr)
        public = self._make_handler(at)
        self._serve_scripted_grpc(self._grpc)
        self._app.app = self._gated(CardCache(self._starlette(public)))
        await self._grpc.start()
        await self._http.start()
        return self

    def _grpc_server(self, host: str) -> tuple[grpc.aio.Server, str]:
        interceptors = [GrpcGate(self._token, lambda b: self._refused(self.name, b))] if self._token else []
        server = grpc.aio.server(interceptors=interceptors)
        return server, f"{reachable_host(host)}:{server.add_insecure_port(f'{host}:0')}"

    def _serve_scripted_grpc(self, server: grpc.aio.Server) -> None:
        assert self._handler is not None  # made by _make_handler
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(  # type: ignore[no-untyped-call]  # generated, untyped
            GrpcHandler(self._handler, GrpcTagger("1.0")), server)
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(  # type: ignore[no-untyped-call]  # generated, untyped
            CompatGrpcHandler(self._handler, GrpcTagger("0.3")), server)

    async def _start_forwarding(self, forwarding: Forwarding) -> None:
        """A recording proxy on the HTTP port, or with a grpc(s):// forward on a gRPC port (its HTTP port then
        relays nothing); fuzzed, a local agent behind the proxy."""
        assert self._http is not None
        self.url = self.origin + ("" if forwarding.grpc else forwarding.path)
        fuzz = fuzz_for(self._session, self.name)
        hold = fuzz.hold_seconds() if fuzz is not None and fuzz.mode == "delay" else None
        local = None
        if fuzz is not None and fuzz.mode != "delay" and not forwarding.grpc:
            public = self._make_handler(Addresses(origin=self.origin, grpc=""))
            # the real card may name the JSON-RPC endpoint at the forwarded URL's path: answer there too
            local = self._starlette(public, extra_jsonrpc=(forwarding.path,) if forwarding.path else ())
        try:  # a tls: block's files are read here
            self._proxy = ForwardProxy(self.name, forwarding, self._session, self._record, self._fuzzed,
                                       local=local, hold=hold,
                                       keep_authorization=self._token is None)
            if forwarding.grpc:
                self._relay_channel, self._unchecked = grpc_channel(
                    *dial_target(forwarding.url), forwarding.tls, timeout=CONNECT_TIMEOUT)
        except TlsError as exc:
            raise InfraError(f"remote agent {self.name}: {exc}") from None
        self._proxy.proxy_origin = self._proxy.push.proxy_origin = self.origin
        self._app.app = self._proxy.push.wrap(self._gated(self._proxy))
        if forwarding.grpc:
            host = split_addr(self.spec.addr)[0] if self.spec.addr else "127.0.0.1"
            self._grpc, self.grpc_addr = self._grpc_server(host)
            if fuzz is not None and fuzz.mode != "delay":  # the scripted agent answers, on gRPC as the real would
                self._make_handler(Addresses(origin=self.origin, grpc=self.grpc_addr))
                self._serve_scripted_grpc(self._grpc)
            else:
                assert self._relay_channel is not None
                proxy = self._proxy
                relay = GrpcRelay(self.name, self._relay_channel, forwarding.url, self._session,
                                  proxy.delegation, proxy.finish, proxy.unreachable, proxy.push, self._fuzzed,
                                  headers=forwarding.headers, keep_authorization=self._token is None, hold=hold,
                                  closed_hint=_closed_hint(forwarding))
                relay.proxy_addr = self.grpc_addr
                self._grpc.add_generic_rpc_handlers((relay,))
            await self._grpc.start()
        await self._http.start()

    def _gated(self, app: Any) -> Any:
        if not self._token:
            return app
        return HttpGate(app, token=self._token, refused=lambda b: self._refused(self.name, b))

    def _make_handler(self, at: Addresses) -> object:
        """The SDK's request handler with the scripted executor; returns the public card."""
        public = public_card(self.name, self.spec, at, self._token)
        configs, tasks = VersionedConfigStore(), InMemoryTaskStore()
        # kept alive between a run's pushes: one that went out on a connection the caller's listener had just
        # closed is sent again once (tamesu.net.aio); the sender only logs a push that failed
        self._push_client = AsyncClient(**client_options(on_resend=self._push_resent), timeout=PUSH_TIMEOUT)
        self._handler = _CardHandler(
            public, self._refused_message,
            agent_executor=ScriptedExecutor(self.name, self.spec, self._session, self._record,
                                            self._fuzzed),
            task_store=tasks, agent_card=public, push_config_store=configs,
            push_sender=VersionedPushSender(self._push_client, configs, tasks, self._push_failed),
            extended_agent_card=extended_card(self.name, self.spec, at, self._token),
            extended_card_modifier=extended_card_guard(public, self._token),
        )
        return public

    def _refused_message(self, params: SendMessageRequest, context: ServerCallContext, error: A2AError) -> None:
        delegation = refused_delegation(self.name, params.message, context, error, self._session.now_ms())
        if delegation is not None:
            self._record(delegation)

    def _push_failed(self, task_id: str, url: str, reason: str) -> None:
        self._session.event("push_failed", agent=self.name, task_id=task_id, url=shown_push_url(self._session, url),
                            reason=self._session.redactor.text(reason))

    def _push_resent(self, request: httpx.Request, reason: str) -> None:
        self._session.event("resent", agent=self.name, reason=reason,
                            url=shown_push_url(self._session, str(request.url)))

    def _starlette(self, public: Any, extra_jsonrpc: tuple[str, ...] = ()) -> Starlette:
        assert self._handler is not None
        tagger = HttpTagger(extra_jsonrpc)
        routes: list[BaseRoute] = [*create_agent_card_routes(public)]
        for path in (*JSONRPC_PATHS, *(p for p in extra_jsonrpc if p not in JSONRPC_PATHS)):
            routes += create_jsonrpc_routes(self._handler, path, context_builder=tagger, enable_v0_3_compat=True)
        routes += create_rest_routes(self._handler, context_builder=tagger, enable_v0_3_compat=True)
        return Starlette(routes=routes)

    async def stop(self) -> None:
        if self._handler is not None:
            # the SDK's tasks first (still running or waiting for input): a request a fuzzed `delay` holds is then
            # answered, so the servers have nothing in flight; stopped first, uvicorn waited its grace for it and
            # cut it, an ERROR among the library records
            handler, self._handler = self._handler, None
            with contextlib.suppress(Exception), _queues_closed_twice():
                await handler.aclose()
        if self._http is not None:
            http, self._http = self._http, None
            await http.stop()
        if self._grpc is not None:
            server, self._grpc = self._grpc, None
            await _stop_grpc(server)
        if self._relay_channel is not None:
            channel, self._relay_channel = self._relay_channel, None
            await channel.close()
        if self._unchecked is not None:
            unchecked, self._unchecked = self._unchecked, None
            await unchecked.close()
        if self._proxy is not None:
            proxy, self._proxy = self._proxy, None
            await proxy.aclose()
        if self._push_client is not None:
            client, self._push_client = self._push_client, None
            await client.aclose()


_DISPATCHER_GONE = "Dispatcher task is not running. Cannot wait for event dispatch."
"""a2a-sdk 1.3.0's warning (`EventQueueSource._join_incoming_queue`) of a queue closed gently after it was closed at
once. Its own `aclose` does that to a task still being executed (a delegation a fuzzed `delay` holds): it closes the
task's two queues at once, then cancels the producer, whose `finally` closes them again gently, each a warning.
Stopping HTTP before or after `aclose` makes no difference (both tried): it is the SDK's noise on its own stop, and
it made the console say "2 records from the libraries" of a run that went as it should."""


class _NotTheSecondClose(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _DISPATCHER_GONE


@contextlib.contextmanager
def _queues_closed_twice() -> Iterator[None]:
    """While `aclose` runs, that one record of the SDK's is dropped (`_DISPATCHER_GONE`), nothing else."""
    logger, noise = logging.getLogger("a2a.server.events.event_queue_v2"), _NotTheSecondClose()
    logger.addFilter(noise)
    try:
        yield
    finally:
        logger.removeFilter(noise)


def _closed_hint(forwarding: Forwarding) -> str:
    """gRPC says only "Socket closed" when a TLS server refused a channel without a client certificate."""
    if not forwarding.url.lower().startswith("grpcs://") or (forwarding.tls and forwarding.tls.cert_file):
        return ""
    return ("; a TLS server that requires a client certificate closes the connection so: give tls.cert_file and "
            "tls.key_file")


async def _stop_grpc(server: grpc.aio.Server) -> None:
    """Stop a gRPC server for good. When the run is cancelled, grpc's own serving task can be cancelled with
    it and the first `stop` then ends in CancelledError, half done; a server left so crashes the interpreter
    when the loop closes, so stop it again until it says it is stopped (a bounded number of times)."""
    for _ in range(5):
        try:
            await server.stop(grace=1)
            return
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # it is this task that is cancelled, not grpc's


class _CardHandler(DefaultRequestHandler):
    """The SDK's handler, but an agent without an extended card answers the extended-card call with its public
    one: 0.3 gRPC's `GetAgentCard`, how a 0.3 gRPC client (and tamesu's a2a target) reads any card, goes to that
    call, which the SDK refuses unless the card declares an extended one ("does not support authenticated
    extended cards": a remote agent without `extended:` had no card over 0.3 gRPC). A message it refuses before
    the executor runs is recorded as a delegation that failed (`refused`), not lost."""

    def __init__(self, public: AgentCard, refused: Callable[[SendMessageRequest, ServerCallContext, A2AError], None],
                 **options: Any) -> None:
        super().__init__(**options)
        self.public = public
        self._on_refused = refused

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        try:
            return await super().on_message_send(params, context)
        except A2AError as exc:
            self._on_refused(params, context, exc)
            raise

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any, None]:
        try:
            async with contextlib.aclosing(super().on_message_send_stream(params, context)) as events:
                async for event in events:
                    yield event
        except A2AError as exc:
            self._on_refused(params, context, exc)
            raise

    async def on_get_extended_agent_card(self, params: Any, context: Any) -> AgentCard:
        if self.extended_agent_card is None:
            return self.public
        card: AgentCard = await super().on_get_extended_agent_card(params, context)
        return card
