"""`--report json:PATH`: the whole run in one JSON document for programs (dashboards, trend stores).

It holds every test with every run's assertions, metrics, captured values, tool calls and transcript; the raw
responses and events stay in each run's result.json (its `dir`), which keeps this file small enough to
upload. The shape is a pydantic model with a schema_version, like every other file tamesu writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from tamesu.conversation import ToolCall
from tamesu.plugins import register
from tamesu.report.baseline import Comparison
from tamesu.report.load import LoadedRun, PlannedEntry
from tamesu.report.words import failure_reason
from tamesu.results.json_files import write_indented
from tamesu.results.records import (
    SCHEMA_VERSION,
    AssertionResult,
    RunSummaryFile,
    TestResult,
    TranscriptLine,
    without_zero_not_evaluated,
)
from tamesu.results.stats import RepeatStats


class RunDetail(BaseModel):
    run: int
    attempt: int = 1
    status: str
    dir: str
    error: str | None = None
    fault: str | None = None
    fault_reason: str | None = None
    reruns: int = 0
    end_reason: str | None = None
    duration_ms: float = 0.0
    assertions: list[AssertionResult] = Field(default_factory=list)
    not_evaluated: int = 0
    """Checks the run's error or failed conversation kept from being graded (docs/faults.md); not written when 0."""
    metrics: dict[str, float] = Field(default_factory=dict)
    captured: dict[str, Any] = Field(default_factory=dict)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    transcript: list[TranscriptLine] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _counted(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_zero_not_evaluated(handler(self))


class TestEntry(BaseModel):
    id: str
    suite: str
    test: str
    case: str | None = None
    tags: list[str] = Field(default_factory=list)
    target: str
    status: str
    quarantine: str | None = None
    skip_reason: str | None = None
    reason: str | None = None
    failure: str | None = None
    """Why the test did not pass, in the one line JUnit's failure message and the HTML's summary row show
    (`reason` is only a verdict over its runs, null when one run decided it)."""
    stats: RepeatStats | None = None
    passed_runs: int = 0
    total_runs: int = 0
    inconclusive_runs: int = 0
    error_runs: int = 0
    duration_ms: float = 0.0
    file: str | None = None
    line: int | None = None
    runs: list[RunDetail] = Field(default_factory=list)

    __test__ = False


class JsonReport(BaseModel):
    schema_version: int = SCHEMA_VERSION
    kind: str = "tamesu.report"
    run_dir: str
    summary: RunSummaryFile
    shards: list[str] = Field(default_factory=list)
    tests: list[TestEntry] = Field(default_factory=list)
    not_finished: list[PlannedEntry] = Field(default_factory=list)
    baseline: Comparison | None = None


def _entry(run: LoadedRun, result: TestResult) -> TestEntry:
    source = run.source(result.id)
    details = []
    for summary in result.runs:
        detail = run.run_result(summary)
        transcript = run.transcript(summary)
        details.append(RunDetail(
            run=summary.run, attempt=summary.attempts, status=summary.status, dir=summary.dir, error=summary.error,
            fault=summary.fault, fault_reason=summary.fault_reason, reruns=summary.reruns,
            end_reason=detail.end_reason if detail else None, duration_ms=detail.duration_ms if detail else 0.0,
            assertions=detail.assertions if detail else summary.failures, not_evaluated=summary.not_evaluated,
            metrics=detail.metrics if detail else summary.metrics,
            captured=detail.captured if detail else {}, tool_calls=detail.tool_calls if detail else [],
            transcript=transcript.lines if transcript else [],
        ))
    return TestEntry(
        id=result.id, suite=result.suite, test=result.test, case=result.case, tags=result.tags, target=result.target,
        status=result.status, quarantine=result.quarantine, skip_reason=result.skip_reason,
        reason=result.reason, stats=result.stats,
        failure=(failure_reason(result) or None) if result.status not in ("passed", "skipped") else None,
        passed_runs=result.passed_runs, total_runs=result.total_runs,
        inconclusive_runs=result.inconclusive_runs, error_runs=result.error_runs, duration_ms=result.duration_ms,
        file=source.file if source else None, line=source.line if source else None, runs=details,
    )


def build_json(run: LoadedRun, comparison: Comparison | None = None) -> JsonReport:
    return JsonReport(
        run_dir=str(run.dir), summary=run.summary, shards=run.plan.shards if run.plan else [],
        tests=[_entry(run, r) for r in run.results], not_finished=run.not_finished(), baseline=comparison,
    )


@register("reports", "json", default_file="report.json")
def write_json_report(run: LoadedRun, path: Path, comparison: Comparison | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_indented(path, build_json(run, comparison).model_dump(mode="json"))
