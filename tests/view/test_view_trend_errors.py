"""`tamesu view`'s metric trends leave out a run that errored, as `--baseline` does (`report.load.mean_metrics`):
it graded nothing, and its `turns: 0` drew the agent's conversations as a dip to none, where every run the agent
answered had one turn. Real runs against a local agent, then against a closed port, then the agent again."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ports import refused_port
from tamesu.net.serve import ThreadServer
from view.conftest import View, stored_run

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")


async def _chat(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})


def test_a_run_that_errored_is_no_point_of_a_metrics_trend(tmp_path: Path, serve: Callable[..., ThreadServer],
                                                          view: Callable[..., View]) -> None:
    server = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])]))
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot: { type: rest, url: '{{env.BOT_URL}}/chat', connect: { attempts: 1 } }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] }, assert: [ { contains: echo } ] }
""")
    for url, code in ((server.url, 0), (f"http://127.0.0.1:{refused_port()}", 3), (server.url, 0)):
        done = stored_run(tmp_path, {"BOT_URL": url})
        assert done.returncode == code, done.stdout + done.stderr
    page = html.unescape(httpx.get(f"{view(tmp_path).url}/test", params={"id": "suite/t"}, timeout=30).text)
    assert "<code>turns</code> is constant: 1 in all 2 runs" in page, page
    assert "turns over" not in page, page
