"""`captured`: a value the test's `capture` rules took from the agent's turns.

`captured: order_id` (it was captured), `{name: order_id, matches: "^ORD-"}`, `{name: eta, equals: "{{vars.eta}}"}`,
`{name: refund_id, exists: false}` (nothing was captured under that name).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, field_validator, model_validator

from tamesu.checks._compare import (
    Equals,
    Matches,
    compare,
    expectations,
    render_expectations,
    template_failed,
)
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import TemplateError
from tamesu.matching import shown
from tamesu.plugins import register
from tamesu.types import YamlBool, narrows


class CapturedSpec(Equals, Matches):
    name: str = Field(min_length=1)
    exists: YamlBool = True

    @field_validator("equals", mode="before")
    @classmethod
    @narrows
    def _not_null(cls, value: object) -> object:
        # a rule that finds null captures nothing, so `equals: null` could never pass
        if value is None:
            raise ValueError("a captured value is never null (a rule that finds null captures nothing): "
                             "write exists: false")
        return value

    @model_validator(mode="after")
    def _absent_means_nothing_else(self) -> CapturedSpec:
        if not self.exists and expectations(self):
            raise ValueError("exists: false cannot be combined with equals or matches")
        return self


def _names(captured: Mapping[str, object]) -> str:
    names = sorted(k for k, v in captured.items() if v is not None)
    return f"captured: {', '.join(names)}" if names else "nothing was captured"


@register("checks", "captured")
class Captured(Check[CapturedSpec]):
    key = "captured"
    whole_run = "what the run captured"
    Spec = CapturedSpec
    shorthand = "name"
    spec: CapturedSpec

    async def evaluate(self, run: RunView) -> Verdict:
        name = self.spec.name
        # A capture rule that found nothing may leave its name with no value: that is "not captured".
        value = run.captured.get(name)
        if not self.spec.exists:
            if value is None:
                return Verdict(passed=True, reason=f"nothing captured as {name}, as expected")
            return Verdict(passed=False, reason=f"expected nothing captured as {name}, found {shown(value)}")
        if value is None:
            # what the capture looked for, as a template that needed it says: whether the agent never said it or
            # the capture looks for the wrong thing is the reader's to see (`capture_not_found`'s note)
            note = next((e.data.get("note") for e in run.events
                         if e.name == "capture_not_found" and e.data.get("name") == name and e.data.get("note")), None)
            # a value compared where none was captured is not checked (`negate: true` passed it); `captured: x` is
            return Verdict(passed=False,
                           reason=f"expected a value captured as {name}, found none ({note or _names(run.captured)})",
                           undecided=bool(expectations(self.spec)))
        try:
            expected = render_expectations(run.context, expectations(self.spec))
        except TemplateError as exc:
            return template_failed(exc)
        problems = compare(value, expected)
        if problems:
            return Verdict(passed=False, reason=f"captured {name}: {'; '.join(problems)}")
        return Verdict(passed=True, reason=f"captured {name} = {shown(value)}")
