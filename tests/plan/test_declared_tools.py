"""A tool assertion naming a tool a `model` target does not declare (its `tools`, the only ones its model is
offered) is refused where written, at validate and run (exit 2, nothing runs), naming the declared tools. Before,
a misspelt `tool_not_called` passed every run checking nothing (as it did on an MCP server's tools before
e94b37ad), and a misspelt `tool_called` failed as the agent's fault."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

_SUITE = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)where is", tool_calls: [{ name: get_order, args: { id: "1" } }],
                                     say: "Friday" } ] }
targets:
  shop:
    type: model
    model: shop
    system: "You are a shop assistant"
    tools:
      - { name: get_order, result: { status: shipped } }
      - { name: refund_order, result: ok }
tests:
  - name: no refund
    target: shop
    cases:
      - { name: right, vars: { tool: refund_order } }
      - { name: wrong, vars: { tool: TOOL } }
    scenario: { script: [ { say: "where is my order?" } ] }
    assert:
      - tool_called: get_order
      - tool_not_called: "{{vars.tool}}"
      - tool_sequence: [get_order]
"""


def test_a_tool_assertion_naming_no_declared_tool_of_a_model_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ok.tamesu.yaml").write_text(_SUITE.replace("TOOL", "refund_order"))
    ran = run_tamesu(["run", "ok.tamesu.yaml", "--out", "runs"], cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr  # every name declared: graded as before

    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace("TOOL", "refund_ordr").replace(
        "[get_order]", "[get_ordr, refund_order, lookup]"))
    said = [
        "s.tamesu.yaml:21:26: tests[0].assert[1].tool_not_called: model target shop declares no tool 'refund_ordr' "
        "(its tools: get_order, refund_order), the only ones its model can call: did you mean 'refund_order'? "
        "(case 'wrong')",
        "s.tamesu.yaml:22:24: tests[0].assert[2].tool_sequence: model target shop declares no tools 'get_ordr', "
        "'lookup' (its tools: get_order, refund_order), the only ones its model can call: did you mean "
        "'get_order'?",
        "2 problems found"]
    for command in (["validate", "s.tamesu.yaml"], ["run", "s.tamesu.yaml", "--out", "out"]):
        done = run_tamesu(command, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.splitlines() == said, done.stderr
        assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything ran
