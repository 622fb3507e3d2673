"""A run's trace warnings kept with its records, not only printed: run.json and the run's result.json (and the
HTML report that reads it), so CI reading the files learns that a run's traces never came; and the traces of the
last runs that were still batched in the agent when tamesu stopped listening, said at the end."""

from __future__ import annotations

import html
import json
from pathlib import Path

from agents.traced import TracedRestAgent, free_port
from conftest import why
from ports import refused_port


def _suite(tmp_path: Path, receive: str, url: str, wait: str, repeat: int = 1) -> None:
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: {wait} }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    repeat: {repeat}
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }} ] }}
""")


def test_a_runs_trace_warnings_are_in_run_json_its_result_json_and_the_report(tmp_path: Path, tamesu,
                                                                             serve) -> None:
    # the agent exports elsewhere: the run says its traces never came and its agent sent none. Before, both
    # lines were printed on the console only: run.json and result.json had nothing of them
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://127.0.0.1:{refused_port()}", encoding="json")
    try:
        _suite(tmp_path, receive, serve(agent.app()).url, "300ms")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    run_dir = next((tmp_path / "out").iterdir())
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert result.returncode == 0, why(record) + result.stdout + result.stderr
    detail = json.loads((run_dir / "suite" / "order" / "run-1" / "result.json").read_text())
    said = detail.get("warnings", [])
    assert any("trace(s) of this run never came" in w for w in said), said
    assert any(w.startswith("traces: no span from shop came in 0.3s") for w in said), said
    summary = json.loads((run_dir / "run.json").read_text())["warnings"]
    for line in said:  # named with the test, as the console says it
        assert f"suite/order: {line}" in summary, summary
    page = html.unescape((run_dir / "report.html").read_text())
    assert all(f"warning: {line}" in page for line in said), said  # under its run, not the run's head alone


def test_a_run_without_trace_warnings_writes_none(tmp_path: Path, tamesu, serve) -> None:
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://{receive}")
    try:
        _suite(tmp_path, receive, serve(agent.app()).url, "2s")
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = next((tmp_path / "out").iterdir())
    detail = json.loads((run_dir / "suite" / "order" / "run-1" / "result.json").read_text())
    assert "warnings" not in detail  # as before: a record without a warning is written as it was
    assert json.loads((run_dir / "run.json").read_text())["warnings"] == []


def test_the_last_runs_traces_a_batching_agent_still_held_are_said_at_the_end(tmp_path: Path, tamesu,
                                                                              serve) -> None:
    # an agent started elsewhere that batches its spans (here every 20 s, so that no batch comes while the runs
    # go, however loaded the machine; the SDK's 5 s is the same for the runs after its last batch) and
    # `wait: 1s`: the spans of the last runs come only after tamesu exited, so no "arrived after their run was
    # graded" can say them. Before, the run ended saying nothing of them but that they never came (and asking
    # whether the agent is instrumented at all); now its last warning names the runs whose traces were still to
    # come, and why
    receive = f"127.0.0.1:{free_port()}"
    agent = TracedRestAgent(f"http://{receive}", batch_delay_ms=20_000)
    try:
        _suite(tmp_path, receive, serve(agent.app()).url, "1s", repeat=3)
        result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    finally:
        agent.shutdown(flush=False)
    run_dir = next((tmp_path / "out").iterdir())
    summary = json.loads((run_dir / "run.json").read_text())["warnings"]
    pending = [w for w in summary if "had not come when tamesu stopped listening" in w]
    assert pending == [
        "traces: 3 trace(s) of 3 run(s) had not come when tamesu stopped listening: suite/order run 1, suite/order "
        "run 2, suite/order run 3; an agent that batches its spans may send them later still (the OpenTelemetry "
        "SDKs every 5 s unless OTEL_BSP_SCHEDULE_DELAY says otherwise), after tamesu exited for the last runs, so "
        "no warning can say they came late: give the agent OTEL_BSP_SCHEDULE_DELAY well below traces.wait (1s), "
        "or raise traces.wait"], [*summary, result.stdout]
    assert "had not come when tamesu stopped listening" in result.stdout
