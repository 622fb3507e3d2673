"""A repeated test's verdict when some of its runs say nothing of the agent: runs the simulated user spoiled
(inconclusive) and runs the environment broke (errors) count neither way, and a test they leave too few runs to
decide is not decided by the runs that remain (docs/repeats.md, "Runs that say nothing")."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _agent(pattern: str) -> Starlette:
    """Answers each request by the next letter of `pattern` (cycling): P "booked", F "sorry" (a run of two turns
    takes two letters)."""
    letters = itertools.cycle(pattern)

    async def chat(request: Request) -> JSONResponse:
        letter = next(letters)
        return JSONResponse({"text": "Your flight is booked." if letter == "P" else "Sorry, no."})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _results(tmp_path: Path) -> dict[str, dict[str, Any]]:
    [run_dir] = list((tmp_path / "out").iterdir())
    return {json.loads(x)["test"]: json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()}


SPOILED = """\
targets:
  agent: {{ type: rest, url: "{url}/chat" }}
tests:
  - name: book
    target: agent
    repeat: 4
    pass_threshold: {threshold}
    retries_inconclusive: 0
    scenario: {{ goal: "Book a flight to Paris", max_turns: 2 }}
    assert: [ {{ contains: "booked" }} ]
"""


def _spoiling_project(tmp_path: Path, url: str, threshold: float) -> None:
    # the simulated user breaks character on every run: a run the agent fails is inconclusive, one it passes passes
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        "  simulator: { provider: fake, rules: [ { say: \"As an AI language model, I can't book flights\" } ] }\n")
    (tmp_path / "suite.yaml").write_text(SPOILED.format(url=url, threshold=threshold))


def test_one_conclusive_run_of_four_does_not_decide_a_test_at_half(tmp_path: Path, tamesu: Any,
                                                                   serve: Any) -> None:
    # before: PASS, exit 0, "1/4 runs passed" and stats.runs 1: three runs the simulated user spoiled left one
    # run to stand for four, and nothing said three were inconclusive
    _spoiling_project(tmp_path, serve(_agent("PPFFFFFF")).url, 0.5)
    result = tamesu(["run", "--out", "out", "--report", "json:report.json"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "INC   suite/book  1/4 runs passed, 3 inconclusive" in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert line["status"] == "inconclusive" and line["stats"]["runs"] == 1, line
    assert line["reason"].startswith("3 of 4 runs inconclusive, too many to decide: 1 passed, pass_threshold 0.5 "
                                     "needs 2 of 4"), line["reason"]
    report = json.loads((tmp_path / "report.json").read_text())
    [test] = report["tests"]
    assert (test["status"], test["inconclusive_runs"]) == ("inconclusive", 3), test


def test_enough_conclusive_runs_decide_and_the_inconclusive_ones_are_said(tmp_path: Path, tamesu: Any,
                                                                         serve: Any) -> None:
    # 3 passes of 4 at 0.5: whatever the spoiled run would have been, the test passes; and the line says it
    _spoiling_project(tmp_path, serve(_agent("PPPPPPFF")).url, 0.5)
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  suite/book  3/4 runs passed, 1 inconclusive" in result.stdout, result.stdout
    line = _results(tmp_path)["book"]
    assert line["status"] == "passed" and line["stats"]["runs"] == 3, line
