"""`equals` (the reply, or the value at a JSONPath, is exactly this) and `type` (the JSON type of a value):
the JSONL design's value checks, usable from YAML suites as from JSONL files."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator

from tamesu.checks._compare import as_text, template_failed
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.json_path import compile_path, locate
from tamesu.errors import TemplateError, article
from tamesu.matching import one_line, shown, shown_apart
from tamesu.plugins import register
from tamesu.types import Strict

JsonType = Literal["string", "number", "integer", "boolean", "array", "object", "null"]


def _last_text(run: RunView) -> tuple[str, str]:
    """The text of the last agent turn in scope, and where it came from."""
    if not run.exchanges:
        return "", "no agent turn"
    last = run.exchanges[-1]
    return last.agent.text, "the answer" if run.turn_labelled else f"turn {last.index}"


def _located(path_text: str, run: RunView) -> tuple[list[object], str] | None:
    """The values of a JSONPath where `json_path` reads them (a response, the raw events, a text of JSON)."""
    return locate(compile_path(path_text), run.exchanges, run.turn_labelled)


def _valid_path(value: str | None) -> str | None:
    # checked where it is written: at run time a bad path was an internal error of every run
    if value is not None:
        compile_path(value)
    return value


class EqualsSpec(Strict):
    value: Any
    path: Annotated[str | None, AfterValidator(_valid_path)] = None


@register("checks", "equals")
class Equals(Check[EqualsSpec]):
    """The agent's reply (the last turn in scope, surrounding blanks aside) is exactly `value`; with `path`,
    the value there is. Templates in `value` are filled when the check runs, as in `contains` and `json_path`."""

    key = "equals"
    Spec = EqualsSpec
    shorthand = "value"
    spec: EqualsSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            wanted = run.context.render_value(self.spec.value)
        except TemplateError as exc:
            return template_failed(exc)
        if self.spec.path is not None:
            found = _located(self.spec.path, run)
            if found is None:  # no value to compare: not checked, negated or not (`negate: true` passed it)
                return Verdict(passed=False, reason=f"{self.spec.path}: no match in the responses", undecided=True)
            nodes, where = found
            value = nodes[0] if len(nodes) == 1 else nodes
            passed = _json_equal(value, wanted)
            said, expected_said = shown_apart(value, wanted)
            # the expected value is said when it is not what was found: filled from a template, it is not in the suite
            return Verdict(passed=passed, reason=f"{self.spec.path} is {said} in {where}"
                           + ("" if passed else f", expected {expected_said}"))
        text, where = _last_text(run)
        # a reply is text: a value that is not a string is its JSON text (`null`, `true`), never Python's ("None")
        expected = as_text(wanted)
        if text.strip() == expected.strip():
            return Verdict(passed=True, reason=f"{where} is exactly {shown(expected)}")
        # the answer quoted on one line, as other reasons quote it; from where it differs when both begin alike
        wanted, said = shown_apart(one_line(expected), one_line(text))
        return Verdict(passed=False, reason=f"expected exactly {wanted}, {where} said {said}")


def _json_equal(found: object, expected: object) -> bool:
    """Equality as JSON has it: `true` is no number (Python's True == 1), at any depth; 2 and 2.0 are one number."""
    if isinstance(found, bool) or isinstance(expected, bool):
        return type(found) is type(expected) and found == expected
    if isinstance(found, list) and isinstance(expected, list):
        return len(found) == len(expected) and all(map(_json_equal, found, expected))
    if isinstance(found, dict) and isinstance(expected, dict):
        return found.keys() == expected.keys() and all(_json_equal(found[k], expected[k]) for k in found)
    return bool(found == expected)


class TypeSpec(Strict):
    path: Annotated[str, AfterValidator(_valid_path)]
    value: JsonType


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@register("checks", "type")
class TypeCheck(Check[TypeSpec]):
    """The value at `path` has this JSON type (`integer` is a `number` too)."""

    key = "type"
    Spec = TypeSpec
    spec: TypeSpec

    async def evaluate(self, run: RunView) -> Verdict:
        found = _located(self.spec.path, run)
        if found is None:  # no value to type: not checked, negated or not (`negate: true` passed it)
            return Verdict(passed=False, reason=f"{self.spec.path}: no match in the responses", undecided=True)
        nodes, where = found
        value = nodes[0] if len(nodes) == 1 else nodes
        kind = json_type(value)
        passed = kind == self.spec.value or (self.spec.value == "number" and kind == "integer")
        # a failure says the type it expected: "$.done is false (boolean)" read as the whole story
        return Verdict(passed=passed, reason=f"{self.spec.path} is {shown(value)} ({kind}) in {where}"
                                             + ("" if passed else f", expected {_kind_said(self.spec.value)}"))


def _kind_said(kind: str) -> str:
    return "null" if kind == "null" else article(kind)
