"""`span`: the agent's own spans of the run (`traces:`), selected by name, attributes and status, counted and timed.

`{name: "execute_tool lookup_order", attributes: {gen_ai.tool.name: lookup_order}, count: {gte: 1},
status: ok, max_duration_ms: 500}`: `name` is a full regular expression; `attributes` match as tool arguments
do (equal, or a string tried as a full regular expression; templates allowed); `count` defaults to at least
one; `max_duration_ms` bounds every selected span. `{status: error, count: {equals: 0}}` asserts no span failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from tamesu.checks._compare import template_failed
from tamesu.checks._unheard import unheard
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import SuiteProblem, TemplateError
from tamesu.matching import args_problem, number_text, shown
from tamesu.plugins import register
from tamesu.suite.patterns import runaway, runaway_in
from tamesu.suite.schema import Strict
from tamesu.telemetry.genai import excerpt, whereabouts
from tamesu.telemetry.spans import Span
from tamesu.types import YamlFloat, YamlInt

NO_TRACES = "no spans: the suite receives none (set traces.receive in tamesu.yaml or the suite)"


class CountSpec(Strict):
    equals: YamlInt | None = Field(None, ge=0)
    gte: YamlInt | None = Field(None, ge=0)
    lte: YamlInt | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _something(self) -> CountSpec:
        if self.equals is None and self.gte is None and self.lte is None:
            raise ValueError("give equals, gte or lte")
        if self.gte is not None and self.lte is not None and self.gte > self.lte:
            raise ValueError(f"gte ({self.gte}) is more than lte ({self.lte}): no count holds both")
        return self

    def problem(self, found: int) -> str | None:
        if self.equals is not None and found != self.equals:
            return f"expected exactly {self.equals}"
        if self.gte is not None and found < self.gte:
            return f"expected at least {self.gte}"
        if self.lte is not None and found > self.lte:
            return f"expected at most {self.lte}"
        return None

    def too_many(self, found: int) -> bool:
        return (self.equals is not None and found > self.equals) or (self.lte is not None and found > self.lte)


class SpanSpec(Strict):
    name: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error", "unset"] | None = None
    count: CountSpec = Field(default_factory=lambda: CountSpec(gte=1))
    max_duration_ms: YamlFloat | None = Field(None, ge=0)
    on_turn: Annotated[YamlInt, Field(ge=1)] | Literal["last"] | None = None
    """As the assertion's own `on_turn` (the issue's examples write it among the span's options)."""

    @field_validator("name")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"name is not a regular expression: {exc}") from None
            if (why := runaway(value)) is not None:  # matched on the agent's span names, past every timeout
                raise ValueError(why)
        return value

    @field_validator("attributes")
    @classmethod
    def _no_runaway(cls, value: dict[str, Any]) -> dict[str, Any]:
        # a string is tried as a full pattern on the agent's attributes, as a tool call's args are
        if (why := runaway_in(value, "attributes")) is not None:
            raise ValueError(why)
        return value

    def described(self) -> str:
        parts = [f"name ~ /{self.name}/"] if self.name is not None else []
        parts.extend(f"{key}={shown(value)}" for key, value in self.attributes.items())
        if self.status is not None:
            parts.append(f"status {self.status}")
        return ", ".join(parts) or "any span"


@register("checks", "span")
class SpanCheck(Check[SpanSpec]):
    key = "span"
    Spec = SpanSpec
    shorthand = "name"
    spec: SpanSpec

    async def evaluate(self, run: RunView) -> Verdict:
        if run.spans is None:
            # the suite's making, as a missing golden file is: the run is an error, never the agent's failure
            raise SuiteProblem(NO_TRACES)
        try:
            attributes = run.context.render_value(self.spec.attributes)
        except TemplateError as exc:
            return template_failed(exc)
        turn = self.spec.on_turn
        if isinstance(turn, int) and turn > len(run.exchanges):
            # as for the assertion's own on_turn (engine.grading): "no such span in turn 7" would have passed
            had = len(run.exchanges)
            return Verdict(passed=False, undecided=True, reason=f"turn {turn} did not happen (the conversation "
                                                                f"had {had} turn{'' if had == 1 else 's'})")
        if turn is not None:
            run = run.scoped(turn)
        assert run.spans is not None
        chosen = [s for s in run.spans if self._selects(s, attributes)]
        what = f"{len(chosen)} span(s) with {self.spec.described()} among {len(run.spans)}"
        over = int(run.metrics.get("trace_spans_over_limit", 0))
        if over:
            # the count is of the spans kept: one past max_spans may have been selected too
            what += f" kept ({over} more of the run's past traces.max_spans were not kept, so not counted)"
        # a trace that never came, or came in part, may hold more spans: only a verdict they could not change
        # is one
        missing = unheard(run)
        if missing.shared:  # spans of another run's among them: no count of them is this run's
            raise missing.undecided(what)
        problem = self.spec.count.problem(len(chosen))
        if problem:
            if self.spec.count.too_many(len(chosen)):
                # the spans that should not be there are the failure's whereabouts: which, on which turn, why
                named = "; ".join(whereabouts(s) for s in chosen[:3])
                problem += f": {named}" + (f"; ... {len(chosen) - 3} more" if len(chosen) > 3 else "")
            elif missing:
                raise missing.undecided(f"{what}; {problem}")
            return Verdict(passed=False, reason=f"{what}; {problem}", evidence=_evidence(chosen))
        limit = self.spec.max_duration_ms
        slow = [s for s in chosen if limit is not None and s.duration_ms > limit]
        if slow:
            worst = max(slow, key=lambda s: s.duration_ms)
            return Verdict(passed=False, reason=f"{what}; {len(slow)} took longer than {number_text(limit or 0)} ms "
                           f"(slowest: {worst.name} {worst.duration_ms:.1f} ms)", evidence=_evidence(slow))
        count = self.spec.count
        if missing and (count.equals is not None or count.lte is not None or limit is not None):
            raise missing.undecided(f"{what}; so far as expected")
        return Verdict(passed=True, reason=what, evidence=_evidence(chosen))

    def _selects(self, span: Span, attributes: Mapping[str, object]) -> bool:
        if self.spec.name is not None and re.fullmatch(self.spec.name, span.name) is None:
            return False
        if self.spec.status is not None and span.status != self.spec.status:
            return False
        if not attributes:
            return True
        own = span.attributes
        if "service.name" in attributes and "service.name" not in own and span.service is not None:
            # a resource attribute, the exporting process's: how spans of two agents in one trace are told apart
            own = {**own, "service.name": span.service}
        return args_problem(attributes, own, "attributes") is None


def _evidence(spans: list[Span], limit: int = 5) -> list[str]:
    said = [f"{s.name} ({s.duration_ms:.1f} ms, {s.status}"
            f"{f': {excerpt(s.status_message)}' if s.status_message else ''}{f', turn {s.turn}' if s.turn else ''})"
            for s in spans[:limit]]
    return [*said, f"... {len(spans) - limit} more"] if len(spans) > limit else said
