"""The Python API for script tests (`tamesu.testing`), against the real example agent with the fake judge: open a
session on a target, send messages and histories, grade replies with suite assertions, JSONL assertions and
validators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.expense_agent import EXAMPLE, ExpenseAgent, expense_agent
from tamesu.testing import AgentSession, AsyncAgentSession

__all__ = ["expense_agent"]


@pytest.fixture
def agent_env(expense_agent: ExpenseAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPENSE_URL", expense_agent.url)


def test_a_conversation_graded_turn_by_turn(agent_env: None) -> None:
    with AgentSession.open("expense", project=EXAMPLE) as agent:
        reply = agent.send("I want to submit an expense")
        assert reply.turn == 1 and reply.awaiting is not None and reply.awaiting.reason == "agent_declared"
        agent.expect(reply, contains="type of expense")
        reply = agent.send("Business travel, $3500")
        agent.expect(reply, {"type": "tool_called", "name": "create_expense"})
        verdict = agent.expect_agent(reply, "The agent asks to confirm before submitting", use="agents:judge")
        assert verdict.fake and verdict.reason == "asks for confirmation first (fake judge)"
        with pytest.raises(AssertionError, match='expected the agent to say "submitted"'):
            agent.expect(reply, contains="submitted")
        agent.send("Yes")
        # no reply: the whole conversation so far
        agent.expect(None, {"type": "json_path", "path": "$.expense.status", "value": "submitted"})
        agent.expect(None, tool_sequence=["create_expense", "submit_expense"])
        assert not agent.check(None, turns={"lte": 2}).passed


def test_a_history_in_one_call(agent_env: None) -> None:
    history = [{"role": "user", "content": "I want to submit an expense"},
               {"role": "assistant", "content": "What type of expense?"},
               {"role": "user", "content": "Business travel, $3500"},
               {"role": "assistant", "content": "Please confirm."},
               {"role": "user", "content": "Yes, confirm"}]
    with AgentSession.open("expense", project=EXAMPLE) as agent:
        reply = agent.send(history)
        assert reply.text == "Expense submitted. Reference: EXP-2025-001"
        agent.expect_agent(reply, "The reply gives a reference")
        assert not agent.check_agent(reply, "The reply names the approval threshold").passed


def test_wrong_input_is_a_clear_error(agent_env: None) -> None:
    with AgentSession.open("expense", project=EXAMPLE) as agent:
        with pytest.raises(ValueError, match="the last message must be the user's"):
            agent.send([{"role": "assistant", "content": "hi"}])
        with pytest.raises(ValueError, match="unknown assertion type 'contain'"):
            agent.check(None, {"type": "contain", "value": "x"})
        # before: AttributeError: 'str' object has no attribute 'turn' (the design grades `response.content`)
        reply = agent.send("I want to submit an expense")
        for grade in (lambda: agent.expect(reply.text, contains="type"),
                      lambda: agent.expect_agent(reply.text, "The agent asks what type of expense")):
            with pytest.raises(TypeError, match=r"^grade the Reply that send\(\) returned \(or None: the whole "
                                                r"conversation\), not str: expect\(reply, contains='...'\) reads"):
                grade()
    # a target that is not there: a ValueError in this API's words (it was a private TargetProblem: "-n expens: ...")
    with pytest.raises(ValueError, match=r"^no target named 'expens' \(targets: expense, expense-model\); or give "
                                         r"a URL \(http\(s\):// for a rest or A2A agent, grpc\(s\):// for one "
                                         r"with tamesu's turn API\) "
                                         r"\(AgentSession.open takes a target of .*tamesu.yaml"):
        AgentSession.open("expens", project=EXAMPLE)


async def test_the_async_session_for_async_tests(agent_env: None) -> None:
    async with await AsyncAgentSession.open("expense-model", project=EXAMPLE) as agent:
        reply = await agent.send("I want to submit an expense")
        await agent.expect(reply, {"type": "contains", "value": "type of expense"})
        assert reply.awaiting is not None and reply.awaiting.reason == "content_is_question"


async def test_options_the_target_never_sends_are_refused(agent_env: None) -> None:
    # before: a model target's send(options={"metadata": ...}) dropped them without a word (`tamesu test` warns)
    async with await AsyncAgentSession.open("expense-model", project=EXAMPLE) as agent:
        with pytest.raises(ValueError, match=r"these options cannot be sent: a model target sends only "
                                             r"options\.connector to the agent: options\.metadata is dropped"):
            await agent.send("hello", options={"metadata": {"tenant": "acme"}})
        reply = await agent.send("I want to submit an expense", options={"connector": "expense-bot"})
        assert reply.text


def test_the_sessions_connector_is_every_turns_options_connector_or_a_clear_error(
        tmp_path: Path, serve: Any) -> None:
    # before: open(..., connector=) on a rest target was dropped without a word (`tamesu test -c` sends it as every
    # turn's options.connector), and one naming no model on a model target opened, to fail each send (InfraError)
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    bodies: list[dict[str, Any]] = []

    async def chat(request: Request) -> JSONResponse:
        bodies.append(await request.json())
        return JSONResponse({"text": "ok"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    folder = tmp_path
    (folder / "tamesu.yaml").write_text(f"""\
suites: []
targets:
  bot: {{ type: rest, url: "{url}/chat" }}
  llm: {{ type: model, model: bot-model }}
models:
  bot-model: {{ provider: fake, rules: [ {{ say: hi }} ] }}
""")
    with AgentSession.open("bot", project=folder, connector="gpt-x") as agent:
        agent.send("one")
        agent.send("two", options={"connector": "own"})  # a turn's own wins, as a JSONL turn's over -c
    assert [body.get("options", {}).get("connector") for body in bodies] == ["gpt-x", "own"], bodies
    with pytest.raises(ValueError, match=r"^connector nope: no model named 'nope' under models: "):
        AgentSession.open("llm", project=folder, connector="nope")
    with AgentSession.open("llm", project=folder, connector="bot-model") as agent:
        assert agent.send("hello").text == "hi"


def test_a_project_folder_that_is_not_there_is_a_clear_error(tmp_path: Path) -> None:
    # before: the search for tamesu.yaml began at its parent, so a typo opened the project above it without a word
    (tmp_path / "tamesu.yaml").write_text("suites: []\ntargets:\n  bot: { type: model, model: m }\n"
                                          "models:\n  m: { provider: fake, rules: [ { say: hi } ] }\n")
    with pytest.raises(ValueError, match=r"^project .*typo: no such folder \(project= is the folder of tamesu.yaml\)$"):
        AgentSession.open("bot", project=tmp_path / "typo")
    with AgentSession.open("bot", project=tmp_path) as agent:
        assert agent.send("hello").text == "hi"
