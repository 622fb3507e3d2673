"""A one-turn test's latency is its own p50, p95 and max: `--baseline` and `tamesu view`'s Compare listed
`turn_latency_ms`, `turn_latency_ms_p50` and `turn_latency_ms_p95` as three lines of one move (only `_max` was
folded). Each figure that equals the plain metric in both runs is said by the plain metric's line."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from view.conftest import stored_run

SUITE = """\
targets:
  bot: {{ type: rest, url: "{url}/chat", response: {{ text: $.text }} }}
tests:
  - {{ name: one, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: hello }} ] }}
  - name: three
    target: bot
    scenario: {{ script: [ {{ say: hi }}, {{ say: slow }}, {{ say: hi }} ] }}
    assert: [ {{ contains: hello }} ]
"""


class SlowAgent:
    """Answers "hello" after `delay` seconds; a message with "slow" in it waits `slow` seconds instead."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.slow = 0.0

    async def chat(self, request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        await asyncio.sleep(self.slow if "slow" in message else self.delay)
        return JSONResponse({"text": "hello"})


_NAMED = re.compile(r"s/(one|three)\b(?:(?!s/(?:one|three)\b).){0,200}?turn_latency_ms(_p\d+|_max)? ", re.S)
"""A test and the latency figure its metric change names (the view's table puts them in cells side by side)."""


def _run(root: Path, *extra: str) -> str:
    done = stored_run(root, None, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_one_turn_latency_moved_is_one_line_in_baseline_and_compare(tmp_path: Path, serve, view: Any) -> None:
    agent = SlowAgent()
    server = serve(Starlette(routes=[Route("/chat", agent.chat, methods=["POST"])]))
    (tmp_path / "s.tamesu.yaml").write_text(SUITE.format(url=server.url))
    _run(tmp_path)
    [before] = list((tmp_path / "out").iterdir())
    agent.delay, agent.slow = 0.4, 1.5  # a move no loaded machine makes, past MIN_MS and the tolerance
    console = _run(tmp_path, "--baseline", str(before))
    served = view(tmp_path)
    page = html.unescape(httpx.get(f"{served.url}/compare", timeout=30).text)
    for said in (console, page):
        named = [(m.group(1), m.group(2) or "") for m in _NAMED.finditer(said)]
        # one turn: one line; three turns, one slow: the median and p95 are not the worst turn, said on their own
        assert sorted(named) == [("one", ""), ("three", ""), ("three", "_p50"), ("three", "_p95")], said
