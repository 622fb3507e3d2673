"""Two cases of one name are one problem, where the second is written."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_two_cases_of_one_name_are_one_problem_where_the_second_is(tmp_path: Path) -> None:
    # before: each was said twice, "tests[0].cases: two cases are named 'row1'" (at `cases`, for a test with a
    # cases_file and none) and "tests[0].name: another test is named 'dup [row1]'"
    (tmp_path / "dup.csv").write_text("name,city\nrow1,A\nrow1,B\n")
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: dup
    cases_file: dup.csv
    scenario: { script: [ { say: "in {{vars.city}}" } ] }
  - name: inline
    cases: [ { name: a }, { name: b }, { name: a } ]
    scenario: { script: [ { say: hi } ] }
  - name: "inline [b]"
    scenario: { script: [ { say: hi } ] }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "dup.csv:3:1: name: two cases are named 'row1'",  # was at the suite's `cases_file`
        "s.tamesu.yaml:8:48: tests[1].cases[2].name: two cases are named 'a'",
        "s.tamesu.yaml:10:11: tests[2].name: another test is named 'inline [b]'",  # two tests: still said
        "3 problems found",
    ], done.stderr
