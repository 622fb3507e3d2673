"""`-n`: a target of tamesu.yaml by name, or a URL: an A2A agent card there makes it an A2A target (run here
against the real A2A test agents), anything else a rest target."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agents.expense_agent import run_test
from sdk_groups import IN_PROCESS_A2A_SERVER
from tamesu.errors import ConfigError
from tamesu.net.serve import ThreadServer
from tamesu.plan import Project, load_project
from tamesu.plan import targets as plan_targets
from tamesu.plan.targets import TargetProblem, resolve
from tamesu.suite.secrets import Secrets

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents


def _project(tmp_path: Path, text: str) -> Project:
    (tmp_path / "tamesu.yaml").write_text(text)
    return load_project(tmp_path / "tamesu.yaml", tmp_path)


async def test_a_target_by_name_or_the_only_one(tmp_path: Path) -> None:
    project = _project(tmp_path, "targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n")
    named, _ = await resolve("bot", project, Secrets([]))
    only, _ = await resolve(None, project, Secrets([]))
    assert (named.name, named.spec.type, only.name, named.about) == ("bot", "rest", "bot", "bot (rest)")
    with pytest.raises(TargetProblem, match="no target named 'shop' \\(targets: bot\\)"):
        await resolve("shop", project, Secrets([]))


async def test_a_template_that_cannot_be_filled_is_an_error_at_its_place(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOWHERE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # positions name files relative to where tamesu runs
    project = _project(tmp_path, "targets:\n  bot:\n    type: rest\n    url: \"{{env.NOWHERE_URL}}/chat\"\n"
                                 "    headers: { X-Key: \"{{vars.key}}\" }\n")
    with pytest.raises(ConfigError) as caught:
        await resolve("bot", project, Secrets([]))
    assert [str(p) for p in caught.value.problems] == [
        "tamesu.yaml:4:10: targets.bot.url: environment variable NOWHERE_URL is not set",
        "tamesu.yaml:5:23: targets.bot.headers.X-Key: {{vars.key}} is not available to `tamesu test`",
    ]


async def test_a_grpc_url_is_a_grpc_target_and_other_urls_are_said(tmp_path: Path) -> None:
    # before: `-n grpc://host:port` (and AgentSession.open) said "no target named 'grpc://...'; or give a URL"
    from tamesu.testing import AsyncAgentSession
    from turn_agents import said, serving

    project = _project(tmp_path, "targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n")
    async with serving(lambda text: said(f"you said {text}")) as url:
        found, _ = await resolve(url, project, Secrets([]))
        assert (found.spec.type, found.about) == ("grpc", f"{url} (grpc)")
        async with await AsyncAgentSession.open(url, project=tmp_path) as agent:
            assert (await agent.send("hello")).text == "you said hello"
    urls = "http(s):// for a rest or A2A agent, grpc(s):// for one with tamesu's turn API"
    with pytest.raises(TargetProblem) as other:
        await resolve("ws://127.0.0.1:9/chat", project, Secrets([]))
    assert str(other.value) == f"-n ws://127.0.0.1:9/chat: not a URL tamesu can test: give {urls}, or a target of " \
                               "tamesu.yaml"
    with pytest.raises(TargetProblem) as unknown:
        await resolve("shop", project, Secrets([]))
    assert str(unknown.value) == f"-n shop: no target named 'shop' (targets: bot); or give a URL ({urls})"


def _card_app(card: object) -> Starlette:
    return Starlette(routes=[Route("/.well-known/agent-card.json", lambda _: JSONResponse(card))])


async def test_a_url_without_a_card_is_a_rest_target(tmp_path: Path) -> None:
    server = ThreadServer(Starlette()).start()
    try:
        found, _ = await resolve(f"{server.url}/chat", _project(tmp_path, "{}\n"), Secrets([]))
    finally:
        server.stop()
    assert found.spec.type == "rest" and found.about == f"{server.url}/chat (rest)"


async def test_a_card_place_that_never_finishes_answering_is_given_up_in_time(tmp_path: Path) -> None:
    # before: `tamesu test -n URL` waited for ever on a server that answered 200 and then a byte now and then
    # (httpx's timeout is per read); a card place that answers past the size of any card is not one either
    async def trickle(_: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield b"{"
            while True:
                await asyncio.sleep(0.2)
                yield b" "
        return StreamingResponse(body(), media_type="application/json")

    async def huge(_: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield b'{"name": "x", "skills": [], "pad": "'
            while True:
                yield b"x" * 65_536
                await asyncio.sleep(0)
        return StreamingResponse(body(), media_type="application/json")

    for app in (Starlette(routes=[Route("/{path:path}", trickle)]), Starlette(routes=[Route("/{path:path}", huge)])):
        server = ThreadServer(app).start()
        started = time.monotonic()
        try:
            async with asyncio.timeout(60):
                found, _ = await resolve(f"{server.url}/chat", _project(tmp_path, "{}\n"), Secrets([]))
        finally:
            server.stop()
        assert found.spec.type == "rest" and time.monotonic() - started < plan_targets.CARD_TIMEOUT + 10


async def test_a_card_without_the_a2a_target_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_targets, "a2a_available", lambda: False)
    server = ThreadServer(_card_app({"name": "Shop", "url": "http://x/a2a", "skills": []})).start()
    try:
        with pytest.raises(TargetProblem) as caught:
            await resolve(server.url, _project(tmp_path, "{}\n"), Secrets([]))
    finally:
        server.stop()
    assert str(caught.value) == (f"an A2A agent card is served at {server.url}/.well-known/agent-card.json, but the "
                                 "a2a target is not available in this version of tamesu")


@pytest.fixture(scope="module")
def a2a_agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as agents:
        yield agents


@IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side
def test_a_multi_turn_case_against_an_a2a_agent_found_by_its_card(a2a_agents: A2AAgents, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(case) for case in [
        {"id": "order", "turns": [{"input": "order status please",
                                   "assertions": [{"type": "contains", "value": "Which order"}]},
                                  {"input": "ORD-1"}],
         "final_assertions": [{"type": "json_path", "path": "$.status.state", "value": "completed"}]},
        {"id": "ask", "turns": [{"input": "order"}]},
    ]))
    out = tmp_path / "records.jsonl"
    url = a2a_agents.urls["basic"]
    done = run_test(["-i", str(cases), "-n", url, "-o", str(out), "--out", str(tmp_path)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ℹ Agent: {url} (a2a, card {url}/.well-known/agent-card.json)" in done.stdout
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    order = records["order"]
    assert order["status"] == "passed"
    assert [(t["awaiting_input"], t["awaiting_reason"]) for t in order["turns"]] == [
        (True, "input_required_state"), (False, "task_completed")]
    assert records["ask"]["status"] == "skipped"
    assert records["ask"]["missing_input"]["question"] == "Which order number?"
