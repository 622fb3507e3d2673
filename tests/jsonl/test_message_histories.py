"""A JSONL case whose `input` is a message history reaches the agent as one stateless call on every target type
whose protocol can carry it (the later design revision: "we pass the full conversation history. The agent sees
the context and responds to the last message"), against the project's example agents: the A2A shop (the history
as a data part before the last message) and the Realtime agent (one conversation item per earlier message).
Each history is one the agent can only answer right with its context: the same last message alone is answered
differently, and that is checked too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.voice import realtime_agent  # noqa: F401  (a fixture)
from conftest import run_tamesu
from test_example_a2a_shop import Shop, shop  # noqa: F401  (a fixture)

RETURN_HISTORY = [{"role": "user", "content": "I want to return something"},
                  {"role": "assistant", "content": "I can help with a return. Which order is it?"},
                  {"role": "user", "content": "ORD-1001"}]


def _records(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_an_a2a_agent_gets_the_history_and_answers_in_its_context(shop: Shop, tmp_path: Path) -> None:  # noqa: F811
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(case) for case in [
        {"id": "with history", "input": RETURN_HISTORY,
         "assertions": [{"type": "contains", "value": "RMA"},
                        {"type": "json_path", "path": "$.status.state", "value": "completed"}]},
        # the last message alone: the agent cannot know it is a return, and says what it does for an order id
        {"id": "last line alone", "input": "ORD-1001",
         "assertions": [{"type": "contains", "value": "RMA", "negate": True}]},
    ]))
    out = tmp_path / "records.jsonl"
    done = run_tamesu(["test", "-i", str(cases), "-n", shop.jsonrpc, "-o", str(out), "--out", str(tmp_path / "runs")],
                      cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    records = _records(out)
    assert records["with history"]["status"] == "passed", records["with history"]
    assert records["last line alone"]["status"] == "passed", records["last line alone"]
    # one call carried the whole conversation: the request holds the history as a data part, first
    [result] = (tmp_path / "runs").rglob("with-history/run-1/result.json")
    sent = json.loads(result.read_text())
    text = json.dumps(sent)
    assert "I can help with a return. Which order is it?" in text
    assert sent["metrics"]["a2a_requests"] == 1


@pytest.mark.usefixtures("realtime_agent")
def test_a_realtime_agent_gets_the_history_as_conversation_items(realtime_agent: str,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text(f"""\
targets:
  bella:
    type: realtime
    url: "{realtime_agent}"
    mode: text
    done_tool: end_call
    tool_results:
      book_table: {{ booked: true }}
""")
    history = [{"role": "user", "content": "A table for 4 on Friday please"},
               {"role": "assistant", "content": "Good news, there is a table free at 7 pm. Shall I book it for you?"},
               {"role": "user", "content": "Yes please"}]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(case) for case in [
        {"id": "books from context", "input": history,
         "assertions": [{"type": "tool_called", "name": "book_table",
                         "args": {"party_size": 4, "day": "friday"}}]},
        {"id": "yes alone", "input": "Yes please",
         "assertions": [{"type": "tool_called", "name": "book_table", "args": {"party_size": 4}, "negate": True}]},
    ]))
    out = tmp_path / "records.jsonl"
    done = run_tamesu(["test", "-i", str(cases), "-n", "bella", "-o", str(out), "--out", str(tmp_path / "runs")],
                      cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    records = _records(out)
    assert records["books from context"]["status"] == "passed", records["books from context"]
    assert records["yes alone"]["status"] == "passed", records["yes alone"]


VOICE_PROJECT = """\
targets:
  line:
    type: voice
    url: "{ws}/socket?call={{{{session.call}}}}"
    headers: {{ Authorization: "Bearer {{{{session.token}}}}" }}
    session:
      open: {{ url: "{http}/calls", method: GET, capture: {{ call: $.call.id, token: $.call.token }} }}
    audio: {{ encoding: pcm16, sample_rate: 16000, frames: binary }}
    turn_timeout: 8s
    connect: {{ attempts: 1 }}
"""


@pytest.fixture
def voice_line(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A project whose only target is a voice agent (a real websocket one, which counts the calls it gets)."""
    from agents.voice_tool_agent import VoiceToolAgent

    agent = VoiceToolAgent()
    try:
        (tmp_path / "tamesu.yaml").write_text(VOICE_PROJECT.format(ws=agent.ws, http=agent.http))
        yield tmp_path, agent
    finally:
        agent.stop()


def test_a_history_a_voice_agent_cannot_get_is_refused_when_the_case_loads(voice_line: tuple[Path, Any]) -> None:
    project, agent = voice_line
    cases = project / "cases.jsonl"
    cases.write_text(json.dumps({"id": "h", "input": RETURN_HISTORY}) + "\n"
                     + json.dumps({"id": "alone", "input": "ORD-1001"}) + "\n")
    refused = ("cases.jsonl:1:22: input: a history of 3 messages would reach the agent as its last message alone (the "
               "voice target line cannot send a message history: its protocol carries one user turn at a time; "
               "write the user's messages as turns[] to play them in order)")
    done = run_tamesu(["test", "-i", "cases.jsonl", "--out", "runs"], cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [refused, "1 problem found"]
    assert agent.calls_created == 0 and not (project / "runs").exists()  # nothing ran, not even the other case
    checked = run_tamesu(["validate", "cases.jsonl"], cwd=project)
    assert checked.returncode == 2 and checked.stderr.splitlines()[0] == refused, checked.stdout + checked.stderr


def test_the_python_api_will_not_send_a_history_to_a_voice_agent(voice_line: tuple[Path, Any]) -> None:
    from tamesu.testing import AgentSession

    project, agent = voice_line
    with AgentSession.open("line", project=project) as line:
        assert agent.calls_created == 1  # a real session on the agent
        with pytest.raises(ValueError, match="a history of 3 messages cannot be sent: the voice target line cannot "
                                             "send a message history"):
            line.send(RETURN_HISTORY)
        assert line.exchanges == []
