"""`session.open` given up at its timeout says what came: nothing, or its status and not its whole body. A target
that is not rest (its own client) and the rest target (aiohttp directly), against real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from conftest import run_tamesu

_HELD = 10.0
"""How long each answer is held: far past the 1 s timeout, so a loaded machine does not see it end."""


async def _held(request: Request) -> None:
    deadline = time.monotonic() + _HELD
    while time.monotonic() < deadline and not await request.is_disconnected():
        await asyncio.sleep(0.05)


async def _silent(request: Request) -> Response:
    await _held(request)
    return Response(b'{"token": "late"}', media_type="application/json")


def _answering(trickle: bool) -> Any:
    async def answer(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b'{"token": "t-1"'  # the status and headers are sent with the first piece
            deadline = time.monotonic() + _HELD
            while time.monotonic() < deadline:
                if trickle:
                    yield b" "
                await asyncio.sleep(0.05)
            yield b"}"
        return StreamingResponse(body(), media_type="application/json")
    return answer


@pytest.fixture
def opener(serve: Any) -> str:
    return serve(Starlette(routes=[Route("/silent", _silent, methods=["POST"]),
                                   Route("/trickle", _answering(trickle=True), methods=["POST"]),
                                   Route("/stall", _answering(trickle=False), methods=["POST"])])).url


_MODEL = """
targets:
  bot: { type: model, model: bot, session: { open: { url: "{{env.OPEN_URL}}", timeout: 1s, capture: { t: $.token } } } }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }
"""
_REST = """
targets:
  bot: { type: rest, url: "{{env.OPEN_URL}}", session: { open: { url: "{{env.OPEN_URL}}", timeout: 1s,
         capture: { t: $.token } } } }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }
"""


@pytest.mark.parametrize("suite", [_MODEL, _REST], ids=["model target", "rest target"])
@pytest.mark.parametrize(("path", "why"), [
    ("/silent", "no answer within 1s"),
    # before: "no answer within 1s (session.open.timeout)", of a server whose HTTP 200 had come at once
    ("/trickle", "answered HTTP 200 but did not send its whole body within 1s"),
    ("/stall", "answered HTTP 200 but did not send its whole body within 1s"),
])
def test_a_session_open_given_up_says_whether_its_answer_began(tmp_path: Path, opener: str, suite: str, path: str,
                                                                why: str) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(suite)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"OPEN_URL": opener + path})
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    kind = "model" if suite is _MODEL else "rest"
    assert f"{kind} target bot: session.open POST {opener}{path}: {why} (session.open.timeout)" in said, said
    # given up at the timeout, not when the answer ended (the run's own time: the first tamesu a test worker
    # starts imports its modules for seconds)
    took = re.search(r"ERR\s+s/t\s+([0-9.]+)s", said)
    assert took is not None and float(took.group(1)) < _HELD / 2, said
