"""The last conformance gaps of the JSONL side (issue 33) against real local agents: helper agents are told
`skip.history` as the design sends it, `-i` tells a message from a file as the design does, `tamesu validate`
reads a single-case `.json`, a static multi-turn case is headed by its turns, and the design's error classes
on request (`--yao-errors`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agents.expense_agent import EXAMPLE, ExpenseAgent, expense_agent, run_test
from conftest import run_tamesu
from sdk_groups import IN_PROCESS_A2A_SERVER
from tamesu.engine.live import TargetHelper
from tamesu.suite.secrets import Secrets
from tamesu.targets.a2a import A2ASpec

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

pytestmark = IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side

__all__ = ["expense_agent"]


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


@pytest.mark.parametrize("binding", ["jsonrpc", "grpc"])
async def test_an_a2a_helper_agent_is_told_to_keep_no_history(agents: A2AAgents, tmp_path: Path,
                                                              binding: str) -> None:
    """The design's `Skip{History: true}` with every helper call; on A2A its one place is the message metadata."""
    url = agents.grpc_url if binding == "grpc" else f"{agents.urls['v10']}/a2a"
    spec = A2ASpec.model_validate({"type": "a2a", "url": url, "transport": binding})
    helper = TargetHelper("checker", spec, Secrets(environ={}), tmp_path)
    response, _ = await helper.ask("validator", {"test_id": "T001", "criteria": "helpful"}, None)
    received = response["artifacts"][0]["parts"][0]["data"]
    assert received["metadata"] == {"test_mode": "validator", "test_id": "T001", "criteria": "helpful",
                                    "skip": {"history": True}}


def test_a_message_that_names_a_json_file_is_a_message(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    """The design: `-i "Hello, how are you?"` is a message, "auto-detected as non-file"; a name with no space
    that ends in .json(l) is still a file, so a mistyped path is not sent to the agent as words."""
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "Please open report.json", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                    env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Input: message (1 test case)" in done.stdout
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["id"], record["messages_count"], record["status"]) == ("message", 1, "passed")
    assert record["response"]  # the agent answered the words
    missing = run_test(["-i", "tests/no-such-file.jsonl", "-n", "expense", "--out", str(tmp_path)],
                       env=expense_agent.env)
    assert missing.returncode == 2 and "no-such-file.jsonl" in missing.stderr, missing.stdout + missing.stderr


CASE_JSON = """{
  "id": "expense-turn2",
  "input": [
    {"role": "user", "content": "I want to submit an expense"},
    {"role": "assistant", "content": "What type of expense would you like to submit?"},
    {"role": "user", "content": "Business travel, $3500"}
  ],
  "assertions": [{"type": "tool_called", "name": "create_expense"}]
}
"""


def test_validate_reads_a_single_case_json_file_as_a_test_case(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "tamesu.yaml", tmp_path / "tamesu.yaml")
    shutil.copytree(EXAMPLE / "fake", tmp_path / "fake")
    (tmp_path / "case.json").write_text(CASE_JSON)
    done = run_tamesu(["validate", "case.json", "-n", "expense"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["ok: 1 test case(s) in 1 JSONL file(s) for expense (rest)"]
    (tmp_path / "bad.json").write_text(CASE_JSON.replace('"tool_called"', '"tool_calls"'))
    bad = run_tamesu(["validate", "bad.json", "-n", "expense"], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("bad.json:8:"), bad.stdout + bad.stderr
    # and `tamesu test` runs it, one call with its history
    out = tmp_path / "records.jsonl"
    ran = run_test(["-i", "case.json", "-n", "expense", "-o", str(out), "--out", str(tmp_path / "runs")],
                   cwd=tmp_path, env=expense_agent.env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(out.read_text())["messages_count"] == 3


def test_a_static_multi_turn_case_is_headed_by_its_turns(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    """The design's console: T001 (written turns, a simulator to fall back on) is `(3 turns)`; T003 (one input,
    then the simulator) is `(simulator: NAME)` with its `[Initial]` turn."""
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({
        "id": "T001", "name": "Expense Reimbursement Flow",
        "turns": [{"input": "I want to submit an expense"}, {"input": "Business travel, $3500"},
                  {"input": "Yes, confirm"}],
        "simulator": {"use": "simulator", "options": {"metadata": {"goal": "Submit a $3500 travel expense"}}}}) + "\n")
    done = run_test(["-i", str(cases), "-n", "expense", "--config", str(EXAMPLE / "tamesu.yaml"), "--out",
                     str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "► [T001] Expense Reimbursement Flow (3 turns)" in lines
    assert any(line.startswith('  ├─ Turn 1: "I want to submit an expense" → PASSED') for line in lines), done.stdout
    example = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--filter", "T003", "--out", str(tmp_path)],
                       env=expense_agent.env)
    assert "► [T003] Dynamic Expense Flow (simulator: simulator)" in example.stdout.splitlines(), example.stdout
    assert '  ├─ Turn 1: [Initial] "Help me file an expense"' in example.stdout


def test_the_fully_dynamic_flow_plays_generated_cases_with_the_simulator(expense_agent: ExpenseAgent,
                                                                         tmp_path: Path) -> None:
    """The first revision's "fully dynamic" example: generated cases, and `--simulator` answers while the agent
    awaits input; without `--simulator` the same cases are one call each, and a history stays one call."""
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "agents:generator?count=2", "-n", "expense", "--simulator", "simulator", "-o", str(out),
                     "--out", str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    submit = records["happy-submit"]
    assert (submit["mode"], submit["status"]) == ("multi_turn", "passed")
    assert [(t["input_source"], t["input"]) for t in submit["turns"]] == [
        ("static", "I want to submit an expense"), ("simulator", "Business travel, $3500"),
        ("simulator", "Yes, confirm")]
    assert submit["turns"][-1]["output"].startswith("Expense submitted")
    # the policy answer awaits nothing: the conversation ends after the first turn
    assert [t["input_source"] for t in records["happy-policy"]["turns"]] == ["static"]
    assert "► [happy-submit] Asks for the type (simulator: simulator)" in done.stdout
    plain = run_test(["-i", "agents:generator?count=2", "-n", "expense", "-o", str(out), "--out", str(tmp_path)],
                     env=expense_agent.env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert {r["id"]: (r["mode"], r["messages_count"]) for r in map(json.loads, out.read_text().splitlines())} == {
        "happy-submit": ("standard", 1), "happy-policy": ("standard", 1)}
    history = run_test(["-i", "tests/history.jsonl", "-n", "expense", "--simulator", "simulator", "-o", str(out),
                        "--out", str(tmp_path)], env=expense_agent.env)
    assert history.returncode == 0, history.stdout + history.stderr
    assert {r["mode"] for r in map(json.loads, out.read_text().splitlines())} == {"standard"}


YAO_PROJECT = """\
targets:
  expense: { type: rest, url: "{{env.EXPENSE_URL}}/chat", response: { text: $.text, tool_calls: $.tool_calls } }
"""

BROKEN_HELPERS = [
    {"id": "M1", "input": "I want to submit an expense", "simulator": {"use": "scripts:boom"}},
    {"id": "D1", "input": "I want to submit an expense", "simulator": {"use": "scripts:boom"},
     "checkpoints": [{"id": "made", "assertion": {"type": "tool_called", "name": "create_expense"}}]},
]


def _yao_project(tmp_path: Path, setting: bool = False) -> Path:
    (tmp_path / "tamesu.yaml").write_text(YAO_PROJECT + ("yao_errors: true\n" if setting else ""))
    (tmp_path / "scripts").mkdir(exist_ok=True)
    (tmp_path / "scripts" / "boom.py").write_text("def simulate(inputs):\n    raise RuntimeError('no idea')\n")
    return tmp_path


def _statuses(out: Path) -> dict[str, tuple[str, str | None, str | None]]:
    return {r["id"]: (r["status"], r.get("error"), r.get("skip_reason"))
            for r in map(json.loads, out.read_text().splitlines())}


def test_yao_errors_follow_the_designs_error_classes(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    project = _yao_project(tmp_path)
    (project / "helpers.jsonl").write_text("".join(json.dumps(c) + "\n" for c in BROKEN_HELPERS))
    out = project / "records.jsonl"
    args = ["-i", "helpers.jsonl", "-n", "expense", "-o", str(out), "--out", str(project / "runs")]
    ours = run_test(args, cwd=project, env=expense_agent.env)
    # tamesu's own: a broken helper is an error, the suite's when it is the project's script (exit 2)
    assert ours.returncode == 2, ours.stdout + ours.stderr
    assert {k: v[0] for k, v in _statuses(out).items()} == {"M1": "error", "D1": "error"}
    design = run_test([*args, "--yao-errors"], cwd=project, env=expense_agent.env)
    assert design.returncode == 1, design.stdout + design.stderr
    said = "simulator error: simulator scripts:boom raised RuntimeError: no idea"
    # the earlier revision's multi-turn: the turn is SKIPPED; the later one's dynamic mode: the test FAILED
    assert _statuses(out) == {"M1": ("skipped", None, said), "D1": ("failed", said, None)}
    # failed as the design has it, but not the agent's fault (before: fault "agent", in -o, JUnit and the store)
    faults = {r["id"]: (r.get("fault"), r.get("fault_reason")) for r in map(json.loads, out.read_text().splitlines())}
    assert faults == {"M1": (None, None), "D1": ("suite", said)}
    # an agent that cannot be reached: tamesu's error (exit 3), the design's "agent error" (FAILED)
    (project / "one.jsonl").write_text(json.dumps({"id": "A1", "input": "Hello"}) + "\n")
    gone = {"EXPENSE_URL": "http://127.0.0.1:1"}
    down = run_test(["-i", "one.jsonl", "-n", "expense", "-o", str(out), "--out", str(project / "runs"),
                     "--yao-errors"], cwd=project, env=gone)
    assert down.returncode == 1, down.stdout + down.stderr
    [(status, error, _)] = _statuses(out).values()
    assert status == "failed" and error is not None and error.startswith(
        "agent error: rest target expense: cannot reach http://127.0.0.1:1/chat"), error


def test_no_initial_input_is_the_suites_error_when_the_project_asks_for_the_designs_classes(
        expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    project = _yao_project(tmp_path)
    (project / "cases.jsonl").write_text(json.dumps({"id": "N1", "assertions": [{"type": "contains", "value": "x"}]})
                                         + "\n" + json.dumps({"id": "N2", "input": []})
                                         + "\n" + json.dumps({"id": "ok", "input": "Hello"}) + "\n")
    out = project / "records.jsonl"
    args = ["-i", "cases.jsonl", "-n", "expense", "-o", str(out), "--out", str(project / "runs"),
            "--report", f"junit:{project / 'junit.xml'}"]
    refused = run_test(args, cwd=project, env=expense_agent.env)
    assert refused.returncode == 2 and refused.stderr.startswith("cases.jsonl:1:1: "), refused.stderr
    _yao_project(tmp_path, setting=True)  # `yao_errors: true` in tamesu.yaml, no flag
    design = run_test(args, cwd=project, env=expense_agent.env)
    # the design's "no initial input" is said, and the other cases run; but the agent was never asked anything:
    # the case is the suite's to fix (exit 2, as the refusal), not the agent's failure (it was fault agent, exit 1)
    assert design.returncode == 2, design.stdout + design.stderr
    assert _statuses(out) == {"N1": ("error", "no initial input", None), "N2": ("error", "no initial input", None),
                              "ok": ("passed", None, None)}
    faults = {r["id"]: r.get("fault") for r in map(json.loads, out.read_text().splitlines())}
    assert faults == {"N1": "suite", "N2": "suite", "ok": None}
    junit = (project / "junit.xml").read_text()
    assert junit.count('type="suite"') == 2 and "<failure" not in junit, junit
    # said where written before anything runs, by `test` and by `validate` (which said nothing, exit 0)
    warned = ["cases.jsonl:1:1: a test case needs input (text, a message, or a message history), turns, or a "
              "simulator with checkpoints (loaded for the design's error classes: it runs as the suite's error)",
              "cases.jsonl:2:14: input: empty: a test case needs input (text, a message, or a message history), "
              "turns, or a simulator with checkpoints (loaded for the design's error classes: it runs as the "
              "suite's error)"]
    assert all(f"warning: {line}" in " ".join((design.stdout + design.stderr).split()) for line in warned), \
        design.stdout + design.stderr
    checked = run_tamesu(["validate", "cases.jsonl"], cwd=project)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert all(line in " ".join((checked.stdout + checked.stderr).split()) for line in warned), \
        checked.stdout + checked.stderr
