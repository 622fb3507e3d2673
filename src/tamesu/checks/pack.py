"""`pack`: a named set of assertions, graded together (see `tamesu.packs` for the built-in ones).

`pack: NAME`, or `{name, judges, model}`: `judges: false` leaves the pack's model-graded assertions out (an
offline run with no judge model keeps the deterministic ones); `model` is the judge model of its judges.
The pack passes when every assertion in it passes; the reason names each that failed, with its own reason,
and the score is the fraction that passed. A part that cannot be decided (a judge that cannot answer) is an
infrastructure error, as for that assertion written alone, whose line names that part, the others not decided
either and the pack's parts that failed. The loader writes a suite's own
pack into the entry (`description` and `assert`, see `tamesu.packs.inline`), which is also how an inline pack
is written.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from tamesu.checks import Assertion, AssertionProblem, parse_assertion
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import InfraError, TemplateError
from tamesu.models.base import ModelError
from tamesu.packs import JUDGED_KEYS, PackSpec, resolve
from tamesu.plugins import register
from tamesu.types import Strict, YamlBool


class PackRef(Strict):
    name: str = Field(min_length=1)
    judges: YamlBool = True
    """False: leave out the pack's assertions that ask a model."""
    model: Any = None
    """The model of the pack's judges (a name under `models:` or `provider:model`); default models.judge."""
    description: str | None = None
    assert_: list[dict[str, Any]] | None = Field(None, alias="assert")
    """An inline pack (the loader writes a suite's own pack here); default the built-in pack `name`."""

    _assertions: list[Assertion] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _parsed(self) -> PackRef:
        if self.assert_ is None:
            pack = resolve(self.name)
        else:
            pack = PackSpec.model_validate({"description": self.description or self.name, "assert": self.assert_})
        self._assertions = parse_pack(self.name, pack, judges=self.judges, model=self.model)
        if not self._assertions:
            raise ValueError(f"pack {self.name!r} has only judges, and judges: false leaves nothing to check")
        return self

    @property
    def assertions(self) -> list[Assertion]:
        return list(self._assertions)


def parse_pack(name: str, pack: PackSpec, *, judges: bool = True, model: Any = None) -> list[Assertion]:
    """The pack's assertions, parsed; a problem names the pack and the assertion (ValueError)."""
    parsed: list[Assertion] = []
    for index, entry in enumerate(pack.assert_):
        kind = next((key for key in entry if key not in ("name", "on_turn")), None)
        if kind in JUDGED_KEYS:
            if not judges:
                continue
            entry = _with_model(entry, kind, model)
        try:
            parsed.append(parse_assertion(entry))
        except AssertionProblem as exc:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.loc)
            raise ValueError(f"pack {name!r}, assert[{index}]{where}: {exc.message}") from None
    return parsed


def _with_model(entry: dict[str, Any], kind: str, model: Any) -> dict[str, object]:
    """The judge entry with the pack's `model` when it names none itself."""
    if model is None:
        return entry
    options = entry[kind]
    if isinstance(options, dict):
        return entry if options.get("model") is not None else {**entry, kind: {**options, "model": model}}
    shorthand = "rubric" if kind == "judge" else "context"
    return {**entry, kind: {shorthand: options, "model": model}}


@register("checks", "pack")
class Pack(Check[PackRef]):
    key = "pack"
    Spec = PackRef
    shorthand = "name"
    spec: PackRef

    async def evaluate(self, run: RunView) -> Verdict:
        graded: list[tuple[str, Verdict]] = []
        undecided: InfraError | ModelError | None = None
        unsettled: list[str] = []
        for assertion in self.spec.assertions:
            label = _label(assertion, run)
            view = _part_view(run, assertion.on_turn)
            try:
                verdict = Verdict(passed=False, undecided=True, reason=f"turn {assertion.on_turn} is not the "
                                  "pack's turn") if view is None else await assertion.check.evaluate(view)
            except TemplateError as exc:
                verdict = Verdict(passed=False, reason=str(exc))
            except (InfraError, ModelError) as exc:
                # the pack's other parts are still graded: a judge that could not answer hid what they found
                unsettled.append(label)
                if undecided is None:
                    # which of the pack's parts it was ("pack X: GET URL: could not reach it" named none)
                    said = str(exc)  # a role's error may name it already (`judge: no verdict ...`)
                    if not said.startswith(f"{assertion.label}:"):
                        exc.args = (f"{label}: {said}",)
                    undecided = exc
                continue
            graded.append((label, verdict))
        failed = [(label, verdict) for label, verdict in graded if not verdict.passed]
        total = len(self.spec.assertions)
        if failed:
            details = "; ".join(f"{label}: {verdict.reason}" for label, verdict in failed)
            # the assertion's own label names the pack (`pack prompt_injection`): its reason does not again
            reason = f"{len(failed)} of {total} failed: {details}"
        else:
            reason = f"all {total} passed"
        if undecided is not None:
            # undecided as a judge written alone is, saying what the rest found (the error keeps its attempts)
            if len(unsettled) > 1:
                undecided.args = (f"{undecided}; not decided either: {', '.join(unsettled[1:])}",)
            if failed:
                undecided.args = (f"{undecided}; and {reason}",)
            raise undecided
        judged = next((verdict for _, verdict in graded if verdict.model or verdict.prompt_version), None)
        # what was done to its judges' answers stays visible on the pack (and becomes the run's events)
        reworked = [attempt.model_copy(update={"reason": f"{label}: {attempt.reason}"})
                    for label, verdict in graded for attempt in verdict.attempts if attempt.outcome != "accepted"]
        return Verdict(
            passed=not failed, reason=reason, score=round((total - len(failed)) / total, 4),
            evidence=[f"{label}: {item}" for label, verdict in failed for item in verdict.evidence],
            model=judged.model if judged else None, prompt_version=judged.prompt_version if judged else None,
            fake=any(verdict.fake for _, verdict in graded), attempts=reworked,
            unsupported_evidence=[f"{label}: {item}" for label, verdict in graded
                                  for item in verdict.unsupported_evidence],
        )


def _label(assertion: Assertion, run: RunView) -> str:
    """A part as the pack's reason names it: with its turn when it has one of its own (`not_contains (turn 2):
    ...; the answer said ...`), as grading labels an assertion written alone; not again within a pack on one
    turn, whose label names it (`pack X (turn 2): 1 of 2 failed: not_contains: ...`)."""
    if not isinstance(assertion.on_turn, int) or run.turn_labelled:
        return assertion.label
    return f"{assertion.label} (turn {assertion.on_turn})"


def _part_view(run: RunView, on_turn: int | str | None) -> RunView | None:
    """The run as a part reads it: its own turn, labelled beside it (`_label`). Within a pack that is itself on one
    turn, that turn (`on_turn: last` is it); None for a part on another turn, which the pack's view has not."""
    if not run.turn_labelled:
        return run.scoped(on_turn, labelled=True)
    if on_turn is None or on_turn == "last" or any(e.index == on_turn for e in run.exchanges):
        return run
    return None
