"""A turn that went out on a kept-alive connection the agent had just closed is sent again once, on a new
connection, and the result says so (`tamesu._resend_http`); anything else that fails is still the turn's
failure, and nothing reaches the agent twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.closing_agent import ClosingAgent
from tamesu.conversation import TurnError, UserTurn
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.a2a._wire import Wire
from test_rest_target import events, make_session, opened


def _suite(folder: Path, url: str, turns: int) -> Path:
    steps = ", ".join(f"{{ say: 'step {n + 1}' }}" for n in range(turns))
    suite = folder / "suite.yaml"
    suite.write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat' }}\n"
        f"tests:\n  - name: talk\n    target: bot\n    scenario: {{ max_turns: {turns}, script: [ {steps} ] }}\n"
        "    assert: [ { contains: 'echo: step' } ]\n", encoding="utf-8")
    return suite


def _result(out: Path) -> dict[str, Any]:
    found = list(out.glob("*/*/*/run-1/result.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def test_a_turn_the_agent_dropped_with_its_kept_alive_connection_is_sent_again_and_said(tmp_path: Path,
                                                                                          tamesu) -> None:
    # the second request of every connection is read and dropped: turns 2 and 3 each go out on a connection
    # that is then closed, and each is sent once more on a new one
    with ClosingAgent(drop_nth=2) as agent:
        done = tamesu(["run", str(_suite(tmp_path, agent.url, 3)), "--out", str(tmp_path / "out")], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert agent.answered == ["step 1", "step 2", "step 3"]  # each turn answered once, in order
        assert agent.dropped == ["step 2", "step 3"]
        assert agent.connections == 3
    result = _result(tmp_path / "out")
    assert result["status"] == "passed"
    resent = [e["data"] for e in result["events"] if e["name"] == "resent"]
    assert [r["reason"] for r in resent] == [
        "the agent had closed the kept-alive connection (Server disconnected without sending a response.)"] * 2
    assert all(r["url"] == f"{agent.url}/chat" for r in resent)
    assert [t["agent"]["text"] for t in result["turns"]] == ["echo: step 1", "echo: step 2", "echo: step 3"]


@pytest.mark.asyncio
async def test_a_reset_kept_alive_connection_is_sent_again_too(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    with ClosingAgent(drop_nth=2, reset=True) as agent:
        async with opened({"url": f"{agent.url}/chat"}, session) as target:
            first = await target.send(UserTurn(text="one"))
            second = await target.send(UserTurn(text="two"))
        assert (first.text, second.text) == ("echo: one", "echo: two")
        assert agent.answered == ["one", "two"] and agent.dropped == ["two"]
    [resent] = events(session, "resent")
    assert resent["reason"] == "the agent had closed the kept-alive connection (Connection reset by peer)"


@pytest.mark.asyncio
async def test_a_request_dropped_on_a_new_connection_is_not_sent_again(tmp_path: Path) -> None:
    # nothing was kept alive: the agent itself ended the exchange, and a second copy could act twice
    session = make_session(tmp_path)
    with ClosingAgent(drop_nth=1) as agent:
        async with opened({"url": f"{agent.url}/chat"}, session) as target:
            with pytest.raises(TurnError, match="Server disconnected without sending a response"):
                await target.send(UserTurn(text="once"))
        assert agent.dropped == ["once"] and agent.answered == []
        assert agent.connections == 1
    assert events(session, "resent") == []


@pytest.mark.asyncio
async def test_the_a2a_targets_calls_go_through_the_same_resend(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    wire = Wire(session=session, connect=ConnectSpec(), turn_timeout=10, headers={}, what="a2a target")
    with ClosingAgent(drop_nth=2) as agent:
        try:
            answers = [await wire.http.post(f"{agent.url}/a2a", json={"message": m}) for m in ("one", "two")]
        finally:
            await wire.http.aclose()
        assert [a.json()["text"] for a in answers] == ["echo: one", "echo: two"]
        assert agent.answered == ["one", "two"] and agent.dropped == ["two"]
    [resent] = events(session, "resent")
    assert resent["url"] == f"{agent.url}/a2a"


@pytest.mark.asyncio
async def test_a_body_that_is_not_in_memory_is_not_sent_again(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    wire = Wire(session=session, connect=ConnectSpec(), turn_timeout=10, headers={}, what="a2a target")

    async def streamed() -> Any:
        yield b'{"message": "two"}'

    with ClosingAgent(drop_nth=2) as agent:
        try:
            await wire.http.post(f"{agent.url}/a2a", json={"message": "one"})
            with pytest.raises(httpx.RemoteProtocolError):
                await wire.http.post(f"{agent.url}/a2a", content=streamed(),
                                     headers={"Content-Length": "18"})
        finally:
            await wire.http.aclose()
        assert agent.answered == ["one"] and agent.dropped == ["two"]
    assert events(session, "resent") == []
