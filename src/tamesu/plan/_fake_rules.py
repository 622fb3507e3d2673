"""A fake model's rules checked as a suite is: every bad rule at once, one `file:line:col: path: problem` each,
pointing into the rules file (or at the inline rule), with "did you mean" for a misspelt key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tamesu.errors import ConfigError, Problem
from tamesu.models.fake import MAX_RULES_BYTES, checked_rules
from tamesu.models.fake_rules import PATTERN_KEYS, rule_kind, unknown_kind
from tamesu.suite.patterns import runaway
from tamesu.suite.problems import problems_from
from tamesu.suite.yaml_reader import Document, parse_yaml, read_bounded


def rules_file_problems(path: Path, shown: str, doc: Document, loc: tuple[Any, ...]) -> list[Problem]:
    """The problems of the rules file at `path` (called `shown`); one that cannot be read is one problem at
    `loc`, the `rules:` key of the suite `doc` that names it, since the file has no line to point at."""
    try:
        text = read_bounded(path, shown, limit=MAX_RULES_BYTES)
    except ConfigError as exc:
        why = "; ".join(problem.message for problem in exc.problems)
        return [doc.problem(loc, f"fake rules file {shown}: {why}")]
    prefix: tuple[Any, ...]
    try:
        rules_doc = parse_yaml(text, path, shown)
    except ConfigError as exc:
        return exc.problems
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        # a YAML file with nothing (or comments only) in it reads as an empty mapping: "got a mapping" would send
        # the user looking for one
        return [doc.problem(loc, f"fake rules file {shown} is empty: write a list of rules in it")]
    data, prefix = rules_doc.data, ()
    if isinstance(data, Mapping) and "rules" in data:
        data, prefix = data["rules"], ("rules",)  # `rules:` at the top of the file is accepted too
    problems = rule_problems(data, rules_doc, prefix, "a fake rules file")
    if not prefix:  # a plain list: its items are still called rules[N], as they are inline
        problems = [replace(p, path=f"rules{p.path}" if p.path.startswith("[") else p.path or "rules")
                    for p in problems]
    if not problems:
        checked_rules(text, rules_doc.data)
    return problems


def rule_problems(data: Any, doc: Document, prefix: tuple[Any, ...], what: str = "rules") -> list[Problem]:
    """Every problem of the rules `data`, written in `doc` at `prefix`."""
    if data is None:
        return []
    if not isinstance(data, list):
        return [doc.problem(prefix, f"{what} is a list of rules, got {_kind(data)}")]
    problems: list[Problem] = []
    for index, raw in enumerate(data):
        at = (*prefix, index)
        if not isinstance(raw, Mapping):
            problems.append(doc.problem(at, f"a rule is a mapping, got {_kind(raw)}"))
            continue
        found = rule_kind(raw)
        if found is None:
            problems.append(doc.problem(at, unknown_kind(raw)))
            continue
        model, kind = found
        try:
            model.model_validate(dict(raw))
        except ValidationError as exc:
            problems.extend(problems_from(exc, doc, model, at, f"{kind} rule"))
            continue
        # a pattern that can backtrack for ever holds the run where no timeout reaches it, as an assertion's would
        problems.extend(doc.problem((*at, key), why) for key in PATTERN_KEYS.get(model, ())
                        if isinstance(raw.get(key), str) and (why := runaway(raw[key])) is not None)
    return problems


def _kind(value: Any) -> str:
    return {str: "text", int: "a number", float: "a number", bool: "true/false", dict: "a mapping"}.get(
        type(value), type(value).__name__)
