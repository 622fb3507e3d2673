"""Spans that come after their run was graded are said in that run's result.json at the end of the invocation
(`engine._late_spans`), and so in the HTML report's section of that run. An invocation a second Ctrl-C cancelled
skipped that end: what was collected was lost from result.json, run.json and the report (before: each said
nothing of them)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from agents.traced import TracedRestAgent, free_port
from lifeline import tied

_TEST = """\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
  slow: {{ type: rest, url: '{slow}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - {{ name: order, target: shop, scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: thanks }} ] }} }}
"""


def test_late_spans_of_an_invocation_cancelled_by_a_second_signal_are_written(tmp_path: Path, serve: Any) -> None:
    receive = f"127.0.0.1:{free_port()}"
    # the agent holds the first suite's spans (wait: 0s, graded at once) until the second suite's first request
    agent = TracedRestAgent(f"http://{receive}", release_at_request=3)
    url = serve(agent.app()).url
    asked = tmp_path / "slow-asked"

    async def slow(request: Request) -> JSONResponse:
        await request.json()
        asked.touch()
        await asyncio.sleep(8)  # the run is interrupted meanwhile
        return JSONResponse({"text": "late"})

    slow_url = serve(Starlette(routes=[Route("/chat", slow, methods=["POST"])])).url
    try:
        (tmp_path / "tamesu.yaml").write_text("suites: ['a.yaml', 'b.yaml']\n")
        suite = _TEST.format(url=url, slow=slow_url)
        (tmp_path / "a.yaml").write_text(f"traces: {{ receive: '{receive}', wait: 0s }}\n" + suite)
        (tmp_path / "b.yaml").write_text(
            f"traces: {{ receive: '{receive}', wait: 4s }}\nhooks: {{ after_all: [ 'sleep 6' ] }}\n" + suite
            + "  - { name: wait, target: slow, scenario: { script: [ { say: hi } ] } }\n")
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
        process = subprocess.Popen(tied([*forked.tamesu_command(), "run", "--out", "out"]), cwd=tmp_path, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 90
            while not asked.exists() and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            assert asked.exists(), process.communicate(timeout=30)[0]
            process.send_signal(signal.SIGINT)  # the run in flight ends, then b's after_all hook sleeps
            time.sleep(1.5)
            process.send_signal(signal.SIGINT)  # and a second cancels everything
            output, _ = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        agent.shutdown()
    assert process.returncode == 130, output
    folder = next((tmp_path / "out").iterdir())
    graded = json.loads((folder / "a" / "order" / "run-1" / "result.json").read_text())
    late = [w for w in graded.get("warnings", []) if "of this run came after it was graded" in w]
    assert late and late[0].startswith("traces: 5 span(s) of this run came after it was graded"), graded
    run_json = json.loads((folder / "run.json").read_text())
    assert any("arrived after their run was graded" in w and "a/order run 1 (5)" in w
               for w in run_json["warnings"]), run_json["warnings"]
    page = (folder / "report.html").read_text()
    assert "5 span(s) of this run came after it was graded" in page
