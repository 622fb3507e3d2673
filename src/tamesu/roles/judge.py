"""The judge: a model grades a finished conversation against a rubric, or checks the agent's claims
against a reference text (grounding), and answers in structured output only."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest, ModelResponse
from tamesu.models.structured import generate_structured
from tamesu.roles import _prompts
from tamesu.roles._failures import infra_error
from tamesu.roles._transcript import as_text


class Line(BaseModel):
    role: Literal["user", "agent"]
    text: str
    turn: int | None = None


class JudgeInput(BaseModel):
    """What a judge sees: never the raw run, only these structured inputs."""

    rubric: str
    transcript: list[Line] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    context: str | None = None
    """Reference text the agent's claims should agree with, when the rubric needs one."""
    scale: Literal["binary", "1-5"] = "binary"
    min: float = Field(4, ge=1, le=5)
    """1-5: the lowest score that passes."""


class JudgeVerdict(BaseModel):
    passed: bool
    score: float
    reason: str
    evidence: list[str] = Field(default_factory=list)
    model: str
    """provider:model that decided."""
    prompt_version: str
    fake: bool = False
    """Decided by the fake provider's rules, not by a model: say so wherever the verdict is shown."""
    responses: list[ModelResponse] = Field(default_factory=list, exclude=True)
    """The calls behind the verdict, repairs included (for cost); not part of the verdict itself."""


class _Answer(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    passed: bool = Field(alias="pass")
    reason: str
    evidence: list[str] = Field(default_factory=list)


class BinaryAnswer(_Answer):
    score: float | None = None
    """Ignored: on the binary scale the score is 1 or 0 from pass."""


class ScaledAnswer(_Answer):
    score: float = Field(ge=1, le=5)
    """Required: on this scale the score, not the model's own pass, decides."""


class GroundedAnswer(_Answer):
    score: float = Field(1, ge=0, le=1)
    """The fraction of the claims that are supported."""


class Judge:
    """`Judge(client).grade(JudgeInput(...))`. Temperature 0, JSON only, malformed answers repaired within
    `attempts`; a judge that cannot answer is an InfraError (the run errs, the agent is not failed)."""

    def __init__(self, client: ModelClient, *, attempts: int = 3) -> None:
        self._client = client
        self._attempts = attempts
        self.prompt = _prompts.load("judge")

    async def grade(self, given: JudgeInput) -> JudgeVerdict:
        prompt = self.prompt
        lines = [line.model_dump() for line in given.transcript]
        system = prompt.render("system", rubric=given.rubric, scale=prompt.render(f"scale {given.scale}"))
        user = prompt.render(
            "user", transcript=as_text(lines, empty="(empty)"), tool_calls=_json(given.tool_calls),
            metrics=_json(given.metrics), context=given.context or "(none)")
        context = {"mode": "rubric", "rubric": given.rubric, "scale": given.scale, "min": given.min,
                   "transcript": lines, "tool_calls": given.tool_calls, "metrics": given.metrics,
                   "context": given.context}
        schema: type[_Answer] = ScaledAnswer if given.scale == "1-5" else BinaryAnswer
        answer, responses = await self._ask(system, user, context, schema)
        if given.scale == "1-5":
            # the threshold is the test author's, so it decides, whatever the model concluded on its own
            passed, score = answer.score >= given.min, answer.score  # type: ignore[attr-defined]
        else:
            passed, score = answer.passed, 1.0 if answer.passed else 0.0
        return self._verdict(answer, passed, score, responses)

    async def grade_grounding(self, claims: str, context: str) -> JudgeVerdict:
        """Every factual claim in `claims` (the agent's text) is supported by `context`; the unsupported
        claims are the evidence."""
        system = self.prompt.render("grounded system")
        user = self.prompt.render("grounded user", context=context or "(empty)", claims=claims or "(nothing)")
        inputs = {"mode": "grounded", "claims": claims, "context": context}
        answer, responses = await self._ask(system, user, inputs, GroundedAnswer)
        return self._verdict(answer, answer.passed, answer.score, responses)  # type: ignore[attr-defined]

    async def _ask(
        self, system: str, user: str, context: dict[str, Any], schema: type[_Answer]
    ) -> tuple[_Answer, list[ModelResponse]]:
        request = ModelRequest(
            purpose="judge", messages=[Message(role="system", content=system), Message(role="user", content=user)],
            temperature=0.0, prompt_version=self.prompt.version, context=context)
        try:
            return await generate_structured(self._client, request, schema, attempts=self._attempts)
        except ModelError as exc:
            raise infra_error("judge", exc) from exc

    def _verdict(self, answer: _Answer, passed: bool, score: float, responses: list[ModelResponse]) -> JudgeVerdict:
        last = responses[-1]
        return JudgeVerdict(
            passed=passed, score=score, reason=answer.reason, evidence=answer.evidence,
            model=f"{last.provider}:{last.model}", prompt_version=self.prompt.version, fake=last.fake,
            responses=responses)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str) if value else "(none)"
