"""`turns`: how many agent turns the conversation had: `turns: 4`, or `{lte: 6}`, `{gt: 1, lt: 5}`."""

from __future__ import annotations

from pydantic import field_validator, model_validator

from tamesu.checks._compare import compare, describe, expectations
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.plugins import register
from tamesu.suite.schema import Strict
from tamesu.types import narrows


class TurnsSpec(Strict):
    equals: int | None = None
    gt: int | None = None
    gte: int | None = None
    lt: int | None = None
    lte: int | None = None

    @field_validator("equals", "gt", "gte", "lt", "lte", mode="before")
    @classmethod
    @narrows
    def _not_a_bool(cls, value: object) -> object:
        # pydantic reads `true` as 1; `turns: true` is a mistake, not "one turn". An explicit null would be
        # kept as `equals: null` and fail every run: a count is never null.
        if isinstance(value, bool) or value is None:
            raise ValueError(f"expected a number of turns, not {'null' if value is None else 'true or false'}")
        return value

    @model_validator(mode="after")
    def _something(self) -> TurnsSpec:
        if not expectations(self):
            raise ValueError("give a number of turns, or one of equals, lt, lte, gt, gte")
        return self


@register("checks", "turns")
class Turns(Check[TurnsSpec]):
    key = "turns"
    whole_run = "how many turns the conversation had"
    Spec = TurnsSpec
    shorthand = "equals"
    spec: TurnsSpec

    async def evaluate(self, run: RunView) -> Verdict:
        expected = expectations(self.spec)
        count = len(run.exchanges)
        problems = compare(count, expected)
        if problems:
            return Verdict(passed=False, reason=f"agent turns: {'; '.join(problems)}")
        return Verdict(passed=True, reason=f"{count} agent turn(s), expected {describe(expected)}")
