"""A stand-in tracing backend, as Jaeger and Tempo are to an agent in production: it ingests the agent's OTLP/HTTP
export (`POST /v1/traces`, protobuf, what the OpenTelemetry SDK's exporter sends) and answers
`GET /api/traces/{traceId}` the way the backend's query API does:

- `jaeger`: the query service's JSON, `{"data": [{"traceID", "spans", "processes"}], "errors": null}`, made by
  the OpenTelemetry-to-Jaeger mapping (opentelemetry-collector-contrib pkg/translator/jaeger): times in
  microseconds, attributes as typed tags, `span.kind` unless internal, `otel.status_code` /
  `otel.status_description` and `error: true`, the parent as the first `CHILD_OF` reference, events as logs
  with an `event` field, the instrumentation scope as `otel.scope.name`; a 404 with `{"data": null, "errors":
  [{"code": 404, "msg": "trace not found"}]}`.
- `tempo`: OTLP JSON as Tempo marshals it with gogo's jsonpb: `{"batches": [ResourceSpans]}`, base64 ids and
  enum names; a 404 with `trace not found`.

A trace is served `visible_after` seconds after its last span arrived (a backend's ingest delay), and never when
`hide` says so of its spans (an exporter that lost them)."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

_KINDS = {2: "server", 3: "client", 4: "producer", 5: "consumer"}


class TraceBackend:
    def __init__(self, kind: str, visible_after: float = 0.0, shape: str = "v1") -> None:
        self.kind = kind
        self.shape = shape
        self.visible_after = visible_after
        self.hide: Callable[[list[Span]], bool] = lambda spans: False
        self.queries: list[str] = []
        self.authorizations: list[str | None] = []
        """Each query's Authorization header (a URL's `user:password@` is sent as one)."""
        self.headers: dict[str, list[str]] = {}
        """Every header of the queries, by name (lowercase)."""
        self._traces: dict[str, list[tuple[Resource, InstrumentationScope, Span]]] = {}
        self._last: dict[str, float] = {}

    async def ingest(self, request: Request) -> Response:
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.body())
        for resource_spans in export.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    trace_id = span.trace_id.hex()
                    self._traces.setdefault(trace_id, []).append((resource_spans.resource, scope_spans.scope, span))
                    self._last[trace_id] = time.monotonic()
        return Response(b"", media_type="application/x-protobuf")

    async def trace(self, request: Request) -> Response:
        trace_id = request.path_params["trace_id"].lower()
        self.queries.append(trace_id)
        self.authorizations.append(request.headers.get("authorization"))
        for name, value in request.headers.items():
            self.headers.setdefault(name, []).append(value)
        spans = self._traces.get(trace_id)
        early = spans and time.monotonic() - self._last[trace_id] < self.visible_after
        if not spans or early or self.hide([span for _, _, span in spans]):
            if self.kind == "jaeger":
                return JSONResponse({"data": None, "total": 0, "limit": 0, "offset": 0,
                                     "errors": [{"code": 404, "msg": "trace not found"}]}, status_code=404)
            return PlainTextResponse("trace not found", status_code=404)
        return JSONResponse(_jaeger(trace_id, spans) if self.kind == "jaeger" else _tempo(spans, self.shape))

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/traces", self.ingest, methods=["POST"]),
                                 Route("/api/traces/{trace_id}", self.trace, methods=["GET"])])


def _tempo(spans: list[tuple[Resource, InstrumentationScope, Span]], shape: str) -> dict[str, Any]:
    """`v1`: `{"batches"}` with base64 ids, as gogo's jsonpb writes bytes; `legacy`: the same with OTLP's
    pre-0.15 `instrumentationLibrarySpans`; `v2`: the v2 path's `{"trace": {"resourceSpans"}}` with hex ids."""
    batches: list[dict[str, Any]] = []
    for resource, scope, span in spans:
        batch = json_format.MessageToDict(ResourceSpans(resource=resource,
                                                        scope_spans=[ScopeSpans(scope=scope, spans=[span])]))
        if shape == "legacy":
            batch["instrumentationLibrarySpans"] = [{"instrumentationLibrary": s.get("scope", {}), "spans": s["spans"]}
                                                    for s in batch.pop("scopeSpans")]
        batches.append(batch)
    if shape == "v2":
        return {"trace": {"resourceSpans": _hex_ids(batches)}, "status": "COMPLETE"}
    return {"batches": batches}


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_ids(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


def _jaeger(trace_id: str, spans: list[tuple[Resource, InstrumentationScope, Span]]) -> dict[str, Any]:
    processes: dict[str, dict[str, Any]] = {}
    converted = []
    for resource, scope, span in spans:
        resource_tags = [_tag(pair.key, pair.value) for pair in resource.attributes]
        service = next((t["value"] for t in resource_tags if t["key"] == "service.name"), "unknown")
        process_id = next((pid for pid, p in processes.items() if p["tags"] == resource_tags), None)
        if process_id is None:
            process_id = f"p{len(processes) + 1}"
            processes[process_id] = {"serviceName": service, "tags": resource_tags}
        tags = [_tag(pair.key, pair.value) for pair in span.attributes]
        if scope.name:  # the translator's scope tags
            tags.append({"key": "otel.scope.name", "type": "string", "value": scope.name})
        if span.kind in _KINDS:
            tags.append({"key": "span.kind", "type": "string", "value": _KINDS[span.kind]})
        if span.status.code == 1:
            tags.append({"key": "otel.status_code", "type": "string", "value": "OK"})
        elif span.status.code == 2:
            tags.append({"key": "otel.status_code", "type": "string", "value": "ERROR"})
            tags.append({"key": "error", "type": "bool", "value": True})
            if span.status.message:
                tags.append({"key": "otel.status_description", "type": "string", "value": span.status.message})
        references = [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": span.parent_span_id.hex()}] \
            if span.parent_span_id else []
        converted.append({
            "traceID": trace_id, "spanID": span.span_id.hex(), "operationName": span.name, "flags": 1,
            "references": references, "startTime": span.start_time_unix_nano // 1000,
            "duration": (span.end_time_unix_nano - span.start_time_unix_nano) // 1000, "tags": tags,
            "logs": [{"timestamp": event.time_unix_nano // 1000,
                      "fields": [{"key": "event", "type": "string", "value": event.name},
                                 *(_tag(pair.key, pair.value) for pair in event.attributes)]}
                     for event in span.events],
            "processID": process_id, "warnings": None})
    return {"data": [{"traceID": trace_id, "spans": converted, "processes": processes, "warnings": None}],
            "total": 0, "limit": 0, "offset": 0, "errors": None}


def _tag(key: str, value: AnyValue) -> dict[str, Any]:
    kind = value.WhichOneof("value")
    if kind == "bool_value":
        return {"key": key, "type": "bool", "value": value.bool_value}
    if kind == "int_value":
        return {"key": key, "type": "int64", "value": value.int_value}
    if kind == "double_value":
        return {"key": key, "type": "float64", "value": value.double_value}
    if kind == "string_value":
        return {"key": key, "type": "string", "value": value.string_value}
    return {"key": key, "type": "string", "value": json_format.MessageToJson(value, indent=None)}
