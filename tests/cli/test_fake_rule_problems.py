"""A fake model's bad rules are reported as a suite's bad keys are: one `file:line:col: path: problem` line per
bad rule, all at once, placed in the rules file (or at the inline rule), with "did you mean", exit 2, from
`validate`, `run` and `test` alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Tamesu = Callable[..., Any]

PROJECT = """\
models:
  judge: { provider: fake, rules: rules/judge.yaml }
  sim:
    provider: fake
    rules:
      - { wen: "(?i)hello", say: "hi" }
      - { when: "(?i)bye", say: "bye" }
      - { rubic: "x", pass: true }
targets:
  bot: { type: model, model: judge }
"""

RULES = """\
# the judge's rules
- { rubric: "(?i)polite", pass: true }
- rubric: "(?i)polite"
  pas: false
- { pas: true }
- rubric: "([a"
  pass: true
- { description: "the order" }
- 3
"""

SUITE = "tests:\n  - name: t\n    target: bot\n    scenario: { script: [{ say: hi }] }\n"

EXPECTED = [
    "rules/judge.yaml:4:3: rules[1].pas: not a judge rule key (did you mean 'pass'?)",
    "rules/judge.yaml:5:3: rules[2]: cannot tell what it is for (keys: 'pas' (did you mean 'pass'?)); ",
    "rules/judge.yaml:6:11: rules[3].rubric: '([a' is not a valid regular expression",
    "rules/judge.yaml:8:3: rules[4]: an extract rule needs value (null: not found) or pattern",
    "rules/judge.yaml:9:3: rules[5]: a rule is a mapping, got a number",
    "tamesu.yaml:6:11: models.sim.rules[0].wen: not a turn rule key (did you mean 'when'?)",
    "tamesu.yaml:8:11: models.sim.rules[2].rubic: not a judge rule key (did you mean 'rubric'?)",
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "judge.yaml").write_text(RULES)
    (tmp_path / "tamesu.yaml").write_text(PROJECT)
    (tmp_path / "s.yaml").write_text(SUITE)
    (tmp_path / "m.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    return tmp_path


@pytest.mark.parametrize("args", [["validate", "s.yaml"], ["run", "s.yaml"], ["test", "-i", "m.jsonl", "-n", "bot"]])
def test_every_bad_rule_is_one_placed_line(project: Path, args: list[str], tamesu: Tamesu) -> None:
    done = tamesu(args, project, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line and not line.endswith("problems found")]
    assert len(lines) == len(EXPECTED), done.stderr
    for line, start in zip(lines, EXPECTED, strict=True):
        assert line.startswith(start), (line, start)
    assert "Extra inputs are not permitted" not in done.stderr  # pydantic's wording stays inside


def test_good_rules_in_a_file_with_a_rules_key_pass(project: Path, tamesu: Tamesu) -> None:
    (project / "rules" / "judge.yaml").write_text(
        "rules:\n  - { rubric: x, pass: true }\n  - { rubric: y, pas: true }\n")
    (project / "tamesu.yaml").write_text(PROJECT.replace('"(?i)hello", wen', "").replace("wen:", "when:")
                                         .replace("rubic", "rubric"))
    done = tamesu(["validate", "s.yaml"], project)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0] == \
        "rules/judge.yaml:3:18: rules[1].pas: not a judge rule key (did you mean 'pass'?)"
    (project / "rules" / "judge.yaml").write_text("rules:\n  - { rubric: x, pass: true }\n")
    done = tamesu(["validate", "s.yaml"], project)
    assert done.returncode == 0, done.stderr


def test_a_rules_file_that_cannot_be_read_points_at_rules_key(project: Path, tamesu: Tamesu) -> None:
    (project / "rules" / "judge.yaml").unlink()
    done = tamesu(["validate", "s.yaml"], project)
    assert done.returncode == 2
    assert "tamesu.yaml:2:35: models.judge.rules: fake rules file rules/judge.yaml: file not found" in done.stderr
    (project / "rules" / "judge.yaml").write_text("- { rubric: [x\n")
    done = tamesu(["validate", "s.yaml"], project)
    assert done.returncode == 2
    assert done.stderr.startswith("rules/judge.yaml:"), done.stderr
    assert "YAML syntax error" in done.stderr
    (project / "rules" / "judge.yaml").write_text("when: x\n")
    done = tamesu(["validate", "s.yaml"], project)
    assert "rules/judge.yaml:1:1: rules: a fake rules file is a list of rules, got a mapping" in done.stderr


def test_an_empty_rules_file_is_said_so(project: Path, tamesu: Tamesu) -> None:
    # before: "rules: a fake rules file is a list of rules, got a mapping" of a file that holds nothing
    for empty in ("", "# the judge's rules, to come\n"):
        (project / "rules" / "judge.yaml").write_text(empty)
        done = tamesu(["validate", "s.yaml"], project)
        assert done.returncode == 2, done.stderr
        assert ("tamesu.yaml:2:35: models.judge.rules: fake rules file rules/judge.yaml is empty: write a list of "
                "rules in it") in done.stderr.splitlines(), done.stderr


def test_rules_that_contradict_themselves_run_for_ever_or_are_missing_are_refused(project: Path,
                                                                                  tamesu: Tamesu) -> None:
    # before: all three were accepted, and an empty file said "got a mapping"
    (project / "rules" / "judge.yaml").write_text(
        '- { rubric: "(x+)+$", pass: true }\n'
        '- { description: "the order", pattern: "ORD-(\\\\d+)" }\n')
    (project / "tamesu.yaml").write_text(PROJECT.replace('{ wen: "(?i)hello", say: "hi" }',
                                                         '{ when: "(a+)+$", say: "hi" }')
                                         .replace('{ when: "(?i)bye", say: "bye" }',
                                                  '{ when: "(?i)bye", say: "bye", stop: true }')
                                         .replace('{ rubic: "x", pass: true }',
                                                  '{ when: "(?i)ok", goal_achieved: true, stop: true }'))
    done = tamesu(["validate", "s.yaml"], project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[:3] == [
        "rules/judge.yaml:1:13: rules[0].rubric: `(x+)+` repeats a group that itself repeats: on some texts that "
        "takes exponential time, and Python's regular expressions cannot be stopped then, not even by Ctrl-C: write "
        "it without the nesting, or make the inner repeat possessive (a++) or the group atomic ((?>...))",
        "tamesu.yaml:6:17: models.sim.rules[0].when: `(a+)+` repeats a group that itself repeats: on some texts "
        "that takes exponential time, and Python's regular expressions cannot be stopped then, not even by Ctrl-C: "
        "write it without the nesting, or make the inner repeat possessive (a++) or the group atomic ((?>...))",
        "tamesu.yaml:7:9: models.sim.rules[1]: say would never be sent: a rule with stop ends the conversation "
        "without a turn; drop say, or stop"], done.stderr
    assert "2 problems found" not in done.stderr and "3 problems found" in done.stderr  # both ends: documented
    (project / "rules" / "judge.yaml").write_text("\n")
    (project / "tamesu.yaml").write_text(PROJECT.replace("wen:", "when:").replace("rubic", "rubric"))
    done = tamesu(["validate", "s.yaml"], project)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "tamesu.yaml:2:35: models.judge.rules: fake rules file rules/judge.yaml is empty: write a list of rules in it")

