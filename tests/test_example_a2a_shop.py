"""The example A2A shop agent (examples/a2a-shop) against a2a-sdk's own client, on every binding and version.

The agent runs as a user runs it (`python examples/a2a-shop/agent.py --port 0 --grpc-port 0`), once for the
module, as a fork of the warm process (`forked.script_command`, which has imported a2a-sdk's server side: a fresh
interpreter spent 0.85 s of CPU importing it, grpc and starlette before it listened, in every worker that ran a
test of this module). Each test takes the agent's card, keeps only the interface of one binding and one protocol
version, and lets the SDK's client factory pick the matching transport, so "jsonrpc-0.3" really speaks
`message/send` to the JSON-RPC endpoint and "grpc-1.0" the `lf.a2a.v1.A2AService` service.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import grpc
import httpx
import pytest
from a2a.client import A2AClientError, Client, ClientCallContext
from a2a.types.a2a_pb2 import (
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import forked
from a2a_clients import pinned_client
from conftest import warm_demo
from lifeline import tied
from tamesu.net.serve import ThreadServer
from tamesu.targets import is_known

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "a2a-shop"
TOKEN = "test-token-4711"
WORD_DELAY = 0.02  # seconds between streamed words: long enough to leave a stream and come back mid-answer
STATUS_REPLY = "Order ORD-1001 (blue sneakers) is shipped, arriving Friday."

COMBOS = [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0"),
          ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3"), ("GRPC", "0.3")]
COMBO_IDS = [f"{binding.lower().replace('+json', '')}-{version}" for binding, version in COMBOS]
combos = pytest.mark.parametrize(("binding", "version"), COMBOS, ids=COMBO_IDS)


@dataclass(frozen=True)
class Shop:
    jsonrpc: str
    grpc: str
    output: list[str]

    @property
    def origin(self) -> str:
        return self.jsonrpc.removesuffix("/a2a")


def _start_shop(extra_env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], Shop]:
    agent = subprocess.Popen(
        tied(forked.script_command(EXAMPLE / "agent.py", "--port", "0", "--grpc-port", "0",
                                   "--word-delay", str(WORD_DELAY), *args)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **extra_env},
    )
    output: list[str] = []
    urls: dict[str, str] = {}
    ready = threading.Event()

    def read(stdout: IO[str]) -> None:
        # reads until the agent exits, so it never blocks on a full pipe; what it said goes in failure messages
        for line in stdout:
            output.append(line)
            if found := re.search(r"listening on (http://\S+)", line):
                urls["jsonrpc"] = found.group(1)
            if found := re.search(r"gRPC\s+(grpc://\S+)", line):
                urls["grpc"] = found.group(1)
            if len(urls) == 2:
                ready.set()
        ready.set()

    assert agent.stdout is not None
    threading.Thread(target=read, args=(agent.stdout,), daemon=True).start()
    if not ready.wait(timeout=30) or len(urls) < 2:
        agent.kill()
        agent.wait(timeout=5)
        raise AssertionError("the shop agent did not start:\n" + "".join(output))
    return agent, Shop(jsonrpc=urls["jsonrpc"], grpc=urls["grpc"], output=output)


def _stop_shop(agent: subprocess.Popen[str], running: Shop) -> None:
    agent.send_signal(signal.SIGTERM)
    try:
        code = agent.wait(timeout=15)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait(timeout=5)
        raise AssertionError("the shop agent did not stop within 15 s of SIGTERM") from None
    assert code == 0, "".join(running.output)


@pytest.fixture(scope="module")
def shop() -> Iterator[Shop]:
    agent, running = _start_shop({"SHOP_A2A_TOKEN": TOKEN})
    try:
        yield running
    finally:
        _stop_shop(agent, running)


SLOW_WORD_DELAY = 0.15  # the order history then takes about 2 s: room to leave and come back on a loaded machine


@pytest.fixture(scope="module")
def slow_shop() -> Iterator[Shop]:
    agent, running = _start_shop({"SHOP_A2A_TOKEN": TOKEN}, "--word-delay", str(SLOW_WORD_DELAY))
    try:
        yield running
    finally:
        _stop_shop(agent, running)


def connect(shop: Shop, binding: str, version: str, *, streaming: bool = False,
            push: TaskPushNotificationConfig | None = None) -> AbstractAsyncContextManager[Client]:
    """A client that can only speak `binding` at `version`: the card is cut down to that one interface."""
    return pinned_client(shop.origin, binding, version, streaming=streaming, push=push)


def bearer(token: str) -> ClientCallContext:
    return ClientCallContext(service_parameters={"Authorization": f"Bearer {token}"}, timeout=10)


def text(words: str) -> Part:
    return Part(text=words)


def data(value: dict[str, Any]) -> Part:
    return Part(data=ParseDict(value, struct_pb2.Value()))


def message(*parts: Part, task: Task | None = None) -> SendMessageRequest:
    # a follow-up names its task and no context: the agent must keep the task's context (an SDK pitfall)
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=list(parts),
                                              task_id=task.id if task else ""))


async def events_of(client: Client, request: SendMessageRequest,
                    context: ClientCallContext | None = None) -> list[StreamResponse]:
    return [event async for event in client.send_message(request, context=context or ClientCallContext(timeout=10))]


async def send(client: Client, *parts: Part, task: Task | None = None,
               context: ClientCallContext | None = None) -> Task:
    """One message with message/send; the task as the agent answered it."""
    answered = await events_of(client, message(*parts, task=task), context)
    assert len(answered) == 1 and answered[0].HasField("task"), answered
    return answered[0].task


def artifacts(task: Task) -> dict[str, Any]:
    """Artifact name -> its one part, as text or data."""
    found: dict[str, Any] = {}
    for artifact in task.artifacts:
        assert len(artifact.parts) == 1, artifact
        part = artifact.parts[0]
        found[artifact.name] = MessageToDict(part.data) if part.HasField("data") else part.text
    return found


def status_text(task: Task) -> str:
    return " ".join(p.text for p in task.status.message.parts)


def test_the_card_lists_every_binding_for_both_versions_1_0_first(shop: Shop) -> None:
    response = httpx.get(f"{shop.origin}/.well-known/agent-card.json", timeout=10)
    assert response.status_code == 200
    assert "max-age" in response.headers["cache-control"] and response.headers["etag"]
    card = response.json()
    listed = [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]]
    assert listed == [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0"),
                      ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3"), ("GRPC", "0.3")]
    grpc_address = shop.grpc.removeprefix("grpc://")
    assert card["supportedInterfaces"][2]["url"] == grpc_address
    # 0.3: gRPC's own target syntax, which SDK clients dial as it is, and a URL the A2A TCK's 0.3 client reads
    assert card["supportedInterfaces"][5]["url"] == f"dns://{grpc_address}/{grpc_address}"
    assert {i["url"] for i in card["additionalInterfaces"] if i["transport"] == "GRPC"} == \
        {f"dns://{grpc_address}/{grpc_address}"}
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True, "extendedAgentCard": True}
    assert [s["id"] for s in card["skills"]] == ["order-status", "returns"]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    # what an A2A 0.3 client reads from the same document
    assert card["url"] == shop.jsonrpc and card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3" and card["supportsAuthenticatedExtendedCard"] is True
    assert {i["transport"] for i in card["additionalInterfaces"]} == {"HTTP+JSON", "GRPC"}


def test_a_card_can_offer_one_version_while_the_agent_answers_both() -> None:
    agent, running = _start_shop({"SHOP_A2A_TOKEN": TOKEN}, "--protocol", "0.3")
    try:
        card = httpx.get(f"{running.origin}/.well-known/agent-card.json", timeout=10).json()
        assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"0.3"}
        assert card["url"] == running.jsonrpc and card["protocolVersion"] == "0.3"
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
        answer = httpx.post(running.jsonrpc, json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
        assert answer["error"]["code"] == -32001
    finally:
        _stop_shop(agent, running)


def test_the_jsonrpc_endpoint_answers_with_and_without_a_trailing_slash(shop: Shop) -> None:
    for url in (shop.jsonrpc, shop.jsonrpc + "/"):
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
        answer = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
        assert answer["error"]["code"] == -32001, answer  # TaskNotFound: the endpoint is there


@combos
async def test_order_status_completes_with_an_order_artifact(shop: Shop, binding: str, version: str) -> None:
    async with connect(shop, binding, version) as client:
        task = await send(client, text("Hi, where is my order ORD-1001?"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts(task) == {
        "reply": STATUS_REPLY,
        "order": {"order_id": "ORD-1001", "status": "shipped", "eta": "Friday"},
    }
    assert [m.role for m in task.history][:1] == [Role.ROLE_USER]


@combos
async def test_a_streamed_answer_comes_word_by_word(shop: Shop, binding: str, version: str) -> None:
    async with connect(shop, binding, version, streaming=True) as client:
        started = time.monotonic()
        events = await events_of(client, message(text("Where is ORD-1001?")))
        took = time.monotonic() - started
        assert events[0].HasField("task") and events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")
                  and e.artifact_update.artifact.name == "reply"]
        words, last = chunks[:-1], chunks[-1]
        assert len(words) == len(STATUS_REPLY.split())
        assert "".join(c.artifact.parts[0].text for c in words) == STATUS_REPLY
        assert not words[0].append and all(c.append for c in words[1:]), "the words after the first are appended"
        assert last.last_chunk and not last.append and last.artifact.parts[0].text == STATUS_REPLY
        final = events[-1]
        assert final.HasField("status_update")
        assert final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert took >= WORD_DELAY * (len(STATUS_REPLY.split()) - 1)
        # the task as it finally stands holds the sentence in one part, as a send would have answered
        stored = await client.get_task(GetTaskRequest(id=events[0].task.id), context=ClientCallContext(timeout=10))
    assert artifacts(stored)["reply"] == STATUS_REPLY
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED


@combos
async def test_a_return_asks_which_order_then_completes_in_the_same_task(shop: Shop, binding: str,
                                                                         version: str) -> None:
    async with connect(shop, binding, version) as client:
        asked = await send(client, text("I want to return something"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "Which order" in status_text(asked)
        done = await send(client, text("It is ORD-1002, the rain jacket."), task=asked)
    assert (done.id, done.context_id) == (asked.id, asked.context_id)
    # the follow-up named only its task: the agent put it, and its answer, in the task's context
    assert {m.context_id for m in done.history} == {asked.context_id}
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    found = artifacts(done)
    assert re.fullmatch(r"RMA-\d+", found["return"]["rma"]) and found["return"]["order_id"] == "ORD-1002"
    assert found["reply"].startswith(f"Return {found['return']['rma']} created for ORD-1002")


@combos
async def test_a_data_part_makes_a_return_without_asking(shop: Shop, binding: str, version: str) -> None:
    async with connect(shop, binding, version) as client:
        task = await send(client, data({"order": "ORD-1001", "reason": "damaged"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    record = artifacts(task)["return"]
    assert record["order_id"] == "ORD-1001" and record["reason"] == "damaged"
    assert re.fullmatch(r"RMA-\d+", record["rma"])


@combos
async def test_file_parts_are_acknowledged_by_name(shop: Shop, binding: str, version: str) -> None:
    photo = (EXAMPLE / "fixtures" / "sneakers.jpg").read_bytes()
    async with connect(shop, binding, version) as client:
        asked = await send(client, text("Here is the damaged pair"),
                           Part(raw=photo, filename="sneakers.jpg", media_type="image/jpeg"),
                           Part(url="https://photos.example.com/box.jpg", filename="box.jpg", media_type="image/jpeg"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        said = status_text(asked)
        assert f"Thanks, I received sneakers.jpg ({len(photo)} bytes), box.jpg." in said
        assert "Which order" in said
        done = await send(client, data({"order": "ORD-1001", "reason": "damaged"}), task=asked)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "I attached sneakers.jpg, box.jpg to it." in artifacts(done)["reply"]


class PushListener:
    """A local URL that keeps what is posted to it, with the headers."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        async def receive(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                self.received.append((dict(request.headers), body))
            return JSONResponse({"ok": True})

        return Starlette(routes=[Route("/push", receive, methods=["POST"])])

    async def wait_for(self, count: int, timeout: float = 10) -> list[tuple[dict[str, str], Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            await asyncio.sleep(0.02)
        raise AssertionError(f"expected {count} push notification(s) within {timeout}s, got {self.received}")


@pytest.fixture
def push_listener(serve: Callable[[Any], ThreadServer]) -> tuple[PushListener, str]:
    listener = PushListener()
    server = serve(listener.app())
    return listener, f"{server.url}/push"


@combos
async def test_push_posts_each_settled_task_with_the_token(shop: Shop, binding: str, version: str,
                                                           push_listener: tuple[PushListener, str]) -> None:
    listener, url = push_listener
    config = TaskPushNotificationConfig(url=url, token="notify-123")
    async with connect(shop, binding, version, push=config) as client:
        asked = await send(client, text("Where is my order?"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await send(client, text("ORD-1001"), task=asked)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
    pushed = await listener.wait_for(2)
    assert len(pushed) == 2
    states = []
    for headers, body in pushed:
        assert headers["x-a2a-notification-token"] == "notify-123"
        if version == "1.0":
            task = body["task"]  # a StreamResponse holding the task
            states.append(task["status"]["state"])
        else:
            task = body  # A2A 0.3 posts the Task itself
            assert task["kind"] == "task"
            states.append(task["status"]["state"])
        assert task["id"] == asked.id
    expected = (["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"] if version == "1.0"
                else ["input-required", "completed"])
    assert states == expected
    final = pushed[-1][1]["task"] if version == "1.0" else pushed[-1][1]
    names = [a["name"] for a in final["artifacts"]]
    assert names == ["reply", "order"]


@combos
async def test_the_extended_card_needs_the_token(shop: Shop, binding: str, version: str) -> None:
    async with connect(shop, binding, version) as client:
        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=bearer(TOKEN))
        assert [s.id for s in extended.skills] == ["order-status", "returns", "order-history"]
        with pytest.raises((A2AClientError, grpc.aio.AioRpcError)):
            await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=bearer("wrong"))
        if (binding, version) == ("GRPC", "0.3"):
            # GetAgentCard is also how a 0.3 gRPC client reads the public card: without credentials it gets that
            public = await client.get_extended_agent_card(GetExtendedAgentCardRequest(),
                                                          context=ClientCallContext(timeout=10))
            assert [s.id for s in public.skills] == ["order-status", "returns"]
        else:
            with pytest.raises((A2AClientError, grpc.aio.AioRpcError)):
                await client.get_extended_agent_card(GetExtendedAgentCardRequest(),
                                                     context=ClientCallContext(timeout=10))


@pytest.mark.parametrize(("path", "method"), [
    ("/rest/extendedAgentCard", "GET"), ("/rest/v1/card", "GET"),
    ("/a2a", "GetExtendedAgentCard"), ("/a2a/", "agent/getAuthenticatedExtendedCard"),
])
def test_an_extended_card_request_without_the_token_gets_401(shop: Shop, path: str, method: str) -> None:
    url = shop.origin + path
    headers = {"A2A-Version": "0.3" if "/v1/" in path or "/" in method else "1.0"}
    for given in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        if method == "GET":
            response = httpx.get(url, headers={**headers, **given}, timeout=10)
        else:
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {}}
            response = httpx.post(url, json=body, headers={**headers, **given}, timeout=10)
        assert response.status_code == 401, (given, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
    if method == "GET":
        allowed = httpx.get(url, headers={**headers, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    else:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {}}
        allowed = httpx.post(url, json=body, headers={**headers, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert allowed.status_code == 200 and "order-history" in allowed.text


@combos
async def test_order_history_waits_in_auth_required_until_the_token_comes(shop: Shop, binding: str,
                                                                          version: str) -> None:
    async with connect(shop, binding, version) as client:
        asked = await send(client, text("Show my recent orders"))
        assert asked.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
        assert "sign in" in status_text(asked)
        done = await send(client, text("Here you are"), task=asked, context=bearer(TOKEN))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    listed = artifacts(done)["orders"]["orders"]
    assert [o["order_id"] for o in listed] == ["ORD-1001", "ORD-1002", "ORD-1003"]


async def _drop_and_resubscribe(shop: Shop, binding: str, version: str) -> list[StreamResponse]:
    """The order history's stream, left after its first word and picked up with resubscribe: what came again."""
    # the longest answer the shop gives (fifteen words), so the agent is still talking when the client comes back
    async with connect(shop, binding, version, streaming=True) as client:
        seen: list[StreamResponse] = []
        request = message(text("Show my recent orders"))
        async with aclosing(client.send_message(request, context=bearer(TOKEN))) as stream:
            async for event in stream:
                seen.append(event)
                if event.HasField("artifact_update"):
                    break  # the client goes away after the first word; the agent goes on
        task_id = seen[0].task.id
        return [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=bearer(TOKEN))]


@pytest.fixture(scope="module")
def resubscribed(slow_shop: Shop) -> dict[tuple[str, str], list[StreamResponse] | BaseException]:
    """Every binding's dropped stream, made at once: each waits out the slow shop's answer (about 2 s), and one
    after another they were 15 s of a worker's time."""
    async def all_at_once() -> list[list[StreamResponse] | BaseException]:
        return await asyncio.gather(*(_drop_and_resubscribe(slow_shop, *combo) for combo in COMBOS),
                                    return_exceptions=True)

    return dict(zip(COMBOS, asyncio.run(all_at_once()), strict=True))


@combos
@pytest.mark.xdist_group("a2a-shop-drops")  # one worker makes the six drops (the module fixture) for all six
def test_a_dropped_stream_is_picked_up_with_resubscribe_and_nothing_is_lost(
        resubscribed: dict[tuple[str, str], list[StreamResponse] | BaseException], binding: str, version: str) -> None:
    again = resubscribed[(binding, version)]
    if isinstance(again, BaseException):
        raise again
    assert again[0].HasField("task"), "a resubscription starts with the task as it stands"
    assert again[0].task.status.state == TaskState.TASK_STATE_WORKING
    snapshot = again[0].task.artifacts[0].parts
    later = [e.artifact_update for e in again[1:] if e.HasField("artifact_update")
             and e.artifact_update.artifact.name == "reply"]
    assert later, "the rest of the answer streamed after resubscribing"
    whole = later[-1].artifact.parts[0].text
    assert later[-1].last_chunk and whole.startswith("Your recent orders: ORD-1001")
    before = "".join(p.text for p in snapshot)
    after = [c.artifact.parts[0].text for c in later if c.append]
    # a2a-sdk's tapped queue "may receive some old events" it had not dispatched when the task was read: a word at
    # the seam may come in the snapshot and again as the first chunks after it (twice in some twenty full runs,
    # under load). Nothing may be lost or come out of order, and a repeat only at the seam
    seams = [k for k in range(len(after) + 1)
             if before.endswith("".join(after[:k])) and before + "".join(after[k:]) == whole]
    assert seams, ("every word arrived, before or after the drop", before, after, whole)
    assert again[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


def _a2a_target_missing() -> bool:
    # a half-built package imports as a namespace package, so ask the registry the suite loader asks
    return importlib.util.find_spec("tamesu.targets.a2a") is None or not is_known("a2a")


@pytest.mark.skipif(_a2a_target_missing(),
                    reason="tamesu's a2a target (tamesu.targets.a2a) is not available yet; the demo's suite needs it")
@pytest.mark.parametrize("protocol", ["both", "0.3"])
def test_the_a2a_demo_runs_its_suite_and_passes(tmp_path: Path, protocol: str) -> None:
    # its agent a fork of the warm process too, as the module's shops are
    agent_python = {"TAMESU_DEMO_PYTHON": shlex.join(forked.script_python())}
    def run_demo(out: Path) -> subprocess.CompletedProcess[str]:
        out.mkdir()
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_a2a.py"), "--protocol", protocol,
                               "--out", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **warm_demo(out), **agent_python})

    # the suite's latency bounds (turn_latency_ms_p95 under 3 s, time_to_first_token_ms under 2 s) are wall-clock
    # bounds on a local agent: full CI runs starved them (the suite 31 and 41 s for its usual 5; p95 3.5 to 8.5 s,
    # first token 2.3 s) while every other check passed. A run that failed only latency checks is made again, at
    # most twice; one must pass, and any other failure fails at once
    printed: list[str] = []
    for attempt in ("first", "again", "last"):
        demo = run_demo(tmp_path / attempt)
        printed.append(demo.stdout + demo.stderr)
        if demo.returncode != 1 or not _only_latency_failed(demo.stdout):
            break
    assert demo.returncode == 0, "\n---\n".join(printed)


def _only_latency_failed(printed: str) -> bool:
    failed = [line.strip() for line in printed.splitlines() if line.strip().startswith("✗")]
    return bool(failed) and all(re.match(r"✗ (slo/|\S+/metric: )\w+_ms(_p\d+)?: ", line) for line in failed)


def test_the_a2a_pages_example_is_where_the_page_says_and_make_integration_runs_it() -> None:
    # the A2A page: "examples/a2a-agent is a small shop agent ... make integration builds it and runs the suite
    # with the fake models"; examples/a2a-agent is the shop (one agent, two names), the demo is the test above
    agent = ROOT / "examples" / "a2a-agent"
    assert agent.resolve() == (ROOT / "examples" / "a2a-shop").resolve()
    assert (agent / "shop.tamesu.yaml").is_file() and (agent / "agent.py").is_file()
    planned = subprocess.run(["make", "-n", "integration"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert "scripts/demo_a2a.py" in planned.stdout
