"""The conversation as roles hand it to a model: structured lines, and the text a prompt shows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tamesu.conversation import Exchange, UserTurn


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
    return "\n".join([line_text(line) for line in lines]) or empty


def line_text(line: Mapping[str, object]) -> str:
    """One line of `as_text`."""
    text = str(line.get("text", "")).replace("\n", "\n    ")
    turn = line.get("turn", "?")
    return f"[{'earlier' if turn is None else turn}] {line.get('role', '?')}: {text}"


class History:
    """`lines_of` and `as_text` of a conversation a role is handed every turn, each exchange's made once: a turn
    adds one exchange, and making them all again every turn grew with the conversation. An exchange whose turns
    are not those it was made from, or whose words changed since (an audio reply talked over is given what the
    caller heard of it once the call is transcribed), is made again."""

    def __init__(self) -> None:
        self._made: list[tuple[Exchange, UserTurn | None, str | None, str, list[dict[str, Any]], list[str]]] = []
        self.lines: list[dict[str, Any]] = []
        """The last `read`'s `lines_of`."""
        self.text = ""
        """The last `read`'s `as_text`."""
        self.simulator_turns = 0
        """How many of the last `read`'s user turns a simulator said."""

    def read(self, exchanges: Iterable[Exchange]) -> list[dict[str, Any]]:
        made = self._made
        known = len(made)
        lines: list[dict[str, Any]] = []
        texts: list[str] = []
        simulated = 0
        for index, exchange in enumerate(exchanges):
            user, agent = exchange.user, exchange.agent
            if user is not None and user.source == "simulator":
                simulated += 1
            entry = made[index] if index < known else None
            if entry is None or entry[0] is not exchange or entry[1] is not user or entry[3] is not agent.text \
                    or (user is not None and entry[2] is not user.text):
                own = lines_of([exchange])
                entry = (exchange, user, None if user is None else user.text, agent.text, own,
                         [line_text(line) for line in own])
                if index < known:
                    made[index] = entry
                else:
                    made.append(entry)
                    known += 1
            lines += entry[4]
            texts += entry[5]
        self.lines, self.text, self.simulator_turns = lines, "\n".join(texts) or "(nothing yet)", simulated
        return lines


def last_tool_results(exchanges: Sequence[Exchange]) -> dict[str, Any]:
    """The tools the last agent turn called, by name, with what they returned (a tool called twice keeps its
    last result): the `tool_results` the agent test design hands its simulator."""
    last = exchanges[-1].agent.tool_calls if exchanges else []
    return {call.name: call.result for call in last}
