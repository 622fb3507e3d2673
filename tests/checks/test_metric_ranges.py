"""A `metric` bound (or a `defaults.slo` limit) no value of the metric could meet is a problem where it is written:
before, `metric: {name: turns, lte: -1}` passed `tamesu validate` and failed every run as the agent's fault."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tamesu.checks import parse_assertion
from tamesu.plan._slo_names import RUN_METRICS, elsewhere
from tamesu.suite.metric_ranges import COUNTS, DURATIONS, RATIOS


def test_bounds_no_value_of_a_metric_meets_are_problems_where_written(tamesu: Callable, tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("""\
defaults:
  slo: { turn_latency_ms_p95: 2000, llm_cost_usd: -1 }
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: one
    target: bot
    scenario: { script: [ { say: hi } ] }
    assert:
      - metric: { name: turns, lte: -1 }
      - metric: { name: turn_latency_ms_p95, lt: 0 }
      - metric: { name: talk_over_ratio, gt: 1 }
      - metric: { name: llm_time_ms_total, gt: 5, lt: 3 }
      - metric: { name: a2a_tasks, equals: -2 }
""")
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "suite.yaml:2:8: defaults.slo: no value of llm_cost_usd is at most -1: llm_cost_usd is never negative",
        "suite.yaml:10:17: tests[0].assert[0].metric: no value of turns is at most -1: turns is never negative",
        "suite.yaml:11:17: tests[0].assert[1].metric: no value of turn_latency_ms_p95 is less than 0: "
        "turn_latency_ms_p95 is never negative",
        "suite.yaml:12:17: tests[0].assert[2].metric: no value of talk_over_ratio is more than 1: talk_over_ratio is "
        "a ratio, from 0 to 1",
        "suite.yaml:13:17: tests[0].assert[3].metric: no value of llm_time_ms_total meets gt: 5, lt: 3 together",
        "suite.yaml:14:17: tests[0].assert[4].metric: no value of a2a_tasks is -2: a2a_tasks is never negative",
        "6 problems found"], done.stderr


def test_bounds_some_value_meets_are_taken() -> None:
    for bounds in ({"name": "turns", "lte": 0}, {"name": "turns", "equals": 0}, {"name": "turns", "lt": 1},
                   {"name": "talk_over_ratio", "lte": 1, "gte": 0}, {"name": "talk_over_ratio", "equals": 1},
                   {"name": "stt_word_error_rate", "gt": 1},  # words the agent never said: above 1
                   {"name": "interruption_stop_ms", "lt": -5},  # may be negative: left as written
                   {"name": "my_plugins_metric", "lt": -5}, {"name": "x", "gte": 2, "lte": 2}):
        parse_assertion({"metric": bounds})


def test_every_metric_with_a_range_is_one_tamesu_measures() -> None:
    # a name misspelt here would leave its metric's impossible bounds taken
    known = RUN_METRICS | elsewhere()
    assert {name for name in COUNTS | RATIOS if name not in known} == set()
    statistics = {"frame_late_ms": "frame_late_ms_p99", "loop_lag_ms": "loop_lag_ms_p99"}
    assert {name for name in DURATIONS if statistics.get(name, name) not in known} == set()
