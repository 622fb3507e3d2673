"""The conversation as roles hand it to a model: structured lines, and the text a prompt shows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tamesu.conversation import Exchange


def lines_of(exchanges: Iterable[Exchange], history: bool = True) -> list[dict[str, Any]]:
    """`{role, text, turn}` per message, user before agent within a turn (the user turn starts it). A turn that
    carried a message history (a stateless JSONL case) has it first, `turn: None`: the agent answered in its
    context, so whoever grades the answer reads it too (`history=False`: only what was said in this run)."""
    lines: list[dict[str, object]] = []
    for exchange in exchanges:
        if exchange.user is not None and history:
            lines += [{"role": "user" if m.role == "user" else "agent", "text": m.content, "turn": None,
                       "source": "history"} for m in exchange.user.history if m.role != "system"]
        if exchange.user is not None:
            lines.append({"role": "user", "text": exchange.user.display(), "turn": exchange.index,
                          "source": exchange.user.source})
        lines.append({"role": "agent", "text": exchange.agent.text, "turn": exchange.index})
    return lines


def as_text(lines: Iterable[Mapping[str, object]], empty: str = "(nothing yet)") -> str:
    """`[1] user: ...` lines; multi-line messages stay indented under their speaker."""
    out = []
    for line in lines:
        text = str(line.get("text", "")).replace("\n", "\n    ")
        turn = line.get("turn", "?")
        out.append(f"[{'earlier' if turn is None else turn}] {line.get('role', '?')}: {text}")
    return "\n".join(out) or empty


def last_tool_results(exchanges: Sequence[Exchange]) -> dict[str, Any]:
    """The tools the last agent turn called, by name, with what they returned (a tool called twice keeps its
    last result): the `tool_results` the agent test design hands its simulator."""
    last = exchanges[-1].agent.tool_calls if exchanges else []
    return {call.name: call.result for call in last}
