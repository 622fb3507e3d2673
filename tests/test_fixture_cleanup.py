"""A pytest ended from outside (SIGTERM from a CI runner's timeout, SIGHUP from a closed terminal) still ends what
its session fixtures started: tests/conftest.py turns the signal into Ctrl-C, so the fixtures' finalizers run,
in the controller and in an xdist worker. Before, the agents, bots and Chromium of a killed run were found
still running an hour later."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

CHILD = '''
import os, subprocess, sys, time
from pathlib import Path

import pytest

from lifeline import tied


@pytest.fixture(scope="session")
def agent():
    command = [sys.executable, "-c", "import time; time.sleep(600)"]
    process = subprocess.Popen(tied(command) if os.environ.get("TIED") else command)
    yield process
    process.terminate()
    process.wait(60)


def test_runs_until_stopped(agent):
    Path(os.environ["MARK"]).write_text(f"{os.getpid()} {agent.pid}")
    time.sleep(600)
'''


DEFAULT_SIGNALS = """
import os, signal, sys
for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(signum, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])
"""
"""Runs argv[1:] with SIGINT, SIGHUP and SIGTERM at their defaults: a pytest started as `nohup make test &` (or
from any shell's background job) inherits them ignored, and Python keeps an ignored signal ignored, so the
child would neither see the SIGHUP under test nor let xdist's SIGINT stop a worker (execnet ends a worker that
ignores it with os._exit, no finalizer run)."""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(condition: Callable[[], object], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def _stops(tmp_path: Path, *, xdist: bool, signalled: str, signum: int, tied: bool = False) -> None:
    """A pytest of its own runs CHILD until its test is under way; `signalled` ("pytest", "worker") gets
    `signum`; then its session fixture's process must be gone."""
    (tmp_path / "test_child.py").write_text(CHILD, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    mark = tmp_path / "mark"
    # tests/conftest.py as a plug-in of a pytest of its own: the hook under test, in a run that is only this
    command = [sys.executable, "-c", DEFAULT_SIGNALS,
               sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "conftest",
               "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), *(["-n", "1"] if xdist else []),
               str(tmp_path / "test_child.py")]
    env = {**os.environ, "MARK": str(mark), "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT / "src")]),
           **({"TIED": "1"} if tied else {})}
    child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
    agent = 0
    try:
        assert _wait(lambda: mark.exists() and mark.read_text(), 180), "the child's test never started"
        runner, agent = map(int, mark.read_text().split())
        assert _alive(agent)
        os.kill(runner if signalled == "worker" else child.pid, signum)
        output, _ = child.communicate(timeout=120)
        assert _wait(lambda: not _alive(agent), 30), f"the fixture's process outlived pytest:\n{output}"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if agent and _alive(agent):
            os.kill(agent, signal.SIGKILL)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("xdist", "signalled", "signum"), [
    (False, "pytest", signal.SIGTERM),
    (False, "pytest", signal.SIGHUP),
    (True, "worker", signal.SIGTERM),
    (True, "controller", signal.SIGTERM),
], ids=["sigterm", "sighup", "sigterm-to-an-xdist-worker", "sigterm-to-the-xdist-controller"])
def test_a_signal_to_pytest_ends_its_session_fixtures_processes(
        tmp_path: Path, xdist: bool, signalled: str, signum: int) -> None:
    _stops(tmp_path, xdist=xdist, signalled=signalled, signum=signum)


@pytest.mark.timeout(300)
def test_a_tied_fixture_process_ends_even_when_pytest_is_killed(tmp_path: Path) -> None:
    """SIGKILL runs no finalizer: a process started through `lifeline.tied` (the web shop, Chromium, the
    pipecat bot) is ended by Linux when pytest dies."""
    _stops(tmp_path, xdist=False, signalled="pytest", signum=signal.SIGKILL, tied=True)
