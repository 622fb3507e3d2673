"""A traced agent behind a gateway (a real local HTTP proxy in front of a real OpenTelemetry-instrumented agent):
one that does not pass `traceparent` on, and one that is traced itself but exports elsewhere. A check the spans
that came cannot decide is said as not decided, with what was looked for and not found and why, and the run is
the environment's error (exit 3); a check they do decide (a `span` count, a tool found, a span metric past its
bound or holding its lower bound) is graded, and a failure of it is the agent's (exit 1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agents.traced import TracedRestAgent, free_port
from telemetry.test_trace_receive import TWO_TURNS, project, results, run_files


class Gateway:
    """POST /chat relayed to the agent's /chat. `traced`: it has a span of its own under the caller's
    `traceparent` and sends the agent its own (as an instrumented proxy does), exported to a backend of its own,
    never tamesu's; else the header is not passed on at all."""

    def __init__(self, agent_url: str, traced: bool) -> None:
        self.agent_url = agent_url
        self.exported = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exported))
        self.tracer = self.provider.get_tracer("gateway") if traced else None

    async def chat(self, request: Request) -> Response:
        body = await request.body()
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        async with httpx.AsyncClient(timeout=10) as client:
            if self.tracer is None:
                answer = await client.post(f"{self.agent_url}/chat", content=body, headers=headers)
            else:
                parent = TraceContextTextMapPropagator().extract(carrier=dict(request.headers))
                with self.tracer.start_as_current_span("gateway POST /chat", context=parent, kind=SpanKind.SERVER):
                    TraceContextTextMapPropagator().inject(headers)
                    answer = await client.post(f"{self.agent_url}/chat", content=body, headers=headers)
        return Response(answer.content, status_code=answer.status_code,
                        media_type=answer.headers.get("content-type"))

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/chat", self.chat, methods=["POST"])])


@pytest.fixture
def behind(serve) -> Iterator:
    """`behind(traced)`: a traced agent exporting to a new receiver, behind a gateway; its url and the receiver."""
    made: list[TracedRestAgent] = []

    def start(traced: bool) -> tuple[str, str, Gateway]:
        receive = f"127.0.0.1:{free_port()}"
        agent = TracedRestAgent(f"http://{receive}")
        made.append(agent)
        gateway = Gateway(serve(agent.app()).url, traced)
        return serve(gateway.app()).url, receive, gateway

    yield start
    for agent in made:
        agent.shutdown()


def test_a_gateway_that_drops_traceparent_leaves_checks_undecided_saying_why(tmp_path: Path, tamesu,
                                                                             behind) -> None:
    # the agent reads no traceparent (the gateway never passed it on): its 5 spans start traces of their own,
    # which the receiver counts as no test's, while every trace tamesu sent never comes
    url, receive, _ = behind(traced=False)
    project(tmp_path, receive, url, TWO_TURNS + """\
    assert:
      - { name: looked it up, tool_called: lookup_order }
      - { name: no refund, tool_not_called: issue_refund }
""", traces="wait: 500ms")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    trace_ids = [turn["agent"]["trace_id"] for turn in detail["turns"]]
    assert spans["not_found"] == trace_ids and spans["received"] == 0 and spans["other_spans"] == 5
    assert detail["status"] == "error" and detail["fault"] == "environment", detail
    never = (f"the agent's spans of turns 1, 2 never came (no span of trace {trace_ids[0]}, {trace_ids[1]} reached "
             "the receiver within traces.wait (0.5s): trace_not_found), and those that came do not decide it "
             "(tools called: none); 5 span(s) of traces no test sent did come meanwhile: the agent, or a gateway "
             "in front of it, starts traces of its own instead of continuing the traceparent tamesu sends (a "
             "gateway must pass the header on, and the agent's server read it)")
    reasons = {a["name"]: (a["passed"], a["reason"]) for a in detail["assertions"]}
    assert reasons == {"looked it up": (False, f"not decided: {never}"),
                       "no refund": (False, f"not decided: {never}")}, reasons
    assert f"! looked it up: {never}" in " ".join(result.stdout.split()), result.stdout


def test_a_traced_gateway_that_exports_elsewhere_decides_what_came_can(tmp_path: Path, tamesu, behind) -> None:
    # the agent's spans come under the gateway's span, which never does: every trace is incomplete, whatever the
    # wait. A lookup found among them, a span count or a span metric already past its bound are decided; what
    # the missing rest could change is not, and is the run's error (exit 3), named with the gateway
    url, receive, gateway = behind(traced=True)
    project(tmp_path, receive, url, TWO_TURNS + """\
    assert:
      - { name: looked it up, tool_called: lookup_order }
      - { name: spans, metric: { name: trace_spans_total, gte: 3 } }
      - { name: no refund, tool_not_called: issue_refund }
""", traces="wait: 1s")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    trace_ids = [turn["agent"]["trace_id"] for turn in detail["turns"]]
    assert spans["incomplete"] == trace_ids and spans["received"] == 5, spans
    assert {s.name for s in gateway.exported.get_finished_spans()} == {"gateway POST /chat"}
    reasons = {a["name"]: (a["passed"], a["reason"]) for a in detail["assertions"]}
    assert reasons["looked it up"][0] and reasons["spans"][0], reasons
    assert reasons["no refund"] == (False, f"not decided: the agent's spans of turns 1, 2 came without its span "
                                           f"under tamesu's within traces.wait (1s) (trace {trace_ids[0]}, "
                                           f"{trace_ids[1]}: trace_incomplete), so more of them may have come too "
                                           "late, and those that came do not decide it (tools called: "
                                           "lookup_order); raise traces.wait if they come late, or see that the "
                                           "agent and its caller (a traced gateway) export to tamesu's receiver"), \
        reasons
    assert detail["fault"] == "environment"


def test_a_span_metric_past_its_bound_on_what_came_is_the_agents_failure(tmp_path: Path, tamesu, behind) -> None:
    # spans can only raise a count, a time or a token sum: 5 spans already break `lt: 4`, and 3 already hold
    # `gte: 3`, whatever the rest of the traces holds. Before, each was not decided (exit 3) as the rest might
    # have changed them, where a `span` count over its bound on the same spans was the agent's failure
    url, receive, _ = behind(traced=True)
    project(tmp_path, receive, url, TWO_TURNS + """\
    assert:
      - { name: enough, metric: { name: trace_spans_total, gte: 3 } }
      - { name: too many, metric: { name: trace_spans_total, lt: 4 } }
      - { name: too many spans, span: { count: { lte: 3 } } }
""", traces="wait: 1s")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    [line] = results(tmp_path)
    assert result.returncode == 1, json.dumps(line["runs"][0]) + result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    assert len(spans["incomplete"]) == 2, spans
    reasons = {a["name"]: (a["passed"], a["reason"]) for a in detail["assertions"]}
    assert reasons["enough"] == (True, "trace_spans_total was 5, expected >= 3"), reasons
    assert reasons["too many"] == (False, "trace_spans_total: expected < 4, found 5"), reasons
    assert not reasons["too many spans"][0] and "not decided" not in reasons["too many spans"][1], reasons
    assert detail["fault"] == "agent", detail


def test_spans_of_no_tests_traces_are_counted_as_of_the_runs_that_went_meanwhile(tmp_path: Path, tamesu,
                                                                                 behind) -> None:
    # before: a run's warning counted every such span the whole tamesu run had had (the second test of two, one
    # after the other, said 10 for its own 5), and under --parallel a run's line said the spans of every run going
    # at once as its own agent's: now its own count, and how many other runs went meanwhile, whose they may be
    url, receive, _ = behind(traced=False)
    project(tmp_path, receive, url, TWO_TURNS + TWO_TURNS.replace("name: order", "name: again") + """\
    assert:
      - { name: looked it up, tool_called: lookup_order }
""", traces="wait: 500ms")
    result = tamesu(["run", "--out", "out", "--parallel", "1"], cwd=tmp_path)
    said = " ".join(result.stdout.split())
    assert result.returncode == 3, result.stdout + result.stderr
    for test in ("order", "again"):
        _, spans = run_files(tmp_path, test)
        assert spans["other_spans"] == 5 and spans["runs_alongside"] == 0, spans
    warned = [w for w in result.stdout.splitlines() if w.startswith("warning: suite/") and "never came" in w]
    assert len(warned) == 2 and all("; 5 span(s) of traces no test sent did come while it went: an agent that "
                                    "starts traces" in w for w in warned), warned
    (tmp_path / "out").rename(tmp_path / "one_by_one")
    result = tamesu(["run", "--out", "out", "--parallel", "2"], cwd=tmp_path)
    said = " ".join(result.stdout.split())
    assert result.returncode == 3, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "again")
    assert spans["runs_alongside"] == 1 and spans["other_spans"] >= 5, spans
    assert (f"{spans['other_spans']} span(s) of traces no test sent did come meanwhile (while 1 other run went too: "
            "some may be its): the agent, or a gateway in front of it, starts traces of its own") \
        in detail["assertions"][0]["reason"], detail["assertions"]
    assert f"{spans['other_spans']} span(s) of traces no test sent did come while it went (and 1 other run " \
           "went too: some may be its)" in said, said
