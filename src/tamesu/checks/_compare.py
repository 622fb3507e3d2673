"""Comparisons of one found value against what an assertion expects, shared by every check that has them.

`json_path`, `captured`, `metric`, `turns` and `http` all accept some of `equals`, `not_equals`, `matches`,
`contains`, `gt`, `gte`, `lt`, `lte` and `length`; they mean the same thing everywhere because they are
decided here. HTTP status expectations (`200`, `[200, 201]`, `"2xx"`) live here too, for `status` and `http`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field, field_validator

from tamesu.checks.base import Verdict
from tamesu.errors import SuiteProblem, TemplateError
from tamesu.matching import as_number, number_text, same, shown, shown_apart
from tamesu.suite.patterns import runaway
from tamesu.suite.schema import Strict
from tamesu.suite.templates import TEMPLATE, Context
from tamesu.types import Finite, YamlInt

COMPARISONS = ("equals", "not_equals", "matches", "contains", "gt", "gte", "lt", "lte", "length")
# `equals: null` is a real expectation; for the others an explicit null means "not given".
_NULL_MEANS_NULL = {"equals", "not_equals", "contains"}

# ---------------------------------------------------------------- regular expressions and templates


def placeholder_templates(text: str) -> str:
    """`text` with every `{{...}}` replaced by a plain word, so its syntax can be checked before a run."""
    return TEMPLATE.sub("x", text)


def valid_pattern(pattern: str) -> str:
    """Raise ValueError (a parse-time error) when `pattern` is not a Python regular expression."""
    try:
        re.compile(placeholder_templates(pattern))
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    if (why := runaway(pattern)) is not None:  # it would hold the run past every timeout and signal
        raise ValueError(why)
    return pattern


def render_pattern(context: Context, pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compile a pattern whose templates are filled with their values escaped.

    A captured value is data, not a pattern: `^{{captured.id}}$` must match an id with a `.` literally.
    """

    def literal(match: re.Match[str]) -> str:
        value = context.lookup(match.group(1))
        return re.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))

    try:
        return re.compile(TEMPLATE.sub(literal, pattern), flags)
    except re.error as exc:
        # Checked with placeholders at parse time; a value can still land where a quantifier was expected.
        # the suite's pattern, not the agent's answer: the run is the suite's error (the value is masked later)
        raise SuiteProblem(f"/{pattern}/ is not a valid pattern once filled in: {exc}") from None


def template_failed(exc: TemplateError) -> Verdict:
    return Verdict(passed=False, reason=f"cannot check: {exc}", undecided=True)


# ---------------------------------------------------------------- the comparison options, as pydantic mixins


def _no_nan(value: object) -> object:
    # NaN equals nothing, itself included, and JSON has no such number: `.nan` could only fail, or pass as
    # `not_equals`, whatever the agent said
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number: write a number, or the text in quotes")
    return value


class Equals(Strict):
    equals: object = None

    @field_validator("equals")
    @classmethod
    def _finite(cls, value: object) -> object:
        return _no_nan(value)


class NotEquals(Strict):
    not_equals: object = None

    @field_validator("not_equals")
    @classmethod
    def _finite_other(cls, value: object) -> object:
        return _no_nan(value)


class Matches(Strict):
    matches: str | None = None
    """A Python regular expression searched in the value (its JSON text when it is not a string)."""

    @field_validator("matches")
    @classmethod
    def _valid_matches(cls, value: str | None) -> str | None:
        return None if value is None else valid_pattern(value)


class Bounds(Strict):
    gt: Finite | None = None
    gte: Finite | None = None
    lt: Finite | None = None
    lte: Finite | None = None


class ValueComparisons(Equals, NotEquals, Matches, Bounds):
    """Every comparison a JSON value may be put to (json_path, and http's json_path)."""

    contains: object = None
    length: YamlInt | None = Field(None, ge=0)


def expectations(spec: BaseModel) -> dict[str, object]:
    """The comparisons a user actually wrote in `spec`, by name."""
    given: dict[str, object] = {}
    for key in COMPARISONS:
        if key not in type(spec).model_fields or key not in spec.model_fields_set:
            continue
        value = getattr(spec, key)
        if value is not None or key in _NULL_MEANS_NULL:
            given[key] = value
    return given


def render_expectations(context: Context, expected: Mapping[str, object]) -> dict[str, object]:
    """Fill the templates of expected values; `matches` becomes a compiled pattern. May raise TemplateError."""
    rendered: dict[str, object] = {}
    for key, value in expected.items():
        if key == "matches":
            rendered[key] = render_pattern(context, str(value))
        else:
            rendered[key] = context.render_value(value)
    return rendered


# ---------------------------------------------------------------- deciding


def as_text(value: object) -> str:
    """How a found value reads when searched as text: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def contains(found: object, expected: object) -> bool:
    """Substring of a string, element of a list, key (or sub-mapping) of a mapping; a list expects all."""
    if isinstance(expected, list) and not isinstance(found, list):
        return all(contains(found, item) for item in expected)
    if isinstance(found, str):
        return as_text(expected) in found
    if isinstance(found, list):
        wanted = expected if isinstance(expected, list) else [expected]
        return all(any(same(item, want) for item in found) for want in wanted)
    if isinstance(found, Mapping):
        if isinstance(expected, Mapping):
            return all(k in found and same(found[k], v) for k, v in expected.items())
        return as_text(expected) in found
    return False


def _length(found: object) -> int | None:
    return len(found) if isinstance(found, str | list | Mapping) else None


_BOUNDS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "gt": (">", lambda a, b: a > b),
    "gte": (">=", lambda a, b: a >= b),
    "lt": ("<", lambda a, b: a < b),
    "lte": ("<=", lambda a, b: a <= b),
}


def phrase(key: str, expected: object) -> str:
    """One expectation as words that follow "expected": `<= 6`, `to match /^ORD-/`."""
    if key in _BOUNDS:
        return f"{_BOUNDS[key][0]} {number_text(_bound(expected))}"
    if key == "equals":
        return shown(expected)
    if key == "not_equals":
        return f"anything but {shown(expected)}"
    if key == "matches":
        pattern = expected.pattern if isinstance(expected, re.Pattern) else expected
        return f"to match /{pattern}/"
    if key == "contains":
        return f"to contain {shown(expected)}"
    if key == "length":
        return f"length {expected}"
    raise KeyError(key)


def describe(expected: Mapping[str, object]) -> str:
    return " and ".join(phrase(key, value) for key, value in expected.items())


def _problem(key: str, found: object, expected: object) -> str | None:
    """Why `found` fails one expectation, or None when it holds."""
    if key in _BOUNDS:
        number = as_number(found)
        if number is None:
            return f"expected a number {phrase(key, expected)}, found {shown(found)}"
        if _BOUNDS[key][1](number, _bound(expected)):
            return None
        return f"expected {phrase(key, expected)}, found {shown(found)}"
    if key == "equals":
        if same(found, expected):
            return None
        wanted, seen = shown_apart(expected, found)
        return f"expected {wanted}, found {seen}"
    if key == "not_equals":
        return None if not same(found, expected) else f"expected anything but {shown(expected)}, found it"
    if key == "matches":
        if _pattern(expected).search(as_text(found)):
            return None
        return f"expected {phrase(key, expected)}, found {shown(found)}"
    if key == "contains":
        return None if contains(found, expected) else f"expected {phrase(key, expected)}, found {shown(found)}"
    if key == "length":
        size = _length(found)
        if size == expected:
            return None
        has = "no length" if size is None else f"length {size}"
        return f"expected length {expected}, found {has}: {shown(found)}"
    raise KeyError(key)


def compare(found: object, expected: Mapping[str, object]) -> list[str]:
    """Every expectation `found` fails, each as "expected ..., found ..."; empty when all hold."""
    return [p for key, value in expected.items() if (p := _problem(key, found, value)) is not None]


def _bound(expected: object) -> float:
    # the spec's `gt`..`lte` are floats: anything else here is a check passing the wrong thing along
    if isinstance(expected, bool) or not isinstance(expected, int | float):
        raise TypeError(f"a bound is a number, not {type(expected).__name__}")
    return float(expected)


def _pattern(expected: object) -> re.Pattern[str]:
    # `matches` is compiled by render_expectations before it is compared
    if isinstance(expected, str):
        return re.compile(expected)
    if not isinstance(expected, re.Pattern):
        raise TypeError(f"`matches` is a pattern, not {type(expected).__name__}")
    return expected


# ---------------------------------------------------------------- HTTP status codes

_STATUS_CLASS = re.compile(r"^[1-5]xx$")


def _status(value: object) -> int | str:
    if isinstance(value, str):
        text = value.strip().lower()
        if _STATUS_CLASS.match(text):
            return text
        if text.isdigit():
            value = int(text)
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    raise ValueError(f"expected an HTTP status such as 200 or a class such as 2xx, got {value!r}")


StatusCode = Annotated[YamlInt | str, BeforeValidator(_status)]
"""200, or a class of statuses: "2xx"."""

StatusCodes = Annotated[list[StatusCode], BeforeValidator(lambda v: v if isinstance(v, list) else [v])]
"""One status or class, or a list of them: always read as the list."""


def status_allowed(allowed: list[int | str], actual: int) -> bool:
    return any(actual == want if isinstance(want, int) else str(actual)[0] == want[0] for want in allowed)


def describe_statuses(allowed: list[int | str]) -> str:
    return " or ".join(str(s) for s in allowed)
