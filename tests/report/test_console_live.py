"""The console's live lines (a spinner and the elapsed time per running test, done/total): redrawn in place on a
terminal, as `tamesu run` in a pseudo-terminal shows; never drawn into a pipe, even with colour forced
(`--color always`, `FORCE_COLOR`: a CI log would keep every frame, 8 a second, as lines)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from lifeline import tied

TURN_S = 1.0
"""How long the agent takes to answer: a test of two turns runs for about 2 s, long enough for several
frames at 8 a second with nothing else happening, on a loaded machine too (in 0.8 s a starved run might draw
fewer than the 3 asked)."""

ERASE_LINE_UP = "\x1b[1A\x1b[2K"
"""What a redraw in place writes: the cursor up a line, the line erased."""

_RUNNING = re.compile(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] (s/one|s/two)  (\d+\.\d)s")


def _agent(serve: Any, turn_s: float = TURN_S) -> str:
    async def chat(request: Request) -> JSONResponse:
        await request.json()
        await asyncio.sleep(turn_s)
        return JSONResponse({"reply": "noted"})

    return str(serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url)


def _project(folder: Path, url: str) -> None:
    (folder / "s.tamesu.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }},"
        " response: { text: $.reply } }\ntests:\n"
        "  - { name: one, target: bot, scenario: { script: [{ say: a }, { say: b }] } }\n"
        "  - { name: two, target: bot, scenario: { script: [{ say: a }, { say: b }] } }\n", encoding="utf-8")


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_INTERACTIVE",
                                                              "TTY_COMPATIBLE", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", **extra)
    return env


def _in_a_terminal(folder: Path, env: dict[str, str], interrupt_when: Path | None = None) -> tuple[int, str]:
    """`tamesu run` with its stdin, stdout and stderr on a pseudo-terminal of 120 x 40; all it wrote there.
    `interrupt_when`: Ctrl-C twice (SIGINT) once that file exists."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(tied([*forked.tamesu_command(), "run", "s.tamesu.yaml", "--out", "out"]), cwd=folder,
                               env=env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    written = bytearray()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if interrupt_when is not None and interrupt_when.exists():
                process.send_signal(signal.SIGINT)  # an impatient user: twice, the second cancels everything
                time.sleep(0.05)
                process.send_signal(signal.SIGINT)
                interrupt_when = None
            ready, _, _ = select.select([leader], [], [], 0.05 if interrupt_when is not None else 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every holder of the terminal's other end has closed it
                break
            if not chunk:
                break
            written += chunk
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, written.decode("utf-8", "replace")


def test_a_terminal_sees_the_running_tests_redrawn_in_place_then_only_the_results(
        tmp_path: Path, serve: Any) -> None:
    _project(tmp_path, _agent(serve))
    code, screen = _in_a_terminal(tmp_path, _environment())
    assert code == 0, screen
    elapsed = {name: {float(s) for n, s in _RUNNING.findall(screen) if n == name} for name in ("s/one", "s/two")}
    # the first test runs alone (parallel 1) for two turns: frames drawn by the clock alone, not by events
    assert len(elapsed["s/one"]) >= 3 and max(elapsed["s/one"]) >= TURN_S, screen
    assert elapsed["s/two"], screen
    assert screen.count(ERASE_LINE_UP) >= 5, screen  # each frame replaces the one before
    assert "0/2 done" in screen and "1/2 done" in screen
    # the results stay; the live lines go with the run (the last frame is erased before the summary)
    assert re.search(r"PASS\S*  s/one", screen) and re.search(r"PASS\S*  s/two", screen), screen
    summary = screen.index("2 passed, 0 failed")
    assert not _RUNNING.search(screen[summary:]) and "done" not in screen[summary:], screen[summary:]


@pytest.mark.parametrize(("options", "env", "terminal"), [
    (["--color", "always"], {}, False),
    ([], {"FORCE_COLOR": "1"}, False),
    ([], {"TTY_INTERACTIVE": "0"}, True),  # rich's own switch: a terminal no one watches
], ids=["--color always", "FORCE_COLOR", "TTY_INTERACTIVE=0"])
def test_colour_forced_into_a_log_draws_no_frames(tmp_path: Path, serve: Any, tamesu: Any, options: list[str],
                                                  env: dict[str, str], terminal: bool) -> None:
    _project(tmp_path, _agent(serve, turn_s=0.15))  # 0.6 s of running tests: frames every 0.125 s, were any drawn
    if terminal:
        code, written = _in_a_terminal(tmp_path, _environment(**env))
    else:
        # NO_COLOR empty is unset (the fixture sets it for every other test)
        done = tamesu(["run", "s.tamesu.yaml", "--out", "out", *options], cwd=tmp_path,
                      env=_environment(NO_COLOR="", **env))
        code, written = done.returncode, done.stdout + done.stderr
    assert code == 0, written
    assert "\x1b[1;32mPASS\x1b[0m  s/one" in written, written  # coloured, as asked
    assert not _RUNNING.search(written) and ERASE_LINE_UP not in written and "done" not in written, written


def test_ctrl_c_after_the_tests_still_shows_the_cursor_again(tmp_path: Path, serve: Any) -> None:
    # Ctrl-C twice while after_all hooks ran: the run never reached its summary, the live region stayed (and with
    # it the terminal's hidden cursor after tamesu had gone)
    _project(tmp_path, _agent(serve, turn_s=0.0))
    suite = tmp_path / "s.tamesu.yaml"
    suite.write_text('hooks:\n  after_all: ["touch hook-started; sleep 30"]\n' + suite.read_text(), encoding="utf-8")
    code, screen = _in_a_terminal(tmp_path, _environment(), interrupt_when=tmp_path / "hook-started")
    # the live region also held sys.stderr (rich's proxy): the interrupted note was a traceback and exit 1
    assert code == 130 and "Traceback" not in screen, screen[-2000:]
    hidden = screen.index("\x1b[?25l")
    assert "\x1b[?25h" in screen[hidden:], screen[-400:]
    assert "interrupted by SIGINT: 2 of 2 planned tests finished" in screen, screen[-400:]


def test_verbose_into_a_log_says_each_run_as_it_starts(tmp_path: Path, serve: Any, tamesu: Any) -> None:
    # a log has no live lines: `-v` writes one `RUN` line as each run starts instead (docs/cli.md), and only `-v`
    _project(tmp_path, _agent(serve, turn_s=0.05))
    quiet = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    verbose = tamesu(["run", "s.tamesu.yaml", "--out", "out", "-v"], cwd=tmp_path)
    assert quiet.returncode == verbose.returncode == 0, quiet.stdout + verbose.stdout
    assert "RUN" not in quiet.stdout, quiet.stdout
    lines = verbose.stdout.splitlines()
    for test in ("s/one", "s/two"):
        started = lines.index(f"  RUN  {test}")
        assert started < next(n for n, line in enumerate(lines) if line.startswith(f"PASS  {test}")), lines
