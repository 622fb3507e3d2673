"""`max_concurrent`: a model server that answers one request at a time (Ollama's default on a small machine,
llama.cpp's one slot) and many tests at once. Without a limit every request waits in the server's queue with
its timeout running; with one, the wait is tamesu's and no part of the timeout."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import OpenAIServer
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
TESTS = 6


class OneAtATime:
    """An ASGI wrapper that answers one request at a time, each taking `seconds`, and counts how many requests
    were at the server at once (answered or waiting)."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds
        self.lock: asyncio.Lock | None = None
        self.here = self.most = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await self.app(scope, receive, send)
        self.lock = self.lock or asyncio.Lock()
        self.here += 1
        self.most = max(self.most, self.here)
        try:
            async with self.lock:
                await asyncio.sleep(self.seconds)
                await self.app(scope, receive, send)
        finally:
            self.here -= 1


def test_max_concurrent_keeps_the_queue_out_of_the_timeout(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": "Your refund RF-889 was issued."})

    desk = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    judge = OpenAIServer()  # answers every judge with a passing verdict
    slot = OneAtATime(judge.app, 0.4)
    url = judge.base_url(serve(slot).url)
    tests = "".join(f"  - {{ name: t{n}, target: desk, scenario: {{ script: [ {{ say: hi }} ] }}, "
                    "assert: [ { judge: The agent gives a reference } ] }\n" for n in range(TESTS))
    (tmp_path / "suite.tamesu.yaml").write_text(
        f'targets:\n  desk: {{ type: rest, url: "{desk}/chat" }}\ntests:\n{tests}')

    def run(limit: str) -> tuple[int, list[str]]:
        (tmp_path / "tamesu.yaml").write_text(
            "cache: { mode: off }\nmodels:\n"
            f"  judge: {{ provider: openai, model: test-model, base_url: '{url}', timeout: 1500ms, "
            f"max_retries: 0{limit} }}\n")
        result = tamesu(["run", "--out", "out", "--parallel", str(TESTS)], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
        newest = sorted((tmp_path / "out").iterdir())[-1]
        lines = [json.loads(x) for x in (newest / "results.jsonl").read_text().splitlines()]
        return result.returncode, sorted(line["status"] for line in lines)

    # six judges at once at a server of one slot, 0.4 s each: the fourth waits 1.6 s in its queue, past its 1.5 s
    code, statuses = run("")
    assert code == 3 and "error" in statuses and slot.most == TESTS
    deadline = time.monotonic() + 10
    while slot.here and time.monotonic() < deadline:  # the requests that timed out are still in its queue
        time.sleep(0.05)
    slot.most = 0
    code, statuses = run(", max_concurrent: 1")
    assert (code, statuses) == (0, ["passed"] * TESTS)
    assert slot.most == 1  # one request at the server at a time: the others waited in tamesu
