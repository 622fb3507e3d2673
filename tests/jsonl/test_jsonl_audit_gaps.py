"""What the JSONL audit of session 34 left: strict booleans, a near miss of a JSON type named, `Agents:` as a
generator, and `--dry-run -o` into another folder writing file paths that load from there."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import forked
from agents.expense_agent import run_test
from jsonl.test_jsonl_audit import _slow_agent
from jsonl.test_jsonl_run import project, run_cases
from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.jsonl.sources import parse_input
from tamesu.net.serve import ThreadServer
from tamesu.plan.targets import Resolver
from tamesu.report.html import render_html
from tamesu.report.junit import render_junit
from tamesu.report.load import load_run

RESOLVER = Resolver(models={"simulator"}, targets={"expense"})


def _problems(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(RESOLVER))
    return [str(p) for p in caught.value.problems]


def test_a_boolean_is_true_or_false_not_a_word_or_a_number(tmp_path: Path) -> None:
    # before: `"enabled": "yes"` and `1` were taken as true, `"required": "no"` as false, without a word
    text = "\n".join(json.dumps(case) for case in [
        {"id": "a", "type": "multi_turn", "input": "hi", "interactive": {"enabled": "yes"}},
        {"id": "b", "type": "multi_turn", "input": "hi", "interactive": {"enabled": 1}},
        {"id": "c", "simulator": {"use": "simulator"}, "checkpoints": [
            {"id": "x", "assertion": {"type": "contains", "value": "a"}, "required": "no"}]},
        {"id": "d", "input": "hi", "assertions": [{"type": "contains", "value": "x", "ignore_case": "true"}]},
        {"id": "e", "type": "multi_turn", "input": "hi", "interactive": {"enabled": True}}])
    assert _problems(text, tmp_path) == [
        "cases.jsonl:1:77: interactive.enabled: \"yes\" is not a boolean: write true or false",
        "cases.jsonl:2:77: interactive.enabled: 1 is not a boolean: write true or false",
        "cases.jsonl:3:137: checkpoints[0].required: \"no\" is not a boolean: write true or false",
        "cases.jsonl:4:93: assertions[0].ignore_case: \"true\" is not a boolean: write true or false"]


def test_a_type_assertion_names_the_json_type_a_near_miss_meant(tmp_path: Path) -> None:
    # before: 'a type assertion needs path and value (string, number, ...)' for "Number", as if none were given
    text = "\n".join(json.dumps({"id": str(n), "input": "hi", "assertions": [
        {"type": "type", "path": "$.total", "value": value}]}) for n, value in enumerate(["Number", "str", "zebra"]))
    types = "string, number, integer, boolean, array, object, null"
    assert _problems(text, tmp_path) == [
        f"cases.jsonl:1:88: assertions[0].value: 'Number' is no JSON type: {types} (did you mean 'number'?)",
        f"cases.jsonl:2:88: assertions[0].value: 'str' is no JSON type: {types} (did you mean 'string'?)",
        f"cases.jsonl:3:88: assertions[0].value: 'zebra' is no JSON type: {types}"]


def test_a_generator_prefix_is_read_in_any_case_and_a_sentence_stays_a_message() -> None:
    # before: `-i Agents:generator` was sent to the agent as the message "Agents:generator"
    assert [(s.kind, s.value, s.params) for s in map(parse_input, [
        "Agents:generator?count=2", "SCRIPTS:gen:cases", "agents:generator", "Agents: who approves this?"])] == [
        ("agents", "generator", {"count": "2"}), ("scripts", "gen:cases", {}), ("agents", "generator", {}),
        ("message", "Agents: who approves this?", {})]


def test_a_capitalised_agents_prefix_runs_the_generator(tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = run_test(["-i", "Agents:generator?count=1", "-n", "expense", "--dry-run"], cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Input: Agents:generator?count=1 (1 test case), not run (--dry-run)" in done.stdout, done.stdout


def test_dry_run_output_in_another_folder_keeps_its_files_reachable(tmp_path: Path) -> None:
    # before: `file://receipt.png` was written as the case had it, relative to cases/, so out/saved.jsonl named
    # out/receipt.png: 'file not found' unless the project's folder happened to hold a receipt.png
    project = _project(tmp_path)
    (project / "cases").mkdir()
    (project / "cases" / "receipt.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (project / "cases" / "a.jsonl").write_text(json.dumps({"id": "r", "input": [{"role": "user", "content": [
        {"type": "text", "text": "File this"}, {"type": "image", "source": "file://receipt.png"}]}]}) + "\n")
    made = run_test(["-i", "cases/a.jsonl", "-n", "expense", "--dry-run", "-o", "out/saved.jsonl"], cwd=project)
    assert made.returncode == 0, made.stdout + made.stderr
    saved = (project / "out" / "saved.jsonl").read_text()
    assert json.loads(saved)["input"][0]["content"][1]["source"] == "file://../cases/receipt.png", saved
    checked = forked.run(["validate", "out/saved.jsonl", "-n", "expense"], project,
                         {**os.environ, "NO_COLOR": "1"}, 60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _project(tmp_path: Path) -> Path:
    """A project whose generator is a fake model writing one case; its target is never called (--dry-run)."""
    folder = tmp_path / "project"
    folder.mkdir()
    case = json.dumps({"cases": [{"id": "gen-1", "input": "Hello"}]})
    (folder / "tamesu.yaml").write_text(textwrap.dedent(f"""\
        targets:
          expense: {{ type: rest, url: "http://127.0.0.1:9/chat" }}
        models:
          generator: {{ provider: fake, rules: [{{ say: {json.dumps(case)} }}] }}
        """))
    return folder


async def test_the_turn_a_timeout_cut_short_is_in_the_run_folder_and_the_report(
        serve: Callable[[Any], ThreadServer], tmp_path: Path) -> None:
    # before: the -o record and the console had the cut turn; result.json, transcript.json and the HTML report
    # stopped at the last answered turn, so a reader of the run folder never saw what the agent was asked
    folder = project(tmp_path, serve(_slow_agent()).url)
    text = json.dumps({"id": "mt", "timeout": "1s", "turns": [
        {"input": "hi"}, {"input": "be slow", "assertions": [{"type": "contains", "value": "said"}]}],
        "final_assertions": [{"type": "contains", "value": "zebra"}]})
    outcome, _ = await run_cases(folder, text)
    [run] = [p.parent for p in outcome.run_dir.rglob("result.json")]
    result = json.loads((run / "result.json").read_text())
    why = "the test took longer than its timeout (1s)"
    answered, cut = result["turns"]
    assert "cut" not in answered and answered["agent"]["text"] == "You said hi. Anything else?", answered
    assert (cut["index"], cut["user"]["text"], cut["agent"]["text"], cut["cut"]) == (2, "be slow", "", why), cut
    assert 0 < cut["agent"]["completed_at_ms"] - cut["agent"]["sent_at_ms"] <= 1200, cut
    # grading and metrics as before: the answered turn only; the cut turn's and the final assertions not evaluated
    assert result["metrics"]["turns"] == 1 and result["not_evaluated"] == 2, result["metrics"]
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == [("conversation", False)]
    lines = json.loads((run / "transcript.json").read_text())["lines"]
    assert [(line["role"], line["text"], line.get("cut")) for line in lines] == [
        ("user", "hi", None), ("agent", "You said hi. Anything else?", None), ("user", "be slow", why)]
    (record,) = outcome.records  # the -o record reads it from result.json now: the same failed turn
    assert [(t.turn, t.status, t.error) for t in record.turns or []] == [(1, "passed", None), (2, "failed", why)]
    page = render_html(load_run(outcome.run_dir), outcome.run_dir)
    assert "be slow" in page and f"the turn was cut short: {why}" in page, page[-3000:]
    assert f"user: be slow\nagent: (no answer: {why})" in render_junit(load_run(outcome.run_dir)).decode()


def test_a_suites_type_assertion_names_the_choice_a_near_miss_meant(tmp_path: Path) -> None:
    # the YAML side of the same near miss: it listed the JSON types without saying what was written or meant
    (tmp_path / "s.tamesu.yaml").write_text(textwrap.dedent("""\
        targets: { a: { type: rest, url: "http://127.0.0.1:9/chat" } }
        tests:
          - name: t
            target: a
            scenario: { script: [ { say: hi } ] }
            assert:
              - type: { path: $.total, value: Number }
        """))
    done = forked.run(["validate", "s.tamesu.yaml"], tmp_path, {**os.environ, "NO_COLOR": "1"}, 60)
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == (
        "s.tamesu.yaml:7:39: tests[0].assert[0].type.value: input should be 'string', 'number', 'integer', "
        "'boolean', 'array', 'object' or 'null', got 'Number' (did you mean 'number'?)"), done.stderr
