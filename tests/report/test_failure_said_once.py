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
