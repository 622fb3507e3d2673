"""A cases file's bad row is said where it is written in the cases file, at its row and value, one line each."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_tamesu
from tamesu.plan.cases import read_cases

SUITE = """\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: spreadsheet
    cases_file: data/cases.csv
    scenario: { script: [ { say: "{{vars.note}} in {{vars.city}}" } ] }
  - name: exported
    cases_file: data/cases.json
    scenario: { script: [ { say: "{{vars.word}}" } ] }
  - name: unnamed
    cases_file: data/unnamed.json
    scenario: { script: [ { say: "{{vars.word}}" } ] }
  - name: unnamed again
    cases_file: data/unnamed.json
    scenario: { script: [ { say: "{{vars.word}}" } ] }
"""

NO_VAR = "bad template {{vars.nowhere}}: no var 'nowhere' in the test, its cases, the suite or the project"


def test_a_cases_files_bad_rows_are_said_at_the_row_and_value_in_it(tmp_path: Path) -> None:
    # before: every one of them at the suite's `cases_file` key (`s.tamesu.yaml:5:17: tests[0].cases_file: case
    # 'c1': vars.city: ...`, `... two cases are named 'c1'`, `... unnamed.json item 2 has no name`), said again
    # for each test that reads the file, and the file's own line and column nowhere
    (tmp_path / "suites" / "data").mkdir(parents=True)
    (tmp_path / "suites" / "s.tamesu.yaml").write_text(SUITE)
    (tmp_path / "suites" / "data" / "cases.csv").write_text(
        'name,note,city\nc1,"a, quoted, note",{{vars.nowhere}}\nc2,plain,Oslo\nc1,again,Rome\n')
    (tmp_path / "suites" / "data" / "cases.json").write_text(json.dumps([
        {"name": "fr", "vars": {"word": "bonjour"}},
        {"name": "de", "word": "hallo", "vars": {"other": "{{vars.nowhere}}"}},
        {"name": "fr", "word": "salut"},
    ], indent=1))
    (tmp_path / "suites" / "data" / "unnamed.json").write_text('[{"name": "a"},\n {"name": " ", "word": "x"}]')
    for command in ("validate", "run"):
        done = run_tamesu([command, "suites/s.tamesu.yaml"], cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(done.stderr.splitlines()) == [
            "5 problems found",
            "suites/data/cases.csv:2:22: city: " + NO_VAR,
            "suites/data/cases.csv:4:1: name: two cases are named 'c1'",
            "suites/data/cases.json:12:13: [1].vars.other: " + NO_VAR,
            "suites/data/cases.json:16:11: [2].name: two cases are named 'fr'",
            "suites/data/unnamed.json:2:11: [1].name: item 2 has no name",  # once, for the two tests reading it
        ], done.stderr


def test_a_whole_files_problem_is_still_said_where_the_suite_names_it(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(SUITE.replace("data/", ""))
    (tmp_path / "cases.csv").write_text("order,city\n1,Oslo\n")
    (tmp_path / "cases.json").write_text('{"name": "fr"}')
    (tmp_path / "unnamed.json").write_text("[]")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "s.tamesu.yaml:5:17: tests[0].cases_file: cases.csv needs a header row with a name column (its first row: "
        "'order,city')",
        "s.tamesu.yaml:8:17: tests[1].cases_file: cases.json must be a JSON array of objects",
        "s.tamesu.yaml:11:17: tests[2].cases_file: unnamed.json has no cases: an empty array",
        "s.tamesu.yaml:14:17: tests[3].cases_file: unnamed.json has no cases: an empty array",
        "4 problems found",
    ], done.stderr


def test_a_rows_own_problem_does_not_hide_those_the_other_rows_make(tmp_path: Path) -> None:
    # before: a row with a field too many (or no name) was the one problem said; the name two other rows share
    # and another row's bad template came out only once it was fixed, one `validate` at a time
    (tmp_path / "s.tamesu.yaml").write_text(
        'targets:\n  bot: { type: rest, url: "http://127.0.0.1:9/chat" }\ntests:\n'
        '  - name: sheet\n    cases_file: cases.csv\n    scenario: { script: [ { say: "{{vars.city}}" } ] }\n'
        '  - name: export\n    cases_file: cases.json\n    scenario: { script: [ { say: "{{vars.word}}" } ] }\n')
    (tmp_path / "cases.csv").write_text('name,city\none,Paris\ntwo,Rome,extra\n,Oslo\none,Bergen\n'
                                        'three,"{{vars.nowhere}}"\nfour,Lima\n')
    (tmp_path / "cases.json").write_text('[{"name": "a", "word": "x"},\n {"name": "", "word": "y"},\n'
                                         ' {"name": "a", "word": "z"}]')
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "cases.csv:3:10: row 3 has more fields than its header (2): quote a value that holds ','",
        "cases.csv:4:1: name: row 4 has no name",
        "cases.csv:5:1: name: two cases are named 'one'",
        f"cases.csv:6:7: city: {NO_VAR}",
        "cases.json:2:11: [1].name: item 2 has no name",
        "cases.json:3:11: [2].name: two cases are named 'a'",
        "6 problems found",
    ], done.stderr


def test_a_problem_some_cases_values_make_names_each_case_and_its_row(tmp_path: Path) -> None:
    # before: "s.tamesu.yaml:7:27: tests[0].assert[0].contains: expected non-empty text", once for the two rows
    # with an empty `expect`, naming neither; a problem every case has (a bad pattern written in the suite) is
    # still the test's own, said once
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: lookups
    cases_file: cases.csv
    scenario: { script: [ { say: "{{vars.order}}" } ] }
    assert: [ { contains: "{{vars.expect}}" }, { regex: "(" } ]
  - name: inline
    cases: [ { name: late, vars: { expect: "" } }, { name: early, vars: { expect: ok } } ]
    scenario: { script: [ { say: hi } ] }
    assert: [ { contains: "{{vars.expect}}" } ]
""")
    (tmp_path / "cases.csv").write_text("name,order,expect\nshipped,ORD-1,shipped\nlost,ORD-2,\nodd,ORD-3,\n")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "s.tamesu.yaml:7:27: tests[0].assert[0].contains: expected non-empty text (case 'lost', cases.csv:3)",
        "s.tamesu.yaml:7:27: tests[0].assert[0].contains: expected non-empty text (case 'odd', cases.csv:4)",
        "s.tamesu.yaml:7:57: tests[0].assert[1].regex: invalid regular expression '(': missing ), unterminated "
        "subpattern at position 0",
        "s.tamesu.yaml:11:27: tests[1].assert[0].contains: expected non-empty text (case 'late')",
        "4 problems found",
    ], done.stderr


def test_a_hand_written_csv_with_a_space_after_each_comma_reads_as_meant(tmp_path: Path) -> None:
    # before: the header's ' order' was no var `order` ("bad template {{vars.order}}: no var 'order'"), and a
    # quoted value after a space was three fields ("row 2 has more fields than its header (3): quote a value
    # that holds ','", a value that was quoted)
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: lookups
    cases_file: cases.csv
    scenario: { script: [ { say: "{{vars.order}}" } ] }
    assert: [ { contains: "{{vars.expect}}" } ]
""")
    (tmp_path / "cases.csv").write_text('name, order, expect\nshipped, ORD-1, "shipped, arriving"\n'
                                        'lost, ORD-2, {{vars.nowhere}}\nodd, ORD-3, x, y\n')
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [  # each at its value, after the spaces
        "cases.csv:3:14: expect: " + NO_VAR,
        "cases.csv:4:16: row 4 has more fields than its header (3): quote a value that holds ','",
        "2 problems found",
    ], done.stderr
    (tmp_path / "cases.csv").write_text('name, order, expect\nshipped, ORD-1, "shipped, arriving"\n')
    [case] = read_cases(tmp_path / "cases.csv")
    assert (case.name, case.vars) == ("shipped", {"order": "ORD-1", "expect": "shipped, arriving"})


def test_a_column_or_item_named_vars_that_is_no_vars_object_is_said_where_written(tmp_path: Path) -> None:
    # before: the CSV's `vars` column and the JSON item's `"vars": "cold"` were dropped in silence: `{{vars.vars}}`
    # was "no var 'vars'", and a test that did not name it ran without the value written; of a var written both
    # beside `vars` and in it, the one in `vars` was kept in silence
    (tmp_path / "s.tamesu.yaml").write_text(
        'targets:\n  bot: { type: rest, url: "http://127.0.0.1:9/chat" }\ntests:\n'
        '  - name: sheet\n    cases_file: cases.csv\n    scenario: { script: [ { say: "{{vars.city}}" } ] }\n'
        '  - name: export\n    cases_file: cases.json\n    scenario: { script: [ { say: "{{vars.word}}" } ] }\n')
    (tmp_path / "cases.csv").write_text("name, city, vars\none, Paris, warm\n")
    (tmp_path / "cases.json").write_text('[{"name": "a", "word": "x", "vars": "cold"},\n'
                                         ' {"name": "b", "word": "y", "vars": {"mood": "ok"}},\n'
                                         ' {"name": "c", "word": "y", "vars": {"word": "z"}}]')
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "cases.csv:1:13: vars: `vars` cannot name a column (a JSON case's `vars` holds its vars; a CSV's columns "
        "are them): rename it",
        "cases.json:1:37: [0].vars: must be an object of vars (name: value), not str",
        "cases.json:3:46: [2].vars.word: 'word' is written both beside vars and in it: write it once",
        "3 problems found",
    ], done.stderr
