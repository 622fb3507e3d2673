"""Ctrl-C under the pytest plug-in stops a run as the command line does: run.json said `"interrupted":
"interrupted"` (the item ran under `asyncio.run`, which a SIGINT cancels) where `tamesu run` says "interrupted by
SIGINT"; now the run in flight ends in order, run.json says so, and pytest's session stops as after any Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from lifeline import tied
from tamesu.net.serve import ThreadServer
from test_pytest_plugin import _plugin_args


def test_ctrl_c_under_pytest_says_interrupted_by_sigint_in_run_json(tmp_path: Path) -> None:
    asked = threading.Event()

    async def chat(request: Request) -> JSONResponse:
        import asyncio

        asked.set()
        await asyncio.sleep(60)  # slower than the test waits: only the interrupt ends this turn
        return JSONResponse({"reply": "late"})

    server = ThreadServer(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).start()
    try:
        (tmp_path / "slow.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{server.url}/chat", response: {{ text: $.reply }} }}
tests:
  - name: slow
    timeout: 120s
    scenario: {{ script: [ {{ say: take your time }} ] }}
  - name: never started
    scenario: {{ script: [ {{ say: hi }} ] }}
""")
        command = [sys.executable, "-m", "pytest", *_plugin_args(), "-p", "no:cacheprovider", "-p", "no:asyncio",
                   "--rootdir", str(tmp_path), "--confcutdir", str(tmp_path), "-c", os.devnull, "-q",
                   "--tamesu-out", "runs"]
        pytest_run = subprocess.Popen(tied(command), cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"},
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert asked.wait(60), "the agent was never asked"
            time.sleep(0.3)  # the turn is under way
            started = time.monotonic()
            pytest_run.send_signal(signal.SIGINT)
            out, _ = pytest_run.communicate(timeout=60)
            took = time.monotonic() - started
        finally:
            if pytest_run.poll() is None:
                pytest_run.kill()
                pytest_run.wait()
    finally:
        server.stop()
    assert pytest_run.returncode == 2, out  # pytest's own code for an interrupted session
    assert "KeyboardInterrupt" in out and "tamesu: interrupted by SIGINT" in out, out
    assert took < 30, took  # the turn in flight ended at once, not after the agent's 60 s
    [run_json] = list((tmp_path / "runs").rglob("run.json"))
    summary = json.loads(run_json.read_text())
    assert (summary["interrupted"], summary["exit_code"]) == ("interrupted by SIGINT", 130), summary
    assert len(list((tmp_path / "runs").rglob("run.json"))) == 1  # the second test never started
