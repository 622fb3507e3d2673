"""result.json writes a large answer once: `response` and `raw` refer to the text or to each other, and what is
read back equals what was written, including agent documents that look like the references."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tamesu.conversation import AgentTurn
from tamesu.results._refs import MIN_CHARS
from tamesu.results.records import RunResult, TurnRecord, run_result_from_json

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


def _result_text(agent: AgentTurn) -> str:
    result = RunResult(suite="s", test="t", run=1, status="passed", started_at="", target="bot", target_type="rest",
                       turns=[TurnRecord(index=1, user=None, agent=agent)])
    return result.model_dump_json()


TURNS = [AgentTurn(text=SMALL, response={"reply": SMALL, "tool_calls": [{"name": "lookup", "args": {"q": [1]}}]},
                   raw=[{"reply": SMALL}, [{"deep": {"n": None}}]]),
         AgentTurn(text=BIG, response={"reply": BIG, "n": 1}, raw=[{"reply": BIG, "n": 1}, {"delta": BIG}]),
         AgentTurn(text=SMALL, response={"$ref": "text"}, raw=[{"$ref": "response"}, {"$value": 1}]),
         AgentTurn(text="costs $5", response={"price": "$5"}, raw=[])]


@pytest.mark.parametrize("agent", TURNS)
def test_a_result_read_back_equals_what_was_written_with_or_without_a_dollar(agent: AgentTurn) -> None:
    text = _result_text(agent)
    assert run_result_from_json(text).turns[0].agent == agent
    assert RunResult.model_validate_json(text).turns[0].agent == agent


def test_a_result_without_a_dollar_is_read_without_walking_its_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.results import records

    walked: list[object] = []
    text = _result_text(TURNS[0])
    assert "$" not in text
    monkeypatch.setattr(records, "expand_agent", lambda agent: walked.append(agent) or agent)
    assert run_result_from_json(text).turns[0].agent == TURNS[0]
    assert walked == []
    RunResult.model_validate_json(text)  # read otherwise: walked as before
    assert len(walked) == 1


def test_a_marker_written_with_an_escaped_dollar_is_still_resolved() -> None:
    text = _result_text(TURNS[1])
    assert '"$ref"' in text
    escaped = text.replace('"$ref"', '"\\u0024ref"')
    assert "$" not in escaped
    assert run_result_from_json(escaped).turns[0].agent == TURNS[1]
