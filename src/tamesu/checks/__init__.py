"""Assertion kinds. Each lives in one module whose class is marked `@register("checks", KEY)` (see
`tamesu.plugins`, through which plug-ins add theirs too); a module is imported only when a suite uses its key.

A registered `Check` class is a key under `assert:`; what a plug-in registers (a `Check` class or a plain
function) is also a check `custom: {name: ...}` can name (a built-in is written as its key).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tamesu import plugins
from tamesu.checks.base import Check
from tamesu.errors import article
from tamesu.types import not_a_boolean

META_KEYS = {"on_turn", "name", "negate"}

# Kinds whose options may also sit beside the kind, as the Concepts page writes `{evaluator: NAME, min: 0.8}`.
FLAT_KINDS = {"evaluator"}

_SAID_HERE = {"extra_forbidden", "missing", "bool_type", "literal_error"}
"""The problems of an assertion's options `_parse` words itself (as options, not keys); the others are said as
`suite.problems` says any key's."""


_checked: dict[str, type[Check[BaseModel]]] = {}
"""The class each key last loaded as, once it passed `_registered_check`'s checks: each assertion of each test
asks twice (whether it is known, then its class), and the checks (`inspect.isabstract` among them) were some eight
calls each time."""


def _registered_check(key: str) -> type[Check[BaseModel]] | None:
    """The Check class registered as `key` (a plug-in's function is only for `custom`)."""
    if not plugins.has("checks", key):
        return None
    found = plugins.load("checks", key)
    if _checked.get(key) is found:
        return found
    if not (isinstance(found, type) and issubclass(found, Check)):
        return None
    if not (isinstance(getattr(found, "Spec", None), type) and issubclass(found.Spec, BaseModel)):
        # every check is parsed through its Spec: without one, each use was an internal error
        raise plugins.PluginError(f"plug-in tamesu.checks:{key} is a Check class without a Spec (a pydantic model "
                                  "of its options, such as a tamesu.Strict subclass)")
    if (unimplemented := plugins.unimplemented("checks", key, found)) is not None:
        raise plugins.PluginError(unimplemented)
    _checked[key] = found
    return found


def check_class(key: str) -> type[Check[BaseModel]]:
    found = _registered_check(key)
    if found is None:
        raise KeyError(key)
    return found


def is_known(key: str) -> bool:
    return _registered_check(key) is not None


def known_keys(broken: list[str] | None = None) -> list[str]:
    """Every key under `assert:`; only a plug-in's entry is imported, to see whether it is a Check class. A
    plug-in that cannot be imported is no key: it is left out (its error added to `broken`), since what lists
    the keys (a hint for a misspelt one, the schema) is not about it; a suite that names it is told why."""
    built_in = plugins.built_in_names("checks")
    found = set(built_in)
    for key in plugins.names("checks"):
        if key in built_in:
            continue
        try:
            if _registered_check(key) is not None:
                found.add(key)
        except plugins.PluginError as exc:
            if broken is not None:
                broken.append(str(exc))
    return sorted(found)


def _usable_custom(name: str) -> bool:
    """Whether `custom: {name: NAME}` could run it: a plug-in that cannot load is no name to offer."""
    try:
        return _registered_check(name) is not None or callable(plugins.load("checks", name))
    except plugins.PluginError:
        return False


def registered_custom(name: str) -> object:
    """What `custom: {name: NAME}` runs: a plug-in's function or Check class."""
    if plugins.has("checks", name) and not plugins.is_built_in("checks", name):
        return plugins.load("checks", name)
    custom = sorted(n for n in plugins.names("checks") if not plugins.is_built_in("checks", n) and _usable_custom(n))
    hint = f"; a function of the project is function: {name}" if ":" in name else ""
    raise ValueError(f"no check registered as {name!r} (registered: {', '.join(custom) or 'none installed'}){hint}")


@dataclass
class Assertion:
    """One entry of an `assert:` list, parsed."""

    key: str
    check: Check[BaseModel]
    on_turn: int | str | None
    label: str


class AssertionProblem(Exception):
    """What is wrong with one assertion, and where inside it (a path below the entry)."""

    def __init__(self, loc: tuple[Any, ...], message: str, *, at_key: bool = False) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.at_key = at_key



def tell_test_id(assertions: list[Assertion], test_id: str) -> None:
    """Validator agents and scripts are told which test they grade (the JSONL design's `test_id`)."""
    for assertion in assertions:
        check = getattr(assertion.check, "inner", assertion.check)
        if hasattr(check, "test_id"):
            check.test_id = test_id


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


def _folded(entry: dict[str, Any]) -> tuple[dict[str, object], set[str]]:
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
    if not known and plugins.has("checks", key):
        # installed, but a function (or something else): `custom` is how a suite names it
        found = plugins.load("checks", key)
        usage = f"custom: {{name: {key}, with: {{...}}}}" if callable(found) else "neither a Check class nor a function"
        raise AssertionProblem((key,), f"{key!r} is a plug-in's function, not an assertion key: write {usage}"
                               if callable(found) else f"plug-in tamesu.checks:{key} is {usage}", at_key=True)
    if not known:
        close = difflib.get_close_matches(key, known_keys(), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known_keys())}"
        raise AssertionProblem((key,), f"unknown assertion {key!r} ({hint})", at_key=True)
    on_turn = entry.get("on_turn")
    # `on_turn: true` is no turn number (a bool is an int to Python: it was turn 1)
    if on_turn is not None and on_turn != "last" and not (
            isinstance(on_turn, int) and not isinstance(on_turn, bool) and on_turn >= 1):
        raise AssertionProblem(("on_turn",), "on_turn is a turn number from 1, or last")
    named = entry.get("name")
    if named is not None and not (isinstance(named, str) and named.strip()):
        # `name: ""` was the kind's name and `name: 5` the name "5": neither what was written
        raise AssertionProblem(("name",), f"name is the text reports call the assertion by, got {named!r}")
    negate = entry.get("negate", False)
    if not isinstance(negate, bool):
        raise AssertionProblem(("negate",), "negate is true or false")
    cls = check_class(key)
    if on_turn is not None and cls.whole_run is not None:
        raise AssertionProblem(("on_turn",), f"{key} reads {cls.whole_run}, which on_turn cannot narrow to one "
                                             "turn: leave on_turn out")
    try:
        spec = cls.parse(entry[key])
    except ValidationError as exc:
        first = exc.errors()[0]
        loc: tuple[Any, ...] = tuple(p for p in first["loc"] if p != cls.shorthand or isinstance(entry[key], dict))
        message = first["msg"]
        if first["type"] not in _SAID_HERE and not first["type"].startswith("value_error"):
            # a value of the wrong type, said as a suite's own keys say it: what was written, and `contains: 12`
            # read as a number; no union member's name (`contains.str`) in the path
            from tamesu.suite.problems import said_of

            where, message, _ = said_of(exc, cls.Spec, key)[0]
            loc = tuple(p for p in where if p != cls.shorthand or isinstance(entry[key], dict))
        elif first["type"] == "extra_forbidden":
            message = f"not {article(key)} option"
            if len(loc) == 1:  # one of the check's own options, misspelt (`judge: false` for `judges`)
                options = [info.alias or name for name, info in cls.Spec.model_fields.items()]
                close = difflib.get_close_matches(str(loc[0]), options, n=1)
                message += f" (did you mean {close[0]!r}?)" if close else ""
        elif first["type"] == "missing":
            message = "missing required option"
        elif first["type"] == "bool_type":  # "yes" is not true, as a JSONL case's `ignore_case` says
            message = not_a_boolean(first.get("input"))
        elif first["type"].startswith("value_error"):
            message = message.removeprefix("Value error, ")
        elif first["type"] == "literal_error" and isinstance(found := first.get("input"), str):
            # `type: {value: Number}`: what was written, and the choice it is near, as a suite's own keys say
            choices = re.findall(r"'([^']*)'", str((first.get("ctx") or {}).get("expected", "")))
            close = difflib.get_close_matches(found.lower(), choices, n=1)
            message += f", got {found!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
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

        check = Negated(check, labelled=not entry.get("name"))  # `not contains`, unless named
    label = named or key
    if key == "pack":
        pack = entry["pack"]
        pack_name = pack if isinstance(pack, str) else pack.get("name") if isinstance(pack, dict) else None
        label = entry.get("name") or (f"pack {pack_name}" if pack_name else key)
    if key == "evaluator":
        label = entry.get("name") or f"evaluator {spec.name}"
    if negate and not entry.get("name"):
        label = f"not {label}"
    return Assertion(key=key, check=check, on_turn=on_turn, label=f"{prefix}{label}")
