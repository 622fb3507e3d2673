"""The JSONL output of `tamesu test` (`-o`, a report of JSONL test cases): one record per test case, in the
design's shapes, written by `CaseReporter` as each case finishes.

- standard: `id, name, status, messages_count, response, assertions, duration_ms` (the later revision);
- multi_turn: `turns[]` (`turn, input, input_source, output, tool_calls, awaiting_input, awaiting_reason,
  assertions, duration_ms`), `final_assertions`, `total_turns` (the earlier revision);
- dynamic: `turns[]`, `checkpoints[]` (`id, reached_at_turn, passed`), `total_turns` (the later revision).

Each assertion is written as the test wrote it plus `passed` and `reason` (`passed: null` when it was not
graded: a skipped test's final assertions, an infrastructure error); the failed ones are also the design's
`assertion_errors` (`label: reason`) of the case or the turn. A record is built from the run's
`RunResult` (the same one result.json holds), the user side's notes and the checkpoint tracker, and the
console prints from the record, so the two always agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_serializer, model_serializer

from tamesu.checks import META_KEYS
from tamesu.matching import shown
from tamesu.report.along_the_way import AlongTheWay
from tamesu.results.records import (
    FAILED_ENDS,
    SCHEMA_VERSION,
    AssertionResult,
    RunResult,
    RunSummaryFile,
    TestResult,
)
from tamesu.results.stats import RepeatStats
from tamesu.roles.case_user import Mode

if TYPE_CHECKING:  # what a record is made of: read here, made by the JSONL loader and the user side
    from tamesu.checks.checkpoint import Tracker
    from tamesu.jsonl.parser import Graded, ParsedCase
    from tamesu.jsonl.run import PlannedCase
    from tamesu.plan import Plan, PlannedTest
    from tamesu.roles.case_user import CaseUser

Status = Literal["passed", "failed", "error", "skipped", "inconclusive"]


class AssertionRecord(BaseModel):
    """The assertion as written (its keys kept as they are), and its verdict."""

    model_config = ConfigDict(extra="allow")

    passed: bool | None
    score: float | None = None
    """A model-made verdict's score (a validator agent's, a judge's), when it gave one."""
    reason: str = ""
    suggestions: list[str] | None = None
    """A validator agent's `suggestions` (the design's validator answer), when it is one."""
    label: str = ""

    @model_serializer(mode="wrap")
    def _as_written_first(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # the keys the test wrote come first, then the verdict in the order of the design's validator answer;
        # `passed: null` (not graded) is always shown
        data = handler(self)
        verdict = {"passed": self.passed, "score": data.pop("score", None), "reason": data.pop("reason", ""),
                   "suggestions": data.pop("suggestions", None), "label": data.pop("label", "")}
        data.pop("passed", None)
        return {**data, **{key: value for key, value in verdict.items() if value is not None or key == "passed"}}


class ToolCallRecord(BaseModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: Any = None


def whole_ms(value: float) -> int:
    """A duration as the design's records write it (`"duration_ms": 1800`): whole milliseconds, which a reader
    decoding into an integer takes (12.0 and 20.555 are refused by Go's int64). result.json keeps the fraction;
    the console reads the field itself, not this."""
    return round(value)


class TurnRecord(BaseModel):
    turn: int
    input: str
    input_source: str
    """static (the test's input or turns), simulator, human (`--interactive`)."""
    output: str
    tool_calls: list[ToolCallRecord] | None = None
    awaiting_input: bool | None = None
    awaiting_reason: str | None = None
    input_hint: str | None = None
    assertions: list[AssertionRecord] | None = None
    assertion_errors: list[str] | None = None
    """The design's `assertion_errors`: each failed assertion of the turn, `label: reason`."""
    status: Status = "passed"
    error: str | None = None
    duration_ms: float

    @field_serializer("duration_ms")
    def _whole_ms(self, value: float) -> int:
        return whole_ms(value)


class CheckpointRecord(BaseModel):
    id: str
    description: str | None = None
    required: bool = True
    reached_at_turn: int | None
    passed: bool | None
    reason: str = ""


class MissingInputRecord(BaseModel):
    after_turn: int
    question: str
    hint: str | None = None
    policy: Literal["skip", "fail", "end"]
    person: str | None = None
    """`--interactive` (or `interactive.enabled`): why the person asked gave no input (`no reply within 5s`)."""


class CaseRecord(BaseModel):
    schema_version: int = SCHEMA_VERSION
    id: str
    file: str | None = None
    """`tamesu test -i FOLDER`: the JSONL file the case came from (an id is unique in its file only)."""
    name: str | None = None
    """The case's `name`, when it has one (the design's records carry the name written, never the id again)."""
    mode: Mode
    status: Status
    error: str | None = None
    skip_reason: str | None = None
    fault: str | None = None
    """A case that did not pass: `agent`, `simulated_user` (status inconclusive), `environment` or `suite`."""
    fault_reason: str | None = None
    reason: str | None = None
    """Why the runs as a whole decided it (an undecided adaptive verdict, a simulated user at fault)."""
    stats: RepeatStats | None = None
    """`--repeat` or `repeat`: the pass rate, its interval, pass@k and pass^k over every run."""
    inconclusive_runs: int | None = None
    error_runs: int | None = None
    """Repeated: runs that said nothing of the agent (the simulated user's, the environment's), when any."""
    shown_run: int | None = None
    """Repeated: the run whose details the record shows (the first that did not pass when the case did not
    pass, else run 1)."""
    simulator: str | None = None
    messages_count: int | None = None
    response: str | None = None
    tool_calls: list[ToolCallRecord] | None = None
    assertions: list[AssertionRecord] | None = None
    turns: list[TurnRecord] | None = None
    final_assertions: list[AssertionRecord] | None = None
    assertion_errors: list[str] | None = None
    """The design's `assertion_errors`: each failed assertion of a standard case, or of a case's
    `final_assertions` (a turn's are in its own record), `label: reason`."""
    checkpoints: list[CheckpointRecord] | None = None
    missing_input: MissingInputRecord | None = None
    goal_achieved: str | None = None
    """When the simulator said its goal was reached: the goal it was given (never the simulator's own reasoning,
    which stays in result.json's notes)."""
    end_reason: str | None = None
    total_turns: int | None = None
    duration_ms: float
    result: str | None = None
    """result.json of the run, relative to the run directory."""

    @field_serializer("duration_ms")
    def _whole_ms(self, value: float) -> int:
        return whole_ms(value)

    def line(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude_none=True)
        if "stats" in out:  # undecided is an answer too: said as null, not left out
            out["stats"].setdefault("decided", None)
        return out


def assertion_label(raw: Any) -> str:
    """How a JSONL assertion reads in the console, the records and result.json: `contains "submitted"`."""
    if not isinstance(raw, dict):
        return "assertion"
    kind = raw.get("type")
    if kind is None:
        key = next((k for k in raw if k not in META_KEYS), "assertion")
        negate = "not " if raw.get("negate") else ""  # a named one says it in its reason (`negated: ...`)
        return raw.get("name") or f"{negate}{key} {shown(raw.get(key), 60)}"
    negate = "not " if raw.get("negate") else ""
    if kind == "json_path":
        if "value" in raw:
            return f"{raw.get('path')} {'!=' if negate else '='} {shown(raw['value'], 60)}"
        return f"{raw.get('path')} {'is absent' if negate else 'exists'}"
    if kind == "type":
        return f"{raw.get('path')} is {negate}{raw.get('value')}"
    if kind == "agent":
        criteria = ((raw.get("options") or {}).get("metadata") or {}).get("criteria", "")
        return f"{negate}agent {shown(criteria, 60)}"
    if kind == "script":
        return f"{negate}script {raw.get('use')}"
    shown_value = raw.get("pattern") if kind == "regex" and "pattern" in raw else \
        raw.get("name") if kind == "tool_called" and "name" in raw else raw.get("value")
    return f"{negate}{kind} {shown(shown_value, 60)}"


def _verdicts(graded: list[Graded], results: list[AssertionResult], status: str,
              end_reason: str = "") -> list[AssertionRecord]:
    """Each assertion as written beside its verdict; the engine grades them in the order they were given."""
    records = []
    for position, item in enumerate(graded):
        raw = item.raw if isinstance(item.raw, dict) else {"assertion": item.raw}
        if position < len(results):
            verdict = results[position]
            # a validator agent's suggestions are its verdict's evidence (`checks.target_validator`)
            suggestions = verdict.evidence if (verdict.model or "").startswith("target:") else None
            records.append(AssertionRecord(**raw, passed=verdict.passed, score=verdict.score, reason=verdict.reason,
                                           suggestions=suggestions, label=item.assertion.label))
        else:
            records.append(AssertionRecord(**raw, passed=None, reason=_not_graded(status, end_reason),
                                           label=item.assertion.label))
    return records


def _not_graded(status: str, end_reason: str) -> str:
    return "not evaluated: the test was skipped" if status == "skipped" else \
        "not evaluated: the conversation failed first" if end_reason in FAILED_ENDS else "not evaluated"


def _errors(verdicts: list[AssertionRecord] | None) -> list[str] | None:
    return [f"{v.label}: {v.reason}" for v in verdicts or [] if v.passed is False] or None


def _tools(calls: list[Any]) -> list[ToolCallRecord] | None:
    return [ToolCallRecord(name=c.name, args=c.args, result=c.result) for c in calls] or None


def build(parsed: ParsedCase, result: RunResult, user: CaseUser | None, tracker: Tracker | None,
          result_path: str | None) -> CaseRecord:
    case = parsed.case
    graded = [a for a in result.assertions if a.name != "conversation"]
    conversation = next((a.reason for a in result.assertions if a.name == "conversation" and not a.passed), None)
    finals = [a for a in graded if a.on_turn is None and not a.name.startswith("checkpoint ")]
    record = CaseRecord(
        id=case.id, name=case.name, mode=case.mode, status=result.status, skip_reason=result.skip_reason,
        error=result.error or conversation, end_reason=result.end_reason, duration_ms=result.duration_ms,
        result=result_path, simulator=parsed.simulator.shown if parsed.simulator else None,
    )
    if case.mode == "standard":
        agent = result.turns[0].agent if result.turns and result.turns[0].cut is None else None
        record.messages_count = len(case.input or [])
        record.response = agent.text if agent else None
        record.tool_calls = _tools(agent.tool_calls) if agent else None
        record.assertions = _verdicts(parsed.final, finals, result.status, result.end_reason)
        record.assertion_errors = _errors(record.assertions)
        return record
    record.turns = [_turn(t, parsed, graded, result, user) for t in result.turns]
    record.total_turns = len(record.turns)
    record.final_assertions = _verdicts(parsed.final, finals, result.status, result.end_reason) \
        if parsed.final else None
    record.assertion_errors = _errors(record.final_assertions)
    if tracker is not None:
        record.checkpoints = _checkpoints(parsed, tracker, graded, _not_graded(result.status, result.end_reason))
        missing = tracker.missing()
        if missing and record.status == "failed" and not record.error:
            held = user.max_turns_failure if user is not None else None  # still missing with every span come
            record.error = held or f"missing checkpoints: {', '.join(missing)}"
    # a turn the conversation never reached has no line of its own: its failed assertions are the case's reason
    unreached = [a for a in graded if isinstance(a.on_turn, int) and a.on_turn > len(result.turns) and not a.passed]
    if unreached and record.status == "failed" and not record.error:
        record.error = "; ".join(f"{a.name}: {a.reason}" for a in unreached)
    if result.end_reason == "goal_achieved":
        record.goal_achieved = _goal_line(parsed)
    if user is not None and user.missing is not None:
        m = user.missing
        record.missing_input = MissingInputRecord(after_turn=m.after_turn, question=m.question, hint=m.hint,
                                                  policy=m.policy, person=m.person)
    return record


def _goal_line(parsed: ParsedCase) -> str:
    """What the console's "Goal achieved" line under the last turn says: the goal the simulator was given. Not a
    checkpoint (one reached turns earlier read as that turn's doing; the checkpoints have their own lines), nor
    the simulator's reasoning (its own words, in result.json's notes)."""
    goal = parsed.simulator.settings.get("goal") if parsed.simulator is not None else None
    return str(goal) if goal else "the simulated user reached its goal"


def _turn(turn: Any, parsed: ParsedCase, graded: list[AssertionResult], result: RunResult,
          user: CaseUser | None) -> TurnRecord:
    index = turn.index
    awaiting = user.awaiting.get(index) if user is not None else None
    written = parsed.turn_assertions.get(index, [])
    verdicts = _verdicts(written, [a for a in graded if a.on_turn == index], result.status,
                         result.end_reason) if written else None
    # a turn the timeout cut short (result.json's `cut`) is the design's failed turn too: `error: timeout after 30s`
    failed_turn = result.end_reason == "turn_failed" and index == len(result.turns)
    status: Status = "failed" if failed_turn or turn.cut or any(v.passed is False for v in verdicts or []) \
        else "passed"
    error = next((a.reason for a in result.assertions if a.name == "conversation"), None) if failed_turn \
        else turn.cut
    return TurnRecord(
        turn=index, input=turn.user.display() if turn.user else "", output=turn.agent.text,
        input_source=turn.user.source if turn.user else "static", tool_calls=_tools(turn.agent.tool_calls),
        awaiting_input=awaiting.awaiting if awaiting else None, awaiting_reason=awaiting.reason if awaiting else None,
        input_hint=awaiting.hint if awaiting else None, assertions=verdicts, assertion_errors=_errors(verdicts),
        status=status, error=error,
        duration_ms=round(turn.agent.latency_ms, 1),
    )


def _checkpoints(parsed: ParsedCase, tracker: Tracker, graded: list[AssertionResult],
                 not_graded: str) -> list[CheckpointRecord]:
    """Each checkpoint's verdict; one the grading never reached (a timeout, an error cut the conversation
    short) passed if the tracker saw it reached, else is ungraded, with the last check of it."""
    verdicts = {a.name.removeprefix("checkpoint "): a for a in graded if a.name.startswith("checkpoint ")}
    records = []
    for spec in parsed.case.checkpoints:  # in the order the test wrote them
        state = tracker.state(spec.id)
        verdict = verdicts.get(state.id)
        passed, reason = (verdict.passed, verdict.reason) if verdict is not None else \
            (True, f"reached at turn {state.reached_at}: {state.reason}") if state.reached_at is not None else \
            (None, not_graded + state.last_check())
        records.append(CheckpointRecord(
            id=state.id, description=spec.description, required=spec.required, reached_at_turn=state.reached_at,
            passed=passed, reason=reason))
    return records



class CaseSink(Protocol):
    """Where finished cases go: the JSONL console, or a test's list."""

    def case_finished(self, record: CaseRecord) -> None: ...
    def warning(self, message: str) -> None: ...


class CaseReporter:
    """An engine reporter for JSONL cases: each finished test becomes the design's record, written to `-o`
    as it finishes and handed to the JSONL console (`sink`). `cases` are the planned cases by test id (what
    was parsed, and the user side and checkpoint tracker of each run); `by_file` names each record's file."""

    def __init__(self, cases: dict[str, PlannedCase], sink: CaseSink, output: Path | None, by_file: bool) -> None:
        self.cases = cases
        self.sink = sink
        self.output = output
        self.by_file = by_file
        self.records: list[CaseRecord] = []
        self._redact: Any = None
        self._root: Path | None = None
        self.output_failed: str | None = None
        """Why `-o` stopped taking records (a full disk): the run then exits 3."""
        self.along_the_way = AlongTheWay()
        """What changed no verdict but should be said at the end (`report.along_the_way`)."""

    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None:
        self._redact, self._root = plan.secrets.redactor.data, run_dir
        if self.output is not None:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self.output.write_text("", encoding="utf-8")

    def run_started(self, test: PlannedTest, number: int, total: int) -> None:
        pass

    def run_finished(self, test: PlannedTest, result: RunResult) -> None:
        pass

    def warning(self, message: str) -> None:
        self.sink.warning(message)

    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None:
        self.along_the_way.add(runs)
        record = self._record(self.cases[result.id], result, runs)
        self.records.append(record)
        if self.output is not None and self.output_failed is None:
            line = self._redact(record.line()) if self._redact is not None else record.line()
            try:
                with self.output.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                    handle.flush()
            except OSError as exc:  # a full disk: the run goes on, its exit code says the file is incomplete
                self.output_failed = f"cannot write -o {self.output}: {exc.strerror or exc}"
                self.sink.warning(self.output_failed)
        self.sink.case_finished(record)

    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None:
        pass

    def _record(self, case: PlannedCase, result: TestResult, runs: list[RunResult]) -> CaseRecord:
        parsed = case.parsed
        if not runs:  # never started: after fail-fast or the budget, or a before_all hook failed
            why = (result.runs[0].error if result.runs else None) or result.skip_reason or "not run"
            error = result.status == "error"
            return CaseRecord(id=parsed.id, name=parsed.case.name, mode=parsed.case.mode, status=result.status,
                              error=why if error else None, skip_reason=None if error else why, duration_ms=0.0)
        # a case that did not pass shows a run that did not either: run 1's passing details under a failed
        # verdict hid why
        missed = [r for r in runs if r.status not in ("passed", "skipped")]
        first = min(missed if missed and result.status not in ("passed", "skipped") else runs, key=lambda r: r.run)
        summary = next(s for s in result.runs if s.run == first.run)
        where = f"{summary.dir}/result.json"
        record = build(parsed, first, case.users.get(first.run), case.trackers.get(first.run), where)
        if self.by_file:
            record.file = parsed.doc.label
        if len(runs) > 1 or result.status == "inconclusive":
            # the record shows one run; the verdict is the test's, over every run
            record.status = result.status if result.status != "quarantined" else record.status
            record.shown_run = first.run
        record.fault, record.fault_reason = summary.fault, summary.fault_reason
        record.reason, record.stats = result.reason, result.stats
        if result.stats is not None:
            record.inconclusive_runs = result.inconclusive_runs or None
            record.error_runs = result.error_runs or None
        return record
