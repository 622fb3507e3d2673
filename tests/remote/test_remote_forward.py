"""`forward:`: a remote agent as a recording proxy in front of a real A2A agent.

The "real" agent is one of tamesu's own scripted remote agents, started first; a second group forwards to it.
a2a-sdk's client talks to the proxy on JSON-RPC and HTTP+JSON, both versions, and must get what the real agent
answers; both sides record the same messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from remote.test_remote_agents import BILLING, TOKEN, agents, call, connect, reply_of, request, send
from sdk_groups import IN_PROCESS_A2A_SERVER
from test_example_orchestrator import orchestrator  # noqa: F401 - a fixture

pytestmark = IN_PROCESS_A2A_SERVER  # tamesu's remote agents serve A2A in this process: a2a-sdk's server side

HTTP_COMBOS = [(b, v) for b in ("JSONRPC", "HTTP+JSON") for v in ("1.0", "0.3")]
http_combos = pytest.mark.parametrize(("binding", "version"), HTTP_COMBOS, ids=[f"{b}-{v}" for b, v in HTTP_COMBOS])


def _events_of(group: Any, name: str) -> list[Any]:
    return [e for e in group._session.events if e.name == name]


@http_combos
async def test_the_proxy_relays_sends_and_streams_and_records_both_directions(
        tmp_path: Path, binding: str, version: str) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real:
        real_url = real.urls["billing"]["url"]
        async with agents(tmp_path / "proxy", {"billing": {"forward": real_url}}) as proxy:
            url = proxy.urls["billing"]["url"]
            assert url != real_url and proxy.urls["billing"]["grpc"] == ""
            async with connect(url, binding, version) as client:
                task = await send(client, "A refund for ORD-1001 please")
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert reply_of(task)["parts"][0]["text"] == "Refund issued, reference RF-889"
                again = await client.get_task(GetTaskRequest(id=task.id), context=call())
                assert again.id == task.id  # the real agent's task, read through the proxy
                asked = await send(client, "Please cancel my order")
                assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            async with connect(url, binding, version, streaming=True) as client:
                events: list[StreamResponse] = [
                    e async for e in client.send_message(request("refund ORD-7, streamed"), context=call())]
                texts = [p.text for e in events if e.HasField("artifact_update")
                         for p in e.artifact_update.artifact.parts if p.text]
                assert texts == ["Refund issued, reference RF-889"]
    # the real agent saw every message, on the binding and version the orchestrator used
    messages = ["A refund for ORD-1001 please", "Please cancel my order", "refund ORD-7, streamed"]
    assert [d.message for d in real.delegations] == messages
    wire_binding = {"HTTP+JSON": "http"}.get(binding, binding.lower())
    assert {(d.binding, d.version) for d in real.delegations} == {(wire_binding, version)}
    # the proxy recorded both directions: what was sent, and what the real agent answered
    recorded = proxy.delegations
    assert [d.message for d in recorded] == messages
    assert [d.reply for d in recorded] == ["Refund issued, reference RF-889", "Which order should I cancel?",
                                           "Refund issued, reference RF-889"]
    assert [d.state for d in recorded] == ["completed", "input-required", "completed"]
    assert recorded[0].reply_data == {"reference": "RF-889"}
    assert {(d.binding, d.version) for d in recorded} == {(wire_binding, version)}
    assert {d.forwarded for d in recorded} == {real_url}
    assert [d.task_id for d in recorded] == [d.task_id for d in real.delegations]
    delegated = _events_of(proxy, "delegated")
    assert [e.data["message"] for e in delegated] == messages
    assert proxy._session.counters["delegations"] == 3


async def test_answers_come_back_byte_for_byte_and_the_card_points_at_the_proxy(tmp_path: Path) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            agents(tmp_path / "proxy", {"billing": {"forward": real.urls["billing"]["url"] + "/a2a"}}) as proxy, \
            httpx.AsyncClient(timeout=10) as http:
        real_url, url = real.urls["billing"]["url"], proxy.urls["billing"]["url"]
        assert url.endswith("/a2a"), "the stand-in URL keeps the real URL's path"
        card = (await http.get(proxy.urls["billing"]["card"])).json()
        assert {i["protocolBinding"] for i in card["supportedInterfaces"]} == {"JSONRPC", "HTTP+JSON"}
        origin = url.removesuffix("/a2a")
        assert all(i["url"].startswith(origin) for i in card["supportedInterfaces"]), card
        assert [s["id"] for s in card["skills"]] == ["refund", "invoice-lookup"]  # the real agent's card
        sent = await http.post(url, headers={"A2A-Version": "1.0"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "refund ORD-1"}]}}})
        task_id = sent.json()["result"]["task"]["id"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        direct = await http.post(real_url + "/a2a", headers={"A2A-Version": "1.0"}, json=get)
        through = await http.post(url, headers={"A2A-Version": "1.0"}, json=get)
        assert through.status_code == direct.status_code == 200
        assert through.content == direct.content
        # a raw 0.3 stream: every event of the real agent's stream arrives, in order
        async with http.stream("POST", url, json={
                "jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": {"message": {
                    "kind": "message", "messageId": "m2", "role": "user",
                    "parts": [{"kind": "text", "text": "hello"}]}}}) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            body = (await streamed.aread()).decode()
    kinds = [json.loads(line[5:])["result"]["kind"] for line in body.splitlines() if line.startswith("data:")]
    assert kinds[0] == "task" and "artifact-update" in kinds and kinds[-1] == "status-update"
    assert [d.message for d in proxy.delegations] == ["refund ORD-1", "hello"]
    assert proxy.delegations[1].reply == "I can help with refunds and invoices."
    forwarded = [e.data["method"] for e in _events_of(proxy, "forwarded")]
    assert "GetTask" in forwarded and "GET /.well-known/agent-card.json" in forwarded


async def test_the_card_is_served_under_the_remote_agents_url_when_the_real_agent_keeps_it_at_its_origin(
        tmp_path: Path) -> None:
    # the A2A page: point the agent under test at {{remote.NAME.url}}, "its card is at
    # /.well-known/agent-card.json" under it; the real agent serves its card at its origin only
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            agents(tmp_path / "proxy", {"billing": {"forward": real.urls["billing"]["url"] + "/a2a"}}) as proxy, \
            httpx.AsyncClient(timeout=10) as http:
        url = proxy.urls["billing"]["url"]
        assert (await http.get(real.urls["billing"]["url"] + "/a2a/.well-known/agent-card.json")).status_code == 404
        answer = await http.get(url + "/.well-known/agent-card.json")
        assert answer.status_code == 200, answer.text
        card = answer.json()
        assert [s["id"] for s in card["skills"]] == ["refund", "invoice-lookup"]
        origin = url.removesuffix("/a2a")
        assert all(i["url"].startswith(origin) for i in card["supportedInterfaces"]), card
        # a path the real agent does not serve at all stays its own 404
        assert (await http.get(url + "/elsewhere")).status_code == 404


async def test_headers_carry_the_real_agents_credentials_and_token_guards_the_proxy(tmp_path: Path) -> None:
    real_spec = {**BILLING, "token": "real-secret"}
    async with agents(tmp_path / "real", {"billing": real_spec}) as real:
        forward = {"forward": real.urls["billing"]["url"], "headers": {"Authorization": "Bearer real-secret"},
                   "token": "{{vars.token}}"}
        async with agents(tmp_path / "proxy", {"billing": forward}) as proxy:
            url = proxy.urls["billing"]["url"]
            async with connect(url, "JSONRPC", "1.0") as client:
                task = await send(client, "refund ORD-3", token=TOKEN)  # the proxy's token, not the real one
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                with pytest.raises(Exception):  # noqa: B017 - the proxy's own gate refuses, whatever the SDK raises
                    await send(client, "refund without the proxy's token", token="real-secret")
    assert [d.message for d in real.delegations] == ["refund ORD-3"]
    assert [d.message for d in proxy.delegations] == ["refund ORD-3"]
    assert proxy._session.counters["delegations_refused"] == 1


async def test_fuzz_tools_answer_locally_instead_of_forwarding(tmp_path: Path) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real:
        forward = {"billing": {"forward": real.urls["billing"]["url"]}}
        async with agents(tmp_path / "proxy", forward, fuzz={"billing": "error"}) as proxy:
            async with connect(proxy.urls["billing"]["url"], "JSONRPC", "0.3") as client:
                task = await send(client, "refund ORD-4")
            assert task.status.state == TaskState.TASK_STATE_FAILED
        async with agents(tmp_path / "late", forward, fuzz={"billing": {"mode": "delay", "delay": "0.2s"}}) as late:
            async with connect(late.urls["billing"]["url"], "HTTP+JSON", "1.0") as client:
                held = await send(client, "refund ORD-5")
            assert MessageToDict(held)["artifacts"][0]["parts"][0]["text"] == "Refund issued, reference RF-889"
    assert [d.message for d in real.delegations] == ["refund ORD-5"], "error answered locally, delay forwarded"
    assert [(d.message, d.fuzzed, d.state) for d in proxy.delegations] == [("refund ORD-4", "error", "failed")]
    assert [(d.fuzzed, d.forwarded is not None) for d in late.delegations] == [("delay", True)]
    assert late._session.counters["tools_fuzzed"] == 1


async def test_an_unreachable_real_agent_is_a_502_and_a_failed_delegation(tmp_path: Path) -> None:
    import socket

    # a port held bound but never listening for the whole test: refused, and nothing else can take it
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{spare.getsockname()[1]}"
        async with agents(tmp_path, {"billing": {"forward": dead}}) as proxy, httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(proxy.urls["billing"]["url"], json={
                "jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
                    "kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}})
    assert answer.status_code == 502
    [delegation] = proxy.delegations
    assert (delegation.message, delegation.state) == ("hi", "error")
    assert "did not answer" in delegation.reply
    assert [e.name for e in proxy._session.events].count("forward_failed") == 1


async def test_a_caller_that_hangs_up_mid_stream_stops_the_relay(tmp_path: Path) -> None:
    import asyncio
    import time

    # the real agent holds its answer for `hold` after the first events: the caller leaves long before it
    hold = 30.0
    async with agents(tmp_path / "real", {"billing": BILLING}, fuzz={"billing": {"mode": "delay", "delay": f"{hold}s"}}
                      ) as real, agents(tmp_path / "proxy", {"billing": {"forward": real.urls["billing"]["url"]}}
                                        ) as proxy, httpx.AsyncClient(timeout=10) as http:
        async with http.stream("POST", proxy.urls["billing"]["url"], headers={"A2A-Version": "1.0"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {
                    "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "refund ORD-8"}]}}}) as streamed:
            async for line in streamed.aiter_lines():
                if line.startswith("data:"):
                    break  # the first event: the task
        left = time.monotonic()
        # the proxy records the delegation when the caller leaves (20 ms after, on a quiet machine), not when
        # the real agent answers (`hold` later): a third of `hold` tells the two apart on any machine. A proxy
        # that relays on after the hang-up fails here, and records the answer below (reply, state)
        while not proxy.delegations and time.monotonic() - left < hold / 3:
            await asyncio.sleep(0.02)
        assert proxy.delegations, f"no delegation recorded within {hold / 3:g}s of the caller leaving"
    [delegation] = proxy.delegations
    assert (delegation.message, delegation.reply) == ("refund ORD-8", "")
    assert delegation.state in ("submitted", "working")


async def test_a_recorded_reply_reads_as_the_a2a_target_reads_the_turn(tmp_path: Path) -> None:
    # before: a streamed answer cut inside words was recorded "Hel lo wor ld" (every appended chunk joined by a
    # space), and a task asking for input with an artifact lost its question (the status message was read only
    # when the task had no artifact)
    from agents.a2a_agents import A2AAgents

    def message(text: str, task_id: str = "") -> dict[str, Any]:
        return {"message": {"kind": "message", "messageId": f"m-{text}", "role": "user", "taskId": task_id or None,
                            "parts": [{"kind": "text", "text": text}]}}

    with A2AAgents() as real:
        async with agents(tmp_path, {"shop": {"forward": f"{real.urls['v10']}/a2a"}}) as proxy, \
                httpx.AsyncClient(timeout=10) as http:
            url = proxy.urls["shop"]["url"]
            async with http.stream("POST", url, json={"jsonrpc": "2.0", "id": 1, "method": "message/stream",
                                                      "params": message("words please")}) as streamed:
                await streamed.aread()
            asked = (await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "message/send",
                                                "params": message("draft a letter")})).json()["result"]
            await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "message/send",
                                       "params": message("yes", asked["id"])})
    assert [(d.message, d.reply, d.state) for d in proxy.delegations] == [
        ("words please", "Hello world", "completed"),
        ("draft a letter", "Approve?\ndraft one", "input-required"),
        ("yes", "Revised\ndraft two", "completed")]


async def test_fuzzed_with_the_real_agent_down_the_local_card_stands_in(tmp_path: Path) -> None:
    import socket

    with socket.socket() as spare:  # held bound, never listening: refused, and no server started here gets it
        spare.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{spare.getsockname()[1]}"
        async with agents(tmp_path, {"billing": {"forward": dead, "skills": ["refund"]}},
                          fuzz={"billing": {"mode": "custom", "text": "Refunds are paused"}}) as proxy, \
                connect(proxy.urls["billing"]["url"], "HTTP+JSON", "0.3") as client:
            task = await send(client, "refund ORD-6")
    assert reply_of(task)["parts"][0]["text"] == "Refunds are paused"
    assert [(d.message, d.fuzzed, d.forwarded) for d in proxy.delegations] == [("refund ORD-6", "custom", None)]


def test_forward_and_headers_are_checked_when_the_suite_loads() -> None:
    from pydantic import ValidationError

    from tamesu.suite.remote_agents import RemoteAgentSpec

    with pytest.raises(ValidationError, match="http://, https://, grpc:// or grpcs:// URL"):
        RemoteAgentSpec.model_validate({"forward": "ftp://billing"})
    with pytest.raises(ValidationError, match="headers only apply with forward"):
        RemoteAgentSpec.model_validate({"headers": {"X": "y"}})
    # before: accepted and never used (the real agent answers; fuzz_tools' modes answer with their own words)
    for scripted in ({"reply": "Refunds are paused"}, {"replies": [{"when": "refund", "say": "No"}]}):
        with pytest.raises(ValidationError, match="reply and replies do not apply with forward: the real agent "
                                                  "answers"):
            RemoteAgentSpec.model_validate({"forward": "https://billing.example.com/a2a", **scripted})
    assert RemoteAgentSpec.model_validate({"forward": "{{secrets.BILLING_URL}}"}).forward


SUITE = """\
remote_agents:
  real_billing:
    skills: [refund]
    replies: [{ when: "(?i)refund", say: "Refund of 42 euros issued, reference RF-889", data: { reference: RF-889 } }]
  billing: { forward: "{{remote.real_billing.url}}", headers: { X-Caller: tamesu } }
  shipping: { skills: [track], reply: "It arrives tomorrow." }
targets:
  orchestrator:
    type: a2a
    url: "{{env.ORCHESTRATOR_URL}}"
    metadata: { billing_url: "{{remote.billing.url}}", shipping_url: "{{remote.shipping.url}}" }
tests:
  - name: refund through the proxy
    target: orchestrator
    scenario: { script: [{ say: "I want a refund for order ORD-1001" }] }
    assert:
      - delegated_to: { agent: billing, contains: "ORD-1001" }
      - delegated_to: real_billing
      - contains: "RF-889"
  - name: billing is down
    target: orchestrator
    fuzz_tools: { billing: error }
    scenario: { script: [{ say: "I want a refund for order ORD-1001" }] }
    assert:
      - delegated_to: billing
      - tool_not_called: real_billing
      - contains: "unavailable"
"""


def test_a_suite_records_the_real_agent_through_the_proxy(
        orchestrator: str, tamesu: Any, tmp_path: Path) -> None:  # noqa: F811 - the imported fixture
    (tmp_path / "forward.tamesu.yaml").write_text(SUITE, encoding="utf-8")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path, env={"ORCHESTRATOR_URL": orchestrator})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(next((tmp_path / "out").glob("*/*/refund-through-the-proxy/run-1/result.json")).read_text())
    calls = {c["name"]: c for c in result["tool_calls"] if c["kind"] == "delegation"}
    assert calls["billing"]["result"] == {"text": "Refund of 42 euros issued, reference RF-889",
                                          "data": {"reference": "RF-889"}}
    assert calls["billing"]["args"]["message"] == calls["real_billing"]["args"]["message"]


def test_a_run_whose_forward_cannot_reach_the_real_agent_is_an_error(tamesu: Any, tmp_path: Path) -> None:
    # before: the proxy's 502 read as the agent's answer: "the agent answered HTTP 502", fault agent, exit 1
    import socket

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
        (tmp_path / "f.tamesu.yaml").write_text(f"""\
remote_agents:
  shop: {{ forward: "http://127.0.0.1:{port}/a2a" }}
targets:
  rpc: {{ type: a2a, url: "{{{{remote.shop.url}}}}" }}
tests:
  - {{ name: through, target: rpc, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: x }} ] }}
""", encoding="utf-8")
        done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"! remote agent shop: forward to http://127.0.0.1:{port}/a2a: the real agent did " \
           "not answer: ConnectError" in done.stdout, done.stdout
    assert "fault: environment" in done.stdout
