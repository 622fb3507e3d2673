"""Whether the agent awaits input after a turn: the design's priority order, with the reason recorded."""

from __future__ import annotations

from typing import Any

import pytest

from tamesu.conversation import AgentTurn, ToolCall
from tamesu.roles.awaiting import detect


def turn(text: str = "", response: Any = None, tools: tuple[str, ...] = ()) -> AgentTurn:
    return AgentTurn(text=text, response=response, tool_calls=[ToolCall(name=name) for name in tools])


@pytest.mark.parametrize(("agent", "awaiting", "reason", "hint"), [
    # 1. what the agent declares wins, both ways
    (turn("Done.", {"awaiting_input": True, "input_hint": "PO-1"}), True, "agent_declared", "PO-1"),
    (turn("What else?", {"awaiting_input": False}), False, "agent_declared_done", None),
    # 2. A2A task states, either protocol version
    (turn("Done?", {"status": {"state": "completed"}}), False, "task_completed", None),
    (turn("Which order?", {"status": {"state": "TASK_STATE_INPUT_REQUIRED"}}), True, "input_required_state", None),
    (turn("", {"status": {"state": "input-required"}}), True, "input_required_state", None),
    # 3. tools that ask the user
    (turn("Working on it.", tools=("request_confirmation",)), True, "tool_requires_confirmation", None),
    # 4. a model's finish reason
    (turn("The policy says", {"finish_reason": "length"}), False, "finish_reason_length", None),
    # 5. the words
    (turn("Which order do you mean"), True, "content_is_question", None),
    (turn("This needs approval. Please provide PO number."), True, "content_is_question", None),
    (turn("Shall we proceed?"), True, "content_is_question", None),
    (turn("Could you send the receipt"), True, "content_is_question", None),
    # 6. otherwise the agent is done
    (turn("Expense submitted. Reference: EXP-1"), False, "completed", None),
    (turn(""), False, "completed", None),
])
def test_priority_order(agent: AgentTurn, awaiting: bool, reason: str, hint: str | None) -> None:
    verdict = detect(agent)
    assert (verdict.awaiting, verdict.reason, verdict.hint) == (awaiting, reason, hint)
