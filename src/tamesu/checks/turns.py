"""`turns`: how many agent turns the conversation had: `turns: 4`, or `{lte: 6}`, `{gt: 1, lt: 5}`."""

from __future__ import annotations

from pydantic import ValidationInfo, field_validator, model_validator

from tamesu.checks._compare import compare, describe, expectations
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.plugins import register
from tamesu.suite.schema import Strict
from tamesu.types import YamlInt, narrows


class TurnsSpec(Strict):
    equals: YamlInt | None = None
    gt: YamlInt | None = None
    gte: YamlInt | None = None
    lt: YamlInt | None = None
    lte: YamlInt | None = None

    @field_validator("equals", "gt", "gte", "lt", "lte", mode="before")
    @classmethod
    @narrows
    def _not_a_bool(cls, value: object) -> object:
        # pydantic reads `true` as 1; `turns: true` is a mistake, not "one turn". An explicit null would be
        # kept as `equals: null` and fail every run: a count is never null.
        if isinstance(value, bool) or value is None:
            raise ValueError(f"expected a number of turns, not {'null' if value is None else 'true or false'}")
        return value

    @field_validator("equals", "lt", "lte")
    @classmethod
    def _reachable(cls, value: int | None, info: ValidationInfo) -> int | None:
        # a count is never negative: `lte: -1` (or `lt: 0`, `equals: -2`) could never pass, whatever the agent did
        if value is not None and (value <= 0 if info.field_name == "lt" else value < 0):
            said = {"lt": "is less than", "lte": "is at most", "equals": "is"}[info.field_name or ""]
            raise ValueError(f"no number of turns {said} {value}: a count is never negative")
        return value

    @model_validator(mode="after")
    def _something(self) -> TurnsSpec:
        if not expectations(self):
            raise ValueError("give a number of turns, or one of equals, lt, lte, gt, gte")
        # bounds no count meets together (`{gt: 5, lt: 3}`, `{equals: 2, gte: 3}`) could never pass either
        lows = [0, *([self.gt + 1] if self.gt is not None else []), *([self.gte] if self.gte is not None else [])]
        highs = [*([self.lt - 1] if self.lt is not None else []), *([self.lte] if self.lte is not None else [])]
        low, high = max(lows), min(highs, default=None)
        if self.equals is not None:
            low, high = max(low, self.equals), self.equals if high is None else min(high, self.equals)
        if high is not None and low > high:
            said = ", ".join(f"{key}: {value}" for key, value in expectations(self).items())
            raise ValueError(f"no number of turns meets {said} together")
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
