"""Counts in words, with the plural right: `1 test`, `2 tests`, `1 error`."""

from __future__ import annotations


def count_of(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
