"""Counts in words, with the plural right: `1 test`, `2 tests`, `1 error`."""

from __future__ import annotations


def count_of(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def not_evaluated(number: int, error: bool) -> str:
    """The line that stands for the checks a failed conversation (or an error) kept from being graded."""
    cause = "the error above" if error else "the conversation failed first"
    return f"{count_of(number, 'check')} not evaluated: {cause}"
