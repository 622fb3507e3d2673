"""The agent's own spans as tamesu keeps them, read from an OTLP/HTTP export (protobuf or JSON).

OTLP/JSON is the protobuf messages' JSON mapping except that trace and span ids are hex, not base64: the ids
are turned into what `json_format` expects, so both encodings go through one decoder of the same messages.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from pydantic import BaseModel, Field

from tamesu.matching import one_line
from tamesu.telemetry.traceparent import OWN_SCOPE
from tamesu.types import JSONValue

SCHEMA_VERSION = 1

SpanStatus = Literal["unset", "ok", "error"]
_STATUS: dict[int, SpanStatus] = {0: "unset", 1: "ok", 2: "error"}
_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_ID_FIELDS = {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}


class SpanEvent(BaseModel):
    name: str
    at_unix_nano: int = 0
    attributes: dict[str, object] = Field(default_factory=dict)


class Span(BaseModel):
    """One span of the agent's, with the turn it was matched to (None: the conversation's, before any turn)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    name: str
    kind: str = "internal"
    service: str | None = None
    """The exporting process's `service.name`."""
    start_unix_nano: int = 0
    end_unix_nano: int = 0
    status: SpanStatus = "unset"
    status_message: str = ""
    attributes: dict[str, object] = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    turn: int | None = None

    @property
    def duration_ms(self) -> float:
        return max(0.0, (self.end_unix_nano - self.start_unix_nano) / 1e6)


class SpansFile(BaseModel):
    """spans.json: the agent's spans of one run, and how many were not kept."""

    schema_version: int = SCHEMA_VERSION
    received: int = 0
    """Spans of this run's traces that reached the receiver before it was graded."""
    over_limit: int = 0
    """Received past `max_spans` and not kept: the run's result says so."""
    max_spans: int = 0
    not_found: list[str] = Field(default_factory=list)
    """With `traces.query`: this run's trace ids the backend did not have within `traces.wait`."""
    turn_started_unix_nano: dict[str, int] = Field(default_factory=dict)
    """When tamesu sent each turn (by turn number), on the agent's clock (tamesu's plus `clock_skew_ms`):
    where a waterfall starts."""
    incomplete: list[str] = Field(default_factory=list)
    """This run's trace ids some spans of which came, but not the agent's span under tamesu's (the one its
    `traceparent` named) within `traces.wait`: a trace's root ends last and a batching exporter sends it last,
    so more of the trace may have come too late (or the agent's caller exports elsewhere)."""
    shared: list[str] = Field(default_factory=list)
    """This run's trace ids that another run sent too while both were going (a suite's own fixed
    `traceparent`, runs in parallel): each run got every span of them, whose they are cannot be told."""
    other_spans: int = 0
    """Spans of traces no run sent that reached the receiver while this run went (the agent's, or a gateway's in
    front of it, that start traces of their own instead of continuing the `traceparent` they are sent; another
    process's): why a trace of this run's never came, when it did not."""
    runs_alongside: int = 0
    """The other runs that went at some time while this one did (`--parallel`): `other_spans` may be theirs too,
    as no span of a trace no run sent tells which run's agent it is of."""
    clock_skew_ms: float = 0.0
    """The agent's clock ahead of tamesu's (negative: behind), as the traces each turn sent alone showed it
    (their spans cannot start before the turn was sent, nor after it was answered); 0 when they show none.
    The spans of the conversation's trace were placed on turns with it taken off."""
    silent: str = ""
    """Why this run's agent is taken to send no spans: none of its spans came in a whole `traces.wait` since
    tamesu started (`no span from shop came in 2s ...: is it instrumented and exporting to URL?`); said by the
    run that found it (`silent_said`) and kept by each later run that waited less (`waited_s`) and heard none."""
    silent_said: bool = False
    waited_s: float | None = None
    """The wait this run gave its spans when it was shorter than `traces.wait`: a quarter of it, for an agent
    found silent (`silent`)."""
    spans: list[Span] = Field(default_factory=list)

    def numbers_masked(self, mask: Callable[[str], str]) -> SpansFile:
        """The spans with every number attribute whose digits hold a secret written as masked text: the
        artifacts' masking reads text, and an agent that records a numeric secret (a PIN, an account number)
        as an int attribute would otherwise have it on disk, in the store and in the reports."""
        changed = False

        def masked(value: object) -> object:
            nonlocal changed
            if isinstance(value, int | float) and not isinstance(value, bool):
                text = str(value)
                if (hidden := mask(text)) != text:
                    changed = True
                    return hidden
                return value
            if isinstance(value, list):
                return [masked(item) for item in value]
            if isinstance(value, dict):
                return {key: masked(item) for key, item in value.items()}
            return value

        spans = [span.model_copy(update={
            "attributes": masked(span.attributes),
            "events": [e.model_copy(update={"attributes": masked(e.attributes)}) for e in span.events]})
            for span in self.spans]
        return self.model_copy(update={"spans": spans}) if changed else self


MAX_VALUE_CHARS = 64 * 1024
"""An attribute's text (a string, or bytes as hex) is kept whole up to this many characters; a longer one is cut
there and marked, so one span's 20 MB attribute does not fill spans.json, the store and every report."""


class BadExport(ValueError):
    """A body that is no OTLP trace export: the receiver answers 400 with this line."""


@dataclass
class Export:
    """What one export request gave: its spans, those left out, and the attribute values cut."""

    spans: list[Span]
    rejected: int = 0
    """Spans left out (an id that is not hex, or not of W3C's length); the rest are kept, as OTLP's partial
    success says to the exporter."""
    why: str = ""
    """The first rejected span's reason."""
    cut: int = 0
    """Attribute values longer than MAX_VALUE_CHARS, cut."""


def decode(body: bytes, content_type: str) -> Export:
    """The spans of one `/v1/traces` request body, by its content type (protobuf unless it says JSON)."""
    request = ExportTraceServiceRequest()
    rejected, why = 0, ""
    if "json" in content_type.lower():
        try:
            document = json.loads(body)
            if not isinstance(document, dict):
                raise ValueError("expected a JSON object")
            document, rejected, why = _hex_spans(document)
            json_format.ParseDict(document, request, ignore_unknown_fields=True)
        except (ValueError, json_format.ParseError) as exc:
            raise BadExport(f"not an OTLP/JSON trace export: {one_line(str(exc), 200)}") from None
    else:
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise BadExport(f"not an OTLP protobuf trace export: {exc}") from None
    cut = [0]
    spans = list(spans_of(request, cut))
    sent = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
    if sent > len(spans):
        rejected += sent - len(spans)
        why = why or "a trace or span id is not of W3C's length (16 and 8 bytes)"
    return Export(spans, rejected, why, cut[0])


def _hex_spans(document: dict[str, JSONValue]) -> tuple[dict[str, JSONValue], int, str]:
    """The export with its ids as protobuf's JSON mapping wants them; a span whose id is not hex is left out
    (counted, the first one's reason kept), not the whole export with it."""
    rejected, why = 0, ""

    def kept(spans: JSONValue) -> JSONValue:
        nonlocal rejected, why
        if not isinstance(spans, list):
            return _base64_ids(spans)
        out = []
        for span in spans:
            try:
                out.append(_base64_ids(span))
            except BadExport as exc:
                rejected, why = rejected + 1, why or str(exc)
        return out

    def scopes(value: JSONValue) -> JSONValue:
        if not isinstance(value, list):
            return _base64_ids(value)
        return [{k: kept(v) if k == "spans" else _base64_ids(v) for k, v in scope.items()}
                if isinstance(scope, dict) else _base64_ids(scope) for scope in value]

    resources = document.get("resourceSpans")
    converted = {k: v for k, v in document.items() if k != "resourceSpans"}
    if isinstance(resources, list):
        converted["resourceSpans"] = [
            {k: scopes(v) if k in ("scopeSpans", "scope_spans") else _base64_ids(v) for k, v in resource.items()}
            if isinstance(resource, dict) else resource for resource in resources]
    elif resources is not None:
        converted["resourceSpans"] = _base64_ids(resources)
    return converted, rejected, why


def _base64_ids(value: JSONValue) -> JSONValue:
    """OTLP/JSON's hex ids as the base64 bytes fields of protobuf's own JSON mapping."""
    if isinstance(value, dict):
        return {k: _id_bytes(v) if k in _ID_FIELDS and isinstance(v, str) else _base64_ids(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_base64_ids(item) for item in value]
    return value


def _id_bytes(hex_id: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(hex_id)).decode()
    except ValueError:
        raise BadExport(f"a trace or span id is not hex: {hex_id[:40]!r}") from None


def spans_of(request: ExportTraceServiceRequest, cut: list[int] | None = None) -> Iterator[Span]:
    """The spans of an export (or of a backend's trace in the same messages) that have W3C ids; `cut[0]` counts
    the attribute values cut to MAX_VALUE_CHARS."""
    cut = [0] if cut is None else cut
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            if scope_spans.scope.name == OWN_SCOPE:
                # tamesu's own (one OTEL_EXPORTER_OTLP_ENDPOINT for it and the agent): its `tamesu.turn` is of the
                # turn's trace, and was counted as the agent's span
                continue
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    continue  # no W3C ids: it can match no turn
                yield Span(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() if len(span.parent_span_id) == 8 else None,
                    name=_text(span.name, cut), kind=_KINDS.get(span.kind, "unspecified"),
                    service=service if isinstance(service, str) else None,
                    start_unix_nano=span.start_time_unix_nano, end_unix_nano=span.end_time_unix_nano,
                    status=_STATUS.get(span.status.code, "unset"), status_message=_text(span.status.message, cut),
                    attributes=attributes(span.attributes, cut),
                    events=[SpanEvent(name=_text(e.name, cut), at_unix_nano=e.time_unix_nano,
                                      attributes=attributes(e.attributes, cut)) for e in span.events],
                )


def attributes(pairs: Iterable[KeyValue], cut: list[int] | None = None) -> dict[str, object]:
    cut = [0] if cut is None else cut
    return {pair.key: _value(pair.value, cut) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue, cut: list[int]) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v, cut) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values, cut)
    if kind == "bytes_value":
        return _capped(value.bytes_value[:MAX_VALUE_CHARS].hex(), len(value.bytes_value) * 2, cut)
    if kind == "string_value":
        return _capped(value.string_value[:MAX_VALUE_CHARS], len(value.string_value), cut)
    return getattr(value, kind) if kind else None


def _text(text: str, cut: list[int]) -> str:
    """A span's name, status message or event name, capped as an attribute's text is: an error's message that
    quotes a whole prompt or a stack of megabytes is no smaller for not being an attribute."""
    return _capped(text[:MAX_VALUE_CHARS], len(text), cut)


def _capped(text: str, length: int, cut: list[int]) -> str:
    if length <= MAX_VALUE_CHARS:
        return text
    cut[0] += 1
    return f"{text[:MAX_VALUE_CHARS]}… [cut: {length:,} characters in all]"
