"""`evaluator`: a registered evaluator scores the run from 0 to 1; the score passes within `min` / `max`.

`{evaluator: faithfulness, min: 0.8}` (the Concepts page's form), or `{evaluator: {name: ..., min: ...}}` (also
written `{evaluator: {evaluator: ..., min: ...}}`), or just `evaluator: faithfulness` for the evaluator's own
threshold. Genkit's names of the built-ins (`genkitEval/faithfulness`, `genkitEval/answer_relevancy`,
`genkitEval/maliciousness`) name the same evaluators. `context` (as for `grounded`: a text, a
JSONPath into the responses, or a tool's results; default every tool result of the run) is the reference text
of `faithfulness`; `model` picks the judge; `with` is handed to a plug-in evaluator as `sample.options`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tamesu import evaluators
from tamesu.checks._quote import exception_line, their_line
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.grounded import ContextSpec, gather_context
from tamesu.checks.judge import judge_client, judge_metrics
from tamesu.errors import InfraError
from tamesu.evaluators import EvaluatorError, Sample
from tamesu.models.base import ModelError
from tamesu.plugins import register
from tamesu.roles.transcript import lines_of
from tamesu.types import Strict, YamlFloat


class EvaluatorSpec(Strict):
    name: str = Field(min_length=1)
    min: YamlFloat | None = Field(None, ge=0, le=1)
    """The lowest score that passes."""
    max: YamlFloat | None = Field(None, ge=0, le=1)
    """The highest score that passes (for scores where more is worse, such as maliciousness)."""
    context: ContextSpec | None = None
    model: Any = None
    """A name under `models:` or `provider:model`; default `models.judge`."""
    options: dict[str, Any] = Field(default_factory=dict, alias="with")
    evidence: Literal["strict", "lenient"] = "strict"
    """strict: a built-in evaluator's score none of whose quotes is in the transcript or the context is not
    taken (the run is an error naming the evaluator, not a failure of the agent); lenient: it is taken, with
    the quotes marked unsupported."""

    @model_validator(mode="before")
    @classmethod
    def _evaluator_names_it(cls, value: object) -> object:
        # the assembled form of the Concepts page's `{evaluator: NAME, min}`: the name under `evaluator`
        if isinstance(value, dict) and "evaluator" in value and "name" not in value:
            value = {("name" if key == "evaluator" else key): item for key, item in value.items()}
        return value

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        try:
            evaluators.find(name)
        except EvaluatorError as exc:
            raise ValueError(str(exc)) from None
        return name

    @model_validator(mode="after")
    def _range(self) -> EvaluatorSpec:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min:g}) is above max ({self.max:g}): no score could pass")
        return self


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


@register("checks", "evaluator")
class EvaluatorCheck(Check[EvaluatorSpec]):
    key = "evaluator"
    Spec = EvaluatorSpec
    shorthand = "name"

    async def evaluate(self, run: RunView) -> Verdict:
        spec: EvaluatorSpec = self.spec
        found = evaluators.find(spec.name)
        low, high = spec.min, spec.max
        if low is None and high is None:
            low, high = found.default_min, found.default_max
        if spec.context is not None:
            context: str | None = gather_context(spec.context, run)
        else:
            context = "\n".join(_text(c.result) for c in run.tool_calls if c.result is not None) or None
        sample = Sample(
            question="\n".join(e.user.display() for e in run.exchanges if e.user is not None),
            answer=run.agent_text(), transcript=lines_of(run.exchanges), context=context,
            tool_calls=[call.model_dump(mode="json") for call in run.tool_calls],
            metrics=judge_metrics(run.metrics, timings=False), options=dict(spec.options), evidence=spec.evidence,
            judge_client=lambda: judge_client(run, spec.model))
        try:
            score = await found.score(sample)
        except EvaluatorError as exc:
            raise InfraError(str(exc)) from None
        except (InfraError, ModelError):
            raise
        except Exception as exc:  # a plug-in's own failure: this test cannot be graded, say why
            raise InfraError(f"evaluator {spec.name!r} ({found.source}) failed: {exception_line(exc)}") from None
        passed = (low is None or score.score >= low) and (high is None or score.score <= high)
        bounds = ", ".join([*([f"min {low:g}"] if low is not None else []),
                            *([f"max {high:g}"] if high is not None else [])])
        label = " (fake judge)" if score.fake else ""
        reason = f"{spec.name} {score.score:.2f} ({bounds})" + (f": {their_line(score.reason)}" if score.reason else "")
        return Verdict(passed=passed, reason=reason + label, score=score.score, evidence=score.evidence,
                       model=score.model, prompt_version=score.prompt_version, fake=score.fake,
                       unsupported_evidence=score.unsupported_evidence)
