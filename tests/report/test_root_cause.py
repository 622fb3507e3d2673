"""Root cause first: once a conversation failed (the agent answered a turn with a 5xx, the test's timeout), the
checks that needed the rest of it are not listed as failures of their own; the failure is shown with how many
checks were not evaluated because of it, in the console, results.jsonl, the JSON, JUnit and HTML reports.
Checks scoped to a turn that completed before the failure are still graded. A real agent on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer


async def _chat(request: Request) -> JSONResponse:
    message = str((await request.json()).get("message", ""))
    if message == "crash":
        return JSONResponse({"detail": "database is down"}, status_code=500)
    if message == "slow":
        await asyncio.sleep(5)
    return JSONResponse({"text": f"echo: {message}"})


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    server = ThreadServer(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).start()
    try:
        yield server.url
    finally:
        server.stop()


CHECKS: list[dict[str, Any]] = [
    {"contains": "echo: hello", "on_turn": 1},  # turn 1 completed: graded, and it passes
    {"contains": "nope", "on_turn": 1},  # turn 1 completed: graded, and it fails on its own
    {"contains": "echo: crash"},
    {"contains": "echo: bye", "on_turn": 3},
    {"not_contains": "sorry"},
    {"metric": {"name": "turns", "gte": 3}},
]


def _suite(folder: Path, url: str, second: str, timeout: str = "60s") -> None:
    suite = {
        "name": "cause",
        "defaults": {"slo": {"turn_latency_ms_p95": 10_000}},
        "targets": {"bot": {"type": "rest", "url": f"{url}/chat", "response": {"text": "$.text"},
                            "connect": {"attempts": 1, "backoff": "10ms"}}},
        "tests": [{"name": "breaks", "target": "bot", "timeout": timeout,
                   "scenario": {"script": [{"say": "hello"}, {"say": second}, {"say": "bye"}]},
                   "assert": CHECKS}],
    }
    (folder / "cause.yaml").write_text(json.dumps(suite, indent=2), encoding="utf-8")


def _run(folder: Path) -> tuple[Any, Path]:
    done = run_tamesu(["run", "cause.yaml", "--out", "out", "--report",
                       "junit,html,json:report.json,markdown:summary.md,github"], folder,
                      env={"GITHUB_STEP_SUMMARY": str(folder / "step-summary.md")})
    return done, only_run_dir(folder / "out")


@pytest.mark.parametrize(("second", "timeout", "cause"), [
    ("crash", "60s", "conversation: turn 2: the agent answered HTTP 500"),
    ("slow", "2s", "conversation: the test took longer than its timeout (2s)"),
])
def test_a_failed_conversation_is_its_root_cause_with_the_checks_it_kept_from_grading(
        tmp_path: Path, agent_url: str, second: str, timeout: str, cause: str) -> None:
    _suite(tmp_path, agent_url, second, timeout)
    done, run_dir = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    # 7 checks: 6 assertions and 1 SLO; the 2 on turn 1 are graded, 5 are not
    failures = [line.strip() for line in out.splitlines() if line.strip().startswith("✗")]
    assert len(failures) == 2, out
    assert failures[0].startswith(f"✗ {cause}"), out
    assert failures[1].startswith("✗ assert[1]/contains (turn 1):"), out  # two contains: named apart
    assert "- 5 checks not evaluated: the conversation failed first" in out
    for follow_on in ("echo: crash", "echo: bye", "metric", "turn_latency_ms_p95"):
        assert not any(follow_on in line for line in failures), out

    [line] = (run_dir / "results.jsonl").read_text().splitlines()
    [run] = json.loads(line)["runs"]
    assert run["not_evaluated"] == 5 and [f["name"] for f in run["failures"]] == ["conversation", "assert[1]/contains"]
    result = json.loads(next(run_dir.rglob("result.json")).read_text())
    assert result["not_evaluated"] == 5
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == \
        [("conversation", False), ("assert[0]/contains", True), ("assert[1]/contains", False)]

    [test] = json.loads((tmp_path / "report.json").read_text())["tests"]
    assert test["runs"][0]["not_evaluated"] == 5
    [case] = ET.parse(run_dir / "junit.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    assert failure.get("message", "").startswith(cause)
    assert "5 checks not evaluated: the conversation failed first" in failure.text
    assert "echo: bye" not in failure.text
    page = (run_dir / "report.html").read_text()
    assert '<p class="note not-evaluated">5 checks not evaluated: the conversation failed first</p>' in page
    for summary in ("summary.md", "step-summary.md"):  # the Markdown report and GitHub's job summary
        [row] = [line for line in (tmp_path / summary).read_text().splitlines() if line.startswith("| `")]
        assert f"| 0/1 | {cause}" in row, row
        assert row.endswith("<br>5 checks not evaluated: the conversation failed first |"), row


def test_a_conversation_that_completes_grades_every_check(tmp_path: Path, agent_url: str) -> None:
    _suite(tmp_path, agent_url, "fine")
    done, run_dir = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(next(run_dir.rglob("result.json")).read_text())
    assert "not_evaluated" not in result and len(result["assertions"]) == 7  # 0 is not written
    assert "not evaluated" not in done.stdout


def test_a_run_that_is_an_error_counts_every_check(tmp_path: Path, serve: Callable[[Any], ThreadServer]) -> None:
    del serve
    from ports import refused_port

    _suite(tmp_path, f"http://127.0.0.1:{refused_port()}", "fine")
    done, run_dir = _run(tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    [line] = (run_dir / "results.jsonl").read_text().splitlines()
    [run] = json.loads(line)["runs"]
    assert run["status"] == "error" and run["not_evaluated"] == 7 and run["failures"] == []
    assert "- 7 checks not evaluated: the error above" in done.stdout
    assert "<br>7 checks not evaluated: the error above |" in (tmp_path / "step-summary.md").read_text()


def test_a_jsonl_case_whose_turn_failed_marks_the_rest_not_evaluated(tmp_path: Path, agent_url: str) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{agent_url}/chat', response: {{ text: $.text }} }}\n")
    (tmp_path / "m.jsonl").write_text(json.dumps({
        "id": "T1",
        "turns": [{"input": "hello", "assertions": [{"type": "contains", "value": "echo: hello"}]},
                  {"input": "crash", "assertions": [{"type": "contains", "value": "echo: crash"}]},
                  {"input": "bye"}],
        "final_assertions": [{"type": "contains", "value": "bye"}]}) + "\n")
    done = run_tamesu(["test", "-i", "m.jsonl", "-n", "bot", "-o", "out.jsonl"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [record] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert record["error"].startswith("turn 2: the agent answered HTTP 500"), record
    first, second = record["turns"]
    assert first["assertions"][0]["passed"] is True  # turn 1 completed: graded
    assert second["assertions"][0]["passed"] is None
    assert second["assertions"][0]["reason"] == "not evaluated: the conversation failed first"
    [final] = record["final_assertions"]
    assert final["passed"] is None and final["reason"] == "not evaluated: the conversation failed first"
