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

from lifeline import alive

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
        assert alive(agent)
        os.kill(runner if signalled == "worker" else child.pid, signum)
        output, _ = child.communicate(timeout=120)
        assert _wait(lambda: not alive(agent), 30), f"the fixture's process outlived pytest:\n{output}"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if agent and alive(agent):
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


UNTIED = {
    # a `tamesu run` a test starts, signals and waits on itself: it ends with its suite (bounded by the suite's
    # own timeouts), and these tests judge what the run does with a signal, which an exec'ing wrapper would
    # put a process between
    ("runtime/test_kills.py", "_one_round"),
    ("runtime/test_kills.py", "test_what_a_hook_or_check_starts_with_a_cleared_environment_ends_with_tamesu"),
    ("audio/test_speech_pool.py", "_start"),
    ("targets/test_grpc_target.py", "test_the_agent_going_away_in_the_middle_of_a_turn_is_exit_3"),
    ("targets/test_browser_target.py", "_watch"),
    ("cli/test_cli_run.py", "test_a_killed_run_keeps_every_finished_test"),
    ("store/test_store.py", "test_two_shards_write_into_one_run_at_once"),
    ("store/test_store.py", "_killed_once_two_are_stored"),
    ("store/test_store.py", "test_the_indexed_job_manifests_pods_write_one_postgresql_run_that_view_shows"),
    # the test kills this parent itself, to see the SIP worker die with it
    ("targets/test_sip_phone.py", "test_the_worker_dies_with_a_killed_parent"),
    # the pytest under test here: it is killed on purpose, and its own group is killed in a finally
    ("test_fixture_cleanup.py", "_stops"),
    # the warm zygote ends when its stdin (a pipe from this pytest, or from the xdist controller for the one its
    # workers share) closes, which the kernel does on any death
    ("forked.py", "__init__"),
    # the watchdog under test: like tamesu's own, it ends once its stdin (a pipe from this pytest) closes
    ("runtime/test_watchdog.py", "_ends"),
    ("runtime/test_watchdog.py", "_python_watchdog"),
    ("runtime/test_watchdog.py", "_listener"),
}
"""Processes tests start without `lifeline.tied`, each with why it cannot outlive pytest or must not be tied."""


def _process_starts() -> list[tuple[str, str, int, bool]]:
    """(file under tests/, enclosing function, line, started through `tied`) for every subprocess.Popen and
    asyncio.create_subprocess_exec call in the test tree."""
    import ast

    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("Popen", "create_subprocess_exec")):
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Starred):  # create_subprocess_exec(*tied([...]))
                first = first.value
            through_tied = isinstance(first, ast.Call) and ast.unparse(first.func) == "tied"
            inner = min((f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)),
                        key=lambda f: (f.end_lineno or f.lineno) - f.lineno, default=None)
            found.append((path.relative_to(TESTS).as_posix(), inner.name if inner else "", node.lineno, through_tied))
    return found


def test_every_process_a_test_starts_is_tied_to_pytest_or_listed_with_why_not() -> None:
    """A fixture's agent, bot or browser started without `tied` outlives a pytest that is SIGKILLed (an xdist
    worker its controller gives up on): the next run finds its ports and CPU taken."""
    starts = _process_starts()
    assert len(starts) > 20  # the walk found the test tree's starts, not nothing
    loose = [f"tests/{file}:{line} in {function}" for file, function, line, through_tied in starts
             if not through_tied and (file, function) not in UNTIED]
    assert not loose, "started without lifeline.tied (or add it to UNTIED, saying why):\n" + "\n".join(loose)
    stale = UNTIED - {(file, function) for file, function, _, through_tied in starts if not through_tied}
    assert not stale, f"UNTIED names starts that are gone or now tied: {sorted(stale)}"
