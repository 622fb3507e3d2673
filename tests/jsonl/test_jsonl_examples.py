"""The expense example's JSONL files through `tamesu test`, against the real example agent, offline (fake models):
the design's console tree and JSONL records, `--interactive` with stdin, each `--on-missing-input`, generated
suites saved with `--dry-run -o` and then run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agents.expense_agent import EXAMPLE, ExpenseAgent, expense_agent, run_test

__all__ = ["expense_agent"]


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in (json.loads(line) for line in path.read_text().splitlines())}


def _block(stdout: str, case_id: str) -> str:
    """One test case's block of the console, from its first line to the blank line after it; durations read
    (0.0s) so a slow machine does not change the text compared."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if f"[{case_id}]" in line)
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return re.sub(r"\(\d+\.\ds\)", "(0.0s)", "\n".join(lines[start:end]))


def test_standard_cases_one_call_each_with_histories(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "standard.out.jsonl"
    done = run_test(["-i", "tests/standard.jsonl", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["═" * 63, "  Agent Test", "═" * 63]
    assert "ℹ Agent: expense (rest)" in lines
    assert "ℹ Input: tests/standard.jsonl (6 test cases)" in lines
    assert _block(done.stdout, "expense-turn3").splitlines() == [
        "✓ [expense-turn3] Final turn - confirm (0.0s)", "  Messages: 5, Assertions: 3/3 passed"]
    assert "  Total:   6 tests" in lines and "  Passed:  6" in lines and "  Failed:  0" in lines
    records = _records(out)
    assert list(records) == ["T001", "expense-turn1", "expense-turn2", "expense-turn3", "policy", "receipt"]
    turn3 = records["expense-turn3"]
    assert {k: turn3[k] for k in ("id", "name", "status", "messages_count", "response")} == {
        "id": "expense-turn3", "name": "Final turn - confirm", "status": "passed", "messages_count": 5,
        "response": "Expense submitted. Reference: EXP-2025-001"}
    assert turn3["assertions"][0] | {"reason": ""} == {"type": "contains", "value": "submitted", "passed": True,
                                                      "reason": "", "label": 'contains "submitted"'}
    # validator (fake judge), script, type and negated contains all graded by the engine
    policy = records["policy"]["assertions"]
    assert [a["passed"] for a in policy] == [True] * 5
    assert policy[1]["reason"] == "names the approval threshold (fake judge)"
    assert policy[2]["reason"] == "names $10,000"
    # the history travelled with the one call, and the engine kept it in result.json
    result = json.loads((next(tmp_path.glob("2*")) / turn3["result"]).read_text())
    assert [m["role"] for m in result["turns"][0]["user"]["history"]] == ["user", "assistant", "user", "assistant"]
    assert result["end_reason"] == "script_done" and len(result["turns"]) == 1
    attached = json.loads((next(tmp_path.glob("2*")) / records["receipt"]["result"]).read_text())
    assert attached["turns"][0]["user"]["files"][0]["name"] == "receipt.txt"


def test_history_example(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    done = run_test(["-i", "tests/history.jsonl", "-n", "expense", "--out", str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ [T002] Expense submission - final confirmation" in done.stdout
    assert "  Messages: 5, Assertions: 2/2 passed" in done.stdout


def test_multi_turn_example_tree_skip_and_records(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "multi.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr  # a skipped case does not fail the run
    assert "  Agent Test (Multi-Turn)" in done.stdout
    assert _block(done.stdout, "T001").splitlines() == [
        "► [T001] Expense Reimbursement Flow (3 turns)",
        '  ├─ Turn 1: "I want to submit an expense" → PASSED (0.0s)',
        '  │          Agent: "What type of expense would you like to submit?"',
        '  │          ✓ contains "type of expense"',
        "  │",
        '  ├─ Turn 2: "Business travel, $3500" → PASSED (0.0s)',
        '  │          Agent: "I\'ll create an expense for travel, $3,500. Please confirm."',
        '  │          [tool: create_expense({"amount": 3500, "type": "travel"})]',
        '  │          ✓ tool_called "create_expense"',
        "  │",
        '  ├─ Turn 3: "Yes, confirm" → PASSED (0.0s)',
        '  │          Agent: "Expense submitted. Reference: EXP-2025-001"',
        '  │          [tool: submit_expense({"id": "EXP-2025-001"})]',
        '  │          ✓ contains "submitted"',
        "  │",
        "  └─ Final Assertions: PASSED",
        '     ✓ $.expense.status = "submitted"',
    ]
    assert _block(done.stdout, "T002").splitlines()[5:] == [
        "  ├─ Turn 2: SKIPPED",
        "  │          Reason: Agent awaiting input, no next turn defined (on_missing_input: skip)",
        '  │          Agent asked: "Please provide PO number." (input hint: PO-12345)',
        "  │          Hint: Add more turns, use --interactive, or configure a simulator",
        "  │",
        "  └─ Result: SKIPPED",
    ]
    t003 = _block(done.stdout, "T003")
    assert '├─ Turn 1: [Initial] "Help me file an expense" → PASSED' in t003
    assert '├─ Turn 2: [Simulated] "It\'s for client dinner, $250" → PASSED' in t003
    assert '├─ Turn 3: [Simulated] "Yes, confirm" → PASSED' in t003
    summary = done.stdout[done.stdout.index("  Summary"):]
    for line in ("  Total:   3 tests", "  Passed:  2", "  Failed:  0", "  Skipped: 1", "  Total turns: 7",
                 "  Avg turns/test: 2.3"):
        assert line in summary
    records = _records(out)
    first = records["T001"]
    assert [t["input_source"] for t in first["turns"]] == ["static"] * 3
    assert [t["awaiting_input"] for t in first["turns"]] == [True, True, False]
    assert [t["awaiting_reason"] for t in first["turns"]] == ["agent_declared", "agent_declared", "agent_declared_done"]
    assert first["turns"][1]["tool_calls"][0]["name"] == "create_expense"
    assert first["final_assertions"][0]["passed"] is True and first["total_turns"] == 3
    skipped = records["T002"]
    assert skipped["status"] == "skipped" and skipped["missing_input"]["policy"] == "skip"
    assert skipped["final_assertions"][0]["passed"] is None  # never graded: the conversation did not finish
    assert [t["input_source"] for t in records["T003"]["turns"]] == ["static", "simulator", "simulator"]
    run_dir = next(tmp_path.glob("2*"))
    summaries = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert {s["test"]: s["status"] for s in summaries} == {"T001": "passed", "T002": "skipped", "T003": "passed"}
    result = json.loads((run_dir / skipped["result"]).read_text())
    assert result["status"] == "skipped" and result["end_reason"] == "missing_input"
    assert [e["data"]["reason"] for e in result["events"] if e["name"] == "user_side"] == ["agent_declared"]


def test_dynamic_example_reaches_every_checkpoint(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "dynamic.jsonl"
    done = run_test(["-i", "tests/dynamic.jsonl", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  Agent Test (Dynamic)" in done.stdout
    block = _block(done.stdout, "T004").splitlines()
    assert block[0] == "► [T004] Expense Submission Coverage (simulator: simulator)"
    assert block[-6:] == [
        "  ├─ Checkpoints: 3/3 reached",
        "  │  ✓ ask_type (turn 1) Agent asks for expense type",
        "  │  ✓ call_create (turn 2) Agent calls create_expense",
        "  │  ✓ confirm (turn 3) Agent confirms submission",
        "  │",
        "  └─ Result: PASSED",
    ]
    record = _records(out)["T004"]
    assert [(c["id"], c["reached_at_turn"], c["passed"]) for c in record["checkpoints"]] == [
        ("ask_type", 1, True), ("call_create", 2, True), ("confirm", 3, True)]
    assert [(t["turn"], t["input"]) for t in record["turns"]] == [
        (1, "I need to submit an expense"), (2, "Business travel, $3500"), (3, "Yes, confirm")]
    assert record["total_turns"] == 3 and record["end_reason"] == "checkpoints_reached"


def test_interactive_reads_the_reply_from_stdin(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--interactive", "-o", str(out),
                     "--out", str(tmp_path)], env=expense_agent.env, stdin="PO-12345\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "? [T002] the agent awaits input after turn 1:" in done.stderr
    assert "  Agent: This requires manager approval. Please provide PO number." in done.stderr
    assert '  ├─ Turn 2: [Human] "PO-12345" → PASSED' in done.stdout
    record = _records(out)["T002"]
    assert record["status"] == "passed"
    assert [t["input_source"] for t in record["turns"]] == ["static", "human"]
    assert record["final_assertions"][0]["passed"] is True


def test_interactive_without_a_reply_falls_back_to_on_missing_input(expense_agent: ExpenseAgent,
                                                                    tmp_path: Path) -> None:
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--interactive", "--out", str(tmp_path)],
                    env=expense_agent.env, stdin="")  # end of input: nobody answers
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(no reply)" in done.stderr
    assert "  ├─ Turn 2: SKIPPED" in _block(done.stdout, "T002")


def test_on_missing_input_fail_fails_the_case(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--on-missing-input", "fail", "-o", str(out),
                     "--out", str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 1, done.stdout + done.stderr
    block = _block(done.stdout, "T002")
    assert "  ├─ Turn 2: FAILED" in block
    assert "Reason: Agent awaiting input, no next turn defined (on_missing_input: fail)" in block
    record = _records(out)["T002"]
    assert record["status"] == "failed"
    assert record["error"].startswith("the agent awaits input after turn 1")


def test_on_missing_input_end_grades_the_conversation_so_far(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--on-missing-input", "end", "-o", str(out),
                     "--out", str(tmp_path)], env=expense_agent.env)
    # ended, then graded: the final json_path finds no submitted expense, so the case fails on its assertion
    assert done.returncode == 1, done.stdout + done.stderr
    block = _block(done.stdout, "T002")
    assert "  ├─ Turn 2: ENDED" in block and "  └─ Final Assertions: FAILED" in block
    record = _records(out)["T002"]
    assert record["status"] == "failed" and record["end_reason"] == "missing_input" and "error" not in record
    assert record["final_assertions"][0]["passed"] is False


def test_on_missing_input_skip_is_the_default_and_can_be_forced(expense_agent: ExpenseAgent,
                                                                tmp_path: Path) -> None:
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--on-missing-input", "skip",
                     "--skip-interactive", "--out", str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  └─ Result: SKIPPED" in _block(done.stdout, "T002")


def test_a_generated_suite_is_saved_with_dry_run_then_runs(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    cases = tmp_path / "generated.jsonl"
    made = run_test(["-i", "agents:generator?count=2&focus=edge-cases", "-n", "expense", "--dry-run",
                     "-o", str(cases)], env=expense_agent.env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Input: agents:generator?count=2&focus=edge-cases (2 test cases), not run (--dry-run)" in made.stdout
    assert not list(tmp_path.glob("2*"))  # nothing ran
    saved = [json.loads(line) for line in cases.read_text().splitlines()]
    assert [c["id"] for c in saved] == ["edge-large", "edge-vague"]  # count=2 of the three the model wrote
    ran = run_test(["-i", str(cases), "-n", "expense", "--config", str(EXAMPLE / "tamesu.yaml"),
                    "--out", str(tmp_path)], env=expense_agent.env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "✓ [edge-large] Over the approval limit" in ran.stdout
    assert "✓ [edge-vague] No details at all" in ran.stdout


def test_a_parameter_a_model_generator_never_reads_is_refused(expense_agent: ExpenseAgent) -> None:
    # before: `?cnt=2` was dropped without a word and the generator wrote its default number of cases
    done = run_test(["-i", "agents:generator?cnt=2&focus=edge-cases", "-n", "expense", "--dry-run"],
                    env=expense_agent.env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("tamesu test: -i agents:generator?cnt=2&focus=edge-cases: a model generator reads count, "
                           "focus and complexity, not cnt (did you mean 'count'?)\n"), done.stderr


def test_a_script_generates_cases_that_run(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    done = run_test(["-i", "scripts:scripts.generate:cases?scenario=approval-flow", "-n", "expense",
                     "--out", str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ [approval-flow-12000] approval-flow: $12,000" in done.stdout
    assert "✓ [approval-flow-50000] approval-flow: $50,000" in done.stdout


def test_a_direct_message_is_one_standard_case(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    done = run_test(["-i", "What is the expense policy?", "-n", "expense", "-v", "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ℹ Input: message (1 test case)" in done.stdout
    assert '  Agent: "Expenses up to $25 need no receipt.' in done.stdout


def test_an_unreachable_agent_is_an_infrastructure_error(tmp_path: Path) -> None:
    done = run_test(["-i", "tests/history.jsonl", "-n", "expense", "--out", str(tmp_path)],
                    env={"EXPENSE_URL": "http://127.0.0.1:1", "TAMESU_STORE": str(tmp_path / "store.db")})
    assert done.returncode == 3, done.stdout + done.stderr
    assert "! [T002] Expense submission - final confirmation" in done.stdout
    assert "  Error: rest target expense: cannot reach http://127.0.0.1:1/chat" in done.stdout
    assert "  Errors:  1" in done.stdout


def test_a_skipped_cases_final_assertions_are_shown_not_evaluated_with_why(expense_agent: ExpenseAgent,
                                                                          tmp_path: Path) -> None:
    # before: the records said "not evaluated: the test was skipped", and the HTML report left them out
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _records(out)["T002"]["final_assertions"][0]["reason"] == "not evaluated: the test was skipped"
    [html_file] = tmp_path.glob("2*/report.html")
    html = html_file.read_text()
    assert "1 check not evaluated: the run was skipped (" in html, html
