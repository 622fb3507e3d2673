"""Assertion kinds. Each lives in one module; this registry imports it only when a suite uses it.

Plug-ins add kinds through the `tamesu.checks` entry points (see `tamesu.plugins`): a `Check` class is a new
key under `assert:`; a plain function is a check `custom: {name: ...}` can name.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tamesu import plugins
from tamesu.checks.base import Check

_IMPLEMENTED: dict[str, str] = {
    "contains": "tamesu.checks.text:Contains",
    "not_contains": "tamesu.checks.text:NotContains",
    "regex": "tamesu.checks.text:Regex",
    "not_regex": "tamesu.checks.text:NotRegex",
    "json_path": "tamesu.checks.json_path:JsonPath",
    "status": "tamesu.checks.status:Status",
    "turns": "tamesu.checks.turns:Turns",
    "metric": "tamesu.checks.metric:Metric",
    "captured": "tamesu.checks.captured:Captured",
    "http": "tamesu.checks.http:Http",
    "command": "tamesu.checks.command:Command",
    "handoff": "tamesu.checks.handoff:Handoff",
    "tool_called": "tamesu.checks.tools:ToolCalled",
    "tool_not_called": "tamesu.checks.tools:ToolNotCalled",
    "tool_sequence": "tamesu.checks.tools:ToolSequence",
    "span": "tamesu.checks.span:SpanCheck",
    "judge": "tamesu.checks.judge:Judge",
    "grounded": "tamesu.checks.grounded:Grounded",
    "similar_to": "tamesu.checks.similar:SimilarTo",
    "golden": "tamesu.checks.golden:Golden",
    "pack": "tamesu.checks.pack:Pack",
    "delegated_to": "tamesu.checks.delegation:DelegatedTo",
    "equals": "tamesu.checks.values:Equals",
    "type": "tamesu.checks.values:TypeCheck",
    "script": "tamesu.checks.script:Script",
    "custom": "tamesu.checks.custom:Custom",
    "dtmf_received": "tamesu.checks.call:DtmfReceived",
    "call_ended_by": "tamesu.checks.call:CallEndedBy",
    "transferred_to": "tamesu.checks.call:TransferredTo",
    "evaluator": "tamesu.checks.evaluator:EvaluatorCheck",
}

# Checks `custom: {name: ...}` finds without a plug-in: none built in yet; plug-ins add theirs.
_CUSTOM: dict[str, str] = {}

# Named by the Concepts page, not built in this version yet: a clear error instead of "unknown".
_PLANNED: set[str] = set()

META_KEYS = {"on_turn", "name", "negate"}


def _imported(reference: str) -> Any:
    module_name, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _plugin_check(key: str) -> type[Check] | None:
    """A plug-in's Check class registered as `key` (a plug-in's function is only for `custom`)."""
    if key in _IMPLEMENTED or not plugins.has("checks", key):
        return None
    found = plugins.load("checks", key)
    return found if isinstance(found, type) and issubclass(found, Check) else None


# Kinds whose options may also sit beside the kind, as the Concepts page writes `{evaluator: NAME, min: 0.8}`.
FLAT_KINDS = {"evaluator"}


def check_class(key: str) -> type[Check]:
    if key in _IMPLEMENTED:
        return _imported(_IMPLEMENTED[key])
    found = _plugin_check(key)
    if found is None:
        raise KeyError(key)
    return found


def is_known(key: str) -> bool:
    return key in _IMPLEMENTED or _plugin_check(key) is not None


def known_keys() -> list[str]:
    return sorted({*_IMPLEMENTED, *(k for k in plugins.names("checks") if _plugin_check(k) is not None)})


def registered_custom(name: str) -> Any:
    """What `custom: {name: NAME}` runs: a built-in or a plug-in's function or Check class."""
    if name in _CUSTOM:
        return _imported(_CUSTOM[name])
    if plugins.has("checks", name):
        return plugins.load("checks", name)
    known = ", ".join(sorted({*_CUSTOM, *plugins.names("checks")})) or "none installed"
    raise ValueError(f"no check registered as {name!r} (registered: {known})")


@dataclass
class Assertion:
    """One entry of an `assert:` list, parsed."""

    key: str
    check: Check
    on_turn: int | str | None
    label: str


class AssertionProblem(Exception):
    """What is wrong with one assertion, and where inside it (a path below the entry)."""

    def __init__(self, loc: tuple[Any, ...], message: str, *, at_key: bool = False) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.at_key = at_key


def parse_assertion(entry: Any, prefix: str = "", search: list[Path] | None = None) -> Assertion:
    """Turn `{contains: "x", on_turn: last}` into an Assertion, or raise AssertionProblem.

    With `search` (the folders a suite's functions are found in), what the check names on disk is resolved
    now, so a missing script is a problem of the suite rather than of a run."""
    if not isinstance(entry, dict):
        raise AssertionProblem((), "an assertion is a mapping such as contains: \"text\"")
    entry, beside = _folded(entry)
    try:
        return _parse(entry, prefix, search)
    except AssertionProblem as exc:
        if beside and len(exc.loc) >= 2:
            if exc.loc[1] in beside:
                exc.loc = exc.loc[1:]  # the option was written beside the kind: point at it there
            elif exc.loc[1] == check_class(exc.loc[0]).shorthand:
                exc.loc = exc.loc[:1]  # the kind's own value
        raise


def _folded(entry: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """`{evaluator: NAME, min: 0.8}` as `{evaluator: {name: NAME, min: 0.8}}`, and the keys that moved."""
    kind = next((k for k in FLAT_KINDS if k in entry), None)
    if kind is None or isinstance(entry[kind], dict):
        return entry, set()
    cls = check_class(kind)
    beside = {k for k in entry if k not in META_KEYS and k != kind}
    if not beside or cls.shorthand is None:
        return entry, set()
    options = {cls.shorthand: entry[kind], **{k: entry[k] for k in beside}}
    return {**{k: v for k, v in entry.items() if k not in beside}, kind: options}, beside


def _parse(entry: dict[str, Any], prefix: str, search: list[Path] | None) -> Assertion:
    kinds = [k for k in entry if k not in META_KEYS]
    if len(kinds) != 1:
        if not kinds:
            raise AssertionProblem((), "an assertion needs one kind, such as contains or json_path")
        raise AssertionProblem((kinds[1],), f"one kind per assertion, found {', '.join(kinds)}", at_key=True)
    key = kinds[0]
    try:
        known = is_known(key)
    except plugins.PluginError as exc:
        raise AssertionProblem((key,), str(exc), at_key=True) from None
    if not known:
        if key in _PLANNED:
            raise AssertionProblem((key,), f"{key!r} is not available in this version of tamesu", at_key=True)
        close = difflib.get_close_matches(key, [*known_keys(), *_PLANNED], n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known_keys())}"
        raise AssertionProblem((key,), f"unknown assertion {key!r} ({hint})", at_key=True)
    on_turn = entry.get("on_turn")
    if on_turn is not None and on_turn != "last" and not (isinstance(on_turn, int) and on_turn >= 1):
        raise AssertionProblem(("on_turn",), "on_turn is a turn number from 1, or last")
    negate = entry.get("negate", False)
    if not isinstance(negate, bool):
        raise AssertionProblem(("negate",), "negate is true or false")
    cls = check_class(key)
    try:
        spec = cls.parse(entry[key])
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(p for p in first["loc"] if p != cls.shorthand or isinstance(entry[key], dict))
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"not a {key} option"
        elif first["type"] == "missing":
            message = "missing required option"
        elif first["type"].startswith("value_error"):
            message = message.removeprefix("Value error, ")
        raise AssertionProblem((key, *loc), message[:1].lower() + message[1:],
                               at_key=first["type"] == "extra_forbidden") from None
    except ValueError as exc:
        raise AssertionProblem((key,), str(exc)) from None
    try:
        check = cls(spec)
        if search is not None:
            check.prepare(search)
    except (ValueError, plugins.PluginError) as exc:
        raise AssertionProblem((key,), str(exc)) from None
    if negate:
        from tamesu.checks.negate import Negated

        check = Negated(check)
    label = entry.get("name") or key
    if key == "pack":
        pack = entry["pack"]
        pack_name = pack if isinstance(pack, str) else pack.get("name") if isinstance(pack, dict) else None
        label = entry.get("name") or (f"pack {pack_name}" if pack_name else key)
    if key == "evaluator":
        label = entry.get("name") or f"evaluator {spec.name}"
    if negate and not entry.get("name"):
        label = f"not {label}"
    return Assertion(key=key, check=check, on_turn=on_turn, label=f"{prefix}{label}")
