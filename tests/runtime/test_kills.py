"""Killing tamesu mid-run (SIGKILL, SIGTERM, SIGINT, SIGHUP at random moments, on a fixed seed) while remote agents,
MCP servers, hooks and `command` assertions are running: no finished result is lost, nothing it started is left,
and a run stopped by a signal says so in run.json with the code the process exits with.

`TAMESU_KILLS=40` runs more rounds (the default keeps CI short); `TAMESU_KILL_SEED` changes the moments.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_tamesu
from forked import script_command

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ROUNDS = int(os.environ.get("TAMESU_KILLS", "4"))
SEED = int(os.environ.get("TAMESU_KILL_SEED", "13"))

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")

_SUITE = """\
name: busy
remote_agents:
  billing: {{ reply: "Refund issued, RF-1" }}
hooks:
  before_all:
    # left running on purpose: it must still die with tamesu
    - "sleep 600 >/dev/null 2>&1 &"
  before_each: ["sleep 0.1"]
targets:
  shop:
    type: mcp
    command: {python}
    args: {args}
    call_timeout: 5s
tests:
{tests}
"""

_TEST = """\
  - name: order {n}
    target: shop
    scenario: {{ script: [{{ say: "Hi! Where is my order ORD-1001?" }}] }}
    assert:
      - contains: shipped
      - command: "sleep 0.4; echo ok"
"""


def _project(folder: Path, tests: int) -> None:
    server = ROOT / "examples" / "mcp-server" / "server.py"
    rules = ROOT / "examples" / "mcp-server" / "fake-rules.yaml"
    (folder / "tamesu.yaml").write_text(
        f'suites: ["*.tamesu.yaml"]\nmodels:\n  target: {{ provider: fake, rules: {json.dumps(str(rules))} }}\n')
    # the MCP servers are forks of the warm process (a stdlib-only launcher in front: tests/forked.py), marked and
    # killed as any child of the run: a fresh one spent 0.9 s of CPU importing the mcp SDK, and a round starts
    # up to six. tamesu itself stays a plain `python -m tamesu`: its signals and its end are what is tested
    python, *args = script_command(server)
    (folder / "busy.tamesu.yaml").write_text(_SUITE.format(
        python=json.dumps(python), args=json.dumps(args),
        tests="".join(_TEST.format(n=n) for n in range(tests))))


def _marked(token: str) -> list[int]:
    """Processes (other than this one) whose environment carries `token` in TAMESU_OWNERS."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        for item in environ.split(b"\0"):
            if item.startswith(b"TAMESU_OWNERS=") and token.encode() in item.split(b"=", 1)[1].split(b":"):
                found.append(int(name))
    return found


def _wait_gone(token: str, seconds: float = 30) -> list[int]:
    # 30 s: what is left goes within a few seconds (the MCP servers' stdin closed, then SIGTERM 2 s later), which a
    # loaded machine stretches; a process that outlives the run stays for good
    deadline = time.monotonic() + seconds
    while (left := _marked(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _one_round(folder: Path, sig: signal.Signals, delay: float, parallel: int) -> None:
    token = "killtest" + secrets.token_hex(4)
    env = {**os.environ, "NO_COLOR": "1", "TAMESU_OWNERS": token}
    env.pop("TAMESU_DEBUG", None)
    out = folder / f"out-{sig.name}-{delay:.2f}"
    process = subprocess.Popen([PYTHON, "-m", "tamesu", "run", "--out", str(out), "--parallel", str(parallel)],
                               cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the moment counts from the run's start (its plan on disk), not from a loaded machine's slow imports
        deadline = time.monotonic() + 60
        while not list(out.glob("*/plan.json")) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        process.send_signal(sig)
        try:
            # 60 s: a run stops within seconds; at load 25 one SIGINT'd run was still going after 30
            stdout, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            raise AssertionError(f"{sig.name} after {delay:.2f}s: still running 60 s later; it said:\n"
                                 f"{stderr}{stdout}") from None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    left = _wait_gone(token)
    where = f"{sig.name} after {delay:.2f}s (parallel {parallel})"
    assert not left, f"{where}: left running: {left}"
    assert "Traceback" not in stderr + stdout, f"{where}:\n{stderr}"
    runs = list(out.glob("*/"))
    if not runs:
        return  # killed before the run directory existed: nothing to keep
    run_dir = runs[0]
    results = run_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines() if results.exists() else []
    for line in lines:  # every line whole: none cut off by the kill
        assert json.loads(line)["status"] in {"passed", "failed", "error", "skipped"}, f"{where}: {line}"
    if sig is signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
        return
    summary = json.loads((run_dir / "run.json").read_text())
    if process.returncode == 0:
        assert summary["exit_code"] == 0 and not summary["interrupted"], where  # the run had finished
        return
    assert process.returncode == 128 + sig, f"{where}: exit {process.returncode}\n{stderr}"
    assert summary["exit_code"] == process.returncode, where
    assert summary["interrupted"] == f"interrupted by {sig.name}", where
    counts = dict(summary["counts"])
    assert counts.pop("total") == len(lines) == sum(counts.values()), f"{where}: {summary['counts']}"
    assert f"interrupted by {sig.name}: {len(lines)} of {summary_planned(run_dir)} planned" in stderr, stderr
    assert not list(run_dir.rglob("*.tmp")), where


def summary_planned(run_dir: Path) -> int:
    return len(json.loads((run_dir / "plan.json").read_text())["tests"])


def test_killed_runs_lose_no_line_and_leave_no_process(tmp_path: Path) -> None:
    _project(tmp_path, tests=6)
    chance = random.Random(SEED)
    # SIGHUP: the terminal or ssh session the run was started from closed; it stops the run as Ctrl-C does (it
    # killed it outright, leaving no run.json)
    kinds = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP]
    for number in range(ROUNDS):
        sig = kinds[number] if number < len(kinds) else chance.choice(kinds)
        _one_round(tmp_path, sig, delay=chance.uniform(0.0, 3.0), parallel=chance.choice([1, 3]))


def test_sigterm_stops_a_parallel_run_with_remote_agents_up(tmp_path: Path) -> None:
    """uvicorn's own signal handlers once swallowed the signal: the run went on and exited 0."""
    _project(tmp_path, tests=12)
    _one_round(tmp_path, signal.SIGTERM, delay=1.5, parallel=4)
    run_dir = next((tmp_path).glob("out-*/*/"))
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["exit_code"] == 143
    # "total" only: the counts also hold it, so summing them counted each finished test twice (right only while
    # none had finished before the signal, as on a loaded machine)
    finished = summary["counts"]["total"]
    assert finished < 12
    # `report` and `merge` exit with the interrupted run's code and say what did not finish
    again = run_tamesu(["report", str(run_dir)], tmp_path, timeout=60)  # forked: tests/forked.py
    left = 12 - finished
    assert again.returncode == 143, again.stderr
    assert f"{left} of 12 planned tests did not finish (interrupted by SIGTERM)" in again.stderr
    merged = run_tamesu(["merge", str(run_dir), "--out", str(tmp_path / "merged")], tmp_path, timeout=60)
    assert merged.returncode == 143, merged.stdout + merged.stderr
    assert f"{left} of 12 planned tests did not finish" in merged.stderr


def _running(word: str) -> list[int]:
    """Live processes whose command line holds `word`: marked or not (`env -i` clears the mark)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            command = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and word.encode() in command.split(b"\0"):
            found.append(int(name))
    return found


_CLEARED = """\
hooks:
  # an agent started with a cleared environment carries no TAMESU_OWNERS mark for the watchdog to find
  before_all: [ "env -i sleep {hook} >/dev/null 2>&1 &" ]
targets:
  shop: {{ type: rest, url: "{url}/chat" }}
tests:
  - name: cleared
    target: shop
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert:
      - command: "env -i sleep {check} >/dev/null 2>&1 & echo started"
      - command: "sleep {wait}"
"""


@pytest.mark.parametrize("ending", ["exit", "SIGTERM", "SIGKILL"])
def test_what_a_hook_or_check_starts_with_a_cleared_environment_ends_with_tamesu(tmp_path: Path, serve,
                                                                                  ending: str) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: object) -> JSONResponse:
        return JSONResponse({"text": "hello"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    # sleep takes fractions of seconds: a length no other process on the machine has names each sleeper
    unique = f"{random.randrange(10**6):06d}"
    hook, check, wait = f"300.{unique}", f"301.{unique}", f"60.{unique}"
    (tmp_path / "suite.yaml").write_text(_CLEARED.format(hook=hook, check=check, url=url,
                                                         wait="0" if ending == "exit" else wait))
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("TAMESU_DEBUG", None)
    process = subprocess.Popen([PYTHON, "-m", "tamesu", "run", "suite.yaml", "--out", "out"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if ending != "exit":
            deadline = time.monotonic() + 60
            while not (_running(hook) and _running(wait)) and process.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _running(hook) and _running(wait), "the hook's sleeper or the second check never started"
            # the first check has ended: what it left behind ended with it, not with tamesu
            assert not _running(check), "the first check's sleeper outlived the check"
            process.send_signal(getattr(signal, ending))
        stdout, stderr = process.communicate(timeout=60)
        expected = {"exit": 0, "SIGTERM": 143, "SIGKILL": -signal.SIGKILL}[ending]
        assert process.returncode == expected, stdout + stderr
        deadline = time.monotonic() + 5
        while (left := _running(hook) + _running(check)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"after {ending}: left running: {left}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in _running(hook) + _running(check) + _running(wait):  # none outlives the test, whatever it says
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
