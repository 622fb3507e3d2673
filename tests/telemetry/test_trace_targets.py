"""The agent's spans through the other carriers of the trace: a Realtime voice agent (the handshake's
conversation trace, each `response.create`'s turn trace in its metadata) and an A2A agent (the a2a-sdk's server,
the request's `traceparent` header), both instrumented with the real OpenTelemetry SDK."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agents.trace_backend import TraceBackend
from agents.traced import TracedA2AAgent, TracedRealtimeAgent, free_port
from conftest import why
from sdk_groups import IN_PROCESS_A2A_SERVER
from sessions import new_session
from tamesu.report.waterfall import TurnSpans, waterfall
from tamesu.results.records import RunResult
from tamesu.store.records import waterfalls_of
from tamesu.view._html import chat

ASSERTIONS = """\
    assert:
      - tool_called: { name: lookup_order, args: { order_id: ORD-1001 } }
      - { name: one tool span, span: { name: 'execute_tool lookup_order', status: ok, on_turn: 1 } }
      - metric: { name: trace_spans, gte: 2 }
      - { name: traced judge, judge: { rubric: the agent looked the order up, trace: true } }
"""
JUDGE = """\
models:
  judge:
    provider: fake
    rules:
      - { rubric: '(?i)looked the order up', trace: 'execute_tool lookup_order \\(.*ORD-1001', pass: true,
          reason: the trace shows the lookup }
"""


def _run(tmp_path: Path, tamesu, receive: str, target: str, traces: str | None = None) -> tuple[dict, dict, dict]:
    """`traces` replaces the receiver's settings (`{ query: ... }`)."""
    traces = traces or f"{{ receive: '{receive}', wait: 300ms }}"
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {traces}\n{JUDGE}")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {target}
tests:
  - name: order
    target: agent
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: 'thanks' }} ] }}
{ASSERTIONS}""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    run_dir = next((tmp_path / "out").iterdir())
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert result.returncode == 0, why(record) + result.stdout + result.stderr
    folder = run_dir / "suite" / "order" / "run-1"
    return record, json.loads((folder / "result.json").read_text()), json.loads((folder / "spans.json").read_text())


def test_a_realtime_voice_agents_spans_by_conversation_and_turn(tmp_path: Path, tamesu, serve) -> None:
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRealtimeAgent(f"http://{receive}", encoding="json")
    try:
        base = "ws" + serve(agent.app()).url.removeprefix("http")
        _, detail, spans = _run(tmp_path, tamesu, receive, f"{{ type: realtime, url: '{base}/realtime' }}")
    finally:
        agent.shutdown()
    conversation = next(e["data"]["trace_id"] for e in detail["events"] if e["name"] == "conversation_trace")
    session = [s for s in spans["spans"] if s["name"] == "realtime session"]
    # the connection's span, on the conversation's trace, came before any turn
    assert len(session) == 1 and session[0]["trace_id"] == conversation and session[0]["turn"] is None
    turns = {t["index"]: t["agent"]["trace_id"] for t in detail["turns"]}
    assert conversation not in turns.values()
    for span in spans["spans"]:
        if span["turn"] is not None:
            assert span["trace_id"] == turns[span["turn"]]
    assert [t["agent"]["measures"]["trace_spans"] for t in detail["turns"]] == [3, 2]
    assert "(from the agent's spans)" in next(a["reason"] for a in detail["assertions"]
                                              if a["name"] == "tool_called")
    # the connection's span is drawn above the first turn, in the report and in what the store keeps (before:
    # in no waterfall at all)
    run_dir = next((tmp_path / "out").iterdir())
    report = (run_dir / "report.html").read_text()
    before = report[report.index('aria-label="spans before the first turn"'):]
    before = before[:before.index("</ol>")]
    assert [re.sub(r"<.*?>", "", name) for name in re.findall(r'<span class="wf-name">.*?</span>', before)] == \
        ["realtime session"]
    assert report.index("spans before the first turn") < report.index("agent · turn 1")
    assert "1 agent span before the first turn" in report
    folder = run_dir / "suite" / "order" / "run-1"
    kept = waterfalls_of(RunResult.model_validate(detail), folder)
    assert kept is not None and sorted(kept) == ["0", "1", "2"]
    assert [s["name"] for s in kept["0"]["spans"]] == ["realtime session"]  # type: ignore[index]
    assert 'aria-label="spans before the first turn"' in chat(
        [{"role": "user", "text": "hi", "turn": 1}],
        {index: waterfall(int(index), TurnSpans.model_validate(data)) for index, data in kept.items()})


@pytest.mark.parametrize("skew_s", [-3.0, 3.0])
def test_a_conversations_spans_are_placed_on_their_turns_whatever_the_agents_clock(tmp_path: Path, tamesu, serve,
                                                                                  skew_s: float) -> None:
    # the agent's clock 3 s behind or ahead of tamesu's: its turns' `voice turn` spans, on the conversation's
    # trace, are placed by when they started. Before, read on tamesu's clock, behind they were before the first
    # turn and ahead turn 1's was turn 2's; each turn's own trace shows the skew
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRealtimeAgent(f"http://{receive}", skew_s=skew_s, conversation_turns=True)
    try:
        base = "ws" + serve(agent.app()).url.removeprefix("http")
        _, detail, spans = _run(tmp_path, tamesu, receive, f"{{ type: realtime, url: '{base}/realtime' }}")
    finally:
        agent.shutdown()
    conversation = next(e["data"]["trace_id"] for e in detail["events"] if e["name"] == "conversation_trace")
    voice = [(s["attributes"]["app.said"], s["turn"]) for s in spans["spans"] if s["name"] == "voice turn"]
    assert voice == [("Where is ORD-1001?", 1), ("thanks", 2)], spans.get("clock_skew_ms")
    assert all(s["trace_id"] == conversation for s in spans["spans"] if s["name"] == "voice turn")
    assert [s["turn"] for s in spans["spans"] if s["name"] == "realtime session"] == [None]
    assert abs(spans["clock_skew_ms"] - skew_s * 1000) < 500, spans["clock_skew_ms"]
    # each turn's waterfall starts when tamesu sent it, on the agent's clock: its spans within the turn
    for turn in (1, 2):
        first = min(s["start_unix_nano"] for s in spans["spans"] if s["turn"] == turn)
        assert 0 <= first - spans["turn_started_unix_nano"][str(turn)] < 1e9, turn


@pytest.mark.parametrize("skew_s", [-3.0, 3.0])
def test_a_handshake_only_agents_clock_is_read_behind_and_ahead(tmp_path: Path, tamesu, skew_s: float) -> None:
    # a Pipecat bot gets the conversation's trace on its handshake alone (as a Twilio or SIP agent does): no turn
    # trace bounds its clock, only its span under tamesu's (the handshake's), which started after tamesu sent
    # the handshake and before the bot's first answer was heard. Before, an agent ahead was not seen: turn 1's
    # `voice turn` span, 3 s after tamesu sent turn 1, was turn 2's
    from agents.traced_pipecat import TracedPipecatBot

    receive = f"127.0.0.1:{free_port()}"
    bot = TracedPipecatBot(f"http://{receive}", skew_s=skew_s)
    try:
        (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', "
                                              "wait: 500ms }\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: pipecat, url: '{bot.url}/bot', greeting: false, idle: 0.3s }}
tests:
  - name: order
    target: bot
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: 'thanks' }} ] }}
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        bot.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    spans = json.loads((next((tmp_path / "out").iterdir()) / "suite" / "order" / "run-1" / "spans.json").read_text())
    voice = [(s["attributes"]["app.said"], s["turn"]) for s in spans["spans"] if s["name"] == "voice turn"]
    assert voice == [("Where is ORD-1001?", 1), ("thanks", 2)], spans.get("clock_skew_ms")
    assert [s["turn"] for s in spans["spans"] if s["name"] == "pipecat session"] == [None]
    assert abs(spans["clock_skew_ms"] - skew_s * 1000) < 500, spans["clock_skew_ms"]


def test_what_the_agent_says_unasked_has_its_spans_on_its_own_turn(tmp_path: Path, tamesu, serve) -> None:
    # a `wait_for` hears the agent speak unasked: a turn with no user turn. Before, its `voice turn` span (on the
    # conversation's trace) was the turn before's, in that turn's waterfall and span metrics
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRealtimeAgent(f"http://{receive}", conversation_turns=True, then_says="Anything else?")
    try:
        base = "ws" + serve(agent.app()).url.removeprefix("http")
        (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', "
                                              "wait: 300ms }\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {{ type: realtime, url: '{base}/realtime' }}
tests:
  - name: order
    target: agent
    scenario:
      script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: 'thanks' }}, {{ wait_for: 'Anything else', timeout: 5s }} ]
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    folder = next((tmp_path / "out").iterdir()) / "suite" / "order" / "run-1"
    detail = json.loads((folder / "result.json").read_text())
    spans = json.loads((folder / "spans.json").read_text())
    assert [(t["user"] is None, t["agent"]["text"]) for t in detail["turns"]][2] == (True, "Anything else?")
    voice = [(s["attributes"]["app.said"], s["turn"]) for s in spans["spans"] if s["name"] == "voice turn"]
    assert voice == [("Where is ORD-1001?", 1), ("thanks", 2), ("Anything else?", 3)]
    assert [t["agent"]["measures"]["trace_spans"] for t in detail["turns"]] == [4, 3, 1]


@IN_PROCESS_A2A_SERVER  # the traced agent serves A2A in this process: a2a-sdk's server side
def test_an_a2a_agents_spans_by_turn(tmp_path: Path, tamesu, serve) -> None:
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedA2AAgent(f"http://{receive}")
    try:
        url = serve(agent.app()).url
        agent.served_at(url)
        _, detail, spans = _run(tmp_path, tamesu, receive, f"{{ type: a2a, url: '{url}/a2a' }}")
    finally:
        agent.shutdown()
    turns = {t["index"]: t["agent"]["trace_id"] for t in detail["turns"]}
    assert sorted({s["turn"] for s in spans["spans"]}) == [1, 2]
    assert all(s["trace_id"] == turns[s["turn"]] and s["service"] == "traced-a2a-agent" for s in spans["spans"])
    assert detail["tool_calls"] == []
    assert "(from the agent's spans)" in next(a["reason"] for a in detail["assertions"]
                                              if a["name"] == "tool_called")


@pytest.mark.parametrize("kind", ["jaeger", "tempo"])
def test_a_realtime_agents_spans_fetched_from_its_backend(tmp_path: Path, tamesu, serve, kind: str) -> None:
    """`traces.query`: the Realtime agent exports to its tracing backend (a stand-in answering as Jaeger's or
    Tempo's query API); the conversation's trace and each turn's are fetched and placed as received ones are."""
    backend = TraceBackend(kind)
    backend_url = serve(backend.app()).url
    agent = TracedRealtimeAgent(backend_url)
    try:
        base = "ws" + serve(agent.app()).url.removeprefix("http")
        _, detail, spans = _run(tmp_path, tamesu, "", f"{{ type: realtime, url: '{base}/realtime' }}",
                                traces=f"{{ query: {{ {kind}: '{backend_url}' }}, wait: 300ms }}")
    finally:
        agent.shutdown()
    conversation = next(e["data"]["trace_id"] for e in detail["events"] if e["name"] == "conversation_trace")
    turns = {t["index"]: t["agent"]["trace_id"] for t in detail["turns"]}
    assert {conversation, *turns.values()} <= set(backend.queries)
    session = [s for s in spans["spans"] if s["name"] == "realtime session"]
    assert len(session) == 1 and session[0]["trace_id"] == conversation and session[0]["turn"] is None
    assert [t["agent"]["measures"]["trace_spans"] for t in detail["turns"]] == [3, 2]
    assert spans["not_found"] == []


def test_a_calls_turns_ask_the_backend_for_the_trace_the_bot_got_alone(tmp_path: Path, tamesu, serve) -> None:
    # a Pipecat bot gets the conversation's trace on its handshake alone (as a Twilio or SIP agent does): each
    # turn's own id, made before the target sends, never reaches it. Before, the run still routed every one of
    # them, asked the backend for each (retrying all of `wait`) and said each never came (`not_found`)
    from agents.traced_pipecat import TracedPipecatBot

    backend = TraceBackend("jaeger")
    backend_url = serve(backend.app()).url
    bot = TracedPipecatBot(backend_url)
    try:
        (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n"
                                              f"traces: {{ query: {{ jaeger: '{backend_url}' }}, wait: 300ms }}\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: pipecat, url: '{bot.url}/bot', greeting: false, idle: 0.3s }}
tests:
  - name: call
    target: bot
    scenario: {{ script: [ {{ say: one }}, {{ say: two }}, {{ say: three }}, {{ say: four }} ] }}
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        bot.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    folder = next((tmp_path / "out").iterdir()) / "suite" / "call" / "run-1"
    detail = json.loads((folder / "result.json").read_text())
    spans = json.loads((folder / "spans.json").read_text())
    conversation = next(e["data"]["trace_id"] for e in detail["events"] if e["name"] == "conversation_trace")
    assert [t["agent"]["trace_id"] for t in detail["turns"]] == [conversation] * 4
    probe = "0" * 31 + "1"  # the trace no one made, asked before the suite's first test
    assert set(backend.queries) - {probe} == {conversation}, backend.queries
    assert spans["not_found"] == [] and not [e for e in detail["events"] if e["name"] == "trace_not_found"]
    assert [s["turn"] for s in spans["spans"] if s["name"] == "voice turn"] == [1, 2, 3, 4]


@IN_PROCESS_A2A_SERVER  # the traced agent serves A2A in this process: a2a-sdk's server side
def test_an_a2a_agents_spans_fetched_from_jaeger(tmp_path: Path, tamesu, serve) -> None:
    backend = TraceBackend("jaeger")
    backend_url = serve(backend.app()).url
    agent = TracedA2AAgent(backend_url)
    try:
        url = serve(agent.app()).url
        agent.served_at(url)
        _, detail, spans = _run(tmp_path, tamesu, "", f"{{ type: a2a, url: '{url}/a2a' }}",
                                traces=f"{{ query: {{ jaeger: '{backend_url}' }}, wait: 300ms }}")
    finally:
        agent.shutdown()
    turns = {t["index"]: t["agent"]["trace_id"] for t in detail["turns"]}
    assert sorted({s["turn"] for s in spans["spans"]}) == [1, 2]
    assert all(s["trace_id"] == turns[s["turn"]] and s["service"] == "traced-a2a-agent" for s in spans["spans"])
    assert "(from the agent's spans)" in next(a["reason"] for a in detail["assertions"]
                                              if a["name"] == "tool_called")


async def test_realtime_turn_trace_id_is_a_query_that_answers_the_same_twice(tmp_path: Path, serve) -> None:
    """The engine asks for a turn's trace id once; anyone else may ask again (a reporter, a test) and must get
    the same answer, not the conversation's trace the second time."""
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    from tamesu.conversation import UserTurn
    from tamesu.targets.realtime.spec import RealtimeSpec
    from tamesu.targets.realtime.target import RealtimeTarget
    from tamesu.telemetry.traceparent import TraceContext

    async def agent(websocket: WebSocket) -> None:  # text mode: "ok" to every response.create
        await websocket.accept()
        await websocket.send_json({"type": "session.created", "session": {}})
        try:
            while True:
                event = json.loads(await websocket.receive_text())
                if event["type"] == "session.update":
                    await websocket.send_json({"type": "session.updated", "session": event["session"]})
                elif event["type"] == "response.create":
                    response = {"id": "r1", "metadata": (event.get("response") or {}).get("metadata")}
                    await websocket.send_json({"type": "response.output_text.delta", "response_id": "r1",
                                               "delta": "ok"})
                    await websocket.send_json({"type": "response.done", "response": {**response,
                                                                                      "status": "completed"}})
        except WebSocketDisconnect:
            return

    url = "ws" + serve(Starlette(routes=[WebSocketRoute("/rt", agent)])).url.removeprefix("http") + "/rt"
    session = new_session(tmp_path, run_id="t1", run={"id": "t1"})
    session.conversation_trace = conversation = TraceContext.new()
    target = RealtimeTarget(RealtimeSpec.model_validate({"type": "realtime", "url": url}), "rt")
    await target.open(session)
    try:
        # before any turn: the conversation's, however often asked
        assert target.turn_trace_id(session) == target.turn_trace_id(session) == conversation.trace_id
        turns = []
        for said in ("one", "two"):
            turn = session.trace = TraceContext.new()
            assert (await target.send(UserTurn(text=said))).text == "ok"
            first = target.turn_trace_id(session)
            session.trace = None  # as the engine does between turns: the answer stays the turn's
            assert first == target.turn_trace_id(session) == target.turn_trace_id(session) == turn.trace_id
            turns.append(first)
        assert len({conversation.trace_id, *turns}) == 3
    finally:
        await target.close()
