"""`delegated_to`: the agent under test delegated to a remote agent (`remote_agents:`).

`delegated_to: billing`, or `{agent, contains, regex}`: at least one delegation to that agent whose message
holds `contains` (case-insensitive) and matches `regex` (searched). Delegations are the tool calls of kind
`delegation` (`run.tool_calls`), with the message as `args.message` and its data parts as `args.data` (both
searched, the data as JSON); templates allowed in both options.
"""

from __future__ import annotations

import json

from pydantic import Field, field_validator

from tamesu.checks._compare import render_pattern, template_failed, valid_pattern
from tamesu.checks._quote import quote
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.conversation import ToolCall
from tamesu.errors import TemplateError
from tamesu.matching import shown
from tamesu.plugins import register
from tamesu.suite.schema import Strict


class DelegatedToSpec(Strict):
    agent: str = Field(min_length=1)
    contains: str | None = None
    regex: str | None = None

    @field_validator("regex")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        return None if value is None else valid_pattern(value)


def _message(call: ToolCall) -> str:
    """What the delegation said: its text and its data (a `data` part alone has no text to look in)."""
    message = call.args.get("message", "")
    said = message if isinstance(message, str) else shown(message)
    data = call.args.get("data")
    if data:
        said = " ".join([said, *(json.dumps(d, sort_keys=True, ensure_ascii=False) for d in
                                 (data if isinstance(data, list) else [data]))]).strip()
    return said


@register("checks", "delegated_to")
class DelegatedTo(Check[DelegatedToSpec]):
    key = "delegated_to"
    Spec = DelegatedToSpec
    shorthand = "agent"
    spec: DelegatedToSpec

    async def evaluate(self, run: RunView) -> Verdict:
        delegations = [c for c in run.tool_calls if c.kind == "delegation"]
        to_agent = [c for c in delegations if c.name == self.spec.agent]
        if not to_agent:
            others = ", ".join(sorted({c.name for c in delegations})) or "none"
            refused = [e for e in run.events
                       if e.name == "delegation_refused" and e.data.get("agent") == self.spec.agent]
            turned_away = (f" ({len(refused)} message{'s' if len(refused) > 1 else ''} to it refused: "
                           f"{refused[0].data.get('reason')})") if refused else ""
            return Verdict(passed=False, reason=f"no delegation to {self.spec.agent}{turned_away}; "
                                                f"delegated to: {others}")
        try:
            contains = run.context.render_text(self.spec.contains) if self.spec.contains is not None else None
            pattern = render_pattern(run.context, self.spec.regex) if self.spec.regex is not None else None
        except TemplateError as exc:
            return template_failed(exc)
        for call in to_agent:
            text = _message(call)
            if contains is not None and contains.casefold() not in text.casefold():
                continue
            if pattern is not None and not pattern.search(text):
                continue
            at = f" at turn {call.turn}" if call.turn is not None else ""
            return Verdict(passed=True, reason=f"delegated to {self.spec.agent}{at}: {quote(text, 120)}")
        wanted = " and ".join(w for w in (f"containing {shown(contains)}" if contains is not None else "",
                                          f"matching /{self.spec.regex}/" if pattern is not None else "") if w)
        return Verdict(passed=False, reason=f"{len(to_agent)} delegation(s) to {self.spec.agent}, none {wanted}",
                       evidence=[_message(c)[:400] for c in to_agent])
