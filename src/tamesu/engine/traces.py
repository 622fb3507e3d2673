"""`traces:`: the OTLP receivers (or the tracing backend asked) of an invocation, and what a run makes of the
spans that came back.

One receiver per `receive` address, started when the first suite that names it runs and stopped at the end.
While a suite runs, OTEL_EXPORTER_OTLP_ENDPOINT in tamesu's environment points at its receiver (and
OTEL_EXPORTER_OTLP_PROTOCOL says http/protobuf, OTEL_BSP_SCHEDULE_DELAY a delay within `wait` unless the user
set one), so every hook and command tamesu starts (and
`{{env.OTEL_EXPORTER_OTLP_ENDPOINT}}`) exports there; the variables are put back
when the invocation ends. tamesu's own span export, if any, was set up before and is not redirected.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tamesu.conversation import Exchange, Session
from tamesu.errors import TemplateError
from tamesu.results.records import AssertionResult
from tamesu.suite.schema import TraceQuerySpec, TracesSpec
from tamesu.suite.templates import Context
from tamesu.telemetry import genai, otel
from tamesu.telemetry.collector import QUIET_PART, RunSpans, SpanCollector
from tamesu.telemetry.query import QueryError, TraceQuery
from tamesu.telemetry.spans import SpansFile
from tamesu.types import split_addr

if TYPE_CHECKING:
    # the receiver is an HTTP server (uvicorn, starlette: 16 MiB of memory): imported by suites with `traces:`
    from tamesu.telemetry.receiver import Receiver

_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
              "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_BSP_SCHEDULE_DELAY")
_RECEIVED_PROTOCOL = "http/protobuf"
"""What the receiver speaks, said to the exporters: Python's zero-code instrumentation (`opentelemetry-instrument`,
OTEL_TRACES_EXPORTER=otlp) exports over gRPC unless told, and a gRPC export to an OTLP/HTTP receiver is lost
(its error is in the agent's log, not tamesu's)."""


@dataclass
class SuiteTraces:
    """What a run of a suite with `traces:` needs: where its spans arrive, and its settings."""

    collector: SpanCollector
    spec: TracesSpec
    query: TraceQuery | None = None
    """`traces.query`: the backend each run's traces are fetched from once its turns had `wait`."""
    where: str = ""
    """Where the agent's spans are looked for: the receiver's endpoint, or the backend (`jaeger at URL`)."""

    def run(self, label: str = "", target: str = "", folder: str = "") -> RunSpans:
        """`target`: the agent, as the suite names it: one that sends no span is waited for less (`_silence`);
        `folder`: the run's, whose result.json says the spans that come after it was graded."""
        agent = self.collector.agent(target, self.where) if target else None
        return self.collector.run(self.spec.max_spans, label, agent, folder)


class Receivers:
    def __init__(self, secrets: Callable[[str], str] | None = None) -> None:
        """`secrets`: what fills in `{{secrets.NAME}}` in `traces.query` (the plan's, which masks what it gives)."""
        self._secrets = secrets
        self.collector = SpanCollector()
        self._receivers: dict[str, Receiver] = {}
        self._saved: dict[str, str | None] | None = None
        self._queries: dict[tuple[str, str, float, tuple[tuple[str, str], ...]], TraceQuery] = {}

    async def for_suite(self, spec: TracesSpec | None) -> SuiteTraces | None:
        if spec is None:
            return None
        if spec.query is not None:
            query = await self._query(spec.query)
            return SuiteTraces(self.collector, spec, query, query.name)
        assert spec.receive is not None  # the schema asks for one of the two
        addr = _address(spec.receive)
        receiver = self._receivers.get(addr)
        if receiver is None:
            from tamesu.telemetry.receiver import Receiver

            receiver = await Receiver(addr, self.collector).start()
            self._receivers[addr] = receiver
            if otel.active().exports_to(receiver.endpoint):
                # tamesu's own spans would reach only this receiver, which leaves them out (not the agent's):
                # what is batched goes now, and no more, so none is retried for seconds, with the SDK's warnings,
                # against a receiver stopped at the end (in a thread: the receiver answers on this loop)
                await asyncio.to_thread(otel.stop)
        if self._saved is None:
            self._saved = {name: os.environ.get(name) for name in _VARIABLES}
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = _RECEIVED_PROTOCOL
        # the signal-specific variables win over the general ones in every SDK: they must say the same
        if self._saved["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] is not None:
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{receiver.endpoint}/v1/traces"
        if self._saved["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] is not None:
            os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = _RECEIVED_PROTOCOL
        if self._saved["OTEL_BSP_SCHEDULE_DELAY"] is None:
            os.environ["OTEL_BSP_SCHEDULE_DELAY"] = str(batch_delay_ms(spec.wait))
        return SuiteTraces(self.collector, spec, where=receiver.endpoint)

    async def _query(self, spec: TraceQuerySpec) -> TraceQuery:
        """The backend, checked once an invocation: an unreachable one stops the run before any test (exit 3)."""
        query = trace_query(spec, self._secrets)
        key = (query.kind, query.base_url, spec.timeout, tuple(sorted(query.headers.items())))
        if key not in self._queries:
            await query.check()
            self._queries[key] = query
        return self._queries[key]

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


def trace_query(spec: TraceQuerySpec, secrets: Callable[[str], str] | None = None) -> TraceQuery:
    """`traces.query` as a run asks it (and `tamesu doctor`): its URL and headers filled in; a secret or variable
    that is not set is a QueryError."""
    kind, written = spec.backend
    context = Context(env=dict(os.environ), **({"secrets": secrets} if secrets else {}))
    try:
        url = context.render_url(written)
        headers = {name: context.render_text(value) for name, value in spec.headers.items()}
    except TemplateError as exc:
        raise QueryError(f"traces.query: {exc}") from None
    return TraceQuery(kind, url, spec.timeout, headers)


def receive_address(receive: str) -> str:
    """`traces.receive` as a run listens on it (its `{{env.NAME}}` filled in); a ReceiverError when it cannot."""
    return _address(receive)


def batch_delay_ms(wait: float) -> int:
    """What OTEL_BSP_SCHEDULE_DELAY says to an agent tamesu starts: the SDKs' batch processors send every 5 s
    by default, after the default `wait` of 2 s (a turn's spans were late and its run failed for "no tool
    called"); an eighth of `wait`, at most a second: a batch comes within it, and two periods fit in the quiet
    a run whose traces are complete still waits (a quarter of `wait`: `collector.QUIET_PART`)."""
    return max(10, min(1000, int(wait * 125)))


def _address(receive: str) -> str:
    """`receive` with its `{{env.NAME}}` templates filled in (the schema allows no others)."""
    try:
        addr = Context(env=dict(os.environ)).render_text(receive)
        split_addr(addr)
    except (TemplateError, ValueError) as exc:
        from tamesu.telemetry.receiver import ReceiverError

        raise ReceiverError(f"traces.receive {receive!r}: {exc}") from None
    return addr


async def spans_back(traces: SuiteTraces | None, spans: RunSpans | None, stopping: bool,
                     reached: bool = True, recorded: Iterable[str] = (),
                     carried: Iterable[str] = ()) -> tuple[SpansFile | None, str | None]:
    """The run's spans, once its traces are complete or late ones had `traces.wait` after the last turn
    (`RunSpans.settle`; none when the run is stopping); with `traces.query`, fetched from the backend after the
    whole wait (nothing comes to say its traces are complete). The second value: why the backend could not say.

    A run that never `reached` the agent (an error before its first turn: unreachable, refused, a hook) or
    sent it no trace id has no spans to come: it does not wait for them, nor ask the backend. `recorded`: the
    trace each turn recorded, said when no span of it came to the receiver; `carried`: the conversation's, as a
    handshake carried it, waited for too but not said when none came (an agent may trace no connection)."""
    if spans is None or traces is None:
        return None, None
    if not stopping and reached and spans.trace_ids:
        try:
            await spans.settle(traces.spec.wait, recorded, carried)
            if traces.query is not None:
                fetched = await traces.query.fetch_all(spans.trace_ids, spans.patience(traces.spec.wait))
                spans.fetched(fetched.spans, fetched.not_found)
            else:
                spans.unheard(recorded)
            spans.hush(traces.spec.wait)
        except QueryError as exc:
            return spans.close(), str(exc)
        except BaseException:
            spans.close()  # a run cut off while it waited leaves the collector too
            raise
    return spans.close(), None


def spans_warnings(spans_file: SpansFile, traces: SuiteTraces | None) -> list[str]:
    said = []
    if spans_file.silent_said and traces is not None:
        wait = traces.spec.wait
        said.append(f"traces: {spans_file.silent} Its later runs wait {wait / QUIET_PART:g}s, not {wait:g}s, for "
                    "a first span (one that comes brings back the whole wait), and the checks that need its spans "
                    "are not decided" + (f"; {spans_file.other_spans} span(s) of traces no test sent did come "
                                         "meanwhile: if they are its, it exports but starts traces of its own "
                                         "instead of continuing the traceparent it is sent"
                                         if spans_file.other_spans and traces.query is None else ""))
    if spans_file.not_found and traces is not None:
        where = f"were not found in {traces.query.name}" if traces.query is not None else \
            "never came: no span of them reached the receiver"
        # this run's count, not the receiver's since it started: those of runs before it were said with theirs
        others = spans_file.other_spans if traces.query is None else 0
        # the usual cause: the agent's server is not instrumented to read `traceparent`, so its spans start
        # traces of their own, which the receiver got and could match to no run
        hint = (f"; {others} span(s) of traces no test sent did come while it went{alongside(spans_file, 'and')}: "
                "an agent that starts traces of its own instead of continuing the traceparent it is sent has its "
                "spans there") if others else ""
        within = f"traces.wait ({traces.spec.wait:g}s)" if spans_file.waited_s is None else \
            f"{spans_file.waited_s:g}s, not traces.wait ({traces.spec.wait:g}s): its agent has sent no span since " \
            "tamesu started"
        said.append(f"{len(spans_file.not_found)} trace(s) of this run {where} within {within}: "
                    f"{', '.join(spans_file.not_found[:5])}{hint}")
    if spans_file.incomplete and traces is not None:
        # the agent's span under tamesu's is the trace's root on the agent's side: it ends last, so a batching
        # exporter sends it last
        said.append(f"{len(spans_file.incomplete)} trace(s) of this run came without the agent's span under "
                    f"tamesu's within traces.wait ({traces.spec.wait:g}s), so more of them may have come too late "
                    f"(or the agent's caller exports elsewhere): {', '.join(spans_file.incomplete[:5])}")
    if spans_file.over_limit:
        said.append(f"{spans_file.over_limit} span(s) past traces.max_spans ({spans_file.max_spans}) were not kept")
    return said


def alongside(spans_file: SpansFile, joined: str) -> str:
    """The runs that went beside this one, whose the spans of traces no test sent may be too (none of them tells
    which run's agent it is of), said after the count: `(and 1 other run went too: some may be its)`."""
    count = spans_file.runs_alongside
    if not count:
        return ""
    runs = "1 other run" if count == 1 else f"{count} other runs"
    return f" ({joined} {runs} went too: some may be {'its' if count == 1 else 'theirs'})"


def expect_turn(spans: RunSpans | None, trace_id: str | None, turn: int, parent: str | None = None) -> None:
    if spans is not None:
        spans.expect(trace_id, turn, parent)


def attach(spans_file: SpansFile, exchanges: list[Exchange], session: Session,
           traces: SuiteTraces | None = None) -> dict[str, float]:
    """Each turn's span metrics onto the turn (distributions, as every per-turn metric); the run's totals
    (`llm_time_ms_total`...) returned as scalars. A flood past `max_spans` is an event; so is each trace that
    never came, with the wait it missed and where it was looked for (the checks that needed it say so), and each
    another run sent at the same time (`trace_shared`: its checks are not decided)."""
    for exchange in exchanges:
        mine = [s for s in spans_file.spans if s.turn == exchange.index]
        exchange.agent.measures.update(genai.measures(mine))
    waited = {} if traces is None else {
        "wait_s": traces.spec.wait, "source": traces.query.name if traces.query is not None else "receiver"}
    if spans_file.waited_s is not None:  # its agent sent no span in a whole wait before: the checks say why less
        waited |= {"waited_s": spans_file.waited_s, "silent": spans_file.silent}
    # spans of traces no run sent, come meanwhile: most likely the lost ones, under ids of the agent's own
    others = {"other_spans": spans_file.other_spans, "runs_alongside": spans_file.runs_alongside} \
        if spans_file.other_spans and traces is not None and traces.query is None else {}
    for trace_id in spans_file.not_found:
        turn = next((e.index for e in exchanges if e.agent.trace_id == trace_id), None)
        session.event("trace_not_found", trace_id=trace_id, turn=turn, **waited, **others)
    for trace_id in spans_file.incomplete:
        turn = next((e.index for e in exchanges if e.agent.trace_id == trace_id), None)
        session.event("trace_incomplete", trace_id=trace_id, turn=turn, **waited)
    for trace_id in spans_file.shared:
        turn = next((e.index for e in exchanges if e.agent.trace_id == trace_id), None)
        session.event("trace_shared", trace_id=trace_id, turn=turn)
    if spans_file.over_limit:
        session.event("spans_over_limit", received=spans_file.received, kept=len(spans_file.spans),
                      max_spans=spans_file.max_spans)
    totals = genai.measures(spans_file.spans)
    return {f"{name}_total": value for name, value in totals.items()} | {
        "trace_not_found": float(len(spans_file.not_found)), "trace_incomplete": float(len(spans_file.incomplete)),
        "trace_spans_received": float(spans_file.received), "trace_spans_over_limit": float(spans_file.over_limit)}


def failed_turn_said(failure: AssertionResult, spans_file: SpansFile, turn: int | None) -> AssertionResult:
    """A failed conversation's line with what the agent's own spans of the failed turn say failed inside it (an
    HTTP 500 is the symptom; `execute_tool lookup_order` failing with `order service down` the cause)."""
    failed = [s for s in spans_file.spans if s.turn == turn and s.status == "error"] if turn is not None else []
    if not failed:
        return failure
    named = "; ".join(genai.whereabouts(s) for s in failed[:3]) + (f"; ... {len(failed) - 3} more"
                                                                   if len(failed) > 3 else "")
    return failure.model_copy(update={"reason": f"{failure.reason} (the agent's failed spans: {named})",
                                      "evidence": [*failure.evidence, *(genai.whereabouts(s) for s in failed)]})
