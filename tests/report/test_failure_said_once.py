"""A run whose checks failed twice says each failure once in JUnit's failure text and GitHub's annotation: the
run's `fault_reason` is those failures joined, and it was written before them as `fault agent: <all of them>`,
so a CI log showed every failure twice. A real agent on 127.0.0.1."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from ports import refused_port
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer


async def _chat(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})


def test_each_failure_is_said_once_in_junit_and_github(tmp_path: Path,
                                                       serve: Callable[[Any], ThreadServer]) -> None:
    server = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])]))
    suite = {"targets": {"bot": {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}}},
             "tests": [{"name": "twice", "scenario": {"script": [{"say": "hello"}]},
                        "assert": [{"contains": "refund"}, {"contains": "order"}, {"contains": "echo"}]}]}
    (tmp_path / "s.yaml").write_text(json.dumps(suite), encoding="utf-8")
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "junit,github"], tmp_path,
                      env={"GITHUB_STEP_SUMMARY": "", "GITHUB_WORKSPACE": str(tmp_path)})
    assert done.returncode == 1, done.stdout + done.stderr

    [case] = ET.parse(only_run_dir(tmp_path / "out") / "junit.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    for expected in ('"refund"', '"order"'):
        assert failure.text.count(expected) == 1, failure.text
    assert failure.text.splitlines()[0] == "fault agent", failure.text
    [annotation] = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert annotation.count('"refund"') == 1 and annotation.count('"order"') == 1, annotation


def test_a_named_check_the_error_came_from_is_said_once_and_marked_in_result_json(tmp_path: Path) -> None:
    # a judge given its own `name:` whose model cannot be reached: the run's error is `tone: openai:...`, its
    # check's reason `not decided: judge: openai:...`; the reports told them apart by their words, missed the
    # name standing for the key, and listed the error's line twice (console and JUnit). Grading marks the check
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nstore: false\nmodels:\n"
        f"  judge: {{ provider: openai, model: test-model, base_url: 'http://127.0.0.1:{refused_port()}/v1', "
        "api_key: x, max_retries: 0, timeout: 5s }\n", encoding="utf-8")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - name: greets
    scenario: { script: [ { say: hi } ] }
    assert: [ { judge: "The agent greets", name: tone }, { judge: "The agent helps", name: help },
              { contains: nothing } ]
""", encoding="utf-8")
    done = run_tamesu(["run", "--out", "out", "--color", "never", "--report", "junit"], tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    said = [line.strip() for line in done.stdout.splitlines() if "cannot reach" in line]
    # the error (the first judge's), then the second judge's own line: each once
    assert len(said) == 2 and said[0].startswith("! tone: openai:test-model: cannot reach"), said
    assert said[1].startswith("✗ help: not decided: judge: openai:test-model: cannot reach"), said
    run = only_run_dir(tmp_path / "out")
    [error] = list(ET.parse(run / "junit.xml").getroot().iter("error"))
    text = (error.text or "").splitlines()
    assert [line.split(":")[0] for line in text if "cannot reach" in line] == ["error", "help"], text
    # result.json says which check the error is: that one alone, the others as they were written before
    graded = json.loads((run / "suite" / "greets" / "run-1" / "result.json").read_text("utf-8"))["assertions"]
    assert [a.get("run_error") for a in graded] == [True, None, None], graded
