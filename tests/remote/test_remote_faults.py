"""Remote agents as other clients meet them (the A2A TCK, the JavaScript SDK): follow-ups that name only the
task, the card's cache headers, and where a remote agent's URL can be used."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientCallContext
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

from remote.test_remote_agents import BILLING, REFUSED, agents, call, combos, connect, request, send
from sdk_groups import IN_PROCESS_A2A_SERVER

pytestmark = IN_PROCESS_A2A_SERVER  # tamesu's remote agents serve A2A in this process: a2a-sdk's server side


@combos
async def test_a_follow_up_with_the_task_id_and_no_context_id_continues_the_task(tmp_path: Path, binding: str,
                                                                                 version: str) -> None:
    async with agents(tmp_path, {"billing": BILLING}) as group, \
            connect(group.urls["billing"]["url"], binding, version) as client:
        asked = await send(client, "Please cancel my order")
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        states = []
        for words in ("cancel ORD-1001, I said", "ORD-1001"):  # the second follow-up was the one refused
            follow_up = SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex,
                                                           parts=[Part(text=words)], task_id=asked.id))
            events = [e async for e in client.send_message(follow_up, context=call())]
            task = events[-1].task
            assert task.id == asked.id and task.context_id == asked.context_id
            states.append(task.status.state)
    assert states == [TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_COMPLETED]
    assert {d.context_id for d in group.delegations} == {asked.context_id}


@combos
async def test_a_message_the_remote_agent_refuses_is_a_delegation_that_failed(tmp_path: Path, binding: str,
                                                                             version: str) -> None:
    # before: the SDK refused these before the scripted agent saw them, and the run recorded nothing: no delegation,
    # no event, `delegated_to` said the orchestrator never called billing while it did (wrongly)
    async with agents(tmp_path, {"billing": BILLING}) as group:
        url = group.urls["billing"]["url"]
        async with connect(url, binding, version) as client:
            done = await send(client, "hello")
            with pytest.raises(REFUSED):
                await send(client, "ORD-1001 after all", task=done)
        async with connect(url, binding, version, streaming=True) as client:
            unknown = request("about task nope")
            unknown.message.task_id = "nope"
            with pytest.raises(REFUSED):
                _ = [e async for e in client.send_message(unknown, context=call())]
    refused = [d for d in group.delegations if d.state == "error"]
    assert [(d.message, d.task_id) for d in refused] == [("ORD-1001 after all", done.id), ("about task nope", "nope")]
    assert "terminal state" in refused[0].reply and "-32004" in refused[0].reply
    assert "not found" in refused[1].reply and "-32001" in refused[1].reply
    assert {(d.binding, d.version) for d in refused} == {({"HTTP+JSON": "http"}.get(binding, binding.lower()), version)}
    delegated = [e.data for e in group._session.events if e.name == "delegated" and e.data["state"] == "error"]
    assert [e["message"] for e in delegated] == ["ORD-1001 after all", "about task nope"]


async def test_the_card_is_served_with_cache_headers(tmp_path: Path) -> None:
    async with agents(tmp_path, {"billing": BILLING}) as group:
        card_url = group.urls["billing"]["card"]
        async with httpx.AsyncClient(timeout=10) as http:
            first = await http.get(card_url)
            again = await http.get(card_url, headers={"If-None-Match": first.headers["etag"]})
    assert first.status_code == 200 and "max-age" in first.headers["cache-control"]
    assert first.headers["last-modified"].endswith("GMT")
    assert again.status_code == 304 and again.content == b""


def _suite(folder: Path, where: str) -> Any:
    (folder / "s.tamesu.yaml").write_text(
        "remote_agents:\n  billing: { reply: ok }\n"
        "targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n" + where)
    return folder


def test_remote_urls_where_no_remote_agent_runs_are_refused_by_validate(tmp_path: Path, tamesu: Any) -> None:
    test = "tests:\n  - name: t\n    target: bot\n    scenario: { script: [{ say: hi }] }\n"
    cases = {
        "before_all": "hooks:\n  before_all: ['curl {{remote.billing.url}}']\n" + test,
        "after_all": "hooks:\n  after_all: ['curl {{remote.billing.url}}']\n" + test,
        "before_each": "hooks:\n  before_each: ['curl {{remote.billing.url}}']\n" + test,
        "command": test + "    assert: [{ command: 'curl {{remote.billing.url}}' }]\n",
    }
    for name, where in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        done = tamesu(["validate", "s.tamesu.yaml"], cwd=_suite(folder, where))
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert "{{remote.billing.url}}: remote agents run only during each run" in done.stderr, done.stderr
    folder = tmp_path / "after_each"
    folder.mkdir()
    ok = tamesu(["validate", "s.tamesu.yaml"], cwd=_suite(
        folder, "hooks:\n  after_each: ['echo {{remote.billing.url}}']\n" + test))
    assert ok.returncode == 0, ok.stderr


def test_a_remote_agents_server_logs_go_to_the_run_folder_not_the_console(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "ok" }] }\n')
    garbage = ("python -c \"import socket, sys; from urllib.parse import urlsplit; u = urlsplit(sys.argv[1]); "
               "s = socket.create_connection((u.hostname, u.port)); s.sendall(b'NOT HTTP AT ALL\\r\\n\\r\\n'); "
               "s.recv(100)\" {{remote.billing.url}}")
    (tmp_path / "s.tamesu.yaml").write_text(
        "remote_agents:\n  billing: { reply: ok }\n"
        f"hooks:\n  after_each: [{json.dumps(garbage)}]\n"
        "targets:\n  bot: { type: model, model: target }\n"
        "tests:\n  - name: t\n    target: bot\n    scenario: { script: [{ say: hi }] }\n")
    done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Invalid HTTP request" not in done.stdout + done.stderr
    [log] = list((tmp_path / "out").glob("*/tamesu.log"))
    assert "uvicorn.error WARNING Invalid HTTP request received." in log.read_text()
    assert "from the libraries (a2a-sdk, uvicorn, grpc, mcp) in" in done.stdout


async def test_a_delegation_given_up_during_a_fuzzed_delay_is_still_a_delegation(tmp_path: Path) -> None:
    # before: the executor recorded a delegation only once its answer was ready, so an orchestrator that gave up
    # on billing (its own timeout shorter than the delay) delegated nothing: `delegated_to: billing` failed with
    # "delegated to: none" and `delegations` was 0, though billing had been called
    held = {"billing": {"mode": "delay", "delay": "30s"}}
    async with agents(tmp_path, {"billing": BILLING}, fuzz=held) as group, \
            connect(group.urls["billing"]["url"], "JSONRPC", "1.0") as client:
        with pytest.raises((*REFUSED, TimeoutError, httpx.TimeoutException)):  # the caller gives up after 0.5 s
            asked = request("refund ORD-1001")
            _ = [e async for e in client.send_message(asked, context=ClientCallContext(timeout=0.5))]
    [given_up] = group.delegations
    assert (given_up.agent, given_up.message, given_up.state) == ("billing", "refund ORD-1001", "canceled")
    assert given_up.reply == "no answer: the call was given up while fuzz_tools held it (delay 30s)"
    assert group._session.counters["delegations"] == 1
    assert [e.data["state"] for e in group._session.events if e.name == "delegated"] == ["canceled"]


async def test_stopping_an_agent_a_fuzzed_delay_holds_logs_nothing(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # before: a2a-sdk 1.3.0's aclose warned "Dispatcher task is not running" twice (the held task's two queues
    # closed again by its cancelled producer), and the run's console said "2 records from the libraries"
    held = {"billing": {"mode": "delay", "delay": "30s"}}
    caplog.set_level(logging.WARNING)
    async with agents(tmp_path, {"billing": BILLING}, fuzz=held) as group, \
            connect(group.urls["billing"]["url"], "JSONRPC", "1.0") as client:
        with pytest.raises((*REFUSED, TimeoutError, httpx.TimeoutException)):  # the caller gives up after 0.5 s
            _ = [e async for e in client.send_message(request("refund ORD-1001"),
                                                      context=ClientCallContext(timeout=0.5))]
        caplog.clear()
        await group.stop()  # the delegation still held
    assert [given_up.state for given_up in group.delegations] == ["canceled"]
    said = [(r.name, r.getMessage()) for r in caplog.records if r.name.startswith(("a2a", "uvicorn"))]
    assert said == [], said


async def test_stopping_an_agent_with_a_held_request_in_flight_ends_it_at_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # before: the HTTP server stopped first, waited its grace (1 s) for the request the delay held, then cut it
    # ("Cancel 1 running task(s), timeout graceful shutdown exceeded", an ERROR among the library records); the SDK's
    # tasks are ended first now, which answers the waiting request, so the server has nothing in flight to cut
    held = {"billing": {"mode": "delay", "delay": "30s"}}
    caplog.set_level(logging.WARNING)
    async with agents(tmp_path, {"billing": BILLING}, fuzz=held) as group, \
            connect(group.urls["billing"]["url"], "JSONRPC", "1.0") as client:
        async def ask() -> None:
            _ = [e async for e in client.send_message(request("refund ORD-1001"), context=call())]
        asking = asyncio.create_task(ask())
        while not any(e.name == "tool_fuzzed" for e in group._session.events) and not asking.done():
            await asyncio.sleep(0.05)
        assert not asking.done()  # the delegation is held
        caplog.clear()
        began = time.monotonic()
        await group.stop()
        took = time.monotonic() - began
        asking.cancel()
        await asyncio.gather(asking, return_exceptions=True)
    said = [(r.name, r.getMessage()) for r in caplog.records if r.name.startswith(("a2a", "uvicorn"))]
    assert said == [], said
    assert took < 0.9, took
