"""W3C trace context: a `traceparent` for every turn, so the agent's own trace of it can be found.

tamesu starts a fresh trace per turn (the agent's spans become its children) and records the trace id with
the turn; `trace_url` in tamesu.yaml turns that id into a link to the agent's tracing UI.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class TraceContext:
    trace_id: str
    """32 lowercase hex digits, never all zero."""
    span_id: str
    """16 lowercase hex digits: the span of tamesu's request the agent's work hangs under."""

    @classmethod
    def new(cls) -> TraceContext:
        return cls(secrets.token_hex(16), secrets.token_hex(8))

    @property
    def traceparent(self) -> str:
        # version 00, sampled: the agent is asked to keep this trace
        return f"00-{self.trace_id}-{self.span_id}-01"


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """`trace_url` with `{trace_id}` filled in (Jaeger, Langfuse, Phoenix... each has such a URL)."""
    if not template or not trace_id:
        return None
    return template.replace("{trace_id}", trace_id)
