"""result.json writes a large answer once: `response` and `raw` refer to the text or to each other, and what is
read back equals what was written, including agent documents that look like the references."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tamesu.conversation import AgentTurn
from tamesu.results._refs import MIN_CHARS
from tamesu.results.records import TurnRecord

BIG = "x" * MIN_CHARS
SMALL = "hello"


def _written(agent: AgentTurn) -> dict[str, Any]:
    return json.loads(json.dumps(TurnRecord(index=1, user=None, agent=agent).model_dump(mode="json")))["agent"]


@pytest.mark.parametrize(("agent", "response", "raw"), [
    (AgentTurn(text=BIG, response=BIG, raw=[BIG]), {"$ref": "text"}, [{"$ref": "response"}]),
    (AgentTurn(text=BIG, response={"reply": BIG, "n": 1}, raw=[{"reply": BIG, "n": 1}, {"delta": BIG}]),
     {"reply": {"$ref": "text"}, "n": 1}, [{"$ref": "response"}, {"delta": {"$ref": "text"}}]),
    # small answers are written as they are
    (AgentTurn(text=SMALL, response={"reply": SMALL}, raw=[{"reply": SMALL}]), {"reply": SMALL}, [{"reply": SMALL}]),
    # the agent's own documents shaped like a reference are kept as values, large or small
    (AgentTurn(text=SMALL, response={"$ref": "text"}, raw=[{"$ref": "response"}, {"$value": 1}]),
     {"$value": {"$ref": "text"}}, [{"$value": {"$ref": "response"}}, {"$value": {"$value": 1}}]),
    (AgentTurn(text=BIG, response={"$ref": "text"}, raw=[BIG]), {"$value": {"$ref": "text"}}, [{"$ref": "text"}]),
])
def test_a_turn_is_written_with_references_and_read_back_whole(agent: AgentTurn, response: Any, raw: Any) -> None:
    written = _written(agent)
    assert written["response"] == response and written["raw"] == raw
    assert written["text"] == agent.text  # the text itself is always there to read
    back = TurnRecord.model_validate({"index": 1, "user": None, "agent": written})
    assert back.agent == agent
