"""An agent none of whose spans came in a whole `traces.wait` since tamesu started (not instrumented, or exporting
elsewhere) is said once (`no span from shop came in 2s ...: is it instrumented and exporting to URL?`), and its
later runs wait a quarter of `wait` for a first span, not all of it each time; the checks that need its spans are
not decided, with that question, never passed. An agent that exports (the real OpenTelemetry SDK) keeps its
waits, and one span of it, late too, brings the whole wait back."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.expense_agent import run_test
from agents.traced import ORDER, TracedRestAgent, free_port

SILENT = "no span from shop came in 2s (none since tamesu started): is it instrumented and exporting to http://{}?"


def untraced_app() -> Starlette:
    """The shop agent with no OpenTelemetry at all: it reads no traceparent and exports nothing."""

    async def chat(request: Request) -> JSONResponse:
        message = str((await request.json()).get("message", ""))
        order = ORDER.search(message)
        return JSONResponse({"text": f"Order {order.group(0)} has shipped." if order else "How can I help?"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def project(tmp_path: Path, receive: str, url: str, tests: int = 3) -> None:
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: 2s }}\n")
    named = "".join(f"""\
  - name: order{number}
    target: shop
    scenario: {{ script: [ {{ say: 'Where is ORD-100{number}?' }} ] }}
    assert:
      - {{ name: looked up, tool_called: {{ name: lookup_order }} }}
      - {{ name: shipped, contains: shipped }}
""" for number in range(1, tests + 1))
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
{named}""")


def runs(tmp_path: Path, tests: int = 3) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Each test's result.json and spans.json, in order, and the run's warnings."""
    run_dir = next((tmp_path / "out").iterdir())
    folders = [run_dir / "suite" / f"order{number}" / "run-1" for number in range(1, tests + 1)]
    return ([json.loads((f / "result.json").read_text()) for f in folders],
            [json.loads((f / "spans.json").read_text()) for f in folders],
            json.loads((run_dir / "run.json").read_text())["warnings"])


def test_an_agent_that_sends_no_span_is_said_once_and_waited_for_less(tmp_path: Path, tamesu, serve) -> None:
    # before: each of the three runs waited all of traces.wait (2 s) for spans of an agent that sends none, and
    # nothing said why but each run's "never came"
    receive = f"127.0.0.1:{free_port()}"
    project(tmp_path, receive, serve(untraced_app()).url)
    done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr  # not decided: never a pass, nor the agent's failure
    results, spans, _ = runs(tmp_path)
    said = SILENT.format(receive)
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning: ")]
    assert [w for w in warnings if "no span from shop" in w] == [
        f"warning: suite/order1: traces: {said} Its later runs wait 0.5s, not 2s, for a first span (one that "
        "comes brings back the whole wait), and the checks that need its spans are not decided"], warnings
    assert spans[0]["silent"] == said and spans[0]["silent_said"] is True and spans[0]["waited_s"] is None
    for later in spans[1:]:
        assert later["silent"] == said and later["silent_said"] is False and later["waited_s"] == 0.5, later
    assert results[0]["duration_ms"] >= 2000, results[0]["duration_ms"]
    for result in results[1:]:  # a quarter of the wait, not the whole of it
        assert result["duration_ms"] < 2000, result["duration_ms"]
    for result in results:
        assert result["status"] == "error" and result["fault"] == "environment", result
        looked = next(a for a in result["assertions"] if a["name"] == "looked up")
        assert looked["passed"] is False and looked["reason"].startswith("not decided: "), looked
        # the run that found it says what any run whose trace never came says; the later ones why they waited less
        assert looked["reason"].endswith("see that the agent exports to tamesu's receiver" if result is results[0]
                                         else said), looked
    later = next(a for a in results[1]["assertions"] if a["name"] == "looked up")
    assert "within 0.5s, not traces.wait (2s): trace_not_found" in later["reason"], later
    assert any("never came: no span of them reached the receiver within 0.5s, not traces.wait (2s)" in w
               for w in warnings), warnings


def test_an_agent_that_exports_keeps_its_waits(tmp_path: Path, tamesu, serve) -> None:
    # its batch comes some 900 ms after each turn, past the quarter of the wait (0.5 s) a silent agent's run is
    # given: every run waits for it and has it, none is cut short
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://{receive}", batch_delay_ms=900)
    try:
        project(tmp_path, receive, serve(agent.app()).url)
        done = tamesu(["run", "--out", "out"], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        _results, spans, _ = runs(tmp_path)
    finally:
        agent.shutdown()
    assert "no span from" not in done.stdout, done.stdout
    for file in spans:
        assert file["received"] == 3 and file["silent"] == "" and file["waited_s"] is None, file


def test_a_span_that_comes_late_brings_the_whole_wait_back(tmp_path: Path, tamesu, serve) -> None:
    # the agent holds its spans until its third request: the first run finds it silent, the second waits a
    # quarter of the wait; the third request sends the first two's spans (late) and its own as they end, so the
    # third run is waited for as an exporting agent's, and passes on its spans
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://{receive}", release_at_request=3)
    try:
        project(tmp_path, receive, serve(agent.app()).url)
        done = tamesu(["run", "--out", "out"], cwd=tmp_path)
        assert done.returncode == 3, done.stdout + done.stderr
        results, spans, warnings = runs(tmp_path)
    finally:
        agent.shutdown()
    assert [r["status"] for r in results] == ["error", "error", "passed"], results
    assert spans[0]["silent_said"] is True and spans[1]["waited_s"] == 0.5, spans[:2]
    assert spans[2]["received"] == 3 and spans[2]["silent"] == "" and spans[2]["waited_s"] is None, spans[2]
    assert any("arrived after their run was graded" in w for w in warnings), warnings


def test_a_jsonl_case_over_spans_waits_less_after_its_first_turn(tmp_path: Path, serve) -> None:
    # a dynamic case whose checkpoint reads the agent's spans waits for them after each turn: before, each of
    # its three turns waited all of traces.wait (2 s) for an agent that sends none
    receive = f"127.0.0.1:{free_port()}"
    url = serve(untraced_app()).url
    (tmp_path / "tamesu.yaml").write_text(textwrap.dedent(f"""\
        targets:
          shop: {{ type: rest, url: "{url}/chat", request: {{ body: {{ message: "{{{{message}}}}" }} }} }}
        traces: {{ receive: "{receive}", wait: 2s }}
        """))
    (tmp_path / "sims.py").write_text("def on(inputs):\n    return 'and then?'\n")
    case = {"id": "silent", "input": "Where is ORD-1001?", "simulator": {"use": "scripts:sims:on"}, "max_turns": 3,
            "checkpoints": [{"id": "looked", "assertion": {"type": "tool_called", "name": "lookup_order"}}]}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    out = tmp_path / "records.jsonl"
    done = run_test(["-i", "cases.jsonl", "-n", "shop", "-o", str(out), "--out", str(tmp_path / "runs")],
                    cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["total_turns"] == 3 and record["status"] == "error", record
    assert SILENT.format(receive) in record["error"], record
    # the first turn's 2 s, then a quarter of it after each later turn and at the end: some 3.5 s, not 8
    assert record["duration_ms"] < 6000, record["duration_ms"]


def test_an_agent_whose_backend_never_has_its_traces_is_asked_for_less(tmp_path: Path, tamesu, serve) -> None:
    # traces.query: the agent exports nothing to the backend; the first run waits and asks for 1 s each, the
    # second a quarter of that, and the question names the backend it should export to
    from agents.trace_backend import TraceBackend

    backend = TraceBackend("jaeger")
    backend_url = serve(backend.app()).url
    project(tmp_path, "unused", serve(untraced_app()).url, tests=2)
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ query: {{ jaeger: '{backend_url}' }}, "
                                          "wait: 1s }\n")
    done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    results, spans, _ = runs(tmp_path, tests=2)
    said = f"no span from shop came in 1s (none since tamesu started): is it instrumented and exporting to jaeger " \
           f"at {backend_url}?"
    assert spans[0]["silent"] == said and spans[0]["silent_said"] is True, spans[0]
    assert spans[1]["waited_s"] == 0.25 and spans[1]["silent_said"] is False, spans[1]
    looked = next(a for a in results[1]["assertions"] if a["name"] == "looked up")
    assert looked["reason"].endswith(said) and "did not have trace" in looked["reason"], looked
    assert results[1]["duration_ms"] < 2000 <= results[0]["duration_ms"], [r["duration_ms"] for r in results]


def test_an_agent_that_starts_traces_of_its_own_is_told_so_with_the_question(tmp_path: Path, tamesu,
                                                                             serve) -> None:
    # it exports, but each request starts a trace of its own (its server does not read traceparent): none of the
    # run's traces come, and the spans that did come are named as the likelier cause
    receive = f"127.0.0.1:{free_port()}"
    exporter = TracedRestAgent(f"http://{receive}")

    async def chat(request: Request) -> JSONResponse:
        exporter.unrelated_trace()
        return JSONResponse({"text": "Order ORD-1001 has shipped."})

    try:
        project(tmp_path, receive, serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url, tests=1)
        done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        exporter.shutdown()
    assert done.returncode == 3, done.stdout + done.stderr
    (warned,) = [line for line in done.stdout.splitlines() if "no span from shop" in line]
    assert warned.endswith("are not decided; 1 span(s) of traces no test sent did come meanwhile: if they are "
                           "its, it exports but starts traces of its own instead of continuing the traceparent "
                           "it is sent"), warned
