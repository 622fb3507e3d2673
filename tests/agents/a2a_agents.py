"""Real A2A agents for testing the `a2a` target, built on a2a-sdk's server side.

`A2AAgents().start()` serves, from one thread with its own event loop (stop it with `stop()`):

- `v10`: an HTTP origin whose card lists only A2A 1.0 interfaces: JSON-RPC at `/a2a`, HTTP+JSON at `/rest`,
  gRPC at the bare `127.0.0.1:PORT` of the gRPC server.
- `v03`: another origin, the same agent, whose card lists only A2A 0.3 interfaces (JSON-RPC `/a2a`, HTTP+JSON
  `/rest`, whose `/v1/...` paths the client adds, gRPC at `http://127.0.0.1:PORT`). Both origins answer both
  versions (`enable_v0_3_compat=True`); the card decides which one a client speaks.
- `grpc`: one gRPC port with the 1.0 service and the 0.3 compat service. Its card comes from
  `GetExtendedAgentCard` (1.0) or `GetAgentCard` (0.3): the extended card, with one more skill.
  `grpc03_url`: another port with the 0.3 service only (a 0.3 gRPC agent).
- `basic`: a card that says the agent neither streams nor pushes (JSON-RPC 1.0 at `/a2a`).
- `secure`: a card that declares a bearer scheme and an authenticated extended card with two more skills;
  every request but the public card needs `Authorization: Bearer TOKEN` (else 401). `secure03`: the same
  agent, its card in A2A 0.3 (JSON-RPC `/a2a`, HTTP+JSON `/rest`).
- `nocard`: JSON-RPC at `/a2a` and nothing at any card path.

The shop's skills are `order-status` and `returns`; the extended card adds `bulk-orders` (and, on `secure`,
`refunds` too). What the agent does depends on the first word of the user's text:

    order    input-required "Which order number?"; the follow-up completes: status "Order X has shipped",
             artifact `order` with the data part {"order": X, "status": "shipped"}
    login    auth-required "Please sign in"; the follow-up completes with "Signed in"
    draft    input-required "Approve?", artifact `draft` (id `draft`) with the text "draft one"; the follow-up
             replaces that artifact (append false, same id) with "draft two" and completes "Revised"
    drop     working "Looking...", artifacts `part-1`..`part-3` (text "chunk N") DROP_PAUSE apart, then
             completed "Done"; the first stream of the task is closed by the server after DROP_AFTER events
             while the agent goes on (resubscribing picks it up)
    slow     completes "Finally" after SLOW_SECONDS
    words    streams the artifact `answer` in chunks cut inside words ("Hel", "lo wor", "ld": append, lastChunk
             on the last), then completed with no message
    early    the send is answered at once with the working task (as if the client asked for
             return_immediately); EARLY_SECONDS later the agent completes "Ready", artifact `result` with a
             text part "ready" and a data part {"ready": true}
    nopush   like early, and no push notification is ever sent for the task
    linger   like early, but completes only LINGER_SECONDS later: a turn timeout of a few seconds ends the turn
             while the task is surely still working, however slow the machine
    error    the request fails with InvalidParamsError "no order number given" (JSON-RPC -32602)
    fail     failed "Cannot do that"          reject   rejected "Not for me"
    ping     a plain Message "pong", no task
    quiet    working "Thinking about TEXT", then completed with no message and no artifact
    file     completed "Here is your receipt", artifact `receipt` with a file part (receipt.txt, text/plain)
    else     echo: completed "Echo: TEXT", artifact `echo` with a data part {"said", "data" (data parts
             received), "files" ({name, mime, size, text} or {name, mime, uri}), "metadata" (the message's),
             "auth" (the Authorization header or metadata), "version" (the A2A-Version header or metadata),
             "traceparent" (the header or gRPC metadata)}

`agents.canceled` lists the task ids the executor was asked to cancel; `agents.pushes_skipped` the
notifications the `nopush` task did not send.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import grpc
import httpx
import uvicorn
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    PushNotificationEvent,
    TaskUpdater,
)
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from tamesu.net.serve import bind_socket

TOKEN = "shop-secret"
DROP_PAUSE = 0.15
DROP_AFTER = 2
SLOW_SECONDS = 30.0
"""How long `slow` works: far past the 0.4 s turn_timeout its test gives, whose wait is bounded a second below it
(at 3 s, 2 s for a timed-out turn's wait on a loaded machine)."""
HUGE_CHARS = 300_000
EARLY_SECONDS = 0.6
LINGER_SECONDS = 120.0
SKILLS = [("order-status", "Order status"), ("returns", "Returns")]
EXTENDED_SKILLS = [("bulk-orders", "Bulk orders")]
SECURE_EXTENDED_SKILLS = [("bulk-orders", "Bulk orders"), ("refunds", "Refunds")]


def _skills(pairs: list[tuple[str, str]]) -> list[AgentSkill]:
    return [AgentSkill(id=sid, name=name, description=f"{name} for the test shop", tags=["shop"])
            for sid, name in pairs]


def _card(name: str, interfaces: list[AgentInterface], *, streaming: bool = True, push: bool = True,
          extended: bool = False, skills: list[tuple[str, str]] = SKILLS) -> AgentCard:
    return AgentCard(
        name=name, description="A test shop agent", version="1.2.0", supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push, extended_agent_card=extended),
        default_input_modes=["text/plain", "application/json"], default_output_modes=["text/plain"],
        skills=_skills(skills),
    )


def _agent_text(text: str) -> Message:
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_AGENT, parts=[Part(text=text)])


def _header(call: ServerCallContext, name: str) -> str | None:
    """An HTTP header of the request, or a gRPC metadata entry."""
    headers = call.state.get("headers")
    if isinstance(headers, dict):
        return headers.get(name)
    grpc_context = call.state.get("grpc_context")
    if grpc_context is not None:
        for key, value in grpc_context.invocation_metadata() or ():
            if key.lower() == name:
                return value if isinstance(value, str) else value.decode()
    return None


def _first_word(message: Message) -> str:
    words = get_message_text(message).split()
    return words[0].lower() if words else ""


def _received(message: Message) -> dict[str, Any]:
    data: list[Any] = []
    files: list[dict[str, Any]] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            data.append(MessageToDict(part.data))
        elif kind == "raw":
            files.append({"name": part.filename, "mime": part.media_type, "size": len(part.raw),
                          "text": part.raw.decode("utf-8", errors="replace")})
        elif kind == "url":
            files.append({"name": part.filename, "mime": part.media_type, "uri": part.url})
    return {"data": data, "files": files, "metadata": MessageToDict(message.metadata)}


class ShopExecutor(AgentExecutor):
    def __init__(self, agents: A2AAgents) -> None:
        self._agents = agents

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
            opening = message
        else:
            opening = task.history[0] if task.history else message
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(message)
        word = _first_word(opening)
        follow_up = opening.message_id != message.message_id
        if word == "order":
            if follow_up:
                await updater.add_artifact([Part(data=_value({"order": text, "status": "shipped"}))], name="order")
                await updater.complete(_agent_text(f"Order {text} has shipped"))
            else:
                await updater.requires_input(_agent_text("Which order number?"))
        elif word == "login":
            if follow_up:
                await updater.complete(_agent_text("Signed in"))
            else:
                await updater.requires_auth(_agent_text("Please sign in"))
        elif word == "draft":
            revised = "draft two" if follow_up else "draft one"
            await updater.add_artifact([Part(text=revised)], artifact_id="draft", name="draft", append=False)
            if follow_up:
                await updater.complete(_agent_text("Revised"))
            else:
                await updater.requires_input(_agent_text("Approve?"))
        elif word == "drop":
            await updater.start_work(_agent_text("Looking..."))
            for n in (1, 2, 3):
                await asyncio.sleep(DROP_PAUSE)
                await updater.add_artifact([Part(text=f"chunk {n}")], name=f"part-{n}")
            await asyncio.sleep(DROP_PAUSE)
            await updater.complete(_agent_text("Done"))
        elif word == "words":
            for n, chunk in enumerate(("Hel", "lo wor", "ld")):
                await updater.add_artifact([Part(text=chunk)], artifact_id="answer", name="answer", append=n > 0,
                                           last_chunk=n == 2)
            await updater.complete()
        elif word == "slow":
            await asyncio.sleep(SLOW_SECONDS)
            await updater.complete(_agent_text("Finally"))
        elif word in ("early", "nopush", "linger"):
            if word == "nopush":
                self._agents.silent_tasks.add(task.id)
            await updater.start_work()
            await asyncio.sleep(LINGER_SECONDS if word == "linger" else EARLY_SECONDS)
            await updater.add_artifact([Part(text="ready"), Part(data=_value({"ready": True}))], name="result")
            await updater.complete(_agent_text("Ready"))
        elif word == "huge":  # an answer larger than a target's max_response_bytes (tests set 100 kB)
            await updater.complete(_agent_text("x" * HUGE_CHARS))
        elif word == "fail":
            await updater.failed(_agent_text("Cannot do that"))
        elif word == "reject":
            await updater.reject(_agent_text("Not for me"))
        elif word == "quiet":
            await updater.start_work(_agent_text(f"Thinking about {text}"))
            await updater.complete()
        elif word == "file":
            await updater.add_artifact(
                [Part(raw=b"ORD-1001: 2 items", filename="receipt.txt", media_type="text/plain")], name="receipt")
            await updater.complete(_agent_text("Here is your receipt"))
        else:
            echoed = {"said": text, **_received(message), "auth": _header(context.call_context, "authorization"),
                      "version": _header(context.call_context, "a2a-version"),
                      "traceparent": _header(context.call_context, "traceparent")}
            await updater.add_artifact([Part(data=_value(echoed))], name="echo")
            await updater.complete(_agent_text(f"Echo: {text}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self._agents.canceled.append(context.task_id or "")
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _value(data: dict[str, Any]) -> Value:
    value = Value()
    value.struct_value.update(data)
    return value


class ShopHandler(DefaultRequestHandler):
    """The SDK's handler, with the behaviours a test needs that an executor cannot produce by itself."""

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        word = _first_word(params.message)
        if word == "error":
            raise InvalidParamsError(message="no order number given")
        if word == "ping":
            return Message(message_id="pong-1", role=Role.ROLE_AGENT, parts=[Part(text="pong")],
                           context_id=params.message.context_id or "ctx-ping")
        if word in ("early", "nopush", "linger"):
            params.configuration.return_immediately = True
        return await super().on_message_send(params, context)

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any, None]:
        word = _first_word(params.message)
        if word == "error":
            raise InvalidParamsError(message="no order number given")
        if word == "ping":
            yield Message(message_id="pong-1", role=Role.ROLE_AGENT, parts=[Part(text="pong")],
                          context_id=params.message.context_id or "ctx-ping")
            return
        # Read before the SDK fills in the ids: only the stream that opened the task is dropped.
        drop = word == "drop" and not params.message.task_id
        sent = 0
        async with contextlib.aclosing(super().on_message_send_stream(params, context)) as events:
            async for event in events:
                yield event
                sent += 1
                if drop and sent >= DROP_AFTER:
                    return  # the connection ends here; the agent goes on


class ShopPushSender(BasePushNotificationSender):
    def __init__(self, agents: A2AAgents, client: httpx.AsyncClient,
                 store: InMemoryPushNotificationConfigStore) -> None:
        super().__init__(client, store)
        self._agents = agents

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        if task_id in self._agents.silent_tasks:
            self._agents.pushes_skipped += 1
            return
        await super().send_notification(task_id, event)


def _guarded(app: Starlette, public_paths: set[str]) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """Every request but the public card needs the bearer token."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in public_paths:
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            if headers.get("authorization") != f"Bearer {TOKEN}":
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


class A2AAgents:
    """Every test agent, served from one background thread until `stop()`."""

    def __init__(self) -> None:
        self.canceled: list[str] = []
        self.silent_tasks: set[str] = set()
        self.pushes_skipped = 0
        self._sockets = {name: bind_socket() for name in ("v10", "v03", "basic", "secure", "secure03", "nocard")}
        for sock in self._sockets.values():
            # Accepted connections inherit it: without it every keep-alive request waits 40 ms for a delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.urls = {name: f"http://127.0.0.1:{sock.getsockname()[1]}" for name, sock in self._sockets.items()}
        self.grpc_port = 0
        """Known once started, like `grpc_url` and `grpc03_url`."""
        self.grpc_url = ""
        self.grpc03_url = ""
        self._thread = threading.Thread(target=self._run, name="a2a-agents", daemon=True)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    # -- cards ----------------------------------------------------------------------------------------

    def card(self, name: str) -> AgentCard:
        url = self.urls.get(name, "")
        grpc_target = f"127.0.0.1:{self.grpc_port}"
        if name == "v10":
            return _card("Test Shop", [
                AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0"),
                AgentInterface(url=f"{url}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
                AgentInterface(url=grpc_target, protocol_binding="GRPC", protocol_version="1.0"),
            ])
        if name == "v03":
            return _card("Test Shop", [
                AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="0.3"),
                AgentInterface(url=f"{url}/rest", protocol_binding="HTTP+JSON", protocol_version="0.3"),
                AgentInterface(url=f"http://{grpc_target}", protocol_binding="GRPC", protocol_version="0.3"),
            ])
        if name == "grpc":
            return _card("Test Shop", [
                AgentInterface(url=grpc_target, protocol_binding="GRPC", protocol_version="1.0"),
                AgentInterface(url=f"http://{grpc_target}", protocol_binding="GRPC", protocol_version="0.3"),
            ], extended=True, skills=SKILLS + EXTENDED_SKILLS)
        if name == "basic":
            return _card("Basic Shop", [
                AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0"),
            ], streaming=False, push=False)
        if name in ("secure", "secure03"):
            interfaces = [AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")]
            if name == "secure03":
                interfaces = [
                    AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="0.3"),
                    AgentInterface(url=f"{url}/rest", protocol_binding="HTTP+JSON", protocol_version="0.3"),
                ]
            card = _card("Secure Shop", interfaces, extended=True, skills=SKILLS[:1])
            card.security_schemes["bearer"].CopyFrom(
                SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer")))
            card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
            return card
        raise KeyError(name)

    def secure_extended_card(self) -> AgentCard:
        card = self.card("secure")
        # Both origins serve it: a 0.3 client gets it only when it lists a 0.3 interface too.
        card.supported_interfaces.extend(self.card("secure03").supported_interfaces)
        card.skills.extend(_skills(SECURE_EXTENDED_SKILLS))
        return card

    # -- serving --------------------------------------------------------------------------------------

    def start(self) -> A2AAgents:
        self._thread.start()
        if not self._ready.wait(timeout=20):
            raise RuntimeError("the A2A test agents did not start within 20s")
        if self._failure is not None:
            raise RuntimeError(f"the A2A test agents failed to start: {self._failure!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)
        for sock in self._sockets.values():
            sock.close()

    def __enter__(self) -> A2AAgents:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start(); the thread ends either way
            self._failure = exc
            self._ready.set()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def _handler(self, card: AgentCard, push_client: httpx.AsyncClient, *,
                 extended: AgentCard | None = None) -> ShopHandler:
        store = InMemoryPushNotificationConfigStore()
        return ShopHandler(
            agent_executor=ShopExecutor(self), task_store=InMemoryTaskStore(), agent_card=card,
            push_config_store=store, push_sender=ShopPushSender(self, push_client, store),
            extended_agent_card=extended,
        )

    def _routes(self, handler: ShopHandler, card: AgentCard | None) -> list[BaseRoute]:
        routes: list[BaseRoute] = []
        if card is not None:
            routes += create_agent_card_routes(card)
        for path in ("/a2a", "/a2a/"):
            routes += create_jsonrpc_routes(handler, path, enable_v0_3_compat=True)
        routes += create_rest_routes(handler, enable_v0_3_compat=True, path_prefix="/rest")
        return routes

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        rpc, rpc03 = grpc.aio.server(), grpc.aio.server()
        self.grpc_port = rpc.add_insecure_port("127.0.0.1:0")
        self.grpc_url = f"grpc://127.0.0.1:{self.grpc_port}"
        self.grpc03_url = f"grpc://127.0.0.1:{rpc03.add_insecure_port('127.0.0.1:0')}"
        async with httpx.AsyncClient(timeout=5) as push_client:
            main = self._handler(self.card("grpc"), push_client, extended=self.card("grpc"))
            basic = self._handler(self.card("basic"), push_client)
            secure = self._handler(self.card("secure"), push_client, extended=self.secure_extended_card())
            apps: dict[int, Any] = {}
            for name, handler, card in (("v10", main, self.card("v10")), ("v03", main, self.card("v03")),
                                        ("basic", basic, self.card("basic")), ("secure", secure, None),
                                        ("secure03", secure, None), ("nocard", main, None)):
                app: Any = Starlette(routes=self._routes(handler, card))
                if name.startswith("secure"):
                    app = Starlette(routes=[*create_agent_card_routes(self.card(name)),
                                            *self._routes(handler, None)])
                    app = _guarded(app, {"/.well-known/agent-card.json"})
                apps[self._sockets[name].getsockname()[1]] = app

            async def by_port(scope: Scope, receive: Receive, send: Send) -> None:
                await apps[scope["server"][1]](scope, receive, send)

            config = uvicorn.Config(by_port, log_level="warning", lifespan="off", access_log=False,
                                    timeout_graceful_shutdown=1)
            server = uvicorn.Server(config)
            server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
            a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(main), rpc)
            a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(CompatGrpcHandler(main), rpc)
            a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(CompatGrpcHandler(main), rpc03)
            await rpc.start()
            await rpc03.start()
            serving = asyncio.create_task(server.serve(sockets=list(self._sockets.values())))
            try:
                for _ in range(500):
                    if server.started or serving.done():
                        break
                    await asyncio.sleep(0.01)
                if serving.done():
                    serving.result()
                self._ready.set()
                await self._stop.wait()
            finally:
                server.should_exit = True
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(serving, timeout=5)
                await rpc.stop(grace=0.5)
                await rpc03.stop(grace=0.5)
                for handler in (main, basic, secure):
                    with contextlib.suppress(BaseException):
                        await asyncio.wait_for(handler.aclose(), timeout=2)
