"""The phone call assertions, read from the call's events (the `sip` target records them):

- `dtmf_received: {equals: "1234#"}` or `{matches: "^12"}`: the digits the agent sent (RFC 4733), in order; on a
  `sip` call or in a `livekit` room (whose target records the agent's digits the same way);
- `call_ended_by: agent` or `[agent, caller]`: who ended the call: `agent`, `caller`, `timeout`, `error`,
  `no_answer`, `busy`, `declined` (the agent's end turned the call down: 603 Decline);
- `transferred_to: {matches: "^sip:billing@"}`: the agent transferred the call (a REFER) to a matching target.

`equals` and `matches` take templates (`{{captured.code}}`, `{{env.X}}`, `{{secrets.X}}`, a case's vars) filled in
when the assertion runs, as other assertions' values do (docs/assertions.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator, model_validator

from tamesu.checks._compare import render_pattern, template_failed, valid_pattern
from tamesu.checks._quote import quote
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import TemplateError
from tamesu.plugins import register
from tamesu.suite.schema import Strict

EndedBy = Literal["agent", "caller", "timeout", "error", "no_answer", "busy", "declined"]


def _digits(run: RunView) -> str:
    return "".join(str(e.data.get("digit", "")) for e in run.events if e.name == "sip_dtmf")


def _not_a_call(run: RunView) -> Verdict | None:
    if not any(e.name in ("call_ended", "sip_dial", "sip_trigger") for e in run.events):
        return Verdict(passed=False, reason="no phone call in this run (the call assertions need a sip target)")
    return None


def _no_dtmf_channel(run: RunView) -> Verdict | None:
    """DTMF travels on a phone call or in a LiveKit room; any other run cannot carry the agent's digits."""
    in_a_room = any(e.name == "transport" and e.data.get("binding") == "livekit" for e in run.events)
    if in_a_room or any(e.name == "sip_dtmf" for e in run.events):
        return None
    if not any(e.name in ("call_ended", "sip_dial", "sip_trigger") for e in run.events):
        return Verdict(passed=False, reason="no phone call or LiveKit room in this run (dtmf_received needs a sip "
                                            "or livekit target)")
    return None


class DtmfReceivedSpec(Strict):
    equals: str | None = None
    matches: str | None = None

    @field_validator("matches")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        return None if value is None else valid_pattern(value)

    @model_validator(mode="after")
    def _one(self) -> DtmfReceivedSpec:
        if self.equals is None and self.matches is None:
            raise ValueError("dtmf_received needs equals or matches")
        return self


@register("checks", "dtmf_received")
class DtmfReceived(Check[DtmfReceivedSpec]):
    key = "dtmf_received"
    needs = "hears_dtmf"
    Spec = DtmfReceivedSpec
    shorthand = "equals"
    spec: DtmfReceivedSpec

    async def evaluate(self, run: RunView) -> Verdict:
        if (missing := _no_dtmf_channel(run)) is not None:
            return missing
        try:
            equals = run.context.render_text(self.spec.equals) if self.spec.equals is not None else None
            pattern = render_pattern(run.context, self.spec.matches) if self.spec.matches is not None else None
        except TemplateError as exc:
            return template_failed(exc)
        digits = _digits(run)
        sent = quote(digits) if digits else "no digits"
        if equals is not None and digits != equals:
            return Verdict(passed=False, reason=f"the agent sent {sent}, expected {quote(equals)}")
        if pattern is not None and not pattern.search(digits):
            return Verdict(passed=False, reason=f"the agent sent {sent}, which does not match /{pattern.pattern}/")
        return Verdict(passed=True, reason=f"the agent sent {sent}")


class CallEndedBySpec(Strict):
    by: list[EndedBy]

    @field_validator("by", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


@register("checks", "call_ended_by")
class CallEndedBy(Check[CallEndedBySpec]):
    key = "call_ended_by"
    needs = "phone_call"
    Spec = CallEndedBySpec
    shorthand = "by"
    grades_unconnected = True
    spec: CallEndedBySpec

    @classmethod
    def parse(cls, value: object) -> Any:
        return cls.Spec.model_validate({"by": value} if not isinstance(value, dict) else value)

    async def evaluate(self, run: RunView) -> Verdict:
        if (missing := _not_a_call(run)) is not None:
            return missing
        ended = next((e for e in run.events if e.name == "call_ended"), None)
        if ended is None:
            return Verdict(passed=False, reason="the call has no recorded end")
        by = str(ended.data.get("by"))
        detail = " ".join(str(ended.data.get(k) or "") for k in ("code", "reason")).strip()
        said = f"ended by {by}" + (f" ({detail})" if detail and detail != "0" else "")
        if by not in self.spec.by:
            return Verdict(passed=False, reason=f"the call {said}, expected {' or '.join(self.spec.by)}")
        return Verdict(passed=True, reason=f"the call {said}")


class TransferredToSpec(Strict):
    matches: str

    @field_validator("matches")
    @classmethod
    def _valid(cls, value: str) -> str:
        return valid_pattern(value)


@register("checks", "transferred_to")
class TransferredTo(Check[TransferredToSpec]):
    key = "transferred_to"
    needs = "phone_call"
    Spec = TransferredToSpec
    shorthand = "matches"
    spec: TransferredToSpec

    async def evaluate(self, run: RunView) -> Verdict:
        if (missing := _not_a_call(run)) is not None:
            return missing
        targets = [str(e.data.get("to", "")) for e in run.events if e.name == "sip_transfer"]
        if not targets:
            return Verdict(passed=False, reason="the agent never transferred the call")
        try:
            pattern = render_pattern(run.context, self.spec.matches)
        except TemplateError as exc:
            return template_failed(exc)
        for target in targets:
            if pattern.search(target):
                return Verdict(passed=True, reason=f"transferred to {target}")
        return Verdict(passed=False, reason=f"transferred to {', '.join(targets)}, none matches /{pattern.pattern}/")
