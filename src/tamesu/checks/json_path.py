"""`json_path`: a JSONPath (RFC 9535, python-jsonpath) over what the agent answered.

Which document is read:
  1. each agent turn's `response` (the response body, or the final state of a streamed turn), from the last
     turn in scope backwards: the LAST turn whose response yields at least one match is the one compared;
  2. when no response matches, each turn's `raw` list (every raw response or streamed event of the turn, in
     order) is tried the same way, as one JSON array: `$[?@.type == 'done'].usage` finds a streamed event;
  3. when neither matches, each turn's text that is a JSON object or array (the whole text, or one fenced
     ```json block that is the whole text) is tried the same way: a model, an A2A or a gRPC agent answers JSON
     as text, and the JSONL design's `json_path` and `type` examples ($.status, $.count) read that answer;
  4. when nothing matches, the path "does not exist".
`on_turn: N` narrows this to the one turn. A response that is a JSON string is parsed first.

One match is compared as that value; several (a wildcard or a filter) are compared as the list of them.
With no comparison given the assertion means `exists: true`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpath
from pydantic import field_validator, model_validator

from tamesu.checks._compare import (
    ValueComparisons,
    compare,
    expectations,
    placeholder_templates,
    render_expectations,
    template_failed,
)
from tamesu.checks.base import Check, Exchange, RunView, Verdict
from tamesu.errors import SuiteProblem, TemplateError
from tamesu.matching import shown
from tamesu.plugins import register
from tamesu.types import YamlBool

Path = jsonpath.JSONPath | jsonpath.CompoundJSONPath


def compile_path(text: str) -> Path:
    """Raise ValueError naming the path when it is not valid JSONPath."""
    if not text.strip():
        # python-jsonpath reads a blank path as `$`: the whole document, which the user did not write
        raise ValueError("an empty JSONPath: write a path such as $.status, or $ for the whole response")
    try:
        return jsonpath.compile(text)
    except jsonpath.JSONPathError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"invalid JSONPath {text!r}: {first_line}") from None


class PathSpec(ValueComparisons):
    """A path and what its value must be; also the `json_path` option of `http`."""

    path: str
    exists: YamlBool | None = None

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        compile_path(placeholder_templates(value))
        return value

    @model_validator(mode="after")
    def _absent_means_nothing_else(self) -> PathSpec:
        if self.exists is False and expectations(self):
            raise ValueError("exists: false cannot be combined with a comparison")
        return self


def find(path: Path, document: Any) -> list[object]:
    """The values `path` selects in `document`; a document that is JSON text is parsed first."""
    if document is None:
        return []
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    return path.findall(document)


def text_document(text: str) -> object | None:
    """The JSON object or array an agent's text is, when it is one (or one fenced block of it); else None."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and body.count("```") == 2:
        body = body[3:-3].removeprefix("json").strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict | list) else None


def value_of(nodes: list[Any]) -> object:
    return nodes[0] if len(nodes) == 1 else nodes


def judge(spec: PathSpec, path_text: str, nodes: list[Any], expected: dict[str, Any], where: str) -> Verdict:
    """Decide a path's assertion from what it selected (`nodes`, empty when nothing) in `where`."""
    if not nodes:
        if spec.exists is False:
            return Verdict(passed=True, reason=f"{path_text}: no match in {where}, as expected")
        # a value compared where there is none is not checked (`negate: true` passed it); `exists: true` is
        return Verdict(passed=False, reason=f"{path_text}: expected a match, found none in {where}",
                       undecided=spec.exists is None and bool(expected))
    value = value_of(nodes)
    if spec.exists is False:
        return Verdict(passed=False, reason=f"{path_text}: expected no match, found {shown(value)} in {where}")
    problems = compare(value, expected)
    if problems:
        return Verdict(passed=False, reason=f"{path_text} in {where}: {'; '.join(problems)}",
                       evidence=[shown(value, 400)])
    return Verdict(passed=True, reason=f"{path_text} is {shown(value)} in {where}")


def locate(path: Path, exchanges: list[Exchange], turn_labelled: bool = False) -> tuple[list[object], str] | None:
    """The nodes of the turn the module docstring's rule picks, and a name for where they came from (the turn
    left out when the failure's label names it: `json_path (turn 1): $.status in the response: ...`)."""
    def named(what: str, exchange: Exchange) -> str:
        return what if turn_labelled else f"{what} of turn {exchange.index}"

    for exchange in reversed(exchanges):
        nodes = find(path, exchange.agent.response)
        if nodes:
            return nodes, "the response" if turn_labelled else f"turn {exchange.index}"
    for exchange in reversed(exchanges):
        nodes = find(path, exchange.agent.raw) if exchange.agent.raw else []
        if nodes:
            return nodes, named("the raw events", exchange)
    for exchange in reversed(exchanges):
        nodes = find(path, text_document(exchange.agent.text)) if exchange.agent.text else []
        if nodes:
            return nodes, named("the text", exchange)
    return None


def _searched(exchanges: list[Exchange]) -> str:
    answered = sum(1 for e in exchanges if e.agent.response is not None or e.agent.raw)
    if not exchanges:
        return "no agent turns"
    if not answered:
        return f"{len(exchanges)} turn(s), none with a response document"
    return f"the responses of {answered} turn(s)"


@register("checks", "json_path")
class JsonPath(Check[PathSpec]):
    key = "json_path"
    Spec = PathSpec
    shorthand = "path"
    spec: PathSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            path_text = run.context.render_text(self.spec.path)
            expected = render_expectations(run.context, expectations(self.spec))
        except TemplateError as exc:
            return template_failed(exc)
        try:
            path = compile_path(path_text)
        except ValueError as exc:  # valid as written (the plan checked it), not once a template was filled in
            raise SuiteProblem(f"the path once filled in is not one: {exc}") from None
        found = locate(path, run.exchanges, run.turn_labelled)
        if found is None:
            verdict = judge(self.spec, path_text, [], expected, _searched(run.exchanges))
            last = next((e.agent.response for e in reversed(run.exchanges) if e.agent.response is not None), None)
            if not verdict.passed and last is not None:
                verdict.evidence.append(f"last response: {shown(last, 400)}")
            return verdict
        nodes, where = found
        return judge(self.spec, path_text, nodes, expected, where)
