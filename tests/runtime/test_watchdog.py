"""The watchdog of `tamesu.runtime.children` (a shell and grep, or Python where grep cannot read NUL-separated
lines): once the pipe it waits on closes, every process marked with its token is killed, and no other. The
whole-run proofs (SIGKILL, SIGTERM, SIGINT at seeded moments) are test_kills.py's."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifeline import tied
from tamesu.runtime import children

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the watchdog needs /proc (Linux)")


def _sleeper(owners: str) -> subprocess.Popen[bytes]:
    # tied: ended with pytest if the watchdog misses it; the tie's own interpreter carries the same mark
    return _settled(subprocess.Popen(tied(["sleep", "60"]), env={**os.environ, children.OWNERS_VAR: owners}))


def _settled(process: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """`process` once its tie has exec'd the command. In the middle of an exec a process's environment reads as
    empty for a moment, so a scan then misses its mark: under load (five test-fast workers) a test once armed
    the watchdog inside that moment and the sleeper lived on. Waiting makes the test about the watchdog, not
    about that moment (which a tamesu killed while one of its children execs meets too)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            command = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        except OSError:
            return process
        if command and b"prctl" not in command:  # the tie's script names prctl; empty: still in the exec
            return process
        time.sleep(0.005)
    return process


def _ends(env: dict[str, str]) -> tuple[int | None, int | None, int | None]:
    """How a process marked with the token among others, one marked with another token that merely starts like
    it, and a shell marked with the token alone (waiting on a child) end once the watchdog's pipe closes."""
    token = secrets.token_hex(8)
    marked = _sleeper(f"outer:{token}")
    lookalike = _sleeper(f"outer:{token}x")
    nested = _settled(subprocess.Popen(tied(["sh", "-c", "sleep 60 & wait"]),
                                       env={**os.environ, children.OWNERS_VAR: token}))
    try:
        watchdog = subprocess.Popen(["/bin/sh", "-c", children._WATCHDOG, "watchdog", token, sys.executable,
                                     children._SCAN], stdin=subprocess.PIPE, env=env, start_new_session=True)
        assert watchdog.stdin is not None
        watchdog.stdin.close()
        assert watchdog.wait(10) == 0
        return marked.wait(5), lookalike.poll(), nested.wait(5)
    finally:
        for process in (marked, lookalike, nested):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_shell_watchdog_kills_the_marked_and_only_them() -> None:
    assert _ends(dict(os.environ)) == (-9, None, -9)


@pytest.mark.parametrize("code", [1, 2])
def test_without_a_grep_that_reads_nul_lines_the_python_scan_does_it(tmp_path: Path, code: int) -> None:
    """Whatever a grep without -z exits with (GNU's usage error is 2, some others' 1), the shell sees it did not
    list the line it was given and hands over to Python."""
    fake = tmp_path / "grep"
    fake.write_text(f"#!/bin/sh\necho 'grep: invalid option -- z' >&2\nexit {code}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    assert _ends(env) == (-9, None, -9)
