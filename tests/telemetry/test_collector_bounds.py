"""What the span collector remembers over a long invocation: the trace ids of runs not graded yet, and those of
graded runs only as far as saying a late span's run needs (a real receiver, spans from the OpenTelemetry SDK)."""

from __future__ import annotations

import asyncio
import os

from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from agents.traced import provider
from tamesu.engine.traces import Receivers
from tamesu.suite.schema import TracesSpec
from tamesu.telemetry.traceparent import TraceContext


def _send_span(endpoint: str, trace: TraceContext, name: str) -> None:
    """One span of the agent's under tamesu's `trace`, exported at once over OTLP/HTTP."""
    made, _ = provider(endpoint)
    parent = SpanContext(int(trace.trace_id, 16), int(trace.span_id, 16), is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with made.get_tracer("late-agent").start_as_current_span(name, context=set_span_in_context(
            NonRecordingSpan(parent))):
        pass
    made.shutdown()


async def test_graded_runs_leave_no_routes_and_their_late_spans_are_still_said() -> None:
    receivers = Receivers()
    saved = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    traces = await receivers.for_suite(TracesSpec(receive="127.0.0.1:0", wait=0))
    assert traces is not None
    endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
    try:
        first: TraceContext | None = None
        most = 0
        for number in range(1, 201):  # a long `tamesu run` (or a server's life): 200 runs of 10 turns
            spans = traces.run(f"shop/order run {number}")
            for turn in range(1, 11):
                trace = TraceContext.new()
                first = first or trace
                spans.expect(trace.trace_id, turn, trace.span_id)
                spans.turn_ended()
                most = max(most, traces.collector.routed)
            await spans.settle(0)
            spans.close()
        # while a run goes, its own turns' ids; once it is graded, none of them
        assert most == 10 and traces.collector.routed == 0
        assert first is not None
        # a span of the first run that comes now is still told late, and of which run
        await asyncio.to_thread(_send_span, endpoint, first, "execute_tool lookup_order")
        dropped = traces.collector.dropped
        assert dropped.late_spans == 1 and dropped.late_runs == {"shop/order run 1": 1}
        assert dropped.other_spans == 0
    finally:
        await receivers.stop()
    assert os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") == saved


async def test_a_call_of_many_turns_routes_only_the_trace_its_agent_got() -> None:
    # a call's turns (SIP, Twilio, Pipecat) have no carrier of their own: the agent gets the conversation's trace
    # on the handshake, and each turn's own id, made before the target sends, never goes out. Before, every one
    # of them stayed routed (and asked of a backend, and waited for) until the call was graded
    receivers = Receivers()
    traces = await receivers.for_suite(TracesSpec(receive="127.0.0.1:0", wait=0))
    assert traces is not None
    try:
        spans = traces.run("calls/long call run 1")
        conversation = TraceContext.new()
        spans.expect(conversation.trace_id, None, conversation.span_id)
        most = 0
        for turn in range(1, 1001):
            own = TraceContext.new()
            spans.expect(own.trace_id, turn, own.span_id)  # before the agent can answer, as the engine does
            most = max(most, traces.collector.routed)
            spans.turn_ended(own.trace_id, conversation.trace_id)
            spans.expect(conversation.trace_id, turn)  # the trace the turn recorded
        assert most == 2 and traces.collector.routed == 1
        assert spans.trace_ids == [conversation.trace_id]
        await spans.settle(0)
        spans.close()
        assert traces.collector.routed == 0
    finally:
        await receivers.stop()
