"""Traces for the targets that connect before their first turn (tamesu.telemetry.traceparent): the conversation's
`traceparent` on the handshake (a websocket upgrade's headers, a twilio `start`'s customParameters, livekit's
participant attributes, the SIP INVITE, a browser's requests to the agent's origin), the turn's own where a
message has a slot for it (a realtime `response.create`'s `response.metadata`, a livekit text stream's
attributes), every model request of a model target's turn; each turn's recorded trace id is the one the agent
got, and the HTML report links it. Every server here records what it received."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from browser_fixtures import shared_chromium  # noqa: F401  (a fixture)
from sessions import new_session
from tamesu.conversation import Session
from tamesu.telemetry.traceparent import TraceContext

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")
MINE = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
MINE_ID = "ab" * 16


def _trace_id(traceparent: str | None) -> str:
    match = TRACEPARENT.match(traceparent or "")
    assert match, traceparent
    return match.group(1)


def _project(root: Path, suite: str, extra: str = "") -> None:
    (root / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntrace_url: 'https://jaeger.example/trace/{trace_id}'\n"
                                      + extra)
    (root / "suite.yaml").write_text(suite)


def _result(run_dir: Path, test: str) -> dict[str, Any]:
    return json.loads((run_dir / "suite" / test / "run-1" / "result.json").read_text())


def _turn_traces(result: dict[str, Any]) -> list[str | None]:
    return [turn["agent"]["trace_id"] for turn in result["turns"]]


def _conversation_event(result: dict[str, Any]) -> dict[str, Any]:
    [event] = [e["data"] for e in result["events"] if e["name"] == "conversation_trace"]
    return event


def _linked(run_dir: Path, trace_ids: list[str]) -> bool:
    html = (run_dir / "report.html").read_text()
    return all(f'href="https://jaeger.example/trace/{trace_id}"' in html for trace_id in trace_ids)


def _session(tmp_path: Path) -> Session:
    session = new_session(tmp_path)
    session.conversation_trace = TraceContext.new()
    return session


# -- realtime: the handshake carries the conversation's trace, each response.create the turn's --------------


class RealtimeRecorder:
    """A Realtime agent in text mode that records each connection's path, handshake `traceparent` and the
    `response.create` events it got; it answers every response "ok", echoing the response's metadata back as
    the API does on `response.created` and `response.done`."""

    def __init__(self) -> None:
        self.connections: list[dict[str, Any]] = []

    async def handle(self, websocket: WebSocket) -> None:
        await websocket.accept()
        seen: dict[str, Any] = {"path": websocket.url.path, "traceparent": websocket.headers.get("traceparent"),
                                "creates": []}
        self.connections.append(seen)
        await websocket.send_json({"type": "session.created", "session": {}})
        try:
            while True:
                event = json.loads(await websocket.receive_text())
                if event["type"] == "session.update":
                    await websocket.send_json({"type": "session.updated", "session": event["session"]})
                elif event["type"] == "response.create":
                    seen["creates"].append(event)
                    response = {"id": f"resp_{len(seen['creates'])}",
                                "metadata": (event.get("response") or {}).get("metadata")}
                    await websocket.send_json({"type": "response.created",
                                               "response": {**response, "status": "in_progress"}})
                    await websocket.send_json({"type": "response.output_text.delta", "response_id": response["id"],
                                               "delta": "ok"})
                    await websocket.send_json({"type": "response.done",
                                               "response": {**response, "status": "completed"}})
        except WebSocketDisconnect:
            return


def test_realtime_handshake_has_the_conversations_trace_and_each_response_create_the_turns(
        tmp_path: Path, tamesu, serve) -> None:
    agent = RealtimeRecorder()
    routes = [WebSocketRoute("/plain", agent.handle), WebSocketRoute("/pinned", agent.handle)]
    base = "ws" + serve(Starlette(routes=routes)).url.removeprefix("http")
    _project(tmp_path, f"""\
targets:
  plain: {{ type: realtime, url: '{base}/plain' }}
  pinned: {{ type: realtime, url: '{base}/pinned', headers: {{ traceparent: '{MINE}' }} }}
tests:
  - name: two turns
    target: plain
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
  - name: pinned
    target: pinned
    scenario: {{ script: [ {{ say: one }} ] }}
""")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    plain = next(c for c in agent.connections if c["path"] == "/plain")
    pinned = next(c for c in agent.connections if c["path"] == "/pinned")

    detail = _result(run_dir, "two-turns")
    conversation = _trace_id(plain["traceparent"])
    assert _conversation_event(detail) == {"trace_id": conversation,
                                           "sent_in": ["websocket handshake header traceparent"]}
    per_turn = [_trace_id(create["response"]["metadata"]["traceparent"]) for create in plain["creates"]]
    assert _turn_traces(detail) == per_turn and len({conversation, *per_turn}) == 3
    assert _linked(run_dir, per_turn)

    # the suite's own header wins: on the handshake, in the metadata, and in what the turn records
    assert pinned["traceparent"] == MINE
    assert [c["response"]["metadata"]["traceparent"] for c in pinned["creates"]] == [MINE]
    assert _turn_traces(_result(run_dir, "pinned")) == [MINE_ID]


# -- the audio sockets: twilio, voice, pipecat --------------------------------------------------------------


class SocketRecorder:
    """A websocket agent that records each connection's handshake headers and every text message it got,
    and says nothing."""

    def __init__(self) -> None:
        self.connections: list[dict[str, Any]] = []

    async def handle(self, websocket: WebSocket) -> None:
        await websocket.accept()
        seen: dict[str, Any] = {"headers": dict(websocket.headers), "messages": []}
        self.connections.append(seen)
        try:
            while True:
                seen["messages"].append(json.loads(await websocket.receive_text()))
        except WebSocketDisconnect:
            return


@pytest.fixture
def recorder(serve) -> Iterator[tuple[SocketRecorder, str]]:
    agent = SocketRecorder()
    url = serve(Starlette(routes=[WebSocketRoute("/call", agent.handle)])).url
    yield agent, "ws" + url.removeprefix("http") + "/call"


async def _open_and_close(target: Any, session: Session) -> str | None:
    await target.open(session)
    try:
        return target.turn_trace_id(session)
    finally:
        await target.close()


async def test_twilio_sends_the_conversations_trace_on_the_handshake_and_in_start_custom_parameters(
        tmp_path: Path, recorder: tuple[SocketRecorder, str]) -> None:
    pytest.importorskip("numpy", reason="the voice extra is not installed")
    from tamesu.audio.extra import problem

    if problem():
        pytest.skip(problem() or "")
    from tamesu.targets.twilio import TwilioSpec, TwilioTarget

    agent, url = recorder
    session = _session(tmp_path)
    spec = TwilioSpec.model_validate({"type": "twilio", "url": url, "parameters": {"caller": "ann"}})
    recorded = await _open_and_close(TwilioTarget(spec, "phone"), session)
    pinned_session = _session(tmp_path)
    pinned = TwilioSpec.model_validate({"type": "twilio", "url": url, "parameters": {"traceparent": MINE}})
    pinned_recorded = await _open_and_close(TwilioTarget(pinned, "phone"), pinned_session)

    [plain, mine] = agent.connections
    conversation = session.conversation_trace
    assert conversation is not None
    assert plain["headers"]["traceparent"] == conversation.traceparent
    start = next(m for m in plain["messages"] if m["event"] == "start")
    assert start["start"]["customParameters"] == {"caller": "ann", "traceparent": conversation.traceparent}
    assert recorded == conversation.trace_id  # every turn of the call records the conversation's trace
    assert [e.data for e in session.events if e.name == "conversation_trace"] == [
        {"trace_id": conversation.trace_id,
         "sent_in": ["websocket handshake header traceparent", "start.customParameters.traceparent"]}]
    # a traceparent among the suite's parameters is its own: it wins, on the handshake too
    assert mine["headers"]["traceparent"] == MINE
    assert next(m for m in mine["messages"] if m["event"] == "start")["start"]["customParameters"] == {
        "traceparent": MINE}
    assert pinned_recorded == MINE_ID


async def test_a_voice_targets_messages_place_the_conversations_trace_where_the_protocol_has_a_slot(
        tmp_path: Path, recorder: tuple[SocketRecorder, str]) -> None:
    from tamesu.audio.extra import problem

    if problem():
        pytest.skip(problem() or "")
    from tamesu.targets.voice import VoiceSpec, VoiceTarget

    agent, url = recorder
    session = _session(tmp_path)
    spec = VoiceSpec.model_validate({
        "type": "voice", "url": url, "audio": {"encoding": "mulaw", "sample_rate": 8000, "frames": "json",
                                               "send": {"event": "media", "payload": "{{message.audio}}"},
                                               "receive": "$.payload"},
        "messages": {"open": {"event": "start", "trace": "{{trace.traceparent}}", "trace_id": "{{trace.id}}"}}})
    recorded = await _open_and_close(VoiceTarget(spec, "line"), session)
    conversation = session.conversation_trace
    assert conversation is not None
    [seen] = agent.connections
    assert seen["headers"]["traceparent"] == conversation.traceparent
    assert seen["messages"][0] == {"event": "start", "trace": conversation.traceparent,
                                   "trace_id": conversation.trace_id}
    assert recorded == conversation.trace_id
    [event] = [e.data for e in session.events if e.name == "conversation_trace"]
    assert event["sent_in"] == ["websocket handshake header traceparent", "messages.open ({{trace.traceparent}})"]


def test_a_pipecat_bots_handshake_carries_the_conversations_trace_and_its_turns_record_it(
        tmp_path: Path, tamesu) -> None:
    from agents.pipecat_agents import PipecatAgents

    bots = PipecatAgents()
    try:
        _project(tmp_path, f"""\
targets:
  bot: {{ type: pipecat, url: '{bots.url}/echo', greeting: false, idle: 0.3s }}
tests:
  - name: two turns
    target: bot
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
""")
        result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path)
    finally:
        bots.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    detail = _result(run_dir, "two-turns")
    [handshake] = bots.handshakes["/echo"]
    conversation = _trace_id(handshake.get("traceparent"))
    # RTVI's send-text has no slot for a trace: the handshake is the carrier, for every turn of the call
    assert _conversation_event(detail) == {"trace_id": conversation,
                                           "sent_in": ["websocket handshake header traceparent"]}
    assert _turn_traces(detail) == [conversation, conversation]
    assert all("traceparent" not in json.dumps(frame) for frame in bots.frames("/echo"))
    assert _linked(run_dir, [conversation])


def test_a_trace_said_never_to_come_is_one_the_agent_got(tmp_path: Path, tamesu) -> None:
    # a pipecat bot gets the conversation's trace alone (RTVI has no slot for a turn's): with a receiver and a
    # bot that exports nothing, the trace that never came is that one, never the turns' own that tamesu made
    # and could not send (they were said never to come, and the conversation's was not)
    from agents.pipecat_agents import PipecatAgents

    bots = PipecatAgents()
    try:
        _project(tmp_path, f"""\
targets:
  bot: {{ type: pipecat, url: '{bots.url}/echo', greeting: false, idle: 0.3s }}
tests:
  - name: two turns
    target: bot
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
""", extra="traces: { receive: '127.0.0.1:0', wait: 0s }\n")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        bots.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    detail = _result(run_dir, "two-turns")
    conversation = _conversation_event(detail)["trace_id"]
    assert _turn_traces(detail) == [conversation, conversation]
    spans = json.loads((run_dir / "suite" / "two-turns" / "run-1" / "spans.json").read_text())
    assert spans["not_found"] == [conversation], (spans["not_found"], conversation)
    assert [e["data"] for e in detail["events"] if e["name"] == "trace_not_found"] == \
        [{"trace_id": conversation, "turn": 1, "wait_s": 0.0, "source": "receiver"}]


# -- the model target: every model request of a turn carries the turn's trace -------------------------------


def test_every_model_request_of_a_turn_carries_its_trace_and_the_judges_carry_none(tmp_path: Path, tamesu,
                                                                                  serve) -> None:
    from model_servers import AnthropicServer, OpenAIServer, text, tool_call

    openai_server, anthropic_server = OpenAIServer(), AnthropicServer()
    openai_url = openai_server.base_url(serve(openai_server.app).url)
    anthropic_url = anthropic_server.base_url(serve(anthropic_server.app).url)
    openai_server.plan(tool_call("lookup_order", {"order_id": "ORD-1"}), text("It ships Friday."), text("Bye."))
    anthropic_server.plan(text("Hello from claude."))
    _project(tmp_path, f"""\
targets:
  gpt:
    type: model
    model: {{ provider: openai, model: test-model, base_url: '{openai_url}', timeout: 5s }}
    tools:
      - {{ name: lookup_order, parameters: {{ type: object, properties: {{ order_id: {{ type: string }} }} }},
          result: {{ eta: Friday }} }}
  claude:
    type: model
    model: {{ provider: anthropic, model: test-model, base_url: '{anthropic_url}', timeout: 5s }}
  pinned:
    type: model
    model: {{ provider: anthropic, model: test-model, base_url: '{anthropic_url}', timeout: 5s,
             headers: {{ traceparent: '{MINE}' }} }}
tests:
  - name: gpt
    target: gpt
    scenario: {{ script: [ {{ say: where is ORD-1 }}, {{ say: thanks }} ] }}
    assert: [ {{ judge: "The agent says when the order ships" }} ]
  - name: claude
    target: claude
    scenario: {{ script: [ {{ say: hello }} ] }}
  - name: pinned
    target: pinned
    scenario: {{ script: [ {{ say: hello again }} ] }}
""", f"models:\n  judge: {{ provider: openai, model: judge-model, base_url: '{openai_url}', timeout: 5s }}\n")
    result = tamesu(["run", "--out", "out", "--report", "html", "--parallel", "1"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    target_calls = [c for c in openai_server.calls() if c.body["model"] == "test-model"]
    judge_calls = [c for c in openai_server.calls() if c.body["model"] == "judge-model"]
    sent = [_trace_id(c.headers.get("traceparent")) for c in target_calls]
    turns = _turn_traces(_result(run_dir, "gpt"))
    assert sent == [turns[0], turns[0], turns[1]] and turns[0] != turns[1]  # the tool round is the same turn's
    assert judge_calls and all("traceparent" not in c.headers for c in judge_calls)  # the judge is no agent
    claude, pinned = anthropic_server.calls()
    assert [_trace_id(claude.headers.get("traceparent"))] == _turn_traces(_result(run_dir, "claude"))
    assert pinned.headers.get("traceparent") == MINE  # the model's own headers win
    assert _linked(run_dir, [*turns, *_turn_traces(_result(run_dir, "claude"))])


# -- livekit: the token's participant attributes, and each text stream's attributes -------------------------


async def test_livekit_puts_the_conversations_trace_in_the_tokens_attributes_and_the_turns_on_each_text(
        tmp_path: Path) -> None:
    pytest.importorskip("livekit.rtc", reason="the livekit extra is not installed (pip install 'tamesu[livekit]')")
    from agents import livekit_double
    from tamesu.conversation import UserTurn
    from tamesu.targets.livekit import LiveKitSpec, LiveKitTarget

    secret = "s3cr3t-livekit-api-secret-value-of-32-bytes-or-more"
    session = new_session(tmp_path, environ={"LK_SECRET": secret}, run_id="t1", run={"id": "t1"})
    session.conversation_trace = conversation = TraceContext.new()
    rooms: list[Any] = []
    target = LiveKitTarget(LiveKitSpec.model_validate({
        "type": "livekit", "url": "wss://lk.example.test", "api_key": "APIkey123",
        "api_secret": "{{secrets.LK_SECRET}}", "room": "support-t1", "idle": 0.4}), "lk")
    target.sdk_factory = livekit_double.double(secret, "support-t1", rooms)  # type: ignore[method-assign]
    await target.open(session)
    try:
        turn = session.trace = TraceContext.new()
        await target.send(UserTurn(text="What is my balance?"))
        recorded = target.turn_trace_id(session)
    finally:
        await target.close()
    [room] = rooms
    assert room.tokens[0]["attributes"] == {"traceparent": conversation.traceparent}  # a participant attribute
    assert room.local_participant.text_attributes == [{"traceparent": turn.traceparent}]
    assert recorded == turn.trace_id
    [event] = [e.data for e in session.events if e.name == "conversation_trace"]
    assert event == {"trace_id": conversation.trace_id, "sent_in": ["token participant attributes traceparent"]}


# -- sip: the INVITE's traceparent header --------------------------------------------------------------------


def test_the_sip_invite_carries_the_conversations_trace(tmp_path: Path, tamesu) -> None:
    from agents import phone
    from agents.sip_trunk import SipTrunk

    if phone.missing():
        pytest.skip(phone.missing() or "")
    with SipTrunk(username="tamesu", password="pw") as trunk:
        _project(tmp_path, f"""\
targets:
  line:
    type: sip
    to: "+15551234"
    trunk: {{ host: 127.0.0.1, port: {trunk.port}, username: tamesu, password: pw }}
    ring_timeout: 3s
    turn_timeout: 4s
tests:
  - {{ name: busy, target: line, scenario: {{ script: [ {{ say: hello }} ] }}, assert: [ {{ call_ended_by: busy }} ] }}
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    invites = [seen for seen in trunk.seen if seen.method == "INVITE"]
    event = _conversation_event(_result(run_dir, "busy"))
    assert invites and {_trace_id(seen.traceparent) for seen in invites} == {event["trace_id"]}
    assert event["sent_in"] == ["INVITE header traceparent"]


# -- browser: the agent's own origin gets the trace, third parties never --------------------------------------


def test_a_browser_sends_the_trace_to_the_agents_origin_only(tmp_path: Path, tamesu, serve,
                                                             shared_chromium: str) -> None:  # noqa: F811
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route

    seen: list[tuple[str, str | None]] = []  # (which server and path, the traceparent it got)

    def recording(name: str, answer: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            seen.append((f"{name}{request.url.path}", request.headers.get("traceparent")))
            return answer()
        return endpoint

    other = serve(Starlette(routes=[Route("/lib.js", recording("other", lambda: Response(
        "window.lib = 1;", media_type="text/javascript")))])).url
    page = f'<html><body><script src="{other}/lib.js"></script><p>ready</p></body></html>'
    agent = serve(Starlette(routes=[Route("/", recording("agent", lambda: HTMLResponse(page))),
                                    Route("/api", recording("agent", lambda: PlainTextResponse("pong")))])).url
    _project(tmp_path, f"""\
targets:
  page: {{ type: browser, url: '{agent}/' }}
tests:
  - name: calls its api
    target: page
    steps:
      - {{ action: eval_js, script: "fetch('/api').then(r => r.text())" }}
      - {{ action: eval_js, script: "fetch('{other}/lib.js', {{mode: 'no-cors'}}).then(() => 'sent')" }}
""")
    result = tamesu(["run", "--out", "out", "--report", "html"], cwd=tmp_path,
                    env={"TAMESU_BROWSER_CDP_URL": shared_chromium})
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    detail = _result(run_dir, "calls-its-api")
    conversation = _conversation_event(detail)
    assert conversation["sent_in"] == [f"request header traceparent (to {agent} only)"]
    loads = [tp for where, tp in seen if where == "agent/"]
    calls = [tp for where, tp in seen if where == "agent/api"]
    assert [_trace_id(tp) for tp in loads] == [conversation["trace_id"]]  # the page's load: the conversation's
    first, second = _turn_traces(detail)
    assert [_trace_id(tp) for tp in calls] == [first] and first != conversation["trace_id"]
    assert [tp for where, tp in seen if where == "other/lib.js"] == [None, None]  # never a third party
    assert second == conversation["trace_id"]  # its step reached the agent with nothing: the page's trace
    assert _linked(run_dir, [first])


def test_an_inbound_calls_trigger_carries_the_conversations_trace(tmp_path: Path, tamesu, serve) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from agents import phone

    if phone.missing():
        pytest.skip(phone.missing() or "")
    asked: list[str | None] = []

    async def call_me(request: Request) -> JSONResponse:
        asked.append(request.headers.get("traceparent"))
        return JSONResponse({"ok": True})  # and never calls: the test is what the trigger carried

    url = serve(Starlette(routes=[Route("/call", call_me, methods=["POST"])])).url
    written = tmp_path / "traceparent.txt"
    _project(tmp_path, f"""\
targets:
  http: {{ type: sip, direction: inbound, trigger: {{ http: {{ url: '{url}/call' }} }}, ring_timeout: 1s }}
  command: {{ type: sip, direction: inbound, trigger: {{ run: 'echo "$TRACEPARENT" > {written}' }}, ring_timeout: 1s }}
tests:
  - {{ name: over http, target: http, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: no_answer }} ] }}
  - {{ name: by command, target: command, scenario: {{ script: [ {{ say: hello }} ] }},
       assert: [ {{ call_ended_by: no_answer }} ] }}
""")
    result = tamesu(["run", "--out", "out", "--parallel", "1"], cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    over_http, by_command = (_conversation_event(_result(run_dir, test)) for test in ("over-http", "by-command"))
    assert [_trace_id(tp) for tp in asked] == [over_http["trace_id"]]
    assert over_http["sent_in"] == ["trigger request header traceparent"]
    assert _trace_id(written.read_text().strip()) == by_command["trace_id"] != over_http["trace_id"]
    assert by_command["sent_in"] == ["trigger command TRACEPARENT"]
