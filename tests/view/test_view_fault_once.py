"""`tamesu view`'s test history says a run's fault reason once, as the HTML and JUnit reports do
(`report.words.fault_said_below`): an unreachable agent's error was written, then again as `fault: environment:
<the error>`; a failed check's line, then again after `fault: agent:` above the verdicts. A real run against a
local agent and a closed port."""

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


def test_a_runs_fault_is_said_with_its_reason_once(tmp_path: Path, serve: Callable[..., ThreadServer],
                                                   view: Callable[..., View]) -> None:
    server = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])]))
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{server.url}/chat' }}
  gone: {{ type: rest, url: 'http://127.0.0.1:{refused_port()}/chat', connect: {{ attempts: 1 }} }}
tests:
  - {{ name: fails, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: nope }} ] }}
  - {{ name: unreachable, target: gone, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    done = stored_run(tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    url = view(tmp_path, "--no-open").url

    def page(test: str) -> str:
        return html.unescape(httpx.get(f"{url}/test", params={"id": f"suite/{test}"}, timeout=30).text)

    gone = page("unreachable")
    assert gone.count("cannot reach") == 1 and "<p>fault: <b>environment</b></p>" in gone, gone
    failed = page("fails")
    assert failed.count('expected the agent to say "nope"') == 1 and "<p>fault: <b>agent</b></p>" in failed, failed
