"""The judge: a model grades a finished conversation against a rubric, or checks the agent's claims
against a reference text (grounding), and answers in structured output only.

A verdict is a claim users act on, so it is exactly what the judge said or it says what was done to it: the
answer is read strictly (see `models.structured.read_strict`), a pass that contradicts the score is asked
again rather than guessed, every attempt is kept on the verdict, and each quote of its evidence is looked up
in what the judge was shown. A verdict (pass or fail) none of whose quotes can be found is not taken unless
the assertion says `evidence: lenient`: the judge's error (an InfraError), never a verdict on the agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tamesu.models.base import Message, MessageFile, ModelClient, ModelError, ModelRequest, ModelResponse
from tamesu.models.said import one_line
from tamesu.models.structured import Attempt, StructuredOutputError, ask_structured
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.evidence import Evidence, check_evidence, said_quotes
from tamesu.roles.failures import infra_error, not_taken
from tamesu.roles.transcript import as_text

EvidenceMode = Literal["strict", "lenient"]
PASSING_SCORE = 4
"""On the 1-5 scale the prompt tells the judge that pass means a score of 4 or more."""


class Line(BaseModel):
    role: Literal["user", "agent"]
    text: str
    turn: int | None = None


class JudgeInput(BaseModel):
    """What a judge sees: never the raw run, only these structured inputs."""

    rubric: str
    transcript: list[Line] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, object] = Field(default_factory=dict)
    context: str | None = None
    """Reference text the agent's claims should agree with, when the rubric needs one."""
    scale: Literal["binary", "1-5"] = "binary"
    min: float = Field(4, ge=1, le=5)
    """1-5: the lowest score that passes."""
    evidence: EvidenceMode = "strict"
    """lenient: a passing verdict whose quotes are not in the record still passes (they are marked)."""
    images: list[MessageFile] = Field(default_factory=list)
    """Pictures the judge is shown beside the text (a browser page's screenshot), for models that see images."""
    trace: str | None = None
    """A summary of the agent's own spans (`judge: {trace: true}`): shown after the rest, evidence may quote it."""


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
    attempts: list[Attempt] = Field(default_factory=list)
    """Every answer read for this verdict: accepted, repaired (how) or rejected and asked again (why)."""
    unsupported_evidence: list[str] = Field(default_factory=list)
    """Quotes that are not in the transcript, tool calls or context the judge was shown."""
    responses: list[ModelResponse] = Field(default_factory=list, exclude=True)
    """The calls behind the verdict, repairs included (for cost); not part of the verdict itself."""


class _Answer(BaseModel):
    # exactly the schema: a key it does not know (or `passed` for `pass`) is a different answer, not one to
    # read around
    model_config = ConfigDict(extra="forbid")

    passed: bool = Field(alias="pass")
    reason: str = Field(pattern=r"\S")
    """Required and not blank: a verdict says why."""
    evidence: list[str] = Field(default_factory=list)


class BinaryAnswer(_Answer):
    score: float | None = None
    """1 when it passes, 0 otherwise (as the prompt says); anything else contradicts the pass."""

    @model_validator(mode="after")
    def _agrees(self) -> BinaryAnswer:
        if self.score is not None and self.score != (1 if self.passed else 0):
            raise ValueError(f"pass is {_bool(self.passed)} but score is {self.score:g}: on the binary scale "
                             f"score is 1 when it passes and 0 when it does not")
        return self


class ScaledAnswer(_Answer):
    score: float = Field(ge=1, le=5)
    """Required: on this scale the score, with the author's `min`, decides."""

    @model_validator(mode="after")
    def _agrees(self) -> ScaledAnswer:
        if self.passed != (self.score >= PASSING_SCORE):
            raise ValueError(f"pass is {_bool(self.passed)} but score is {self.score:g}: pass is true exactly "
                             f"when score is {PASSING_SCORE} or more")
        return self


class GroundedAnswer(_Answer):
    score: float = Field(1, ge=0, le=1)
    """The fraction of the claims that are supported."""

    @model_validator(mode="after")
    def _agrees(self) -> GroundedAnswer:
        if self.passed != (self.score == 1):
            raise ValueError(f"pass is {_bool(self.passed)} but score is {self.score:g}: pass is true exactly "
                             f"when every claim is supported (score 1)")
        return self


def _bool(value: bool) -> str:
    return "true" if value else "false"


class Judge:
    """`Judge(client).grade(JudgeInput(...))`. Temperature 0, JSON only, answers read strictly and asked
    again within `attempts`; a judge that cannot answer is an InfraError (the run errs, the agent is not
    failed).

    `on` names the check's own prompt when a check wraps the judge's rubric prompt in its own words (golden,
    handoff): the version recorded is then `<own>+judge.vN`, both prompts whose words the model saw."""

    def __init__(self, client: ModelClient, *, attempts: int = 3, on: str | None = None) -> None:
        self._client = client
        self._attempts = attempts
        self.prompt = _prompts.load("judge")
        self.own = _prompts.load(on) if on is not None else None
        """The check's own prompt (`prompts/<on>.vN.md`), whose sections it renders into the rubric."""
        self.version = f"{self.own.version}+{self.prompt.version}" if self.own is not None else self.prompt.version

    async def grade(self, given: JudgeInput) -> JudgeVerdict:
        prompt = self.prompt
        lines = [line.model_dump() for line in given.transcript]
        system = prompt.render("system", rubric=given.rubric, scale=prompt.render(f"scale {given.scale}"))
        user = prompt.render(
            "user", transcript=as_text(lines, empty="(empty)"), tool_calls=_json(given.tool_calls),
            metrics=_json(given.metrics), context=given.context or "(none)")
        context: dict[str, object] = {
            "mode": "rubric", "rubric": given.rubric, "scale": given.scale, "min": given.min, "transcript": lines,
            "tool_calls": given.tool_calls, "metrics": given.metrics, "context": given.context}
        if given.images:
            context["images"] = [image.name for image in given.images]
        version = self.version
        if given.trace is not None:
            traced = _prompts.load("judge_trace")
            user = f"{user}\n\n{traced.render('trace', trace=given.trace or '(no spans)')}"
            context["trace"] = given.trace
            version = f"{version}+{traced.version}"  # the words the model saw: both files
        schema: type[_Answer] = ScaledAnswer if given.scale == "1-5" else BinaryAnswer
        answer, responses, attempts = await self._ask(system, user, context, schema, version, given.images)
        if given.scale == "1-5":
            # the threshold is the test author's, so it decides, whatever the model concluded on its own
            passed, score = answer.score >= given.min, answer.score  # type: ignore[attr-defined]  # the scale chose the answer's schema
        else:
            passed, score = answer.passed, 1.0 if answer.passed else 0.0
        record = [as_text(lines, empty=""), *(_json(call) for call in given.tool_calls), given.context or "",
                  given.trace or ""]
        found = check_evidence(answer.evidence, record)
        return self._verdict(answer, passed, score, responses, attempts, found, given.evidence, version)

    async def grade_grounding(self, claims: str, context: str, evidence: EvidenceMode = "strict") -> JudgeVerdict:
        """Every factual claim in `claims` (the agent's text) is supported by `context`; the unsupported
        claims, quoted from the agent, are the evidence."""
        prompt = _prompts.load("grounded")
        system = prompt.render("system")
        user = prompt.render("user", context=context or "(empty)", claims=claims or "(nothing)")
        inputs = {"mode": "grounded", "claims": claims, "context": context}
        answer, responses, attempts = await self._ask(system, user, inputs, GroundedAnswer, prompt.version)
        found = check_evidence(answer.evidence, [claims])
        return self._verdict(answer, answer.passed, answer.score, responses,  # type: ignore[attr-defined]  # the scale chose the answer's schema
                             attempts, found, evidence, prompt.version)

    async def _ask(
        self, system: str, user: str, context: Mapping[str, object], schema: type[_Answer], version: str,
        images: list[MessageFile] | None = None,
    ) -> tuple[_Answer, list[ModelResponse], list[Attempt]]:
        asked = Message(role="user", content=user, files=list(images or []))
        request = ModelRequest(
            purpose="judge", messages=[Message(role="system", content=system), asked],
            temperature=0.0, prompt_version=version, context=context)
        try:
            found = await ask_structured(self._client, request, schema, attempts=self._attempts, strict=True)
        except StructuredOutputError as exc:
            reasons = [a.reason for a in exc.attempts]
            tried = f"each answer: {reasons[0]}" if len(set(reasons)) == 1 else \
                "; ".join(f"attempt {a.number}: {a.reason}" for a in exc.attempts)
            raise not_taken("judge", StructuredOutputError(
                f"no verdict that fits the schema after {len(exc.attempts)} attempts ({tried})", exc.responses,
                exc.attempts), version) from exc
        except ModelError as exc:
            raise infra_error("judge", exc) from exc
        return found.value, found.responses, found.attempts

    def _verdict(self, answer: _Answer, passed: bool, score: float, responses: list[ModelResponse],
                 attempts: list[Attempt], found: Evidence, mode: EvidenceMode, version: str) -> JudgeVerdict:
        last = responses[-1]
        if found.none_supported and mode == "strict":
            # the judge shows nothing that is there: its verdict, pass or fail, rests on words nobody said, so it
            # decides nothing about the agent; the run is an error naming the judge, as for an answer out of shape
            quoted = said_quotes(found.unsupported)
            raise not_taken("judge", StructuredOutputError(
                f"{last.provider}:{last.model} {'passed' if passed else 'failed'} it, but none of its "
                f"{len(found.unsupported)} quote(s) is in what it was shown ({quoted}): its verdict is not taken "
                f"(evidence: lenient takes it); the judge said: {one_line(answer.reason, 1000)}", responses,
                attempts), version, found.unsupported)
        return JudgeVerdict(
            passed=passed, score=score, reason=answer.reason, evidence=answer.evidence,
            model=f"{last.provider}:{last.model}", prompt_version=version, fake=last.fake,
            attempts=attempts, unsupported_evidence=found.unsupported, responses=responses)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str) if value else "(none)"
