"""`handoff`: whether the agent handed the conversation to a person, as the target's handoff signal says.

`handoff: true` (some turn in scope handed over), `handoff: false` (none did), or a mapping that expects a
handoff and adds conditions on the first one: `within_turns` (it came by agent turn N), `to` (a regex searched in
where it went), `summary_contains` (texts its summary must hold) and `summary` (a rubric the judge model grades
the summary against, with the conversation as context: does the person who takes over learn what they need?).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from tamesu.checks._compare import render_pattern, template_failed, valid_pattern
from tamesu.checks._quote import quote
from tamesu.checks.base import Check, Exchange, RunView, Verdict
from tamesu.checks.judge import judge_client, to_verdict
from tamesu.conversation import Handoff as HandoffSignal
from tamesu.errors import TemplateError
from tamesu.matching import shown
from tamesu.plugins import register
from tamesu.roles.judge import Judge as JudgeRole
from tamesu.roles.judge import JudgeInput
from tamesu.roles.transcript import lines_of
from tamesu.suite.schema import Strict
from tamesu.types import YamlBool, YamlInt


class HandoffSpec(Strict):
    handed_off: YamlBool = True
    within_turns: YamlInt | None = Field(None, ge=1)
    to: str | None = None
    summary_contains: list[str] = Field(default_factory=list)
    summary: str | None = Field(None, min_length=1)
    """A rubric for the handoff summary, graded by the judge model (`models.judge`, or `model`)."""
    model: Any = None

    @field_validator("summary_contains", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("to")
    @classmethod
    def _valid_to(cls, value: str | None) -> str | None:
        return None if value is None else valid_pattern(value)

    @model_validator(mode="after")
    def _conditions_need_a_handoff(self) -> HandoffSpec:
        if not self.handed_off and (self.within_turns or self.to or self.summary_contains or self.summary):
            raise ValueError("handoff: false takes no within_turns, to, summary_contains or summary")
        return self


def _destination(signal: HandoffSignal) -> str:
    return f" to {shown(signal.to)}" if signal.to else ""


def _who(run: RunView, exchange: Exchange) -> str:
    """Who handed over, as a reason says it: `turn 2`, or `the agent` when the check's label names the turn
    (`handoff (turn 2): expected no handoff; the agent handed over`, not "turn 2 handed over")."""
    return "the agent" if run.turn_labelled else f"turn {exchange.index}"


def _searched(run: RunView) -> str:
    return "" if run.turn_labelled else f" in {len(run.exchanges)} turn(s)"


@register("checks", "handoff")
class Handoff(Check[HandoffSpec]):
    key = "handoff"
    needs = "signals_handoff"
    Spec = HandoffSpec
    shorthand = "handed_off"
    spec: HandoffSpec

    async def evaluate(self, run: RunView) -> Verdict:
        handed = [(e, signal) for e in run.exchanges if (signal := e.agent.handoff) is not None]
        if not self.spec.handed_off:
            if not handed:
                return Verdict(passed=True, reason=f"no handoff{_searched(run)}")
            exchange, signal = handed[0]
            return Verdict(passed=False, reason=f"expected no handoff; {_who(run, exchange)} handed over"
                                                f"{_destination(signal)}")
        if not handed:
            return Verdict(passed=False, reason=f"expected a handoff; none{_searched(run) or ' came'}")
        exchange, signal = handed[0]
        try:
            problems = self._problems(exchange, signal, run)
        except TemplateError as exc:
            return template_failed(exc)
        if problems:
            return Verdict(passed=False, reason="; ".join(problems))
        if self.spec.summary is not None:
            return await self._judge_summary(run, exchange, signal)
        return Verdict(passed=True, reason=f"{_who(run, exchange)} handed over{_destination(signal)}",
                       evidence=[signal.summary] if signal.summary else [])

    async def _judge_summary(self, run: RunView, exchange: Exchange, signal: HandoffSignal) -> Verdict:
        if not signal.summary:
            return Verdict(passed=False, reason=f"{_who(run, exchange)} handed over with no summary to grade")
        # the judge reads the conversation, and the summary as the context the rubric is about
        judge = JudgeRole(judge_client(run, self.spec.model), on="handoff")
        assert judge.own is not None
        verdict = await judge.grade(JudgeInput(
            rubric=judge.own.render("rubric", summary=run.context.render_text(self.spec.summary or '')),
            transcript=lines_of(run.exchanges),
            context=signal.summary,
        ))
        graded = to_verdict(verdict)
        graded.reason = f"{_who(run, exchange)} handed over{_destination(signal)}; summary: {graded.reason}"
        return graded

    def _problems(self, exchange: Exchange, signal: HandoffSignal, run: RunView) -> list[str]:
        problems: list[str] = []
        context = run.context
        if self.spec.within_turns is not None and exchange.index > self.spec.within_turns:
            came = "" if run.turn_labelled else f", it came at turn {exchange.index}"  # else the label's turn
            problems.append(f"expected a handoff within {self.spec.within_turns} turn(s){came}")
        if self.spec.to is not None and not render_pattern(context, self.spec.to).search(signal.to or ""):
            found = shown(signal.to) if signal.to else "no destination"
            problems.append(f"expected a handoff to /{self.spec.to}/, found {found}")
        for text in self.spec.summary_contains:
            needle = context.render_text(text)
            if needle not in (signal.summary or ""):
                found = quote(signal.summary, 120) if signal.summary else "no summary"
                problems.append(f"expected the handoff summary to contain {shown(needle)}, found {found}")
        return problems
