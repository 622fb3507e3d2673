"""`judge`: a model grades the conversation against a rubric, from structured input, with evidence."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from tamesu.checks._quote import quote, their_line
from tamesu.checks._unheard import unheard
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.span import NO_TRACES
from tamesu.errors import InfraError, SuiteProblem
from tamesu.models.base import ModelError
from tamesu.plugins import register
from tamesu.roles.evidence import said_quotes
from tamesu.roles.judge import Judge as JudgeRole
from tamesu.roles.judge import JudgeInput, JudgeVerdict
from tamesu.roles.transcript import lines_of
from tamesu.telemetry import genai
from tamesu.types import Strict, YamlBool, YamlFloat


class JudgeSpec(Strict):
    rubric: str = Field(min_length=1)
    model: Any = None
    """A name under `models:` or `provider:model`; default `models.judge`."""
    scale: Literal["binary", "1-5"] = "binary"
    min: YamlFloat = Field(4, ge=1, le=5)
    timings: YamlBool = False
    """Show the judge the timing and spending metrics too. They differ on every run, so each run then
    asks the model anew instead of replaying its verdict from the cache."""
    trace: YamlBool = False
    """Show the judge a summary of the agent's own spans (`traces:`): names, tools with arguments, durations,
    errors. Its evidence may quote it and is looked up in it as in the transcript."""
    evidence: Literal["strict", "lenient"] = "strict"
    """strict: a verdict none of whose quotes is in the transcript is not taken (the run is an error naming the
    judge, not a failure of the agent); lenient: it is taken, with the quotes marked unsupported."""

    @model_validator(mode="after")
    def _min_needs_scale(self) -> JudgeSpec:
        if "min" in self.model_fields_set and self.scale != "1-5":
            raise ValueError("min applies to scale: 1-5")
        return self


def to_verdict(verdict: JudgeVerdict) -> Verdict:
    label = " (fake judge)" if verdict.fake else ""
    return Verdict(passed=verdict.passed, reason=their_line(verdict.reason) + label + what_was_done(verdict),
                   score=verdict.score,
                   evidence=verdict.evidence, model=verdict.model, prompt_version=verdict.prompt_version,
                   fake=verdict.fake, attempts=verdict.attempts, unsupported_evidence=verdict.unsupported_evidence)


def what_was_done(verdict: JudgeVerdict) -> str:
    """The reason's tail when the verdict is not simply the judge's first answer, or quotes were not found."""
    notes = [f"attempt {a.number} {a.outcome}: {a.reason}" for a in verdict.attempts if a.outcome != "accepted"]
    if verdict.unsupported_evidence:
        quoted = said_quotes(verdict.unsupported_evidence)
        notes.append(f"{len(verdict.unsupported_evidence)} quote(s) not in the transcript: {quoted}")
    return f" [{'; '.join(notes)}]" if notes else ""


def judge_metrics(metrics: Mapping[str, float], timings: bool) -> dict[str, float]:
    """The metrics a judge sees: by default those that are the same whenever the conversation is (turns,
    request counts), so a recorded verdict replays."""
    return {name: value for name, value in metrics.items()
            if timings or not (name.endswith(("_ms", "_ms_p50", "_ms_p95", "_ms_max")) or name.startswith("llm_"))}


def _trace(run: RunView) -> str:
    if run.spans is None:
        # the suite's asking (as a `span` check's), not a model that failed: the run is not the environment's, and
        # `retries` would make the conversation again to the same end
        raise SuiteProblem(NO_TRACES.replace("no spans", "judge: trace: true, but no spans"))
    said = genai.summary(run.spans) or "(no spans)"
    missing = unheard(run)
    # the judge reads what came, told what did not: "no tool called" is not the agent's when its trace is lost
    return said + (f"\n({missing.words()})" if missing else "")


def judge_client(run: RunView, override: object) -> Any:
    if run.models is None:
        raise ModelError("no model for the judge: set models.judge in tamesu.yaml or the suite")
    return run.models.client("judge", override)


RUBRIC_NAMED = 60
"""Characters of a rubric that name it in its judge's failure: its first words, enough to tell two judges apart."""


def rubric_named(rubric: str) -> str:
    """`rubric "The agent apologises for the delay…"`: what a failed judge's reason starts with. Two judges of one
    test both fail as `judge` (that name keys baselines and the store's history, so it stays), and their reasons,
    the model's own words, named neither rubric: the failures could not be told apart."""
    return f"rubric {quote(rubric, RUBRIC_NAMED)}"


@register("checks", "judge")
class Judge(Check[JudgeSpec]):
    key = "judge"
    Spec = JudgeSpec
    shorthand = "rubric"
    names_rubric = True
    """Whether a failed verdict's reason names the rubric: not where the assertion's own label quotes it already
    (a JSONL `agent` assertion, `agent "The agent asks..."`)."""

    async def evaluate(self, run: RunView) -> Verdict:
        spec: JudgeSpec = self.spec
        given = JudgeInput(
            rubric=run.context.render_text(spec.rubric),
            transcript=lines_of(run.exchanges),
            tool_calls=[call.model_dump(mode="json") for call in run.tool_calls],
            metrics=judge_metrics(run.metrics, spec.timings),
            scale=spec.scale,
            min=spec.min,
            evidence=spec.evidence,
            trace=_trace(run) if spec.trace else None,
        )
        # the rubric as written (a template not filled in): a secret it fills in is never quoted
        named = rubric_named(spec.rubric)
        try:
            verdict = await JudgeRole(judge_client(run, spec.model)).grade(given)
        except (InfraError, ModelError) as exc:
            # undecided: which judge's model did not answer (the fake provider's own line names the rubric)
            if self.names_rubric and "rubric " not in str(exc):
                exc.args = (f"{exc}; its {named.replace(' ', ': ', 1)}",)
            raise
        graded = to_verdict(verdict)
        if not graded.passed and self.names_rubric:
            graded.reason = f"{named}: {graded.reason}"
        return graded


def criteria_rubric(metadata: Mapping[str, object]) -> str:
    """A validator's metadata as a judge's rubric: the criteria first, then every other entry as `key: value`."""
    lines = [str(metadata.get("criteria", ""))]
    # a list or mapping (the design's `conversation: messages`) as JSON, not as Python writes it
    lines += [f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)}"
              for key, value in metadata.items() if key not in ("criteria", "test_mode")]
    return "\n".join(line for line in lines if line)
