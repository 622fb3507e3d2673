"""A number anywhere in what a user writes is a number as YAML and JSON write it: `repeat: '4'` is text, one line
`'4' is text: write 4` where it is written, exit 2; before, pydantic's lax mode read it as 4 (only `load.ramp` was
strict) and `threshold: '0.5'` as 0.5, and `repeat: true` as one run. A duration (`timeout: '30'`, `30s`) and an
HTTP status (`"2xx"`, `"200"`) take text on purpose and still do. Text beside a boolean (`skip:`, tamesu.yaml's
`store:`) that YAML 1.1 read as one (`skip: no`, which skipped the test with the reason "no") is refused as a
boolean's `yes` is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_tamesu
from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.plan.targets import Resolver

_SUITE = """\
models:
  shop: { provider: fake, rules: [ { say: "Your order ORD-1 is on its way" } ] }
  judge: { provider: fake, rules: [ { rubric: polite, pass: true, score: "0.9" } ] }
targets:
  shop: { type: model, model: shop, temperature: '0.2' }
  page: { type: browser, url: "http://127.0.0.1:9/", viewport: { width: "800", height: 600 } }
tests:
  - name: quoted
    target: shop
    repeat: '4'
    pass_threshold: "0.5"
    retries: true
    skip: no
    timeout: '30'
    scenario: { max_turns: " 3 ", script: [ { say: "where is my order?" } ] }
    assert:
      - judge: { rubric: "The agent is polite", min: '4' }
      - turns: { equals: '1' }
      - json_path: { path: $.x, gte: '2' }
  - name: as written
    target: shop
    repeat: 2
    pass_threshold: 0.5
    timeout: 30s
    skip: "flaky on CI"
    scenario: { max_turns: 3, script: [ { say: "where is my order?" } ] }
    assert:
      - turns: { equals: 1 }
      - http: { url: "http://127.0.0.1:9/x", status: ["2xx", "200"] }
"""


def test_a_quoted_number_is_text_where_a_number_is_meant(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: [s.tamesu.yaml]\nparallel: '2'\nstore: on\n")
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    for command in ("validate", "run"):
        done = run_tamesu([command], cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        said = sorted(line for line in (done.stdout + done.stderr).splitlines() if ".yaml:" in line)
        assert said == sorted([
            "tamesu.yaml:2:11: parallel: '2' is text: write 2",
            'tamesu.yaml:3:8: store: "on" is not a boolean: write true or false',
            "s.tamesu.yaml:3:74: models.judge.rules[0].score: '0.9' is text: write 0.9",
            "s.tamesu.yaml:5:50: targets.shop.temperature: '0.2' is text: write 0.2",
            "s.tamesu.yaml:6:73: targets.page.viewport.width: '800' is text: write 800",
            "s.tamesu.yaml:10:13: tests[0].repeat: '4' is text: write 4",
            "s.tamesu.yaml:11:21: tests[0].pass_threshold: '0.5' is text: write 0.5",
            "s.tamesu.yaml:12:14: tests[0].retries: expected a whole number, not true",
            's.tamesu.yaml:13:11: tests[0].skip: "no" is not a boolean: write true or false',
            "s.tamesu.yaml:15:28: tests[0].scenario.max_turns: ' 3 ' is text: write 3",
            "s.tamesu.yaml:17:54: tests[0].assert[0].judge.min: '4' is text: write 4",
            "s.tamesu.yaml:18:26: tests[0].assert[1].turns.equals: '1' is text: write 1",
            "s.tamesu.yaml:19:38: tests[0].assert[2].json_path.gte: '2' is text: write 2",
        ]), done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr


def test_a_quoted_number_in_a_jsonl_case_is_text_too(tmp_path: Path) -> None:
    text = "\n".join(json.dumps(case) for case in [
        {"id": "a", "type": "multi_turn", "input": "hi", "max_turns": "3"},
        {"id": "b", "input": "hi", "repeat": "5", "pass_threshold": 0.8},
        {"id": "c", "type": "multi_turn", "input": "hi", "max_turns": 3}])
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(Resolver(models={"simulator"}, targets=set())))
    assert [str(p) for p in caught.value.problems] == [
        "cases.jsonl:1:63: max_turns: '3' is text: write 3",
        "cases.jsonl:2:38: repeat: '5' is text: write 5"]


def test_a_number_a_template_fills_in_is_read_as_that_number(tmp_path: Path) -> None:
    # a var is put in as text and a CSV cell is text: `lte: "{{vars.n}}"` is the user's template, not a quoted
    # number, and reads the number (it did before, loosely); a quoted number beside it is still refused
    (tmp_path / "s.tamesu.yaml").write_text("""\
vars: { m: 1 }
models:
  shop: { provider: fake, rules: [ { say: "Your order ORD-1 is on its way" } ] }
targets:
  shop: { type: model, model: shop }
tests:
  - name: t
    target: shop
    cases_file: cases.csv
    scenario: { script: [ { say: "where is my order?" } ] }
    assert:
      - turns: { lte: "{{vars.n}}", gte: "{{vars.m}}" }
      - json_path: { path: $.x, gte: "{{vars.n}}" }
""")
    (tmp_path / "cases.csv").write_text("name,n\nthree,3\n")
    assert run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path).returncode == 0
    (tmp_path / "s.tamesu.yaml").write_text((tmp_path / "s.tamesu.yaml").read_text() + "      - turns: { gt: '0' }\n")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == "s.tamesu.yaml:14:22: tests[0].assert[2].turns.gt: '0' is text: write 0", \
        done.stderr
