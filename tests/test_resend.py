"""A turn that went out on a kept-alive connection the agent had just closed is sent again once, on a new
connection, and the result says so (`tamesu.net.resend`); anything else that fails is still the turn's
failure, and nothing reaches the agent twice. The same for the mcp target over streamable HTTP (httpx2, the
MCP SDK's client: the real MCP test server behind the dropping agent as a reverse proxy), for a remote agent's
forward to a real agent, and for a scripted remote agent's push notifications to the caller's listener."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import SendMessageConfiguration

from agents.closing_agent import ClosingAgent
from tamesu.conversation import TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.a2a._wire import Wire
from test_mcp_target import PYTHON, SERVERS, calls_logged
from test_mcp_target import make_session as make_mcp_session
from test_mcp_target import opened as opened_mcp
from test_remote_agents import BILLING, agents, call, connect, request
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


# -- the mcp target over streamable HTTP ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The MCP test server over HTTP, one for the module (its start imports the SDK), and the log of the tool
    calls that reached it."""
    log = tmp_path_factory.mktemp("mcp") / "calls.log"
    process = subprocess.Popen([PYTHON, str(SERVERS), "--http", "--port", "0", "--log", str(log)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the server prints its address before it serves
        match = re.search(r"listening on (http://[^/\s]+)", line)
        assert match, f"the MCP server did not start: {line!r}"
        yield match.group(1), log
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "reset"])
@pytest.mark.asyncio
async def test_an_mcp_call_the_server_dropped_with_its_kept_alive_connection_is_sent_again_once(
        tmp_path: Path, mcp_server: tuple[str, Path], reset: bool) -> None:
    origin, log = mcp_server
    before = len(calls_logged(log))
    session = make_mcp_session(tmp_path)
    # the second request of every connection is read and dropped, never forwarded: tools/list (the start's
    # second request) and each tools/call go out on a kept-alive connection that is then closed
    with ClosingAgent(drop_nth=2, reset=reset, forward_to=origin) as proxy:
        async with opened_mcp(session, type="mcp", url=f"{proxy.url}/mcp") as target:
            order = await target.send(UserTurn(text="where is ORD-1001"))
            docs = await target.send(UserTurn(text="returns"))
        assert proxy.dropped == ["tools/list", "tools/call", "tools/call"]
        assert proxy.answered.count("tools/call") == 2  # each call reached the server once
    assert order.tool_calls[0].result["status"] == "shipped"
    assert "30 days" in docs.tool_calls[0].result
    assert calls_logged(log)[before:] == ["get_order", "search_docs"]
    resent = events(session, "resent")
    words = "Connection reset by peer" if reset else "Server disconnected without sending a response."
    assert resent == [{"reason": f"the agent had closed the kept-alive connection ({words})",
                       "url": f"{proxy.url}/mcp", "method": method} for method in proxy.dropped]
    assert [e["outcome"] for e in events(session, "tool_result")] == ["ok", "ok"]


@pytest.mark.asyncio
async def test_an_mcp_request_dropped_on_a_new_connection_is_not_sent_again(
        tmp_path: Path, mcp_server: tuple[str, Path]) -> None:
    origin, _ = mcp_server
    session = make_mcp_session(tmp_path)
    with ClosingAgent(drop_nth=1, forward_to=origin) as proxy:
        with pytest.raises(InfraError, match="Server disconnected without sending a response"):
            async with opened_mcp(session, type="mcp", url=f"{proxy.url}/mcp"):
                pass
        assert proxy.answered == [] and len(proxy.dropped) == 1 and proxy.connections == 1
    assert events(session, "resent") == []


# -- a remote agent's forward to a real agent ------------------------------------------------------------------


def _a2a_send(text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": text, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": text, "role": "user", "parts": [{"kind": "text", "text": text}]}}}


@pytest.mark.asyncio
async def test_a_forwarded_call_the_real_agent_dropped_with_its_kept_alive_connection_is_sent_again(
        tmp_path: Path) -> None:
    with ClosingAgent(drop_nth=2) as real:
        async with agents(tmp_path, {"billing": {"forward": f"{real.url}/a2a"}}) as proxy, \
                httpx.AsyncClient(timeout=10) as http:
            answers = [await http.post(proxy.urls["billing"]["url"], json=_a2a_send(text)) for text in ("one", "two")]
        assert [a.status_code for a in answers] == [200, 200]
        assert real.answered == ["message/send"] * 2 and real.dropped == ["message/send"]
        assert real.connections == 2
    assert [d.message for d in proxy.delegations] == ["one", "two"]  # each recorded once, none failed
    assert [d.state for d in proxy.delegations] == ["unknown", "unknown"]  # the echo is no A2A answer; no error
    [resent] = [e.data for e in proxy._session.events if e.name == "resent"]
    assert resent == {"agent": "billing", "url": f"{real.url}/a2a",
                      "reason": "the agent had closed the kept-alive connection "
                                "(Server disconnected without sending a response.)"}
    assert not [e for e in proxy._session.events if e.name == "forward_failed"]


async def _answered(agent: ClosingAgent, count: int) -> None:
    """Until `agent` has answered `count` requests (its server is a thread of its own), at most 10 s."""
    async with asyncio.timeout(10):
        while len(agent.answered) < count:
            await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_a_push_the_callers_listener_dropped_with_its_kept_alive_connection_is_sent_again(
        tmp_path: Path) -> None:
    # a scripted agent posts each settled task to the caller's listener (A2A 0.3: one post per task), on a
    # client kept for the run: the second post goes out on the kept-alive connection, which is then dropped
    with ClosingAgent(drop_nth=2) as listener:
        async with agents(tmp_path, {"billing": BILLING}) as group, \
                connect(group.urls["billing"]["url"], "JSONRPC", "0.3") as client:
            for count, text in enumerate(("A refund for ORD-1001 please", "refund ORD-7"), start=1):
                asking = request(text)
                asking.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
                asking.configuration.task_push_notification_config.url = f"{listener.url}/push"
                [_ async for _ in client.send_message(asking, context=call())]
                await _answered(listener, count)  # one task settled and posted before the next is asked
        assert listener.answered == ["POST", "POST"] and listener.dropped == ["POST"]
        assert listener.connections == 2
    [resent] = [e.data for e in group._session.events if e.name == "resent"]
    assert resent == {"agent": "billing", "url": f"{listener.url}/push",
                      "reason": "the agent had closed the kept-alive connection "
                                "(Server disconnected without sending a response.)"}
