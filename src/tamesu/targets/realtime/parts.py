"""The pieces the realtime target reads its websocket with: what a turn gathered, the session as
`session.update`s merge into it, and an event as result.json keeps it (how the line closed: `ws_open.Closed`)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from tamesu.conversation import AgentTurn, ToolCall, TurnAudio, UserTurn


@dataclass
class NotJson:
    text: str


@dataclass
class Reply:
    """What one turn gathered."""

    text: str = ""
    raw: list[Any] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    first_at: float | None = None
    done_at: float | None = None
    response: Any = None
    ended: bool = False
    interrupted: bool = False

    def turn(self, sent_at: float, now: float, audio: TurnAudio | None, measures: dict[str, float]) -> AgentTurn:
        """The agent's turn this reply makes."""
        return AgentTurn(text=self.text, response=self.response, raw=self.raw, tool_calls=self.calls,
                         sent_at_ms=sent_at, first_token_at_ms=self.first_at, completed_at_ms=self.done_at or now,
                         ended=self.ended, audio=audio, measures=measures)


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key not in ("format", "turn_detection"):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def kept(event: dict[str, Any]) -> dict[str, Any]:
    """An event as result.json keeps it: audio payloads replaced by their size."""
    if event.get("type") in ("response.output_audio.delta", "input_audio_buffer.append") and "delta" in event:
        delta = event.get("delta")
        return {**event, "delta": f"<{len(delta) * 3 // 4 if isinstance(delta, str) else 0} bytes of audio>"}
    return event


def history_items(turn: UserTurn) -> list[dict[str, object]]:
    """A turn's message history as Realtime conversation items, oldest first: a user's words as `input_text`,
    the assistant's as `output_text` (the content type of the assistant's own text items), a system line as a
    system message."""
    items: list[dict[str, Any]] = []
    for message in turn.history:
        text = "\n".join([message.content, *(f"[{f.name}]" for f in message.files)])
        kind = "output_text" if message.role == "assistant" else "input_text"
        items.append({"type": "message", "role": message.role, "content": [{"type": kind, "text": text}]})
    return items


async def unprompted(queue: asyncio.Queue[Any], timeout: float, voice: Any, poll_s: float = 0.02) -> bool:
    """Whether the agent sends something within `timeout` without being asked (a `wait_for` listening); the
    audio conversation's current turn is then none of the user's, as for a greeting."""
    deadline = asyncio.get_running_loop().time() + timeout
    while queue.empty():
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(poll_s)
    if voice is not None:
        voice.listen_only()
    return True
