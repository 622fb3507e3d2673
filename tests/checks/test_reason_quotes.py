"""What a failed check quotes of the agent, in the one line every report shows (console, JUnit, JSON, Markdown):
each turn quoted on its own, separated by ` / `, cut at a turn's end or with `…`, never longer than a few hundred
characters. Before, a whole-transcript `contains` quoted the turns joined by a literal `\\n` and cut them mid-word
after 120 characters (the closing quote lost), and a 50 KB answer was quoted as far as the check's own limit went.
A real agent on 127.0.0.1 answers each message with what the test planned for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from report_fixtures import only_run_dir
from tamesu.net.serve import ThreadServer

HUGE = "lorem ipsum dolor " * 3000  # 54 KB in one answer

ANSWERS = {
    "hello": "Hello!\nHow can I help?",
    "order": "Your order ships Friday.\n\nAnything else?",
    "huge": HUGE,
}


def _agent() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        return JSONResponse({"text": ANSWERS.get(message, f"about {message}: {'more words ' * 12}")})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _failures(tmp_path: Path, serve: Callable[[Any], ThreadServer], tests: list[dict[str, Any]]) -> dict[str, str]:
    """Each test's `failure` line in report.json, after a real run."""
    server = serve(_agent())
    target = {"type": "rest", "url": f"{server.url}/chat", "response": {"text": "$.text"}}
    (tmp_path / "s.yaml").write_text(json.dumps({"name": "s", "targets": {"bot": target}, "tests": tests}))
    done = run_tamesu(["run", "s.yaml", "--out", "out", "--report", "json"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((only_run_dir(tmp_path / "out") / "report.json").read_text(encoding="utf-8"))
    return {t["test"].removeprefix("s/"): t["failure"] for t in report["tests"]}


def _script(*messages: str) -> dict[str, Any]:
    return {"script": [{"say": m} for m in messages]}


def test_a_whole_transcript_is_quoted_turn_by_turn_on_one_line(tmp_path: Path,
                                                                serve: Callable[[Any], ThreadServer]) -> None:
    failures = _failures(tmp_path, serve, [
        {"name": "two", "scenario": _script("hello", "order"), "assert": [{"contains": "refund"}]},
        {"name": "many", "scenario": _script("hello", "order", "a", "b", "c", "d", "e"),
         "assert": [{"contains": "refund"}]},
        {"name": "huge", "scenario": _script("hello", "huge"), "assert": [{"contains": "refund"}]},
        {"name": "first huge", "scenario": _script("huge", "hello"), "assert": [{"contains": "refund"}]},
    ])
    assert failures["two"] == ('contains: expected the agent to say "refund"; not found in 2 turn(s) of agent text: '
                               '"Hello! How can I help?" / "Your order ships Friday. Anything else?"')
    many = failures["many"]
    assert "\\n" not in many and '"Hello! How can I help?" / "Your order ships Friday. Anything else?" / ' in many
    # whole turns up to the bound, then how many were left out
    assert many.endswith('more words" / … and 4 more turns'), many
    assert len(many) < 450, len(many)
    # a huge answer after a short one: cut at the turn's boundary; first: cut within it, inside its quotes
    assert failures["huge"].endswith('"Hello! How can I help?" / … and 1 more turn'), failures["huge"]
    first = failures["first huge"]
    assert first.endswith('lorem…" / … and 1 more turn'), first[-80:]
    assert 300 < len(first) < 450, len(first)


def test_a_not_contains_quotes_the_turn_it_found_on_one_line(tmp_path: Path,
                                                             serve: Callable[[Any], ThreadServer]) -> None:
    failures = _failures(tmp_path, serve, [
        {"name": "found", "scenario": _script("hello", "order"), "assert": [{"not_contains": "Friday"}]},
    ])
    assert failures["found"] == ('not_contains: expected the agent never to say "Friday"; '
                                 'turn 2 said: "Your order ships Friday. Anything else?"')
