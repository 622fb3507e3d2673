"""`tamesu test` takes tamesu.yaml's `parallel` as `tamesu run` does, when `--parallel` is not given.

Before: `tamesu test` ran its cases one at a time whatever the project said (`parallel` read by `run` alone), so
a project with `parallel: 4` ran its JSONL cases four times slower than its suites."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PROJECT = """\
suites: []
parallel: 4
targets:
  slow:
    type: rest
    url: URL/chat
    request: { body: { message: "{{message}}" } }
    response: { text: $.reply }
"""


def _slow_agent() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        await asyncio.sleep(0.4)  # long enough for cases run side by side to overlap
        return JSONResponse({"reply": f"you said {(await request.json())['message']}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _spans(run_dir: Path) -> list[tuple[dt.datetime, dt.datetime]]:
    spans = []
    for path in run_dir.glob("*/cases/*/run-1/result.json"):
        result = json.loads(path.read_text())
        start = dt.datetime.fromisoformat(result["started_at"])
        spans.append((start, start + dt.timedelta(milliseconds=result["duration_ms"])))
    return sorted(spans)


def _overlapping(spans: list[tuple[dt.datetime, dt.datetime]]) -> bool:
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def test_tamesu_test_runs_cases_side_by_side_as_the_project_says(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    server = serve(_slow_agent())
    (tmp_path / "tamesu.yaml").write_text(PROJECT.replace("URL", server.url))
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps({"id": f"c{n}", "input": f"case {n}"}) + "\n"
                                                  for n in range(4)))
    done = tamesu(["test", "-i", "cases.jsonl", "-n", "slow", "--out", "side"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    spans = _spans(tmp_path / "side")
    assert len(spans) == 4 and _overlapping(spans), spans
    # --parallel still wins over the project
    done = tamesu(["test", "-i", "cases.jsonl", "-n", "slow", "--out", "one", "--parallel", "1"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    spans = _spans(tmp_path / "one")
    assert len(spans) == 4 and not _overlapping(spans), spans
