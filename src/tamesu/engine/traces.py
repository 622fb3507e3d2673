"""`traces:`: the OTLP receivers of an invocation, and what a run makes of the spans that came back.

One receiver per `receive` address, started when the first suite that names it runs and stopped at the end.
While a suite runs, OTEL_EXPORTER_OTLP_ENDPOINT in tamesu's environment points at its receiver, so every hook
and command tamesu starts (and `{{env.OTEL_EXPORTER_OTLP_ENDPOINT}}`) exports there; the variables are put back
when the invocation ends. tamesu's own span export, if any, was set up before and is not redirected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tamesu.conversation import Exchange, Session
from tamesu.errors import TemplateError
from tamesu.suite.schema import TracesSpec
from tamesu.suite.templates import Context
from tamesu.telemetry import genai
from tamesu.telemetry.collector import RunSpans, SpanCollector
from tamesu.telemetry.receiver import Receiver, ReceiverError
from tamesu.telemetry.spans import SpansFile
from tamesu.types import split_addr

_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@dataclass
class SuiteTraces:
    """What a run of a suite with `traces:` needs: where its spans arrive, and its settings."""

    collector: SpanCollector
    spec: TracesSpec

    def run(self) -> RunSpans:
        return self.collector.run(self.spec.max_spans)


class Receivers:
    def __init__(self) -> None:
        self.collector = SpanCollector()
        self._receivers: dict[str, Receiver] = {}
        self._saved: dict[str, str | None] | None = None

    async def for_suite(self, spec: TracesSpec | None) -> SuiteTraces | None:
        if spec is None:
            return None
        addr = _address(spec.receive)
        receiver = self._receivers.get(addr)
        if receiver is None:
            receiver = await Receiver(addr, self.collector).start()
            self._receivers[addr] = receiver
        if self._saved is None:
            self._saved = {name: os.environ.get(name) for name in _VARIABLES}
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        if self._saved["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] is not None:
            # the signal-specific variable wins over the general one in every SDK: it must point here too
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{receiver.endpoint}/v1/traces"
        return SuiteTraces(self.collector, spec)

    async def stop(self) -> list[str]:
        """Stop every receiver, put the environment back; the warnings about spans no run kept."""
        for receiver in self._receivers.values():
            await receiver.stop()
        self._receivers.clear()
        if self._saved is not None:
            for name, value in self._saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._saved = None
        return self.collector.dropped.words()


def _address(receive: str) -> str:
    """`receive` with its `{{env.NAME}}` templates filled in (the schema allows no others)."""
    try:
        addr = Context(env=dict(os.environ)).render_text(receive)
        split_addr(addr)
    except (TemplateError, ValueError) as exc:
        raise ReceiverError(f"traces.receive {receive!r}: {exc}") from None
    return addr


def expect_turn(spans: RunSpans | None, trace_id: str | None, turn: int) -> None:
    if spans is not None:
        spans.expect(trace_id, turn)


def attach(spans_file: SpansFile, exchanges: list[Exchange], session: Session) -> dict[str, float]:
    """Each turn's span metrics onto the turn (distributions, as every per-turn metric); the run's totals
    (`llm_time_ms_total`...) returned as scalars. A flood past `max_spans` is an event."""
    for exchange in exchanges:
        mine = [s for s in spans_file.spans if s.turn == exchange.index]
        exchange.agent.measures.update(genai.measures(mine))
    if spans_file.over_limit:
        session.event("spans_over_limit", received=spans_file.received, kept=len(spans_file.spans),
                      max_spans=spans_file.max_spans)
    totals = genai.measures(spans_file.spans)
    return {f"{name}_total": value for name, value in totals.items()} | {
        "trace_spans_received": float(spans_file.received), "trace_spans_over_limit": float(spans_file.over_limit)}
