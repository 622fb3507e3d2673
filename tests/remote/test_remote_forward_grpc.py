"""`forward: grpc://...`: a remote agent as a recording proxy in front of a real A2A agent reached over gRPC.

The "real" agent is one of tamesu's scripted remote agents (it serves both gRPC services, 1.0 and 0.3); a second
group forwards to its gRPC address. a2a-sdk's gRPC client talks to the proxy's gRPC address and must get what the
real agent answers, byte for byte; both sides record the same messages.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.transports.grpc import GrpcTransport
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
from a2a.types import a2a_pb2
from a2a.types.a2a_pb2 import GetTaskRequest, StreamResponse, TaskState

from remote.test_remote_agents import BILLING, REFUSED, TOKEN, agents, call, reply_of, request, send
from sdk_groups import IN_PROCESS_A2A_SERVER

pytestmark = IN_PROCESS_A2A_SERVER  # tamesu's remote agents serve A2A in this process: a2a-sdk's server side

VERSIONS = pytest.mark.parametrize("version", ["1.0", "0.3"])


@asynccontextmanager
async def grpc_client(real_origin: str, real_grpc: str, proxy_grpc: str, version: str,
                      *, streaming: bool = False) -> AsyncIterator[Client]:
    """a2a-sdk's gRPC client of `version`, dialling the proxy: the real card, its gRPC interface moved to it."""
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, real_origin).get_agent_card()
        [chosen] = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"
                    and i.protocol_version == version]
        chosen.url = chosen.url.replace(real_grpc, proxy_grpc)
        del card.supported_interfaces[:]
        card.supported_interfaces.append(chosen)
        factory = ClientFactory(ClientConfig(streaming=streaming, supported_protocol_bindings=["GRPC"],
                                             grpc_channel_factory=grpc.aio.insecure_channel))
        transport = CompatGrpcTransport if version == "0.3" else GrpcTransport
        factory.register("GRPC", lambda card, url, config: transport.create(card, url, config))
        client = factory.create(card)
        try:
            yield client
        finally:
            await client.close()


@VERSIONS
async def test_the_grpc_proxy_relays_sends_and_streams_and_records_both_directions(
        tmp_path: Path, version: str) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real:
        real_grpc = real.urls["billing"]["grpc"]
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"grpc://{real_grpc}"}}) as proxy:
            proxy_grpc = proxy.urls["billing"]["grpc"]
            assert proxy_grpc and proxy_grpc != real_grpc
            where = (real.urls["billing"]["url"], real_grpc, proxy_grpc, version)
            async with grpc_client(*where) as client:
                task = await send(client, "A refund for ORD-1001 please")
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert reply_of(task)["parts"][0]["text"] == "Refund issued, reference RF-889"
                again = await client.get_task(GetTaskRequest(id=task.id), context=call())
                assert again.id == task.id  # the real agent's task, read through the proxy
                asked = await send(client, "Please cancel my order")
                assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                with pytest.raises(REFUSED):  # the real agent's refusal comes back as its status
                    await client.get_task(GetTaskRequest(id="no-such-task"), context=call())
            async with grpc_client(*where, streaming=True) as client:
                events: list[StreamResponse] = [
                    e async for e in client.send_message(request("refund ORD-7, streamed"), context=call())]
                texts = [p.text for e in events if e.HasField("artifact_update")
                         for p in e.artifact_update.artifact.parts if p.text]
                assert texts == ["Refund issued, reference RF-889"]
    messages = ["A refund for ORD-1001 please", "Please cancel my order", "refund ORD-7, streamed"]
    assert [d.message for d in real.delegations] == messages
    assert {(d.binding, d.version) for d in real.delegations} == {("grpc", version)}
    recorded = proxy.delegations
    assert [d.message for d in recorded] == messages
    assert [d.reply for d in recorded] == ["Refund issued, reference RF-889", "Which order should I cancel?",
                                           "Refund issued, reference RF-889"]
    assert [d.state for d in recorded] == ["completed", "input-required", "completed"]
    assert recorded[0].reply_data == {"reference": "RF-889"}
    assert {(d.binding, d.version, d.forwarded) for d in recorded} == {("grpc", version, f"grpc://{real_grpc}")}
    assert [d.task_id for d in recorded] == [d.task_id for d in real.delegations]
    statuses = [e.data["status"] for e in proxy._session.events if e.name == "forwarded"]
    assert "NOT_FOUND" in statuses


async def test_answers_come_back_byte_for_byte_and_cards_point_at_the_proxy(tmp_path: Path) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real:
        real_grpc = real.urls["billing"]["grpc"]
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"grpc://{real_grpc}"}}) as proxy:
            proxy_grpc = proxy.urls["billing"]["grpc"]
            async with grpc.aio.insecure_channel(real_grpc) as direct, \
                    grpc.aio.insecure_channel(proxy_grpc) as through:
                sent = a2a_pb2.SendMessageRequest(message=request("refund ORD-1").message)
                path = "/lf.a2a.v1.A2AService/SendMessage"
                task = a2a_pb2.SendMessageResponse.FromString(await through.unary_unary(path)(
                    sent.SerializeToString(), timeout=10)).task
                get = a2a_pb2.GetTaskRequest(id=task.id).SerializeToString()
                path = "/lf.a2a.v1.A2AService/GetTask"
                assert await through.unary_unary(path)(get, timeout=10) == \
                    await direct.unary_unary(path)(get, timeout=10)
                # the cards, over either version's gRPC: the real agent's, its gRPC interface moved to the proxy
                card = a2a_pb2.AgentCard.FromString(await through.unary_unary(
                    "/lf.a2a.v1.A2AService/GetExtendedAgentCard")(b"", timeout=10))
                old = a2a_v0_3_pb2.AgentCard.FromString(await through.unary_unary(
                    "/a2a.v1.A2AService/GetAgentCard")(b"", timeout=10))
                with pytest.raises(grpc.aio.AioRpcError) as unknown:
                    await through.unary_unary("/other.Service/Call")(b"", timeout=10)
                assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
            async with httpx.AsyncClient(timeout=10) as http:
                refused = await http.get(proxy.urls["billing"]["card"])
    assert [s.id for s in card.skills] == ["refund", "invoice-lookup", "bulk-refund"]
    assert [(i.protocol_binding, i.url) for i in card.supported_interfaces] == [
        ("GRPC", proxy_grpc), ("GRPC", f"dns://{proxy_grpc}/{proxy_grpc}")], "HTTP interfaces dropped"
    assert real_grpc not in str(old) and proxy_grpc in str(old)
    assert refused.status_code == 404 and "call it over gRPC" in refused.json()["error"]["message"]
    assert [d.message for d in proxy.delegations] == ["refund ORD-1"]


async def test_headers_go_as_metadata_and_token_guards_the_grpc_proxy(tmp_path: Path) -> None:
    async with agents(tmp_path / "real", {"billing": {**BILLING, "token": "real-secret"}}) as real:
        real_grpc = real.urls["billing"]["grpc"]
        forward = {"forward": f"grpc://{real_grpc}", "headers": {"Authorization": "Bearer real-secret"},
                   "token": "{{vars.token}}"}
        async with agents(tmp_path / "proxy", {"billing": forward}) as proxy, \
                grpc_client(real.urls["billing"]["url"], real_grpc, proxy.urls["billing"]["grpc"], "1.0") as client:
            task = await send(client, "refund ORD-3", token=TOKEN)
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            with pytest.raises(REFUSED):
                await send(client, "refund with the real agent's token", token="real-secret")
    assert [d.message for d in real.delegations] == ["refund ORD-3"]
    assert [d.message for d in proxy.delegations] == ["refund ORD-3"]
    assert proxy._session.counters["delegations_refused"] == 1


async def test_fuzz_tools_answer_locally_over_grpc(tmp_path: Path) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real:
        real_grpc = real.urls["billing"]["grpc"]
        forward = {"billing": {"forward": f"grpc://{real_grpc}", "skills": ["refund"]}}
        async with agents(tmp_path / "proxy", forward, fuzz={"billing": "error"}) as proxy, \
                grpc_client(real.urls["billing"]["url"], real_grpc, proxy.urls["billing"]["grpc"], "0.3") as client:
            failed = await send(client, "refund ORD-4")
        async with agents(tmp_path / "late", forward, fuzz={"billing": {"mode": "delay", "delay": "0.2s"}}) as late, \
                grpc_client(real.urls["billing"]["url"], real_grpc, late.urls["billing"]["grpc"], "1.0") as client:
            held = await send(client, "refund ORD-5")
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert reply_of(held)["parts"][0]["text"] == "Refund issued, reference RF-889"
    assert [d.message for d in real.delegations] == ["refund ORD-5"], "error answered locally, delay forwarded"
    assert [(d.message, d.fuzzed, d.forwarded) for d in proxy.delegations] == [("refund ORD-4", "error", None)]
    assert [(d.fuzzed, d.forwarded is not None) for d in late.delegations] == [("delay", True)]


async def test_an_unreachable_grpc_agent_is_unavailable_and_a_failed_delegation(tmp_path: Path) -> None:
    import socket

    with socket.socket() as spare:  # held bound, never listening: refused
        spare.bind(("127.0.0.1", 0))
        dead = f"grpc://127.0.0.1:{spare.getsockname()[1]}"
        async with agents(tmp_path, {"billing": {"forward": dead}}) as proxy, \
                grpc.aio.insecure_channel(proxy.urls["billing"]["grpc"]) as channel:
            sent = a2a_pb2.SendMessageRequest(message=request("hi").message).SerializeToString()
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")(sent, timeout=10)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    [delegation] = proxy.delegations
    assert (delegation.message, delegation.state) == ("hi", "error")
    assert "did not answer" in delegation.reply
    [event] = [e for e in proxy._session.events if e.name == "forward_failed"]
    assert event.data["url"] == dead


def test_forward_urls_are_checked_when_the_suite_loads() -> None:
    from pydantic import ValidationError

    from tamesu.suite.remote_agents import RemoteAgentSpec

    assert RemoteAgentSpec.model_validate({"forward": "grpc://billing.internal:50051"}).forward
    assert RemoteAgentSpec.model_validate({"forward": "grpcs://billing.internal"}).forward
    for wrong in ("grpc://billing.internal", "grpc://billing.internal:50051/a2a"):
        with pytest.raises(ValidationError, match="expected grpc://host:port or grpcs://host"):
            RemoteAgentSpec.model_validate({"forward": wrong})


SUITE = """\
remote_agents:
  over_grpc: {{ forward: "grpc://127.0.0.1:9" }}
  over_http: {{ forward: "http://127.0.0.1:9/a2a" }}
targets:
  rpc: {{ type: a2a, url: "{url}" }}
tests:
  - {{ name: t, target: rpc, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: x }} ] }}
"""


@pytest.mark.parametrize(("url", "said"), [
    ("{{remote.over_grpc.url}}", "remote agent over_grpc forwards to a gRPC agent (grpc://127.0.0.1:9): it "
                                 "serves no HTTP card or endpoint"),
    ("grpc://{{remote.over_http.grpc}}", "remote agent over_http forwards to an HTTP agent "
                                         "(http://127.0.0.1:9/a2a): it serves no gRPC")])
def test_a_binding_the_proxy_does_not_relay_is_refused_where_written(
        tamesu: Any, tmp_path: Path, url: str, said: str) -> None:
    (tmp_path / "f.tamesu.yaml").write_text(SUITE.format(url=url), encoding="utf-8")
    done = tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    line = next(line for line in (done.stdout + done.stderr).splitlines() if said in line)
    assert line.startswith("f.tamesu.yaml:5:26: targets.rpc.url: bad template"), line


RUN_SUITE = """\
remote_agents:
  real_billing:
    skills: [refund]
    replies: [{ when: "(?i)refund", say: "Refund of 42 euros issued, reference RF-889" }]
  billing: { forward: "grpc://{{remote.real_billing.grpc}}" }
targets:
  through: { type: a2a, url: "grpc://{{remote.billing.grpc}}" }
tests:
  - name: refund over grpc through the proxy
    target: through
    scenario: { script: [{ say: "I want a refund for order ORD-1001" }] }
    assert:
      - contains: "RF-889"
"""


def test_a_run_reaches_the_real_agent_over_grpc_through_the_proxy(tamesu: Any, tmp_path: Path) -> None:
    # tamesu's own a2a target over gRPC in the orchestrator's seat: it reads the card through the proxy (gRPC's
    # card call), follows the gRPC interface the proxy moved to itself, and the real agent answers
    (tmp_path / "g.tamesu.yaml").write_text(RUN_SUITE, encoding="utf-8")
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(next((tmp_path / "out").glob("*/*/refund-over-grpc-through-the-proxy/run-1/result.json"))
                        .read_text())
    delegated = [e["data"] for e in result["events"] if e["name"] == "delegated"]
    assert {(e["agent"], e["binding"], e["reply"]) for e in delegated} == {
        ("billing", "grpc", "Refund of 42 euros issued, reference RF-889"),
        ("real_billing", "grpc", "Refund of 42 euros issued, reference RF-889")}, delegated
    card = next(e["data"] for e in result["events"] if e["name"] == "forwarded")
    assert (card["method"], card["status"]) == ("GetExtendedAgentCard", "OK")


def test_a_run_whose_grpc_forward_cannot_reach_the_real_agent_is_an_error(tamesu: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as spare:  # held bound, never listening: refused
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
        (tmp_path / "g.tamesu.yaml").write_text(f"""\
remote_agents:
  billing: {{ forward: "grpc://127.0.0.1:{port}" }}
targets:
  through: {{ type: a2a, url: "grpc://{{{{remote.billing.grpc}}}}" }}
tests:
  - {{ name: t, target: through, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: x }} ] }}
""", encoding="utf-8")
        done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    # the a2a target tells of an UNAVAILABLE proxy; what it relays names the real agent and why
    assert f"remote agent billing: forward to grpc://127.0.0.1:{port}: the real agent did not answer: " \
           "UNAVAILABLE: Connection refused" in done.stdout, done.stdout
    assert "fault: environment" in done.stdout


async def test_a_stream_the_real_agent_leaves_silent_ends_in_a_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: the bound between two messages ended in a TimeoutError out of the handler: gRPC's UNKNOWN and a
    # traceback in the log, the delegation never recorded
    from tamesu.remote import _grpc_relay

    monkeypatch.setattr(_grpc_relay, "READ_TIMEOUT", 0.5)
    async with agents(tmp_path / "real", {"billing": BILLING}, fuzz={"billing": {"mode": "delay", "delay": "30s"}}
                      ) as real:
        real_grpc = real.urls["billing"]["grpc"]
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"grpc://{real_grpc}"}}) as proxy, \
                grpc.aio.insecure_channel(proxy.urls["billing"]["grpc"]) as channel:
            sent = a2a_pb2.SendMessageRequest(message=request("refund ORD-8").message).SerializeToString()
            stream = channel.unary_stream("/lf.a2a.v1.A2AService/SendStreamingMessage")(sent, timeout=20)
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async for _ in stream:
                    pass
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert ended.value.details() == "the real agent sent nothing for 0.5s"
    [delegation] = proxy.delegations
    assert (delegation.message, delegation.state, delegation.reply) == (
        "refund ORD-8", "error", "the real agent sent nothing for 0.5s")


async def test_a_caller_that_hangs_up_mid_stream_stops_the_grpc_relay(tmp_path: Path) -> None:
    import time

    hold = 30.0  # the real agent holds its answer this long after the first events: the caller leaves first
    async with agents(tmp_path / "real", {"billing": BILLING}, fuzz={"billing": {"mode": "delay", "delay": f"{hold}s"}}
                      ) as real:
        real_grpc = real.urls["billing"]["grpc"]
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"grpc://{real_grpc}"}}) as proxy, \
                grpc.aio.insecure_channel(proxy.urls["billing"]["grpc"]) as channel:
            sent = a2a_pb2.SendMessageRequest(message=request("refund ORD-8").message).SerializeToString()
            stream = channel.unary_stream("/lf.a2a.v1.A2AService/SendStreamingMessage")(sent, timeout=60)
            async for _ in stream:
                break  # the first event: the task
            stream.cancel()
            left = time.monotonic()
            while not proxy.delegations and time.monotonic() - left < hold / 3:
                await asyncio.sleep(0.02)
            assert proxy.delegations, f"no delegation recorded within {hold / 3:g}s of the caller leaving"
    [delegation] = proxy.delegations
    assert (delegation.message, delegation.reply) == ("refund ORD-8", "")
    assert delegation.state in ("submitted", "working")
