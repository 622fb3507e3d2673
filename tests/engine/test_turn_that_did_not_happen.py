"""An assertion on a turn the conversation never reached fails saying so, negated or not: before, `negate: true`
turned "turn 5 said nothing" into a pass."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_tamesu


def test_an_assertion_on_a_turn_that_did_not_happen_fails_negated_or_not(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text("""
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { say: "hello" } ] }
  simulator: { provider: fake, rules: [ { say: "hi" } ] }
tests:
  # a simulated user, who might have gone on: a static script one turn long is the suite's error instead
  # (tests/telemetry/test_trace_validate.py)
  - name: one turn
    scenario: { goal: "greet the bot", max_turns: 1 }
    assert:
      - { contains: hello, on_turn: 1 }
      - { contains: refund, on_turn: 5, negate: true }
      - { contains: refund, on_turn: 5 }
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert [(a["passed"], a["reason"]) for a in result["assertions"]][1:] == [
        (False, "turn 5 did not happen (the conversation had 1 turn)")] * 2
