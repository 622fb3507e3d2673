"""`make test`'s runner (scripts/tests_beside_mypy.py): the tests and mypy at once, either failing fails the
whole, mypy's report after the tests' output, and a SIGTERM leaves neither behind. The two commands are small
Python stand-ins whose behaviour each test sets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lifeline import alive, tied

RUNNER = Path(__file__).resolve().parents[1] / "scripts" / "tests_beside_mypy.py"


def _stand_in(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _run(mypy: str, tests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUNNER), *_stand_in(mypy), "--", *_stand_in(tests)],
                          capture_output=True, text=True, timeout=60)


def test_both_passing_pass_and_mypys_report_follows_the_tests_output() -> None:
    run = _run("print('mypy: clean')", "print('tests: 3 passed')")
    assert run.returncode == 0, run
    assert run.stdout.index("tests: 3 passed") < run.stdout.index("mypy: clean"), run.stdout


def test_a_mypy_error_fails_the_run_after_passing_tests() -> None:
    run = _run("import sys; print('x.py:1: error'); sys.exit(1)", "print('tests: 3 passed')")
    assert run.returncode == 1, run
    assert "x.py:1: error" in run.stdout, run.stdout


def test_failing_tests_give_their_own_code_even_when_mypy_fails_too() -> None:
    run = _run("import sys; sys.exit(1)", "import sys; sys.exit(3)")
    assert run.returncode == 3, run


def test_mypy_runs_niced_and_the_tests_do_not() -> None:
    niceness = "import os; print('{}', os.getpriority(os.PRIO_PROCESS, 0))"
    run = _run(niceness.format("mypy"), niceness.format("tests"))
    seen = dict(line.split() for line in run.stdout.splitlines() if line.startswith(("mypy ", "tests ")))
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == {"tests": str(ours), "mypy": str(min(ours + 10, 19))}, run.stdout


def test_a_sigterm_reaches_the_tests_and_ends_mypy(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    record = f"import os, time; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(60)"
    runner = subprocess.Popen(tied([sys.executable, str(RUNNER), *_stand_in(record), "--", *_stand_in(record)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while len(pids.read_text().split() if pids.exists() else []) < 2:
            assert time.monotonic() < deadline, "the stand-ins did not start"
            time.sleep(0.05)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=20) == 128 + signal.SIGTERM
        started = [int(pid) for pid in pids.read_text().split()]
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in started), started
    finally:
        runner.kill()
