"""Whose fault a run that did not pass is, end to end: what a suite asks that only a run finds wrong is the
suite's (`fault: suite`, exit 2, JUnit `error type="suite"`), never the agent's failure (exit 1) nor the
infrastructure's (exit 3); with the infrastructure's errors beside it the run exits 3, with the agent's failures
beside it 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.fixtures import RunningAgents, rest_agents
from conftest import run_tamesu
from model_servers import OpenAIServer, status
from tamesu.net.serve import ThreadServer

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest

_TARGET = """\
targets:
  bot:
    type: rest
    url: {url}/chat
    request: {{ body: {{ message: "{{{{message}}}}", session_id: "{{{{session}}}}" }} }}
"""


def _run(tmp_path: Path, url: str, tests: str, models: str = "") -> tuple[Any, dict[str, Any], dict[str, str]]:
    (tmp_path / "s.tamesu.yaml").write_text(models + _TARGET.format(url=url) + "tests:\n" + tests)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "junit:j.xml", "--no-cache"],
                      cwd=tmp_path, env={"OPENAI_API_KEY": "sk-local-0123456789"})
    [results] = (tmp_path / "out").glob("*/results.jsonl")
    records = {r["test"]: r for r in map(json.loads, results.read_text().splitlines())}
    junit = {case.get("name", ""): next((f"{k.tag}:{k.get('type')}" for k in case if k.tag in ("failure", "error")),
                                        "passed") for case in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    return done, records, junit


def _faults(records: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {name: (r["status"], r["runs"][0]["fault"]) for name, r in records.items()}


def test_what_the_suite_asks_that_only_a_run_finds_wrong_is_the_suites_exit_2(
        tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: a JSONPath a captured value made invalid and a command the shell cannot find each FAILED the test,
    # `fault: agent`, exit 1, JUnit `failure type="assertion"`: the agent blamed for the suite's own writing
    done, records, junit = _run(tmp_path, rest_agents.url, """\
  - name: path from a capture
    capture: [ { name: where, regex: "Echo 1: (.*)" } ]
    scenario: { script: [ { say: "$[[" }, { say: two } ] }
    assert: [ { json_path: { path: "{{captured.where}}", exists: true } } ]
  - name: no such command
    scenario: { script: [ { say: hi } ] }
    assert: [ { command: { run: ./not-written-yet.sh, contains: ok } } ]
  - name: wrong answer
    scenario: { script: [ { say: hi } ] }
    assert: [ { contains: refunded } ]
""")
    assert done.returncode == 2, done.stdout + done.stderr
    assert _faults(records) == {"path from a capture": ("error", "suite"), "no such command": ("error", "suite"),
                                "wrong answer": ("failed", "agent")}, records
    assert records["path from a capture"]["runs"][0]["error"] == (
        "json_path: the path once filled in is not one: invalid JSONPath '$[[': unexpected token in bracketed "
        "selection 'TOKEN_LBRACKET'")
    assert records["no such command"]["runs"][0]["error"].startswith(
        "command: `./not-written-yet.sh` could not be run: the shell found no such command (exit code 127), ")
    assert junit == {"path from a capture": "error:suite", "no such command": "error:suite",
                     "wrong answer": "failure:assertion"}, junit
    assert done.stdout.count("fault: suite") == 2 and "fault: agent" in done.stdout, done.stdout
    assert json.loads(next((tmp_path / "out").glob("*/run.json")).read_text())["exit_code"] == 2


def test_the_infrastructures_error_beside_the_suites_exits_3(tmp_path: Path, rest_agents: RunningAgents,
                                                             serve: Callable[[Any], ThreadServer]) -> None:
    judge = OpenAIServer()
    url = judge.base_url(serve(judge.app).url)
    judge.plan(status(500, "the judge is down"))
    done, records, junit = _run(tmp_path, rest_agents.url, """\
  - name: judged
    scenario: { script: [ { say: hi } ] }
    assert: [ { judge: "The agent greets" } ]
  - name: no such command
    scenario: { script: [ { say: hi } ] }
    assert: [ { command: ./not-written-yet.sh } ]
""", models=f"models:\n  judge: {{ provider: openai, model: m, base_url: '{url}', timeout: 5s, max_retries: 0 }}\n")
    assert done.returncode == 3, done.stdout + done.stderr
    assert _faults(records) == {"judged": ("error", "environment"), "no such command": ("error", "suite")}, records
    assert junit == {"judged": "error:infrastructure", "no such command": "error:suite"}, junit


def test_a_script_exit_code_the_command_expects_is_no_suite_problem(tmp_path: Path,
                                                                    rest_agents: RunningAgents) -> None:
    # 127 is the shell's "not found" only when the check did not ask for it
    done, records, _ = _run(tmp_path, rest_agents.url, """\
  - name: expects 127
    scenario: { script: [ { say: hi } ] }
    assert: [ { command: { run: "exit 127", exit_code: 127 } } ]
  - name: exits 3
    scenario: { script: [ { say: hi } ] }
    assert: [ { command: "exit 3" } ]
""")
    assert done.returncode == 1, done.stdout + done.stderr
    assert _faults(records) == {"expects 127": ("passed", None), "exits 3": ("failed", "agent")}, records


def test_the_markdown_summary_lists_the_suites_errors_apart(tmp_path: Path, rest_agents: RunningAgents,
                                                            serve: Callable[[Any], ThreadServer]) -> None:
    # before: under "Errors (infrastructure)", with the judge that could not be reached
    judge = OpenAIServer()
    url = judge.base_url(serve(judge.app).url)
    judge.plan(status(500, "the judge is down"))
    (tmp_path / "s.tamesu.yaml").write_text(
        f"models:\n  judge: {{ provider: openai, model: m, base_url: '{url}', timeout: 5s, max_retries: 0 }}\n"
        + _TARGET.format(url=rest_agents.url) + """tests:
  - { name: judged, scenario: { script: [ { say: hi } ] }, assert: [ { judge: "The agent greets" } ] }
  - { name: no such command, scenario: { script: [ { say: hi } ] }, assert: [ { command: ./not-written.sh } ] }
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "markdown:m.md", "--no-cache"],
                      cwd=tmp_path, env={"OPENAI_API_KEY": "sk-local-0123456789"})
    assert done.returncode == 3, done.stdout + done.stderr
    summary = (tmp_path / "m.md").read_text()
    infrastructure, suites = summary.index("Errors (infrastructure)"), summary.index("Errors of the suite")
    assert infrastructure < summary.index("judged") < suites < summary.index("no such command"), summary


def test_a_pattern_a_captured_value_makes_invalid_is_the_suites(tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: `x{{{captured.n}}}` filled with "2,1" (`x{2,1}`) failed the test, `fault: agent`, exit 1: "cannot
    # check: ... is not a valid pattern once filled in"
    done, records, junit = _run(tmp_path, rest_agents.url, """\
  - name: braces
    capture: [ { name: n, regex: "Echo 1: (.*)" } ]
    scenario: { script: [ { say: "2,1" }, { say: two } ] }
    assert: [ { regex: "x{{{captured.n}}}" } ]
""")
    assert done.returncode == 2, done.stdout + done.stderr
    assert _faults(records) == {"braces": ("error", "suite")}, records
    assert records["braces"]["runs"][0]["error"] == (
        "regex: /x{{{captured.n}}}/ is not a valid pattern once filled in: min repeat greater than max repeat at "
        "position 2")
    assert junit == {"braces": "error:suite"}
