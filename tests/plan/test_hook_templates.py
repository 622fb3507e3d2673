"""A hook's template that names nothing is a suite error before anything runs (exit 2), as every other template
is: before, `tamesu validate` said ok and the run failed at the hook ("{{vars.nope}} has no value", exit 3)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_hook_templates_that_name_nothing_are_refused_where_written(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text("""\
suites: ["*.tamesu.yaml"]
vars: { host: "127.0.0.1" }
hooks:
  before_all: [ "echo {{vars.nope}}" ]
""")
    (tmp_path / "s.tamesu.yaml").write_text("""\
vars: { port: "9" }
hooks:
  before_all: [ "echo {{vars.host}}:{{vars.port}} {{captured.id}}" ]
  before_each: [ { http: { url: "http://{{vars.host}}:{{vars.port}}/{{vars.zzz}}" } }, "seed {{captured.id}}" ]
  after_each: [ "echo {{vars.lang}} {{captured.id}}" ]
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: t
    vars: { lang: en }
    capture: [ { name: id, regex: "ORD-[0-9]+" } ]
    scenario: { script: [ { say: hi } ] }
""")
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = sorted(line for line in done.stderr.splitlines() if ".yaml:" in line)
    assert lines == [
        "s.tamesu.yaml:3:17: hooks.before_all[0]: bad template {{captured.id}}: a before_all hook runs before every "
        "test, where only vars, env and secrets have values",
        "s.tamesu.yaml:4:33: hooks.before_each[0].http.url: bad template {{vars.zzz}}: no var 'zzz' in the suite or "
        "the project",
        # a before_each runs before the conversation: validate said ok, and each run was an error (exit 3)
        "s.tamesu.yaml:4:88: hooks.before_each[1]: bad template {{captured.id}}: a before_each hook runs before the "
        "conversation, which captures nothing yet (an after_each hook has its captures)",
        "tamesu.yaml:4:17: hooks.before_all[0]: bad template {{vars.nope}}: no var 'nope' in the suite or the project",
    ], done.stderr


def test_an_after_each_hook_naming_a_capture_no_test_captures_is_refused_where_written(tmp_path: Path) -> None:
    # before: validate said ok, and after every run the hook failed "{{captured.ordr_id}} has no value", a
    # warning each time: a misspelt name, or a capture the tests never had
    # (tamesu.yaml's are not checked so: `tamesu run b.tamesu.yaml` runs them with one suite of several)
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\n'
                                          'hooks: { after_each: [ "echo {{captured.other}}" ] }\n')
    (tmp_path / "s.tamesu.yaml").write_text("""\
hooks:
  after_each: [ "echo {{captured.id}}", { http: { url: "http://127.0.0.1:9/{{captured.ordr_id}}" } } ]
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: t
    capture: [ { name: id, regex: "ORD-[0-9]+" } ]
    scenario: { script: [ { say: hi } ] }
  - name: broken
    capture: [ { name: rma, regex: "RMA-[0-9]+" } ]
    scenario: { script: [ { say: hi } ] }
    assert: [ { contains: "" } ]
""")
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = sorted(line for line in done.stderr.splitlines() if ".yaml:" in line)
    assert lines == [  # a test with a problem of its own still captures what it writes: no line more for it
        "s.tamesu.yaml:12:27: tests[1].assert[0].contains: expected non-empty text",
        "s.tamesu.yaml:2:56: hooks.after_each[1].http.url: bad template {{captured.ordr_id}}: no test captures "
        "'ordr_id' (the tests capture id, rma)",
    ], done.stderr


def test_a_hook_around_every_test_naming_a_var_one_test_lacks_is_refused_where_written(tmp_path: Path) -> None:
    # before: validate said ok, as some test had the var, and every run of the test without it was an error
    # ("before_each hook 1: {{vars.order}} has no value", exit 3); a skipped test, which no hook runs around,
    # needs none
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\n')
    (tmp_path / "s.tamesu.yaml").write_text("""\
hooks:
  before_each: [ "seed {{vars.order}} {{vars.lang}}" ]
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: lookups
    cases: [ { name: a, vars: { order: ORD-1, lang: en } }, { name: b, vars: { order: ORD-2 } } ]
    vars: { lang: de }
    scenario: { script: [ { say: "{{vars.order}}" } ] }
  - name: plain
    vars: { lang: fr }
    scenario: { script: [ { say: hi } ] }
  - name: later
    skip: true
    scenario: { script: [ { say: hi } ] }
""")
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if ".yaml:" in line] == [
        "s.tamesu.yaml:2:18: hooks.before_each[0]: bad template {{vars.order}}: test 's/plain' has no var 'order', "
        "and a before_each hook runs around every test (give it one, or a default in vars:)",
    ], done.stderr


def test_a_project_targets_template_is_placed_in_tamesu_yaml(tmp_path: Path) -> None:
    # before: "suites/a.tamesu.yaml:1:1: targets.shop.url: ..." (the suite's first character), once per suite
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\ntargets:\n  shop:\n    type: rest\n'
                                          '    url: "{{env.TAMESU_TEST_UNSET_URL}}/chat"\n')
    for name in ("a", "b"):
        (tmp_path / f"{name}.tamesu.yaml").write_text(
            f"name: {name}\ntests:\n  - {{ name: t, target: shop, scenario: {{ script: [ {{ say: hi }} ] }} }}\n")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[:2] == [
        "tamesu.yaml:5:10: targets.shop.url: environment variable TAMESU_TEST_UNSET_URL is not set",
        "1 problem found"], done.stderr


def test_a_hooks_output_named_in_a_target_says_what_passes_a_token_instead(tmp_path: Path) -> None:
    # before: "unknown namespace 'hooks'" alone: a user whose before_all hook fetched a token was not told that no
    # hook passes a value, nor that session.open (or the environment when tamesu starts) is the way
    (tmp_path / "s.tamesu.yaml").write_text("""\
hooks: { before_all: [ "./token.sh" ] }
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat", headers: { Authorization: "Bearer {{hooks.token}}" } }
tests:
  - { name: t, scenario: { script: [ { say: hi } ] } }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("s.tamesu.yaml:")]
    assert line.startswith("s.tamesu.yaml:3:80: targets.bot.headers.Authorization: bad template {{hooks.token}}: "
                           "unknown namespace 'hooks' (one of "), line
    assert line.endswith("; a hook passes no value to the run: a token the target needs is minted by its "
                         "session.open ({{session.NAME}}), or read when tamesu starts (TOKEN=$(./get-token.sh) "
                         "tamesu run: {{secrets.TOKEN}})"), line
