"""What an assertion's options say true or false with is a boolean, in a YAML suite as in a JSONL case: YAML took
`ignore_case: "yes"`, `strict: "no"` or `exists: 0` as pydantic's lax booleans (and `on_turn: true` as turn 1),
where a JSONL case's `ignore_case: "true"` was refused. Each is now one line where it is written, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tamesu import checks, plugins

_SUITE = """\
models:
  bot: { provider: fake, rules: [ { say: "Your order ORD-1001 is on its way" } ] }
  judge: { provider: fake, rules: [ { rubric: polite, pass: true } ] }
targets:
  bot: { type: model, model: bot }
tests:
  - name: order
    target: bot
    scenario: { script: [ { say: "where is my order?" } ] }
    assert:
      - contains: { value: "ord-", ignore_case: "yes" }
      - regex: { pattern: "way$", ignore_case: 1 }
      - tool_sequence: { calls: [lookup_order], strict: "no" }
      - captured: { name: order, exists: 0 }
      - json_path: { path: $.order, exists: "true" }
      - judge: { rubric: "The agent is polite", trace: "on" }
      - pack: { name: pii_leakage, judges: "off" }
      - http: { url: "http://127.0.0.1:9/x", tls: { verify: "no" } }
      - contains: ORD
        on_turn: true
      - contains: { value: "ord-", ignore_case: true }
"""


def test_an_option_that_is_true_or_false_takes_a_boolean_only(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("s.tamesu.yaml:")]
    assert said == [
        "s.tamesu.yaml:11:49: tests[0].assert[0].contains.ignore_case: \"yes\" is not a boolean: write true or false",
        "s.tamesu.yaml:12:48: tests[0].assert[1].regex.ignore_case: 1 is not a boolean: write true or false",
        "s.tamesu.yaml:13:57: tests[0].assert[2].tool_sequence.strict: \"no\" is not a boolean: write true or false",
        "s.tamesu.yaml:14:42: tests[0].assert[3].captured.exists: 0 is not a boolean: write true or false",
        "s.tamesu.yaml:15:45: tests[0].assert[4].json_path.exists: \"true\" is not a boolean: write true or false",
        "s.tamesu.yaml:16:56: tests[0].assert[5].judge.trace: \"on\" is not a boolean: write true or false",
        "s.tamesu.yaml:17:44: tests[0].assert[6].pack.judges: \"off\" is not a boolean: write true or false",
        "s.tamesu.yaml:18:61: tests[0].assert[7].http.tls.verify: \"no\" is not a boolean: write true or false",
        "s.tamesu.yaml:20:18: tests[0].assert[8].on_turn: on_turn is a turn number from 1, or last",
    ], done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def _lax_bools(schema: object, seen: set[int]) -> int:
    """How many boolean fields in a pydantic core schema take "yes" for true."""
    if isinstance(schema, dict):
        if id(schema) in seen:
            return 0
        seen.add(id(schema))
        if schema.get("type") == "union" and any(isinstance(c, dict) and c.get("type") == "str"
                                                 for c in schema.get("choices", [])):
            return 0  # `env: {X: yes}`: a value that may be text keeps "yes" as the text it is
        own = 1 if schema.get("type") == "bool" and not schema.get("strict") else 0
        return own + sum(_lax_bools(value, seen) for value in schema.values())
    if isinstance(schema, list):
        return sum(_lax_bools(value, seen) for value in schema)
    return 0


def test_no_built_in_assertion_takes_a_lax_boolean() -> None:
    # a new option written `bool` (not StrictBool) would take "yes" again: every built-in check's options, nested too
    lax = {key: found for key in plugins.built_in_names("checks")
           if (found := _lax_bools(checks.check_class(key).Spec.__pydantic_core_schema__, set()))}
    assert lax == {}, lax


def test_a_name_is_text() -> None:
    # `name: ""` was the kind's own name and `name: 5` the name "5": neither what was written
    from checks.grading import problem

    for written in ("", "  ", 5, ["a"], True):
        found = problem({"contains": "x", "name": written})
        assert (found.loc, found.message) == (("name",), f"name is the text reports call the assertion by, "
                                                         f"got {written!r}")
    assert checks.parse_assertion({"contains": "x", "name": "greets"}).label == "greets"


def test_a_bound_is_a_number_not_true_or_false() -> None:
    # pydantic read `lt: true` as 1.0 (and a `defaults.slo` limit of true as 1 ms); `turns` already refused it
    from pydantic import ValidationError

    from checks.grading import problem
    from tamesu.suite.schema import SuiteSpec

    for entry, where in (({"metric": {"name": "turns", "lt": True}}, ("metric", "lt")),
                         ({"metric": {"name": "turns", "equals": False}}, ("metric", "equals")),
                         ({"json_path": {"path": "$.a", "gt": True}}, ("json_path", "gt"))):
        found = problem(entry)
        assert (found.loc, found.message) == (where, f"expected a number, not {str(entry[where[0]][where[1]]).lower()}")
    assert checks.parse_assertion({"metric": {"name": "turns", "lt": 5}}).check.spec.lt == 5.0
    try:
        SuiteSpec.model_validate({"defaults": {"slo": {"turn_latency_ms_p95": True}}})
    except ValidationError as exc:
        assert "expected a number, not true" in str(exc)
    else:
        raise AssertionError("an SLO limit of true was taken")
