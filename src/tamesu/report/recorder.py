"""Reporters that sit beside the console: plan.json at the start of a run, and a fan-out to several reporters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tamesu.report.load import PLAN_FILE, PlannedEntry, PlanRecord
from tamesu.results.json_files import write_indented
from tamesu.results.records import RunResult, RunSummaryFile, TestResult

if TYPE_CHECKING:  # the engine's types, named for the reporter protocol; the run's provenance
    from tamesu.plan import Plan, PlannedTest
    from tamesu.results.provenance import Provenance


def planned_entries(tests: list[PlannedTest]) -> list[PlannedEntry]:
    """Each planned test with the file and line that define it (annotations point there)."""
    entries = []
    files: dict[int, str] = {}  # resolved once a suite, not once a test (a system call per part of the path)
    for test in tests:
        doc = test.suite.doc
        line = test.line if test.line is not None else doc.position(("tests", test.index))[0]
        file = files.get(id(doc))
        if file is None:
            file = files[id(doc)] = str(doc.path.resolve())
        entries.append(PlannedEntry(id=test.id, suite=test.suite.name, name=test.name, case=test.case,
                                    tags=list(test.tags), file=file, line=line,
                                    slo=dict(getattr(test, "slo", None) or {})))
    return entries


class PlanRecorder:
    """Writes plan.json as the run starts: what it meant to run, its shard, and where each test is written.

    Written first so that a run killed half-way still tells `tamesu report` which tests never finished.
    """

    def __init__(self, shard: str | None = None, redact: Any = None, provenance: Provenance | None = None,
                 trace_url: str | None = None, selection: str | None = None) -> None:
        self.shard = shard
        self.selection = selection
        self.trace_url = trace_url
        self.redact = redact
        self.provenance = provenance
        """The run id, commit and branch (`tamesu.results.provenance.Provenance`), kept for `tamesu store import`."""

    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None:
        record = PlanRecord(shard=self.shard, shards=[self.shard] if self.shard else [],
                            tests=planned_entries(tests), trace_url=self.trace_url, selection=self.selection)
        if self.provenance is not None:
            record.run_id = self.provenance.run_id
            record.commit = self.provenance.commit
            record.branch = self.provenance.branch
        data = record.model_dump(mode="json", exclude={"selection"} if self.selection is None else None)
        if self.redact is not None:
            data = self.redact(data)
        write_indented(run_dir / PLAN_FILE, data, atomic=True)

    def run_started(self, test: PlannedTest, number: int, total: int) -> None:
        pass

    def run_finished(self, test: PlannedTest, result: RunResult) -> None:
        pass

    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None:
        pass

    def warning(self, message: str) -> None:
        pass

    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None:
        pass


class Fanout:
    """One Reporter that forwards every call to several, in order (the console first, so it prints first)."""

    def __init__(self, *reporters: Any) -> None:
        self.reporters = reporters

    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None:
        for reporter in self.reporters:
            reporter.start(plan, tests, run_dir)

    def run_started(self, test: PlannedTest, number: int, total: int) -> None:
        for reporter in self.reporters:
            reporter.run_started(test, number, total)

    def run_finished(self, test: PlannedTest, result: RunResult) -> None:
        for reporter in self.reporters:
            reporter.run_finished(test, result)

    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None:
        for reporter in self.reporters:
            reporter.test_finished(result, runs)

    def warning(self, message: str) -> None:
        for reporter in self.reporters:
            reporter.warning(message)

    def load_finished(self, report: Any) -> None:
        for reporter in self.reporters:
            if callable(show := getattr(reporter, "load_finished", None)):
                show(report)

    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None:
        for reporter in self.reporters:
            reporter.finish(summary, run_dir)
