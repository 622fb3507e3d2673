"""`on_turn` on an assertion that reads the whole run (a `metric`, `captured`, `http`, `command`, `turns`) was taken
and left unused: `{metric: {name: turn_latency_ms_max, lt: 800}, on_turn: 2}` graded every turn's latency, and
`{captured: eta, on_turn: 2}` passed on a value turn 1 gave. It is now a problem where it is written (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.grading import problem
from tamesu.checks import parse_assertion


@pytest.mark.parametrize(("entry", "reads"), [
    ({"metric": {"name": "turn_latency_ms_max", "lt": 800}}, "the run's metrics"),
    ({"captured": "eta"}, "what the run captured"),
    ({"http": "http://127.0.0.1:9/orders"}, "your backend after the conversation"),
    ({"command": "./check.sh"}, "a command's answer after the conversation"),
    ({"turns": {"lte": 3}}, "how many turns the conversation had"),
])
def test_on_turn_on_what_the_whole_run_gives_is_refused(entry: dict[str, Any], reads: str) -> None:
    key = next(iter(entry))
    for on_turn in (2, "last"):
        found = problem({**entry, "on_turn": on_turn})
        assert (found.loc, found.message) == (
            ("on_turn",), f"{key} reads {reads}, which on_turn cannot narrow to one turn: leave on_turn out")
        negated = problem({**entry, "on_turn": on_turn, "negate": True})
        assert negated.loc == ("on_turn",)
    assert parse_assertion(entry).on_turn is None  # without on_turn, as before


@pytest.mark.parametrize("entry", [{"contains": "x"}, {"json_path": {"path": "$.a", "equals": 1}},
                                   {"tool_called": "lookup"}, {"status": 200}, {"regex": "x"}])
def test_on_turn_on_what_a_turn_gives_is_taken(entry: dict[str, Any]) -> None:
    assert parse_assertion({**entry, "on_turn": 2}).on_turn == 2


def test_validate_says_where(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text("""\
models:
  bot: { provider: fake, rules: [ { say: "Your order ORD-1001 is on its way" } ] }
targets:
  bot: { type: model, model: bot }
tests:
  - name: order
    scenario: { script: [ { say: "where is my order?" } ] }
    assert:
      - metric: { name: turn_latency_ms_max, lt: 800 }
        on_turn: 1
""")
    done = tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("s.tamesu.yaml:10:18: tests[0].assert[0].on_turn: metric reads the run's metrics, which on_turn cannot "
            "narrow to one turn: leave on_turn out") in done.stderr, done.stdout + done.stderr
