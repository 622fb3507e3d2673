"""Agents instrumented with the real OpenTelemetry SDK, exporting their spans over OTLP/HTTP (protobuf through
the SDK's own exporter, JSON through the SDK's encoding of the same spans), with GenAI-convention spans for
their model and tool calls. Their answers are text only: the tool calls are only in the spans."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_IDS = ("traceId", "spanId", "parentSpanId")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JsonExporter(SpanExporter):
    """OTLP/HTTP with `application/json`: the SDK's own protobuf encoding of the spans, in OTLP's JSON mapping
    (hex ids), posted as the JS SDK's JSON exporter does."""

    def __init__(self, endpoint: str) -> None:
        self._url = f"{endpoint}/v1/traces"
        self.posted: list[dict[str, Any]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        document = _hex_ids(json_format.MessageToDict(encode_spans(spans)))
        self.posted.append(document)
        # a starved receiver is slow, not gone: at 5 s its spans were lost ("never came")
        response = httpx.post(self._url, json=document, timeout=30)
        return SpanExportResult.SUCCESS if response.status_code == 200 else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return None


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: base64.b64decode(v).hex() if k in _IDS and isinstance(v, str) else _hex_ids(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


class SkewedExporter(SpanExporter):
    """Exports each span as an agent whose clock is `skew_s` off tamesu's records it (a process on another
    machine, a container's clock): its start and end moved by the skew."""

    def __init__(self, inner: SpanExporter, skew_s: float) -> None:
        self.inner = inner
        self.skew_ns = int(skew_s * 1e9)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([ReadableSpan(
            name=s.name, context=s.context, parent=s.parent, resource=s.resource, attributes=s.attributes,
            events=s.events, links=s.links, kind=s.kind, status=s.status,
            start_time=(s.start_time or 0) + self.skew_ns, end_time=(s.end_time or 0) + self.skew_ns,
            instrumentation_scope=s.instrumentation_scope) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()


class HeldSpans(SpanProcessor):
    """Keeps every span that ends until `release()`, then sends those and every later one as it ends: spans late
    by an event (a later conversation's first request), where a batch's delay is a clock that a starved process
    can outrun (a niced worker graded its run after spans 1.5 s late had come)."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.inner = SimpleSpanProcessor(exporter)
        self.held: list[ReadableSpan] = []
        self.released = False
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            if not self.released:
                self.held.append(span)
                return
        self.inner.on_end(span)

    def release(self) -> None:
        with self._lock:
            self.released, held, self.held = True, self.held, []
        for span in held:
            self.inner.on_end(span)

    def shutdown(self) -> None:
        self.release()
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class LaterSpans(SpanProcessor):
    """Sends each span as it ends, those named in `later` `after_s` later (an exporter of another process, a
    span whose export was held, a batching exporter's next batch)."""

    def __init__(self, inner: SpanProcessor, later: set[str], after_s: float) -> None:
        self.inner, self.later, self.after_s = inner, later, after_s
        self.timers: list[threading.Timer] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if span.name not in self.later:
            self.inner.on_end(span)
            return
        timer = threading.Timer(self.after_s, self.inner.on_end, [span])
        self.timers.append(timer)
        timer.start()

    def shutdown(self) -> None:
        for timer in self.timers:
            timer.join()
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def provider(endpoint: str, encoding: str = "protobuf", batch_delay_ms: int | None = None,
             service: str = "traced-agent", held: bool = False,
             skew_s: float = 0.0) -> tuple[TracerProvider, SpanProcessor]:
    exporter: SpanExporter = JsonExporter(endpoint) if encoding == "json" else \
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30)
    if skew_s:
        exporter = SkewedExporter(exporter, skew_s)
    made = TracerProvider(resource=Resource.create({"service.name": service}))
    # a batch with a delay sends its spans after the turn was answered: late spans
    processor: SpanProcessor = HeldSpans(exporter) if held else \
        BatchSpanProcessor(exporter, schedule_delay_millis=batch_delay_ms) if batch_delay_ms is not None else \
        SimpleSpanProcessor(exporter)
    made.add_span_processor(processor)
    return made, processor


ORDER = re.compile(r"ORD-\d+")


def handle_turn(tracer: trace.Tracer, carrier: Mapping[str, str], message: str, *, extra_spans: int = 0,
                fail_tool: bool = False) -> str:
    """One turn of the shop agent, traced: an `invoke_agent` span under the caller's traceparent, a `chat`
    span with token usage, and an `execute_tool lookup_order` span with its arguments when an order is named."""
    parent = TraceContextTextMapPropagator().extract(carrier=dict(carrier))
    with tracer.start_as_current_span("invoke_agent shop", context=parent, kind=SpanKind.SERVER,
                                      attributes={"gen_ai.operation.name": "invoke_agent",
                                                  "app.message": message}):
        with tracer.start_as_current_span("chat fake-model", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model",
                "gen_ai.usage.input_tokens": 40 + len(message), "gen_ai.usage.output_tokens": 12}):
            pass
        reply = "How can I help?"
        if (order := ORDER.search(message)) is not None:
            with tracer.start_as_current_span("execute_tool lookup_order", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                    "gen_ai.tool.call.arguments": json.dumps({"order_id": order.group(0)})}) as span:
                if fail_tool:
                    span.set_status(Status(StatusCode.ERROR, "order service down"))
                    reply = "Sorry, I cannot look that up now."
                else:
                    span.set_status(Status(StatusCode.OK))
                    reply = f"Order {order.group(0)} has shipped."
        for number in range(extra_spans):
            with tracer.start_as_current_span(f"retrieve chunk {number}"):
                pass
        return reply


class TracedRestAgent:
    """POST /chat {message} -> {text}: nothing but text; its spans go to the receiver."""

    def __init__(self, endpoint: str, encoding: str = "protobuf", batch_delay_ms: int | None = None,
                 extra_spans: int = 0, fail_tool: bool = False, release_at_request: int | None = None) -> None:
        """`release_at_request=N`: the spans of the requests before the Nth are held until it arrives."""
        self.provider, self.processor = provider(endpoint, encoding, batch_delay_ms,
                                                 held=release_at_request is not None)
        self.release_at_request = release_at_request
        self.tracer = self.provider.get_tracer("traced-agent")
        self.extra_spans = extra_spans
        self.fail_tool = fail_tool
        self.seen: list[tuple[str, str | None]] = []

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        message = str(body.get("message", ""))
        self.seen.append((message, request.headers.get("traceparent")))
        if len(self.seen) == self.release_at_request and isinstance(self.processor, HeldSpans):
            self.processor.release()
        text = handle_turn(self.tracer, request.headers, message, extra_spans=self.extra_spans,
                           fail_tool=self.fail_tool)
        return JSONResponse({"text": text})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/chat", self.chat, methods=["POST"])])

    def unrelated_trace(self) -> None:
        """A span of a trace no test sent (the agent's own housekeeping)."""
        with self.tracer.start_as_current_span("cache refresh", context=trace.set_span_in_context(
                trace.INVALID_SPAN)):
            pass

    def shutdown(self, flush: bool = True) -> None:
        """`flush=False`: what is still batched is dropped (its receiver is gone: a flush would retry for 30 s)."""
        if not flush and isinstance(self.processor, BatchSpanProcessor):
            self.processor._batch_processor._exporter.shutdown()  # the SDK's one way to drop what a batch holds
        else:
            self.provider.force_flush(5000)
        self.provider.shutdown()


class TracedRealtimeAgent:
    """A Realtime agent in text mode: a `realtime session` span under the handshake's traceparent (the
    conversation's trace) when it connects, and each `response.create`'s turn traced under the
    `response.metadata.traceparent` it carries, as an agent reading the metadata would."""

    def __init__(self, endpoint: str, encoding: str = "protobuf", skew_s: float = 0.0,
                 conversation_turns: bool = False, then_says: str | None = None,
                 session_sent_after_s: float | None = None) -> None:
        """`skew_s`: its clock that far off tamesu's. `conversation_turns`: each turn also has a `voice turn`
        span on the conversation's trace (under the connection's span), as a voice agent traces its turns.
        `then_says`: 0.3 s after answering a message with "thanks" in it, it says this unasked (its `voice turn`
        span, on the conversation's trace, too). `session_sent_after_s`: the connection's span lasts as long as
        the connection and is sent that long after it ends (a batching exporter's next batch)."""
        self.then_says = then_says
        if session_sent_after_s is None:
            self.provider, _processor = provider(endpoint, encoding, service="traced-voice-agent", skew_s=skew_s)
        else:  # its connection's span sent later, the rest as each ends
            self.provider = TracerProvider(resource=Resource.create({"service.name": "traced-voice-agent"}))
            self.provider.add_span_processor(LaterSpans(
                SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30)),
                {"realtime session"}, session_sent_after_s))
        self.tracer = self.provider.get_tracer("traced-voice-agent")
        self.conversation_turns = conversation_turns
        self.session_lasts = session_sent_after_s is not None

    async def handle(self, websocket: Any) -> None:
        conversation = TraceContextTextMapPropagator().extract(carrier=dict(websocket.headers))
        with self.tracer.start_as_current_span("realtime session", context=conversation, kind=SpanKind.SERVER):
            session = trace.set_span_in_context(trace.get_current_span())
            if self.session_lasts:  # the span ends with the connection
                await self._talk(websocket, session)
                return
        await self._talk(websocket, session)

    async def _talk(self, websocket: Any, session: Context) -> None:
        from starlette.websockets import WebSocketDisconnect

        await websocket.accept()
        await websocket.send_json({"type": "session.created", "session": {}})
        said = ""
        try:
            while True:
                event = json.loads(await websocket.receive_text())
                if event["type"] == "session.update":
                    await websocket.send_json({"type": "session.updated", "session": event["session"]})
                elif event["type"] == "conversation.item.create":
                    said = " ".join(c.get("text", "") for c in event["item"].get("content", []))
                elif event["type"] == "response.create":
                    metadata = (event.get("response") or {}).get("metadata") or {}
                    reply = handle_turn(self.tracer, {"traceparent": metadata.get("traceparent", "")}, said)
                    if self.conversation_turns:
                        with self.tracer.start_as_current_span("voice turn", context=session,
                                                               attributes={"app.said": said}):
                            pass
                    response = {"id": f"resp_{id(event)}", "metadata": metadata}
                    await websocket.send_json({"type": "response.created",
                                               "response": {**response, "status": "in_progress"}})
                    await websocket.send_json({"type": "response.output_text.delta", "response_id": response["id"],
                                               "delta": reply})
                    await websocket.send_json({"type": "response.done",
                                               "response": {**response, "status": "completed"}})
                    if self.then_says is not None and "thanks" in said:
                        await asyncio.sleep(0.3)
                        with self.tracer.start_as_current_span("voice turn", context=session,
                                                               attributes={"app.said": self.then_says}):
                            pass
                        unasked = {"id": f"resp_{id(self)}_unasked", "metadata": {}}
                        await websocket.send_json({"type": "response.created",
                                                   "response": {**unasked, "status": "in_progress"}})
                        await websocket.send_json({"type": "response.output_text.delta",
                                                   "response_id": unasked["id"], "delta": self.then_says})
                        await websocket.send_json({"type": "response.done",
                                                   "response": {**unasked, "status": "completed"}})
        except WebSocketDisconnect:
            return

    def app(self) -> Starlette:
        from starlette.routing import WebSocketRoute

        return Starlette(routes=[WebSocketRoute("/realtime", self.handle)])

    def shutdown(self) -> None:
        self.provider.force_flush(5000)
        self.provider.shutdown()


class TracedA2AAgent:
    """An A2A agent (the a2a-sdk's JSON-RPC server) that answers each message with a text message and traces
    the turn under the request's `traceparent` header."""

    def __init__(self, endpoint: str, encoding: str = "protobuf") -> None:
        from a2a.helpers import get_message_text
        from a2a.server.agent_execution import AgentExecutor, RequestContext
        from a2a.server.events import EventQueue
        from a2a.server.request_handlers import DefaultRequestHandler
        from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
        from a2a.server.tasks import InMemoryTaskStore
        from a2a.types.a2a_pb2 import AgentInterface

        from agents.a2a_agents import _agent_text, _card, _header

        self.provider, _processor = provider(endpoint, encoding, service="traced-a2a-agent")
        tracer = self.tracer = self.provider.get_tracer("traced-a2a-agent")

        class Executor(AgentExecutor):
            async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
                assert context.message is not None
                carrier = {"traceparent": _header(context.call_context, "traceparent") or ""}
                reply = handle_turn(tracer, carrier, get_message_text(context.message))
                await event_queue.enqueue_event(_agent_text(reply))

            async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
                return None

        self.card = _card("Traced Shop", [AgentInterface(url="http://127.0.0.1:1/a2a", protocol_binding="JSONRPC",
                                                         protocol_version="1.0")], streaming=False, push=False)
        handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(),
                                        agent_card=self.card)
        self._routes = [*create_agent_card_routes(self.card), *create_jsonrpc_routes(handler, "/a2a")]

    def app(self) -> Starlette:
        return Starlette(routes=self._routes)

    def served_at(self, url: str) -> None:
        """The card names where it is served, known once the server has its port."""
        self.card.supported_interfaces[0].url = f"{url}/a2a"

    def shutdown(self) -> None:
        self.provider.force_flush(5000)
        self.provider.shutdown()
