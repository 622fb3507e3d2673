"""An assertion's expected value written as exactly one `{{vars.x}}` is the var itself, not its text.

Expanding a test puts vars in as text (a `say:` or a header must stay a string), which turned `value:
"{{vars.n}}"` with `n: 1` into `"1"`, and `$.turn` (the number 1) then failed as the agent's fault. Only the
options that compare a JSON value are given the typed value: a text option (`contains: "{{vars.n}}"`,
`call: {equals: ...}`) keeps its text, as its schema asks for one. A `regex`/`not_regex` pattern gets each var
escaped: a value filled in is matched as text, whenever it is filled in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tamesu.errors import TemplateError
from tamesu.suite.templates import TEMPLATE, Context
from tamesu.types import FilledText

_COMPARED = ("equals", "not_equals", "contains", "gt", "gte", "lt", "lte")
"""The options of `json_path` (and `http`'s `json_path`), `captured` and `metric` that compare a JSON value."""
_VALUE_KINDS = ("json_path", "captured", "metric")


def typed_assertions(entries: object, variables: Mapping[str, object]) -> object:
    """`entries` (a test's `assert` list) with each compared value that is exactly one var put in as that var."""
    if not isinstance(entries, list):
        return entries
    return [_entry(entry, variables) if isinstance(entry, Mapping) else entry for entry in entries]


def _entry(entry: Mapping[str, Any], variables: Mapping[str, object]) -> dict[str, Any]:
    out = dict(entry)
    equals = out.get("equals")
    if isinstance(equals, Mapping):
        out["equals"] = {**equals, "value": _typed(equals.get("value"), variables)} if "value" in equals \
            else equals
    elif equals is not None:
        out["equals"] = _typed(equals, variables)  # the reply is text: a number compares as its JSON text
    for kind in _VALUE_KINDS:
        if isinstance(out.get(kind), Mapping):
            out[kind] = _options(out[kind], variables)
    for kind in ("regex", "not_regex"):
        pattern = out.get(kind)
        if isinstance(pattern, str):
            out[kind] = _as_text(pattern, variables)
        elif isinstance(pattern, Mapping) and isinstance(pattern.get("pattern"), str):
            out[kind] = {**pattern, "pattern": _as_text(pattern["pattern"], variables)}
    http = out.get("http")
    if isinstance(http, Mapping) and isinstance(http.get("json_path"), Mapping):
        out["http"] = {**http, "json_path": _options(http["json_path"], variables)}
    return out


def _as_text(pattern: str, variables: Mapping[str, object]) -> str:
    """A pattern with each `{{vars.x}}` put in escaped, matched as the text it is (a price `9.9` does not match
    "9x9"), as a value filled in when the check runs is (`checks._compare`)."""
    def escaped(found: re.Match[str]) -> str:
        if not found.group(1).startswith("vars."):
            return found.group(0)
        try:
            value = Context(vars=variables).lookup(found.group(1))
        except TemplateError:
            return found.group(0)  # left as written: the plan's template check says what is wrong with it
        return re.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))

    return TEMPLATE.sub(escaped, pattern) if "{{" in pattern else pattern


def _options(options: Mapping[str, Any], variables: Mapping[str, object]) -> dict[str, Any]:
    return {key: _typed(value, variables) if key in _COMPARED else value for key, value in options.items()}


def _typed(value: object, variables: Mapping[str, object]) -> object:
    if not isinstance(value, str) or "{{" not in value:
        return value
    whole = TEMPLATE.fullmatch(value.strip())
    if whole is None or not whole.group(1).startswith("vars."):
        return value
    try:
        found = Context(vars=variables).lookup(whole.group(1))
    except TemplateError:
        return value  # left as written: the plan's template check says what is wrong with it
    return FilledText(found) if isinstance(found, str) else found  # a CSV cell `3` is a bound of 3
