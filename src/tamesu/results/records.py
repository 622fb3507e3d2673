"""What a run records on disk: the typed, versioned shapes of result.json, transcript.json and results.jsonl."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    model_serializer,
    model_validator,
)

from tamesu.conversation import AgentTurn, Event, ToolCall, UserTurn
from tamesu.errors import EXIT_BUDGET, EXIT_CONFIG, EXIT_FAILED, EXIT_INFRA, EXIT_OK
from tamesu.models.ledger import dollars
from tamesu.models.structured import Attempt
from tamesu.results._refs import NO_MARKERS, expand_agent, has_no_markers, shrink_agent
from tamesu.results.stats import RepeatStats

SCHEMA_VERSION = 1

RunStatus = Literal["passed", "failed", "error", "skipped", "inconclusive"]
"""`inconclusive`: the run failed, and the audit found the simulated user at fault: it says nothing of the agent."""
TestStatus = Literal["passed", "failed", "error", "skipped", "quarantined", "inconclusive"]
Fault = Literal["agent", "simulated_user", "environment", "suite"]
"""Whose fault a run that did not pass is: the agent's, tamesu's own simulated user's, the infrastructure's, or
the suite's (what it asks cannot be done, found only at run time: `errors.SuiteProblem`)."""
EndReason = Literal[
    "script_done", "max_turns", "agent_ended", "handoff", "stop_when", "goal_achieved", "simulator_stopped",
    "turn_failed", "error", "timeout", "not_started", "steps_done",
    # JSONL tests: the agent no longer awaits input; no input for an agent that does; every checkpoint reached
    "agent_done", "missing_input", "checkpoints_reached",
]

FAILED_ENDS: tuple[EndReason, ...] = ("turn_failed", "timeout")
"""End reasons of a conversation that failed by itself: the checks that needed the rest of it are not graded
(docs/faults.md, "Root cause first")."""


def without_zero_not_evaluated(data: Any) -> Any:
    """A run's serialised form without `not_evaluated` when it is 0: every check was graded, as in every run
    before the field existed, so those records stay as they were written."""
    if isinstance(data, dict) and data.get("not_evaluated") == 0:
        del data["not_evaluated"]
    return data


def _unset(value: bool) -> bool:
    """A flag left out of the file when false: the assertions it does not concern stay as they were written."""
    return not value


class AssertionResult(BaseModel):
    name: str
    """`contains`, `defaults/contains`, `slo/turn_latency_ms_p95`..."""
    passed: bool
    reason: str = ""
    score: float | None = None
    evidence: list[str] = Field(default_factory=list)
    on_turn: int | str | None = None
    model: str | None = None
    prompt_version: str | None = None
    fake: bool = False
    attempts: list[Attempt] = Field(default_factory=list)
    """A model-made verdict: each answer read for it, `accepted`, `repaired` (how) or `rejected` (why; the
    judge was asked again). Empty for deterministic checks."""
    unsupported_evidence: list[str] = Field(default_factory=list)
    """Quotes of the judge's evidence that are not in the transcript, tool calls or context it was shown."""
    run_error: bool = Field(False, exclude_if=_unset)
    """The check whose not being decided is the run's `error` (engine.grading: the first the environment, a
    plug-in or tamesu kept from a verdict, else the first the suite did): reports say its line once, as the
    error. Written only when true."""


def _unsaid(value: object) -> bool:
    """A key left out of the file when None: the turns and lines of every answered turn stay as they were."""
    return value is None


class TurnRecord(BaseModel):
    index: int
    user: UserTurn | None
    agent: AgentTurn
    cut: str | None = Field(None, exclude_if=_unsaid)
    """The turn the test's timeout cut short while the agent answered it (why, as the run's failure says): sent,
    never answered, its agent side empty but for when it was sent and cut and the trace id it was sent with; no
    check grades it, no metric counts it (the run's exchanges hold the answered turns only)."""

    # a large answer is written once: response and raw refer to the text or to each other (tamesu.results._refs)
    @model_serializer(mode="wrap")
    def _written_once(self, handler: SerializerFunctionWrapHandler) -> object:
        data = handler(self)
        if isinstance(data, dict) and isinstance(data.get("agent"), dict):
            data["agent"] = shrink_agent(data["agent"])
        return data

    @model_validator(mode="before")
    @classmethod
    def _read_back(cls, data: object, info: ValidationInfo) -> object:
        # NO_MARKERS: the reader saw no `$` in the file, so no marker to resolve (a walk of every answer, else)
        if isinstance(data, dict) and "agent" in data and not (info.context and info.context.get(NO_MARKERS)):
            return {**data, "agent": expand_agent(data["agent"])}
        return data


class TranscriptLine(BaseModel):
    role: Literal["user", "agent"]
    text: str
    turn: int
    at_ms: float
    from_ms: float | None = None
    """Audio targets: when this side's speech started and ended on the timeline of `audio.wav`."""
    to_ms: float | None = None
    heard: str | None = None
    """Audio targets: a user line's text as the agent transcribed it; an agent line's as tamesu heard it."""
    heard_cut: bool = Field(False, exclude_if=_unset)
    """An agent line's `heard` stopped at Whisper's token bound (a phrase looped on, what followed missing:
    `TurnAudio.agent_said_cut`). Written only when true."""
    cut: str | None = Field(None, exclude_if=_unsaid)
    """A user line the test's timeout cut short while the agent answered it (why): no agent line follows."""


class Transcript(BaseModel):
    schema_version: int = SCHEMA_VERSION
    test: str
    run: int
    lines: list[TranscriptLine] = Field(default_factory=list)


class RunResult(BaseModel):
    """result.json: everything one run of one test did and how it was graded."""

    schema_version: int = SCHEMA_VERSION
    suite: str
    test: str
    run: int
    attempt: int = 1
    status: RunStatus
    error: str | None = None
    fault: Fault | None = None
    """Set on every run that did not pass (or skip), with `fault_reason`."""
    fault_reason: str | None = None
    rerun: int = 0
    """Which new-seed run of an inconclusive one this is (0: the first)."""
    skip_reason: str | None = None
    """Why a run that started counts as skipped (the agent awaited input nobody could give)."""
    end_reason: EndReason = "not_started"
    started_at: str
    duration_ms: float = 0.0
    target: str
    target_type: str
    vars: dict[str, Any] = Field(default_factory=dict)
    turns: list[TurnRecord] = Field(default_factory=list)
    assertions: list[AssertionResult] = Field(default_factory=list)
    not_evaluated: int = 0
    """Checks (assertions and SLOs) not graded because the conversation itself failed or the run was an error:
    they would have failed for lack of what never happened (docs/faults.md, "Root cause first"). Not written
    when 0."""
    metrics: dict[str, float] = Field(default_factory=dict)
    captured: dict[str, Any] = Field(default_factory=dict)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    """What the run warned of (its traces that never came, its agent that sent no span, an after_each hook that
    failed), as the console and run.json say it. Not written when empty."""

    @model_serializer(mode="wrap")
    def _counted(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = without_zero_not_evaluated(handler(self))
        if isinstance(data, dict) and data.get("warnings") == []:
            del data["warnings"]  # a run that warned of nothing is written as every run before the field was
        return data

    @property
    def failed_assertions(self) -> list[AssertionResult]:
        return [a for a in self.assertions if not a.passed]


def run_result_from_json(text: str) -> RunResult:
    """A result.json read back; a text without `$` is read without looking for markers in its turns (it holds
    none: `_refs.has_no_markers`). Raises what `model_validate_json` raises."""
    return RunResult.model_validate_json(text, context={NO_MARKERS: True} if has_no_markers(text) else None)


class RunSummary(BaseModel):
    run: int
    status: RunStatus
    dir: str
    attempts: int = 1
    reruns: int = 0
    """How often the run was made again with a new seed because the simulated user spoiled it."""
    error: str | None = None
    fault: Fault | None = None
    fault_reason: str | None = None
    failures: list[AssertionResult] = Field(default_factory=list)
    not_evaluated: int = 0
    """As RunResult.not_evaluated: the checks the root cause (`error`, or the `conversation` failure) kept from
    being graded. Not written when 0."""
    metrics: dict[str, float] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _counted(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_zero_not_evaluated(handler(self))


class TestResult(BaseModel):
    """One line of results.jsonl, written as soon as every run of the test has finished."""

    schema_version: int = SCHEMA_VERSION
    suite: str
    test: str
    id: str
    case: str | None = None
    tags: list[str] = Field(default_factory=list)
    target: str
    status: TestStatus
    passed_runs: int = 0
    total_runs: int = 0
    pass_threshold: float = 1.0
    quarantine: str | None = None
    skip_reason: str | None = None
    reason: str | None = None
    """Why a test failed as a whole rather than by one run: an undecided adaptive verdict, or the simulated
    user's fault in a test still inconclusive."""
    stats: RepeatStats | None = None
    """The statistics of its runs, for a test that ran more than once."""
    inconclusive_runs: int = 0
    """Runs the simulated user spoiled (after their reruns): counted neither way, so said wherever the passes are."""
    error_runs: int = 0
    """Runs the environment broke (after their retries): counted neither way too."""
    duration_ms: float = 0.0
    runs: list[RunSummary] = Field(default_factory=list)

    __test__ = False

    def runs_said(self) -> str:
        """`1/4 runs passed, 3 inconclusive, 1 error`: how the runs went, with those that said nothing of the agent."""
        said = f"{self.passed_runs}/{self.total_runs} runs passed"
        said += f", {self.inconclusive_runs} inconclusive" if self.inconclusive_runs else ""
        return said + (f", {self.error_runs} error{'' if self.error_runs == 1 else 's'}" if self.error_runs else "")

    @property
    def suites_error(self) -> bool:
        """An error of the suite's alone: every run that errored did so for what the suite asks (`fault: suite`)."""
        errors = [run for run in self.runs if run.status == "error"]
        return bool(errors) and all(run.fault == "suite" for run in errors)

    @property
    def underlying(self) -> str:
        """What the test did when quarantine is set aside: passed, failed or error."""
        if self.status != "quarantined":
            return self.status
        # a test a failing before_all hook kept from starting counts no run, its one summary the hook's error
        if any(r.status == "error" for r in self.runs) and self.passed_runs < max(self.total_runs, len(self.runs)):
            return "error"
        return "failed"


class ModelSpend(BaseModel):
    """What tamesu's own model calls (simulators, judges, extractors, the model target) took in one invocation."""

    calls: int = 0
    """Calls a provider answered (each one spent something); the fake provider's count, at $0."""
    cached_calls: int = 0
    """Calls answered from the replay cache (free)."""
    fake_calls: int = 0
    """Of `calls`, those the fake provider answered by its rules."""
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    retries: int = 0
    timeouts: int = 0

    def said(self) -> str:
        """The console's line: `models: 40 calls (8 from the replay cache), 51,200 tokens, $0.0124`."""
        calls = f"{self.calls} call{'' if self.calls == 1 else 's'}" if self.calls else "no call made"
        notes = [f"{'all' if self.fake_calls == self.calls else self.fake_calls} answered by the fake provider"
                 ] if self.fake_calls else []
        notes += [f"{self.cached_calls} answered from the replay cache"] if self.cached_calls else []
        calls += f" ({'; '.join(notes)})" if notes else ""
        extras = [f"{self.retries} retried"] if self.retries else []
        extras += [f"{self.timeouts} timed out"] if self.timeouts else []
        tokens = self.input_tokens + self.output_tokens
        return ", ".join([f"models: {calls}", f"{tokens:,} tokens", f"${dollars(self.usd)}", *extras])

    def __add__(self, other: ModelSpend) -> ModelSpend:
        return ModelSpend(**{name: getattr(self, name) + getattr(other, name) for name in ModelSpend.model_fields})


class RunSummaryFile(BaseModel):
    """run.json: the whole invocation, written at the end."""

    schema_version: int = SCHEMA_VERSION
    tamesu_version: str
    started_at: str
    finished_at: str
    duration_ms: float
    exit_code: int
    counts: dict[str, int]
    interrupted: str | None = None
    stopped: str | None = None
    """Why runs stopped starting before the end: fail-fast, the budget."""
    warnings: list[str] = Field(default_factory=list)
    runs: dict[str, int] = Field(default_factory=dict)
    """The tests' runs by status (`passed`, `failed`, `error`, `inconclusive`, `skipped`): a test that passed can
    hold runs that errored, which `counts` (of tests) does not show."""
    models: ModelSpend | None = None
    """The run's model calls, tokens and dollars in all (each run's own are its `llm_*` metrics); None: no call."""
    parallel: int | None = None
    """How many runs could go at once (`--parallel`, else tamesu.yaml's `parallel`, else 1): timings of two runs
    compare only beside it. None: a run killed before it wrote run.json, or shards merged that ran differently."""


def exit_code_for(results: list[TestResult], budget_exceeded: bool = False) -> int:
    if budget_exceeded:
        return EXIT_BUDGET
    statuses = {r.status for r in results}
    if "error" in statuses:
        # the suite's errors alone (a golden file not written yet): 2, as `validate`'s problems; the
        # infrastructure's among them: 3
        return EXIT_CONFIG if all(r.suites_error for r in results if r.status == "error") else EXIT_INFRA
    if "failed" in statuses or "inconclusive" in statuses:
        return EXIT_FAILED
    return EXIT_OK


def count_runs(results: list[TestResult]) -> dict[str, int]:
    """Every test's runs by status (run.json's `runs`)."""
    counts: dict[str, int] = {}
    for result in results:
        for run in result.runs:
            if run.run:  # run 0 stands for a test that never started
                counts[run.status] = counts.get(run.status, 0) + 1
    return counts


def count(results: list[TestResult]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "error": 0, "quarantined": 0, "skipped": 0}
    for r in results:
        # `inconclusive` only when a test is: the counts of runs without a simulated user keep their shape
        counts[r.status] = counts.get(r.status, 0) + 1
    counts["total"] = len(results)
    return counts
