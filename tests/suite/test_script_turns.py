"""A script's turns are all said: with `max_turns` left to its default (10), a script of 12 turns runs them all (it
was cut at 10 and its `turns: {equals: 12}` failed, the agent blamed, while `validate` said ok); a `max_turns`
written fewer than the turns written is the suite's mistake, said where it is written (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_tamesu

STEPS = ", ".join(f"{{ say: 'question {n}' }}" for n in range(1, 13))


def _suite(tmp_path: Path, scenario_extra: str = "") -> Path:
    suite = tmp_path / "s.tamesu.yaml"
    suite.write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "question", say: "an answer" }} ] }}
tests:
  - name: twelve
    target: bot
    scenario: {{ {scenario_extra}script: [ {STEPS} ] }}
    assert: [ {{ turns: {{ equals: 12 }} }} ]
""", encoding="utf-8")
    return suite


def test_a_script_longer_than_the_default_max_turns_is_said_whole(tmp_path: Path) -> None:
    _suite(tmp_path)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"TAMESU_STORE": "off"})
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert [t["user"]["text"] for t in result["turns"]] == [f"question {n}" for n in range(1, 13)]
    assert result["end_reason"] == "script_done"  # as a script of fewer turns than max_turns ends


def test_a_max_turns_fewer_than_the_scripts_turns_is_the_suites_mistake(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "max_turns: 5, ")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path, env={"TAMESU_STORE": "off"})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "max_turns" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    line = suite.read_text().splitlines().index("    scenario: { max_turns: 5, script: [ " + STEPS + " ] }") + 1
    assert lines[0].startswith(f"{suite.name}:{line}:"), lines
    assert "max_turns 5 is fewer than the 12 turns the script writes" in lines[0], lines
    assert "Traceback" not in done.stdout + done.stderr
