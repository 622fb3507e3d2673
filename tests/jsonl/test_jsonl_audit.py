"""What the JSONL design states and a pass over it as a user (session 34) found the program doing otherwise, each
against a real part: a local rest agent that takes its time, the project's own script simulators."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.expense_agent import ExpenseAgent, expense_agent
from jsonl.test_jsonl_run import project, run_cases
from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.net.serve import ThreadServer
from tamesu.plan.targets import Resolver
from tamesu.report.case_console import TestConsole
from tamesu.suite.secrets import Redactor

__all__ = ["expense_agent"]


def _slow_agent() -> Starlette:
    """Answers at once, except a message with "slow" in it: that one takes longer than any test here allows."""

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        if "slow" in message:
            await asyncio.sleep(4)
        return JSONResponse({"text": f"You said {message}. Anything else?", "awaiting_input": True})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


async def test_the_turn_a_timeout_cut_short_is_a_failed_turn_with_its_input(
        serve: Callable[[Any], ThreadServer], tmp_path: Path) -> None:
    # the design: "Agent timeout | Mark turn as FAILED | error: timeout after 30s". Before, the turn being answered
    # when the case's timeout ran out had no record and no console line: "(1 turn)" for a case whose second
    # turn hung, and nothing said what the agent had been asked
    folder = project(tmp_path, serve(_slow_agent()).url)
    (folder / "sims.py").write_text("def slowpoke(inputs):\n    return 'be slow now'\n")
    text = "\n".join(json.dumps(case) for case in [
        {"id": "mt", "timeout": "1s", "turns": [
            {"input": "hi"}, {"input": "be slow", "assertions": [{"type": "contains", "value": "said"}]}]},
        {"id": "dyn", "input": "hi", "timeout": "1s", "simulator": {"use": "scripts:sims:slowpoke"},
         "checkpoints": [{"id": "never", "assertion": {"type": "contains", "value": "zebra"}}]}])
    outcome, _ = await run_cases(folder, text)
    static, simulated = outcome.records
    for record, source, said in ((static, "static", "be slow"), (simulated, "simulator", "be slow now")):
        assert (record.status, record.end_reason, record.total_turns) == ("failed", "timeout", 2), record
        first, cut = record.turns or []
        assert (first.input, first.status) == ("hi", "passed")
        assert (cut.turn, cut.input, cut.input_source, cut.output, cut.status, cut.error) == (
            2, said, source, "", "failed", "the test took longer than its timeout (1s)"), cut
        assert 0 < cut.duration_ms <= 1500, cut  # from its question to the timeout: at most the whole second
    assert [(a.passed, a.reason) for a in static.turns[1].assertions or []] == [  # type: ignore[index]
        (None, "not evaluated: the conversation failed first")]
    out = StringIO()
    TestConsole(Console(file=out, width=200, color_system=None), Redactor()).case_finished(static)
    assert '├─ Turn 2: "be slow" → FAILED (' in out.getvalue(), out.getvalue()
    assert "Error: the test took longer than its timeout (1s)" in out.getvalue()


def test_one_message_not_from_the_user_is_named_by_its_own_path(tmp_path: Path) -> None:
    # before: "cases.jsonl:1:22: input[0].role: ..." for an input written as one message, no list in sight
    text = '{"id": "a", "input": {"role": "assistant", "content": "Hi"}}\n' \
           '{"id": "b", "input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes?"}]}\n' \
           '{"id": "c", "input": {"role": "usr", "content": [{"type": "video", "source": "file://x.mp4"}]}}'
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(Resolver(models=set(), targets=set())))
    last = "the last message of input is the one the agent answers: it must be from the user"
    assert [str(p) for p in caught.value.problems] == [
        f"cases.jsonl:1:31: input.role: {last}", f"cases.jsonl:2:67: input[1].role: {last}",
        "cases.jsonl:3:31: input.role: input should be 'user', 'assistant' or 'system', got 'usr' (did you mean "
        "'user'?)",
        "cases.jsonl:3:59: input.content[0].type: input should be 'text', 'image', 'file' or 'audio', got 'video'"]


async def test_a_pattern_anchors_at_each_turn_of_the_conversation(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # a multi-turn case's final `regex` reads every turn: `^` and `$` anchored at the joined transcript's ends, so
    # `^Expense submitted` never matched the last turn ("none in 3 turn(s)" while quoting it) and a later turn
    # that began "I'll" passed `negate`'s "never"
    folder = project(tmp_path, expense_agent.url)
    regex = [{"type": "regex", "pattern": "^Expense submitted"}, {"type": "regex", "pattern": "^I'll", "negate": True},
             {"type": "regex", "pattern": "Please confirm\\.$"}, {"type": "regex", "pattern": "submit\\?\\nI'll"}]
    text = json.dumps({"id": "flow", "turns": [{"input": "I want to submit an expense"},
                                               {"input": "Business travel, $3500"}, {"input": "Yes, confirm"}],
                       "final_assertions": regex})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert [(a.passed, a.reason) for a in record.final_assertions or []] == [
        (True, 'turn 3 matches: "Expense submitted"'),
        (False, "expected no match for /^I'll/; turn 2 has \"I'll\""),
        (True, 'turn 2 matches: "Please confirm."'),
        (True, 'turn 1 matches: "submit? I\'ll"')], record  # a pattern across turns still matches


async def test_a_simulator_that_stops_short_of_its_goal_is_said_under_the_last_turn(expense_agent: ExpenseAgent,
                                                                                     tmp_path: Path) -> None:
    # before: the tree ended after the agent's question with nothing said: a case whose agent still awaited input
    # looked as if the agent had finished
    folder = project(tmp_path, expense_agent.url)
    (folder / "quitter.py").write_text("def simulate(inputs):\n    return None if inputs['turn_number'] > 2 else "
                                       "'Business travel, $3500'\n")
    text = json.dumps({"id": "quits", "input": "I want to submit an expense",
                       "simulator": {"use": "scripts:quitter:simulate"}})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert (record.status, record.end_reason, record.total_turns) == ("passed", "simulator_stopped", 2), record
    out = StringIO()
    TestConsole(Console(file=out, width=200, color_system=None), Redactor()).case_finished(record)
    lines = out.getvalue().splitlines()
    assert lines[-4:-1] == ['  │          Simulator stopped: no next message, its goal not reached', "  │",
                            "  └─ Result: PASSED"], lines


async def test_a_multi_turn_case_goes_on_from_the_history_it_starts_with(expense_agent: ExpenseAgent,
                                                                        tmp_path: Path) -> None:
    # a history is sent with the first turn only (the default rest body's `messages`); the example agent answered
    # it and forgot it, so its next turn began a new conversation: "Yes, confirm" got "I can submit expenses..."
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "mh", "input": [
        {"role": "user", "content": "I want to submit an expense"}, {"role": "assistant", "content": "What type?"},
        {"role": "user", "content": "Business travel, $3500"}], "simulator": {"use": "scripts:sims:polite"},
        "final_assertions": [{"type": "contains", "value": "Expense submitted"}]})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert [(t.input, t.output) for t in record.turns or []] == [
        ("Business travel, $3500", "I'll create an expense for travel, $3,500. Please confirm."),
        ("Yes, confirm", "Expense submitted. Reference: EXP-2025-001")], record
    assert record.status == "passed", record
