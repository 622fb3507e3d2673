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
        problems: list[str] = []
        for exchange in run.exchanges:
            status = exchange.agent.status
            if status is None:
                problems.append(f"turn {exchange.index} has no HTTP status (not an HTTP target?)")
            elif not status_allowed(allowed, status):
                problems.append(f"turn {exchange.index} was {status}")
        if problems:
            return Verdict(passed=False, reason=f"{expected}; {', '.join(problems)}")
        seen = sorted({e.agent.status for e in run.exchanges if e.agent.status is not None})
        return Verdict(passed=True,
                       reason=f"{len(run.exchanges)} turn(s) answered {', '.join(map(str, seen))}")
