"""What the JSONL design states and a pass over it (session 32) found the program doing otherwise, each against a
real part: the example expense agent, fake models, the project's own script simulators."""

from __future__ import annotations

import json
import re
import textwrap
from io import StringIO
from pathlib import Path

from rich.console import Console

from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from jsonl.test_jsonl_run import project, run_cases
from tamesu.report.case_console import TestConsole
from tamesu.suite.secrets import Redactor

__all__ = ["expense_agent"]


async def test_json_path_and_type_read_an_answer_written_as_json_text(tmp_path: Path) -> None:
    # the design's `json_path` and `type` examples ($.status, $.count) check an agent that answers JSON; a model
    # (or an A2A agent, a gRPC one) answers it as text, which was never read: "$.status: no match"
    folder = project(tmp_path, "http://127.0.0.1:9")
    (folder / "json-bot.yaml").write_text(textwrap.dedent("""\
        - { when: "(?i)fenced", say: "```json\\n{\\"status\\": \\"ok\\"}\\n```" }
        - { say: "{\\"status\\": \\"ok\\", \\"count\\": 3}" }
        """))
    (folder / "tamesu.yaml").write_text((folder / "tamesu.yaml").read_text().replace(
        "targets:\n", "targets:\n  json-bot: { type: model, model: json-bot }\n", 1).replace(
        "models:\n", "models:\n  json-bot: { provider: fake, rules: json-bot.yaml }\n", 1))
    plain = {"id": "plain", "input": "Status?", "assertions": [
        {"type": "json_path", "path": "$.status", "value": "ok"},
        {"type": "type", "path": "$.count", "value": "number"},
        {"type": "equals", "path": "$.count", "value": 3}, {"type": "json_path", "path": "$.missing", "negate": True}]}
    fenced = {"id": "fenced", "input": "Fenced, please", "assertions": [
        {"type": "json_path", "path": "$.status", "value": "ok"}]}
    wrong = {"id": "wrong", "input": "Status?", "assertions": [
        {"type": "json_path", "path": "$.status", "value": "down"}]}
    text = "\n".join(json.dumps(case) for case in (plain, fenced, wrong))
    outcome, _ = await run_cases(folder, text, target="json-bot")
    by_id = {record.id: record for record in outcome.records}
    assert by_id["plain"].status == "passed", by_id["plain"].assertions
    assert [a.reason for a in by_id["plain"].assertions or []][:1] == ['$.status is "ok" in the text of turn 1']
    assert by_id["fenced"].status == "passed", by_id["fenced"].assertions
    assert by_id["wrong"].status == "failed"
    assert str((by_id["wrong"].assertions or [])[0].reason).startswith("$.status in the text of turn 1: ")


async def test_a_simulator_that_ends_before_its_first_message_is_not_the_agents_failure(
        expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # the design fails a dynamic case whose simulator says its goal is reached before every checkpoint; here it said
    # so before the agent was asked anything, which was "failed, fault: agent" (exit 1) for an agent never spoken to
    folder = project(tmp_path, expense_agent.url)
    (folder / "quiet.py").write_text(textwrap.dedent("""\
        def done(inputs):
            return {"goal_achieved": True, "reasoning": "nothing to do"}

        def hang_up(inputs):
            return None
        """))
    checkpoint = [{"id": "ask", "assertion": {"type": "contains", "value": "type"}}]
    text = "\n".join(json.dumps({"id": name, "simulator": {"use": f"scripts:quiet:{name}"}, "checkpoints": checkpoint,
                                 "retries_inconclusive": 0}) for name in ("done", "hang_up"))
    outcome, _ = await run_cases(folder, text)
    for record in outcome.records:
        assert record.total_turns == 0
        assert (record.status, record.fault) == ("inconclusive", "simulated_user"), record
        assert "before its first message: the agent was never asked anything" in str(record.fault_reason)
    assert outcome.exit_code == 1  # as a suite's inconclusive test: the run did not pass, and says why
    said = StringIO()
    TestConsole(Console(file=said, width=300, color_system=None), Redactor()).case_finished(outcome.records[0])
    assert said.getvalue().splitlines()[-3:-1] == [
        "  └─ Result: INCONCLUSIVE", "     Reason: the simulated user ended the conversation (goal_achieved) before "
        "its first message: the agent was never asked anything"]
    # a simulator that ends after the agent answered still fails the case, as the design says
    spoke = json.dumps({"id": "spoke", "input": "I want to submit an expense",
                        "simulator": {"use": "scripts:quiet:done"},
                        "checkpoints": [*checkpoint, {"id": "po", "assertion": {"type": "contains", "value": "PO"}}]})
    outcome, _ = await run_cases(folder, spoke)
    (record,) = outcome.records
    assert (record.status, record.fault, record.error) == ("failed", "agent", "missing checkpoints: po")
    assert outcome.exit_code == 1


async def test_an_inconclusive_case_a_script_plays_is_not_run_again(expense_agent: ExpenseAgent,
                                                                     tmp_path: Path) -> None:
    # before: run 3 times (retries_inconclusive: 2), each "again with a new seed" that a script never reads: the same
    # inputs, the same end, and a warning each time that was not true. Now once, and the result says why
    folder = project(tmp_path, expense_agent.url)
    calls = tmp_path / "calls.txt"
    (folder / "quiet.py").write_text(textwrap.dedent(f"""\
        def hang_up(inputs):
            with open({str(calls)!r}, "a") as out:
                out.write("called\\n")
            return None
        """))
    case = {"id": "hang_up", "simulator": {"use": "scripts:quiet:hang_up"},
            "checkpoints": [{"id": "ask", "assertion": {"type": "contains", "value": "type"}}]}
    outcome, _ = await run_cases(folder, json.dumps(case))  # Quiet: a warning ("running it again") fails the test
    (record,) = outcome.records
    assert (record.status, record.fault) == ("inconclusive", "simulated_user"), record
    assert calls.read_text().splitlines() == ["called"]
    assert str(record.fault_reason).endswith(
        "the agent was never asked anything (not run again: a script plays the user, and reads no seed, so a rerun "
        "would play it the same (retries_inconclusive reruns a model's simulated user with a new seed))"), record


def test_records_say_durations_in_whole_milliseconds(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # the design's records: "duration_ms": 1800 (a case), 2100 (a turn); 20.555 is no integer to a reader that
    # decodes the design's shape into one (Go's int64 refuses even 12.0)
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    durations = [r["duration_ms"] for r in records] + [t["duration_ms"] for r in records for t in r["turns"]]
    assert len(durations) == 3 + 3 + 1 + 3
    assert all(type(ms) is int and ms >= 0 for ms in durations), durations
    assert not re.findall(r'"duration_ms": \d+\.', out.read_text())


async def test_a_failed_assertion_is_in_the_records_assertion_errors(expense_agent: ExpenseAgent,
                                                                     tmp_path: Path) -> None:
    # both revisions' error tables: "Assertion failed | FAILED | assertion_errors: [...]" (a standard case's record,
    # a turn's); a reader of the design's records looked for failures there and found no key
    folder = project(tmp_path, expense_agent.url)
    standard = {"id": "standard", "input": "Hello", "assertions": [
        {"type": "contains", "value": "Hi"}, {"type": "contains", "value": "zebra"}]}
    turns = {"id": "turns", "turns": [
        {"input": "I want to submit an expense", "assertions": [{"type": "contains", "value": "zebra"}]},
        {"input": "Business travel, $3500", "assertions": [{"type": "tool_called", "name": "create_expense"}]},
        {"input": "Yes, confirm"}], "final_assertions": [{"type": "contains", "value": "refund"}]}
    fine = {"id": "fine", "input": "Hello", "assertions": [{"type": "contains", "value": "Hi"}]}
    outcome, _ = await run_cases(folder, "\n".join(json.dumps(c) for c in (standard, turns, fine)))
    lines = {record.id: record.line() for record in outcome.records}
    assert lines["standard"]["assertion_errors"] == [
        'contains "zebra": expected the agent to say "zebra"; not found in 1 turn(s) of agent text: '
        '"Hi! I can help you submit an expense or explain the expense policy."']
    assert list(lines["standard"]).index("assertion_errors") == list(lines["standard"]).index("assertions") + 1
    first, second, _third = lines["turns"]["turns"]
    assert [e.split(":")[0] for e in first["assertion_errors"]] == ['contains "zebra"']
    assert "assertion_errors" not in second
    assert [e.split(":")[0] for e in lines["turns"]["assertion_errors"]] == ['contains "refund"']
    assert "assertion_errors" not in lines["fine"]


async def test_a_case_without_a_name_is_shown_and_recorded_by_its_id_once(expense_agent: ExpenseAgent,
                                                                          tmp_path: Path) -> None:
    # `name` is optional in both revisions: a case without one was `[T001] T001` on the console and
    # `"name": "T001"` in its record, a name nobody wrote
    folder = project(tmp_path, expense_agent.url)
    text = "\n".join(json.dumps(case) for case in (
        {"id": "T001", "input": "Hello", "assertions": [{"type": "contains", "value": "Hi"}]},
        {"id": "T002", "name": "Greeting", "input": "Hello"},
        {"id": "T003", "turns": [{"input": "Hello"}]}))
    outcome, _ = await run_cases(folder, text)
    lines = [record.line() for record in outcome.records]
    assert ["name" in line for line in lines] == [False, True, False]
    assert lines[1]["name"] == "Greeting"
    said = StringIO()
    console = TestConsole(Console(file=said, width=200, color_system=None), Redactor())
    for record in outcome.records:
        console.case_finished(record)
    heads = [line for line in said.getvalue().splitlines() if line.startswith(("✓", "►"))]
    assert [re.sub(r"\(\d+\.\ds\)", "(0.0s)", head) for head in heads] == [
        "✓ [T001] (0.0s)", "✓ [T002] Greeting (0.0s)", "► [T003] (1 turn)"]


def test_dash_reads_the_test_cases_from_stdin(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # the earlier revision's input sources: a file, a message, a generator, stdin; `-i -` was the message "-",
    # sent to the agent as what a user said
    cases = "\n".join(json.dumps(case) for case in (
        {"id": "hello", "input": "Hello", "assertions": [{"type": "contains", "value": "Hi"}]},
        {"id": "policy", "input": "What is the expense policy?",
         "assertions": [{"type": "tool_called", "name": "get_policy"}]})) + "\n"
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "-", "-n", "expense", "-o", str(out), "--out", str(tmp_path)], env=expense_agent.env,
                    stdin=cases)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ℹ Input: stdin (2 test cases)" in done.stdout
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["hello", "policy"]
    bad = run_test(["-i", "-", "-n", "expense", "--out", str(tmp_path)], env=expense_agent.env,
                   stdin='{"id": "x", "input": "Hi"}\n{"id": "y"}\n')
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[0].startswith("stdin:2:1: ")
    both = run_test(["-i", "-", "-n", "expense", "--interactive"], env=expense_agent.env, stdin=cases)
    assert both.returncode == 2
    assert "-i - reads the test cases from stdin, where --interactive would ask a person" in both.stderr
