"""JSONL assertions (`{"type": "contains", "value": "x", "negate": true}`) as the engine's assertions.

| JSONL type    | engine check                                                                       |
| ------------- | ---------------------------------------------------------------------------------- |
| `contains`    | `contains` (`negate`: `not_contains`); `value` is text or a list of texts           |
| `regex`       | `regex` (`negate`: `not_regex`); `pattern` (or `value`)                              |
| `json_path`   | `json_path` with `equals: value` (null too; `negate`: `not_equals`); no `value`: `exists` |
| `tool_called` | `tool_called` (`negate`: `tool_not_called`); `name` (or `value`), optional `args`    |
| `equals`      | `equals` (`tamesu.checks.values`): the reply is exactly `value` (or the value at `path`) |
| `type`        | `type` (`tamesu.checks.values`): the JSON type of the value at `path`                |
| `agent`       | `judge`: `options.metadata.criteria` (and the other metadata) as the rubric, the     |
|               | model named by `connector`, else `use` (`agents:NAME` or `NAME`, default `models.judge`); |
|               | `use` naming a target of tamesu.yaml: `tamesu.checks.target_validator`, called        |
|               | with `connector` as its model                                                         |
| `script`      | `script` (`tamesu.checks.script`): `use: scripts:module:function` or a script id     |
|               | (`scripts:tests.validate-expense`: `validate()` in scripts/tests/validate-expense.py)  |

`negate` on `equals`, `type`, `agent` and `script` inverts the verdict. An object without `type` is one of
tamesu's own assertions as a suite writes them (`{"judge": "..."}`, `{"turns": {"lte": 4}}`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, model_validator

from tamesu.checks import Assertion, AssertionProblem, check_class, parse_assertion
from tamesu.checks.functions import check_callable, load_function
from tamesu.checks.judge import criteria_rubric
from tamesu.checks.negate import Negated
from tamesu.checks.script import Script, ScriptSpec
from tamesu.checks.values import Equals, EqualsSpec, JsonType, TypeCheck, TypeSpec
from tamesu.errors import article
from tamesu.jsonl.schema import Options
from tamesu.plan.targets import Resolver
from tamesu.report.case_records import assertion_label
from tamesu.types import Strict, YamlBool, not_a_boolean

KINDS = ("contains", "equals", "regex", "json_path", "tool_called", "type", "agent", "script")


class SpecAssertion(Strict):
    type: Literal["contains", "equals", "regex", "json_path", "tool_called", "type", "agent", "script"]
    value: Any = None
    pattern: str | None = None
    path: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None
    use: str | None = Field(None, min_length=1)
    options: Options | None = None
    negate: YamlBool = False
    ignore_case: YamlBool = False

    @model_validator(mode="after")
    def _complete(self) -> SpecAssertion:
        needed = {"contains": self.value is not None, "equals": "value" in self.model_fields_set,
                  "regex": self.pattern is not None or isinstance(self.value, str),
                  "json_path": self.path is not None,
                  "tool_called": self.name is not None or isinstance(self.value, str),
                  "type": self.path is not None and isinstance(self.value, str),
                  "agent": bool(self.metadata.get("criteria")), "script": bool(self.use)}
        if not needed[self.type]:
            raise ValueError(_NEEDS[self.type])
        if self.type == "regex" and (self.pattern if self.pattern is not None else self.value) == "":
            raise ValueError("an empty pattern matches every answer: write what it should match")
        return self

    @property
    def metadata(self) -> dict[str, Any]:
        return self.options.metadata if self.options else {}


_NEEDS = {
    "contains": "a contains assertion needs value (text, or a list of texts)",
    "equals": "an equals assertion needs value",
    "regex": "a regex assertion needs pattern",
    "json_path": "a json_path assertion needs path (and value to compare)",
    "tool_called": "a tool_called assertion needs name",
    "type": "a type assertion needs path and value (string, number, integer, boolean, array, object, null)",
    "agent": "an agent assertion needs options.metadata.criteria",
    "script": "a script assertion needs use: scripts:module:function or a script id (scripts:tests.check)",
}
_KEYS = {"contains": ("value", "ignore_case"), "equals": ("value", "path"), "json_path": ("path", "value"),
         "regex": ("pattern", "value", "ignore_case"), "tool_called": ("name", "value", "args"),
         "type": ("path", "value"), "agent": ("use", "options"), "script": ("use", "options")}
"""The keys each type reads (beside type and negate): another would be accepted and do nothing."""


def to_engine(raw: object, resolver: Resolver, on_turn: int | None = None) -> Assertion:
    """One JSONL assertion as an engine Assertion, or AssertionProblem with its place inside `raw`."""
    if not isinstance(raw, dict):
        raise AssertionProblem((), 'an assertion is an object such as {"type": "contains", "value": "..."}')
    if "type" not in raw:
        assertion = parse_assertion(raw, search=resolver.search)  # one of tamesu's own, written as in a suite
        whole_run = check_class(assertion.key).whole_run
        if on_turn is not None and whole_run is not None:
            # a turn's assertion is scoped to the turn, which this one cannot be (a suite's `on_turn` is refused)
            raise AssertionProblem((assertion.key,), f"{assertion.key} reads {whole_run}, which one turn cannot "
                                   "narrow: grade it on the whole conversation (a case's final_assertions)")
        assertion.on_turn = on_turn if on_turn is not None else assertion.on_turn
        assertion.label = assertion_label(raw)
        return assertion
    kind = raw["type"]
    if kind not in KINDS:
        close = difflib.get_close_matches(str(kind), KINDS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(KINDS)}"
        raise AssertionProblem(("type",), f"unknown assertion type {kind!r} ({hint})")
    try:
        spec = SpecAssertion.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(part for part in first["loc"] if isinstance(part, str | int))
        said = str(first["msg"]).removeprefix("Value error, ")
        message = said[:1].lower() + said[1:]
        if first["type"] == "extra_forbidden":
            message = f"not a key of {article(kind)} assertion"
        elif first["type"] == "bool_type":  # "yes", 1: what was written, as a case's other keys say it
            message = not_a_boolean(first["input"])
        raise AssertionProblem(loc, message, at_key=first["type"] == "extra_forbidden") from None
    if unread := [key for key in raw if key not in ("type", "negate", *_KEYS[kind])]:
        raise AssertionProblem((unread[0],), f"not a key of {article(kind)} assertion, which reads "
                               f"{', '.join(_KEYS[kind])} (and negate)", at_key=True)
    also = {"regex": "pattern", "tool_called": "name"}.get(kind, "")
    if "value" in raw and also in raw:
        raise AssertionProblem(("value",), f"{also} or value, not both (value is the short way to write {also})",
                               at_key=True)
    check = _check(spec, resolver)
    return Assertion(key=kind, check=check, on_turn=on_turn, label=assertion_label(raw))


_FIELD = {"contains": "value", "regex": "pattern", "json_path": "path", "tool_called": "name"}


def _engine(entry: Mapping[str, object], spec: SpecAssertion) -> Any:
    """A check of tamesu's own, with its problems pointed at the JSONL key they come from."""
    try:
        return parse_assertion(entry).check
    except AssertionProblem as exc:
        key = _FIELD.get(spec.type, "value")
        if spec.type == "json_path" and "equals" in exc.loc:
            key = "value"
        raise AssertionProblem((key,), exc.message) from None


def _check(spec: SpecAssertion, resolver: Resolver) -> Any:
    kind, negate = spec.type, spec.negate
    if kind == "contains":
        return _engine({"not_contains" if negate else "contains": {"value": spec.value,
                                                                    "ignore_case": spec.ignore_case}}, spec)
    if kind == "regex":
        pattern = spec.pattern if spec.pattern is not None else spec.value
        return _engine({"not_regex" if negate else "regex": {"pattern": pattern,
                                                             "ignore_case": spec.ignore_case}}, spec)
    if kind == "json_path":
        options: dict[str, object] = {"path": spec.path}
        if "value" in spec.model_fields_set:
            options["not_equals" if negate else "equals"] = spec.value
        elif negate:
            options["exists"] = False
        return _engine({"json_path": options}, spec)
    if kind == "tool_called":
        call = {"name": spec.name if spec.name is not None else spec.value, "args": spec.args}
        return _engine({"tool_not_called" if negate else "tool_called": call}, spec)
    inner = _own_check(spec, resolver)
    return Negated(inner, labelled=True) if negate else inner  # its label says it (`not agent ...`, `is not`)


def _own_check(spec: SpecAssertion, resolver: Resolver) -> Any:
    try:
        if spec.type == "equals":
            return Equals(EqualsSpec(value=spec.value, path=spec.path))
        if spec.type == "type":
            return TypeCheck(TypeSpec(path=spec.path, value=spec.value))
    except ValidationError as exc:
        on_path = (first := exc.errors()[0])["loc"] == ("path",)
        message = str(first["msg"]).removeprefix("Value error, ") if on_path else _NEEDS["type"]
        if not on_path and isinstance(spec.value, str):  # "Number", "str": the type meant, named
            close = difflib.get_close_matches(spec.value.lower(), get_args(JsonType), n=1)
            message = f"{spec.value!r} is no JSON type: {', '.join(get_args(JsonType))}" + \
                (f" (did you mean {close[0]!r}?)" if close else "")
        raise AssertionProblem(("path",) if on_path else ("value",), message) from None
    if spec.type == "script":
        try:
            function = load_function(str(spec.use), resolver.search)
            check_callable(function, "one argument, the run", 1, {})
        except ValueError as exc:
            raise AssertionProblem(("use",), str(exc)) from None
        return Script(ScriptSpec(use=str(spec.use), metadata=spec.metadata), function)
    return _validator(spec, resolver)


def _validator(spec: SpecAssertion, resolver: Resolver) -> object:
    """`agent`: tamesu's judge with the criteria as its rubric and the named model, or a target of tamesu.yaml
    answering the design's validator interface."""
    name = spec.use.removeprefix("agents:") if spec.use else None
    connector = spec.options.connector if spec.options else None
    helper = resolver.helper(name)
    if helper is not None:
        from tamesu.checks.target_validator import TargetValidator

        # the design's `use` agent judges, with `options.connector` as its model (not the judge's)
        return TargetValidator(helper, dict(spec.metadata), connector=connector)
    try:
        model = resolver.model_for(connector or name)
    except ValueError as exc:
        said = str(exc)
        if not connector and name and name != "judge" and ":" not in name:  # a target may be named too
            known = ", ".join(sorted(resolver.models)) or "none configured"
            targets = f"; targets: {', '.join(sorted(resolver.helpers))}" if resolver.helpers else ""
            said = f"no model or target named {name!r} for the validator (models: {known}{targets})"
        raise AssertionProblem(("options", "connector") if connector else ("use",), said) from None
    judge = _engine({"judge": {"rubric": criteria_rubric(spec.metadata), "model": model}}, spec)
    judge.names_rubric = False  # the assertion's label quotes the criteria
    return judge
