"""`tamesu run -v --parallel 1` reads in order: each test's RUN lines, then its verdict, then the next test's,
against a local REST agent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu


def _agent(serve: Any) -> str:
    async def chat(request: Request) -> JSONResponse:
        await request.json()
        await asyncio.sleep(0.05)
        return JSONResponse({"reply": "hello"})

    return str(serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url)


def test_one_at_a_time_each_verdict_comes_before_the_next_run(tmp_path: Path, serve: Any) -> None:
    # before: a run gave its slot back before its test was recorded, so the next test's RUN line came before
    # the last one's PASS ("RUN a, RUN b, PASS a, ...")
    url = _agent(serve)
    (tmp_path / "s.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }},"
        " response: { text: $.reply } }\n"
        "tests:\n"
        "  - { name: a, target: bot, scenario: { script: [ { say: hi } ] }, assert: [ { contains: hello } ] }\n"
        "  - { name: b, target: bot, repeat: 2, scenario: { script: [ { say: hi } ] },"
        " assert: [ { contains: hello } ] }\n"
        "  - { name: c, target: bot, skip: not today, scenario: { script: [ { say: hi } ] } }\n"
        "  - { name: d, target: bot, scenario: { script: [ { say: hi } ] }, assert: [ { contains: nope } ] }\n",
        encoding="utf-8")
    done = run_tamesu(["run", "s.yaml", "--out", "out", "-v", "--parallel", "1"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    said = [line.split()[:2] for line in done.stdout.splitlines()
            if line.split()[:1] in (["RUN"], ["PASS"], ["FAIL"], ["SKIP"])]
    assert said == [["RUN", "s/a"], ["PASS", "s/a"], ["RUN", "s/b"], ["RUN", "s/b"], ["PASS", "s/b"],
                    ["SKIP", "s/c"], ["RUN", "s/d"], ["FAIL", "s/d"]], done.stdout
