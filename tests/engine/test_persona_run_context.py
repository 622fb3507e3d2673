"""A YAML suite's persona, played by a model, is shown the run context the agent test design gives its
simulator (prompt simulator.v2): how many times the agent has answered and what the tools of its last turn
returned, so that it can tell a draft from a submitted expense. Against the example expense agent and the local
OpenAI-compatible model server, whose requests are read back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.expense_agent import ExpenseAgent, expense_agent
from conftest import run_tamesu, why
from model_servers import OpenAIServer, text
from tamesu.net.serve import ThreadServer

__all__ = ["expense_agent"]

_SUITE = """
name: expenses
targets:
  expense:
    type: rest
    url: "{{env.EXPENSE_URL}}/chat"
    response: { text: $.text, tool_calls: $.tool_calls }
models:
  simulator: { provider: openai, model: gpt-4o-mini, base_url: "{{env.OPENAI_URL}}", timeout: 10s }
tests:
  - name: a travel expense submitted
    persona: { name: Dana, style: brief }
    scenario:
      script: [{ say: "I want to submit an expense" }]
      goal: "Submit a business travel expense of $3500"
      max_turns: 5
    assert:
      - tool_called: submit_expense
"""


@pytest.fixture()
def model_server() -> Iterator[tuple[OpenAIServer, str]]:
    server = OpenAIServer()
    running = ThreadServer(server.app).start()
    try:
        yield server, server.base_url(running.url)
    finally:
        running.stop()


def test_a_yaml_persona_is_shown_the_turn_count_and_the_tool_results(
        tmp_path: Path, expense_agent: ExpenseAgent, model_server: tuple[OpenAIServer, str]) -> None:
    server, url = model_server
    server.plan(text('{"input": "Business travel, $3500", "reasoning": "it asked the type"}'),
                text('{"input": "Yes, confirm", "reasoning": "the draft is right"}'),
                text('{"input": "", "goal_achieved": true, "reasoning": "submit_expense returned submitted"}'))
    (tmp_path / "expenses.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "expenses.tamesu.yaml", "--out", "out"], cwd=tmp_path,
                      env={**expense_agent.env, "OPENAI_URL": url})
    run_dir = next((tmp_path / "out").iterdir())
    row = json.loads((run_dir / "results.jsonl").read_text())
    assert row["status"] == "passed", why(row) + done.stderr
    asked = [call.body["messages"][-1]["content"] for call in server.calls()]
    assert len(asked) == 3 and server.pending == 0
    # after the agent's first answer (no tools), after its draft (create_expense), after the submission
    assert "The agent has answered 1 time(s) so far.\nThe agent called no tools in its last turn." in asked[0]
    assert "The agent has answered 2 time(s) so far." in asked[1]
    shown = asked[1][asked[1].index("returned what follows (by tool name)"):]
    assert json.loads(shown[shown.index("{"):shown.index("Write your next message")]) == {
        "create_expense": {"id": "EXP-2025-001", "type": "travel", "amount": 3500, "status": "draft"}}
    assert "The agent has answered 3 time(s) so far." in asked[2] and '"submit_expense"' in asked[2]
    result = json.loads((run_dir / "expenses" / "a-travel-expense-submitted" / "run-1" / "result.json").read_text())
    asks = [event["data"] for event in result["events"] if event["name"] == "simulator"]
    assert [(ask["prompt"], ask["stop"]) for ask in asks] == [
        ("simulator.v2", None), ("simulator.v2", None), ("simulator.v2", "goal_achieved")]
    # which model played the user, as a judge's verdict names its model (it was recorded nowhere)
    assert {ask["model"] for ask in asks} == {"openai:gpt-4o-mini"}, asks
    assert result["end_reason"] == "goal_achieved"
