"""`tamesu coverage`: offered versus exercised, from a real model-target run and from recorded A2A, MCP and
remote-agent facts (written as those targets record them, so coverage needs nothing but the run directory)."""

from __future__ import annotations

import json
from pathlib import Path

from tamesu.conversation import Event, ToolCall
from tamesu.results.records import RunResult, RunSummary, RunSummaryFile, TestResult

SUITE = """\
models:
  bot:
    provider: fake
    rules:
      - { when: "(?i)where is", tool_calls: [ { name: lookup_order, args: { id: "1" } } ], say: "It arrives Friday" }
      - { when: "(?i)thanks", say: "You are welcome" }
targets:
  shop:
    type: model
    model: bot
    system: "You are a shop assistant."
    tools:
      - { name: lookup_order, description: "find an order", result: { eta: Friday } }
      - { name: cancel_order, description: "cancel an order", result: { ok: true } }
      - { name: refund, description: "refund an order", result: { ok: true } }
tests:
  - name: where is my order
    target: shop
    scenario: { script: [ { say: "Where is order 1?" }, { say: "thanks" } ] }
    assert: [ { tool_called: lookup_order } ]
"""


def test_the_tools_of_a_model_target(tmp_path: Path, tamesu) -> None:
    (tmp_path / "tamesu.yaml").write_text("out: runs\n")
    (tmp_path / "shop.tamesu.yaml").write_text(SUITE)
    ran = tamesu(["run"], cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # no RUN_DIR: the newest run in the project's out folder
    table = tamesu(["coverage"], cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "shop (model): 1/3 tools exercised (33%)" in table.stdout
    assert "✓ lookup_order  1 use  [shop/where is my order]" in table.stdout
    assert "✗ cancel_order  never exercised" in table.stdout and "✗ refund        never exercised" in table.stdout
    data = json.loads(tamesu(["coverage", "--json"], cwd=tmp_path).stdout)
    [section] = data["sections"]
    assert (section["kind"], section["owner"], section["offered"], section["covered"]) == ("tools", "shop", 3, 1)
    assert {i["name"]: i["exercised"] for i in section["items"]} == \
        {"lookup_order": True, "cancel_order": False, "refund": False}
    below = tamesu(["coverage", "--fail-under", "50"], cwd=tmp_path)
    assert below.returncode == 1 and "coverage 33% is under 50%" in below.stderr


def _recorded_run(folder: Path) -> Path:
    """A run directory as A2A and MCP targets with remote agents leave it."""
    run_dir = folder / "20261129-120000-abcd"
    runs = {
        "orchestrator/refund": RunResult(
            suite="orchestrator", test="refund", run=1, status="passed", started_at="2026-11-29T12:00:00+00:00",
            target="support", target_type="a2a",
            events=[
                Event(name="card", at_ms=1, data={"name": "Support", "skills": ["refund", "track", "invoice"]}),
                Event(name="card_extended", at_ms=2, data={"added": 1, "skills": ["bulk-refund"]}),
                Event(name="transport", at_ms=3, data={"binding": "JSONRPC", "skill": "refund"}),
                Event(name="remote_agents", at_ms=4, data={"agents": [{"name": "billing"}, "shipping"]}),
                Event(name="delegated", at_ms=5, data={"agent": "billing"}),
            ],
            tool_calls=[ToolCall(name="billing", kind="delegation", args={"message": "refund ORD-1"})],
        ),
        "orchestrator/files": RunResult(
            suite="orchestrator", test="files", run=1, status="failed", started_at="2026-11-29T12:00:01+00:00",
            target="files", target_type="mcp",
            events=[Event(name="mcp_server", at_ms=1, data={"tools": ["read_file", "write_file", "delete_file"],
                                                             "offered": ["read_file", "write_file"]}),
                    # the model asked for a tool allow_tools withheld: refused, it never reached the server
                    Event(name="tool_result", at_ms=2, data={"tool": "delete_file", "outcome": "refused"}),
                    # arguments that were no JSON object: the call never reached write_file either
                    Event(name="tool_arguments_invalid", at_ms=3, data={"tool": "write_file", "arguments": "{"})],
            tool_calls=[ToolCall(name="read_file"), ToolCall(name="read_file"), ToolCall(name="stat"),
                        ToolCall(name="delete_file"), ToolCall(name="write_file")],
        ),
    }
    results = []
    for test_id, run in runs.items():
        relative = f"orchestrator/{run.test}/run-1"
        (run_dir / relative).mkdir(parents=True)
        (run_dir / relative / "result.json").write_text(run.model_dump_json())
        results.append(TestResult(suite="orchestrator", test=run.test, id=test_id, target=run.target,
                                  status=run.status, total_runs=1,
                                  runs=[RunSummary(run=1, status=run.status, dir=relative)]))
    (run_dir / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in results))
    (run_dir / "run.json").write_text(RunSummaryFile(
        tamesu_version="0", started_at="", finished_at="", duration_ms=1, exit_code=1,
        counts={"passed": 1, "failed": 1, "error": 0, "quarantined": 0, "skipped": 0, "total": 2}).model_dump_json())
    return run_dir


def test_skills_tools_and_remote_agents_from_recorded_facts(tmp_path: Path, tamesu) -> None:
    run_dir = _recorded_run(tmp_path)
    result = tamesu(["coverage", str(run_dir), "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    sections = {(s["kind"], s["owner"]): s for s in json.loads(result.stdout)["sections"]}
    skills = sections[("skills", "support (card Support)")]
    assert {i["name"]: (i["offered"], i["exercised"]) for i in skills["items"]} == {
        "refund": (True, True), "track": (True, False), "invoice": (True, False), "bulk-refund": (True, False)}
    tools = sections[("tools", "files")]
    # a tool allow_tools withheld is no gap (it counted as one never exercised), and a refused call of it no use
    assert {i["name"]: (i["offered"], i["uses"]) for i in tools["items"]} == {
        "read_file": (True, 2), "write_file": (True, 0), "stat": (False, 0 + 1)}
    assert (tools["offered"], tools["covered"]) == (2, 1)  # a tool nobody offered does not count
    remote = sections[("remote_agents", "remote agents")]
    # the delegation and its `delegated` event are one use, not two
    assert {i["name"]: i["uses"] for i in remote["items"]} == {"billing": 1, "shipping": 0}
    table = tamesu(["coverage", str(run_dir)], cwd=tmp_path)
    assert "support (card Support) (a2a): 1/4 skills exercised (25%)" in table.stdout
    assert "remote agents: 1/2 remote agents exercised (50%)" in table.stdout
    assert "✓ stat" in table.stdout and "(not offered)" in table.stdout
    assert "total: 3/8 offered exercised (38%)" in table.stdout


def test_coverage_without_a_run(tmp_path: Path, tamesu) -> None:
    result = tamesu(["coverage"], cwd=tmp_path)
    assert result.returncode == 2 and "tamesu run` first" in result.stderr


def test_a_gate_on_a_run_with_nothing_to_cover_fails(tmp_path: Path, tamesu) -> None:
    # before: "nothing to cover" and exit 0, so `--fail-under 50` passed a run that recorded nothing to measure
    (tmp_path / "tamesu.yaml").write_text("out: runs\n")
    (tmp_path / "shop.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\nmodels:\n  bot: { provider: fake, rules: [ { say: hi } ] }\n"
        "tests:\n  - { name: greets, scenario: { script: [ { say: hi } ] }, assert: [ { contains: hi } ] }\n")
    assert tamesu(["run"], cwd=tmp_path).returncode == 0
    plain = tamesu(["coverage"], cwd=tmp_path)
    assert plain.returncode == 0 and "nothing to cover" in plain.stdout, plain.stdout + plain.stderr
    gated = tamesu(["coverage", "--fail-under", "50"], cwd=tmp_path)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    [run_dir] = list((tmp_path / "runs").iterdir())
    assert gated.stderr.strip() == f"coverage: nothing was offered to cover in {run_dir}: " \
                                   "--fail-under 50% cannot be met"
    assert tamesu(["coverage", "--fail-under", "0"], cwd=tmp_path).returncode == 0


def test_one_item_seen_and_none_offered_is_said_in_the_singular() -> None:
    # before: "1 tools seen (none offered in the records)"
    from tamesu.report.coverage import CoverageReport, Item, Kind, Section, table_lines

    def said(kind: Kind, names: list[str]) -> str:
        section = Section(kind=kind, owner="shop", items=[Item(name=n, offered=False, uses=1) for n in names])
        return table_lines(CoverageReport(run_dir="runs/x", sections=[section]))[0][1]

    assert said("tools", ["lookup"]) == "shop: 1 tool seen (none offered in the records)"
    assert said("tools", ["lookup", "refund"]) == "shop: 2 tools seen (none offered in the records)"
    assert said("remote_agents", ["billing"]) == "shop: 1 remote agent seen (none offered in the records)"
