"""W3C trace context across the boundary: a `traceparent` with every request of a turn (REST headers, A2A
headers, gRPC metadata and message metadata), the trace id recorded per turn, and `trace_url` links in the
HTML report."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.a2a_agents import A2AAgents
from tamesu._trace import TraceContext
from tamesu.conversation import Session, UserTurn
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets.a2a import A2ASpec, A2ATarget

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


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    with A2AAgents() as running:
        yield running


@pytest.mark.parametrize("transport", ["jsonrpc", "http", "grpc"])
async def test_a2a_sends_the_trace_as_header_or_grpc_metadata_and_as_message_metadata(
        agents: A2AAgents, tmp_path: Path, transport: str) -> None:
    secrets = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=secrets), artifacts_dir=tmp_path,
                      redactor=secrets.redactor, run_id="t", base_dir=tmp_path)
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

    from tamesu.targets.grpc_turn import GrpcTarget
    from tamesu.turn.v1 import turn_pb2, turn_pb2_grpc

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
    secrets = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=secrets), artifacts_dir=tmp_path,
                      redactor=secrets.redactor, run_id="t", base_dir=tmp_path)
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
