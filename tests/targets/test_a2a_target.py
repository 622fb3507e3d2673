"""The a2a target against real A2A agents (agents.a2a_agents, a2a-sdk's server side): every binding, both
protocol versions, send, stream and push, and every failure the A2A target page names."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface
from pydantic import ValidationError

from ports import refused_port
from sdk_groups import IN_PROCESS_A2A_SERVER
from sessions import events, new_session
from tamesu.checks import parse_assertion
from tamesu.checks.base import Exchange, RunView
from tamesu.conversation import AgentTurn, FileRef, Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.targets import target_class
from tamesu.targets.a2a import A2ASpec, A2ATarget
from tamesu.targets.a2a._normalize import merged, push_body
from tamesu.targets.a2a._push import TOKEN_HEADER, PushListener
from tamesu.targets.a2a._read import TurnReader
from tamesu.targets.a2a._transport import PREFERRED_HERE, choose, grpc_target

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

pytestmark = IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side

VERSIONS = ["v10", "v03"]
BINDINGS = ["jsonrpc", "http", "grpc"]
MODES: dict[str, dict[str, Any]] = {"send": {}, "stream": {"stream": True}, "push": {"push": True}}
SHOWN_VERSION = {"v10": "1.0", "v03": "0.3"}


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


def make_session(tmp_path: Path) -> Session:
    from agents.a2a_agents import TOKEN

    return new_session(tmp_path, environ={"SHOP_TOKEN": TOKEN})


@asynccontextmanager
async def opened(spec: dict[str, Any], session: Session, *, poll_interval: float | None = None
                 ) -> AsyncIterator[A2ATarget]:
    target = A2ATarget(A2ASpec.model_validate({"type": "a2a", **spec}), "shop")
    if poll_interval is not None:
        target.poll_interval = poll_interval
    await target.open(session)
    try:
        yield target
    finally:
        await target.close()


def names(session: Session) -> list[str]:
    return [e.name for e in session.events]


def view(session: Session, *turns: AgentTurn) -> RunView:
    return RunView(exchanges=[Exchange(i, UserTurn(text=f"user {i}"), t) for i, t in enumerate(turns, start=1)],
                   metrics={}, captured={}, events=session.events, tool_calls=[], context=session.context,
                   base_dir=session.base_dir)


async def assert_holds(entry: dict[str, Any], run: RunView) -> None:
    assertion = parse_assertion(entry)
    verdict = await assertion.check.evaluate(run.scoped(assertion.on_turn))
    assert verdict.passed, verdict.reason


# -- the registry and the keys ---------------------------------------------------------------------------


def test_registered_under_a2a() -> None:
    assert target_class("a2a") is A2ATarget
    assert A2ATarget.Spec is A2ASpec


def test_spec_rejects_what_cannot_work() -> None:
    with pytest.raises(ValidationError, match="url must start with"):
        A2ASpec.model_validate({"type": "a2a", "url": "ftp://agent"})
    with pytest.raises(ValidationError, match="keep one"):
        A2ASpec.model_validate({"type": "a2a", "url": "http://a", "stream": True, "push": True})
    with pytest.raises(ValidationError, match="transport"):
        A2ASpec.model_validate({"type": "a2a", "url": "http://a", "transport": "soap"})
    with pytest.raises(ValidationError, match="host:port"):
        A2ASpec.model_validate({"type": "a2a", "url": "http://a", "push": {"addr": "nowhere"}})
    spec = A2ASpec.model_validate({"type": "a2a", "url": "grpc://h:1", "push": {"addr": "0.0.0.0:9000",
                                                                             "url": "https://tunnel/push"}})
    assert spec.push_spec is not None and spec.push_spec.url == "https://tunnel/push"
    assert spec.turn_timeout == 60.0


def test_a_push_url_without_addr_is_refused_where_written(tmp_path: Path, tamesu: Any) -> None:
    # before: accepted; the listener took a free port the url (a tunnel's) could not lead to, so every
    # notification went nowhere and the run passed, each turn 5 s slower through the fallback tasks/get
    (tmp_path / "suite.yaml").write_text("""\
targets:
  shop:
    type: a2a
    url: http://127.0.0.1:9/a2a
    push: { url: "https://tunnel.example.com/push" }
tests:
  - { name: hello, target: shop, scenario: { script: [ { say: hi } ] } }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "suite.yaml:5:11: targets.shop.push: url needs addr: the port the url leads to" in result.stderr, \
        result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_counterpart_binding_the_targets_fixed_push_port_is_refused_where_written(tmp_path: Path,
                                                                                   tamesu: Any) -> None:
    # before: valid, and every run exit 3: "cannot listen for push notifications on 127.0.0.1:PORT: Address
    # already in use", the second of the two listeners a run opens
    (tmp_path / "suite.yaml").write_text("""\
targets:
  buyer: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "127.0.0.1:18951" } }
  seller: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "127.0.0.1:18951" } }
  other: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "127.0.0.1:18952" } }
tests:
  - { name: clash, target: buyer, counterpart: { target: seller, opening: hi }, scenario: { max_turns: 2 } }
  - { name: fine, target: buyer, counterpart: { target: other, opening: hi }, scenario: { max_turns: 2 } }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "suite.yaml:6:58: tests[0].counterpart.target: the counterpart seller binds 127.0.0.1:18951 as the test's "
        "target buyer does: both listen for the whole run, so give one of them another port (or none: a free one)",
        "1 problem found"], result.stderr


def test_runs_whose_push_listener_has_a_fixed_port_never_run_at_once(agents: A2AAgents, tmp_path: Path,
                                                                     tamesu: Any) -> None:
    # before: under --parallel (or --repeat with it) the second run could not bind push.addr, which the first
    # held: "cannot listen for push notifications on 127.0.0.1:PORT: Address already in use", exit 3
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: a2a, url: '{agents.urls["v10"]}/a2a', push: {{ addr: '127.0.0.1:{port}' }} }}
tests:
  - {{ name: one, target: shop, scenario: {{ script: [ {{ say: hello }}, {{ say: again }} ] }} }}
  - {{ name: two, target: shop, scenario: {{ script: [ {{ say: hello }}, {{ say: again }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--parallel", "2", "--repeat", "2", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed, 0 failed" in result.stdout, result.stdout


# -- the matrix: every binding, both versions, send, stream and push ---------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("version", VERSIONS)
async def test_matrix_same_assertions_everywhere(agents: A2AAgents, tmp_path: Path, version: str, binding: str,
                                                 mode: str) -> None:
    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls[version]}/a2a", "transport": binding, **MODES[mode]}
    async with opened(spec, session) as target:
        asked = await target.send(UserTurn(text="order status please"))
        answered = await target.send(UserTurn(text="ORD-1001"))
        echoed = await target.send(UserTurn(text="thanks", data={"rating": 5}))
        metrics = target.metrics()

    transport = events(session, "transport")[0]
    assert (transport["binding"], transport["protocol_version"], transport["mode"]) == (
        binding, SHOWN_VERSION[version], mode)
    assert echoed.response["artifacts"][0]["parts"][0]["data"]["version"] == SHOWN_VERSION[version]

    assert asked.text == "Which order number?"
    assert asked.response["status"]["state"] == "input-required"
    assert answered.response["id"] == asked.response["id"]  # the follow-up continued the task
    assert answered.text == 'Order ORD-1001 has shipped\n{"order": "ORD-1001", "status": "shipped"}'
    assert echoed.response["id"] != answered.response["id"]  # completed: a new task...
    assert echoed.response["contextId"] == asked.response["contextId"]  # ...in the same context
    assert not any(turn.ended for turn in (asked, answered, echoed))

    run = view(session, asked, answered, echoed)
    await assert_holds({"json_path": {"path": "$.status.state", "equals": "completed"}, "on_turn": 2}, run)
    await assert_holds({"json_path": {"path": "$.status.state", "equals": "completed"}, "on_turn": "last"}, run)
    await assert_holds({"json_path": {"path": "$.artifacts[*].name", "equals": "order"}, "on_turn": 2}, run)
    await assert_holds({"json_path": {"path": "$.artifacts[*].parts[?(@.kind == 'data')].data",
                                      "equals": {"order": "ORD-1001", "status": "shipped"}}, "on_turn": 2}, run)
    await assert_holds({"json_path": {"path": "$.artifacts[*].parts[?(@.kind == 'data')].data.data",
                                      "equals": [{"rating": 5}]}, "on_turn": 3}, run)
    await assert_holds({"json_path": {"path": "$.status.state", "equals": "input-required"}, "on_turn": 1}, run)

    assert names(session).count("task_input_required") == 1
    assert names(session).count("task_completed") == 2
    assert metrics["a2a_tasks"] == 2
    assert metrics["a2a_skills"] == 2
    assert metrics["a2a_requests"] >= 3
    if mode == "stream":
        assert metrics["a2a_resubscribes"] == 0
        assert all(t.first_token_at_ms is not None and t.sent_at_ms <= t.first_token_at_ms <= t.completed_at_ms
                   for t in (asked, answered, echoed))
        assert [e["kind"] for e in answered.raw][-1] == "status-update"
    else:
        assert asked.first_token_at_ms is None
    if mode == "push":
        assert metrics["a2a_pushes"] >= 3
        assert events(session, "push_received") and not events(session, "push_missed")
    for turn in (asked, answered, echoed):
        assert 0 < turn.sent_at_ms <= turn.completed_at_ms
        json.dumps(turn.raw)  # result.json keeps it as it is


# -- what a message carries, and how a turn reads --------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_data_files_metadata_and_headers_reach_the_agent(agents: A2AAgents, tmp_path: Path,
                                                               binding: str) -> None:
    from agents.a2a_agents import TOKEN

    (tmp_path / "note.txt").write_text("two pairs, size 42")
    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls['v10']}/a2a", "transport": binding, "metadata": {"tenant": "acme"},
            "headers": {"Authorization": "Bearer {{secrets.SHOP_TOKEN}}"}}
    turn = UserTurn(text="here", data={"order": "ORD-1001", "reason": "damaged"}, files=[
        FileRef(name="note.txt", mime="text/plain", path="note.txt"),
        FileRef(name="photo.jpg", mime="image/jpeg", uri="https://files.example/photo.jpg")],
        options={"metadata": {"channel": "jsonl"}})
    async with opened(spec, session) as target:
        answer = await target.send(turn)
    received = answer.response["artifacts"][0]["parts"][0]["data"]
    assert received["said"] == "here"
    assert received["data"] == [{"order": "ORD-1001", "reason": "damaged"}]
    assert received["files"] == [
        {"name": "note.txt", "mime": "text/plain", "size": 18, "text": "two pairs, size 42"},
        {"name": "photo.jpg", "mime": "image/jpeg", "uri": "https://files.example/photo.jpg"}]
    assert received["metadata"] == {"tenant": "acme", "channel": "jsonl"}
    assert received["auth"] == f"Bearer {TOKEN}"  # headers travel as gRPC metadata too


async def test_a_file_that_cannot_be_read_is_not_the_agents_fault(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v10']}/a2a"}, session) as target:
        with pytest.raises(InfraError, match=r"cannot read the file gone\.pdf"):
            await target.send(UserTurn(files=[FileRef(name="gone.pdf", path="gone.pdf")]))


@pytest.mark.parametrize("mode", ["send", "stream"])
async def test_turn_text_from_messages_history_and_files(agents: A2AAgents, tmp_path: Path, mode: str) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v03']}/a2a", **MODES[mode]}, session) as target:
        pong = await target.send(UserTurn(text="ping"))
        quiet = await target.send(UserTurn(text="quiet please"))
        receipt = await target.send(UserTurn(text="file my receipt"))
    assert (pong.text, pong.response["kind"]) == ("pong", "message")
    assert pong.response["parts"] == [{"kind": "text", "text": "pong"}]
    assert quiet.text == "Thinking about quiet please"  # no status message, no artifact: the history after ours
    assert receipt.text == "Here is your receipt\n[receipt.txt]"
    file_part = receipt.response["artifacts"][0]["parts"][0]
    assert file_part["kind"] == "file" and file_part["file"]["name"] == "receipt.txt"
    assert file_part["file"]["mimeType"] == "text/plain"


async def test_whole_numbers_in_the_agents_data_read_as_the_agent_wrote_them(tmp_path: Path, serve: Any) -> None:
    # before: `{"count": 3}` from an agent read back `{"count": 3.0}` (a2a-sdk parses a data part into a protobuf
    # Value, whose numbers are doubles): judges, golden files and `{{captured.x}}` ("3.0 items") saw the .0
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    data = {"count": 3, "price": 2.5, "ids": [1, 22], "big": 2 ** 60}

    async def card(request: Request) -> JSONResponse:
        url = f"{str(request.base_url).rstrip('/')}/rpc"
        return JSONResponse({"name": "Counter", "version": "1", "description": "d", "capabilities": {},
                             "skills": [], "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                             "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC",
                                                      "protocolVersion": "1.0"}]})

    async def rpc(request: Request) -> JSONResponse:
        payload = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": payload["id"], "result": {"message": {
            "messageId": "m1", "role": "ROLE_AGENT", "metadata": {"attempt": 1},
            "parts": [{"text": "counted"}, {"data": data}]}}})

    base = serve(Starlette(routes=[Route("/.well-known/agent-card.json", card),
                                   Route("/rpc", rpc, methods=["POST"])])).url
    async with opened({"url": f"{base}/rpc"}, make_session(tmp_path)) as target:
        turn = await target.send(UserTurn(text="count"))
    assert turn.text == 'counted\n{"big": 1.152921504606847e+18, "count": 3, "ids": [1, 22], "price": 2.5}'
    assert turn.response["parts"][1]["data"]["count"] == 3 and type(turn.response["parts"][1]["data"]["count"]) is int
    assert turn.response["metadata"] == {"attempt": 1}
    assert type(turn.response["metadata"]["attempt"]) is int


@pytest.mark.parametrize("word, state", [("fail", "failed"), ("reject", "rejected")])
async def test_a_task_that_ends_badly_ends_the_conversation(agents: A2AAgents, tmp_path: Path, word: str,
                                                            state: str) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v10']}/a2a", "stream": True}, session) as target:
        turn = await target.send(UserTurn(text=word))
    assert turn.ended
    assert turn.response["status"]["state"] == state
    assert events(session, f"task_{state}")


async def test_auth_required_is_continued_like_input_required(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v03']}/a2a", "transport": "grpc"}, session) as target:
        first = await target.send(UserTurn(text="login"))
        second = await target.send(UserTurn(text="done, signed in"))
    assert first.response["status"]["state"] == "auth-required"
    assert second.response["id"] == first.response["id"]
    assert second.text == "Signed in"
    assert events(session, "task_auth_required")


@pytest.mark.parametrize("mode", ["send", "stream"])
async def test_an_artifact_the_agent_replaces_is_read_again(agents: A2AAgents, tmp_path: Path, mode: str) -> None:
    # before: the reader kept how many parts of each artifact it had read, so a draft revised in place (append
    # false, same artifactId, one part as before) read as nothing new: turn 2 was "Revised" without the draft
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v10']}/a2a", **MODES[mode]}, session) as target:
        first = await target.send(UserTurn(text="draft a letter"))
        second = await target.send(UserTurn(text="yes, but shorter"))
    assert first.text == "Approve?\ndraft one"
    assert second.text == "Revised\ndraft two"


async def test_closing_cancels_a_task_waiting_for_input(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v10']}/rest", "transport": "http"}, session) as target:
        asked = await target.send(UserTurn(text="order something"))
    task_id = asked.response["id"]
    assert task_id in agents.canceled
    assert events(session, "task_canceled")[0]["task_id"] == task_id


# -- following a task: polling, push, resubscribe ---------------------------------------------------------


async def test_send_polls_a_working_task_until_it_settles(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v10']}/a2a"}, session) as target:
        turn = await target.send(UserTurn(text="early bird"))
        metrics = target.metrics()
    states = [doc["status"]["state"] for doc in turn.raw]
    assert states[0] in ("submitted", "working") and states[-1] == "completed"  # the send, then tasks/get
    assert turn.response == turn.raw[-1]
    assert turn.text == 'Ready\nready\n{"ready": true}'
    assert metrics["a2a_requests"] >= 2  # the send and at least one tasks/get


async def test_a_push_that_never_comes_is_found_by_the_fallback_poll(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    skipped_before = agents.pushes_skipped
    started = time.monotonic()
    port = _free_port()
    spec = {"url": f"{agents.urls['v10']}/a2a", "push": {"addr": f"127.0.0.1:{port}"}}
    # Ten intervals of 0.1s: the fallback tasks/get comes after one second instead of five.
    async with opened(spec, session, poll_interval=0.1) as target:
        turn = await target.send(UserTurn(text="nopush please"))
        metrics = target.metrics()
    assert turn.response["status"]["state"] == "completed"
    assert turn.response["artifacts"][0]["name"] == "result"
    assert agents.pushes_skipped > skipped_before
    assert metrics["a2a_pushes"] == 0 and not events(session, "push_received")
    assert time.monotonic() - started >= 0.9  # it waited for the fallback, not for a push
    assert events(session, "transport")[0]["push_url"] == f"http://127.0.0.1:{port}/a2a/push"
    # said (before: nothing but a slower turn told an agent whose notifications never came)
    missed = events(session, "push_missed")
    assert missed and missed[-1]["state"] == "completed" and missed[-1]["task_id"] == turn.response["id"], missed
    assert f"no notification of it reached http://127.0.0.1:{port}/a2a/push within 1s" in missed[-1]["reason"]


async def test_push_listener_checks_the_token(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    listener = PushListener(session, host="127.0.0.1", port=0, public_url=None)
    await listener.start()
    task = {"kind": "task", "id": "t1", "contextId": "c1", "status": {"state": "completed"}}
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            refused = await client.post(listener.url, json=task, headers={TOKEN_HEADER: "guess"})
            tokenless = await client.post(listener.url, json=task)
            garbled = await client.post(listener.url, json={"hello": 1}, headers={TOKEN_HEADER: listener.token})
            accepted = await client.post(listener.url, json=task, headers={TOKEN_HEADER: listener.token})
        arrived = await listener.next(1.0)
    finally:
        await listener.stop()
    assert (refused.status_code, tokenless.status_code, garbled.status_code, accepted.status_code) == \
           (401, 401, 400, 200)
    assert listener.received == 1
    # before: refused in silence, so an agent that never sent the token was only slower (the fallback poll)
    said = events(session, "push_refused")
    assert [(e["status"], e["reason"].split(":")[0]) for e in said] == \
           [(401, f"a wrong {TOKEN_HEADER}"), (401, f"no {TOKEN_HEADER} header")]
    assert all("guess" not in json.dumps(e) for e in said)
    assert arrived is not None and arrived[0]["id"] == "t1" and arrived[0]["status"]["state"] == "completed"
    assert events(session, "push_received") == [{"task_id": "t1", "kind": "task", "state": "completed"}]
    assert events(session, "push_unreadable")


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("version", VERSIONS)
async def test_a_dropped_stream_is_resubscribed_and_nothing_is_lost(agents: A2AAgents, tmp_path: Path,
                                                                    version: str, binding: str) -> None:
    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls[version]}/a2a", "transport": binding, "stream": True}
    async with opened(spec, session) as target:
        turn = await target.send(UserTurn(text="drop it"))
        metrics = target.metrics()
    assert metrics["a2a_resubscribes"] >= 1
    assert events(session, "resubscribed")[0]["task_id"] == turn.response["id"]
    assert turn.response["status"]["state"] == "completed"
    assert [a["name"] for a in turn.response["artifacts"]] == ["part-1", "part-2", "part-3"]
    assert turn.text == "Done\nchunk 1\nchunk 2\nchunk 3"
    assert not turn.ended


# -- the card --------------------------------------------------------------------------------------------


async def test_card_event_and_skill_by_id_or_name(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['v10']}/a2a", "skill": "Order status"}, session):
        pass
    card = events(session, "card")[0]
    assert (card["name"], card["version"], card["skills"]) == ("Test Shop", "1.2.0", ["order-status", "returns"])
    assert events(session, "transport")[0]["skill"] == "order-status"
    assert card["found_at"] == f"{agents.urls['v10']}/.well-known/agent-card.json"


async def test_a_skill_the_card_lacks_fails_the_session_naming_the_skills(agents: A2AAgents,
                                                                          tmp_path: Path) -> None:
    with pytest.raises(InfraError) as caught:
        async with opened({"url": f"{agents.urls['v03']}/a2a", "skill": "teleport"}, make_session(tmp_path)):
            pass
    message = str(caught.value)
    assert "does not offer the skill 'teleport'" in message
    assert "order-status (Order status)" in message and "returns (Returns)" in message


async def test_a_missing_card_is_an_event_not_an_error(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['nocard']}/a2a"}, session) as target:
        turn = await target.send(UserTurn(text="hello"))
        metrics = target.metrics()
    tried = events(session, "card_missing")[0]["tried"]
    assert len(tried) == 4 and all("HTTP 404" in t for t in tried)
    transport = events(session, "transport")[0]
    assert (transport["binding"], transport["protocol_version"]) == ("jsonrpc", "1.0")
    assert turn.response["status"]["state"] == "completed"
    assert "a2a_skills" not in metrics


async def test_the_card_about_the_url_wins_over_the_hosts_card(tmp_path: Path, serve: Any) -> None:
    # before: a host serving several agents, each with its card under its own path, and a card of its own at the
    # origin: the origin's card was taken for every agent's (its skills, its streaming), so `skill` failed
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def card(name: str, path: str, skill: str) -> Any:
        async def serve_card(request: Request) -> JSONResponse:
            return JSONResponse({
                "name": name, "version": "1", "description": "d", "capabilities": {},
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                "skills": [{"id": skill, "name": skill, "description": skill, "tags": []}],
                "supportedInterfaces": [{"url": f"{str(request.base_url).rstrip('/')}{path}",
                                         "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})
        return serve_card

    base = serve(Starlette(routes=[
        Route("/.well-known/agent-card.json", card("Host", "/a2a", "directory")),
        Route("/agents/billing/.well-known/agent-card.json", card("Billing", "/agents/billing", "refund"))])).url
    session = make_session(tmp_path)
    async with opened({"url": f"{base}/agents/billing", "skill": "refund"}, session):
        pass
    [found] = events(session, "card")
    assert (found["name"], found["found_at"]) == ("Billing", f"{base}/agents/billing/.well-known/agent-card.json")
    # the host's own url still reads the host's card
    session = make_session(tmp_path)
    async with opened({"url": f"{base}/a2a", "skill": "directory"}, session):
        pass
    assert events(session, "card")[0]["name"] == "Host"


def trickling_card() -> Any:
    """An app whose every card place answers 200 and then a byte every 0.2 s, for ever."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def card(_: Request) -> StreamingResponse:
        async def trickle() -> AsyncIterator[bytes]:
            yield b"{"
            while True:
                await asyncio.sleep(0.2)
                yield b" "
        return StreamingResponse(trickle(), media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", card, methods=["GET"])])


async def test_a_card_that_never_ends_is_given_up_naming_the_timeouts(tmp_path: Path, serve: Any) -> None:
    # before: httpx's timeouts are per read, so a server sending a byte now and then held the card's reading,
    # and the run, until the test's own timeout (5 minutes by default)
    site = serve(trickling_card())
    session = make_session(tmp_path)
    started = time.monotonic()
    async with asyncio.timeout(90), opened({"url": f"{site.url}/a2a", "turn_timeout": "1s",
                                           "connect": {"timeout": "1s"}}, session):
        pass
    tried = events(session, "card_missing")[0]["tried"]
    # the search stops there: a server this slow at one place is as slow at the others (it was four waits)
    assert tried == [f"{site.url}/.well-known/agent-card.json: no whole answer within 2s (connect.timeout + "
                     "turn_timeout); the server took the connection and gave no whole answer: the other 3 places "
                     "were not tried"], tried
    assert time.monotonic() - started < 30


async def test_a_missing_card_fails_the_session_when_skill_needs_it(agents: A2AAgents, tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="skill 'returns' needs the agent card, and none was found"):
        async with opened({"url": f"{agents.urls['nocard']}/a2a", "skill": "returns"}, make_session(tmp_path)):
            pass


async def test_a_path_the_server_redirects_is_where_tamesu_was_sent(tmp_path: Path, serve: Any) -> None:
    # before: "the agent answered HTTP 307: Temporary Redirect", the agent's fault (exit 1), of a url one
    # trailing / away from the endpoint
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def endpoint(request: Any) -> JSONResponse:
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}})

    base = serve(Starlette(routes=[Route("/a2a/", endpoint, methods=["POST"])])).url
    session = make_session(tmp_path)
    async with opened({"url": f"{base}/a2a"}, session) as target:
        with pytest.raises(InfraError, match=r"the agent's server redirected the request at http://[^:]+:\d+/a2a: "
                                             r"HTTP 307 .*does url name "
                                             r"the agent's endpoint exactly \(a trailing /\)\?"):
            await target.send(UserTurn(text="hello"))


async def test_a_404_with_no_a2a_error_in_it_is_where_tamesu_was_sent(tmp_path: Path, serve: Any) -> None:
    # before: an HTTP+JSON message:send answered 404 by a server with no such route read "the agent answered error
    # -32601: Resource not found" (a2a-sdk names a bare 404 MethodNotFound): the agent's fault, exit 1
    from starlette.applications import Starlette

    base = serve(Starlette()).url  # every path: 404 Not Found, no A2A error
    async with opened({"url": base, "transport": "http"}, make_session(tmp_path)) as target:
        with pytest.raises(InfraError, match=r"the agent's server refused the request at http://127\.0\.0\.1:\d+: "
                                             r"HTTP 404 .*does url name the agent's endpoint"):
            await target.send(UserTurn(text="hello"))


async def test_a_refusal_at_the_targets_own_url_names_it(tmp_path: Path, serve: Any) -> None:
    # before: "the agent's server refused the request: HTTP 404 (Not Found): does url name the agent's endpoint?"
    # and not which url: a wrong path was seen only by reading the suite again. Its credentials and query unsaid
    from starlette.applications import Starlette

    base = str(serve(Starlette()).url).rstrip("/")
    url = base.replace("http://", "http://ann:pa55word@") + "/v1/agnet?key=k3y"
    for transport, status in (("http", "404"), ("jsonrpc", "40[45]")):
        async with opened({"url": url, "transport": transport}, make_session(tmp_path)) as target:
            with pytest.raises(InfraError) as refused:
                await target.send(UserTurn(text="hello"))
        said = str(refused.value)
        assert re.search(rf"the agent's server refused the request at http://\*\*\*@127\.0\.0\.1:\d+/v1/agnet\?\.\.\.: "
                         rf"HTTP {status} ", said), said
        assert "pa55word" not in said and "k3y" not in said and "ann:" not in said, said


async def test_a_refusal_at_the_url_the_card_gave_names_that_url(tmp_path: Path, serve: Any) -> None:
    # before: "HTTP 404 (Not Found): does url name the agent's endpoint?" of a url the request never went to: the
    # card sent it to its own interface URL, said only in the transport event
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def card(request: Request) -> JSONResponse:
        moved = f"{str(request.base_url).rstrip('/')}/moved"
        return JSONResponse({"name": "Moved", "version": "1", "description": "d", "capabilities": {}, "skills": [],
                             "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                             "supportedInterfaces": [{"url": moved, "protocolBinding": "JSONRPC",
                                                      "protocolVersion": "1.0"}]})

    base = serve(Starlette(routes=[Route("/.well-known/agent-card.json", card)])).url
    async with opened({"url": base}, make_session(tmp_path)) as target:
        with pytest.raises(InfraError) as refused:
            await target.send(UserTurn(text="hello"))
    said = str(refused.value)
    assert "HTTP 404" in said
    assert f"at {base}/moved, the JSONRPC interface the agent card gives for url {base}" in said


async def test_a_url_the_card_gave_that_cannot_be_reached_is_said_to_be_the_cards(tmp_path: Path,
                                                                                    serve: Any) -> None:
    # before: "cannot reach http://127.0.0.1:PORT/a2a after 1 attempt", a URL the user never wrote, with no word
    # that the card named it (a card written in a container names a host only its own network knows)
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    elsewhere = f"http://127.0.0.1:{refused_port()}/a2a"
    card = {"name": "Boxed", "version": "1", "description": "d", "capabilities": {}, "skills": [],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "supportedInterfaces": [{"url": elsewhere, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}
    base = serve(Starlette(routes=[Route("/.well-known/agent-card.json", lambda _: JSONResponse(card))])).url
    spec = {"url": base, "connect": {"attempts": 1}}
    async with opened(spec, make_session(tmp_path)) as target:
        with pytest.raises(InfraError) as unreachable:
            await target.send(UserTurn(text="hello"))
    assert f"cannot reach {elsewhere}, the JSONRPC interface the agent card gives for url {base}, after 1 " \
        "attempt: " in str(unreachable.value), str(unreachable.value)


async def test_a_refusal_of_the_binding_the_card_named_says_so(tmp_path: Path, serve: Any) -> None:
    # before: "HTTP 404 (Not Found): does url name the agent's endpoint?" of the right endpoint: the card named
    # HTTP+JSON there, tamesu spoke it, and the JSON-RPC server had no /message:send
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def card(request: Request) -> JSONResponse:
        return JSONResponse({"name": "Wrong binding", "version": "1", "description": "d", "capabilities": {},
                             "skills": [], "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                             "supportedInterfaces": [{"url": f"{str(request.base_url).rstrip('/')}/a2a",
                                                      "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]})

    async def jsonrpc(request: Request) -> JSONResponse:
        asked = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": asked["id"], "result": {"message": {
            "messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}}})

    base = serve(Starlette(routes=[Route("/.well-known/agent-card.json", card),
                                   Route("/a2a", jsonrpc, methods=["POST"])])).url
    async with opened({"url": f"{base}/a2a"}, make_session(tmp_path)) as target:
        with pytest.raises(InfraError) as refused:
            await target.send(UserTurn(text="hello"))
    assert "HTTP 404" in str(refused.value)
    assert ("spoken as HTTP+JSON (A2A 1.0), the binding the agent card names for url: set transport if the agent "
            "speaks another there") in str(refused.value)
    async with opened({"url": f"{base}/a2a", "transport": "jsonrpc"}, make_session(tmp_path)) as target:
        assert (await target.send(UserTurn(text="hello"))).text == "hello"


async def test_a_method_not_found_says_the_version_the_card_named(tmp_path: Path, serve: Any) -> None:
    # before: "the agent answered error -32601: Method not found", nothing saying tamesu had spoken A2A 0.3
    # (message/send) because the card said so, to an agent that speaks only 1.0 (SendMessage)
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def card(request: Request) -> JSONResponse:
        return JSONResponse({"name": "Old card", "version": "1", "description": "d", "capabilities": {},
                             "skills": [], "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                             "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC",
                             "url": f"{str(request.base_url).rstrip('/')}/a2a"})

    async def only_1_0(request: Request) -> JSONResponse:
        asked = await request.json()
        if asked["method"] == "SendMessage":
            return JSONResponse({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32600, "message": "no"}})
        return JSONResponse({"jsonrpc": "2.0", "id": asked["id"],
                             "error": {"code": -32601, "message": "Method not found"}})

    base = serve(Starlette(routes=[Route("/.well-known/agent-card.json", card),
                                   Route("/a2a", only_1_0, methods=["POST"])])).url
    async with opened({"url": f"{base}/a2a"}, make_session(tmp_path)) as target:
        with pytest.raises(TurnError) as failed:
            await target.send(UserTurn(text="hello"))
    assert str(failed.value) == ("the agent answered error -32601: Method not found (tamesu spoke A2A 0.3, the "
                                 "version the agent card names for this interface: does the agent speak it?)")


async def test_a_grpc_call_refused_as_unauthenticated_is_where_tamesu_was_sent(tmp_path: Path) -> None:
    # before: "the agent answered an error: gRPC UNAUTHENTICATED: ...", the agent's fault (exit 1), where HTTP's
    # 401 of the same server was an infrastructure error (exit 3)
    from tamesu.remote.group import RemoteAgents
    from tamesu.suite.remote_agents import RemoteAgentSpec

    urls: dict[str, Any] = {}
    session = make_session(tmp_path)
    group = RemoteAgents({"billing": RemoteAgentSpec.model_validate({"reply": "ok", "token": "t-0815"})},
                         session, urls)
    await group.start()
    try:
        async with opened({"url": f"grpc://{urls['billing']['grpc']}"}, session) as target:
            with pytest.raises(InfraError, match=r"the agent's server refused the call at grpc://[^:]+:\d+: "
                                                 r"gRPC UNAUTHENTICATED: .*"
                                                 r"check the target's headers \(a token\?\)"):
                await target.send(UserTurn(text="hello"))
    finally:
        await group.stop()


async def test_an_answer_cut_short_is_the_agents_said_as_what_it_is(tmp_path: Path, serve: Any) -> None:
    # before: "the agent answered an error: JSON Decode Error: Expecting value: line 1 column 1 (char 0)". A
    # JSON-RPC reply cut short is an A2A answer gone wrong: the agent's (a server of no A2A kind is not: below)
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def endpoint(request: Any) -> Response:
        return Response('{"jsonrpc": "2.0", "id": ', media_type="application/json")

    base = serve(Starlette(routes=[Route("/a2a", endpoint, methods=["POST"])])).url
    async with opened({"url": f"{base}/a2a"}, make_session(tmp_path)) as target:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="hello"))
    assert "an answer that is not JSON (cut short?): Expecting value at character 25 of 25" in str(caught.value)


async def test_credentials_missing_for_a_secured_card(agents: A2AAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{agents.urls['secure']}/a2a"}, session) as target:
        # not the agent's failure (exit 1, before): the request never reached it, as an MCP server's 401 is
        with pytest.raises(InfraError, match=r"the agent's server refused the request at http://[^ ]+/a2a: "
                                             r"HTTP 401 .*check the "
                                             r"target's headers \(a token\?\)"):
            await target.send(UserTurn(text="hello"))
    assert events(session, "auth_missing") == [{"schemes": ["bearer"]}]
    assert not events(session, "card_extended")


@pytest.mark.parametrize("origin, binding", [("secure", "jsonrpc"), ("secure03", "jsonrpc"), ("secure03", "http")])
async def test_credentials_read_the_extended_card(agents: A2AAgents, tmp_path: Path, origin: str,
                                                  binding: str) -> None:
    from agents.a2a_agents import TOKEN

    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls[origin]}/a2a", "skill": "refunds", "transport": binding,
            "headers": {"Authorization": "Bearer {{secrets.SHOP_TOKEN}}"}}
    async with opened(spec, session) as target:
        turn = await target.send(UserTurn(text="hello"))
        metrics = target.metrics()
    assert not events(session, "auth_missing")
    assert events(session, "card_extended")[0]["added"] == 2
    assert events(session, "card_extended")[0]["skills"] == ["bulk-orders", "refunds"]
    assert metrics["a2a_skills"] == 3
    assert turn.response["artifacts"][0]["parts"][0]["data"]["auth"] == f"Bearer {TOKEN}"
    assert TOKEN not in json.dumps([e.data for e in session.events])


async def test_a_skill_only_the_extended_card_has_names_why_that_card_was_not_read(agents: A2AAgents,
                                                                                    tmp_path: Path) -> None:
    # before: "does not offer the skill 'refunds'", the refused token only in the card_extended event
    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls['secure']}/a2a", "skill": "refunds", "headers": {"Authorization": "Bearer wrong"}}
    with pytest.raises(InfraError) as caught:
        async with opened(spec, session):
            pass
    message = str(caught.value)
    assert "does not offer the skill 'refunds'" in message and \
        "; the extended card, which may, could not be read: the agent answered HTTP 401" in message, message


async def test_a_skill_only_the_extended_card_has_says_credentials_would_read_it(agents: A2AAgents,
                                                                                  tmp_path: Path) -> None:
    # before: "does not offer the skill 'refunds': it has ...", as if no card had it, while the card offered
    # the extended card tamesu reads only when the target sends credentials
    with pytest.raises(InfraError) as caught:
        async with opened({"url": f"{agents.urls['secure']}/a2a", "skill": "refunds"}, make_session(tmp_path)):
            pass
    message = str(caught.value)
    assert "does not offer the skill 'refunds'" in message and "; the card offers an authenticated extended " \
        "card, which may: tamesu reads it when the target's headers send credentials" in message, message


@pytest.mark.parametrize("port, rpc, version", [("grpc_url", "GetExtendedAgentCard", "1.0"),
                                               ("grpc03_url", "GetAgentCard", "0.3")])
async def test_grpc_url_reads_the_card_over_grpc(agents: A2AAgents, tmp_path: Path, port: str, rpc: str,
                                                 version: str) -> None:
    session = make_session(tmp_path)
    async with opened({"url": getattr(agents, port), "skill": "bulk-orders", "stream": True}, session) as target:
        turn = await target.send(UserTurn(text="hello"))
    card = events(session, "card")[0]
    assert rpc in card["found_at"]
    transport = events(session, "transport")[0]
    assert (transport["binding"], transport["protocol_version"], transport["mode"]) == ("grpc", version, "stream")
    assert turn.response["artifacts"][0]["parts"][0]["data"]["version"] == version
    assert turn.response["status"]["state"] == "completed"
    # 1.0's card call reads the extended card: said as over HTTP, with how many skills it has
    extended = [{"count": len(card["skills"]), "skills": card["skills"], "name": card["name"],
                 "version": card["version"], "rpc": rpc}] if version == "1.0" else []
    assert events(session, "card_extended") == extended and "bulk-orders" in card["skills"]


async def test_no_streaming_and_no_push_fall_back_when_the_card_says_so(agents: A2AAgents,
                                                                        tmp_path: Path) -> None:
    for asked, event in (({"stream": True}, "no_streaming"), ({"push": True}, "no_push")):
        session = make_session(tmp_path)
        async with opened({"url": f"{agents.urls['basic']}/a2a", **asked}, session) as target:
            turn = await target.send(UserTurn(text="hello"))
            metrics = target.metrics()
        assert events(session, event)
        assert events(session, "transport")[0]["mode"] == "send"
        assert turn.response["status"]["state"] == "completed"
        assert "a2a_pushes" not in metrics and "a2a_resubscribes" not in metrics


# -- failures ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["send", "stream"])
@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("version", VERSIONS)
async def test_a_protocol_error_fails_the_turn_with_code_and_message(agents: A2AAgents, tmp_path: Path,
                                                                     version: str, binding: str, mode: str) -> None:
    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls[version]}/a2a", "transport": binding, **MODES[mode]}
    async with opened(spec, session) as target:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="error now"))
    if (version, binding, mode) == ("v03", "http", "stream"):
        # a2a-sdk's 0.3 HTTP+JSON adapter drops the connection instead of answering the error: nothing to read.
        assert str(caught.value).startswith("the stream broke: ")
        assert str(caught.value).endswith("before the agent sent a task or a message")
        return
    assert str(caught.value) == "the agent answered error -32602: no order number given"
    assert caught.value.raw["error"]["code"] == -32602
    assert caught.value.raw["error"]["message"] == "no order number given"


@pytest.mark.parametrize("mode", ["send", "stream", "push"])
async def test_an_agent_slower_than_turn_timeout_fails_on_time(agents: A2AAgents, tmp_path: Path,
                                                               mode: str) -> None:
    from agents.a2a_agents import SLOW_SECONDS

    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls['v10']}/a2a", "turn_timeout": "400ms", **MODES[mode]}
    async with opened(spec, session) as target:
        started = time.monotonic()
        with pytest.raises(TurnError, match=r"turn timed out after 0\.4s"):
            await target.send(UserTurn(text="slow down"))
        waited = time.monotonic() - started
    assert 0.35 <= waited < SLOW_SECONDS - 1  # on time, never the agent's 30 seconds


def _free_port() -> int:
    """A port nothing listens on now, for tamesu to bind itself (a push listener's fixed addr)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["http", "grpc"])
async def test_an_unreachable_agent_is_an_infrastructure_error_after_retries(tmp_path: Path, scheme: str) -> None:
    session = make_session(tmp_path)
    url = f"{scheme}://127.0.0.1:{refused_port()}/a2a" if scheme == "http" else f"grpc://127.0.0.1:{refused_port()}"
    with pytest.raises(InfraError, match="after 2 attempts"):
        async with opened({"url": url, "connect": {"attempts": 2, "backoff": "10ms"}}, session):
            pass
    assert len(events(session, "connect_retry")) == 1


# -- the pieces: transport choice, grpc addresses, the one shape ------------------------------------------


def _card(*interfaces: tuple[str, str, str]) -> AgentCard:
    return AgentCard(name="c", capabilities=AgentCapabilities(), supported_interfaces=[
        AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
        for url, binding, version in interfaces])


def test_transport_choice() -> None:
    card = _card(("http://a/rpc", "JSONRPC", "0.3"), ("http://a/rpc", "JSONRPC", "1.0"),
                 ("http://a/rest", "HTTP+JSON", "1.0"), ("a:50051", "GRPC", "1.0"))
    chosen = choose(card, "http://a/rpc/", None)
    assert (chosen.binding, chosen.url, chosen.shown_version) == ("JSONRPC", "http://a/rpc", "1.0")
    chosen = choose(card, "http://a/rpc", "grpc")  # a binding the card lists under another URL
    assert (chosen.binding, chosen.url) == ("GRPC", "a:50051")
    chosen = choose(card, "http://a/rest", None)
    assert (chosen.binding, chosen.url) == ("HTTP+JSON", "http://a/rest")
    chosen = choose(card, "http://a", None)  # an origin: the card's preferred interface
    assert (chosen.binding, chosen.url) == ("JSONRPC", "http://a/rpc")
    chosen = choose(card, "http://proxy.example/agent", None)  # not about this url: jsonrpc as written
    assert (chosen.binding, chosen.url, chosen.shown_version) == ("JSONRPC", "http://proxy.example/agent", "1.0")
    chosen = choose(card, "grpc://a:50051", None)
    assert (chosen.binding, chosen.url) == ("GRPC", "a:50051")
    legacy = _card(("http://b/a2a", "JSONRPC", "0.3.0"))
    assert choose(legacy, "http://b/a2a", "http").shown_version == "0.3"
    assert choose(None, "grpcs://b:443", None).binding == "GRPC"
    assert choose(None, "http://b/a2a", "http").binding == "HTTP+JSON"


def test_a_card_that_names_this_machine_otherwise_is_about_the_url() -> None:
    # before: url http://localhost:9/rest (a card listing http://127.0.0.1:9/rest) was "the card does not list
    # this url": JSON-RPC was spoken at the HTTP+JSON base, and the agent's 404 or 307 blamed the url
    card = _card(("http://127.0.0.1:9/rpc", "JSONRPC", "1.0"), ("http://0.0.0.0:9/rest", "HTTP+JSON", "1.0"),
                 ("127.0.0.1:50051", "GRPC", "1.0"))
    for url, binding, reached in [("http://localhost:9/rest", "HTTP+JSON", "http://localhost:9/rest"),
                                  ("http://127.0.0.1:9/rest/", "HTTP+JSON", "http://127.0.0.1:9/rest"),
                                  ("http://[::1]:9/rpc", "JSONRPC", "http://[::1]:9/rpc"),
                                  ("grpc://localhost:50051", "GRPC", "grpc://localhost:50051")]:
        chosen = choose(card, url, None)
        assert (chosen.binding, chosen.url, chosen.reason) == (binding, reached, PREFERRED_HERE), url
        assert chosen.at(url), url
    chosen = choose(card, "http://localhost:9/rpc", "http")  # transport: still where the card says
    assert (chosen.binding, chosen.url) == ("HTTP+JSON", "http://0.0.0.0:9/rest")
    chosen = choose(card, "http://localhost:10/rest", None)  # another port is another place
    assert (chosen.binding, chosen.url) == ("JSONRPC", "http://localhost:10/rest")
    remote = _card(("http://agents.example.com/rest", "HTTP+JSON", "1.0"))
    assert choose(remote, "https://agents.example.com/rest", None).binding == "JSONRPC"  # another scheme
    assert choose(remote, "http://agents.example.com:80/rest/", None).url == "http://agents.example.com:80/rest"


async def test_a_localhost_url_at_a_card_that_says_127_0_0_1_speaks_the_cards_binding(agents: A2AAgents,
                                                                                      tmp_path: Path) -> None:
    session = make_session(tmp_path)
    rest = f"{agents.urls['v10']}/rest".replace("127.0.0.1", "localhost")
    async with opened({"url": rest}, session) as target:
        turn = await target.send(UserTurn(text="hello"))
    transport = events(session, "transport")[0]
    assert (transport["binding"], transport["url"], transport["reason"]) == ("http", rest, PREFERRED_HERE)
    assert turn.response["status"]["state"] == "completed"


def test_grpc_addresses() -> None:
    assert grpc_target("grpc://h:5") == ("h:5", False)
    assert grpc_target("grpcs://h") == ("h:443", True)
    assert grpc_target("http://127.0.0.1:9") == ("127.0.0.1:9", False)
    assert grpc_target("agents.example.com:443") == ("agents.example.com:443", True)
    assert grpc_target("127.0.0.1:7") == ("127.0.0.1:7", False)
    assert grpc_target("localhost:7") == ("localhost:7", False)
    # the 0.3 spec's URL form, with a path as its example has one, and gRPC's own target names
    assert grpc_target("https://grpc.example.com/a2a") == ("grpc.example.com:443", True)
    assert grpc_target("dns:///127.0.0.1:7") == ("127.0.0.1:7", False)
    assert grpc_target("dns:agents.example.com:50051") == ("agents.example.com:50051", True)
    assert grpc_target("dns://8.8.8.8/agents.example.com:50051") == ("agents.example.com:50051", True)
    assert grpc_target("ipv4:127.0.0.1:7") == ("127.0.0.1:7", False)
    assert grpc_target("ipv6:[::1]:7") == ("[::1]:7", False)


def test_push_bodies_of_both_versions_read_the_same() -> None:
    v03 = {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed"},
           "artifacts": [{"artifactId": "a", "name": "order", "parts": [{"kind": "data", "data": {"x": 1}}]}]}
    v10 = {"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
                    "artifacts": [{"artifactId": "a", "name": "order", "parts": [{"data": {"x": 1}}]}]}}
    assert push_body(v03) == push_body(v10)
    assert push_body(v10)["status"] == {"state": "completed"}
    update = push_body({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}})
    assert update == {"kind": "status-update", "taskId": "t", "contextId": "c", "status": {"state": "working"},
                      "final": False}
    with pytest.raises(ValueError):
        push_body({"kind": "nonsense"})


def test_streamed_words_of_one_artifact_read_as_one_text() -> None:
    task = {"kind": "task", "id": "t", "contextId": "c", "history": [], "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "Your order "},
                                                        {"kind": "text", "text": "has shipped"},
                                                        {"kind": "data", "data": {"order": 1}},
                                                        {"kind": "text", "text": "Bye"}]}]}
    reader = TurnReader()
    assert reader.text(task, "m") == 'Your order has shipped\n{"order": 1}\nBye'
    assert reader.text(task, "m") == ""  # read once: a later turn of the same task reads only what is new


def test_merged_applies_events_to_the_task() -> None:
    task = {"kind": "task", "id": "t", "contextId": "c", "artifacts": [], "history": [],
            "status": {"state": "working", "message": {"kind": "message", "messageId": "m", "role": "agent",
                                                       "parts": [{"kind": "text", "text": "Looking"}]}}}
    chunk = {"kind": "artifact-update", "taskId": "t", "contextId": "c", "append": False, "lastChunk": False,
             "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "one"}]}}
    more = {**chunk, "append": True, "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "two"}]}}
    done = {"kind": "status-update", "taskId": "t", "contextId": "c", "status": {"state": "completed"},
            "final": True}
    now = merged(merged(merged(merged(None, task), chunk), more), done)
    assert now["status"] == {"state": "completed"}
    assert [p["text"] for p in now["artifacts"][0]["parts"]] == ["one", "two"]
    assert now["history"][0]["messageId"] == "m"  # the old status message went to the history
    assert task["status"]["state"] == "working"  # events never change what was recorded


async def test_many_sessions_at_once(agents: A2AAgents, tmp_path: Path) -> None:
    async def one(index: int) -> str:
        session = make_session(tmp_path)
        spec = {"url": f"{agents.urls['v10']}/a2a", "transport": BINDINGS[index % 3], "stream": index % 2 == 0}
        async with opened(spec, session) as target:
            return (await target.send(UserTurn(text=f"n{index}"))).text.splitlines()[0]

    said = await asyncio.gather(*(one(i) for i in range(12)))
    assert said == [f"Echo: n{i}" for i in range(12)]


async def test_transport_grpc_against_an_http1_server_says_so_at_once(tmp_path: Path, serve: Any) -> None:
    # before: "cannot reach http://... after 3 attempts: failed to connect to all addresses; ... Failed parsing
    # HTTP/2": it did reach the server, which speaks HTTP/1
    from starlette.applications import Starlette

    base = serve(Starlette()).url
    started = time.monotonic()
    async with opened({"url": f"{base}/a2a", "transport": "grpc"}, make_session(tmp_path)) as target:
        with pytest.raises(InfraError, match=r"answered in HTTP/1\.x, not gRPC \(HTTP/2\): is `transport: grpc` "
                                             r"right"):
            await target.send(UserTurn(text="hello"))
    assert time.monotonic() - started < 10
