"""What the JSONL audit of session 34 left: strict booleans, a near miss of a JSON type named, `Agents:` as a
generator, and `--dry-run -o` into another folder writing file paths that load from there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.plan.targets import Resolver

RESOLVER = Resolver(models={"simulator"}, targets={"expense"})


def _problems(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_text(text, "cases.jsonl", tmp_path, ParseSettings(RESOLVER))
    return [str(p) for p in caught.value.problems]


def test_a_boolean_is_true_or_false_not_a_word_or_a_number(tmp_path: Path) -> None:
    # before: `"enabled": "yes"` and `1` were taken as true, `"required": "no"` as false, without a word
    text = "\n".join(json.dumps(case) for case in [
        {"id": "a", "type": "multi_turn", "input": "hi", "interactive": {"enabled": "yes"}},
        {"id": "b", "type": "multi_turn", "input": "hi", "interactive": {"enabled": 1}},
        {"id": "c", "simulator": {"use": "simulator"}, "checkpoints": [
            {"id": "x", "assertion": {"type": "contains", "value": "a"}, "required": "no"}]},
        {"id": "d", "input": "hi", "assertions": [{"type": "contains", "value": "x", "ignore_case": "true"}]},
        {"id": "e", "type": "multi_turn", "input": "hi", "interactive": {"enabled": True}}])
    assert _problems(text, tmp_path) == [
        "cases.jsonl:1:77: interactive.enabled: input should be a valid boolean, got 'yes'",
        "cases.jsonl:2:77: interactive.enabled: input should be a valid boolean, got 1",
        "cases.jsonl:3:137: checkpoints[0].required: input should be a valid boolean, got 'no'",
        "cases.jsonl:4:93: assertions[0].ignore_case: input should be a valid boolean, got 'true'"]


def test_a_type_assertion_names_the_json_type_a_near_miss_meant(tmp_path: Path) -> None:
    # before: 'a type assertion needs path and value (string, number, ...)' for "Number", as if none were given
    text = "\n".join(json.dumps({"id": str(n), "input": "hi", "assertions": [
        {"type": "type", "path": "$.total", "value": value}]}) for n, value in enumerate(["Number", "str", "zebra"]))
    types = "string, number, integer, boolean, array, object, null"
    assert _problems(text, tmp_path) == [
        f"cases.jsonl:1:88: assertions[0].value: 'Number' is no JSON type: {types} (did you mean 'number'?)",
        f"cases.jsonl:2:88: assertions[0].value: 'str' is no JSON type: {types} (did you mean 'string'?)",
        f"cases.jsonl:3:88: assertions[0].value: 'zebra' is no JSON type: {types}"]
