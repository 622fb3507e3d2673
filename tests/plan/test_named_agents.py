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


def test_a_remote_agent_nothing_can_find_is_warned_of_where_it_is_written(tmp_path: Path) -> None:
    # before: validate said ok, and `delegated_to: unused` failed every run as the agent's fault ("no delegation to
    # unused; delegated to: billing"): no template gave its URL (a free port, new each run), so nothing could call it
    (tmp_path / "s.tamesu.yaml").write_text(
        "remote_agents:\n"
        "  billing: { reply: ok }\n"
        "  unused: { reply: never }\n"
        "  pinned: { reply: ok, addr: '127.0.0.1:0' }\n"            # a fixed address: a real agent may be set to it
        "  shipping-v2: { reply: ok }\n"
        "targets:\n"
        "  orchestrator:\n"
        "    type: a2a\n"
        "    url: http://127.0.0.1:9/a2a\n"
        "    metadata: { billing: '{{ remote.billing.url }}', shipping: '{{remote.shipping-v2.card}}' }\n"
        "tests:\n"
        "  - name: t\n"
        "    target: orchestrator\n"
        "    scenario: { script: [ { say: hi } ] }\n"
        "    assert: [ { delegated_to: unused } ]\n")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if "remote_agents" in line] == [
        "warning: s.tamesu.yaml:3:3: remote_agents.unused: no template names the remote agent unused "
        "({{remote.unused.url}}, .grpc or .card) and it has no addr: nothing can find it on its free port, so a "
        "delegation to it can never happen"], done.stderr
