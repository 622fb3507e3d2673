"""Counts in words, with the plural right: `1 test`, `2 tests`, `1 error`; what a run's problems say once."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol

from tamesu.conversation import Event
from tamesu.results.records import AssertionResult, RunSummary, TestResult


def count_of(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def not_evaluated(number: int, error: bool, skipped: bool = False, why: str | None = None) -> str:
    """The line that stands for the checks a failed conversation (or an error, or a skip: the agent awaited
    input nobody could give, `why`) kept from being graded."""
    cause = "the error above" if error else (f"the run was skipped ({why})" if why else "the run was skipped") \
        if skipped else "the conversation failed first"
    return f"{count_of(number, 'check')} not evaluated: {cause}"


def echoed_failure(error: str | None, failures: Sequence[AssertionResult]) -> AssertionResult | None:
    """The check a run's error came from (`not decided: X` where the error is `judge: X`): said once, as the
    error, where the run's problems are listed. Grading marks it (`run_error`); a result.json written before
    it did has no mark, and its check is listed under the error again."""
    return next((failure for failure in failures if failure.run_error), None) if error else None


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What a terminal acts on rather than shows: control characters (a line break and a tab aside), bidi overrides."""


def visible(text: str) -> str:
    """`text` with what a terminal would act on written out (`\\x1b[2J`): a test named, or an agent answering,
    with terminal escapes (colours, a cleared screen, a bell, a right-to-left override) is shown them."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode(), text)


def failure_said(failure: AssertionResult) -> str:
    """`contains (turn 2): expected ...`: a check scoped to one turn names it wherever it is said alone."""
    where = f" (turn {failure.on_turn})" if failure.on_turn is not None else ""
    return f"{failure.name}{where}: {failure.reason}" if failure.reason else f"{failure.name}{where}"


def run_reason(run: RunSummary) -> str | None:
    """Why one run did not pass, in a line: its error, the simulated user's spoiling, or its first failed check
    (and how many more failed, said in full where the run is shown)."""
    if run.status == "inconclusive" and run.fault_reason:
        return f"the simulated user: {run.fault_reason}"
    if run.error:
        return run.error
    if run.failures:
        more = len(run.failures) - 1
        return failure_said(run.failures[0]) + (f" (and {count_of(more, 'more check')} failed)" if more else "")
    return None


def failure_reason(result: TestResult) -> str:
    """The one line a list of tests shows for why one did not pass (JUnit's failure message, the HTML's summary,
    the Markdown table, the baseline's regressions). A verdict over repeated runs (`2 of 4 runs passed, ...`)
    also names why its first run that did not pass did not: the rate alone says nothing a reader can fix."""
    said = next(((run.run, why) for run in result.runs if run.status != "passed" and (why := run_reason(run))), None)
    if result.reason:
        # a reason that already names a run, or is that run's own (the simulated user's), is said once
        if said is None or "(run " in result.reason or result.reason in said[1]:
            return result.reason
        return f"{result.reason} (run {said[0]}: {said[1]})"
    return said[1] if said else result.skip_reason or ""


class Faulted(Protocol):
    """A run as far as its fault is said: a run folder's `RunSummary`, or a run read back from the store."""

    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def fault_reason(self) -> str | None: ...


def fault_said_below(run: Faulted, failures: Sequence[AssertionResult]) -> str | None:
    """The reason to write beside a run's `fault`, or None when it is the run's error or its failed checks (an
    agent's `fault_reason` is them joined: engine/fault.py), which are written below it one by one."""
    said = [failure_said(f) for f in failures]
    bare = [f"{f.name}: {f.reason}" if f.reason else f.name for f in failures]  # as runs before the turn was named
    below = {run.error, *said, *bare, "; ".join(said), "; ".join(bare), *(f.reason for f in failures)}
    why = run.fault_reason or run.status
    return None if why in below else why


def failed_turns(events: Sequence[Event]) -> dict[int, str]:
    """Why each turn that failed did (its `turn_failed` event): shown on the turn itself, where a transcript
    otherwise showed an empty answer (a timeout, an HTTP 500) as if the agent had said nothing."""
    return {int(e.data["turn"]): str(e.data.get("reason", "")) for e in events
            if e.name == "turn_failed" and isinstance(e.data.get("turn"), int)}


def evidence_to_show(reason: str, evidence: Sequence[str], unsupported: Sequence[str] = ()) -> list[str]:
    """The evidence a failure's line shows beneath its reason: not an item the reason quotes already (`turn 1
    said: "…arriving Friday."` over `evidence: …arriving Friday.`, `found "shipped"` over `evidence: "shipped"`),
    which JUnit, the HTML report and pytest said twice; an item not in the transcript is kept, it is flagged."""
    def said(item: str) -> bool:
        return bool(item.strip()) and (item in reason or json.dumps(item, ensure_ascii=False) in reason)

    return [item for item in evidence if item in unsupported or not said(item)]
