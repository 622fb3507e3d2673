"""Why each test failed, as the one line a CI list shows (JUnit's failure message, the HTML's summary, the
Markdown table): a repeated test's rate (`2 of 4 runs passed, ...`) named no run's failure, so the reader could fix
nothing from it; a check scoped to a turn lost its turn there; two failed checks read as one. A real agent on
127.0.0.1 that answers a repeated question right every other time."""

from __future__ import annotations

import asyncio
import json
import re
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


def _agent() -> Starlette:
    asked = [0]

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        if "slow" in message:
            await asyncio.sleep(3)
        if "flaky" in message:
            asked[0] += 1
            return JSONResponse({"text": "ok fine" if asked[0] % 2 else "nope"})
        return JSONResponse({"text": f"echo: {message}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _run(tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> Path:
    server = serve(_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}, "turn_timeout": "1s"}
    suite = {"name": "s", "targets": {"bot": target}, "tests": [
        {"name": "flaky", "repeat": 4, "scenario": {"script": [{"say": "flaky one"}]},
         "assert": [{"contains": "fine"}]},
        {"name": "two checks", "scenario": {"script": [{"say": "hello"}, {"say": "again"}]},
         "assert": [{"contains": "refund", "on_turn": 2}, {"contains": "order"}]},
        {"name": "slow", "scenario": {"script": [{"say": "hello"}, {"say": "slow please"}]}},
    ]}
    (tmp_path / "s.yaml").write_text(json.dumps(suite), encoding="utf-8")
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "junit,html,json,markdown"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    return only_run_dir(tmp_path / "out")


def _messages(run: Path) -> dict[str, str]:
    cases = ET.parse(run / "junit.xml").getroot().iter("testcase")
    return {case.get("name", ""): (case.find("failure").get("message") or "") for case in cases}  # type: ignore[union-attr]


def test_each_reason_line_names_the_failure_its_turn_and_the_failing_run(tmp_path: Path,
                                                                         serve: Callable[[Any], ThreadServer]) -> None:
    run = _run(tmp_path, serve)
    messages = _messages(run)
    flaky = ('2 of 4 runs passed, rate 0.50 below pass_threshold 1 '
             '(run 2: contains: expected the agent to say "fine"; not found in 1 turn(s) of agent text: "nope")')
    assert messages["flaky"] == flaky
    two = messages["two checks"]
    assert two.startswith('assert[0]/contains (turn 2): expected the agent to say "refund"'), two  # two contains
    assert two.endswith("(and 1 more check failed)"), two
    assert messages["slow"].startswith("conversation: turn 2: turn timed out after 1s"), messages["slow"]

    # the JSON says it too (its `reason` is null when one run decided the test)
    report = json.loads(run.joinpath("report.json").read_text(encoding="utf-8"))
    assert {t["test"]: t["failure"] for t in report["tests"]} == messages

    # the HTML's summary line and the Markdown table say the same line
    page = run.joinpath("report.html").read_text(encoding="utf-8")
    whys = [re.sub(r"&quot;", '"', m) for m in re.findall(r'<span class="why">([^<]*)</span>', page)]
    assert flaky in whys, whys
    summary = run.joinpath("summary.md").read_text(encoding="utf-8")
    assert "(run 2: contains: expected the agent to say" in summary, summary
    assert "assert\\[0\\]/contains (turn 2): expected the agent to say" in summary, summary  # Markdown escapes [ ]


def test_a_runs_fault_names_the_turn_and_is_said_once_beside_its_checks(tmp_path: Path,
                                                                        serve: Callable[[Any], ThreadServer]) -> None:
    # the fault's reason (JSON, results.jsonl) said `contains: ...` of a check the reports call `contains (turn 2)`,
    # and the HTML wrote every failed check twice: in the fault's line and in the table under it
    run = _run(tmp_path, serve)
    report = json.loads(run.joinpath("report.json").read_text(encoding="utf-8"))
    [two] = [t for t in report["tests"] if t["test"] == "two checks"]
    reason = two["runs"][0]["fault_reason"]
    assert reason.startswith('assert[0]/contains (turn 2): expected the agent to say "refund"'), reason
    page = run.joinpath("report.html").read_text(encoding="utf-8")
    assert page.count('expected the agent to say &quot;refund&quot;') == 2, "the summary row and the table"
    assert "fault: <b>agent</b></p>" in page
    [case] = [c for c in ET.parse(run / "junit.xml").getroot().iter("testcase") if c.get("name") == "two checks"]
    text = case.find("failure").text or ""  # type: ignore[union-attr]
    assert text.splitlines()[0] == "fault agent", text
    assert text.count('"refund"') == 1, text


def test_a_failed_turn_says_why_on_the_turn_itself(tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> None:
    # a turn that timed out showed as `agent: ` (JUnit's output) and `(no text)` (the HTML's bubble): the agent
    # seemed to have answered nothing, and the reason stood only in the failure's text, away from the turn
    run = _run(tmp_path, serve)
    [case] = [c for c in ET.parse(run / "junit.xml").getroot().iter("testcase") if c.get("name") == "slow"]
    output = (case.findtext("system-out") or "").splitlines()
    assert output[-1] == "agent: (the turn failed: turn timed out after 1s (waiting for the answer))", output
    page = run.joinpath("report.html").read_text(encoding="utf-8")
    assert '<div class="error">the turn failed: turn timed out after 1s (waiting for the answer)</div>' in page
    assert "(no text)" not in page
