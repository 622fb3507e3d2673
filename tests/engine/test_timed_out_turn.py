"""A turn that timed out keeps its time, and reads as the time it was given: before, its completion was taken
after the target had given up and cleaned up, so `turn_latency_ms` read longer than `turn_timeout` (12.5 s with
an 8 s turn_timeout on a voice agent that never answered). The voice case is in tests/targets/test_voice_burst.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.fixtures import RunningAgents, rest_agents
from conftest import run_tamesu

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


def test_a_turn_that_timed_out_counts_as_long_as_its_turn_timeout(rest_agents: RunningAgents, tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: rest, url: "{rest_agents.url}/chat", turn_timeout: 400ms }}
tests:
  - name: slow
    target: bot
    scenario: {{ script: [ {{ say: slow }} ] }}
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert "turn 1: turn timed out after 0.4s" in json.dumps(result), result
    assert result["metrics"]["turn_latency_ms"] == 400.0, result["metrics"]
    [turn] = result["turns"]
    assert turn["agent"]["completed_at_ms"] - turn["agent"]["sent_at_ms"] == pytest.approx(400, abs=0.01), turn["agent"]
