"""A name that could never match is refused where the suite writes it (exit 2): `delegated_to` naming no remote
agent of the suite, `fuzz_tools` naming neither a remote agent nor a tool the target declares. Before, both were
silent: "billing is down" passed with billing answering (tamesu validate said ok)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

_SUITE = """\
targets:
  orchestrator: { type: a2a, url: "http://127.0.0.1:9/a2a" }
  shop: { type: model, model: shop, tools: [ { name: lookup_order, result: { status: shipped } } ] }
models:
  shop: { provider: fake, rules: [ { when: "x", say: "y" } ] }
remote_agents:
  billing: { replies: [ { when: ".*", say: "Refunded" } ] }
tests:
  - name: billing is down
    target: orchestrator
    fuzz_tools: { biling: error }
    scenario: { script: [ { say: "Refund ORD-1 please" } ] }
    assert:
      - delegated_to: biling
      - delegated_to: { agent: billing, contains: ORD-1 }
  - name: the lookup fails
    target: shop
    fuzz_tools: { lookup_ordr: error, billing: error, lookup_order: empty }
    scenario: { script: [ { say: "where is ORD-1" } ] }
"""


def test_names_that_could_never_match_are_refused_where_they_are_written(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("s.tamesu.yaml:")]
    assert lines == [
        "s.tamesu.yaml:11:19: tests[0].fuzz_tools.biling: fuzz_tools names 'biling', which this test's target "
        "cannot call (its tools and the suite's remote agents: billing)",
        "s.tamesu.yaml:14:23: tests[0].assert[0].delegated_to: delegated_to names 'biling', which is not a remote "
        "agent of the suite (remote_agents: billing)",
        "s.tamesu.yaml:18:19: tests[1].fuzz_tools.lookup_ordr: fuzz_tools names 'lookup_ordr', which this test's "
        "target cannot call (its tools and the suite's remote agents: billing, lookup_order)",
    ], done.stderr
