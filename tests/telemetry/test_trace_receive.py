"""`traces:`: an OTLP/HTTP receiver for the run, the agent's own spans (real OpenTelemetry SDK, protobuf and
JSON) matched to runs and turns by trace id, late spans within `wait`, a flood past `max_spans`, spans of other
traces counted and dropped, OTEL_EXPORTER_OTLP_ENDPOINT for hooks."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.requests import Request
from starlette.responses import JSONResponse

from agents.traced import TracedRestAgent, free_port, handle_turn, provider
from ports import refused_port

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


@pytest.fixture
def receive() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def agents(serve) -> Iterator[list[tuple[TracedRestAgent, str]]]:
    made: list[tuple[TracedRestAgent, str]] = []
    yield made
    for agent, _ in made:
        agent.shutdown()


def start(serve, agents, receive: str, **options) -> tuple[TracedRestAgent, str]:
    agent = TracedRestAgent(f"http://{receive}", **options)
    url = serve(agent.app()).url
    agents.append((agent, url))
    return agent, url


def project(tmp_path: Path, receive: str, url: str, tests: str, traces: str = "wait: 1s") -> None:
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', {traces} }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
{tests}""")


def run_dir(tmp_path: Path) -> Path:
    return next((tmp_path / "out").iterdir())


def results(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir(tmp_path) / "results.jsonl").read_text().splitlines()]


def run_files(tmp_path: Path, test: str, run: int = 1) -> tuple[dict, dict]:
    folder = run_dir(tmp_path) / "suite" / test / f"run-{run}"
    return json.loads((folder / "result.json").read_text()), json.loads((folder / "spans.json").read_text())


TWO_TURNS = """\
  - name: order
    target: shop
    scenario: { script: [ { say: 'Where is ORD-1001?' }, { say: 'thanks' } ] }
"""


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_agents_spans_come_back_matched_to_their_turns(tmp_path: Path, tamesu, serve, agents, receive,
                                                         encoding) -> None:
    agent, url = start(serve, agents, receive, encoding=encoding)
    project(tmp_path, receive, url, TWO_TURNS, traces="wait: 200ms")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    trace_ids = [turn["agent"]["trace_id"] for turn in detail["turns"]]
    sent = [TRACEPARENT.match(tp or "").group(1) for _, tp in agent.seen]  # type: ignore[union-attr]
    assert trace_ids == sent
    by_turn = {1: [], 2: []}
    for span in spans["spans"]:
        by_turn[span["turn"]].append(span)
        assert span["trace_id"] == trace_ids[span["turn"] - 1]
        assert span["service"] == "traced-agent"
    assert sorted(s["name"] for s in by_turn[1]) == ["chat fake-model", "execute_tool lookup_order",
                                                     "invoke_agent shop"]
    assert sorted(s["name"] for s in by_turn[2]) == ["chat fake-model", "invoke_agent shop"]
    tool = next(s for s in by_turn[1] if s["name"].startswith("execute_tool"))
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == {"order_id": "ORD-1001"}
    assert tool["status"] == "ok"
    root = next(s for s in by_turn[1] if s["name"] == "invoke_agent shop")
    assert root["parent_span_id"] == TRACEPARENT.match(agent.seen[0][1] or "").group(2)  # type: ignore[union-attr]
    assert tool["parent_span_id"] == root["span_id"]
    assert spans["received"] == 5 and spans["over_limit"] == 0
    assert detail["metrics"]["trace_spans_total"] == 5


def test_tamesus_own_spans_exported_to_its_receiver_are_not_the_agents(tmp_path: Path, tamesu, serve, agents,
                                                                      receive) -> None:
    # one OTEL_EXPORTER_OTLP_ENDPOINT for the agent and for tamesu (a CI job's environment): tamesu's own export
    # reaches its receiver too. Before: its `tamesu.turn` span, of the turn's trace, was taken for the agent's (a
    # `span` count one over, trace_spans too, the run failed as the agent's fault)
    _agent, url = start(serve, agents, receive)
    project(tmp_path, receive, url, TWO_TURNS + """\
    assert:
      - { name: only the agent's, span: { name: 'tamesu\\..*', count: { equals: 0 } } }
      - { name: all of them, metric: { name: trace_spans_total, equals: 5 } }
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path,
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receive}", "OTEL_BSP_SCHEDULE_DELAY": "20"})
    assert result.returncode == 0, result.stdout + result.stderr
    _detail, spans = run_files(tmp_path, "order")
    assert {s["service"] for s in spans["spans"]} == {"traced-agent"}
    assert spans["received"] == 5 and spans["other_spans"] == 0
    # tamesu's own export stopped once its spans could only reach its receiver: none retried, with the SDK's
    # warnings, for seconds after the run against the receiver it had stopped
    assert "Failed to export" not in result.stderr and "Transient error" not in result.stderr, result.stderr


def test_spans_of_two_agents_in_one_trace_are_told_apart_by_service(tmp_path: Path, tamesu, serve, agents,
                                                                     receive) -> None:
    # an orchestrator that calls a sub-agent with the turn's trace: both export to the receiver, each with its own
    # service.name (a resource attribute, not the span's)
    sub = TracedRestAgent(f"http://{receive}")
    sub.provider = provider(f"http://{receive}", service="billing")[0]
    sub.tracer = sub.provider.get_tracer("billing")
    sub_url = serve(sub.app()).url
    agents.append((sub, sub_url))

    class Orchestrator(TracedRestAgent):
        async def chat(self, request: Request) -> JSONResponse:
            body = await request.json()
            handle_turn(self.tracer, request.headers, str(body.get("message", "")))
            async with httpx.AsyncClient() as client:  # the sub-agent gets the turn's traceparent as it came
                await client.post(f"{sub_url}/chat", json=body, timeout=30,
                                  headers={"traceparent": request.headers["traceparent"]})
            return JSONResponse({"text": "done"})

    orchestrator = Orchestrator(f"http://{receive}")
    url = serve(orchestrator.app()).url
    agents.append((orchestrator, url))
    project(tmp_path, receive, url, """\
  - name: order
    target: shop
    scenario: { script: [ { say: 'Where is ORD-1001?' } ] }
    assert:
      - { name: billing's lookup, span: { name: 'execute_tool .*', attributes: { service.name: billing },
                                          count: { equals: 1 } } }
      - { name: orchestrator's lookup, span: { name: 'execute_tool .*', attributes: { service.name: traced-agent },
                                               count: { equals: 1 } } }
      - { name: both, span: { name: 'execute_tool .*', count: { equals: 2 } } }
""", traces="wait: 300ms")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    _, spans = run_files(tmp_path, "order")
    assert sorted({s["service"] for s in spans["spans"]}) == ["billing", "traced-agent"]


def test_runs_side_by_side_get_only_their_own_spans(tmp_path: Path, tamesu, serve, agents, receive) -> None:
    agent, url = start(serve, agents, receive)
    tests = "".join(f"""\
  - name: t{n}
    target: shop
    repeat: 2
    scenario:
      script: [ {{ say: 'order ORD-{n}0{{{{run.number}}}}' }}, {{ say: 'again ORD-{n}0{{{{run.number}}}}' }} ]
""" for n in range(1, 9))
    project(tmp_path, receive, url, tests, traces="wait: 300ms")
    result = tamesu(["run", "--out", "out", "--parallel", "8"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(agent.seen) == 32
    for n in range(1, 9):
        for number in (1, 2):
            detail, spans = run_files(tmp_path, f"t{n}", number)
            order = f"ORD-{n}0{number}"
            turns = {turn["index"]: turn["agent"]["trace_id"] for turn in detail["turns"]}
            assert len(spans["spans"]) == 6, (n, number)
            for span in spans["spans"]:
                assert span["trace_id"] == turns[span["turn"]]
                if span["name"] == "invoke_agent shop":
                    assert order in span["attributes"]["app.message"]
                    assert span["attributes"]["app.message"].startswith("order" if span["turn"] == 1 else "again")
            assert detail["turns"][0]["agent"]["measures"]["trace_spans"] == 3


def test_late_spans_within_wait_are_kept_and_later_ones_said(tmp_path: Path, tamesu, serve, agents,
                                                            receive) -> None:
    # a batch processor that sends within 1.5 s after the spans end: after the turn was answered, within the
    # wait (4 s left a niced worker's batch thread and tamesu's receiver 2.5 s on a loaded machine; now 4.5)
    _agent, url = start(serve, agents, receive, batch_delay_ms=1500)
    project(tmp_path, receive, url, TWO_TURNS, traces="wait: 6s")
    assert tamesu(["run", "--out", "out"], cwd=tmp_path).returncode == 0
    _, spans = run_files(tmp_path, "order")
    assert len(spans["spans"]) == 5

    # a suite that waits for nothing, then one that waits (its own `traces:`, the same receiver): the first
    # suite's spans arrive while the second runs, too late for their run, and are said. An agent that holds its
    # spans until the second suite's first request (the third) sends them: after the first suite was graded
    # however late a loaded machine runs it (spans 1.5 s late came before a niced worker's run graded it)
    _agent, held_url = start(serve, agents, receive, release_at_request=3)
    late = tmp_path / "late"
    late.mkdir()
    project(late, receive, held_url, TWO_TURNS)
    suite = (late / "suite.yaml").read_text()
    (late / "tamesu.yaml").write_text("suites: ['a.yaml', 'b.yaml']\n")
    (late / "a.yaml").write_text(f"traces: {{ receive: '{receive}', wait: 0s }}\n" + suite)
    (late / "b.yaml").write_text(f"traces: {{ receive: '{receive}', wait: 4s }}\n" + suite)
    result = tamesu(["run", "--out", "out"], cwd=late)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = run_dir(late)
    early = json.loads((folder / "a" / "order" / "run-1" / "spans.json").read_text())
    waited = json.loads((folder / "b" / "order" / "run-1" / "spans.json").read_text())
    assert len(early["spans"]) == 0 and len(waited["spans"]) == 5
    run_json = json.loads((folder / "run.json").read_text())
    late_said = [w for w in run_json["warnings"] if "arrived after their run was graded" in w]
    # which run's spans were late is said (before: only how many)
    late = 5 - len(early["spans"])
    assert late_said == [f"traces: {late} span(s) arrived after their run was graded (raise traces.wait): "
                         f"a/order run 1 ({late})"], run_json["warnings"]
    # and the run's own result.json says them (before: nothing did; its checks read as decided on every span)
    graded = json.loads((folder / "a" / "order" / "run-1" / "result.json").read_text())
    assert graded["warnings"][-1].startswith(
        f"traces: {late} span(s) of this run came after it was graded, so no check read them and spans.json does "
        "not hold them (raise traces.wait): "), graded.get("warnings")
    # the agent's five spans of two turns, by name, the most frequent first
    assert graded["warnings"][-1].endswith(": chat fake-model (2), invoke_agent shop (2), execute_tool lookup_order")
    assert "warnings" not in json.loads((folder / "b" / "order" / "run-1" / "result.json").read_text())
    page = (folder / "report.html").read_text()
    assert "of this run came after it was graded" in page, "late spans not in the HTML report"


@pytest.mark.parametrize("batch_delay_ms", [300, None])
def test_a_trace_id_the_suite_sends_with_every_turn_is_placed_on_turns_by_time(tmp_path: Path, tamesu, serve,
                                                                              agents, receive,
                                                                              batch_delay_ms: int | None) -> None:
    # the suite's own traceparent, one for every turn. With a batching exporter every span came after the last
    # turn was sent: before, each was placed on the turn last sent with its id (all on turn 2). Sent as each
    # ends, a turn's spans came before its answer told tamesu which id it had sent: before, they were dropped as
    # of no test's
    _agent, url = start(serve, agents, receive, batch_delay_ms=batch_delay_ms)
    fixed = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    # the batch sends within 0.3 s of the spans' end: 5 s of wait leave a loaded machine's batch thread and
    # receiver some 4.7 s (2 s left 1.7). Sent as each ends, the spans came before the answer did
    project(tmp_path, receive, url, TWO_TURNS, traces="wait: 5s" if batch_delay_ms else "wait: 2s")
    suite = (tmp_path / "suite.yaml").read_text()
    (tmp_path / "suite.yaml").write_text(suite.replace("type: rest,",
                                                      f"type: rest, headers: {{ traceparent: '{fixed}' }},"))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    assert [t["agent"]["trace_id"] for t in detail["turns"]] == ["4bf92f3577b34da6a3ce929d0e0e4736"] * 2
    by_turn = {(s["name"], s["attributes"].get("app.message")): s["turn"] for s in spans["spans"]}
    assert by_turn[("invoke_agent shop", "Where is ORD-1001?")] == 1 and by_turn[("invoke_agent shop", "thanks")] == 2
    assert by_turn[("execute_tool lookup_order", None)] == 1
    assert [t["agent"]["measures"]["trace_spans"] for t in detail["turns"]] == [3, 2]
    assert not [w for w in json.loads((run_dir(tmp_path) / "run.json").read_text())["warnings"]
                if "no test sent" in w]


def test_a_trace_id_sent_by_two_runs_is_said(tmp_path: Path, tamesu, serve, agents, receive) -> None:
    # the suite's own traceparent is the same in every run: a span of it cannot say which run it is of (before:
    # each went silently to the run that sent the id last)
    _agent, url = start(serve, agents, receive)
    fixed = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    project(tmp_path, receive, url, TWO_TURNS.replace("    target: shop\n", "    target: shop\n    repeat: 2\n"),
            traces="wait: 200ms")
    suite = (tmp_path / "suite.yaml").read_text()
    (tmp_path / "suite.yaml").write_text(suite.replace("type: rest,",
                                                      f"type: rest, headers: {{ traceparent: '{fixed}' }},"))
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = json.loads((run_dir(tmp_path) / "run.json").read_text())["warnings"]
    assert SHARED_SAID in warnings, warnings
    # one after the other, each run had the spans that came while it went: nothing shared at once
    for run in (1, 2):
        _detail, spans = run_files(tmp_path, "order", run)
        assert spans["shared"] == [] and len(spans["spans"]) == 5, (run, spans)


SHARED_SAID = ("traces: 1 trace id(s) were sent by more than one run (a traceparent the suite sets itself, the same "
               "in every run): their spans went to every run that had sent the id and was not graded yet when they "
               "came, and checks of them in runs that went at once were not decided; leave traceparent to tamesu, "
               "which sends each turn its own: 4bf92f3577b34da6a3ce929d0e0e4736")


def test_a_trace_id_two_runs_send_at_once_goes_to_both_and_decides_nothing(tmp_path: Path, tamesu, serve, agents,
                                                                           receive) -> None:
    # two runs at once with the suite's own traceparent: a span of it cannot say which run it is of. Before,
    # every span went to the run that sent the id last (that run counted both runs' lookups, the other none, and
    # its `tool_called` failed the agent)
    _agent, url = start(serve, agents, receive)
    fixed = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    project(tmp_path, receive, url, TWO_TURNS.replace("    target: shop\n", "    target: shop\n    repeat: 2\n") + """\
    assert:
      - { name: looked it up, tool_called: lookup_order }
      - { name: one lookup, span: { name: 'execute_tool .*', count: { equals: 1 } } }
""", traces="wait: 1s")
    suite = (tmp_path / "suite.yaml").read_text()
    (tmp_path / "suite.yaml").write_text(suite.replace("type: rest,",
                                                      f"type: rest, headers: {{ traceparent: '{fixed}' }},"))
    result = tamesu(["run", "--out", "out", "--parallel", "2"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert SHARED_SAID in json.loads((run_dir(tmp_path) / "run.json").read_text())["warnings"]
    for run in (1, 2):
        detail, spans = run_files(tmp_path, "order", run)
        assert spans["shared"] == ["4bf92f3577b34da6a3ce929d0e0e4736"], (run, spans["shared"])
        # each run has every span of both: the waterfalls show them, no run's are lost
        assert sorted(s["name"] for s in spans["spans"]).count("execute_tool lookup_order") == 2, spans
        assert [e["data"] for e in detail["events"] if e["name"] == "trace_shared"] == \
            [{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "turn": 1}]
        assert detail["status"] == "error" and detail["fault"] == "environment", detail
        reasons = {a["name"]: (a["passed"], a["reason"]) for a in detail["assertions"]}
        shared = ("not decided: the agent's spans of turns 1, 2 are of trace 4bf92f3577b34da6a3ce929d0e0e4736, "
                  "which another run sent at the same time too (a traceparent the suite sets itself): whose run "
                  "each span is of cannot be told (trace_shared)")
        assert reasons["looked it up"] == (False, f"{shared} (tools called: lookup_order ×2); leave "
                                                  "traceparent to tamesu, which sends each turn its own, or run "
                                                  "these tests one at a time"), reasons
        assert reasons["one lookup"][1].startswith(f"{shared} (2 span(s) with name ~ /execute_tool .*/ among 10)"), \
            reasons


def test_a_run_that_never_reached_the_agent_waits_for_no_spans(tmp_path: Path, tamesu, receive) -> None:
    project(tmp_path, receive, f"http://127.0.0.1:{refused_port()}", TWO_TURNS, traces="wait: 30s")
    started = time.monotonic()
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    took = time.monotonic() - started
    assert result.returncode == 3, result.stdout + result.stderr
    [line] = results(tmp_path)
    assert line["runs"][0]["status"] == "error" and "refused" in line["runs"][0]["error"], line
    # it waited 30 s for spans of a conversation that never began
    assert took < 20, f"the unreachable run took {took:.1f}s"


def test_a_trace_that_never_comes_is_said_not_silently_passed(tmp_path: Path, tamesu, serve, receive) -> None:
    # the agent's exporter points somewhere else (a wrong port): not one span of the run reaches the receiver,
    # so "no failed span" and "no refund" would pass on nothing at all, and "looked the order up" fail the
    # agent for its exporter (before: passed, and failed, the agent's fault)
    agent = TracedRestAgent(f"http://127.0.0.1:{refused_port()}", encoding="json")
    url = serve(agent.app()).url
    project(tmp_path, receive, url, TWO_TURNS + """\
    assert:
      - { name: no refund, tool_not_called: issue_refund }
      - { name: nothing failed, span: { status: error, count: { equals: 0 } } }
      - { name: looked it up, tool_called: lookup_order }
""", traces="wait: 200ms")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    trace_ids = [turn["agent"]["trace_id"] for turn in detail["turns"]]
    assert spans["received"] == 0 and spans["not_found"] == trace_ids
    assert [e["data"] for e in detail["events"] if e["name"] == "trace_not_found"] == \
        [{"trace_id": trace_ids[0], "turn": 1, "wait_s": 0.2, "source": "receiver"},
         {"trace_id": trace_ids[1], "turn": 2, "wait_s": 0.2, "source": "receiver"}]
    assert detail["metrics"]["trace_not_found"] == 2
    said = (f"2 trace(s) of this run never came: no span of them reached the receiver within traces.wait (0.2s): "
            f"{trace_ids[0]}, {trace_ids[1]}")
    assert said in result.stdout, result.stdout
    # not decided, the wait named: an error of the environment's, not the agent's failure nor a pass
    assert detail["status"] == "error" and detail["fault"] == "environment", detail
    never = (f"the agent's spans of turns 1, 2 never came (no span of trace {trace_ids[0]}, {trace_ids[1]} "
             f"reached the receiver within traces.wait (0.2s): trace_not_found), and those that came do not "
             f"decide it")
    reasons = {a["name"]: a["reason"] for a in detail["assertions"]}
    assert not any(a["passed"] for a in detail["assertions"]), reasons
    assert reasons["no refund"] == f"not decided: {never} (tools called: none); raise traces.wait if they come " \
        "late, or see that the agent exports to tamesu's receiver", reasons
    assert reasons["nothing failed"].startswith(f"not decided: {never} (0 span(s) with status error among 0; "
                                                "so far as expected)"), reasons
    assert reasons["looked it up"].startswith(f"not decided: {never} (tools called: none)"), reasons
    assert detail["error"].startswith(f"no refund: {never}"), detail["error"]


class ForgetsItsSecondTurn(TracedRestAgent):
    """Continues the first turn's traceparent; the second turn's spans start a trace of their own (lost)."""

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.seen.append((str(body.get("message", "")), request.headers.get("traceparent")))
        carrier = request.headers if len(self.seen) == 1 else {}
        return JSONResponse({"text": handle_turn(self.tracer, carrier, str(body.get("message", "")))})


def test_a_check_that_what_came_decides_is_graded_when_another_turns_trace_never_came(
        tmp_path: Path, tamesu, serve, receive) -> None:
    agent = ForgetsItsSecondTurn(f"http://{receive}")
    try:
        project(tmp_path, receive, serve(agent.app()).url, """\
  - name: order
    target: shop
    scenario: { script: [ { say: 'Where is ORD-1001?' }, { say: 'and ORD-1002?' } ] }
    assert:
      - { name: looked it up, tool_called: { name: lookup_order, args: { order_id: ORD-1001 } } }
      - { name: a lookup, span: { name: 'execute_tool .*', count: { gte: 1 } } }
      - { name: turn 1 had one lookup, span: { name: 'execute_tool .*', count: { equals: 1 } }, on_turn: 1 }
      - { name: at most one lookup, span: { name: 'execute_tool .*', count: { lte: 1 } } }
      - { name: told, judge: { rubric: the agent looked both orders up, trace: true } }
""", traces="wait: 200ms")
        # the judge is shown what came, and told what did not
        with (tmp_path / "tamesu.yaml").open("a") as config:
            config.write("models:\n  judge:\n    provider: fake\n    rules:\n      - { rubric: 'looked both', "
                         "trace: \"(?s)turn 1:.*execute_tool lookup_order.*the agent's spans of turn 2 never "
                         "came\", pass: true, reason: told }\n")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 3, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    assert spans["not_found"] == [detail["turns"][1]["agent"]["trace_id"]]
    verdicts = {a["name"]: (a["passed"], a["reason"]) for a in detail["assertions"]}
    assert verdicts["looked it up"][0] and verdicts["looked it up"][1].endswith("(from the agent's spans)"), verdicts
    assert verdicts["a lookup"][0] and verdicts["turn 1 had one lookup"][0], verdicts
    assert verdicts["told"] == (True, "told (fake judge)"), verdicts
    # the second turn's lost trace may hold a second lookup: "at most one" is not decided by what came; its
    # spans came under a trace of the agent's own, which the line says
    assert verdicts["at most one lookup"] == (False, f"not decided: the agent's spans of turn 2 never came (no span "
                                              f"of trace {spans['not_found'][0]} reached the receiver within "
                                              "traces.wait (0.2s): trace_not_found), and those that came do not "
                                              "decide it (1 span(s) with name ~ /execute_tool .*/ among 3; so far "
                                              "as expected); 3 span(s) of traces no test sent did come meanwhile: "
                                              "the agent, or a gateway in front of it, starts traces of its own "
                                              "instead of continuing the traceparent tamesu sends (a gateway must "
                                              "pass the header on, and the agent's server read it)"), verdicts
    assert detail["fault"] == "environment"


class RootsHeld(SimpleSpanProcessor):
    """Sends each span as it ends but the agent's span under the caller's (the trace's root on its side, which
    ends last and so goes in a batching exporter's last batch): those are held, past any wait."""

    def on_end(self, span) -> None:
        if span.parent is not None and span.parent.is_remote:
            return
        super().on_end(span)


def test_a_check_that_fails_on_a_trace_that_came_without_its_root_is_not_decided(tmp_path: Path, tamesu, serve,
                                                                                   receive) -> None:
    # the agent's span under tamesu's (its root, which a batching exporter sends last) never came: the rest of
    # the trace may have come too late. Before, "expected a call to issue_refund" was the agent's failure with a
    # note beside it; now, as for a trace that never came, what came decides only what the rest cannot change
    agent = TracedRestAgent(f"http://{receive}")
    agent.provider = TracerProvider(resource=Resource.create({"service.name": "traced-agent"}))
    agent.provider.add_span_processor(RootsHeld(OTLPSpanExporter(endpoint=f"http://{receive}/v1/traces", timeout=5)))
    agent.tracer = agent.provider.get_tracer("traced-agent")
    try:
        project(tmp_path, receive, serve(agent.app()).url, TWO_TURNS + """\
    assert:
      - { name: refunded, tool_called: issue_refund }
      - { name: looked it up, tool_called: lookup_order }
      - { name: told, judge: { rubric: the agent refunded the order, trace: true } }
""", traces="wait: 200ms")
        # the judge is told too
        with (tmp_path / "tamesu.yaml").open("a") as config:
            config.write("models:\n  judge:\n    provider: fake\n    rules:\n      - { rubric: 'refunded', "
                         "trace: \"(?s)execute_tool lookup_order.*\\\\(the agent's spans of turns 1, 2 came without "
                         "its span under tamesu's within traces.wait \\\\(0.2s\\\\)\", pass: true, "
                         "reason: told }\n")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 3, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    trace_ids = [turn["agent"]["trace_id"] for turn in detail["turns"]]
    assert spans["incomplete"] == trace_ids and spans["not_found"] == []
    assert "invoke_agent shop" not in [s["name"] for s in spans["spans"]]
    assert [e["data"]["turn"] for e in detail["events"] if e["name"] == "trace_incomplete"] == [1, 2]
    assert detail["metrics"]["trace_incomplete"] == 2
    reasons = {a["name"]: (a["passed"], a["reason"]) for a in detail["assertions"]}
    assert reasons["looked it up"][0], reasons  # found among what came: decided
    assert reasons["told"] == (True, "told (fake judge)"), reasons
    partial = (f"the agent's spans of turns 1, 2 came without its span under tamesu's within traces.wait (0.2s) "
               f"(trace {trace_ids[0]}, {trace_ids[1]}: trace_incomplete), so more of them may have come too late")
    assert reasons["refunded"] == (False, f"not decided: {partial}, and those that came do not decide it (tools "
                                          "called: lookup_order); raise traces.wait if they come late, or see that "
                                          "the agent and its caller (a traced gateway) export to tamesu's "
                                          "receiver"), reasons
    assert detail["status"] == "error" and detail["fault"] == "environment", detail
    assert detail["error"].startswith(f"refunded: {partial}"), detail["error"]
    said = (f"2 trace(s) of this run came without the agent's span under tamesu's within traces.wait (0.2s), so "
            f"more of them may have come too late (or the agent's caller exports elsewhere): {trace_ids[0]}, "
            f"{trace_ids[1]}")
    assert said in result.stdout, result.stdout


class StartsItsOwnTraces(TracedRestAgent):
    """Traced, but deaf to the `traceparent` it is sent (its server not instrumented to read it)."""

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"text": handle_turn(self.tracer, {}, str(body.get("message", "")))})


def test_an_agent_that_starts_its_own_traces_is_told_why_none_came(tmp_path: Path, tamesu, serve,
                                                                   receive) -> None:
    agent = StartsItsOwnTraces(f"http://{receive}")
    try:
        project(tmp_path, receive, serve(agent.app()).url, TWO_TURNS, traces="wait: 200ms")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    _, spans = run_files(tmp_path, "order")
    assert spans["received"] == 0 and len(spans["not_found"]) == 2
    [said] = [line for line in result.stdout.splitlines() if "never came" in line]
    assert said.endswith("; 5 span(s) of traces no test sent did come while it went: an agent that starts traces of "
                         "its own instead of continuing the traceparent it is sent has its spans there"), said


class RecordsThePin(TracedRestAgent):
    """Records the caller's PIN header in its turn's span as numbers: an int, a list of ints, a float."""

    async def chat(self, request: Request) -> JSONResponse:
        pin = int(request.headers["x-pin"])
        parent = TraceContextTextMapPropagator().extract(carrier=dict(request.headers))
        with self.tracer.start_as_current_span("invoke_agent shop", context=parent, attributes={
                "user.pin": pin, "user.pins": [7, pin], "user.pin_float": float(pin), "turns": 1}) as span:
            span.add_event("login", {"pin": pin})
        return JSONResponse({"text": "welcome"})


def test_a_numeric_secret_in_a_span_attribute_is_masked_on_disk(tmp_path: Path, tamesu, serve, receive) -> None:
    # before: masking read text, so the PIN the agent recorded as a number was in spans.json, the HTML report
    # and the store
    agent = RecordsThePin(f"http://{receive}")
    try:
        url = serve(agent.app()).url
        (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', "
                                              "wait: 200ms }\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', headers: {{ X-Pin: '{{{{secrets.PIN}}}}' }},
          request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'hello' }} ] }}
    assert: [ {{ span: 'invoke_agent shop' }} ]
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"PIN": "48213977", "TAMESU_STORE": "true"})
    finally:
        agent.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    _, spans = run_files(tmp_path, "order")
    [span] = spans["spans"]
    assert span["attributes"] == {"user.pin": "***", "user.pins": [7, "***"], "user.pin_float": "***.0",
                                  "turns": 1}, span["attributes"]
    assert span["events"][0]["attributes"] == {"pin": "***"}
    leaked = [str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file() and b"48213977" in
              f.read_bytes() and f.name not in ("tamesu.yaml", "suite.yaml")]
    assert leaked == [], leaked


class FailsWithA500(TracedRestAgent):
    """Its lookup fails inside (an error span) and it answers the turn HTTP 500, as a crashing agent does."""

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        handle_turn(self.tracer, request.headers, str(body.get("message", "")), fail_tool=True)
        return JSONResponse({"detail": "internal error"}, status_code=500)


def test_a_failed_turn_names_what_failed_inside_the_agent(tmp_path: Path, tamesu, serve, receive) -> None:
    # before: "turn 1: ... HTTP 500 ...": the symptom; the agent's own spans said which call failed and why
    agent = FailsWithA500(f"http://{receive}")
    try:
        project(tmp_path, receive, serve(agent.app()).url, TWO_TURNS, traces="wait: 200ms")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 1, result.stdout + result.stderr
    detail, _ = run_files(tmp_path, "order")
    [conversation] = [a for a in detail["assertions"] if a["name"] == "conversation"]
    assert "500" in conversation["reason"], conversation
    assert conversation["reason"].endswith(" (the agent's failed spans: execute_tool lookup_order (turn 1, error: "
                                           "order service down))"), conversation["reason"]
    assert "order service down" in result.stdout, result.stdout


class QuotesTheTokenInItsError(TracedRestAgent):
    """Its failed span's status message quotes a long request, the caller's token near its 200th character."""

    async def chat(self, request: Request) -> JSONResponse:
        parent = TraceContextTextMapPropagator().extract(carrier=dict(request.headers))
        with self.tracer.start_as_current_span("execute_tool lookup_order", context=parent) as span:
            span.set_status(Status(StatusCode.ERROR, "upstream refused " + "q" * 165 + " auth="
                                   + request.headers["authorization"]))
        return JSONResponse({"text": "sorry"})


def test_a_secret_cut_in_an_error_message_excerpt_is_still_masked(tmp_path: Path, tamesu, serve, receive) -> None:
    # before: the failure and its evidence quoted the message's first 200 characters, cut bare inside the token:
    # its first characters reached result.json and the console as they were
    token = "sk-live-0123456789abcdef"
    agent = QuotesTheTokenInItsError(f"http://{receive}")
    try:
        url = serve(agent.app()).url
        (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', "
                                              "wait: 200ms }\n")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', headers: {{ Authorization: '{{{{secrets.TOKEN}}}}' }},
          request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'hello' }} ] }}
    assert: [ {{ span: {{ status: error, count: {{ equals: 0 }} }} }} ]
""")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"TOKEN": token})
    finally:
        agent.shutdown()
    assert result.returncode == 1, result.stdout + result.stderr
    detail, _ = run_files(tmp_path, "order")
    [verdict] = detail["assertions"]
    assert "error: upstream refused qqq" in verdict["reason"] and "***…" in verdict["reason"], verdict["reason"]
    assert token[:6] not in json.dumps(detail) and token[:6] not in result.stdout, verdict


def test_a_span_sent_twice_counts_once_and_is_said(tmp_path: Path, tamesu, serve, agents, receive) -> None:
    # an agent set up twice (a second exporter to the same endpoint, as zero-code instrumentation beside the
    # agent's own setup does): every span arrives twice with its ids; one tool call is still one
    agent, url = start(serve, agents, receive)
    agent.provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://{receive}/v1/traces",
                                                                           timeout=5)))
    project(tmp_path, receive, url, TWO_TURNS + """\
    assert:
      - { name: one lookup, span: { name: 'execute_tool lookup_order', count: { equals: 1 } } }
      - { name: five spans, metric: { name: trace_spans_total, equals: 5 } }
""", traces="wait: 200ms")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    _, spans = run_files(tmp_path, "order")
    assert spans["received"] == 5 and len(spans["spans"]) == 5
    run_json = json.loads((run_dir(tmp_path) / "run.json").read_text())
    assert ("traces: 5 span(s) came again (the same trace and span id: an exporter's retry, or two exporters set "
            "up in the agent) and were kept once") in run_json["warnings"], run_json["warnings"]


def test_a_flood_past_max_spans_is_said_not_silently_cut(tmp_path: Path, tamesu, serve, agents, receive) -> None:
    _agent, url = start(serve, agents, receive, extra_spans=60)
    project(tmp_path, receive, url, TWO_TURNS, traces="wait: 200ms, max_spans: 50")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    detail, spans = run_files(tmp_path, "order")
    assert spans["received"] == 125 and len(spans["spans"]) == 50 and spans["over_limit"] == 75
    assert detail["metrics"]["trace_spans_over_limit"] == 75
    assert any(e["name"] == "spans_over_limit" and e["data"]["kept"] == 50 for e in detail["events"])
    assert "75 span(s) past traces.max_spans (50) were not kept" in result.stdout + result.stderr


def test_spans_of_other_traces_are_counted_and_dropped(tmp_path: Path, tamesu, serve, agents, receive) -> None:
    _agent, url = start(serve, agents, receive)
    (tmp_path / "hooks.py").write_text("""\
import sys
sys.path.insert(0, sys.argv[1])
from agents.traced import TracedRestAgent
agent = TracedRestAgent(sys.argv[2])
agent.unrelated_trace()
agent.unrelated_trace()
agent.shutdown()
""")
    tests_dir = Path(__file__).resolve().parents[1]
    project(tmp_path, receive, url, TWO_TURNS + f"""\
hooks:
  before_each: [ {{ run: '{sys.executable} hooks.py {tests_dir} $OTEL_EXPORTER_OTLP_ENDPOINT' }} ]
""", traces="wait: 200ms")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    _, spans = run_files(tmp_path, "order")
    assert len(spans["spans"]) == 5 and all(s["name"] != "cache refresh" for s in spans["spans"])
    run_json = json.loads((run_dir(tmp_path) / "run.json").read_text())
    assert "traces: 2 span(s) of 2 trace(s) no test sent were dropped" in run_json["warnings"], run_json


def test_the_receiver_answers_otlp_and_refuses_what_is_not(tmp_path: Path, tamesu, serve, agents,
                                                          receive) -> None:
    _agent, url = start(serve, agents, receive)
    # a hook posts to the receiver while the suite runs: a bad body, a JSON one, an unknown encoding
    (tmp_path / "probe.py").write_text("""\
import os, sys, httpx
base = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] + "/v1/traces"
said = [httpx.post(base, content=b"\\xff\\x00junk", headers={"content-type": "application/x-protobuf"}, timeout=5),
        httpx.post(base, content=b"{}", headers={"content-type": "application/json"}, timeout=5),
        httpx.post(base, content=b"x", headers={"content-type": "application/json", "content-encoding": "br"},
                   timeout=5),
        # metrics and logs of an agent that exports every signal to the general endpoint: taken, dropped
        httpx.post(base.replace("traces", "metrics"), content=b"\\x0a\\x00",
                   headers={"content-type": "application/x-protobuf"}, timeout=5),
        httpx.post(base.replace("traces", "logs"), content=b"{}", headers={"content-type": "application/json"},
                   timeout=5)]
open("probe.txt", "w").write("\\n".join(f"{r.status_code} {r.text.strip()}" for r in said))
""")
    project(tmp_path, receive, url, TWO_TURNS + f"""\
hooks:
  before_all: [ {{ run: '{sys.executable} probe.py' }} ]
""", traces="wait: 0s")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (tmp_path / "probe.txt").read_text().splitlines()
    assert lines[0].startswith("400 not an OTLP protobuf trace export"), lines
    assert lines[1] == "200 {}"
    assert lines[2].startswith("400 content-encoding 'br'"), lines
    assert lines[3:] == ["200 ", "200 {}"], lines


def test_a_receiver_on_every_interface_gives_the_agent_an_address_it_can_call(tmp_path: Path, tamesu, serve,
                                                                                 agents) -> None:
    port = free_port()
    _agent, url = start(serve, agents, f"127.0.0.1:{port}")
    # what a tool the suite starts is told, and one export sent to it
    (tmp_path / "told.py").write_text("""\
import os, httpx
endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
answer = httpx.post(endpoint + "/v1/traces", content=b"{}", headers={"content-type": "application/json"}, timeout=5)
open("told.txt", "w").write(f"{endpoint} {answer.status_code}")
""")
    project(tmp_path, f"0.0.0.0:{port}", url, TWO_TURNS + f"""\
hooks:
  before_all: [ {{ run: '{sys.executable} told.py' }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # 0.0.0.0 is where it listens, not an address to call (Windows refuses to connect to it)
    assert (tmp_path / "told.txt").read_text() == f"http://127.0.0.1:{port} 200"
    _result, spans = run_files(tmp_path, "order")
    assert spans["spans"] and not spans["not_found"], spans  # the agent's own exports reached it too


def test_a_busy_receive_address_is_an_infrastructure_error(tmp_path: Path, tamesu, serve, agents) -> None:
    _agent, url = start(serve, agents, "127.0.0.1:9")
    taken = url.removeprefix("http://")  # the agent's own port: in use
    project(tmp_path, taken, url, TWO_TURNS)
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"traces.receive: cannot listen on {taken}" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_a_bad_traces_setting_is_one_line(tmp_path: Path, tamesu) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ntraces: { receive: 'nowhere', wait: 2s }\n")
    (tmp_path / "suite.yaml").write_text("targets: {}\ntests: []\n")
    result = tamesu(["validate"], cwd=tmp_path)
    assert result.returncode == 2
    assert re.search(r"tamesu.yaml:2:\d+: traces.receive: .*host:port", result.stdout + result.stderr), \
        result.stdout + result.stderr


GRPC_EXPORT = """\
import os, grpc, httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as Request
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse as Response
# what an OTLP/gRPC exporter (opentelemetry-exporter-otlp-proto-grpc) sends, over grpcio's own channel
endpoint = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
with grpc.insecure_channel(endpoint.removeprefix("http://")) as channel:
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                 request_serializer=Request.SerializeToString,
                                 response_deserializer=Response.FromString)
    try:
        export(Request(), timeout=5)
        said = "exported"
    except grpc.RpcError as exc:
        said = f"{exc.code().name} {exc.details()}"
answer = httpx.post(endpoint + "/v1/traces", content=b"", headers={"content-type": "application/grpc"}, timeout=5)
open("grpc.txt", "w").write(f"{said}\\n{answer.status_code} {answer.text.strip()}")
"""


def test_an_exporter_speaking_grpc_is_told_and_the_run_says_what_to_set(tmp_path: Path, tamesu, serve, agents,
                                                                        receive) -> None:
    _agent, url = start(serve, agents, receive)
    (tmp_path / "grpc_export.py").write_text(GRPC_EXPORT)
    project(tmp_path, receive, url, TWO_TURNS + f"""\
hooks:
  before_all: [ {{ run: '{sys.executable} grpc_export.py' }} ]
""", traces="wait: 0s")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    words = ("this receiver speaks OTLP over HTTP (http/protobuf or http/json), not gRPC: set "
             "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
    exported, posted = (tmp_path / "grpc.txt").read_text().splitlines()
    # the gRPC call's connection is closed at once (no HTTP/2 is spoken to word it); the run says why
    assert exported.startswith("UNAVAILABLE") and posted == f"415 {words}", (exported, posted)
    run_json = json.loads((run_dir(tmp_path) / "run.json").read_text())
    said = [w for w in run_json["warnings"] if "over gRPC" in w]
    # the call over gRPC and the request of gRPC's content type
    assert said == [f"traces: 2 export(s) came over gRPC and were refused: {words}"], run_json["warnings"]
    assert f"warning: {said[0]}" in result.stdout + result.stderr


ZERO_CODE = """\
import json, sys
from opentelemetry import trace
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
# what `opentelemetry-instrument` does through the distro's configurator: exporters chosen by the environment
_OTelSDKConfigurator().configure()
with trace.get_tracer("warm-up").start_as_current_span("cache refresh"):
    pass
trace.get_tracer_provider().shutdown()  # flushed: exported, or failed, before the hook ends
"""


@pytest.mark.parametrize("protocol", [None, "grpc"], ids=["protocol-unset", "protocol-grpc"])
def test_an_agent_configured_by_the_environment_exports_over_http(tmp_path: Path, tamesu, serve, agents, receive,
                                                                  protocol: str | None) -> None:
    # Python's zero-code instrumentation (OTEL_TRACES_EXPORTER=otlp) exports over gRPC unless the environment
    # says otherwise, and so does any SDK told `grpc` by the user's environment: to tamesu's OTLP/HTTP receiver
    # nothing arrived (without the gRPC exporter installed the SDK refused to start and the hook failed)
    _agent, url = start(serve, agents, receive)
    (tmp_path / "zero_code.py").write_text(ZERO_CODE)
    project(tmp_path, receive, url, TWO_TURNS + f"""\
hooks:
  before_all: [ {{ run: '{sys.executable} zero_code.py' }} ]
""", traces="wait: 200ms")
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_SERVICE_NAME": "warm-up", **({"OTEL_EXPORTER_OTLP_PROTOCOL": protocol} if protocol else {})}
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    run_json = json.loads((run_dir(tmp_path) / "run.json").read_text())
    # the hook's span is no test's: it arrived, and was counted and dropped
    assert "traces: 1 span(s) of 1 trace(s) no test sent were dropped" in run_json["warnings"], run_json


BATCHING_AGENT = """\
import sys
sys.path.insert(0, sys.argv[1])
import uvicorn
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from agents.traced import handle_turn

# set up as the SDK's docs show: the exporter and the batch processor with their defaults, read from the
# environment (the endpoint; the batch's delay, 5 s unless OTEL_BSP_SCHEDULE_DELAY says otherwise)
provider = TracerProvider(resource=Resource.create({"service.name": "batching-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
tracer = provider.get_tracer("batching-agent")

async def chat(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"text": handle_turn(tracer, request.headers, str(body["message"]))})

uvicorn.run(Starlette(routes=[Route("/chat", chat, methods=["POST"])]), host="127.0.0.1", port=int(sys.argv[2]),
            log_level="warning")
"""


@pytest.mark.parametrize("users_own", [False, True], ids=["plain", "traces-endpoint-set"])
def test_an_agent_a_hook_starts_with_the_sdks_default_batch_sends_within_wait(tmp_path: Path, tamesu,
                                                                              users_own: bool) -> None:
    # the SDKs' batch processors send every 5 s by default, later than the default wait of 2 s: a hook's agent
    # set up by the book had its spans arrive after its run was graded, which failed "no tool called". With
    # `users_own`, the user's shell names its own collector in the signal-specific variables, which win over the
    # general one in the SDK: tamesu points those at its receiver too while the suite runs
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{refused_port()}/v1/traces",
           "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"} if users_own else None
    port = free_port()
    (tmp_path / "agent.py").write_text(BATCHING_AGENT)
    tests_dir = Path(__file__).resolve().parents[1]
    # the second hook returns once the agent listens (at most 50 s, within a hook's 60: a python importing uvicorn
    # and the SDK, started by a niced worker on a loaded machine)
    ready = (f"import socket, time; any(socket.socket().connect_ex(('127.0.0.1', {port})) == 0 or time.sleep(0.1) "
             "for _ in range(500))")
    (tmp_path / "tamesu.yaml").write_text(f"""\
suites: ['suite.yaml']
traces: {{ receive: '127.0.0.1:0' }}
hooks:
  before_all:
    - '{sys.executable} agent.py {tests_dir} {port} &'
    - {json.dumps(f"{sys.executable} -c " + json.dumps(ready))}
""")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: 'http://127.0.0.1:{port}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }} ] }}
    assert: [ {{ tool_called: lookup_order }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    _, spans = run_files(tmp_path, "order")
    assert len(spans["spans"]) == 3 and {s["service"] for s in spans["spans"]} == {"batching-agent"}
