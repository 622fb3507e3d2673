"""A run stopped by SIGTERM (a CI job cancelled or past its time) still writes the reports it was asked for, of
what finished. Before, exit 143 and no JUnit, HTML or Markdown at all: the CI system showed nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from lifeline import tied

_SUITE = """
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - { name: quick, scenario: { script: [ { say: hi } ] }, assert: [ { contains: hello } ] }
  - name: slow
    scenario: { script: [ { say: hi } ] }
    assert: [ { command: "sleep 3" } ]
"""


def _terminated(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM, as a CI system cancelling the job sends it; what the run printed once it stopped."""
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=60)


def test_sigterm_still_writes_the_reports_of_what_finished(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    process = subprocess.Popen(
        tied([sys.executable, "-m", "tamesu", "run", "s.tamesu.yaml", "--out", "out", "--parallel", "1",
              "--report", "junit:reports/junit.xml,markdown:reports/summary.md,github"]),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = [p for p in (tmp_path / "out").glob("*/results.jsonl") if p.read_text().strip()]
            if lines:
                break
            time.sleep(0.1)
        assert lines, "the quick test never finished"
        time.sleep(0.5)  # the slow one is in its command
        out, err = _terminated(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, out + err
    junit = ET.parse(tmp_path / "reports" / "junit.xml").getroot()
    cases = {case.get("name"): case for case in junit.iter("testcase")}
    assert "quick" in cases and cases["quick"].find("failure") is None, ET.tostring(junit)
    # the test cut short points at where it is written, as a finished one does
    unfinished = [case for name, case in cases.items() if name != "quick"]
    assert unfinished and all(case.get("file") == "s.tamesu.yaml" and case.get("line") for case in unfinished)
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "interrupted by SIGTERM" in summary + err
    assert summary.startswith("### ⚠️ tamesu:"), summary  # it was ✅ over "exit code 143"
    # the run's own annotation: it was "::notice title=tamesu::1 passed, 0 failed", green over exit 143
    [closing] = [line for line in out.splitlines() if "title=tamesu::" in line]
    assert closing == "::error title=tamesu::1 passed, 0 failed%0Ainterrupted by SIGTERM%0A1 of 2 planned tests did " \
                      "not finish: s/slow", closing


def test_a_conversation_cut_short_keeps_what_it_said(tmp_path: Path, serve: Any) -> None:
    # before: the run folder held plan.json and run.json only; the answered first turn was gone
    import asyncio
    import json

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    asked: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        asked.append((await request.json())["message"])
        if len(asked) > 1:
            await asyncio.sleep(30)  # the second turn hangs
        return JSONResponse({"reply": "your order shipped"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: rest, url: "{url}/chat", response: {{ text: $.reply }} }}
tests:
  - name: hangs
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
""")
    process = subprocess.Popen(tied([sys.executable, "-m", "tamesu", "run", "s.tamesu.yaml", "--out", "out"]),
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(asked) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        out, err = _terminated(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, out + err
    assert "0 of 1 planned test finished" in err
    [transcript] = list((tmp_path / "out").glob("*/s/hangs/run-1/transcript.json"))
    said = [line["text"] for line in json.loads(transcript.read_text())["lines"]]
    assert said[:2] == ["one", "your order shipped"], said


def _signalled_once_started(args: list[str], folder: Path, pid_file: Path, signum: int,
                            ) -> tuple[subprocess.Popen[str], int, str, str]:
    """`tamesu ARGS` in `folder`, sent `signum` once `pid_file` (written by what the run started) names a
    process: the run, that process's pid, and what the run printed."""
    process = subprocess.Popen(tied([sys.executable, "-m", "tamesu", *args]), cwd=folder, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        started = int(pid_file.read_text())
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)  # far below the started process's own 120 s
    finally:
        if process.poll() is None:
            process.kill()
    return process, started, out, err


def _gone(pid: int, within: float = 0.0) -> bool:
    """Whether no process `pid` is left (waiting up to `within` seconds for it to end)."""
    import os

    deadline = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def test_ctrl_c_cuts_a_command_check_that_is_running(tmp_path: Path) -> None:
    # before: Ctrl-C waited for the check's command to end (30 s of `sleep 30`), then reported the run
    import json

    (tmp_path / "s.tamesu.yaml").write_text("""
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - name: checked slowly
    scenario: { script: [ { say: hi } ] }
    assert: [ { command: "echo $$ > command.pid; exec sleep 120" } ]
""")
    process, command, out, err = _signalled_once_started(["run", "s.tamesu.yaml", "--out", "out"], tmp_path,
                                                         tmp_path / "command.pid", signal.SIGINT)
    assert process.returncode == 130, out + err
    assert _gone(command), "the check's command outlived the run"
    [result] = list((tmp_path / "out").glob("*/s/checked-slowly/run-1/result.json"))
    recorded = json.loads(result.read_text())
    assert recorded["status"] == "error", recorded
    assert recorded["error"] == "interrupted by SIGINT while the checks were graded"
    assert recorded["not_evaluated"] == 1


@pytest.mark.parametrize("stage", ["before_all", "before_each"])
def test_sigterm_cuts_a_hook_that_is_running(stage: str, tmp_path: Path) -> None:
    # before: the first SIGTERM (or Ctrl-C) waited for the hook to end (28.7 s of a `sleep 30` before_each):
    # past a CI runner's grace period, which kills the job with no report written
    import json

    # and the after_* hook of its stage cleans up still, as after a failing one (before: an interrupted
    # before_all skipped after_all, so what an earlier before_all hook started, a container, was left running)
    cleanup = stage.replace("before", "after")
    (tmp_path / "s.tamesu.yaml").write_text(f"""
hooks:
  {stage}: [ {{ run: "echo $$ > hook.pid; exec sleep 120", timeout: 300s }} ]
  {cleanup}: [ "echo cleaned > cleaned.txt" ]
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
tests:
  - name: waits
    scenario: {{ script: [ {{ say: hi }} ] }}
""")
    process, hook, out, err = _signalled_once_started(["run", "s.tamesu.yaml", "--out", "out", "--report", "junit"],
                                                      tmp_path, tmp_path / "hook.pid", signal.SIGTERM)
    assert process.returncode == 143, out + err
    assert _gone(hook), "the hook outlived the run"
    [run_json] = list((tmp_path / "out").glob("*/run.json"))
    assert json.loads(run_json.read_text())["interrupted"] == "interrupted by SIGTERM"
    assert list((tmp_path / "out").glob("*/junit.xml")), "no report of the interrupted run"
    assert (tmp_path / "cleaned.txt").is_file(), f"the {cleanup} hook did not run"


def test_an_interrupted_tamesu_test_writes_the_reports_it_was_asked_for(tmp_path: Path, serve: Any) -> None:
    # before: `tamesu test --report junit,json` Ctrl-C'd (or SIGTERM'd, a cancelled CI job) wrote no report at
    # all, and said "finished test cases are in the output file" with no -o given
    import asyncio
    import json

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        message = (await request.json())["message"]
        if message == "slow":
            (tmp_path / "asked").write_text("1")
            await asyncio.sleep(60)
        return JSONResponse({"text": f"ok {message}"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "tamesu.yaml").write_text(f"store: false\ntargets:\n  bot: {{ type: rest, url: '{url}/chat' }}\n")
    (tmp_path / "cases.jsonl").write_text(
        '{"id": "fast", "input": "quick", "assertions": [{"type": "contains", "value": "ok"}]}\n'
        '{"id": "slow", "input": "slow", "assertions": [{"type": "contains", "value": "ok"}]}\n')
    process = subprocess.Popen(tied([sys.executable, "-m", "tamesu", "test", "-i", "cases.jsonl", "-n", "bot",
                                     "--out", "out", "--report", "junit,json"]),
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "asked").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    assert "interrupted by SIGINT: 1 of 2 planned tests finished, kept in " in err, err
    [run_dir] = list((tmp_path / "out").iterdir())
    junit = ET.parse(run_dir / "junit.xml").getroot()
    assert junit.get("tests") == "2", ET.tostring(junit)  # the one that finished and the one cut short
    assert json.loads((run_dir / "report.json").read_text())["summary"]["exit_code"] == 130


def test_a_hook_that_leaves_a_process_running_is_done_when_its_shell_exits(tmp_path: Path) -> None:
    # hooks start agents with `&`: through a pipe, tamesu waited for the background process holding it (the hook
    # timed out, every test an error), and a command check's pipe left "Event loop is closed" on stderr at exit

    (tmp_path / "s.tamesu.yaml").write_text("""
hooks:
  before_all: [ { run: "sleep 600 & echo $! > agent.pid; echo started", timeout: 5s } ]
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - name: greets
    scenario: { script: [ { say: hi } ] }
    assert: [ { contains: hello }, { command: { run: "sleep 600 & echo checked", contains: checked, timeout: 5s } } ]
""")
    started = time.monotonic()
    done = subprocess.run(tied([sys.executable, "-m", "tamesu", "run", "s.tamesu.yaml", "--out", "out"]),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - started < 30  # not the hooks' and check's timeouts run out
    assert "Event loop is closed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _gone(int((tmp_path / "agent.pid").read_text()), within=10), "the hook's background process outlived the run"


def test_after_a_run_a_second_signal_exits_with_its_own_code() -> None:
    # before: the loop put back Python's own handlers once the run ended, so a second Ctrl-C while the reports
    # were written was a KeyboardInterrupt (click: "Aborted!", exit 1) and a second SIGTERM killed the process
    import asyncio

    from tamesu.runtime.signals import run_stoppable

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        assert run_stoppable(asyncio.sleep(0, result="done")) == "done"
        for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)):
            handler = signal.getsignal(signum)
            assert callable(handler) and handler is not signal.default_int_handler, (signum, handler)
            with pytest.raises(SystemExit) as left:
                handler(signum, None)
            assert left.value.code == code
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
