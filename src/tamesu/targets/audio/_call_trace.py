"""Where an audio socket call's trace goes: the conversation's `traceparent` on the websocket handshake (the suite's
own wins), and the trace id every turn of the call records (its own module to keep the socket's small)."""

from __future__ import annotations

from tamesu.conversation import Session
from tamesu.targets.audio.wire import Wire
from tamesu.telemetry.traceparent import TraceContext, own_traceparent


class CallTrace:
    """The handshake's `traceparent` and the trace id of the call's turns, for `AudioSocketTarget`."""

    traceparent: str | None = None
    """The conversation's `traceparent` the call carries (the suite's own when it set one)."""
    _trace_id: str | None = None

    def _handshake_headers(self, session: Session, headers: dict[str, str]) -> dict[str, str]:
        """With the conversation's `traceparent` (the suite's own wins), kept for the wire's carriers."""
        self.traceparent = self._own_traceparent(session, headers) or (
            session.conversation_trace.traceparent if session.conversation_trace is not None else None)
        if self.traceparent is not None and own_traceparent(headers) is None:
            return {**headers, "traceparent": self.traceparent}
        return headers

    def _traced(self, session: Session, wire: Wire) -> None:
        """Where the conversation's trace went, on the timeline; the id every turn records."""
        if self.traceparent is not None:
            parsed = TraceContext.parse(self.traceparent)
            self._trace_id = parsed.trace_id if parsed is not None else None
            session.event("conversation_trace", trace_id=self._trace_id,
                          sent_in=["websocket handshake header traceparent", *wire.trace_carriers])

    def _own_traceparent(self, session: Session, headers: dict[str, str]) -> str | None:
        """The suite's own `traceparent` (in `headers`): it wins over the conversation's."""
        return own_traceparent(headers)

    def turn_trace_id(self, session: Session) -> str | None:
        return self._trace_id  # one socket for the call: every turn's trace is the handshake's
