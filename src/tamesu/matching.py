"""Matching values the way a user means them, shared by assertions and by targets that answer tool calls.

A number written as text equals the number, `true` is not `1`, and a string in an expected argument that is
not equal may be a full regular expression.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping


def show(value: object, limit: int = 120) -> str:
    """A value as it should read in a reason line: short, JSON for structures."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number_text(value: float) -> str:
    """1500.0 reads as 1500; 0.051234 as 0.051234."""
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def shown(value: object, limit: int = 120) -> str:
    """`show` for a reason line: strings quoted on one line, floats as a person writes them (1500, not 1500.0)."""
    if isinstance(value, float):
        return number_text(value)
    if isinstance(value, str):
        return show(json.dumps(value, ensure_ascii=False), limit)
    return show(value, limit)


def as_number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def same(found: object, expected: object) -> bool:
    """Equality that forgives a number written as text ("42" and 42), because captures and YAML disagree."""
    if isinstance(found, str) != isinstance(expected, str) and _scalar(found) and _scalar(expected):
        text, other = (found, expected) if isinstance(found, str) else (expected, found)
        if other is None or isinstance(other, bool):
            return text == json.dumps(other)
        return bool(as_number(text) == other)
    if isinstance(found, bool) or isinstance(expected, bool):
        # Python says True == 1; a user who wrote `true` did not mean 1.
        return type(found) is type(expected) and found == expected
    return bool(found == expected)


def args_problem(expected: object, actual: object, where: str = "args") -> str | None:
    """Why `actual` does not match `expected` (the rules of the module docstring), or None when it does."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return f"{where} is {shown(actual)}, not a mapping"
        for key, value in expected.items():
            if key not in actual:
                return f"{where}.{key} is missing"
            problem = args_problem(value, actual[key], f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where} is {shown(actual)}, expected {shown(expected)}"
        for index, (want, have) in enumerate(zip(expected, actual, strict=True)):
            problem = args_problem(want, have, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if same(actual, expected) or (isinstance(expected, str) and _full_match(expected, actual)):
        return None
    return f"{where} is {shown(actual)}, expected {shown(expected)}"


def _full_match(pattern: str, actual: object) -> bool:
    text = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False, default=str)
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        # Not every string value is meant as a pattern; one that is not a valid one only matches equal.
        return False
