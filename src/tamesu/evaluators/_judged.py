"""The built-in evaluators, each a versioned prompt on the judge model answered in structured output.

The judge sees structured inputs only (the transcript as lines, the reference text); its answer is `{score, reason,
evidence}`, read as strictly as a verdict: prose around it, a coerced or out-of-range score, an unknown or duplicate
key make the judge ask again, and a repaired or re-asked answer says so in the reason. The request's context names
the evaluator (`mode: evaluator`, `evaluator: NAME`), so the replay cache keeps its answers apart from verdicts and
the fake provider's judge rules can answer it (`check: evaluator`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from tamesu.evaluators.base import Sample, Score
from tamesu.models.base import Message, ModelError, ModelRequest
from tamesu.models.said import one_line
from tamesu.models.structured import StructuredOutputError, ask_structured
from tamesu.plugins import register
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.evidence import check_evidence, said_quotes
from tamesu.roles.failures import infra_error, not_taken
from tamesu.roles.transcript import as_text

ATTEMPTS = 3


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    score: float = Field(ge=0, le=1)
    reason: str
    evidence: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class JudgedEvaluator:
    name: str
    needs_context: bool
    default_min: float | None = None
    default_max: float | None = None
    silent_score: float = 0.0
    """The score when the agent said nothing: nothing to judge, so no model is asked."""

    async def __call__(self, sample: Sample) -> Score:
        if not sample.answer.strip():
            return Score(score=self.silent_score, reason="the agent said nothing")
        if self.needs_context and not (sample.context or "").strip():
            return Score(score=0.0, reason="no context to check the answer against: give the assertion a "
                         "context, or let the agent call a tool that returns one")
        prompt = _prompts.load(self.name, package="tamesu.evaluators")
        system = prompt.render("system")
        user = prompt.render("user", transcript=as_text(sample.transcript, empty="(empty)"),
                             context=sample.context or "(none)")
        request = ModelRequest(
            purpose="judge", temperature=0.0, prompt_version=prompt.version,
            messages=[Message(role="system", content=system), Message(role="user", content=user)],
            context={"mode": "evaluator", "evaluator": self.name, "transcript": sample.transcript,
                     "question": sample.question, "answer": sample.answer, "context": sample.context})
        try:
            read = await ask_structured(sample.judge(), request, _Answer, attempts=ATTEMPTS, strict=True)
        except StructuredOutputError as exc:
            raise not_taken(f"evaluator {self.name}", exc, prompt.version) from exc
        except ModelError as exc:
            raise infra_error(f"evaluator {self.name}", exc) from exc
        answer, last = read.value, read.responses[-1]
        # the prompts ask for quotes of the agent; they are looked up in all the model was shown, as a judge's are
        found = check_evidence(answer.evidence, [as_text(sample.transcript, empty=""), sample.context or ""])
        if found.none_supported and sample.evidence == "strict":
            quoted = said_quotes(found.unsupported)
            raise not_taken(f"evaluator {self.name}", StructuredOutputError(
                f"{last.provider}:{last.model} scored it {answer.score:g}, but none of its {len(found.unsupported)} "
                f"quote(s) is in what it was shown ({quoted}): its score is not taken (evidence: lenient takes "
                f"it); it said: {one_line(answer.reason, 1000)}", read.responses, read.attempts), prompt.version,
                found.unsupported)
        notes = [f"attempt {a.number} {a.outcome}: {a.reason}" for a in read.attempts if a.outcome != "accepted"]
        if found.unsupported:
            notes.append(f"{len(found.unsupported)} quote(s) not in the transcript: "
                         + said_quotes(found.unsupported))
        # the model's paragraphs on one line, short enough that the notes after them are not cut from it
        reason = one_line(answer.reason, 700) + (f" ({'; '.join(notes)})" if notes else "")
        return Score(score=answer.score, reason=reason, evidence=answer.evidence,
                     model=f"{last.provider}:{last.model}", prompt_version=prompt.version, fake=last.fake,
                     unsupported_evidence=found.unsupported)


FAITHFULNESS = register("evaluators", "faithfulness")(
    JudgedEvaluator("faithfulness", needs_context=True, default_min=0.8))
ANSWER_RELEVANCY = register("evaluators", "answer_relevancy")(
    JudgedEvaluator("answer_relevancy", needs_context=False, default_min=0.8))
MALICIOUSNESS = register("evaluators", "maliciousness")(
    JudgedEvaluator("maliciousness", needs_context=False, default_max=0.2))
