"""Many conversations at once under a low soft limit on open files (Linux starts sessions at 1,024, macOS at
256): tamesu raises it to the hard limit as a run starts, as Go's runtime does; a hard limit too low for the run
is one warning before any test starts."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

AT_ONCE = 150
"""Conversations in flight together, each holding its connection to the agent for HOLD_S."""

HOLD_S = 1.0

LOW = 128
"""A soft limit below what AT_ONCE conversations hold (tamesu alone opens some 30 files before its first test)."""


def _project(folder: Path, serve: Any) -> None:
    async def chat(request: Request) -> JSONResponse:
        await request.json()
        await asyncio.sleep(HOLD_S)  # every conversation's connection open at the same time
        return JSONResponse({"reply": "noted"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    tests = "".join(f"  - {{ name: t{n}, target: bot, scenario: {{ script: [{{ say: hi }}] }}, "
                    "assert: [{ contains: noted }] }\n" for n in range(AT_ONCE))
    (folder / "s.tamesu.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }},"
        f" response: {{ text: $.reply }} }}\ntests:\n{tests}", encoding="utf-8")


def _run_limited(folder: Path, soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    """A plain `python -m tamesu run` whose limit on open files is (soft, hard) from its start (a fork of the
    tests' warm process would carry that process's limit)."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tamesu", "run", "s.tamesu.yaml", "--out", "out", "--parallel",
                           str(AT_ONCE)], cwd=folder, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=limited)


def _statuses(folder: Path) -> dict[str, int]:
    (run,) = (folder / "out").iterdir()
    counts: dict[str, int] = {}
    for line in (run / "results.jsonl").read_text().splitlines():
        status = json.loads(line)["status"]
        counts[status] = counts.get(status, 0) + 1
    return counts


def test_a_low_soft_limit_is_raised_to_the_hard_one(tmp_path: Path, serve: Any) -> None:
    _project(tmp_path, serve)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or hard > 4 * AT_ONCE, f"this machine's hard limit is {hard}"
    done = _run_limited(tmp_path, LOW, hard)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "warning" not in done.stdout + done.stderr
    assert _statuses(tmp_path) == {"passed": AT_ONCE}


def test_a_hard_limit_too_low_for_the_run_is_said_before_it_starts(tmp_path: Path, serve: Any) -> None:
    _project(tmp_path, serve)
    done = _run_limited(tmp_path, LOW, LOW)
    needed = 64 + 4 * AT_ONCE
    warning = (f"warning: {AT_ONCE} conversations at once may need about {needed:,} open files and this system "
               f"allows {LOW} (`ulimit -n`): tests past it fail with 'Too many open files'; raise the limit or "
               "lower --parallel")
    assert warning in done.stdout, done.stdout[-3000:] + done.stderr
    assert done.stdout.index(warning) < done.stdout.index("tamesu running")  # before any test
    assert "Traceback" not in done.stdout + done.stderr
