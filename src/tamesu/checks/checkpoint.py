"""Dynamic mode's checkpoints: which were reached, at which turn, in an order their `after` allows.

The tracker checks each new agent turn as the conversation goes (the user side asks it before every turn, so
the conversation stops as soon as every required checkpoint is reached), and once more at grading time for
the turns after the last question (the agent ended, `max_turns`). Each checkpoint is then reported by a
`CheckpointCheck`, an engine assertion like any other, so the run's status and result.json come from the
engine's grading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tamesu.checks import Assertion
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.judge import Judge
from tamesu.checks.metric import Metric
from tamesu.checks.span import SpanCheck
from tamesu.checks.tools import ToolCalled, ToolNotCalled, ToolSequence
from tamesu.conversation import Exchange
from tamesu.errors import InfraError
from tamesu.models.base import ModelError, Models
from tamesu.suite.templates import Context
from tamesu.telemetry.genai import from_spans
from tamesu.telemetry.spans import Span
from tamesu.types import Strict


class CheckpointSpec(Protocol):
    """A checkpoint as a test writes it (the JSONL schema's `Checkpoint`)."""

    @property
    def id(self) -> str: ...
    @property
    def description(self) -> str | None: ...
    @property
    def after(self) -> Sequence[str]: ...
    @property
    def required(self) -> bool: ...


@dataclass
class PlannedCheckpoint:
    spec: CheckpointSpec
    assertion: Assertion


def in_order(planned: dict[str, PlannedCheckpoint]) -> tuple[list[PlannedCheckpoint], list[PlannedCheckpoint]]:
    """The checkpoints with each after the ones it waits for (an unknown id waits for nothing), and those left
    waiting for each other in a cycle (empty when there is none)."""
    order: list[PlannedCheckpoint] = []
    placed: set[str] = set()
    pending = list(planned.values())
    while pending:
        ready = [c for c in pending if all(dep in placed or dep not in planned for dep in c.spec.after)]
        if not ready:
            return order, pending
        for checkpoint in ready:
            order.append(checkpoint)
            placed.add(checkpoint.spec.id)
            pending.remove(checkpoint)
    return order, []


@dataclass
class CheckpointState:
    planned: PlannedCheckpoint
    reached_at: int | None = None
    reason: str = ""
    """Why it counts as reached, or what the last check of it said."""
    checked_at: int | None = None
    """The turn `reason` is of: a check of one turn says "the answer", not which."""
    error: InfraError | ModelError | None = None
    """Why a check of it could not be made (not reached since): its verdict is that error, not another's."""

    @property
    def id(self) -> str:
        return self.planned.spec.id

    def last_check(self) -> str:
        """` (last check, turn 3: not found in the answer: ...)`, or nothing before any check."""
        if not self.reason:
            return ""
        return f" (last check{'' if self.checked_at is None else f', turn {self.checked_at}'}: {self.reason})"


class Tracker:
    def __init__(self, checkpoints: list[PlannedCheckpoint]) -> None:
        self.states = [CheckpointState(c) for c in checkpoints]
        self._by_id = {s.id: s for s in self.states}
        self._checked = 0
        """Agent turns already checked."""
        self._spans_of: dict[int, tuple[int, int] | None] = {}
        """How many of its spans each checked turn was checked with, and of the run's traces said never to have
        come or to have come in part (None: with no spans at all, no `traces:` yet). Said only once the run's
        spans were waited for: a check that read none of a trace that never came is not decided, not failed."""

    async def catch_up(self, run: RunView, raising: bool = True) -> None:
        """Check every agent turn not checked yet. A checkpoint counts at the first turn where its
        assertion holds and everything it waits for was reached (at that turn or before). A turn checked
        before is checked again, for a checkpoint over the agent's spans not reached yet, when more of its spans
        came since (after the wait that followed it, or fetched from a backend at the run's end). A check that
        cannot be made is kept as its checkpoint's `error`, the others checked on; the first is raised when
        `raising`."""
        await self._catch_up(run)
        first = next((s.error for s in self.states if s.error is not None and s.reached_at is None), None)
        if raising and first is not None:
            raise first

    async def _catch_up(self, run: RunView) -> None:
        for exchange in run.exchanges:
            # labelled: its verdict is said as `reached at turn 2: found "x" (the answer)`, the turn once
            view = run.scoped(exchange.index, labelled=True)
            unheard = sum(1 for e in run.events if e.name in ("trace_not_found", "trace_incomplete"))
            spans = None if view.spans is None else (len(view.spans), unheard)
            earlier = exchange.index <= self._checked
            if earlier and (spans is None or spans == self._spans_of.get(exchange.index)):
                continue
            self._spans_of[exchange.index] = spans
            for state in self.states:  # in dependency order, so a chain may complete within one turn
                if state.reached_at is not None or (earlier and not reads_spans(state.planned.assertion.check)):
                    continue
                # one reached at a later turn (checked again: an earlier one) is still waited for at this turn
                waiting = [d for d in state.planned.spec.after
                           if (at := self._by_id[d].reached_at) is None or at > exchange.index]
                if waiting:
                    state.reason, state.checked_at = f"waiting for {', '.join(waiting)}", exchange.index
                    continue
                try:
                    verdict = await state.planned.assertion.check.evaluate(view)
                except (InfraError, ModelError) as exc:  # the case's error: say which checkpoint could not be told
                    if state.error is None:  # the first turn it could not be told at
                        state.reason, state.checked_at = f"not decided: {exc}", exchange.index
                        exc.args = (f"checkpoint {state.id}: {exc}", *exc.args[1:])
                        state.error = exc
                    continue
                if state.error is None:
                    state.reason, state.checked_at = verdict.reason, exchange.index
                if verdict.passed:
                    state.reached_at, state.error = exchange.index, None
                    state.reason = verdict.reason
            self._checked = max(self._checked, exchange.index)

    async def after_turns(self, exchanges: list[Exchange], context: Context, base_dir: Path,
                          models: Models | None, spans: list[Span] | None = None) -> None:
        """`catch_up` on the conversation so far, as the user side sees it before its next turn; `spans`: the
        agent's spans of those turns, once they came (the engine waits for them when `reads_spans`)."""
        await self.catch_up(RunView(exchanges=list(exchanges), metrics={}, captured={}, events=[],
                                    tool_calls=[call for e in exchanges for call in e.agent.tool_calls],
                                    context=context, base_dir=base_dir, models=models, spans=spans))

    def reads_spans(self, exchanges: list[Exchange]) -> bool:
        """Whether a checkpoint not reached yet reads the agent's spans of `exchanges`: only then are they waited
        for after each turn (within `traces.wait`), as a run's are before it is graded."""
        answered = any(c.kind in ("tool", "delegation") for e in exchanges for c in e.agent.tool_calls)
        return any(state.reached_at is None and reads_spans(state.planned.assertion.check, answered)
                   for state in self.states)

    def may_yet_be_reached(self, exchanges: list[Exchange]) -> bool:
        """Whether every required checkpoint still missing reads the agent's spans of `exchanges`: spans that come
        after the conversation (fetched from a backend at its end, `traces.query`; a receiver's late ones) may
        show it reached at a turn already taken."""
        answered = any(c.kind in ("tool", "delegation") for e in exchanges for c in e.agent.tool_calls)
        missing = [s for s in self.states if s.planned.spec.required and s.reached_at is None]
        return bool(missing) and all(reads_spans(s.planned.assertion.check, answered) for s in missing)

    @property
    def done(self) -> bool:
        return all(s.reached_at is not None for s in self.states if s.planned.spec.required)

    def missing(self) -> list[str]:
        return [s.id for s in self.states if s.planned.spec.required and s.reached_at is None]

    def state(self, checkpoint_id: str) -> CheckpointState:
        return self._by_id[checkpoint_id]


def reads_spans(check: Check[Any], answered: bool = False) -> bool:
    """Whether `check` reads the agent's spans: a `span` check, a span metric, a judge shown the trace, and the
    tool checks unless the target's answers carried tool calls (`answered`: the calls are then those)."""
    inner: Check[Any] = getattr(check, "inner", check)  # `negate: true` wraps it
    if answered and isinstance(inner, ToolCalled | ToolNotCalled | ToolSequence):
        return False
    if isinstance(inner, Metric):
        return from_spans(inner.spec.name)
    if isinstance(inner, Judge):
        return inner.spec.trace
    return isinstance(inner, SpanCheck | ToolCalled | ToolNotCalled | ToolSequence)


class CheckpointCheck(Check[Strict]):
    """Reports one checkpoint: passed when reached, or when optional (`required: false`).

    The check belongs to the planned test, shared by its repeats; each run has its own tracker, which
    `tracker_of` finds from the run being graded."""

    key = "checkpoint"
    Spec = Strict  # no options: built from a tracker, never from what a user writes

    def __init__(self, tracker_of: Callable[[RunView], Tracker], checkpoint_id: str) -> None:
        super().__init__(Strict())
        self.tracker_of = tracker_of
        self.checkpoint_id = checkpoint_id

    async def evaluate(self, run: RunView) -> Verdict:
        tracker = self.tracker_of(run)
        await tracker.catch_up(run, raising=False)  # another checkpoint's undecided check is not this one's verdict
        state = tracker.state(self.checkpoint_id)
        if state.reached_at is not None:
            return Verdict(passed=True, reason=f"reached at turn {state.reached_at}: {state.reason}")
        if state.error is not None:
            raise state.error
        turns = len(run.exchanges)
        detail = state.last_check()
        if not state.planned.spec.required:
            return Verdict(passed=True, reason=f"optional, not reached in {turns} turn(s){detail}")
        return Verdict(passed=False, reason=f"not reached in {turns} turn(s){detail}")
