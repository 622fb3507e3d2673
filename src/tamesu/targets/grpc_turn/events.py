"""One turn of the grpc target read from its events: text deltas joined, tool calls with their results,
and how the turn ended (TurnEnd, Handoff, SessionEnd, Error). Times are the session's, taken on arrival."""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict

from tamesu._proto.turn.v1 import turn_pb2
from tamesu.conversation import Handoff, ToolCall

MAX_EVENTS = 10_000
"""More events than this in one turn is an agent that never ends its turn: the turn fails."""


def _plain(message: Any) -> Any:
    return MessageToDict(message, preserving_proto_field_name=True)


class TurnEvents:
    """Feed it events with `add` until it says the turn is over."""

    def __init__(self) -> None:
        self.raw: list[dict[str, object]] = []
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self._ids: dict[str, ToolCall] = {}
        self.unmatched_results: list[str] = []
        self.data: dict[str, object] | None = None
        self.handoff: Handoff | None = None
        self.session_end: dict[str, object] | None = None
        self.error: dict[str, str] | None = None
        self.first_token_at_ms: float | None = None
        self.ended_at_ms: float | None = None
        self.bytes = 0
        """The size of the turn's events as they came (a stream's total, against max_response_bytes)."""

    @staticmethod
    def plain(event: turn_pb2.AgentEvent) -> dict[str, object]:
        """An event as JSON, as `raw` keeps it."""
        if event.WhichOneof("event") == "delta":
            return {"delta": {"text": event.delta.text}}
        result: dict[str, object] = _plain(event)
        return result

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def add(self, event: turn_pb2.AgentEvent, at_ms: float) -> bool:
        """Take one event; True when it ends the turn."""
        kind = event.WhichOneof("event")
        # deltas are most of the events: built by hand, as MessageToDict is the costliest step of a turn
        self.raw.append(self.plain(event))
        if kind == "delta":
            if event.delta.text and self.first_token_at_ms is None:
                self.first_token_at_ms = at_ms
            self.texts.append(event.delta.text)
        elif kind == "tool_call":
            self._tool_call(event.tool_call)
        elif kind == "tool_result":
            found = self._ids.get(event.tool_result.id)
            if found is None:
                self.unmatched_results.append(event.tool_result.id)
            else:
                found.result = _plain(event.tool_result.result)
        elif kind == "turn_end":
            self.data = _plain(event.turn_end.data) if event.turn_end.HasField("data") else None
        elif kind == "handoff":
            self.handoff = Handoff(to=event.handoff.to or None, summary=event.handoff.summary or None)
        elif kind == "session_end":
            self.session_end = {"reason": event.session_end.reason}
        elif kind == "error":
            self.error = {"code": event.error.code, "message": event.error.message}
        else:
            return False  # an event of a newer version of the API, kept in raw, otherwise ignored
        if kind in ("turn_end", "handoff", "session_end", "error"):
            self.ended_at_ms = at_ms
            return True
        return False

    def _tool_call(self, call: turn_pb2.ToolCall) -> None:
        made = ToolCall(name=call.name, args=_plain(call.args) if call.HasField("args") else {},
                        result=_plain(call.result) if call.HasField("result") else None)
        self.calls.append(made)
        self._ids[call.id or f"#{len(self.calls)}"] = made

    def response(self) -> dict[str, Any]:
        """The turn as one document, for `json_path`: `$.text`, `$.tool_calls`, `$.data`, `$.handoff`,
        `$.session_end`."""
        return {
            "text": self.text,
            "tool_calls": [{"name": c.name, "args": c.args, "result": c.result} for c in self.calls],
            "data": self.data,
            "handoff": None if self.handoff is None else self.handoff.model_dump(),
            "session_end": self.session_end,
        }
