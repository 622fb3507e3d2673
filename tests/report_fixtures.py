"""A local agent and a suite whose run has every status, for the report, baseline and sharding tests.

`report_suite()` writes a suite where one test passes with tool calls, one fails (and its judge gives
evidence), one is quarantined and fails, one is skipped, one cannot reach its agent (error), one has two
cases and one repeats three times. The failing answer carries an <img> tag and URLs as plain text, so the
HTML report's escaping and its "no network" promise are tested on hostile words.
"""

from __future__ import annotations

import json
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ports import refused_port


class ReportAgent:
    def __init__(self) -> None:
        self.leaks: list[str] = []
        self.leak_url = ""
        """Set by the test: a URL on this server the failing answer names; any request to it is a leak."""

    async def chat(self, request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        if message.startswith("refund"):
            return JSONResponse({"text": f'I can\'t do that. <img src="{self.leak_url}"> See https://example.invalid/help',
                                 "tool_calls": []})
        if message.startswith("flaky"):
            return JSONResponse({"text": "sometimes"})
        tools = [{"name": "lookup", "args": {"q": message}, "result": {"found": True}}]
        if "cancel" in message:
            tools.append({"name": "cancel_order", "args": {"id": "ORD-1"}, "result": {"ok": True}})
        return JSONResponse({"text": f"echo: {message}", "tool_calls": tools})

    async def leak(self, request: Request) -> Response:
        self.leaks.append(str(request.url))
        return Response(b"", media_type="image/png")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/chat", self.chat, methods=["POST"]), Route("/leak", self.leak)])


def dead_url() -> str:
    return f"http://127.0.0.1:{refused_port()}"


FAKE_JUDGE = [
    {"rubric": "(?i)polite", "transcript": "(?i)can't do that", "pass": False, "reason": "the agent refuses curtly",
     "evidence": ["I can't do that."]},
    {"rubric": "(?i)polite", "pass": True, "reason": "polite enough"},
]


def report_suite(folder: Path, url: str) -> Path:
    suite = {
        "name": "shop",
        "models": {"judge": {"provider": "fake", "rules": FAKE_JUDGE}},
        "targets": {
            "bot": {"type": "rest", "url": f"{url}/chat", "connect": {"attempts": 1, "backoff": "10ms"},
                    "response": {"text": "$.text", "tool_calls": "$.tool_calls"}},
            "down": {"type": "rest", "url": f"{dead_url()}/chat",
                     "connect": {"attempts": 1, "backoff": "10ms", "timeout": "2s"}},
        },
        "tests": [
            {"name": "greets", "target": "bot", "tags": ["smoke"],
             "scenario": {"script": [{"say": "hello"}, {"say": "cancel ORD-1"}]},
             "assert": [{"contains": "echo: hello"}, {"tool_called": {"name": "lookup"}}]},
            {"name": "refund", "target": "bot",
             "scenario": {"script": [{"say": "refund please"}]},
             "assert": [{"contains": "refund issued"}, {"judge": "The agent is polite"}]},
            {"name": "flaky", "target": "bot", "quarantine": {"reason": "SUP-412 flaky"},
             "scenario": {"script": [{"say": "flaky"}]}, "assert": [{"contains": "always"}]},
            {"name": "later", "target": "bot", "skip": "waiting for the billing API",
             "scenario": {"script": [{"say": "hi"}]}},
            {"name": "unreachable", "target": "down", "scenario": {"script": [{"say": "hi"}]}},
            {"name": "lookups", "target": "bot",
             "cases": [{"name": "one", "vars": {"q": "one"}}, {"name": "two", "vars": {"q": "two"}}],
             "scenario": {"script": [{"say": "look {{vars.q}}"}]}, "assert": [{"contains": "{{vars.q}}"}]},
            {"name": "repeated", "target": "bot", "repeat": 3,
             "scenario": {"script": [{"say": "hello"}]}, "assert": [{"contains": "hello"}]},
        ],
    }
    path = folder / "shop.yaml"
    # JSON is YAML: the suite is written as data, so no test depends on YAML quoting
    path.write_text(json.dumps(suite, indent=2), encoding="utf-8")
    return path


def only_run_dir(out: Path) -> Path:
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]
