"""Counts in words, with the plural right: `1 test`, `2 tests`, `1 error`; what a run's problems say once."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tamesu.results.records import AssertionResult


def count_of(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def not_evaluated(number: int, error: bool) -> str:
    """The line that stands for the checks a failed conversation (or an error) kept from being graded."""
    cause = "the error above" if error else "the conversation failed first"
    return f"{count_of(number, 'check')} not evaluated: {cause}"


def echoed_failure(error: str | None, failures: Sequence[AssertionResult]) -> AssertionResult | None:
    """The check a run's error came from (`not decided: X` where the error is `judge: X`): said once, as the
    error, where the run's problems are listed."""
    for failure in failures:
        undecided = (failure.reason or "").removeprefix("not decided: ")
        if error and undecided and undecided != failure.reason and error.endswith(undecided):
            return failure
    return None


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What a terminal acts on rather than shows: control characters (a line break and a tab aside), bidi overrides."""


def visible(text: str) -> str:
    """`text` with what a terminal would act on written out (`\\x1b[2J`): a test named, or an agent answering,
    with terminal escapes (colours, a cleared screen, a bell, a right-to-left override) is shown them."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode(), text)
