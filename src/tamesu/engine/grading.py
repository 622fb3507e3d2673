"""Grading a run's assertions, and which of them a failed conversation leaves ungraded.

When the conversation itself failed (a turn failed: the agent answered with an error, the transport failed, the
session never connected; or the test's timeout ended it), the failure is the run's root cause. The checks that
need what never happened would only fail for lack of it: they are not evaluated, only counted
(`not_evaluated`), so a report shows one cause instead of a list of its consequences. An assertion scoped to a
turn that completed before the failure (`on_turn: N`) has what it needs and is still graded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tamesu.checks import Assertion, parse_assertion
from tamesu.checks.base import RunView
from tamesu.conversation import Event, Exchange
from tamesu.errors import BudgetExceeded, InfraError, SuiteProblem, TemplateError
from tamesu.models.base import ModelError
from tamesu.models.structured import Attempt
from tamesu.plan import PlannedTest
from tamesu.results.records import FAILED_ENDS, AssertionResult
from tamesu.roles.failures import VerdictNotTaken


def completed_turns(end_reason: str, exchanges: Sequence[Exchange], events: Sequence[Event]) -> int | None:
    """How many turns completed before the conversation failed; None when it did not fail (FAILED_ENDS)."""
    if end_reason not in FAILED_ENDS:
        return None
    if end_reason == "timeout":
        return len(exchanges)  # the turn in flight was never added
    failed = next((e.data.get("turn") for e in reversed(events) if e.name == "turn_failed"), None)
    if isinstance(failed, int):
        return min(failed - 1, len(exchanges))
    return 0  # it never connected: no turn happened


_UNSET_CAPTURE = re.compile(r"\{\{captured\.([^}.]+)\}\} has no value")


def with_capture_notes(reason: str, events: Sequence[Event]) -> str:
    """An assertion that could not check for want of a capture no agent turn had says what the capture looked for
    (its `capture_not_found` note): whether the agent never said it or the capture looks for the wrong thing is
    then the reader's to see, on the failure's line."""
    notes = {e.data.get("name"): e.data.get("note") for e in events if e.name == "capture_not_found"}
    wanted = [notes[name] for name in dict.fromkeys(_UNSET_CAPTURE.findall(reason)) if notes.get(name)]
    return f"{reason} ({'; '.join(map(str, wanted))})" if wanted else reason


def unasked(attempts: list[Attempt]) -> list[Attempt]:
    """The attempts of a model that gave up, less a last rejected answer: nothing was asked again after it, so
    it is no re-ask (the error says why it was not taken, the assertion's `attempts` keep it)."""
    return attempts[:-1] if attempts and attempts[-1].outcome == "rejected" else attempts


def planned_checks(test: PlannedTest) -> int:
    """The checks a run of `test` grades when its conversation completes: its assertions and its SLOs."""
    return len(test.assertions) + len(test.slo)


def slo_assertions(slo: dict[str, float]) -> list[Assertion]:
    return [
        parse_assertion({"metric": {"name": name, "lte": limit, "missing": "pass"}, "name": name}, prefix="slo/")
        for name, limit in slo.items()
    ]


async def grade(
    test: PlannedTest, view: RunView, reached: int | None = None,
    unexpected: Callable[[Exception], str] | None = None,
    record: Callable[..., object] | None = None,
) -> tuple[list[AssertionResult], str | None, bool]:
    """Every assertion's verdict, the first failure that kept one from being decided (a model that could not
    answer, or an unexpected exception: `unexpected` records it and gives its line; the other assertions are
    still graded), and whether that failure is the suite's (a SuiteProblem, and no failure of anything else:
    the environment's wins, as exit 3 wins over 2).

    With `reached`, only the assertions scoped to one of the first `reached` turns are graded. `record`
    (`session.event`) receives a `verdict_repaired` or `verdict_reasked` event for each answer of a model
    that was not taken as it came and, for a re-ask, was asked again."""
    graded: list[AssertionResult] = []
    error: str | None = None
    suites: str | None = None
    sources: dict[str, AssertionResult] = {}
    """The undecided check each of `error` and `suites` is the line of."""

    def attempted(label: str, attempts: list[Attempt], gave_up: bool = False) -> None:
        for attempt in unasked(attempts) if gave_up else attempts:
            if record is not None and attempt.outcome != "accepted":
                name = "verdict_repaired" if attempt.outcome == "repaired" else "verdict_reasked"
                record(name, assertion=label, attempt=attempt.number, reason=attempt.reason)

    for assertion in [*test.assertions, *slo_assertions(test.slo)]:
        if reached is not None and not (isinstance(assertion.on_turn, int) and assertion.on_turn <= reached):
            continue
        past = test.past_the_script(assertion) or test.unfit(assertion)
        if past is not None:
            # a turn the script never makes, or what the target never gives: the suite's asking, not the agent's
            # failure (an error, as a missing golden file is)
            suites = suites or f"{assertion.label}: {past}"
            # every report shows the result beside its turn (`contains (turn 5)`): its reason does not again
            said = test.past_the_script(assertion, turn_beside=True) or past
            graded.append(AssertionResult(name=assertion.label, passed=False, on_turn=assertion.on_turn,
                                          reason=f"not decided: {said}"))
            sources.setdefault("suites", graded[-1])
            continue
        if isinstance(assertion.on_turn, int) and assertion.on_turn > len(view.exchanges):
            # nothing to grade, whatever the check: negated, "turn 5 did not say it" would have passed
            turns = len(view.exchanges)
            graded.append(AssertionResult(name=assertion.label, passed=False, on_turn=assertion.on_turn,
                                          reason=f"turn {assertion.on_turn} did not happen (the conversation had "
                                                 f"{turns} turn{'' if turns == 1 else 's'})"))
            continue
        try:
            verdict = await assertion.check.evaluate(view.scoped(assertion.on_turn, labelled=True))
        except TemplateError as exc:
            graded.append(AssertionResult(name=assertion.label, passed=False, reason=str(exc),
                                          on_turn=assertion.on_turn))
            continue
        except (InfraError, ModelError) as exc:
            said = str(exc)  # a role's error names it already (`judge: no verdict ...`): not "judge: judge:",
            # nor, named by its place, "assert[1]/judge: judge:"
            own = next((f"{name}:" for name in (assertion.label, assertion.key) if said.startswith(f"{name}:")), "")
            reason = f"{assertion.label}:{said.removeprefix(own)}" if own else f"{assertion.label}: {said}"
            whose = "suites" if isinstance(exc, SuiteProblem) else "error"
            if whose == "suites":
                suites = suites or reason
            else:
                error = error or reason
            # a verdict not taken keeps who answered, with which prompt, and each answer read
            kept = exc if isinstance(exc, VerdictNotTaken) else None
            tried = kept.attempts if kept is not None else getattr(exc.__cause__, "attempts", None) or []
            attempted(assertion.label, tried, gave_up=True)
            graded.append(AssertionResult(name=assertion.label, passed=False, reason=f"not decided: {exc}",
                                          on_turn=assertion.on_turn, attempts=tried,
                                          model=kept.model if kept else None,
                                          prompt_version=kept.prompt_version if kept else None,
                                          fake=kept.fake if kept else False,
                                          unsupported_evidence=kept.unsupported if kept else []))
            sources.setdefault(whose, graded[-1])
            continue
        except BudgetExceeded:
            raise
        except Exception as exc:  # a bug of ours or a check's: this test's error, never the whole run's
            line = unexpected(exc) if unexpected is not None else f"internal error: {type(exc).__name__}: {exc}"
            error = error or f"{assertion.label}: {line}"
            graded.append(AssertionResult(name=assertion.label, passed=False, reason=f"not decided: {line}",
                                          on_turn=assertion.on_turn))
            sources.setdefault("error", graded[-1])
            continue
        attempted(assertion.label, verdict.attempts)
        reason = with_capture_notes(verdict.reason, view.events) if verdict.undecided else verdict.reason
        if assertion.label.startswith("slo/"):  # the label names the metric already: "slo/X: X: expected" said it twice
            reason = reason.removeprefix(f"{assertion.label[4:]}: ")
        graded.append(AssertionResult(name=assertion.label, passed=verdict.passed, reason=reason,
                                      score=verdict.score, evidence=verdict.evidence,
                                      on_turn=assertion.on_turn, model=verdict.model,
                                      prompt_version=verdict.prompt_version, fake=verdict.fake,
                                      attempts=verdict.attempts,
                                      unsupported_evidence=verdict.unsupported_evidence))
    # the check whose line the run's error is says so (`run_error`): reports say that line once, as the error,
    # knowing it rather than guessing it from the words
    if (source := sources.get("error" if error else "suites")) is not None:
        source.run_error = True
    return graded, error or suites, error is None and suites is not None


