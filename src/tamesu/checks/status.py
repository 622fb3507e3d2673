"""`status`: the HTTP status of every agent turn in scope (`agent.status`).

`status: 200`, `status: "2xx"`, `status: [200, 201]`, `{equals: 200}` or `{in: [200, "3xx"]}`.
A turn without a status (a target that is not HTTP) fails: the assertion cannot hold there.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from tamesu.checks._compare import StatusCode, describe_statuses, status_allowed
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.plugins import register
from tamesu.suite.schema import Strict


class StatusSpec(Strict):
    equals: StatusCode | None = None
    one_of: list[StatusCode] | None = Field(None, alias="in", min_length=1)

    @model_validator(mode="after")
    def _one_form(self) -> StatusSpec:
        if (self.equals is None) == (self.one_of is None):
            raise ValueError("give a status (200 or 2xx) as equals, or a list of them as in")
        return self

    def allowed(self) -> list[int | str]:
        return [self.equals] if self.equals is not None else list(self.one_of or [])


@register("checks", "status")
class Status(Check[StatusSpec]):
    key = "status"
    Spec = StatusSpec
    shorthand = "equals"
    needs = "answers_http_status"
    spec: StatusSpec

    @classmethod
    def parse(cls, value: object) -> Any:
        if isinstance(value, list):
            value = {"in": value}
        return super().parse(value)

    async def evaluate(self, run: RunView) -> Verdict:
        allowed = self.spec.allowed()
        expected = f"expected HTTP status {describe_statuses(allowed)} on every turn"
        if not run.exchanges:
            return Verdict(passed=False, reason=f"{expected}; there were no agent turns")
        wrong: dict[int | None, list[int]] = {}
        for exchange in run.exchanges:
            status = exchange.agent.status
            if status is None or not status_allowed(allowed, status):
                wrong.setdefault(status, []).append(exchange.index)
        # grouped by status, turns as ranges: 200 turns answered 404 were 200 clauses in the one-line reason
        problems = [f"{_turns(turns)} {'has' if len(turns) == 1 else 'have'} no HTTP status (not an HTTP target?)"
                    if status is None else f"{_turns(turns)} {'was' if len(turns) == 1 else 'were'} {status}"
                    for status, turns in wrong.items()]
        if problems:
            return Verdict(passed=False, reason=f"{expected}; {', '.join(problems)}")
        seen = sorted({e.agent.status for e in run.exchanges if e.agent.status is not None})
        return Verdict(passed=True,
                       reason=f"{len(run.exchanges)} turn(s) answered {', '.join(map(str, seen))}")


_RANGES = 10
"""Ranges of turns a reason names before it counts the rest."""


def _turns(indexes: list[int]) -> str:
    """`turn 3`, `turns 1-30, 32`: consecutive turns as one range, 10 ranges and then how many more turns."""
    if len(indexes) == 1:
        return f"turn {indexes[0]}"
    ranges: list[list[int]] = []
    for index in indexes:
        if ranges and index == ranges[-1][-1] + 1:
            ranges[-1].append(index)
        else:
            ranges.append([index])
    said = [f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in ranges[:_RANGES]]
    more = sum(len(r) for r in ranges[_RANGES:])
    return "turns " + ", ".join(said) + (f" and {more} more" if more else "")
