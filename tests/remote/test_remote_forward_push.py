"""Push notifications through a forwarding remote agent: the real agent posts them to the proxy, which records
each and posts it on to the orchestrator's listener (`tamesu.remote._push_relay`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    TaskPushNotificationConfig,
    TaskState,
)

from remote.test_remote_agents import (
    BILLING,
    TOKEN,
    _finished_v03,
    _finished_v10,
    agents,
    call,
    connect,
    listening,
    request,
    send,
)
from remote.test_remote_forward_grpc import grpc_client
from sdk_groups import IN_PROCESS_A2A_SERVER
from sessions import new_session
from tamesu.remote._push_relay import PushRelay
from tamesu.remote.card import Addresses
from tamesu.remote.server import RemoteAgentServer
from tamesu.suite.remote_agents import RemoteAgentSpec
from wire_servers import faulty_server

pytestmark = IN_PROCESS_A2A_SERVER

COMBOS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3"), ("GRPC", "1.0"),
          ("GRPC", "0.3")]


async def _relayed(group: Any, count: int = 1) -> list[dict[str, Any]]:
    async with asyncio.timeout(10):  # the post comes after the answer, on the real agent's own time
        while True:
            found = [e.data for e in group._session.events if e.name == "push_relayed"]
            if len(found) >= count:
                return found
            await asyncio.sleep(0.02)


@pytest.mark.parametrize(("binding", "version"), COMBOS, ids=[f"{b}-{v}" for b, v in COMBOS])
async def test_the_real_agents_pushes_reach_the_listener_through_the_proxy(
        tmp_path: Path, binding: str, version: str) -> None:
    # before: the push config went on as written, and the real agent posted straight to the orchestrator's
    # listener: the answer reached the agent under test past the proxy, and the run recorded nothing of it
    async with agents(tmp_path / "real", {"billing": {**BILLING, "token": "real-secret"}}) as real, \
            listening() as listener:
        real_grpc = real.urls["billing"]["grpc"]
        forward = f"grpc://{real_grpc}" if binding == "GRPC" else real.urls["billing"]["url"]
        spec = {"forward": forward, "headers": {"Authorization": "Bearer real-secret"}, "token": "{{vars.token}}"}
        async with agents(tmp_path / "proxy", {"billing": spec}) as proxy:
            client_of = grpc_client(real.urls["billing"]["url"], real_grpc, proxy.urls["billing"]["grpc"], version) \
                if binding == "GRPC" else connect(proxy.urls["billing"]["url"], binding, version)
            async with client_of as client:
                asking = request("A refund for ORD-1001 please")
                asking.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
                asking.configuration.task_push_notification_config.url = listener.url
                asking.configuration.task_push_notification_config.token = "caller-token"
                [answer] = [e async for e in client.send_message(asking, context=call(TOKEN))]
                task_id = answer.task.id
                body = await listener.settled(_finished_v03 if version == "0.3" else _finished_v10)
                relayed = await _relayed(proxy)
                # a config set on its own: the real agent keeps the proxy's URL, the orchestrator reads its own
                done = await send(client, "refund ORD-2", token=TOKEN)
                config = TaskPushNotificationConfig(task_id=done.id, id="c1", url=listener.url + "?again", token="t")
                await client.create_task_push_notification_config(config, context=call(TOKEN))
                got = await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=done.id, id="c1"), context=call(TOKEN))
    assert answer.task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert {token for token, _ in listener.received} == {"caller-token"}
    assert (body.get("id") or (body.get("statusUpdate") or body.get("task") or {}).get("taskId")
            or body["task"]["id"]) == task_id
    settled = [e for e in relayed if e["state"] == "completed"] or await _relayed(proxy, len(listener.received))
    assert {(e["agent"], e["task_id"], e["url"], e["status"]) for e in settled} >= {
        ("billing", task_id, listener.url, 200)}
    assert got.url == listener.url + "?again"
    stored = [c for c in real._session.events if c.name == "push_failed"]
    assert not stored, stored
    assert not [e for e in proxy._session.events if e.name == "push_failed"]


async def test_a_push_the_listener_refuses_is_said_and_the_real_agent_hears_the_refusal(tmp_path: Path) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, listening(status=401) as listener, \
            agents(tmp_path / "proxy", {"billing": {"forward": real.urls["billing"]["url"]}}) as proxy, \
            connect(proxy.urls["billing"]["url"], "JSONRPC", "1.0") as client:
        asking = request("A refund for ORD-1001 please")
        asking.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        asking.configuration.task_push_notification_config.url = listener.url
        asking.configuration.task_push_notification_config.token = "caller-token"
        [answer] = [e async for e in client.send_message(asking, context=call())]
        await _relayed(proxy)
        async with asyncio.timeout(10):
            while not [e for e in real._session.events if e.name == "push_failed"]:
                await asyncio.sleep(0.02)
    [failed, *_] = [e.data for e in proxy._session.events if e.name == "push_failed"]
    assert (failed["agent"], failed["task_id"], failed["url"]) == ("billing", answer.task.id, listener.url)
    assert failed["reason"].startswith("HTTP 401")
    # the real agent posted to the proxy, and heard the listener's 401 from it
    [told, *_] = [e.data for e in real._session.events if e.name == "push_failed"]
    assert "/.tamesu/push/" in told["url"] and told["reason"].startswith("HTTP 401")


async def test_a_proxy_bound_to_every_interface_gives_the_real_agent_a_push_url_it_can_call(tmp_path: Path) -> None:
    # before: with `addr: 0.0.0.0:PORT` the real agent was told to post to http://0.0.0.0:PORT/.tamesu/push/KEY
    # (and the orchestrator to call http://0.0.0.0:PORT): the address bound, not one to call (Windows refuses it)
    async with agents(tmp_path / "real", {"billing": {**BILLING, "addr": "0.0.0.0:0"}}) as real, \
            listening() as listener, \
            agents(tmp_path / "proxy", {"billing": {"forward": real.urls["billing"]["url"], "addr": "0.0.0.0:0"}}) \
            as proxy:
        url = proxy.urls["billing"]["url"]
        async with connect(url, "JSONRPC", "1.0") as client:
            asking = request("A refund for ORD-1001 please")
            asking.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
            asking.configuration.task_push_notification_config.url = listener.url
            [answer] = [e async for e in client.send_message(asking, context=call())]
            await listener.settled(_finished_v10)
            [relayed, *_] = await _relayed(proxy)
        # what the real agent holds is what it was told to post to
        async with connect(real.urls["billing"]["url"], "JSONRPC", "1.0") as direct:
            held = await direct.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=answer.task.id), context=call())
    port = url.rsplit(":", 1)[1]
    assert url == f"http://127.0.0.1:{port}" and real.urls["billing"]["grpc"].startswith("127.0.0.1:"), real.urls
    assert [c.url.startswith(f"http://127.0.0.1:{port}/.tamesu/push/") for c in held.configs] == [True], held.configs
    assert (relayed["task_id"], relayed["url"], relayed["status"]) == (answer.task.id, listener.url, 200)
    assert not [e for e in [*real._session.events, *proxy._session.events] if e.name == "push_failed"]


async def test_a_resent_pushs_url_is_named_without_its_password(tmp_path: Path) -> None:
    # before: `resent` (and the relay's push_relayed/push_failed) named the listener's url with its user:password@,
    # in the run's events and so in its folder; the password was no declared secret, so nothing masked it
    session = new_session(tmp_path)
    relay = PushRelay("billing", session)
    server = RemoteAgentServer("billing", RemoteAgentSpec(), session, None, lambda d: None, lambda n, b: None,
                               lambda d, m: None)
    server._make_handler(Addresses(origin="http://127.0.0.1:9", grpc=None))
    assert server._push_client is not None
    try:
        async with faulty_server("reset") as port:
            for client in (relay._client, server._push_client):
                with pytest.raises(httpx.HTTPError):  # the reset: connection failed before any answer
                    await client.post(f"http://alice:hunter2@127.0.0.1:{port}/push", content=b"x" * 1_000_000)
    finally:
        await relay.aclose()
        await server._push_client.aclose()
    resent = [e.data["url"] for e in session.events if e.name == "resent"]
    assert resent == [f"http://***@127.0.0.1:{port}/push"] * 2, resent
    assert "hunter2" not in repr([e.data for e in session.events])
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"hunter2" in p.read_bytes()]
