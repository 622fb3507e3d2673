"""One engine for both front doors (issue 14): `tamesu test` takes the run options of `tamesu run` and leaves the
same run directory, which `tamesu report` and `tamesu merge` read; the JSONL check kinds (`equals`, `type`,
`script`, `negate`) work in YAML suites, and a JSONL case uses a check only suites had; `custom` checks, a
project's function or a registered one. All against the real example expense agent, offline."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from agents.expense_agent import EXAMPLE, ExpenseAgent, expense_agent, run_test
from conftest import run_tamesu

__all__ = ["expense_agent"]


def _run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir() and (p / "run.json").is_file())


def _layout(run_dir: Path) -> dict[str, Any]:
    """What a run directory holds: its top files, and each test's run folders with their files."""
    tests = {}
    for result in (json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()):
        tests[result["id"]] = sorted(
            (r["dir"].rsplit("/", 1)[-1], sorted(p.name for p in (run_dir / r["dir"]).iterdir()))
            for r in result["runs"])
    return {"files": sorted(p.name for p in run_dir.iterdir() if p.is_file()), "tests": tests}


def test_tamesu_test_shards_repeats_and_reports_like_tamesu_run(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    shards = []
    for shard in ("1/2", "2/2"):
        done = run_test(["-i", "tests/multi-turn.jsonl", "-n", "expense", "--repeat", "2", "--shard", shard,
                         "--report", f"junit:{tmp_path}/junit-{shard[0]}.xml,html", "--out", str(out)],
                        env=expense_agent.env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"junit report: {tmp_path}/junit-{shard[0]}.xml" in done.stdout
        shards.append(done)
    first, second = _run_dirs(out)  # named by start time, so shard 1 (run first) sorts first
    plans = [json.loads((d / "plan.json").read_text()) for d in (first, second)]
    assert [p["shard"] for p in plans] == ["1/2", "2/2"]
    planned = sorted(t["id"] for p in plans for t in p["tests"])
    assert planned == ["multi-turn/T001", "multi-turn/T002", "multi-turn/T003"]  # each case in one shard
    # plan.json points at the case's own line of the JSONL file
    lines = {t["name"]: t["line"] for p in plans for t in p["tests"]}
    assert lines == {"T001": 1, "T002": 2, "T003": 3}
    for run_dir in (first, second):
        layout = _layout(run_dir)
        assert layout["files"] == ["plan.json", "report.html", "results.jsonl", "run.json"]
        both = [("run-1", ["result.json", "transcript.json"]), ("run-2", ["result.json", "transcript.json"])]
        assert all(runs == both for runs in layout["tests"].values())
    junit = ET.parse(tmp_path / "junit-1.xml").getroot()
    assert len(junit.findall(".//testcase")) == len(plans[0]["tests"])

    # the same layout as `tamesu run` leaves for a suite of the same agent
    suite = tmp_path / "suite.yaml"
    suite.write_text(textwrap.dedent(f"""\
        targets:
          expense: {{ type: rest, url: "{expense_agent.url}/chat", response: {{ text: $.text }} }}
        tests:
          - name: hello
            target: expense
            scenario: {{ script: [ {{ say: "hello" }} ] }}
            assert: [ {{ contains: "expense" }} ]
        """))
    ran = run_tamesu(["run", str(suite), "--repeat", "2", "--report", "html", "--out", str(tmp_path / "yaml")],
                     cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (yaml_run,) = _run_dirs(tmp_path / "yaml")
    yaml_layout = _layout(yaml_run)
    assert yaml_layout["files"] == _layout(first)["files"]
    assert next(iter(yaml_layout["tests"].values())) == next(iter(_layout(first)["tests"].values()))

    report = run_tamesu(["report", str(second), "--report", f"json:{tmp_path}/second.json"], cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    assert {t["id"] for t in json.loads((tmp_path / "second.json").read_text())["tests"]} == \
        {t["id"] for t in plans[1]["tests"]}
    merged = run_tamesu(["merge", str(first), str(second), "--out", str(tmp_path / "merged")], cwd=tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "2 passed, 0 failed, 1 skipped" in merged.stdout
    assert "SKIP  multi-turn/T002  0/2 runs passed" in merged.stdout


def test_tamesu_test_filter_and_tags_choose_cases(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    done = run_test(["-i", "tests/standard.jsonl", "-n", "expense", "--filter", "expense-turn[12]",
                     "--out", str(tmp_path)], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ℹ Input: tests/standard.jsonl (2 test cases)" in done.stdout
    assert "[expense-turn1]" in done.stdout and "[expense-turn2]" in done.stdout
    assert "[policy]" not in done.stdout
    # a second run compared with the first: the filter changed, so one case is new
    again = run_test(["-i", "tests/standard.jsonl", "-n", "expense", "--filter", "expense-turn[123]",
                      "--out", str(tmp_path), "--baseline", str(tmp_path)], env=expense_agent.env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "compared with " in again.stdout and "  new         standard/expense-turn3" in again.stdout
    none = run_test(["-i", "tests/standard.jsonl", "-n", "expense", "--tags", "mode:dynamic",
                     "--out", str(tmp_path)], env=expense_agent.env)
    assert none.returncode == 2 and "no test case matches the filter" in none.stderr


SUITE = """\
targets:
  expense: {{ type: rest, url: "{url}/chat", response: {{ text: $.text, tool_calls: $.tool_calls }} }}
tests:
{tests}
"""


def _suite(tmp_path: Path, url: str, tests: str, checks: str = "") -> Path:
    (tmp_path / "suite.yaml").write_text(SUITE.format(url=url, tests=textwrap.indent(textwrap.dedent(tests), "  ")))
    if checks:
        (tmp_path / "project_checks.py").write_text(textwrap.dedent(checks))
    return tmp_path / "suite.yaml"


def _results(out: Path) -> dict[str, dict[str, Any]]:
    (run_dir,) = _run_dirs(out)
    summaries = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    found = {}
    for summary in summaries:
        found[summary["test"]] = json.loads((run_dir / summary["runs"][0]["dir"] / "result.json").read_text())
    return found


CHECKS = '''\
def has_reference(run, prefix="EXP-"):
    """custom: the last answer names an expense reference."""
    last = run.exchanges[-1].agent.text if run.exchanges else ""
    return prefix in last, f"{prefix} {'in' if prefix in last else 'not in'} {last!r}"


def three_words(run):
    return len(run.text.split()) == 3 or f"{len(run.text.split())} words"


def broken(run):
    raise KeyError("no such field")
'''


def test_yaml_suite_uses_equals_type_script_and_negate(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    suite = _suite(tmp_path, expense_agent.url, """\
        - name: values
          target: expense
          scenario: { script: [ { say: "hello" } ] }
          assert:
            - equals: "Hi! I can help you submit an expense or explain the expense policy."
            - equals: { path: $.stage, value: idle }
            - type: { path: $.tool_calls, value: array }
            - type: { path: $.awaiting_input, value: boolean }
            - script: project_checks:three_words
              negate: true
            - contains: "refund"
              negate: true
        - name: wrong values
          target: expense
          scenario: { script: [ { say: "hello" } ] }
          assert:
            - equals: "Hi!"
            - type: { path: $.stage, value: number }
            - script: { use: project_checks:three_words }
        """, CHECKS)
    done = run_tamesu(["run", str(suite), "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    results = _results(tmp_path / "out")
    assert results["values"]["status"] == "passed", results["values"]["assertions"]
    assert [a["name"] for a in results["values"]["assertions"]][-2:] == ["not script", "not contains"]
    wrong = {a["name"]: a for a in results["wrong values"]["assertions"]}
    assert wrong["equals"]["passed"] is False and 'expected exactly "Hi!"' in wrong["equals"]["reason"]
    assert wrong["type"]["passed"] is False and "(string)" in wrong["type"]["reason"]
    assert wrong["script"]["passed"] is False and wrong["script"]["reason"] == "13 words"


def test_a_missing_script_function_is_a_suite_problem(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    suite = _suite(tmp_path, expense_agent.url, """\
        - name: t
          target: expense
          scenario: { script: [ { say: "hello" } ] }
          assert:
            - script: project_checks:nowhere
        """, CHECKS)
    done = run_tamesu(["validate", str(suite)], cwd=tmp_path)
    assert done.returncode == 2
    assert "suite.yaml:8:17: tests[0].assert[0].script: project_checks has no function 'nowhere'" in done.stderr


def test_custom_checks_from_the_project(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    suite = _suite(tmp_path, expense_agent.url, """\
        - name: filed
          target: expense
          scenario: { script: [ { say: "Business travel, $350" }, { say: "yes" } ] }
          assert:
            - custom: project_checks:has_reference
            - custom: { function: project_checks:has_reference, with: { prefix: "INV-" } }
              name: an invoice
        - name: broken
          target: expense
          scenario: { script: [ { say: "hello" } ] }
          assert: [ { custom: "project_checks:broken" } ]
        - name: broken script
          target: expense
          scenario: { script: [ { say: "hello" } ] }
          assert: [ { script: "project_checks:broken" } ]
        """, CHECKS)
    done = run_tamesu(["run", str(suite), "--out", "out", "--report", "junit:junit.xml"], cwd=tmp_path)
    results = _results(tmp_path / "out")
    filed = {a["name"]: a for a in results["filed"]["assertions"]}
    assert filed["custom"]["passed"] is True and filed["custom"]["reason"].startswith("EXP- in ")
    assert filed["an invoice"]["passed"] is False and filed["an invoice"]["reason"].startswith("INV- not in ")
    # an exception in the project's own check code is that test's error, the suite's to fix (before: fault
    # environment, exit 3, as if the agent could not be reached); the other test still has its verdict
    for name, kind in (("broken", "custom"), ("broken script", "script")):
        assert results[name]["status"] == "error"
        assert f"{kind} project_checks:broken raised KeyError" in results[name]["error"]
        assert results[name]["fault"] == "suite", results[name]
    assert results["filed"]["status"] == "failed"
    assert done.returncode == 2, done.stdout + done.stderr
    errors = ET.parse(tmp_path / "junit.xml").getroot().findall(".//testcase/error")
    assert sorted(e.get("type") for e in errors) == ["suite", "suite"]


def test_custom_names_only_the_project_and_registered_checks(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    suite = _suite(tmp_path, expense_agent.url, """\
        - name: t
          target: expense
          scenario: { script: [ { say: "hello" } ] }
          assert:
            - custom: "json:dumps"
            - custom: { name: no_such_check }
            - custom: { name: a, function: "b:c" }
            - custom: { name: "project_checks:has_reference", with: { prefix: "INV-" } }
        """, CHECKS)
    done = run_tamesu(["validate", str(suite)], cwd=tmp_path)
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert any("no module 'json' in the project" in e for e in errors), errors
    assert any("no check registered as 'no_such_check'" in e for e in errors), errors
    assert any('custom is "module:function", or {name: REGISTERED' in e for e in errors), errors
    # a project function written as a registered name: the key it belongs under is said (before: only the list)
    assert any(e.endswith("no check registered as 'project_checks:has_reference' (registered: none installed); a "
                          "function of the project is function: project_checks:has_reference") for e in errors), errors


def test_a_jsonl_case_uses_checks_only_suites_had(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    (tmp_path / "project_checks.py").write_text(CHECKS)
    cases.write_text("\n".join(json.dumps(case) for case in [
        {"id": "turns", "turns": [{"input": "Business travel, $350"}, {"input": "yes"}], "final_assertions": [
            {"turns": {"lte": 2}}, {"tool_sequence": ["create_expense", "submit_expense"]},
            {"custom": "project_checks:has_reference"}, {"metric": {"name": "turn_latency_ms_p95", "lt": 60000}}]},
        {"id": "too long", "turns": [{"input": "Business travel, $350"}, {"input": "yes"}],
         "final_assertions": [{"turns": {"lte": 1}}]},
    ]) + "\n")
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", str(cases), "-n", "expense", "-o", str(out), "--out", str(tmp_path / "runs"),
                     "--config", str(EXAMPLE / "tamesu.yaml")], env=expense_agent.env)
    assert done.returncode == 1, done.stdout + done.stderr
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["turns"]["status"] == "passed", records["turns"]
    assert [a["passed"] for a in records["turns"]["final_assertions"]] == [True] * 4
    assert records["too long"]["status"] == "failed"
    assert records["too long"]["final_assertions"][0]["passed"] is False


def test_tamesu_test_update_golden_writes_then_compares(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "hello", "input": "hello",
                                 "assertions": [{"golden": {"file": "golden/hello.json"}}]}) + "\n")
    args = ["-i", str(cases), "-n", "expense", "--out", str(tmp_path / "runs"),
            "--config", str(EXAMPLE / "tamesu.yaml")]
    missing = run_test(args, env=expense_agent.env)
    # no golden file yet: the suite's to fix, an error saying so (exit 2), not a failure of the agent
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "no golden file golden/hello.json: run with --update-golden to write it" in missing.stdout + missing.stderr
    written = run_test([*args, "--update-golden"], env=expense_agent.env)
    assert written.returncode == 0, written.stdout + written.stderr
    assert (tmp_path / "golden" / "hello.json").is_file()
    compared = run_test(args, env=expense_agent.env)
    assert compared.returncode == 0, compared.stdout + compared.stderr
