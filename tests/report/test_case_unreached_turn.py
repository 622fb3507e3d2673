"""A multi-turn JSONL case whose conversation ended before a turn its assertions are on (a local REST agent
that hands off on turn 1): the console and the `-o` record say why the case failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _handing_off() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        said = (await request.json()).get("message", "")
        if "person" in said:
            return JSONResponse({"reply": "Let me get a colleague.", "handoff": {"queue": "billing"}})
        return JSONResponse({"reply": f"echo: {said}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_a_turn_that_never_happened_is_the_cases_reason(serve: Any, tamesu: Any, tmp_path: Path) -> None:
    # before: `└─ Result: FAILED` and nothing else, even with -v; the record had no error either
    url = serve(_handing_off()).url
    handoff = "{ json_path: $.handoff, to: $.handoff.queue }"
    (tmp_path / "tamesu.yaml").write_text(f'targets:\n  bot: {{ type: rest, url: "{url}/chat", handoff: {handoff} }}\n')
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "H3", "turns": [
        {"input": "a person please"},
        {"input": "ORD-1001?", "assertions": [{"type": "contains", "value": "shipped"}]}]}) + "\n")
    reason = 'contains "shipped": turn 2 did not happen (the conversation had 1 turn)'
    for verbose in ([], ["-v"]):
        done = tamesu(["test", "-i", "c.jsonl", "-n", "bot", "--out", "runs", "-o", "r.jsonl", *verbose], cwd=tmp_path)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = [line.strip() for line in done.stdout.splitlines()]
        at = lines.index("└─ Result: FAILED")
        assert lines[at + 1] == f"Reason: {reason}", done.stdout
        [record] = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
        assert record["error"] == reason and record["end_reason"] == "handoff" and record["total_turns"] == 1
