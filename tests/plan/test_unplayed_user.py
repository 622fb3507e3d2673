"""A goal or a persona beside a script, in a project with no simulator model, is read by nothing: the script says
its steps and the run ends (measured on the example shop: it passed, and said nothing of either). Now each is a
warning where written, by `validate` and `run`; with a simulator model it plays after the script, and is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from example_shop import example_shop

_SUITE = """\
targets:
  shop:
    type: rest
    url: "{{env.SHOP_URL}}/chat"
    request: { body: { message: "{{message}}", session_id: "{{session}}" } }
    response: { text: $.reply }
tests:
  - name: refund
    target: shop
    persona: { name: Marta, style: angry }
    scenario:
      goal: get a refund for ORD-1001
      script: [ { say: "Hi, where is my order ORD-1001?" } ]
"""
_GOAL = ("warning: s.tamesu.yaml:12:13: tests[0].scenario.goal: the goal is not used: no models.simulator "
         "(tamesu.yaml or the suite) plays the user, so the script's steps are said and the run ends")
_PERSONA = ("warning: s.tamesu.yaml:10:14: tests[0].persona: name, style: only the simulated user reads them, and no "
            "models.simulator (tamesu.yaml or the suite) plays the user, so the script's steps are said and the run "
            "ends")


def test_a_goal_and_persona_beside_a_script_with_no_simulator_are_said_unused(tmp_path: Path, tamesu: Any) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "s.tamesu.yaml").write_text(_SUITE)
    with example_shop(tmp_path) as (_folder, url):
        checked = tamesu(["validate", "s.tamesu.yaml"], cwd=project, env={"SHOP_URL": url})
        assert checked.returncode == 0, checked.stderr
        assert [line for line in checked.stderr.splitlines() if line.startswith("warning")] == [_GOAL, _PERSONA]
        ran = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=project, env={"SHOP_URL": url, "NO_COLOR": "1"})
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert _GOAL in ran.stdout + ran.stderr and _PERSONA in ran.stdout + ran.stderr, ran.stdout + ran.stderr
        [run] = list((project / "out").iterdir())
        result = json.loads((run / "s" / "refund" / "run-1" / "result.json").read_text())
        assert result["end_reason"] == "script_done", result["end_reason"]

        # with a simulator model the persona goes on toward the goal after the script: nothing to warn of
        (project / "tamesu.yaml").write_text(
            "models:\n  simulator: { provider: fake, rules: [ { say: 'I want a refund, please' } ] }\n")
        checked = tamesu(["validate", "s.tamesu.yaml"], cwd=project, env={"SHOP_URL": url})
        assert checked.returncode == 0, checked.stderr
        assert "not used" not in checked.stderr, checked.stderr
