"""The Vercel AI SDK's chat protocols (`useChat` and its route): UI messages in, a UI message stream out (AI SDK 5
and later), or the data stream protocol (AI SDK 4).

An AI SDK route reads `{messages: [{id, role, parts: [{type: "text", text}]}]}` and answers a server-sent event
stream marked `x-vercel-ai-ui-message-stream: v1`, one JSON object per event, by `type`: the reply's text comes
as `text-delta` events, the model's reasoning as `reasoning-delta` (both carry a `delta`: read as any stream, the
reasoning would be taken for the reply), a tool call as `tool-input-available` and its result as
`tool-output-available` (or `tool-output-error`), a failure as `error`. `{{ui_messages}}` gives the conversation in
the request's shape; the marked stream is read by its types unless the target sets `response.delta` or
`response.tool_calls` itself.

AI SDK 4's route reads `{role, content}` messages (`{{messages}}`) and answers `text/plain` marked
`x-vercel-ai-data-stream: v1`, one `CODE:JSON` line per part: `0` text, `g` reasoning, `9` a tool call, `a` its
result, `3` an error; the others (steps, finish, data, annotations) carry no reply. Read whole, when `streaming` is
not set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from tamesu.conversation import ToolCall, TurnError
from tamesu.targets.rest.read import StreamText, tool_arguments
from tamesu.targets.rest.spec import ResponseSpec, RestSpec

MARK = "x-vercel-ai-ui-message-stream"
"""The header an AI SDK route's UI message stream carries (`v1`)."""
DATA_STREAM_MARK = "x-vercel-ai-data-stream"
"""The header an AI SDK 4 route's data stream carries (`v1`)."""


def ui_messages(messages: list[dict[str, object]], first: int = 1) -> list[dict[str, object]]:
    """`{role, content}` messages as the AI SDK's UI messages, numbered from `first` (ids stable within the
    conversation)."""
    return [ui_message(number, str(m["role"]), [text_part(m["content"])]) for number, m in enumerate(messages, first)]


def ui_message(number: int, role: str, parts: list[dict[str, object]]) -> dict[str, object]:
    return {"id": f"tamesu-{number}", "role": role, "parts": parts}


def text_part(text: object) -> dict[str, object]:
    return {"type": "text", "text": text}


def ui_conversation(spec: RestSpec, variables: object) -> UiConversation | None:
    """A conversation to keep as UI messages when a template of the target may name `{{ui_messages}}`, else none:
    few do, and keeping it was about 8 calls a turn. The name anywhere in the spec keeps it, or in a var the spec
    names (`variables`, the run's vars: a var's templates are rendered with the turn's values too); a false match
    only keeps what goes unused. One dump of the spec at a conversation's start, silent (a `final: {path, equals}`
    is held as its mapping, which pydantic warns of)."""
    written = spec.model_dump_json(warnings=False, fallback=str)
    if "ui_messages" in written:
        return UiConversation()
    if "vars." not in written or not isinstance(variables, Mapping) or "ui_messages" not in repr(variables):
        return None
    held = any(f"vars.{name}" in written and "ui_messages" in repr(value) for name, value in variables.items())
    return UiConversation() if held else None


def ui_reader(ui: UiConversation | None, reply: ResponseSpec) -> UiMessageStream:
    """A UI message stream to read this turn's answer from, the conversation's (when it keeps one) to build from."""
    stream = UiMessageStream(reply)
    return ui.reading(stream) if ui is not None else stream


class UiConversation:
    """The conversation as `useChat` keeps it: each user turn's text, each answer's UI message with every part its
    stream gave (its tool calls with their results too), or its text when it was no UI message stream."""

    def __init__(self) -> None:
        self._played: list[dict[str, object]] = []
        self.messages: list[dict[str, object]] = []
        """What was played and the turn being sent: `{{ui_messages}}`."""
        self._reading: UiMessageStream | None = None

    def send(self, text: str, given: list[dict[str, object]] | None) -> None:
        """A user turn, after what was played, or after the history a test gives as `{role, content}` messages."""
        earlier = ui_messages(given) if given is not None else self._played
        self.messages = [*earlier, ui_message(len(earlier) + 1, "user", [text_part(text)])]
        self._reading = None

    def reading(self, stream: UiMessageStream) -> UiMessageStream:
        """The UI message stream this turn's answer is read from."""
        self._reading = stream
        return stream

    def answered(self, text: str) -> None:
        parts = self._reading.parts if self._reading is not None else []
        if not parts and text:
            parts = [text_part(text)]
        # an answer with nothing in it adds no message, as `{{messages}}` adds no empty one
        self._played = [*self.messages, *([ui_message(len(self.messages) + 1, "assistant", parts)] if parts else [])]


def reads_ui_stream(headers: Mapping[str, str], reply: ResponseSpec) -> bool:
    """An AI SDK UI message stream, read by its types: the target did not say how to read the stream itself."""
    return MARK in headers and not {"delta", "tool_calls"} & reply.model_fields_set


class UiMessageStream(StreamText):
    """The reply's text from `text-delta` events only; tool calls with their results by `toolCallId`; and the
    assistant's UI message as `useChat` builds it from the stream (`parts`: its steps, reasoning, tool calls with
    their results, text), which the next turn's `{{ui_messages}}` sends back as the browser would."""

    def __init__(self, reply: ResponseSpec) -> None:
        super().__init__(reply)
        self._calls: dict[str, ToolCall] = {}
        self.parts: list[dict[str, object]] = []
        self._open: dict[tuple[str, str], dict[str, object]] = {}
        """The text and reasoning parts being written, by kind and the stream's id for them; tool parts by call."""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return list(self._calls.values())

    def add(self, event: object, at_ms: float) -> bool:
        done = super().add(event, at_ms)
        if not isinstance(event, Mapping):
            return done
        kind = event.get("type")
        call_id = str(event.get("toolCallId", ""))
        if kind == "tool-input-available":
            name = str(event.get("toolName") or "")
            arguments = tool_arguments(event.get("input"), name)
            self._calls[call_id] = ToolCall(name=name, args=arguments)
        elif kind in ("tool-output-available", "tool-output-error") and call_id in self._calls:
            result = event.get("output") if kind == "tool-output-available" else {"error": event.get("errorText")}
            self._calls[call_id] = self._calls[call_id].model_copy(update={"result": result})
        elif kind == "error":
            raise TurnError(f"the agent's stream reported an error: {event.get('errorText')}", raw=dict(event))
        self._part(kind, event)
        return done or kind == "finish"

    def _part(self, kind: object, event: Mapping[str, object]) -> None:
        """The UI message's parts as `useChat` keeps them (the AI SDK's `readUIMessageStream`)."""
        if kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind in ("text-start", "text-delta", "reasoning-start", "reasoning-delta"):
            what = "text" if str(kind).startswith("text") else "reasoning"
            key = (what, str(event.get("id", "")))
            part = self._open.get(key)
            if part is None:
                part = self._open[key] = {"type": what, "text": "", "state": "done"}
                self.parts.append(part)
            part["text"] = f"{part['text']}{event.get('delta') or ''}"
        elif kind == "tool-input-available":
            call_id = str(event.get("toolCallId", ""))
            name = str(event.get("toolName") or "")
            part = ({"type": "dynamic-tool", "toolName": name} if event.get("dynamic") else {"type": f"tool-{name}"})
            part.update(toolCallId=call_id, state="input-available", input=event.get("input"))
            self._open[("tool", call_id)] = part
            self.parts.append(part)
        elif kind in ("tool-output-available", "tool-output-error"):
            part = self._open.get(("tool", str(event.get("toolCallId", ""))))
            if part is None:
                return
            if kind == "tool-output-available":
                part.update(state="output-available", output=event.get("output"))
            else:
                part.update(state="output-error", errorText=event.get("errorText"))

    def _chunk(self, event: object, final: bool) -> str:
        if isinstance(event, Mapping) and event.get("type") == "text-delta":
            return str(event.get("delta") or "")
        return ""


@dataclass
class DataStream:
    """What an AI SDK 4 data stream said: the reply's text, its tool calls, its parts as read (for `raw`)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    parts: list[dict[str, object]] = field(default_factory=list)


def read_data_stream(body: str) -> DataStream:
    """The data stream's lines (`0:"Your order "`); a line that is not `CODE:JSON` is kept as text of its own kind,
    an error part fails the turn."""
    read = DataStream()
    calls: dict[str, ToolCall] = {}
    for line in body.splitlines():
        code, _, payload = line.partition(":")
        if not line.strip():
            continue
        try:
            value: object = json.loads(payload)
        except ValueError:
            code, value = "?", line
        read.parts.append({"type": code, "value": value})
        if code == "0" and isinstance(value, str):
            read.text += value
        elif code == "9" and isinstance(value, Mapping):
            name = str(value.get("toolName") or "")
            arguments = tool_arguments(value.get("args"), name)
            calls[str(value.get("toolCallId", ""))] = ToolCall(name=name, args=arguments)
        elif code == "a" and isinstance(value, Mapping) and str(value.get("toolCallId", "")) in calls:
            call_id = str(value.get("toolCallId", ""))
            calls[call_id] = calls[call_id].model_copy(update={"result": value.get("result")})
        elif code == "3":
            raise TurnError(f"the agent's stream reported an error: {value}", raw={"parts": read.parts})
    read.tool_calls = list(calls.values())
    return read
