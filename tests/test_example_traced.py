"""examples/traced-agent, run by scripts/demo_traced.py as `make demo` runs it: an agent instrumented with the
OpenTelemetry SDK (GenAI conventions, OTLP/HTTP protobuf, batched) and its suite graded on its spans (span
assertions, tool calls read from the spans, span metrics, a judge shown the trace)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import warm_demo

ROOT = Path(__file__).resolve().parent.parent


def test_the_traced_demo_grades_the_agent_on_its_own_spans(tmp_path: Path) -> None:
    out = tmp_path / "out"
    demo = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_traced.py"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "NO_COLOR": "1", "TRACES_PORT": "", **warm_demo(tmp_path)})
    said = demo.stdout + demo.stderr
    assert demo.returncode == 0, said
    assert "3 passed, 0 failed" in demo.stdout
    assert "opentelemetry" not in said.lower()  # tamesu exported nothing of its own to the stopped receiver
    [run_dir] = list(out.iterdir())
    assert json.loads((run_dir / "run.json").read_text())["warnings"] == []
    spans = json.loads((run_dir / "traced-shop" / "order-status" / "run-1" / "spans.json").read_text())
    names = [s["name"] for s in spans["spans"]]
    assert names.count("invoke_agent traced-shop") == 2 and names.count("execute_tool lookup_order") == 1
    assert {s["service"] for s in spans["spans"]} == {"traced-shop"}
    assert [s["turn"] for s in spans["spans"] if s["name"] == "execute_tool lookup_order"] == [1]

    order = json.loads((run_dir / "traced-shop" / "order-status" / "run-1" / "result.json").read_text())
    assert order["tool_calls"] == []  # the answers are text only
    got = {a["name"]: a for a in order["assertions"] if a["name"] not in ("metric",)}
    assert got["tool_called"]["reason"].endswith("(from the agent's spans)")
    assert got["judge"]["prompt_version"] == "judge.v1+judge_trace.v1"
    assert got["judge"]["evidence"] == ["execute_tool lookup_order"]
    assert order["metrics"]["trace_spans_total"] == 6 and order["metrics"]["llm_output_tokens_total"] > 0
    assert order["turns"][0]["agent"]["measures"]["tool_time_ms"] > 0

    unknown = json.loads((run_dir / "traced-shop" / "an-unknown-order" / "run-1" / "result.json").read_text())
    assert unknown["metrics"]["agent_errors_total"] == 1
    failed = [s for s in json.loads((run_dir / "traced-shop" / "an-unknown-order" / "run-1" / "spans.json")
                                    .read_text())["spans"] if s["status"] == "error"]
    assert [(s["name"], s["status_message"]) for s in failed] == [("execute_tool lookup_order", "no order ORD-9999")]

    refund = json.loads((run_dir / "traced-shop" / "a-refund-told-by-the-customer" / "run-1" / "result.json")
                        .read_text())
    tools = {a["name"]: a for a in refund["assertions"]}
    assert tools["tool_sequence"]["reason"] == "tools called: lookup_order -> issue_refund (from the agent's spans)"
    assert all(a["passed"] for a in refund["assertions"])
