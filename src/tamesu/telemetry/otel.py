"""tamesu's own spans (run, test, turn, model call), exported through the OpenTelemetry SDK only when
OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set. Unset, nothing is imported and nothing is sent.

A turn's span is the root of a trace of its own: its trace id and span id are the `traceparent` the agent
receives, so the agent's spans hang under tamesu's turn; the turn links back to its test's span. A target that
connects before its first turn gets a `tamesu.conversation` span the same way (a trace of its own, linked to
the test, from before the connection opens to after it closes): its context is the handshake's `traceparent`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tamesu.telemetry.traceparent import OWN_SCOPE, TraceContext
from tamesu.types import is_loopback

if TYPE_CHECKING:  # OpenTelemetry is the otel extra: imported only when export is on
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

OTEL_HINT = "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: pip install 'tamesu[otel]'"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class Telemetry:
    """Spans through one tracer, or nothing at all (the default)."""

    def __init__(self, tracer: Tracer | None = None, provider: TracerProvider | None = None,
                 endpoint: str | None = None) -> None:
        self._tracer = tracer
        self._provider = provider
        self.endpoint = endpoint
        """Where the spans go (the traces URL the exporter posts to); None: nowhere."""

    def exports_to(self, url: str) -> bool:
        """Whether the spans go to the server at `url` (a receiver of tamesu's: `http://127.0.0.1:4318`)."""
        if self._tracer is None or not self.endpoint:
            return False
        try:
            mine, theirs = urlsplit(self.endpoint), urlsplit(url)
            same_port = mine.port == theirs.port
        except ValueError:
            return False
        here = is_loopback(mine.hostname or "") and is_loopback(theirs.hostname or "")
        return same_port and (mine.hostname == theirs.hostname or here)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    @contextlib.contextmanager
    def span(self, name: str, **attributes: object) -> Iterator[Span | None]:
        """A span, current for what runs inside it (asyncio tasks started inside inherit it)."""
        if self._tracer is None:
            yield None
            return
        with self._tracer.start_as_current_span(name, attributes=_clean(attributes)) as span:
            yield span

    def turn(self, **attributes: object) -> contextlib.AbstractContextManager[TraceContext]:
        """A turn's trace context; with export on, it is a real span's (a new trace linked to the test)."""
        if self._tracer is None:  # every turn's: not through a generator's context manager
            return contextlib.nullcontext(TraceContext.new())
        return self._turn_span(attributes)

    @contextlib.contextmanager
    def _turn_span(self, attributes: dict[str, object]) -> Iterator[TraceContext]:
        assert self._tracer is not None  # turn() comes here only with export on
        from opentelemetry import context, trace

        parent = trace.get_current_span().get_span_context()
        links = [trace.Link(parent)] if parent.is_valid else []
        with self._tracer.start_as_current_span("tamesu.turn", context=context.Context(), links=links,
                                                attributes=_clean(attributes)) as span:
            own = span.get_span_context()
            yield TraceContext(trace_id=f"{own.trace_id:032x}", span_id=f"{own.span_id:016x}")

    @contextlib.contextmanager
    def conversation(self, **attributes: object) -> Iterator[TraceContext]:
        """A connection's trace context, for the whole conversation; with export on, a real span's (a new
        trace linked to the test). The span is not made current: the turns and model calls inside keep their
        own places (a turn's trace of its own, linked to the test)."""
        if self._tracer is None:
            yield TraceContext.new()
            return
        from opentelemetry import context, trace

        parent = trace.get_current_span().get_span_context()
        links = [trace.Link(parent)] if parent.is_valid else []
        span = self._tracer.start_span("tamesu.conversation", context=context.Context(), links=links,
                                       attributes=_clean(attributes))
        try:
            own = span.get_span_context()
            yield TraceContext(trace_id=f"{own.trace_id:032x}", span_id=f"{own.span_id:016x}")
        finally:
            span.end()

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Send what is batched (bounded), then stop the exporter."""
        if self._provider is not None:
            self._provider.force_flush(timeout_ms)
            self._provider.shutdown()
            self._provider = None
            self._tracer = None


def _clean(attributes: Mapping[str, object]) -> dict[str, str | bool | int | float]:
    return {f"tamesu.{k}": v for k, v in attributes.items() if isinstance(v, (str, bool, int, float))}


_active = Telemetry()


def active() -> Telemetry:
    return _active


def configured(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in _ENDPOINT_VARIABLES)


def start(service_version: str) -> Telemetry:
    """Export spans when an OTLP endpoint is configured; raises ImportError (say OTEL_HINT) without the SDK.

    The exporter reads the standard OTEL_EXPORTER_OTLP_* variables itself (endpoint, headers, timeout)."""
    global _active
    if not configured():
        return _active
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "tamesu"),
                                "service.version": service_version})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=5)))
    # where the SDK's exporter sends, as it reads the variables (the signal's own wins, taken whole)
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or \
        f"{os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT', '').rstrip('/')}/v1/traces"
    _active = Telemetry(provider.get_tracer(OWN_SCOPE, service_version), provider, endpoint)
    return _active


def stop() -> None:
    global _active
    _active.shutdown()
    _active = Telemetry()
