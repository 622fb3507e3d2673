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


def _python_watchdog(token: str) -> subprocess.Popen[bytes]:
    """The watchdog's Python scan alone (where there is no /bin/sh or no grep that reads NUL lines)."""
    return subprocess.Popen([sys.executable, "-I", "-S", "-c", children._SCAN, token], stdin=subprocess.PIPE,
                            start_new_session=True)


def _listener(told: Path) -> subprocess.Popen[bytes]:
    """What stands for the watchdog where a test reads what it is told: its lines, written to `told`."""
    return subprocess.Popen(["sh", "-c", f"cat > {told}"], stdin=subprocess.PIPE)


def _stranger_taking(number: int) -> subprocess.Popen[bytes] | None:
    """A process in a session (and group) of its own, unmarked, given `number` as its pid, as Linux gives a freed
    number to a new process: the next pid is set with ns_last_pid (root). None when other processes of the
    machine keep taking it first."""
    for _ in range(50):
        try:
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(number - 1))
        except OSError:
            return None
        clean = {k: v for k, v in os.environ.items() if k != children.OWNERS_VAR}
        stranger = subprocess.Popen(tied(["sleep", "60"]), env=clean, start_new_session=True)
        if stranger.pid == number:
            return stranger
        stranger.kill()
        stranger.wait()
    return None


@pytest.mark.parametrize("scan", ["shell", "python"])
def test_a_group_whose_number_a_stranger_took_is_not_killed(monkeypatch: pytest.MonkeyPatch, scan: str) -> None:
    # before: the watchdog killed every group it had been told of, so a hook's group whose processes had all
    # ended was killed by number at tamesu's end: by then the number could lead another program's group (a job
    # of the user's shell, a daemon), which died with tamesu
    token = secrets.token_hex(8)
    watchdog = children._start_watchdog(token) if scan == "shell" else _python_watchdog(token)
    monkeypatch.setattr(children, "_watchdog", watchdog)
    ours = subprocess.Popen(tied(["sleep", "60"]), start_new_session=True)
    children.own_group(ours.pid)  # as run_shell tells it of a hook's shell
    ours.kill()
    ours.wait()
    # start times count clock ticks (10 ms): Linux hands a number out again only after the others, far later
    time.sleep(0.05)
    stranger = _stranger_taking(ours.pid)
    if stranger is None:
        watchdog.stdin.close()  # type: ignore[union-attr]
        watchdog.wait(10)
        pytest.skip("could not give the freed number to another process (ns_last_pid, a busy machine)")
    try:
        kept = subprocess.Popen(tied(["sleep", "60"]), start_new_session=True)
        children.own_group(kept.pid)  # a group of ours that still lives is killed as before
        assert watchdog.stdin is not None
        watchdog.stdin.close()
        assert watchdog.wait(10) == 0
        assert kept.wait(5) == -9
        time.sleep(0.1)
        assert stranger.poll() is None, "the watchdog killed a group that was no longer tamesu's"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_hook_that_leaves_nothing_running_is_no_group_for_the_watchdog(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # before: every hook's group stayed on the watchdog's list to the end of the run (one per run of every test
    # with a before_each hook), each number free for another process as soon as its shell ended
    import asyncio

    from tamesu.runtime.shell import run_shell

    told = tmp_path / "told"
    listener = _listener(told)
    monkeypatch.setattr(children, "_watchdog", listener)
    done = asyncio.run(run_shell("echo $$", tmp_path, dict(os.environ), 10))
    left = asyncio.run(run_shell("sleep 60 & echo $$", tmp_path, dict(os.environ), 10))
    assert listener.stdin is not None
    listener.stdin.close()
    listener.wait(5)
    shell, agent = int(done.output), int(left.output)
    try:
        lines = told.read_text().split()
        assert [line.split(":")[0] for line in lines] == [str(shell), f"-{shell}", str(agent)], lines
    finally:
        os.killpg(agent, 9)
