"""A tool result's `when` (a model target's `results`, the `tool_results` of realtime, pipecat and voice) tries each
string as a full pattern on the agent's arguments: one that can backtrack for ever is refused where it is written,
as a `tool_called`'s `args` and a fake model's `when` are. Before, `validate` took it, and an agent's argument of
forty `a`s and a `b` held the run past every timeout, signal and Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

NESTED = ("repeats a group that itself repeats: on some texts that takes exponential time, and Python's regular "
          "expressions cannot be stopped then, not even by Ctrl-C: write it without the nesting, or make the inner "
          "repeat possessive (a++) or the group atomic ((?>...))")


def test_a_tool_results_when_that_backtracks_for_ever_is_refused_where_written(tamesu: Callable,
                                                                                tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("""\
vars: { x: ORD }
models:
  sim: { provider: fake, rules: [ { when: "(o+)+$", say: hi } ] }
targets:
  rt:
    type: realtime
    url: "ws://127.0.0.1:9/rt"
    tool_results:
      lookup: [ { when: { q: "ORD-1" }, result: ok }, { when: { q: "(a+)+$" }, result: ok } ]
  pc:
    type: pipecat
    url: "ws://127.0.0.1:9/ws"
    tool_results:
      lookup: [ { when: { order: { id: "{{vars.x}}-(b+)*c" } }, result: ok } ]
  bot:
    type: model
    model: "fake:x"
    tools:
      - name: lookup
        results: [ { when: { q: "(x+)+y" }, result: ok }, { when: { q: "(?:x+)y|ORD-\\\\d+" }, result: fine } ]
tests:
  - { name: one, target: rt, scenario: { script: [ { say: hi } ] } }
  - { name: two, target: pc, scenario: { script: [ { say: hi } ] } }
  - { name: three, target: bot, scenario: { script: [ { say: hi } ] } }
""")
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "validation error" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"suite.yaml:3:43: models.sim.rules[0].when: `(o+)+` {NESTED}", lines
    (tmp_path / "suite.yaml").write_text((tmp_path / "suite.yaml").read_text().replace('"(o+)+$"', "hello"))
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"suite.yaml:9:7: targets.rt.tool_results: lookup[1]: when.q: `(a+)+` {NESTED}",
        f"suite.yaml:14:7: targets.pc.tool_results: lookup[0]: when.order.id: `{{{{vars.x}}}}-(b+)*` {NESTED}",
        f"suite.yaml:20:28: targets.bot.tools[0].results[0].when: when.q: `(x+)+` {NESTED}",
        "3 problems found"], done.stderr
