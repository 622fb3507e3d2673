"""tamesu's own spans through the OpenTelemetry SDK to a local OTLP/HTTP receiver started here: run, test,
turn and model call, the turn's span being the parent the agent sees in `traceparent`; and nothing sent
when no endpoint is configured."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed (pip install -e '.[otel]')")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver:
    """An OTLP/HTTP traces endpoint: keeps every span it is sent."""

    def __init__(self) -> None:
        self.requests = 0
        self.spans: list = []

    async def traces(self, request: Request) -> Response:
        self.requests += 1
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        for resource in message.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        return Response(b"", media_type="application/x-protobuf")


def _project(tmp_path: Path, agent_url: str) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nmodels:\n  judge: { provider: fake, rules: [ { transcript: 'ok', pass: true, "
        "reason: fine } ] }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{agent_url}/chat' }}
tests:
  - name: judged
    target: bot
    scenario: {{ script: [ {{ say: one }}, {{ say: two }} ] }}
    assert: [ {{ judge: "The agent says ok" }} ]
""")


@pytest.fixture
def setup(tmp_path: Path, serve) -> tuple[Receiver, str, list[str], str]:
    receiver = Receiver()
    collector = serve(Starlette(routes=[Route("/v1/traces", receiver.traces, methods=["POST"])])).url
    seen: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(request.headers.get("traceparent", ""))
        return JSONResponse({"text": "ok"})

    agent = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    _project(tmp_path, agent)
    return receiver, collector, seen, agent


def test_spans_reach_the_otlp_endpoint_and_the_turn_is_the_agents_parent(tmp_path: Path, tamesu, setup) -> None:
    receiver, collector, seen, _ = setup
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector})
    assert result.returncode == 0, result.stdout + result.stderr
    by_name: dict[str, list] = {}
    for span in receiver.spans:
        by_name.setdefault(span.name, []).append(span)
    assert set(by_name) == {"tamesu.run", "tamesu.test", "tamesu.turn", "tamesu.model_call"}
    [run], [test] = by_name["tamesu.run"], by_name["tamesu.test"]
    assert test.parent_span_id == run.span_id and test.trace_id == run.trace_id
    turns = by_name["tamesu.turn"]
    assert len(turns) == 2 == len(seen)
    for span, header in zip(turns, seen, strict=True):
        # the agent's traceparent names the turn's own span, the root of a trace of its own
        assert header == f"00-{span.trace_id.hex()}-{span.span_id.hex()}-01"
        assert span.parent_span_id == b"" and span.trace_id != run.trace_id
        assert [link.span_id for link in span.links] == [test.span_id]
    [judge] = by_name["tamesu.model_call"]
    assert judge.parent_span_id == test.span_id
    attributes = {a.key: a.value.string_value for a in judge.attributes}
    assert attributes["tamesu.purpose"] == "judge"


def test_tamesu_test_exports_the_same_spans(tmp_path: Path, tamesu, setup) -> None:
    receiver, collector, seen, agent = setup
    (tmp_path / "cases.jsonl").write_text('{"id": "two", "turns": [{"input": "one"}, {"input": "two"}]}\n')
    result = tamesu(["test", "-i", "cases.jsonl", "-n", f"{agent}/chat", "--out", "out"], cwd=tmp_path,
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector})
    assert result.returncode == 0, result.stdout + result.stderr
    names = [span.name for span in receiver.spans]
    assert sorted(names) == ["tamesu.run", "tamesu.test", "tamesu.turn", "tamesu.turn"]
    turns = [span for span in receiver.spans if span.name == "tamesu.turn"]
    assert seen == [f"00-{span.trace_id.hex()}-{span.span_id.hex()}-01" for span in turns]


def test_nothing_is_loaded_or_sent_without_an_endpoint(tmp_path: Path, setup) -> None:
    import os
    import subprocess
    import sys

    receiver, collector, seen, _ = setup
    # the receiver's address is known to the run (as another variable), yet no endpoint is configured
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"NO_COLOR": "1", "OTEL_SERVICE_NAME": "tamesu-test", "COLLECTOR": collector})
    probe = ("import sys\nfrom tamesu.cli.main import main\ntry:\n    main(['run', '--out', 'out'])\n"
             "except SystemExit as exc:\n    code = exc.code\n"
             "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))\n"
             "print('exit', code, 'loaded', loaded)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "exit 0 loaded []", done.stdout + done.stderr
    assert len(seen) == 2 and all(h.startswith("00-") for h in seen)  # the agent still gets trace context
    assert receiver.requests == 0


def test_a_connections_handshake_names_its_conversation_span(tmp_path: Path, tamesu, serve) -> None:
    import json

    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    receiver = Receiver()
    collector = serve(Starlette(routes=[Route("/v1/traces", receiver.traces, methods=["POST"])])).url
    handshakes: list[str] = []
    messages: list[dict] = []

    async def chat(websocket: WebSocket) -> None:
        await websocket.accept()
        handshakes.append(websocket.headers.get("traceparent", ""))
        try:
            while True:
                messages.append(json.loads(await websocket.receive_text()))
                await websocket.send_json({"text": "ok", "done": True})
        except WebSocketDisconnect:
            return

    url = "ws" + serve(Starlette(routes=[WebSocketRoute("/ws", chat)])).url.removeprefix("http") + "/ws"
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: '{url}', streaming: websocket, response: {{ final: $.done }} }}
tests:
  - name: talks
    target: bot
    scenario: {{ script: [ {{ say: one }} ] }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector})
    assert result.returncode == 0, result.stdout + result.stderr
    [test] = [s for s in receiver.spans if s.name == "tamesu.test"]
    [conversation] = [s for s in receiver.spans if s.name == "tamesu.conversation"]
    [turn] = [s for s in receiver.spans if s.name == "tamesu.turn"]
    # the handshake names the conversation's span, a trace of its own linked to the test; the turn's message
    # names the turn's span, which still links to the test
    assert handshakes == [f"00-{conversation.trace_id.hex()}-{conversation.span_id.hex()}-01"]
    assert conversation.parent_span_id == b"" and [link.span_id for link in conversation.links] == [test.span_id]
    assert conversation.start_time_unix_nano <= turn.start_time_unix_nano <= turn.end_time_unix_nano \
        <= conversation.end_time_unix_nano
    assert [m["traceparent"] for m in messages] == [f"00-{turn.trace_id.hex()}-{turn.span_id.hex()}-01"]
    assert [link.span_id for link in turn.links] == [test.span_id]
