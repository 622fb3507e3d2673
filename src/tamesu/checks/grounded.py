"""`grounded`: every factual claim of the agent is supported by a context, judged with evidence.

The context is a text, a JSONPath into the turns' responses, or the results of a tool's calls in the run.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonpath
from pydantic import Field, model_validator

from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.judge import judge_client, to_verdict
from tamesu.plugins import register
from tamesu.roles.judge import Judge
from tamesu.types import Strict, YamlFloat


class ContextSpec(Strict):
    text: str | None = None
    json_path: str | None = None
    tool: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        return {"text": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one(self) -> ContextSpec:
        given = [k for k in ("text", "json_path", "tool") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("the context is one of text, json_path or tool")
        if self.json_path is not None:
            try:
                jsonpath.compile(self.json_path)
            except jsonpath.JSONPathError as exc:
                raise ValueError(f"context.json_path: {exc}") from None
        return self


class GroundedSpec(Strict):
    context: ContextSpec
    model: Any = None
    min: YamlFloat = Field(1.0, ge=0, le=1)
    """The fraction of claims that must be supported (default all of them)."""
    evidence: Literal["strict", "lenient"] = "strict"
    """strict: a verdict whose quotes (the unsupported claims) are none of them in the agent's words is not taken:
    the run is an error naming the judge, not a failure of the agent."""


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def gather_context(spec: ContextSpec, run: RunView) -> str:
    if spec.text is not None:
        return run.context.render_text(spec.text)
    if spec.tool is not None:
        return "\n".join(_as_text(call.result) for call in run.tool_calls
                         if call.name == spec.tool and call.result is not None)
    found: list[object] = []
    for exchange in run.exchanges:
        if exchange.agent.response is not None:
            found.extend(jsonpath.findall(spec.json_path or "$", exchange.agent.response))
    return "\n".join(_as_text(value) for value in found)


@register("checks", "grounded")
class Grounded(Check[GroundedSpec]):
    key = "grounded"
    Spec = GroundedSpec
    shorthand = "context"

    async def evaluate(self, run: RunView) -> Verdict:
        spec: GroundedSpec = self.spec
        context = gather_context(spec.context, run)
        claims = run.agent_text()
        if not context.strip():
            where = spec.context.tool and f"tool {spec.context.tool} was not called or returned nothing"
            return Verdict(passed=False, reason=f"no context to check the claims against: "
                           f"{where or 'the context is empty'}")
        if not claims.strip():
            return Verdict(passed=False, reason="the agent made no claims to check (it said nothing)")
        verdict = await Judge(judge_client(run, spec.model)).grade_grounding(claims, context, spec.evidence)
        result = to_verdict(verdict)
        # the author's `min` decides on the supported fraction, as `min` does on the 1-5 scale
        result.passed = verdict.score >= spec.min
        return result
