"""A var may name another var, at any depth, and a var naming nothing is a suite error where it is written.

Before: vars were put in twice (when the plan was made, then at the run), so a third level reached the agent as
written (`deep=xy{{vars.deep3}}`), two vars naming each other were sent as `{{vars.a}}`, and a var naming a var
that does not exist passed `tamesu validate` and failed the run as the agent's fault."""

from __future__ import annotations

import json
from pathlib import Path

from agents.fixtures import RunningAgents, rest_agents
from conftest import run_tamesu

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


def test_vars_naming_vars_are_put_in_at_any_depth(tmp_path: Path, rest_agents: RunningAgents) -> None:
    (tmp_path / "tamesu.yaml").write_text(f'suites: ["*.tamesu.yaml"]\nvars: {{ base: "{rest_agents.url}" }}\n')
    (tmp_path / "s.tamesu.yaml").write_text("""\
vars:
  url: "{{vars.base}}/chat"
  n: 3
  m: "{{vars.n}}"
  cfg: { path: "{{vars.url}}", counts: ["{{ vars.m }}"] }
  deep: "x{{vars.deep2}}"
  deep2: "y{{vars.deep3}}"
  deep3: "z{{vars.city}}"
targets:
  bot:
    type: rest
    url: "{{vars.cfg.path}}"
    request:
      body: { message: "{{message}}", session_id: "{{session}}", data: { m: "{{vars.m}}", cfg: "{{vars.cfg}}" } }
tests:
  - name: t
    cases: [ { name: a, vars: { city: Oslo } }, { name: b, vars: { city: Rome, deep3: "Q{{vars.city}}" } } ]
    scenario: { script: [ { say: "deep={{vars.deep}}" } ] }
    assert:
      - contains: "deep={{vars.deep}}"
      - json_path: { path: $.data.m, equals: 3 }
      - json_path: { path: "$.data.cfg.counts[0]", equals: 3 }
""")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    said = sorted(json.loads((path).read_text())["lines"][0]["text"]
                  for path in (tmp_path / "out").glob("*/s/*/run-1/transcript.json"))
    assert said == ["deep=xyQRome", "deep=xyzOslo"], said


def test_a_var_naming_nothing_or_itself_is_a_problem_where_it_is_written(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text('suites: ["*.tamesu.yaml"]\nvars: { p: "{{vars.gone}}" }\n')
    (tmp_path / "cases.csv").write_text("name,city\nc1,{{vars.nowhere}}\n")
    (tmp_path / "s.tamesu.yaml").write_text("""\
vars: { a: "{{vars.b}}", b: "x{{vars.a}}", ok: "{{vars.p}}" }
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: t
    vars: { own: "{{vars.nope}}" }
    cases: [ { name: inline, vars: { city: "{{vars.zzz}}" } } ]
    cases_file: cases.csv
    scenario: { script: [ { say: "{{vars.ok}} {{vars.own}} {{vars.city}}" } ] }
""")
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = sorted(line for line in done.stderr.splitlines() if ".yaml:" in line or ".csv:" in line)
    assert lines == [
        # in the cases file, at the row and column (it was at the suite's `cases_file`)
        "cases.csv:2:4: city: bad template {{vars.nowhere}}: no var 'nowhere' in the test, its cases, the suite or "
        "the project",
        "s.tamesu.yaml:1:29: vars.b: the vars name each other in a loop (vars.a -> vars.b -> vars.a)",
        "s.tamesu.yaml:6:18: tests[0].vars.own: bad template {{vars.nope}}: no var 'nope' in the test, its cases, "
        "the suite or the project",
        "s.tamesu.yaml:7:44: tests[0].cases[0].vars.city: bad template {{vars.zzz}}: no var 'zzz' in the test, "
        "its cases, the suite or the project",
        "tamesu.yaml:2:12: vars.p: bad template {{vars.gone}}: no var 'gone' in the test, its cases, the suite or "
        "the project",
    ], done.stderr


def test_an_unset_environment_variable_inside_a_var_is_said_where_the_var_is_used(tmp_path: Path) -> None:
    # before: validate said ok and the run failed "the next user turn could not be written: {{env.X}} has no
    # value", fault: agent, where the same template written in the step is refused before anything runs
    (tmp_path / "s.tamesu.yaml").write_text("""\
vars:
  region: "{{env.TAMESU_TEST_UNSET_REGION}}"
  token: "{{secrets.TAMESU_TEST_UNSET_TOKEN}}"
  unused: "{{env.TAMESU_TEST_UNSET_OTHER}}"
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat", headers: { Authorization: "Bearer {{vars.token}}" } }
tests:
  - { name: t, scenario: { script: [ { say: "in {{vars.region}}" } ] } }
""")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert sorted(line for line in done.stderr.splitlines() if ".yaml:" in line) == [
        "s.tamesu.yaml:6:80: targets.bot.headers.Authorization: secret TAMESU_TEST_UNSET_TOKEN is not set "
        "(environment or .env) (in {{vars.token}})",
        "s.tamesu.yaml:8:45: tests[0].scenario.script[0].say: environment variable TAMESU_TEST_UNSET_REGION is not "
        "set (in {{vars.region}})",
    ], done.stderr


def test_a_var_holding_a_secret_reaches_the_agent_in_a_header(tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: the target's header went out as `Bearer {{secrets.SHOP_TOKEN}}` (the var was put in, its secret
    # never rendered), so the agent refused a token nobody wrote; a step's `say` of the same var was rendered
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
vars: {{ token: "{{{{secrets.SHOP_TOKEN}}}}", auth: "Bearer {{{{vars.token}}}}" }}
targets:
  bot: {{ type: rest, url: "{rest_agents.url}/chat", headers: {{ Authorization: "{{{{vars.auth}}}}" }} }}
tests:
  - name: t
    scenario: {{ script: [ {{ say: "hello" }} ] }}
    assert: [ {{ json_path: {{ path: $.auth, equals: "Bearer s3cr3t-var-token" }} }} ]
""")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path, env={"SHOP_TOKEN": "s3cr3t-var-token"})
    assert done.returncode == 0, done.stdout + done.stderr
    written = [path for path in (tmp_path / "out").rglob("*") if path.is_file()
               and "s3cr3t-var-token" in path.read_text(errors="replace")]
    assert written == [] and "s3cr3t-var-token" not in done.stdout + done.stderr


def test_equals_fills_its_templates_as_contains_does_and_a_secret_in_it_stays_masked(
        tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: `equals` compared the literal `{{secrets.SHOP_TOKEN}}` (`contains` filled it in), so an agent that
    # answered exactly right failed as the agent's fault
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
vars: {{ token: "{{{{secrets.SHOP_TOKEN}}}}", n: 1 }}
targets:
  bot: {{ type: rest, url: "{rest_agents.url}/chat", response: {{ text: $.text }} }}
tests:
  - name: right
    scenario: {{ script: [ {{ say: "{{{{secrets.SHOP_TOKEN}}}}" }} ] }}
    assert:
      - equals: "Echo 1: {{{{secrets.SHOP_TOKEN}}}}"
      - equals: "Echo {{{{vars.n}}}}: {{{{vars.token}}}}"
      - equals: {{ path: $.text, value: "Echo 1: {{{{env.SHOP_TOKEN}}}}" }}
  - name: wrong
    scenario: {{ script: [ {{ say: "nothing" }} ] }}
    assert: [ {{ equals: "{{{{vars.token}}}}" }} ]
""")
    done = run_tamesu(["run", "--out", "out", "--report", "json,junit,html"], cwd=tmp_path,
                      env={"SHOP_TOKEN": "s3cr3t-var-token"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASS  s/right" in done.stdout and 'expected exactly "***", turn 1 said "Echo 1: nothing"' in done.stdout, \
        done.stdout
    written = [path for path in (tmp_path / "out").rglob("*") if path.is_file()
               and "s3cr3t-var-token" in path.read_text(errors="replace")]
    assert written == [] and "s3cr3t-var-token" not in done.stdout + done.stderr


def test_an_assertion_value_that_is_one_var_keeps_the_vars_type_and_a_say_stays_text(
        tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: the plan put `{{vars.n}}` in as text, so `equals: {path: $.turn, value: "{{vars.n}}"}` failed
    # `$.turn is 1 in turn 1, expected "1"` against an agent that answered exactly right
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
vars: {{ n: 1, on: true, ids: [1, 2], cfg: {{ k: 1.5 }} }}
targets:
  bot:
    type: rest
    url: "{rest_agents.url}/chat"
    request:
      body: {{ message: "{{{{message}}}}", session_id: "{{{{session}}}}", data: {{ ids: [1, 2], on: true }} }}
    response: {{ text: $.text }}
tests:
  - name: typed
    scenario: {{ script: [ {{ say: "{{{{vars.n}}}}" }} ] }}
    assert:
      - equals: {{ path: $.turn, value: "{{{{vars.n}}}}" }}
      - equals: "Echo 1: 1"
      - json_path: {{ path: $.data.ids, equals: "{{{{ vars.ids }}}}" }}
      - json_path: {{ path: $.data.on, equals: "{{{{vars.on}}}}" }}
      - json_path: {{ path: $.data.ids, not_equals: "{{{{vars.cfg}}}}" }}
      - json_path: {{ path: $.turn, gte: "{{{{vars.n}}}}", lt: "{{{{vars.cfg.k}}}}" }}
      - json_path: {{ path: $.text, equals: "Echo {{{{vars.n}}}}: {{{{vars.n}}}}" }}
""")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [json.loads(path.read_text())["lines"][0]["text"]
            for path in (tmp_path / "out").glob("*/s/*/run-1/transcript.json")]
    assert said == ["1"], said


def test_a_var_in_a_regex_is_matched_as_text(tmp_path: Path, rest_agents: RunningAgents) -> None:
    # before: the plan pasted `{{vars.p}}` into the pattern as it was, so `9.9` matched "9x9" (docs/assertions.md:
    # a value filled in is matched as text, as a captured value always was)
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
vars: {{ p: "9.9", plus: "a+b" }}
targets:
  bot: {{ type: rest, url: "{rest_agents.url}/chat" }}
tests:
  - name: literal
    target: bot
    scenario: {{ script: [ {{ say: "price 9.9 for a+b" }} ] }}
    assert:
      - regex: "price {{{{vars.p}}}} for {{{{vars.plus}}}}"
      - regex: {{ pattern: "PRICE {{{{ vars.p }}}}", ignore_case: true }}
  - name: no wildcard
    target: bot
    scenario: {{ script: [ {{ say: "price 9x9 for aab" }} ] }}
    assert:
      - not_regex: "{{{{vars.p}}}}"
      - not_regex: {{ pattern: "{{{{vars.plus}}}}" }}
""")
    done = run_tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
