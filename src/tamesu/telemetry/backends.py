"""Traces as a tracing backend's query API returns them, read into the spans tamesu keeps.

- Jaeger (`GET /api/traces/{traceId}` of the query service): `{"data": [{"traceID", "spans", "processes"}]}`,
  each span with `operationName`, `references` (its parent is the `CHILD_OF` one), `startTime` and `duration`
  in microseconds, `tags` typed key/values and `processID` naming a process whose `serviceName` is the
  service. The OpenTelemetry-to-Jaeger mapping puts the span kind in the `span.kind` tag, the status in
  `otel.status_code` / `otel.status_description` (and `error: true`), an event's name in its log's `event`
  field; those tags are read back into the span's own fields.
- Tempo (`GET /api/traces/{traceId}`, `Accept: application/json`): OTLP JSON as Tempo marshals it: the resource
  spans under `batches` (`resourceSpans` too, and under `trace` as the v2 path answers), ids in base64 where
  OTLP/JSON has hex, `instrumentationLibrarySpans` in versions before OTLP 0.15: all read.
"""

from __future__ import annotations

import base64
import binascii

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tamesu.matching import one_line
from tamesu.telemetry.spans import BadExport, Span, SpanEvent, SpanStatus, spans_of
from tamesu.telemetry.traceparent import OWN_SCOPE
from tamesu.types import JSONObject, JSONValue, json_list, json_object

_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_RENAMED = {"instrumentationLibrarySpans": "scopeSpans", "instrumentationLibrary": "scope"}
_JAEGER_STATUS: dict[str, SpanStatus] = {"OK": "ok", "ERROR": "error", "UNSET": "unset"}
_JAEGER_FIELDS = {"span.kind", "otel.status_code", "otel.status_description", "error"}


def tempo_spans(document: JSONValue) -> list[Span]:
    """The spans of a Tempo trace-by-id answer (v1 or v2 path)."""
    if isinstance(document, dict) and isinstance(document.get("trace"), dict):
        document = document["trace"]
    if not isinstance(document, dict):
        raise BadExport("not a Tempo trace: expected a JSON object")
    batches = document.get("batches", document.get("resourceSpans", []))
    if not isinstance(batches, list):
        raise BadExport("not a Tempo trace: `batches` is not a list")
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict({"resourceSpans": _otlp(batches)}, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError) as exc:
        raise BadExport(f"not a Tempo trace: {one_line(str(exc), 200)}") from None
    return list(spans_of(request))


def _otlp(value: JSONValue, key: str = "") -> JSONValue:
    """Tempo's JSON as protobuf's JSON mapping: ids in base64 (hex ones converted), old field names renamed."""
    if isinstance(value, dict):
        return {_RENAMED.get(k, k): _otlp(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_otlp(item) for item in value]
    if key in _ID_FIELDS and isinstance(value, str):
        return _base64_id(value, _ID_FIELDS[key])
    return value


def _base64_id(text: str, size: int) -> str:
    if len(text) == size * 2:
        try:
            return base64.b64encode(bytes.fromhex(text)).decode()
        except ValueError:
            pass  # 32 characters of base64 are not a 16-byte id's: it is not hex either way
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadExport(f"a trace or span id is neither hex nor base64: {text[:40]!r}") from None
    return text


def jaeger_spans(document: JSONValue) -> list[Span]:
    """The spans of a Jaeger query-service answer (`{"data": [trace, ...]}`)."""
    if not isinstance(document, dict) or not isinstance(document.get("data") or [], list):
        raise BadExport("not a Jaeger answer: expected {\"data\": [traces]}")
    spans: list[Span] = []
    for trace in json_list(document.get("data")):
        if not isinstance(trace, dict):
            continue
        processes = json_object(trace.get("processes"))
        for raw in json_list(trace.get("spans")):
            if isinstance(raw, dict) and not _own(raw):
                spans.append(_jaeger_span(raw, processes))
    return spans


def _own(raw: JSONObject) -> bool:
    """A span of tamesu's own (exported to the backend the agent exports to): the translator writes its scope as a
    tag, `otel.scope.name` (`otel.library.name` before OpenTelemetry renamed it)."""
    return any(isinstance(pair, dict) and pair.get("key") in ("otel.scope.name", "otel.library.name")
               and pair.get("value") == OWN_SCOPE for pair in json_list(raw.get("tags")))


def _jaeger_span(raw: JSONObject, processes: JSONObject) -> Span:
    try:
        tags = _tags(raw.get("tags"))
        parent = next((ref.get("spanID") for ref in json_list(raw.get("references"))
                       if isinstance(ref, dict) and ref.get("refType") == "CHILD_OF"), None)
        start_us = _int(raw.get("startTime") or 0)
        duration_us = _int(raw.get("duration") or 0)
        process = processes.get(str(raw.get("processID")), {})
        status = _JAEGER_STATUS.get(str(tags.get("otel.status_code", "")).upper(),
                                    "error" if tags.get("error") is True else "unset")
        events = [_jaeger_event(log) for log in json_list(raw.get("logs")) if isinstance(log, dict)]
        # validated as written, so a service name that is not text is refused as the span's fault
        return Span.model_validate({
            "trace_id": _hex_id(raw.get("traceID"), 16), "span_id": _hex_id(raw.get("spanID"), 8),
            "parent_span_id": _hex_id(parent, 8) if parent else None, "name": str(raw.get("operationName", "")),
            "kind": str(tags.get("span.kind", "internal")),
            "service": process.get("serviceName") if isinstance(process, dict) else None,
            "start_unix_nano": start_us * 1000, "end_unix_nano": (start_us + duration_us) * 1000, "status": status,
            "status_message": str(tags.get("otel.status_description", "")),
            "attributes": {k: v for k, v in tags.items() if k not in _JAEGER_FIELDS}, "events": events})
    except (TypeError, ValueError) as exc:
        raise BadExport(f"not a Jaeger span: {one_line(str(exc), 200)}") from None


def _hex_id(value: JSONValue, size: int) -> str:
    """Jaeger drops an id's leading zeros (a 64-bit trace id too): padded back to W3C's width."""
    text = str(value or "").lower()
    if not text or len(text) > size * 2 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"an id is not hex: {text[:40]!r}")
    return text.rjust(size * 2, "0")


def _int(value: JSONValue) -> int:
    if isinstance(value, list | dict) or value is None:
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return int(value)


def _tags(pairs: JSONValue) -> JSONObject:
    tags: JSONObject = {}
    for pair in json_list(pairs):
        if isinstance(pair, dict) and "key" in pair:
            tags[str(pair["key"])] = _tag_value(pair)
    return tags


def _tag_value(pair: JSONObject) -> JSONValue:
    value, kind = pair.get("value"), pair.get("type", "string")
    if kind == "int64":
        return int(str(value))
    if kind == "float64":
        return float(str(value))
    if kind == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    # an OpenTelemetry array attribute reaches Jaeger as a JSON list in a string, and stays one: a string
    # attribute that holds JSON (gen_ai.input.messages) cannot be told from it
    return value


def _jaeger_event(log: JSONObject) -> SpanEvent:
    fields = _tags(log.get("fields"))
    name = fields.pop("event", "")
    return SpanEvent(name=str(name), at_unix_nano=_int(log.get("timestamp") or 0) * 1000, attributes=dict(fields))
