"""Agents instrumented with the real OpenTelemetry SDK, exporting their spans over OTLP/HTTP (protobuf through
the SDK's own exporter, JSON through the SDK's encoding of the same spans), with GenAI-convention spans for
their model and tool calls. Their answers are text only: the tool calls are only in the spans."""

from __future__ import annotations

import base64
import json
import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
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
        response = httpx.post(self._url, json=document, timeout=5)
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


def provider(endpoint: str, encoding: str = "protobuf", batch_delay_ms: int | None = None,
             service: str = "traced-agent") -> TracerProvider:
    exporter: SpanExporter = JsonExporter(endpoint) if encoding == "json" else \
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=5)
    made = TracerProvider(resource=Resource.create({"service.name": service}))
    # a batch with a delay sends its spans after the turn was answered: late spans
    made.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=batch_delay_ms)
                            if batch_delay_ms is not None else SimpleSpanProcessor(exporter))
    return made


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
                 extra_spans: int = 0, fail_tool: bool = False) -> None:
        self.provider = provider(endpoint, encoding, batch_delay_ms)
        self.tracer = self.provider.get_tracer("traced-agent")
        self.extra_spans = extra_spans
        self.fail_tool = fail_tool
        self.seen: list[tuple[str, str | None]] = []

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        message = str(body.get("message", ""))
        self.seen.append((message, request.headers.get("traceparent")))
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

    def shutdown(self) -> None:
        self.provider.force_flush(5000)
        self.provider.shutdown()
