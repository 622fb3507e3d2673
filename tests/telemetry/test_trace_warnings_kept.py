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

