"""`traces.wait` is the longest a run waits for the agent's spans: it stops once each trace it sent is complete
(`RunSpans.settle`: the agent's span under tamesu's came, no span names a parent still to come, and none came
for a quarter of the wait). Agents instrumented with the real OpenTelemetry SDK export to the run's receiver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.traced import LaterSpans, TracedRealtimeAgent, TracedRestAgent, free_port
from conftest import why
from ports import refused_port

TWO_TURNS = """\
  - name: order
    target: shop
    scenario: { script: [ { say: 'Where is ORD-1001?' }, { say: 'thanks' } ] }
"""


@pytest.fixture
def receive() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def agents() -> Iterator[list[TracedRestAgent | _ShapedAgent]]:
    made: list[TracedRestAgent | _ShapedAgent] = []
    yield made
    for agent in made:
        agent.shutdown()


def _run(tmp_path: Path, tamesu, receive: str, url: str, wait: str, code: int = 0) -> tuple[dict, dict, list[str]]:
    """One test of two turns against `url`: its result.json, spans.json and the run's warnings."""
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: {wait} }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
{TWO_TURNS}""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    run_dir = next((tmp_path / "out").iterdir())
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert result.returncode == code, why(record) + result.stdout + result.stderr
    folder = run_dir / "suite" / "order" / "run-1"
    warnings = json.loads((run_dir / "run.json").read_text())["warnings"]
    return (json.loads((folder / "result.json").read_text()), json.loads((folder / "spans.json").read_text()),
            warnings)


def _late(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "arrived after their run was graded" in w]


def test_a_run_whose_spans_all_came_stops_waiting_well_before_wait(tmp_path: Path, tamesu, serve, agents,
                                                                   receive) -> None:
    # each span sent as it ends: every one is in when the turn is answered. Before, the run slept all of `wait`
    # after its last turn, whatever had come (every traced test paid it)
    agent = TracedRestAgent(f"http://{receive}")
    agents.append(agent)
    detail, spans, warnings = _run(tmp_path, tamesu, receive, serve(agent.app()).url, "10s")
    assert spans["received"] == 5 and spans["not_found"] == [] and spans["incomplete"] == []
    # a quarter of the wait with no new span, after the turns: some 2.5 s, never the 10
    assert detail["duration_ms"] < 7000, detail["duration_ms"]
    assert _late(warnings) == []


class _ShapedAgent:
    """POST /chat: each turn `invoke_agent` under tamesu's traceparent, `execute_tool` under it with `http GET`
    under that; `background write` under `invoke_agent` ends `background_s` after it (work the agent left
    running when it answered). Its spans are sent as each ends, those named in `later` `later_s` after."""

    def __init__(self, endpoint: str, background_s: float = 0.0, later: set[str] | None = None,
                 later_s: float = 0.0) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": "shaped-agent"}))
        exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30)
        self.processor = LaterSpans(SimpleSpanProcessor(exporter), later or set(), later_s)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("shaped-agent")
        self.background_s = background_s
        self.ending: list[threading.Timer] = []

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        parent = TraceContextTextMapPropagator().extract(carrier=dict(request.headers))
        with self.tracer.start_as_current_span("invoke_agent shop", context=parent, kind=SpanKind.SERVER) as entry:
            with self.tracer.start_as_current_span("execute_tool lookup_order"), \
                    self.tracer.start_as_current_span("http GET"):
                pass
            if self.background_s:
                left = self.tracer.start_span("background write", context=trace.set_span_in_context(entry))
                timer = threading.Timer(self.background_s, left.end)
                self.ending.append(timer)
                timer.start()
        return JSONResponse({"text": f"you said: {body.get('message', '')}"})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/chat", self.chat, methods=["POST"])])

    def shutdown(self) -> None:
        for timer in self.ending:
            timer.join()
        self.provider.shutdown()


def test_a_span_that_ends_after_the_entry_span_within_wait_is_kept(tmp_path: Path, tamesu, serve, agents,
                                                                  receive) -> None:
    # work the agent left running when it answered: its span ends a second after the entry span, which had come
    # with everything under it. The quiet (a quarter of the 10 s wait) keeps the run waiting for it
    agent = _ShapedAgent(f"http://{receive}", background_s=1.0)
    agents.append(agent)
    detail, spans, warnings = _run(tmp_path, tamesu, receive, serve(agent.app()).url, "10s")
    names = sorted((s["turn"], s["name"]) for s in spans["spans"])
    assert names == [(turn, name) for turn in (1, 2) for name in ("background write", "execute_tool lookup_order",
                                                                  "http GET", "invoke_agent shop")]
    assert _late(warnings) == [] and spans["incomplete"] == []
    assert 1000 < detail["duration_ms"] < 8000, detail["duration_ms"]


@pytest.mark.parametrize("later", ["invoke_agent shop", "execute_tool lookup_order"])
def test_a_trace_whose_entry_or_a_parent_is_still_to_come_is_waited_for(tmp_path: Path, tamesu, serve, agents,
                                                                        receive, later: str) -> None:
    # a span still to come that no quiet would wait for (2 s, the quiet 1 s): the agent's span under tamesu's
    # (the trace's root on the agent's side), or the parent a span that came names. Either says the trace is
    # not complete, so the run waits on
    agent = _ShapedAgent(f"http://{receive}", later={later}, later_s=2.0)
    agents.append(agent)
    detail, spans, warnings = _run(tmp_path, tamesu, receive, serve(agent.app()).url, "4s")
    assert spans["received"] == 6 and spans["incomplete"] == [] and spans["not_found"] == []
    assert _late(warnings) == []
    assert detail["duration_ms"] > 2000, detail["duration_ms"]


def test_a_run_that_got_no_span_waits_the_whole_wait(tmp_path: Path, tamesu, serve, agents, receive) -> None:
    # the agent exports elsewhere: nothing says its traces will not come, so the run waits all of `wait` before
    # saying they never came
    agent = TracedRestAgent(f"http://127.0.0.1:{refused_port()}", encoding="json")
    agents.append(agent)
    detail, spans, _ = _run(tmp_path, tamesu, receive, serve(agent.app()).url, "1500ms")
    trace_ids = [turn["agent"]["trace_id"] for turn in detail["turns"]]
    assert spans["received"] == 0 and spans["not_found"] == trace_ids
    assert detail["duration_ms"] >= 1500, detail["duration_ms"]


def test_a_conversations_trace_no_turn_recorded_is_waited_for(tmp_path: Path, tamesu, serve, receive) -> None:
    # a realtime agent traces each turn under the turn's own traceparent, and its connection under the
    # handshake's (the conversation's trace, which no turn records): that span ends as tamesu hangs up and is
    # sent 2 s later, past the quiet (1 s). Before, every turn's trace being complete ended the wait and the
    # check on the connection's span read before it came (the span late, the agent failed for it)
    agent = TracedRealtimeAgent(f"http://{receive}", session_sent_after_s=2.0)
    try:
        url = "ws" + serve(agent.app()).url.removeprefix("http") + "/realtime"
        (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', "
                                              "wait: 5s }\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: realtime, url: '{url}' }}
tests:
{TWO_TURNS}    assert:
      - {{ name: connection traced, span: {{ name: realtime session, count: {{ equals: 1 }} }} }}
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    run_dir = next((tmp_path / "out").iterdir())
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert result.returncode == 0, why(record) + result.stdout + result.stderr
    folder = run_dir / "suite" / "order" / "run-1"
    detail = json.loads((folder / "result.json").read_text())
    spans = json.loads((folder / "spans.json").read_text())
    conversation = next(e["data"]["trace_id"] for e in detail["events"] if e["name"] == "conversation_trace")
    assert conversation not in [turn["agent"]["trace_id"] for turn in detail["turns"]]
    assert [s["trace_id"] for s in spans["spans"] if s["name"] == "realtime session"] == [conversation]
    assert spans["not_found"] == [] and spans["incomplete"] == []
    assert _late(json.loads((run_dir / "run.json").read_text())["warnings"]) == []
    assert detail["duration_ms"] < 5000, detail["duration_ms"]  # the span came: not the whole wait
