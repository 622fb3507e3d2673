"""`remote_agents:`: tamesu's scripted A2A agents, talked to by a2a-sdk's own client on every binding and version,
and as the engine uses them (delegations, `delegated_to`, `fuzz_tools`, `token`, template checks).

A client here can speak only one binding at one version: the card is cut down to that interface and the SDK's
factory picks the matching transport, so "GRPC 0.3" really calls the `a2a.v1.A2AService` compat service.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import A2AClientError, Client, ClientCallContext
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_clients import pinned_client
from sdk_groups import IN_PROCESS_A2A_SERVER
from tamesu.conversation import AgentTurn, Exchange, Session, UserTurn
from tamesu.fuzzing import HOSTILE_TEXT, FuzzSpec
from tamesu.net.serve import LoopServer
from tamesu.remote.group import RemoteAgents
from tamesu.suite.remote_agents import RemoteAgentSpec
from tamesu.suite.secrets import Redactor
from tamesu.suite.templates import Context

pytestmark = IN_PROCESS_A2A_SERVER  # tamesu's remote agents serve A2A in this process: a2a-sdk's server side

TOKEN = "remote-token-42"
REFUSED = (A2AClientError, A2AError, grpc.aio.AioRpcError)
"""What an SDK client raises for an error the agent answered, whatever the binding."""
COMBOS = [(b, v) for b in ("JSONRPC", "HTTP+JSON", "GRPC") for v in ("1.0", "0.3")]
combos = pytest.mark.parametrize(("binding", "version"), COMBOS, ids=[f"{b}-{v}" for b, v in COMBOS])

BILLING = {
    "skills": ["refund", "invoice-lookup"],
    "reply": "I can help with refunds and invoices.",
    "replies": [
        {"when": "(?i)refund", "say": "Refund issued, reference RF-889", "data": {"reference": "RF-889"}},
        {"when": "(?i)cancel", "say": "Which order should I cancel?", "state": "input-required"},
    ],
    "extended": {"skills": ["bulk-refund"], "description": "Billing for partners"},
}


def _session(tmp_path: Path, fuzz: dict[str, Any] | None = None, urls: dict[str, Any] | None = None) -> Session:
    return Session(context=Context(remote=urls if urls is not None else {}, vars={"token": TOKEN}),
                   artifacts_dir=tmp_path, redactor=Redactor(), run_id="r", base_dir=tmp_path,
                   fuzz_tools={k: FuzzSpec.model_validate(v) for k, v in (fuzz or {}).items()})


@asynccontextmanager
async def agents(tmp_path: Path, specs: dict[str, dict[str, Any]], fuzz: dict[str, Any] | None = None
                 ) -> AsyncIterator[RemoteAgents]:
    urls: dict[str, Any] = {}
    group = RemoteAgents({n: RemoteAgentSpec.model_validate(s) for n, s in specs.items()},
                         _session(tmp_path, fuzz, urls), urls)
    try:
        await group.start()
        yield group
    finally:
        await group.stop()


def connect(url: str, binding: str, version: str, *, streaming: bool = False) -> AbstractAsyncContextManager[Client]:
    # no credentials on the client itself: each call says whether it carries the token (`call`)
    return pinned_client(url, binding, version, streaming=streaming)


def call(token: str | None = None) -> ClientCallContext:
    return ClientCallContext(service_parameters={"Authorization": f"Bearer {token}"} if token else None, timeout=10)


def request(words: str, task: Task | None = None) -> SendMessageRequest:
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex,
                                              parts=[Part(text=words)], task_id=task.id if task else "",
                                              context_id=task.context_id if task else ""))


async def send(client: Client, words: str, token: str | None = None, task: Task | None = None) -> Task:
    events = [e async for e in client.send_message(request(words, task), context=call(token))]
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


def reply_of(task: Task) -> dict[str, Any]:
    return MessageToDict(task)["artifacts"][0]


@combos
async def test_a_client_sends_streams_gets_and_cancels(tmp_path: Path, binding: str, version: str) -> None:
    async with agents(tmp_path, {"billing": BILLING}) as group:
        url = group.urls["billing"]["url"]
        async with connect(url, binding, version) as client:
            task = await send(client, "A refund for ORD-1001 please")
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            parts = reply_of(task)["parts"]
            assert parts[0]["text"] == "Refund issued, reference RF-889"
            assert parts[1]["data"] == {"reference": "RF-889"}
            again = await client.get_task(GetTaskRequest(id=task.id), context=call())
            assert again.status.state == TaskState.TASK_STATE_COMPLETED
            with pytest.raises(REFUSED):  # a finished task is not cancelable
                await client.cancel_task(CancelTaskRequest(id=task.id), context=call())
            asked = await send(client, "Please cancel my order")
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            canceled = await client.cancel_task(CancelTaskRequest(id=asked.id), context=call())
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        async with connect(url, binding, version, streaming=True) as client:
            events: list[StreamResponse] = [e async for e in client.send_message(request("hello"), context=call())]
            assert events[-1].HasField("status_update") or events[-1].HasField("task")
            texts = [p.text for e in events if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts]
            assert texts == ["I can help with refunds and invoices."]
    delegations = group.delegations
    assert [d.message for d in delegations] == ["A refund for ORD-1001 please", "Please cancel my order", "hello"]
    assert {(d.binding, d.version) for d in delegations} == {({"HTTP+JSON": "http"}.get(binding, binding.lower()),
                                                              version)}
    assert [d.state for d in delegations] == ["completed", "input-required", "completed"]


@combos
async def test_push_configs_and_the_extended_card(tmp_path: Path, binding: str, version: str) -> None:
    async with agents(tmp_path, {"billing": {**BILLING, "token": "{{vars.token}}"}}) as group:
        url = group.urls["billing"]["url"]
        async with connect(url, binding, version) as client:
            task = await send(client, "refund", token=TOKEN)
            config = TaskPushNotificationConfig(task_id=task.id, id="c1", url="http://127.0.0.1:9/push", token="t")
            await client.create_task_push_notification_config(config, context=call(TOKEN))
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="c1"), context=call(TOKEN))
            assert got.url == "http://127.0.0.1:9/push"
            extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=call(TOKEN))
            assert [s.id for s in extended.skills] == ["refund", "invoice-lookup", "bulk-refund"]
            assert extended.description == "Billing for partners"
            if (binding, version) == ("GRPC", "0.3"):  # GetAgentCard is also 0.3 gRPC's public card
                public = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=call())
                assert [s.id for s in public.skills] == ["refund", "invoice-lookup"]
            else:
                with pytest.raises(REFUSED):
                    await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=call())
            with pytest.raises(REFUSED):  # without the token: refused
                await send(client, "refund without a token", token="wrong")
    assert [d.message for d in group.delegations] == ["refund"], "a refused request is not a delegation"


async def test_an_agent_without_an_extended_card_gives_0_3_grpc_its_public_card(tmp_path: Path) -> None:
    # before: "The agent does not support authenticated extended cards", so a 0.3 gRPC client (and tamesu's a2a
    # target with a `skill:`) found no card at all
    spec = {key: value for key, value in BILLING.items() if key != "extended"}
    async with agents(tmp_path, {"billing": spec}) as group, \
            connect(group.urls["billing"]["url"], "GRPC", "0.3") as client:
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=call())
    assert [s.id for s in card.skills] == ["refund", "invoice-lookup"]
    assert not card.capabilities.extended_agent_card


async def test_a_suite_with_remote_agents_measures_no_delegation_as_zero(tmp_path: Path) -> None:
    # before: `metric: {name: delegations, lte: 2}` failed "delegations was not measured" for an agent that
    # answered without delegating, and the example needed `missing: pass` on delegations_refused
    async with agents(tmp_path, {"billing": BILLING}) as group:
        pass
    assert (group._session.counters["delegations"], group._session.counters["delegations_refused"]) == (0, 0)


class Listener:
    """A caller's push-notification endpoint on a free port: keeps each notification's token and body."""

    def __init__(self, status: int = 200) -> None:
        self.received: list[tuple[str | None, dict[str, Any]]] = []
        self.arrived = asyncio.Event()

        async def take(request: Request) -> Response:
            self.received.append((request.headers.get("x-a2a-notification-token"), await request.json()))
            self.arrived.set()
            return Response(status_code=status)

        self.server = LoopServer(Starlette(routes=[Route("/push", take, methods=["POST"])]))
        self.url = self.server.url + "/push"

    async def settled(self, finished: Any) -> dict[str, Any]:
        """The first notification `finished(body)` accepts, waited for (at most 10 s)."""
        async with asyncio.timeout(10):
            while True:
                for _, body in self.received:
                    if finished(body):
                        return body
                self.arrived.clear()
                await self.arrived.wait()


@asynccontextmanager
async def listening(status: int = 200) -> AsyncIterator[Listener]:
    listener = Listener(status)
    await listener.server.start()
    try:
        yield listener
    finally:
        await listener.server.stop()


def _finished_v03(body: dict[str, Any]) -> bool:
    return body.get("kind") == "task" and body["status"]["state"] == "completed"


def _finished_v10(body: dict[str, Any]) -> bool:
    state = (body.get("statusUpdate") or body.get("task") or {}).get("status", {}).get("state")
    return state == "TASK_STATE_COMPLETED"


@combos
async def test_push_notifications_reach_the_callers_listener_in_its_versions_shape(
        tmp_path: Path, binding: str, version: str) -> None:
    async with agents(tmp_path, {"billing": BILLING}) as group, listening() as listener, \
            connect(group.urls["billing"]["url"], binding, version) as client:
        asking = request("A refund for ORD-1001 please")
        asking.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        asking.configuration.task_push_notification_config.url = listener.url
        asking.configuration.task_push_notification_config.token = "caller-token"
        [answer] = [e async for e in client.send_message(asking, context=call())]
        task_id = answer.task.id
        assert task_id and answer.task.status.state == TaskState.TASK_STATE_SUBMITTED  # the answer comes by push
        body = await listener.settled(_finished_v03 if version == "0.3" else _finished_v10)
    assert {token for token, _ in listener.received} == {"caller-token"}
    if version == "0.3":  # the finished task itself, as a 0.3 listener reads it
        assert body["id"] == task_id
        assert body["artifacts"][0]["parts"][0] == {"kind": "text", "text": "Refund issued, reference RF-889"}
    else:  # 1.0: stream responses, as the SDK posts them
        assert (body.get("statusUpdate") or body.get("task"))["taskId" if "statusUpdate" in body else "id"] == task_id


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_push_the_callers_listener_refuses_is_said(tmp_path: Path, version: str) -> None:
    # before: logged to the run folder only, so an orchestrator whose listener refused its notifications (or named
    # a URL nothing listens at) waited for an answer that had come and gone, and the run never said so
    async with agents(tmp_path, {"billing": BILLING}) as group, listening(status=401) as listener, \
            connect(group.urls["billing"]["url"], "JSONRPC", version) as client:
        asking = request("A refund for ORD-1001 please")
        asking.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        asking.configuration.task_push_notification_config.url = listener.url
        asking.configuration.task_push_notification_config.token = "caller-token"
        [answer] = [e async for e in client.send_message(asking, context=call())]
        failed: list[Any] = []
        async with asyncio.timeout(10):  # the refused post comes after the answer, on the agent's own time
            while not failed:
                failed = [e.data for e in group._session.events if e.name == "push_failed"]
                await asyncio.sleep(0.02)
    assert failed[0]["agent"] == "billing" and failed[0]["task_id"] == answer.task.id
    assert failed[0]["url"] == listener.url
    assert failed[0]["reason"].startswith("HTTP 401")
    assert "caller-token" not in json.dumps(failed)


@combos
async def test_tasks_are_listed_and_resubscribed(tmp_path: Path, binding: str, version: str) -> None:
    async with agents(tmp_path, {"billing": BILLING}) as group:
        url = group.urls["billing"]["url"]
        async with connect(url, binding, version) as client:
            done = await send(client, "refund ORD-1")
            waiting = await send(client, "Please cancel my order")
            if version == "1.0":  # ListTasks is new in 1.0: 0.3 has no tasks/list
                listed = await client.list_tasks(ListTasksRequest(), context=call())
                assert {t.id for t in listed.tasks} >= {done.id, waiting.id}
                only = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED),
                                               context=call())
                assert [t.id for t in only.tasks] == [waiting.id]
        async with connect(url, binding, version, streaming=True) as streaming, \
                connect(url, binding, version) as other:
            seen: list[StreamResponse] = []

            async def follow() -> None:
                async for event in streaming.subscribe(SubscribeToTaskRequest(id=waiting.id), context=call()):
                    seen.append(event)

            following = asyncio.create_task(follow())
            try:
                async with asyncio.timeout(10):
                    while not seen:  # subscribed: the task as it stands comes first
                        await asyncio.sleep(0.02)
                    answered = await send(other, "refund ORD-2 instead", task=waiting)
                    await following
            finally:
                following.cancel()
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen[0].HasField("task") and seen[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    last = seen[-1]
    final = last.status_update.status.state if last.HasField("status_update") else last.task.status.state
    assert final == TaskState.TASK_STATE_COMPLETED
    texts = [p.text for e in seen if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts
             if p.text]
    assert texts == ["Refund issued, reference RF-889"]


async def test_the_card_declares_the_bearer_scheme(tmp_path: Path) -> None:
    shipping = {"shipping": {"skills": ["track"], "token": "{{vars.token}}"}}
    async with agents(tmp_path, shipping) as group, httpx.AsyncClient(timeout=10) as http:
        card = (await http.get(group.urls["shipping"]["card"])).json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        assert [s["id"] for s in card["skills"]] == ["track"]
        denied = await http.post(group.urls["shipping"]["url"] + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
                "kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}})
        assert denied.status_code == 401
    assert group.delegations == []
    assert [e.name for e in group._session.events].count("delegation_refused") == 1


@pytest.mark.parametrize(("fuzz", "state", "text"), [
    ("error", TaskState.TASK_STATE_FAILED, "503 Service Unavailable: the service did not answer"),
    ("empty", TaskState.TASK_STATE_COMPLETED, ""),
    ("hostile", TaskState.TASK_STATE_COMPLETED, HOSTILE_TEXT),
    ({"mode": "delay", "delay": "0.2s"}, TaskState.TASK_STATE_COMPLETED, "Refund issued, reference RF-889"),
    ({"mode": "custom", "text": "Refunds are paused"}, TaskState.TASK_STATE_COMPLETED, "Refunds are paused"),
], ids=["error", "empty", "hostile", "delay", "custom"])
async def test_fuzz_tools_replace_the_replies(tmp_path: Path, fuzz: Any, state: int, text: str) -> None:
    async with agents(tmp_path, {"billing": BILLING}, fuzz={"billing": fuzz}) as group:
        url = group.urls["billing"]["url"]
        async with connect(url, "JSONRPC", "1.0") as client:
            task = await send(client, "refund please")
    assert task.status.state == state
    found = MessageToDict(task)
    said = [p.get("text", "") for a in found.get("artifacts", []) for p in a["parts"]]
    said += [p.get("text", "") for p in found["status"].get("message", {}).get("parts", [])]
    assert text in said or (text == "" and not any(said))
    assert group.delegations[0].fuzzed == (fuzz if isinstance(fuzz, str) else fuzz["mode"])
    assert group._session.counters["tools_fuzzed"] == 1


def test_delegations_become_tool_calls_of_their_turn(tmp_path: Path) -> None:
    from tamesu.remote.executor import Delegation

    group = RemoteAgents({}, _session(tmp_path), {})
    group.delegations = [Delegation(agent="billing", message="refund ORD-1", reply="RF-889", at_ms=15.0,
                                    reply_data={"reference": "RF-889"})]
    exchanges = [Exchange(1, UserTurn(text="a"), AgentTurn(sent_at_ms=0, completed_at_ms=10)),
                 Exchange(2, UserTurn(text="b"), AgentTurn(sent_at_ms=12, completed_at_ms=30))]
    group.attach(exchanges)
    [call_] = exchanges[1].agent.tool_calls
    assert (call_.name, call_.kind, call_.turn, call_.args) == ("billing", "delegation", 2, {"message": "refund ORD-1"})
    assert call_.result == {"text": "RF-889", "data": {"reference": "RF-889"}}


def test_a_fixed_addr_that_is_taken_is_an_infra_error(tmp_path: Path) -> None:
    import asyncio
    import socket

    from tamesu.errors import InfraError

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]

        async def start() -> None:
            async with agents(tmp_path, {"billing": {"addr": f"127.0.0.1:{port}"}}):
                pass

        with pytest.raises(InfraError, match="cannot listen"):
            asyncio.run(start())
    finally:
        taken.close()


def test_remote_templates_and_delegated_to_are_checked_when_the_suite_loads(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text("""\
remote_agents:
  billing: { skills: [refund], replies: [{ when: "(", say: x }] }
  shipping: { addr: "nowhere" }
targets:
  bot:
    type: a2a
    url: http://127.0.0.1:9
    metadata: { billing: "{{remote.biling.url}}", other: "{{remote.billing.port}}" }
tests:
  - name: t
    target: bot
    scenario: { script: [{ say: hi }] }
    assert:
      - delegated_to: { agent: billing, colour: red }
""", encoding="utf-8")
    done = tamesu(["validate"], cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "not a regular expression" in out
    assert "expected host:port" in out
    (tmp_path / "s.tamesu.yaml").write_text("""\
remote_agents:
  billing: { skills: [refund] }
targets:
  bot:
    type: a2a
    url: http://127.0.0.1:9
    metadata: { billing: "{{remote.biling.url}}", other: "{{remote.billing.port}}" }
tests:
  - name: t
    target: bot
    scenario: { script: [{ say: hi }] }
    assert:
      - delegated_to: { agent: billing, colour: red }
""", encoding="utf-8")
    done = tamesu(["validate"], cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "no remote agent 'biling' (remote_agents: billing)" in out
    assert "a remote agent has url, grpc, card" in out
    assert "not a delegated_to option" in out


def test_an_unquoted_date_in_data_is_text_sent_and_answered(tmp_path: Path, tamesu: Any) -> None:
    # YAML makes `2026-01-31` a date: validate said ok, then "internal error: TypeError: Object of type date is
    # not JSON serializable" for a step's data, and a remote agent's reply data failed as the agent's fault
    (tmp_path / "s.tamesu.yaml").write_text("""\
remote_agents:
  billing:
    reply: default
    replies: [ { when: "(?i)date", say: "a date", data: { due: 2026-01-31 } } ]
targets:
  b: { type: a2a, url: "{{remote.billing.url}}" }
tests:
  - name: step date
    target: b
    scenario: { script: [ { data: { due: 2026-01-31, at: 2026-01-31T10:00:00 } } ] }
    assert: [ { contains: default } ]
  - name: reply date
    target: b
    scenario: { script: [ { say: "date please" } ] }
    assert: [ { contains: "a date" }, { json_path: { path: "$..due", equals: "2026-01-31" } } ]
  - name: quarantined until a date
    target: b
    quarantine: { reason: still a date, until: 2099-01-01 }
    scenario: { script: [ { say: hi } ] }
    assert: [ { contains: nothing } ]
""", encoding="utf-8")
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed, 1 quarantined" in done.stdout, done.stdout
    [transcript] = list((tmp_path / "out").glob("*/*/step-date/run-1/transcript.json"))
    assert '2026-01-31T10:00:00' in transcript.read_text()


def test_data_is_matched_and_asserted_as_written(tmp_path: Path, tamesu: Any) -> None:
    # before: `{qty: 2}` arrived as `{"qty": 2.0}` (a protobuf Struct's doubles), `Müller` was searched as
    # `M\u00fcller`, and `delegated_to` read only the message's text: all three failed
    (tmp_path / "q.tamesu.yaml").write_text("""\
remote_agents:
  billing:
    reply: default
    replies:
      - { when: '"qty": 2}', say: two }
      - { when: "Müller", say: "hello Müller" }
targets:
  b: { type: a2a, url: "{{remote.billing.url}}" }
tests:
  - { name: int, target: b, scenario: { script: [ { data: { qty: 2 } } ] }, assert: [ { contains: two } ] }
  - name: unicode
    target: b
    scenario: { script: [ { data: { name: "Müller" } } ] }
    assert: [ { contains: "hello Müller" } ]
  - name: delegated data
    target: b
    scenario: { script: [ { data: { order: ORD-13 } } ] }
    assert: [ { delegated_to: { agent: billing, contains: ORD-13 } } ]
""", encoding="utf-8")
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = list((tmp_path / "out").glob("*/*/int/run-1/result.json"))
    [call] = [c for c in json.loads(result.read_text())["tool_calls"] if c["kind"] == "delegation"]
    assert call["args"]["data"] == [{"qty": 2}]


def test_a_remote_template_in_a_suite_hook_is_one_problem(tmp_path: Path, tamesu: Any) -> None:
    # each was said twice, once as "a after_all hook runs after every test"; in tamesu.yaml's hooks, not said why
    (tmp_path / "tamesu.yaml").write_text('hooks:\n  after_all: [ "echo {{remote.billing.url}}" ]\n')
    (tmp_path / "s.tamesu.yaml").write_text("""\
remote_agents: { billing: { reply: ok } }
hooks:
  before_all: [ "echo {{remote.billing.url}}" ]
targets: { b: { type: a2a, url: "{{remote.billing.url}}" } }
tests:
  - { name: t, target: b, scenario: { script: [ { say: hi } ] } }
""", encoding="utf-8")
    done = tamesu(["validate"], cwd=tmp_path)
    said = [line for line in (done.stdout + done.stderr).splitlines() if "remote.billing.url" in line]
    assert [line.split(": ", 1)[0] for line in said] == ["s.tamesu.yaml:3:17", "tamesu.yaml:2:16"], said
    assert all("remote agents run only during each run" in line for line in said), said


PINNED = """\
remote_agents:
  billing: { ADDR reply: "hello from billing" }
targets:
  billing: { type: a2a, url: "{{remote.billing.url}}" }
tests:
  - name: first
    target: billing
    fuzz_tools: { billing: { mode: delay, delay: 1s } }
    scenario: { script: [{ say: hi }] }
    assert: [{ contains: "hello from billing" }]
  - name: second
    target: billing
    fuzz_tools: { billing: { mode: delay, delay: 1s } }
    scenario: { script: [{ say: hi }] }
    assert: [{ contains: "hello from billing" }]
"""


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned-addr", "free-ports"])
def test_tests_pinning_an_addr_never_run_at_once(tmp_path: Path, tamesu: Any, pinned: bool) -> None:
    import json
    import socket
    from datetime import datetime

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        addr = f'addr: "127.0.0.1:{spare.getsockname()[1]}",' if pinned else ""
    (tmp_path / "pin.tamesu.yaml").write_text(PINNED.replace("ADDR", addr), encoding="utf-8")
    done = tamesu(["run", "--parallel", "2", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    spans = []
    for found in (tmp_path / "out").glob("*/*/*/run-1/result.json"):
        result = json.loads(found.read_text())
        start = datetime.fromisoformat(result["started_at"]).timestamp()
        spans.append((start, start + result["duration_ms"] / 1000))
    assert len(spans) == 2, done.stdout
    (_, first_end), (second_start, _) = sorted(spans)
    if pinned:  # one after the other: the second could not have bound the port while the first held it
        assert second_start >= first_end - 0.01, spans
    else:  # the control: without a pinned addr the two runs do overlap under --parallel 2
        assert second_start < first_end, spans


async def test_reply_data_numbers_go_out_as_the_sdk_writes_them(tmp_path: Path) -> None:
    # what docs/remote-agents.md says: a2a-sdk carries a data part as a protobuf Value and prints its doubles
    # with their `.0`, on every JSON binding and version, with no public way to write an integer. When this
    # fails, the SDK writes whole numbers as written: say so there instead
    billing = {"reply": "ok", "replies": [{"when": ".", "say": "three", "data": {"count": 3, "price": 2.5}}]}
    sends = {
        ("JSONRPC", "1.0"): ("", {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}),
        ("JSONRPC", "0.3"): ("", {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
            "kind": "message", "messageId": "m2", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}),
        ("HTTP+JSON", "1.0"): ("/message:send", {"message": {
            "messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        ("HTTP+JSON", "0.3"): ("/v1/message:send", {"message": {
            "messageId": "m4", "role": "ROLE_USER", "content": [{"text": "hi"}]}}),
    }
    async with agents(tmp_path, {"billing": billing}) as group, httpx.AsyncClient(timeout=10) as http:
        url = group.urls["billing"]["url"]
        for (binding, version), (path, body) in sends.items():
            sent = await http.post(url + path, headers={"A2A-Version": version}, json=body)
            assert sent.status_code == 200, (binding, version, sent.text)
            assert re.search(r'"count":\s*3\.0\b', sent.text), (binding, version, sent.text)
    # tamesu's own record keeps what the suite wrote
    assert [d.reply_data for d in group.delegations] == [{"count": 3, "price": 2.5}] * 4
