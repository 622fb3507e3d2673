"""Grading one assertion, as a suite writes it, on a finished run: the helpers the checks' tests share."""

from __future__ import annotations

from typing import Any

import pytest

from tamesu.checks import AssertionProblem, parse_assertion
from tamesu.checks.base import RunView, Verdict


async def verdict(entry: dict[str, Any], run: RunView) -> Verdict:
    assertion = parse_assertion(entry)
    return await assertion.check.evaluate(run.scoped(assertion.on_turn))


async def passes(entry: dict[str, Any], run: RunView) -> Verdict:
    result = await verdict(entry, run)
    assert result.passed, result.reason
    return result


async def fails(entry: dict[str, Any], run: RunView) -> Verdict:
    """A failed verdict, which always says why."""
    result = await verdict(entry, run)
    assert not result.passed, result.reason
    assert result.reason
    return result


def problem(entry: dict[str, Any]) -> AssertionProblem:
    """The one-line problem an assertion the suite got wrong is refused with."""
    with pytest.raises(AssertionProblem) as caught:
        parse_assertion(entry)
    return caught.value
