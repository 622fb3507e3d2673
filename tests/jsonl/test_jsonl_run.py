"""JSONL cases run in-process through the engine against the real example agent (and a fake-model target):
the termination rules of dynamic mode, max_turns, script simulators, timeouts, fail-fast, parallel runs,
`-c` on a model target, and a history reaching the model as messages."""

from __future__ import annotations

import json
import re
import textwrap
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agents.expense_agent import ExpenseAgent, expense_agent
from tamesu.cli.jsonl_runner import JsonlRunner, TestOutcome
from tamesu.engine.live import TargetHelper
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.jsonl.run import JsonlFile, JsonlPlan, TestSettings
from tamesu.plan import load_project, load_project_targets
from tamesu.plan.targets import Resolver, resolve
from tamesu.report.case_console import TestConsole
from tamesu.report.case_records import CaseRecord
from tamesu.suite.secrets import Redactor, Secrets

__all__ = ["expense_agent"]

SIMULATOR_RULES = """\
- { when: "(?i)type of expense", say: "Business travel, $3500" }
- { when: "(?i)please confirm", say: "Yes, confirm" }
- { when: "(?i)submitted", goal_achieved: true }
"""


class Quiet:
    def __init__(self) -> None:
        self.records: list[CaseRecord] = []

    def case_finished(self, record: CaseRecord) -> None:
        self.records.append(record)

    def warning(self, message: str) -> None:
        raise AssertionError(message)


def project(tmp_path: Path, agent_url: str, extra: str = "") -> Path:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    (folder / "simulator.yaml").write_text(SIMULATOR_RULES)
    (folder / "tamesu.yaml").write_text(textwrap.dedent(f"""\
        targets:
          expense: {{ type: rest, url: "{agent_url}/chat", response: {{ tool_calls: $.tool_calls }} }}
          bot: {{ type: model, model: bot, system: "You file expenses." }}
        models:
          simulator: {{ provider: fake, rules: simulator.yaml }}
          bot: {{ provider: fake, rules: [{{ say: "Which expense do you mean?" }}] }}
          terse: {{ provider: fake, rules: [{{ say: "Done." }}] }}
        """) + extra)
    (folder / "sims.py").write_text(textwrap.dedent("""\
        def chatty(inputs):
            # never satisfied: keeps talking whatever the agent says
            return {"input": f"And another thing ({inputs['turn_number']})", "reasoning": "keeps going"}

        def polite(inputs):
            if "submitted" in inputs["last_response"]:
                return {"goal_achieved": True, "reasoning": "the expense is in"}
            if "confirm" in inputs["last_response"].lower():
                return "Yes, confirm"
            return "Business travel, $3500"
        """))
    return folder


async def run_cases(folder: Path, text: str, target: str = "expense", **settings: Any) -> tuple[TestOutcome, Quiet]:
    loaded = load_project(folder / "tamesu.yaml", folder)
    secrets = Secrets([])
    resolved, _ = await resolve(target, loaded, secrets)
    specs = load_project_targets(loaded)[0]
    resolver = Resolver(models=set(loaded.spec.models), targets=set(specs), search=[folder],
                        helpers={name: TargetHelper(name, spec, secrets, folder) for name, spec in specs.items()})
    cases = parse_text(text, "cases.jsonl", folder, ParseSettings(resolver, settings.pop("simulator", None)))
    plan = JsonlPlan(loaded, secrets, resolved, folder, [JsonlFile("cases", None, cases, "cases.jsonl")])
    reporter = Quiet()
    outcome = await JsonlRunner(plan, TestSettings(out=folder / "runs", **settings), reporter).run()
    return outcome, reporter


def dynamic(checkpoints: list[dict[str, Any]], **more: Any) -> str:
    return json.dumps({"id": "dyn", "simulator": {"use": "simulator", "options": {"metadata": {
        "goal": "I need to submit an expense"}}}, "checkpoints": checkpoints, **more})


CONTAINS = {"type": "contains"}


async def test_the_goal_reached_before_a_required_checkpoint_fails(expense_agent: ExpenseAgent,
                                                                   tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = dynamic([{"id": "ask", "assertion": {**CONTAINS, "value": "type"}},
                    {"id": "policy", "after": ["ask"], "assertion": {**CONTAINS, "value": "policy"}},
                    {"id": "nice", "required": False, "assertion": {**CONTAINS, "value": "thank you"}}],
                   max_turns=6)
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert outcome.exit_code == 1
    assert record.status == "failed" and record.end_reason == "goal_achieved"
    assert record.error == "missing checkpoints: policy"
    assert [(c.id, c.reached_at_turn, c.passed) for c in record.checkpoints or []] == [
        ("ask", 1, True), ("policy", None, False), ("nice", None, True)]
    # the goal the simulator was given, not its private reasoning (issue 15, item 7), nor the checkpoint reached
    # last: "ask" was reached at turn 1, and named under turn 3 it read as what that turn achieved
    assert record.goal_achieved == "I need to submit an expense"
    said = StringIO()
    TestConsole(Console(file=said, width=200, color_system=None), Redactor()).case_finished(record)
    lines = said.getvalue().splitlines()
    last_turn = max(n for n, line in enumerate(lines) if line.startswith("  ├─ Turn "))
    # as the design's console has it: under the turn after which the simulator said so
    assert lines[last_turn].startswith("  ├─ Turn 3: [Simulated] \"Yes, confirm\"")
    assert lines[last_turn + 1:last_turn + 6] == [
        '  │          Agent: "Expense submitted. Reference: EXP-2025-001"',
        '  │          [tool: submit_expense({"id": "EXP-2025-001"})]',
        "  │          Goal achieved: I need to submit an expense", "  │", "  ├─ Checkpoints: 1/3 reached"]


async def test_optional_checkpoints_do_not_hold_the_conversation(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = dynamic([{"id": "ask", "assertion": {**CONTAINS, "value": "type"}},
                    {"id": "never", "required": False, "assertion": {**CONTAINS, "value": "zebra"}}])
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == "passed" and record.total_turns == 1 and record.end_reason == "checkpoints_reached"


async def test_max_turns_fails_a_dynamic_case(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "dyn", "simulator": {"use": "scripts:sims:chatty"}, "max_turns": 3,
                       "checkpoints": [{"id": "never", "assertion": {**CONTAINS, "value": "zebra"}}]})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == "failed" and record.total_turns == 3
    assert record.error == "max turns (3) exceeded"
    assert [t.input for t in record.turns or []] == [f"And another thing ({n})" for n in (1, 2, 3)]


async def test_a_script_simulator_plays_a_multi_turn_case(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "mt", "input": "I want to submit an expense", "simulator": {"use": "scripts:sims:polite"},
                       "final_assertions": [{"type": "json_path", "path": "$.expense.status", "value": "submitted"}]})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == "passed", record
    assert [(t.input_source, t.awaiting_input) for t in record.turns or []] == [
        ("static", True), ("simulator", True), ("simulator", False)]
    assert record.end_reason == "agent_done"


async def test_the_simulators_connector_is_the_model_it_answers_with(expense_agent: ExpenseAgent,
                                                                     tmp_path: Path) -> None:
    # before: simulator.options.connector was read and dropped (models.simulator answered, "Business travel")
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "mt", "input": "I want to submit an expense", "max_turns": 2,
                       "simulator": {"use": "simulator", "options": {"connector": "terse"}}})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert [(t.input_source, t.input) for t in record.turns or []] == [
        ("static", "I want to submit an expense"), ("simulator", "Done.")], record


async def test_max_turns_fails_a_multi_turn_case_that_would_go_on(expense_agent: ExpenseAgent,
                                                                  tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "mt", "input": "Hmm", "simulator": {"use": "scripts:sims:chatty"}, "max_turns": 2})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == "failed" and record.error == "max turns (2) exceeded" and record.total_turns == 2


async def test_the_simulator_flag_is_the_default_simulator(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "dyn", "input": "I want to submit an expense",
                       "checkpoints": [{"id": "made", "assertion": {"type": "tool_called", "name": "create_expense"}}]})
    outcome, _ = await run_cases(folder, text, simulator="scripts:sims:polite")
    (record,) = outcome.records
    assert record.status == "passed" and record.simulator == "scripts:sims:polite"
    assert [t.input_source for t in record.turns or []] == ["static", "simulator"]


async def test_a_case_timeout_fails_the_case(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = json.dumps({"id": "slow", "simulator": {"use": "scripts:sims:chatty"}, "max_turns": 1000,
                       "timeout": "1s", "checkpoints": [{"id": "spoke", "assertion": {"type": "regex", "pattern": "."}},
                                                        {"id": "never", "assertion": {**CONTAINS, "value": "zz"}}]})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == "failed" and record.end_reason == "timeout"
    assert record.error == "the test took longer than its timeout (1s)"
    # before: the checkpoint reached at turn 1 had no `passed` ("·" in the console), and one the timeout cut
    # short before any turn had an empty reason
    spoke, never = record.checkpoints or []
    assert (spoke.reached_at_turn, spoke.passed) == (1, True) and spoke.reason.startswith("reached at turn 1: ")
    assert (never.reached_at_turn, never.passed) == (None, None)
    # the turn its last check read (a check of one turn says "not found in the answer"; it said "in 1 turn(s)")
    assert re.match(r'not evaluated: the conversation failed first \(last check, turn \d+: expected the agent to say '
                    r'"zz"; not found in the answer: ', never.reason), never.reason


async def test_a_checkpoint_that_cannot_be_checked_is_named_in_the_error(expense_agent: ExpenseAgent,
                                                                         tmp_path: Path) -> None:
    # before: "script scripts:checks:broken raised ValueError: checker broke", no word of which checkpoint, and
    # the checkpoint itself "not evaluated"
    folder = project(tmp_path, expense_agent.url)
    (folder / "checks.py").write_text("def broken(run):\n    raise ValueError('checker broke')\n")
    text = dynamic([{"id": "ask", "assertion": {**CONTAINS, "value": "type"}},
                    {"id": "made", "after": ["ask"], "assertion": {"type": "script", "use": "scripts:checks:broken"}}])
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    said = "script scripts:checks:broken raised ValueError: checker broke"
    assert record.status == "error" and record.error == f"checkpoint made: {said}", record
    # the project's check code broke: the suite's to fix (exit 2), not the environment's (it was exit 3)
    assert (record.fault, outcome.exit_code) == ("suite", 2), record
    assert [(c.id, c.passed, c.reason) for c in record.checkpoints or []] == [
        ("ask", True, 'reached at turn 1: found "type" (the answer)'),
        ("made", None, f"not evaluated (last check, turn 1: not decided: {said})")]


async def test_fail_fast_stops_starting_cases(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    text = "\n".join(json.dumps({"id": f"c{n}", "input": "Hello", "assertions": [{**CONTAINS, "value": word}]})
                     for n, word in enumerate(["Hi", "zebra", "Hi"]))
    outcome, _ = await run_cases(folder, text, fail_fast=True)
    assert [(r.id, r.status) for r in outcome.records] == [("c0", "passed"), ("c1", "failed"), ("c2", "skipped")]
    assert outcome.records[2].skip_reason == "not run: fail-fast: an earlier test failed"
    assert outcome.exit_code == 1 and outcome.summary.stopped == "fail-fast: an earlier test failed"


async def test_parallel_cases_each_keep_their_own_conversation(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url)
    flow = [{"input": "I want to submit an expense"}, {"input": "Business travel, $3500"}, {"input": "Yes"}]
    text = "\n".join(json.dumps({"id": f"p{n}", "turns": flow, "final_assertions": [
        {"type": "json_path", "path": "$.expense.status", "value": "submitted"}]}) for n in range(6))
    outcome, _ = await run_cases(folder, text, parallel=6)
    assert sorted(r.id for r in outcome.records) == [f"p{n}" for n in range(6)]
    assert {r.status for r in outcome.records} == {"passed"}
    results = [json.loads(line) for line in (outcome.run_dir / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6 and all((outcome.run_dir / r["runs"][0]["dir"] / "result.json").is_file()
                                     for r in results)


async def test_a_history_reaches_the_model_as_messages(tmp_path: Path) -> None:
    folder = project(tmp_path, "http://127.0.0.1:9")
    history = [{"role": "user", "content": "one two three"}, {"role": "assistant", "content": "four five"},
               {"role": "user", "content": "six"}]
    text = "\n".join([json.dumps({"id": "alone", "input": "six"}), json.dumps({"id": "history", "input": history})])
    outcome, _ = await run_cases(folder, text, target="bot")
    assert [r.status for r in outcome.records] == ["passed", "passed"]

    def input_words(record: CaseRecord) -> int:
        result = json.loads((outcome.run_dir / str(record.result)).read_text())
        return result["turns"][0]["agent"]["raw"][0]["usage"]["input_tokens"]

    alone, with_history = outcome.records
    assert input_words(with_history) - input_words(alone) == 5  # "one two three" and "four five" came along


async def test_a_model_target_asking_a_question_awaits_input(tmp_path: Path) -> None:
    folder = project(tmp_path, "http://127.0.0.1:9")
    outcome, _ = await run_cases(folder, json.dumps({"id": "q", "turns": [{"input": "Expense please"}]}), target="bot")
    (record,) = outcome.records
    assert record.status == "skipped"
    assert record.turns is not None and record.turns[0].awaiting_reason == "content_is_question"


async def test_the_connector_answers_for_a_model_target(tmp_path: Path) -> None:
    folder = project(tmp_path, "http://127.0.0.1:9")
    text = json.dumps({"id": "c", "input": "File it", "assertions": [{"type": "equals", "value": "Done."}]})
    outcome, _ = await run_cases(folder, text, target="bot", connector="terse")
    (record,) = outcome.records
    assert record.status == "passed" and record.response == "Done."
    result = json.loads((outcome.run_dir / str(record.result)).read_text())
    assert result["target"] == "bot (terse)"


@pytest.mark.parametrize(("limit", "status"), [(3, "passed"), (2, "failed")])
async def test_script_assertions_get_the_reply_and_metadata(expense_agent: ExpenseAgent, tmp_path: Path,
                                                            limit: int, status: str) -> None:
    folder = project(tmp_path, expense_agent.url)
    (folder / "checks.py").write_text(textwrap.dedent("""\
        def turns_at_most(run):
            limit = run.metadata["limit"]
            assert len(run.turns) <= limit, f"{len(run.turns)} turns, more than {limit}"
        """))
    text = json.dumps({"id": "s", "turns": [{"input": "Hello"}, {"input": "I want to submit an expense"},
                                            {"input": "Business travel, $3500"}],
                       "on_missing_input": "end", "final_assertions": [
                           {"type": "script", "use": "scripts:checks:turns_at_most",
                            "options": {"metadata": {"limit": limit}}}]})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == status
    assert record.final_assertions is not None
    assert record.final_assertions[0].reason == ("scripts:checks:turns_at_most passed" if limit == 3
                                                 else "3 turns, more than 2")


async def test_a_spent_budget_stops_the_run_with_exit_4(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url, extra="budget: { tokens: 400 }\n")
    endless = dynamic([{"id": "never", "assertion": {**CONTAINS, "value": "zebra"}}], max_turns=200)
    text = "\n".join([endless, json.dumps({"id": "later", "input": "Hello"})])
    outcome, _ = await run_cases(folder, text)
    assert outcome.exit_code == 4
    assert [(r.id, r.status) for r in outcome.records] == [("dyn", "error"), ("later", "skipped")]
    assert "budget" in str(outcome.records[0].error)
    assert outcome.summary.stopped == "the budget was exceeded"


def _echo_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"text": "ok", "got": await request.json()})

    return Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/custom", echo, methods=["POST"])])


async def test_rest_targets_receive_the_history_and_options(serve: Any, tmp_path: Path) -> None:
    server = serve(_echo_app())
    folder = project(tmp_path, server.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", textwrap.dedent(f"""\
        targets:
          plain: {{ type: rest, url: "{server.url}/echo" }}
          custom:
            type: rest
            url: "{server.url}/custom"
            request:
              body: {{ said: "{{{{message}}}}", history: "{{{{messages}}}}", mode: "{{{{options.mode}}}}" }}
        """), 1))
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"}]
    case = {"id": "h", "input": messages, "options": {"mode": "chat", "metadata": {"k": 1}}}
    plain, _ = await run_cases(folder, json.dumps({**case, "assertions": [
        {"type": "json_path", "path": "$.got.messages", "value": messages},
        {"type": "json_path", "path": "$.got.options", "value": {"mode": "chat", "metadata": {"k": 1}}},
        {"type": "json_path", "path": "$.got.message", "value": "c"}]}), target="plain")
    custom, _ = await run_cases(folder, json.dumps({**case, "assertions": [
        {"type": "json_path", "path": "$.got", "value": {"said": "c", "history": messages, "mode": "chat"}}]}),
        target="custom")
    for outcome in (plain, custom):
        (record,) = outcome.records
        assert record.status == "passed", record.assertions


async def test_a_turn_that_only_calls_a_tool_shows_the_call_as_the_agents_answer(serve: Any, tmp_path: Path) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(_: Any) -> JSONResponse:
        return JSONResponse({"text": "", "tool_calls": [{"name": "create_expense", "args": {"amount": 3500}}]})

    server = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])]))
    folder = project(tmp_path, server.url)
    text = "\n".join([json.dumps({"id": "t", "turns": [{"input": "Business travel, $3500"}]}),
                      json.dumps({"id": "s", "input": "Business travel, $3500"})])
    outcome, _ = await run_cases(folder, text)
    said = StringIO()
    console = TestConsole(Console(file=said, width=200, color_system=None), Redactor(), verbose=1)
    for record in outcome.records:
        console.case_finished(record)
    lines = said.getvalue().splitlines()
    # the design's console: `Agent: [tool: create_expense(...)]` where the agent said nothing but called a tool
    assert lines[1].startswith('  ├─ Turn 1: "Business travel, $3500" → PASSED'), lines
    assert lines[2] == '  │          Agent: [tool: create_expense({"amount": 3500})]', lines
    standard = lines.index("  Messages: 1, Assertions: 0/0 passed")
    assert lines[standard + 1:standard + 3] == ['  Agent: [tool: create_expense({"amount": 3500})]', ""], lines


def _helper_app() -> Any:
    """A helper agent answering the design's simulator, validator and generator interfaces over REST."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def helper(request: Request) -> JSONResponse:
        body = await request.json()
        meta = body["options"]["metadata"]
        if meta["test_mode"] == "simulator":
            last = meta["last_response"].lower()
            if "submitted" in last:
                return JSONResponse({"goal_achieved": True, "reasoning": "filed"})
            said = "Business travel, $3500" if "type" in last else "Yes" if "confirm" in last else meta["goal"]
            return JSONResponse({"text": f"I say: {said}", "input": said})
        if meta["test_mode"] == "validator":
            last = meta["messages"][-1]["content"]
            advice = {"suggestions": [meta["advise"]]} if "advise" in meta else {}
            return JSONResponse({"passed": meta["word"] in last, "score": 0.9, "reason": f"looked for {meta['word']}",
                                 **advice})
        cases = [{"name": f"case {n}", "input": "Hello", "assertions": [{"type": "contains", "value": "Hi"}]}
                 for n in range(int(meta["count"]) + 1)]
        return JSONResponse({"text": "here", "cases": cases})

    return Starlette(routes=[Route("/helper", helper, methods=["POST"])])


async def test_a_target_plays_simulator_and_validator(expense_agent: ExpenseAgent, serve: Any,
                                                      tmp_path: Path) -> None:
    helper = serve(_helper_app())
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  helper: {{ type: rest, url: \"{helper.url}/helper\" }}\n", 1))
    check = {"type": "agent", "use": "agents:helper", "options": {"metadata": {"criteria": "says it", "word": "{}"}}}
    text = json.dumps({"id": "dyn", "simulator": {"use": "helper", "options": {"metadata": {
        "goal": "I want to submit an expense"}}}, "checkpoints": [
        {"id": "made", "assertion": {"type": "tool_called", "name": "create_expense"}},
        {"id": "judged", "after": ["made"], "assertion": json.loads(json.dumps(check).replace("{}", "submitted"))}],
        "final_assertions": [json.loads(json.dumps(check).replace("{}", "zebra")) | {"negate": True}]})
    outcome, _ = await run_cases(folder, text)
    (record,) = outcome.records
    assert record.status == "passed", record
    assert [t.input for t in record.turns or []] == ["I want to submit an expense", "Business travel, $3500", "Yes"]
    assert [(c.id, c.reached_at_turn) for c in record.checkpoints or []] == [("made", 2), ("judged", 3)]
    assert record.final_assertions is not None
    # its label says it is negated: its reason does not again (before: `negated: looked for zebra (helper)`)
    assert (record.final_assertions[0].label, record.final_assertions[0].reason) == (
        'not agent "says it"', "looked for zebra (helper)")


async def test_a_validators_score_and_suggestions_reach_the_records(expense_agent: ExpenseAgent, serve: Any,
                                                                    tmp_path: Path) -> None:
    helper = serve(_helper_app())
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  helper: {{ type: rest, url: \"{helper.url}/helper\" }}\n", 1))
    metadata = {"criteria": "asks the type", "word": "type", "advise": "Offer the expense types as a list"}
    text = json.dumps({"id": "v", "input": "I want to submit an expense", "assertions": [
        {"type": "agent", "use": "agents:helper", "options": {"metadata": metadata}},
        {"type": "contains", "value": "type"}]})
    out = tmp_path / "records.jsonl"
    outcome, _ = await run_cases(folder, text, output=out)
    assert outcome.exit_code == 0
    (line,) = [json.loads(raw) for raw in out.read_text().splitlines()]
    validator, plain = line["assertions"]
    # the design's validator answers {passed, score, reason, suggestions}: the record keeps all four
    assert (validator["passed"], validator["score"], validator["suggestions"]) == (
        True, 0.9, ["Offer the expense types as a list"])
    assert "score" not in plain and "suggestions" not in plain


def test_a_target_generates_cases(expense_agent: ExpenseAgent, serve: Any, tmp_path: Path) -> None:
    from agents.expense_agent import run_test

    helper = serve(_helper_app())
    folder = project(tmp_path, expense_agent.url)
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", f"targets:\n  helper: {{ type: rest, url: \"{helper.url}/helper\" }}\n", 1))
    out = tmp_path / "made.jsonl"
    done = run_test(["-i", "agents:helper?count=2", "-n", "expense", "--dry-run", "-o", str(out)], cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["G001", "G002"]


async def test_project_hooks_run_around_the_cases(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    folder = project(tmp_path, expense_agent.url, extra=textwrap.dedent("""\
        hooks:
          before_all: ["echo all >> hooks.log"]
          before_each: ["echo each >> hooks.log"]
        """))
    text = "\n".join(json.dumps({"id": f"c{n}", "input": "Hello"}) for n in range(2))
    outcome, _ = await run_cases(folder, text)
    assert outcome.exit_code == 0
    assert (folder / "hooks.log").read_text().split() == ["all", "each", "each"]
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "echo all >> hooks.log", "exit 3"))
    outcome, _ = await run_cases(folder, text)
    assert outcome.exit_code == 3
    assert [r.status for r in outcome.records] == ["error", "error"]
    assert "before_all" in str(outcome.records[0].error)
