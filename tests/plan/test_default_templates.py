"""`defaults.assert` is graded on every test's runs with that test's vars and captures: a template there naming
what a test lacks is a suite error where the default is written (exit 2). Before, `validate` said ok and each such
run failed "cannot check: {{vars.expect}} has no value", fault agent, exit 1: the agent blamed for the suite."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_a_default_assertion_naming_what_a_test_lacks_is_refused_where_written(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\n'
                                          'defaults: { assert: [ { contains: "{{vars.expect}}" } ] }\n')
    (tmp_path / "s.tamesu.yaml").write_text("""\
defaults:
  assert:
    - regex: "{{vars.nowhere}}"
    - contains: "{{captured.item}}"
    - not_contains: "{{vars.banned}} {{captured.id}}"
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
vars: { banned: Traceback }
tests:
  - name: lookups
    capture: [ { name: item, regex: "ORD-[0-9]+" }, { name: id, regex: "[0-9]+" } ]
    cases: [ { name: a, vars: { expect: shipped } } ]
    scenario: { script: [ { say: hi } ] }
  - name: plain
    capture: [ { name: id, regex: "[0-9]+" } ]
    scenario: { script: [ { say: hi } ] }
  - name: other
    capture: [ { name: id, regex: "[0-9]+" } ]
    scenario: { script: [ { say: hi } ] }
  - name: later
    skip: true
    scenario: { script: [ { say: hi } ] }
""")
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if ".yaml:" in line] == [
        "s.tamesu.yaml:3:14: defaults.assert[0].regex: bad template {{vars.nowhere}}: no test has the var 'nowhere' "
        "(a default assertion is graded on every test's runs)",
        "s.tamesu.yaml:4:17: defaults.assert[1].contains: bad template {{captured.item}}: test 's/plain' and 1 more "
        "has no capture 'item' (a default assertion is graded on every test's runs)",
    ], done.stderr
    # the suite right, the project's default is checked against its tests the same way
    (tmp_path / "s.tamesu.yaml").write_text((tmp_path / "s.tamesu.yaml").read_text().replace(
        '    - regex: "{{vars.nowhere}}"\n    - contains: "{{captured.item}}"\n', ""))
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if ".yaml:" in line] == [
        "tamesu.yaml:2:35: defaults.assert[0].contains: bad template {{vars.expect}}: test 's/plain' and 1 more has "
        "no var 'expect' (a default assertion is graded on every test's runs)",
    ], done.stderr
