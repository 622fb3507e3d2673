"""W3C trace context: a `traceparent` with what tamesu sends the agent, so the agent's own trace can be found.

Two kinds of trace, by when a request happens:
- **A turn's trace.** Every turn starts a fresh trace (the agent's spans become its children). Whatever a turn
  sends on its own carries it: each HTTP request of the turn (rest, a2a, mcp over HTTP, the model target's
  model calls), gRPC metadata and the `UserTurn.traceparent` field, A2A message metadata, MCP `_meta`, a rest
  websocket's default message, a realtime `response.create`'s `response.metadata`.
- **A conversation's trace.** A target that connects before turn 1 (realtime, the audio sockets: twilio,
  voice, pipecat; sip; livekit; browser; rest with `streaming: websocket`) has a handshake no turn owns. The
  engine gives each test run (each conversation) one trace: `Session.conversation_trace`, started the first
  time a target reads it (in `open()`, before it connects); with OpenTelemetry export on, it is a
  `tamesu.conversation` span, linked to the test's span, that ends once the target is closed. Its span stands
  for the connection. Its `traceparent` goes on the handshake: the websocket upgrade's headers, the SIP INVITE,
  the browser's requests to the agent's origin, a twilio `start` message's `customParameters`, livekit's
  participant attributes; the target records where it went in a `conversation_trace` event.

A turn records the trace id the agent actually got (`AgentTurn.trace_id`): the turn's own where a per-message
carrier sent it, else the conversation's, else none; `trace_url` in tamesu.yaml turns it into a link to the
agent's tracing UI (HTML report, `tamesu view`). A `traceparent` the suite sets itself (in `headers`, or
`parameters` for twilio) wins everywhere: tamesu then adds none of its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

OWN_SCOPE = "tamesu"
"""The instrumentation scope of tamesu's own spans (`telemetry.otel`): where they reach what reads the agent's
(its receiver, a backend both export to), they are not the agent's."""
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@dataclass(frozen=True)
class TraceContext:
    trace_id: str
    """32 lowercase hex digits, never all zero."""
    span_id: str
    """16 lowercase hex digits: the span of tamesu's request the agent's work hangs under."""

    @classmethod
    def new(cls) -> TraceContext:
        ids = os.urandom(24).hex()  # what secrets.token_hex reads, once for both (a new trace every turn)
        return cls(ids[:32], ids[32:])

    @classmethod
    def parse(cls, traceparent: str) -> TraceContext | None:
        """The trace a `traceparent` value names (a suite's own), or None for one that is not W3C's shape."""
        match = _TRACEPARENT.match(traceparent.strip().lower())
        return cls(match.group(1), match.group(2)) if match else None

    @property
    def traceparent(self) -> str:
        # version 00, sampled: the agent is asked to keep this trace
        return f"00-{self.trace_id}-{self.span_id}-01"


def own_traceparent(headers: Mapping[str, str]) -> str | None:
    """The suite's own `traceparent` among headers (any case): when there is one, it wins."""
    return next((value for name, value in headers.items() if name.lower() == "traceparent"), None)


def with_traceparent(headers: Mapping[str, str], trace: TraceContext | None) -> dict[str, str]:
    """Headers with the trace's `traceparent` added, unless there is no trace or the suite set its own."""
    if trace is None or own_traceparent(headers) is not None:
        return dict(headers)
    return {**headers, "traceparent": trace.traceparent}


def sent_trace_id(headers: Mapping[str, str], trace: TraceContext | None) -> str | None:
    """The trace id the agent got from `with_traceparent(headers, trace)`: the suite's own when it set one."""
    own = own_traceparent(headers)
    if own is not None:
        parsed = TraceContext.parse(own)
        return parsed.trace_id if parsed else None
    return trace.trace_id if trace is not None else None


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """`trace_url` with `{trace_id}` filled in (Jaeger, Langfuse, Phoenix... each has such a URL)."""
    if not template or not trace_id:
        return None
    return template.replace("{trace_id}", trace_id)
