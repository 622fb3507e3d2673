"""W3C trace context across the boundary: a `traceparent` with every request of a turn (REST headers, A2A
headers, gRPC metadata and message metadata, a rest websocket's messages and, at its handshake, the
conversation's, each turn of a gRPC stream, MCP tools/call `_meta` and HTTP headers), the trace id recorded per
turn, and `trace_url` links in the HTML report. The targets that connect before their first turn are in
test_traces_connections.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from forked import script_command
from sdk_groups import IN_PROCESS_A2A_SERVER
from sessions import new_session
from tamesu.conversation import UserTurn
from tamesu.targets.a2a import A2ASpec, A2ATarget
from tamesu.telemetry.traceparent import TraceContext

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def test_every_rest_request_carries_its_turns_trace_and_the_report_links_it(tmp_path: Path, tamesu, serve) -> None:
    seen: list[str | None] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(request.headers.get("traceparent"))
        return JSONResponse({"text": "ok"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntrace_url: 'https://jaeger.example/trace/{trace_id}'\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: two turns
    target: bot
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
""")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(seen) == 2 and all(value is not None for value in seen)
    parsed = [TRACEPARENT.match(value or "") for value in seen]
    assert all(parsed), seen
    trace_ids = [m.group(1) for m in parsed if m]
    assert trace_ids[0] != trace_ids[1]  # a trace per turn
    run_dir = next((tmp_path / "out").iterdir())
    detail = json.loads((run_dir / "suite" / "two-turns" / "run-1" / "result.json").read_text())
    assert [turn["agent"]["trace_id"] for turn in detail["turns"]] == trace_ids
    html = (run_dir / "report.html").read_text()
    for trace_id in trace_ids:
        assert f'href="https://jaeger.example/trace/{trace_id}"' in html


def test_a_suites_own_traceparent_header_wins(tmp_path: Path, tamesu, serve) -> None:
    seen: list[str | None] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(request.headers.get("traceparent"))
        return JSONResponse({"text": "ok"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    mine = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{url}/chat', headers: {{ traceparent: '{mine}' }} }}
tests:
  - name: one
    target: bot
    scenario: {{ script: [ {{ say: one }} ] }}
""")
    assert tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path).returncode == 0
    assert seen == [mine]
    # and the turn records the trace the agent got: the suite's
    detail = json.loads(next((tmp_path / "out").glob("*/suite/one/run-1/result.json")).read_text())
    assert [turn["agent"]["trace_id"] for turn in detail["turns"]] == ["ab" * 16]


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


@IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side
@pytest.mark.parametrize("transport", ["jsonrpc", "http", "grpc"])
async def test_a2a_sends_the_trace_as_header_or_grpc_metadata_and_as_message_metadata(
        agents: A2AAgents, tmp_path: Path, transport: str) -> None:
    session = new_session(tmp_path)
    target = A2ATarget(A2ASpec.model_validate({"type": "a2a", "url": f"{agents.urls['v10']}/a2a",
                                               "transport": transport, "stream": False}), "shop")
    await target.open(session)
    try:
        session.trace = TraceContext.new()
        agent = await target.send(UserTurn(text="hello"))
    finally:
        await target.close()
    echoed = agent.response["artifacts"][0]["parts"][0]["data"]
    assert echoed["traceparent"] == session.trace.traceparent
    assert echoed["metadata"]["traceparent"] == session.trace.traceparent


async def test_the_grpc_targets_unary_calls_carry_the_turns_trace(tmp_path: Path) -> None:
    import grpc

    from tamesu._proto.turn.v1 import turn_pb2, turn_pb2_grpc
    from tamesu.targets.grpc_turn.target import GrpcTarget

    seen: list[str | None] = []

    class Agent(turn_pb2_grpc.TurnServiceServicer):
        async def SendTurn(self, request, context):
            seen.append(dict(context.invocation_metadata() or ()).get("traceparent"))
            return turn_pb2.TurnReply(events=[turn_pb2.AgentEvent(delta=turn_pb2.TextDelta(text="ok")),
                                              turn_pb2.AgentEvent(turn_end=turn_pb2.TurnEnd())])

    server = grpc.aio.server()
    turn_pb2_grpc.add_TurnServiceServicer_to_server(Agent(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    session = new_session(tmp_path)
    target = GrpcTarget(GrpcTarget.Spec.model_validate({"type": "grpc", "url": f"grpc://127.0.0.1:{port}",
                                                        "mode": "unary"}), "agent")
    try:
        await target.open(session)
        traces = []
        for text in ("one", "two"):
            session.trace = TraceContext.new()
            traces.append(session.trace.traceparent)
            agent = await target.send(UserTurn(text=text))
            assert agent.text == "ok"
        await target.close()
    finally:
        await server.stop(None)
    assert seen == traces and traces[0] != traces[1]


# -- the carriers that are not a request's headers: a websocket's messages, a gRPC stream's turns, MCP's _meta --


def _turn_traces(run_dir: Path, suite: str, test: str) -> list[str]:
    detail = json.loads((run_dir / suite / test / "run-1" / "result.json").read_text())
    return [turn["agent"]["trace_id"] for turn in detail["turns"]]


def _conversation_trace(run_dir: Path, test: str) -> str:
    detail = json.loads((run_dir / "suite" / test / "run-1" / "result.json").read_text())
    [event] = [e["data"] for e in detail["events"] if e["name"] == "conversation_trace"]
    assert event["sent_in"] == ["websocket handshake header traceparent"]
    return event["trace_id"]


def _trace_ids(traceparents: list[str | None]) -> list[str]:
    parsed = [TRACEPARENT.match(value or "") for value in traceparents]
    assert all(parsed), traceparents
    return [match.group(1) for match in parsed if match]


def _project(root: Path, suite: str, models: str = "") -> None:
    (root / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntrace_url: 'https://jaeger.example/trace/{trace_id}'\n"
                                      + models)
    (root / "suite.yaml").write_text(suite)


def _linked(run_dir: Path, trace_ids: list[str]) -> bool:
    html = (run_dir / "report.html").read_text()
    return all(f'href="https://jaeger.example/trace/{trace_id}"' in html for trace_id in trace_ids)


def test_each_websocket_message_carries_its_turns_trace(tmp_path: Path, tamesu, serve) -> None:
    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    received: list[dict] = []
    handshakes: list[str | None] = []

    async def chat(websocket: WebSocket) -> None:
        await websocket.accept()
        handshakes.append(websocket.headers.get("traceparent"))
        try:
            while True:
                received.append(json.loads(await websocket.receive_text()))
                await websocket.send_json({"text": "ok", "done": True})
        except WebSocketDisconnect:
            return

    url = "ws" + serve(Starlette(routes=[WebSocketRoute("/ws", chat)])).url.removeprefix("http") + "/ws"
    _project(tmp_path, f"""\
targets:
  plain: {{ type: rest, url: '{url}', streaming: websocket, response: {{ final: $.done }} }}
  own:
    type: rest
    url: '{url}'
    streaming: websocket
    response: {{ final: $.done }}
    request: {{ body: {{ say: '{{{{message}}}}', trace: '{{{{trace.traceparent}}}}', id: '{{{{trace.id}}}}' }} }}
tests:
  - name: default body
    target: plain
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
  - name: own body
    target: own
    scenario: {{ script: [ {{ say: three }} ] }}
""")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    default = [m for m in received if "message" in m]
    own = [m for m in received if "say" in m]
    assert [m["message"] for m in default] == ["one", "two"] and [m["say"] for m in own] == ["three"]
    sent = _trace_ids([m["traceparent"] for m in default])
    assert sent == _turn_traces(run_dir, "suite", "default-body") and sent[0] != sent[1]
    assert _trace_ids([own[0]["trace"]]) == [own[0]["id"]] == _turn_traces(run_dir, "suite", "own-body")
    # the handshake comes before any turn: it carries the conversation's trace, said in an event
    conversations = [_conversation_trace(run_dir, test) for test in ("default-body", "own-body")]
    assert sorted(_trace_ids(handshakes)) == sorted(conversations) and not set(conversations) & {*sent, own[0]["id"]}
    assert _linked(run_dir, [*sent, own[0]["id"]])


def test_each_turn_of_a_grpc_stream_carries_its_trace(tmp_path: Path, tamesu) -> None:
    from concurrent import futures

    import grpc

    from tamesu._proto.turn.v1 import turn_pb2, turn_pb2_grpc

    seen: list[tuple[str, str, str | None]] = []  # (session id, the turn's traceparent, the stream's metadata)

    class Agent(turn_pb2_grpc.TurnServiceServicer):
        def Converse(self, request_iterator, context):
            metadata = dict(context.invocation_metadata() or ()).get("traceparent")
            for turn in request_iterator:
                seen.append((turn.session_id, turn.traceparent, metadata))
                yield turn_pb2.AgentEvent(delta=turn_pb2.TextDelta(text="ok"))
                yield turn_pb2.AgentEvent(turn_end=turn_pb2.TurnEnd())

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    turn_pb2_grpc.add_TurnServiceServicer_to_server(Agent(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    mine = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    _project(tmp_path, f"""\
targets:
  agent: {{ type: grpc, url: 'grpc://127.0.0.1:{port}' }}
  pinned: {{ type: grpc, url: 'grpc://127.0.0.1:{port}', headers: {{ traceparent: '{mine}' }} }}
tests:
  - name: three turns
    target: agent
    scenario: {{ script: [ {{ say: one }}, {{ say: two }}, {{ say: three }} ] }}
  - name: pinned
    target: pinned
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
""")
    try:
        result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    finally:
        server.stop(None)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    assert len({session for session, _, _ in seen}) == 2  # one stream per test run
    first = [(tp, md) for _, tp, md in seen if tp != mine]
    pinned = [(tp, md) for _, tp, md in seen if tp == mine]
    sent = _trace_ids([tp for tp, _ in first])
    assert sent == _turn_traces(run_dir, "suite", "three-turns") and len(set(sent)) == 3
    assert {md for _, md in first} == {None}  # the stream opened before its first turn
    assert pinned == [(mine, mine), (mine, mine)]  # the suite's own header wins, on the stream and in each turn
    assert _turn_traces(run_dir, "suite", "pinned") == ["ab" * 16, "ab" * 16]
    assert _linked(run_dir, sent)


MCP_RULES = """\
models:
  target:
    provider: fake
    rules:
      - { when: "where is ORD-1001", tool_calls: [ { name: get_order, args: { order_id: ORD-1001 } } ],
          say: "It has shipped." }
      - { when: "returns", tool_calls: [ { name: search_docs, args: { query: returns } } ],
          say: "Within 30 days." }
"""


def test_each_mcp_tool_call_carries_its_turns_trace_in_meta_and_over_http_as_a_header(tmp_path: Path,
                                                                                       tamesu) -> None:
    servers = Path(__file__).resolve().parents[1] / "agents" / "mcp_servers.py"
    stdio_log, http_log = tmp_path / "stdio.jsonl", tmp_path / "http.jsonl"
    # forks of a warm process that has imported the MCP SDK (tests/forked.py); connect.timeout's 10 s ran out
    # for such servers started by a niced worker on a loaded machine (tests/targets/test_mcp_target.py)
    python, *stdio_args = script_command(servers, "--traces", str(stdio_log))
    _, *http_args = script_command(servers, "--http", "--port", "{{session.port}}", "--traces", str(http_log))
    _project(tmp_path, f"""\
targets:
  stdio: {{ type: mcp, command: {json.dumps(python)}, args: {json.dumps(stdio_args)}, connect: {{ timeout: 60s }} }}
  http:
    type: mcp
    command: {json.dumps(python)}
    args: {json.dumps(http_args)}
    url: 'http://127.0.0.1:{{{{session.port}}}}/mcp'
    connect: {{ timeout: 60s }}
tests:
  - name: over stdio
    target: stdio
    scenario: {{ script: [ {{ say: where is ORD-1001 }}, {{ say: and returns? }} ] }}
  - name: over http
    target: http
    scenario: {{ script: [ {{ say: where is ORD-1001 }}, {{ say: and returns? }} ] }}
""", MCP_RULES)
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    stdio = [json.loads(line) for line in stdio_log.read_text().splitlines()]
    http = [json.loads(line) for line in http_log.read_text().splitlines()]
    assert [c["tool"] for c in stdio] == [c["tool"] for c in http] == ["get_order", "search_docs"]
    over_stdio = _trace_ids([c["meta"] for c in stdio])
    assert over_stdio == _turn_traces(run_dir, "suite", "over-stdio") and over_stdio[0] != over_stdio[1]
    assert [c["header"] for c in stdio] == [None, None]  # stdio has no headers: _meta is its one carrier
    assert [c["header"] for c in http] == [c["meta"] for c in http]
    assert _trace_ids([c["meta"] for c in http]) == _turn_traces(run_dir, "suite", "over-http")
    assert _linked(run_dir, over_stdio)


@pytest.mark.parametrize(("trace_url", "problem"), [
    ("http://localhost:16686/trace/{{trace_id}}", "write {trace_id}, in single braces"),
    ("http://localhost:16686/search", "no {trace_id} in it"),
    ("localhost:16686/trace/{trace_id}", "must start with http:// or https://"),
])
def test_a_trace_url_that_links_no_trace_is_one_line(tmp_path: Path, tamesu, trace_url: str, problem: str) -> None:
    # before: each passed validate; `{{trace_id}}` (the templates' braces everywhere else) linked every turn to
    # `/trace/{7c76...}`, one without `{trace_id}` every turn to the same page
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntrace_url: '{trace_url}'\n")
    (tmp_path / "suite.yaml").write_text("targets: {}\ntests: []\n")
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    said = [line for line in (result.stdout + result.stderr).splitlines() if "trace_url" in line]
    assert said and said[0].startswith("tamesu.yaml:2:") and problem in said[0], said


def test_the_turn_a_timeout_cut_short_records_its_trace_and_the_report_links_it(tmp_path: Path, tamesu,
                                                                                 serve) -> None:
    # before: the cut turn's bubble had no trace link (its record no trace id), though the request the agent was
    # still answering carried one: the trace that says why the agent was slow was the one not linked
    import asyncio

    seen: list[str | None] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(request.headers.get("traceparent"))
        if (await request.json()).get("message") == "slow":
            await asyncio.sleep(4)
        return JSONResponse({"text": "ok"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntrace_url: 'https://jaeger.example/trace/{trace_id}'\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{url}/chat' }}
tests:
  - name: cut
    target: bot
    timeout: 1s
    scenario: {{ script: [ {{ say: one }}, {{ say: slow }} ] }}
""")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    trace_ids = [m.group(1) for value in seen if (m := TRACEPARENT.match(value or ""))]
    assert len(trace_ids) == 2, seen
    run_dir = next((tmp_path / "out").iterdir())
    detail = json.loads((run_dir / "suite" / "cut" / "run-1" / "result.json").read_text())
    assert [(turn["agent"].get("trace_id"), "cut" in turn) for turn in detail["turns"]] == [
        (trace_ids[0], False), (trace_ids[1], True)]
    html = (run_dir / "report.html").read_text()
    bubble = html[html.index("cut short after"):]
    assert bubble.index(f'href="https://jaeger.example/trace/{trace_ids[1]}"') < bubble.index("(no answer)"), bubble
