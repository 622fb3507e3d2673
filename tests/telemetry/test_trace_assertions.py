"""Assertions on the agent's own spans (real OpenTelemetry SDK over OTLP/HTTP): `span` passing and failing,
`tool_called`/`tool_not_called`/`tool_sequence` read from GenAI `execute_tool` spans of a REST agent that
answers only text (saying so), the span metrics, a judge given the trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.traced import TracedRestAgent, free_port
from conftest import why


@pytest.fixture
def receive() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def agent(serve, receive) -> Iterator[tuple[TracedRestAgent, str]]:
    made = TracedRestAgent(f"http://{receive}")
    yield made, serve(made.app()).url
    made.shutdown()


JUDGE = """\
models:
  judge:
    provider: fake
    rules:
      - { rubric: '(?i)looked the order up', trace: 'execute_tool lookup_order \\(.*"order_id": "ORD-1001"', pass: true,
          reason: the trace shows the lookup }
      - { rubric: '(?i)looked the order up', pass: false, reason: no lookup in the trace }
"""


def run(tmp_path: Path, tamesu, receive: str, url: str, assertions: str) -> tuple[dict, dict]:
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: 200ms }}\n{JUDGE}")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
vars: {{ order: ORD-1001 }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }}, {{ say: 'thanks' }} ] }}
    assert:
{assertions}""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    detail = json.loads((run_dir / "suite" / "order" / "run-1" / "result.json").read_text())
    return record, detail


def verdicts(detail: dict) -> dict[str, dict]:
    return {a["name"]: a for a in detail["assertions"]}


def test_span_assertions_pass_and_fail(tmp_path: Path, tamesu, agent, receive) -> None:
    _, url = agent
    record, detail = run(tmp_path, tamesu, receive, url, """\
      - name: tool span
        span: { name: "execute_tool lookup_order", attributes: { gen_ai.tool.name: lookup_order,
                gen_ai.tool.call.arguments: '.*{{vars.order}}.*' }, count: { gte: 1 }, status: ok,
                max_duration_ms: 5000, on_turn: 1 }
      - { name: no errors, span: { status: error, count: { equals: 0 } } }
      - { name: two chats, span: { name: 'chat .*', count: { equals: 2 } } }
      - { name: tool on turn 2, span: { name: 'execute_tool .*' }, on_turn: 2 }
      - { name: too fast, span: { name: 'invoke_agent shop', max_duration_ms: 0 } }
      - { name: wrong attribute, span: { attributes: { gen_ai.tool.name: refund } } }
      - { name: last turn, span: { name: 'chat .*', on_turn: last } }
      - { name: dotted, span: { name: 'execute_tool\\.lookup' } }
""")
    got = verdicts(detail)
    # the name's pattern written /…/ as other reasons write a pattern; before, a repr doubled its backslash:
    # name ~ 'execute_tool\\.lookup'
    assert got["dotted"]["reason"].startswith(r"0 span(s) with name ~ /execute_tool\.lookup/ among "), got["dotted"]
    # the span's own on_turn as the assertion's: `last` read (it was an internal error); a turn past the script
    # is the suite's error (tests/telemetry/test_trace_validate.py)
    assert got["last turn"]["passed"] and got["last turn"]["reason"].startswith("1 span(s) with name ~ /chat .*/")
    assert got["tool span"]["passed"], got["tool span"]
    assert got["tool span"]["reason"].startswith("1 span(s) with name ~ /execute_tool lookup_order/")
    assert got["no errors"]["passed"] and got["two chats"]["passed"]
    assert not got["tool on turn 2"]["passed"]
    assert got["tool on turn 2"]["reason"] == "0 span(s) with name ~ /execute_tool .*/ among 2; expected at least 1"
    assert not got["too fast"]["passed"] and "took longer than 0 ms" in got["too fast"]["reason"]
    assert not got["wrong attribute"]["passed"]
    assert record["status"] == "failed", why(record)


def test_a_span_that_should_not_be_there_is_named_with_its_turn_and_error(tmp_path: Path, tamesu, serve,
                                                                          receive) -> None:
    failing = TracedRestAgent(f"http://{receive}", fail_tool=True)
    try:
        _, detail = run(tmp_path, tamesu, receive, serve(failing.app()).url, """\
      - { name: no errors, span: { status: error, count: { equals: 0 } } }
      - { name: one chat at most, span: { name: 'chat .*', count: { lte: 1 } } }
""")
    finally:
        failing.shutdown()
    got = verdicts(detail)
    # which span failed, on which turn and why: the reason a console line shows, not only the evidence
    assert got["no errors"]["reason"] == ("1 span(s) with status error among 5; expected exactly 0: "
                                          "execute_tool lookup_order (turn 1, error: order service down)")
    assert got["no errors"]["evidence"][0].startswith("execute_tool lookup_order (")
    assert got["no errors"]["evidence"][0].endswith(" ms, error: order service down, turn 1)")
    assert got["one chat at most"]["reason"] == ("2 span(s) with name ~ /chat .*/ among 5; expected at most 1: "
                                                 "chat fake-model (turn 1); chat fake-model (turn 2)")


def test_tool_checks_read_the_spans_of_an_agent_that_answers_only_text(tmp_path: Path, tamesu, agent,
                                                                      receive) -> None:
    _, url = agent
    record, detail = run(tmp_path, tamesu, receive, url, """\
      - tool_called: { name: lookup_order, args: { order_id: ORD-1001 } }
      - { name: wrong args, tool_called: { name: lookup_order, args: { order_id: ORD-9 } } }
      - tool_not_called: refund
      - { name: on turn 2, tool_not_called: lookup_order, on_turn: 2 }
      - tool_sequence: [ lookup_order ]
""")
    assert detail["tool_calls"] == []  # the answers carry none: only the spans do
    got = verdicts(detail)
    assert got["tool_called"]["passed"], got["tool_called"]
    assert got["tool_called"]["reason"] == ('lookup_order called at turn 1 with {"order_id": "ORD-1001"} '
                                            "(from the agent's spans)")
    assert not got["wrong args"]["passed"] and got["wrong args"]["reason"].endswith("(from the agent's spans)")
    assert got["tool_not_called"]["passed"] and got["on turn 2"]["passed"]
    assert got["tool_sequence"]["passed"]
    assert record["status"] == "failed" and [f["name"] for f in record["runs"][0]["failures"]] == ["wrong args"]


def test_span_metrics_per_turn_and_per_run(tmp_path: Path, tamesu, agent, receive) -> None:
    _, url = agent
    record, detail = run(tmp_path, tamesu, receive, url, """\
      - metric: { name: trace_spans_total, equals: 5 }
      - metric: { name: llm_input_tokens_total, equals: 104 }
      - metric: { name: llm_output_tokens, equals: 12 }
      - metric: { name: llm_time_ms, lt: 2000 }
      - metric: { name: agent_errors_total, equals: 0 }
""")
    assert record["status"] == "passed", why(record)
    turns = [t["agent"]["measures"] for t in detail["turns"]]
    assert [t["trace_spans"] for t in turns] == [3, 2]
    # 40 + the message's length, per chat span
    assert [t["llm_input_tokens"] for t in turns] == [40 + len("Where is ORD-1001?"), 40 + len("thanks")]
    assert turns[0]["tool_time_ms"] > 0 and turns[1]["tool_time_ms"] == 0
    metrics = detail["metrics"]
    assert metrics["trace_spans"] == 3 and metrics["trace_spans_total"] == 5  # worst turn, and the run's
    assert metrics["llm_output_tokens_total"] == 24
    assert metrics["llm_time_ms_total"] == pytest.approx(turns[0]["llm_time_ms"] + turns[1]["llm_time_ms"],
                                                         abs=0.01)


def test_a_per_turn_metric_that_fails_names_its_turn(tmp_path: Path, tamesu, agent, receive) -> None:
    # before: "llm_input_tokens: expected < 50, found 58", of a run of two turns: which one was not said
    _, url = agent
    _, detail = run(tmp_path, tamesu, receive, url, """\
      - { name: tokens, metric: { name: llm_input_tokens, lt: 50 } }
      - { name: tokens max, metric: { name: llm_input_tokens_max, lt: 50 } }
      - { name: tokens p50, metric: { name: llm_input_tokens_p50, lt: 50 } }
      - { name: tokens total, metric: { name: llm_input_tokens_total, lt: 50 } }
""")
    got = verdicts(detail)
    first = 40 + len("Where is ORD-1001?")
    assert got["tokens"]["reason"] == f"llm_input_tokens: expected < 50, found {first} (turn 1)", got["tokens"]
    assert got["tokens max"]["reason"].endswith(f"found {first} (turn 1)"), got["tokens max"]
    # a percentile or a run's total is no one turn's
    assert not got["tokens p50"]["reason"].endswith(")"), got["tokens p50"]
    assert not got["tokens total"]["reason"].endswith(")"), got["tokens total"]


def test_a_judge_sees_the_trace_and_its_evidence_is_found_there(tmp_path: Path, tamesu, agent, receive) -> None:
    _, url = agent
    record, detail = run(tmp_path, tamesu, receive, url, """\
      - { name: traced, judge: { rubric: the agent looked the order up, trace: true } }
      - { name: blind, judge: { rubric: the agent looked the order up } }
""")
    got = verdicts(detail)
    assert got["traced"]["passed"], got["traced"]
    assert got["traced"]["prompt_version"] == "judge.v1+judge_trace.v1"
    assert got["traced"]["evidence"][0].startswith('execute_tool lookup_order (')
    assert got["traced"]["unsupported_evidence"] == []
    assert not got["blind"]["passed"] and got["blind"]["prompt_version"] == "judge.v1"
    assert record["status"] == "failed"


def test_a_span_count_no_number_can_hold_is_refused() -> None:
    from tamesu.checks import AssertionProblem, parse_assertion

    with pytest.raises(AssertionProblem) as problem:
        parse_assertion({"span": {"name": "chat", "count": {"gte": 1, "lte": 0}}})
    assert "gte (1) is more than lte (0): no count holds both" in str(problem.value)
