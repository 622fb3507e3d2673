"""A standard case's message history is part of the conversation its graders read: a validator judging "asks
to confirm before submitting" needs what came before the last message (the later design revision passes the
history instead of playing it), whether the validator is tamesu's judge or another agent of tamesu.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from tamesu.testing import AgentSession

__all__ = ["expense_agent"]

PROJECT = """\
cache: { mode: "off" }
targets:
  expense:
    type: rest
    url: "{{env.EXPENSE_URL}}/chat"
    response: { text: $.text, tool_calls: $.tool_calls }
  checker:                      # a validator agent: a prompt on a (fake) model, told the request as JSON
    type: model
    model: checker-model
models:
  judge:
    provider: fake
    rules:
      - { transcript: "user: I want to submit an expense", pass: true, reason: "the history was shown" }
      - { pass: false, reason: "only the last message was shown" }
  checker-model:
    provider: fake
    rules:
      - { when: "I want to submit an expense", say: '{"passed": true, "reason": "the history was sent"}' }
      - { say: '{"passed": false, "reason": "only the last message was sent"}' }
"""

HISTORY = [{"role": "user", "content": "I want to submit an expense"},
           {"role": "assistant", "content": "What type of expense would you like to submit?"},
           {"role": "user", "content": "Business travel, $3500"}]


def test_a_validator_is_shown_the_history_before_the_last_message(expense_agent: ExpenseAgent,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text(PROJECT)
    criteria = {"metadata": {"criteria": "Asks to confirm before submitting"}}
    cases = [{"id": "judge", "input": HISTORY, "assertions": [{"type": "agent", "options": criteria}]},
             {"id": "agent", "input": HISTORY, "assertions": [{"type": "agent", "use": "agents:checker",
                                                               "options": criteria}]}]
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(case) for case in cases) + "\n")
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "cases.jsonl", "-n", "expense", "-o", str(out), "--out", str(tmp_path / "runs")],
                    cwd=tmp_path, env=expense_agent.env)
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    # before: both saw one exchange, "Business travel, $3500" and the answer, and failed the case
    assert [a["reason"] for a in records["judge"]["assertions"]] == ["the history was shown (fake judge)"], \
        records["judge"]
    assert [a["reason"] for a in records["agent"]["assertions"]] == ["the history was sent (checker)"], \
        records["agent"]
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_designs_conversation_metadata_reaches_the_judge_as_json(expense_agent: ExpenseAgent, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # t.assert.Agent(resp, validator, {metadata: {criteria, conversation: messages}}); before, the rubric read
    # "conversation: [{'role': 'user', ...}]", as Python writes a list
    (tmp_path / "tamesu.yaml").write_text(PROJECT.replace(
        "    rules:\n      - { transcript:",
        "    rules:\n      - { rubric: '\"role\": \"user\", \"content\": \"Travel, \\$500\"', pass: true, "
        "reason: 'the conversation as JSON' }\n      - { transcript:", 1))
    monkeypatch.setenv("EXPENSE_URL", expense_agent.url)
    messages = [{"role": "user", "content": "I want to submit an expense"},
                {"role": "assistant", "content": "What type of expense?"}, {"role": "user", "content": "Travel, $500"}]
    with AgentSession.open("expense", project=tmp_path) as agent:
        reply = agent.send(messages)
        verdict = agent.expect_agent(reply, "Asks to confirm before creating the expense", conversation=messages)
    assert verdict.reason == "the conversation as JSON (fake judge)"


def test_a_connector_picks_the_model_that_judges_in_the_python_api(expense_agent: ExpenseAgent, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # before: connector= was one more line of the rubric ("connector: lenient"), and models.judge answered
    (tmp_path / "tamesu.yaml").write_text(PROJECT + "  lenient: { provider: fake, rules: [{ pass: true, "
                                                    "reason: 'lenient judged' }] }\n")
    monkeypatch.setenv("EXPENSE_URL", expense_agent.url)
    with AgentSession.open("expense", project=tmp_path) as agent:
        reply = agent.send("Business travel, $3500")
        assert agent.expect_agent(reply, "Asks to confirm", connector="lenient").reason == "lenient judged (fake judge)"
