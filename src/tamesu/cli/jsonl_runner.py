"""JSONL cases run on the engine for `tamesu test`, as `tamesu run` runs a suite: the cases planned
(`jsonl.run.CasePlanner`), the engine's `Runner` with the design's records and console as reporters beside the
plan recorder (and the results store's writer); `tests` narrows them (`--filter`, `--tags`, `--shard`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tamesu.engine.runner import Runner, RunOptions
from tamesu.errors import EXIT_FAILED, EXIT_INFRA, EXIT_OK
from tamesu.jsonl.run import CasePlanner, JsonlPlan, TestSettings
from tamesu.plan import PlannedTest
from tamesu.report.case_records import CaseRecord, CaseReporter, CaseSink
from tamesu.report.recorder import Fanout, PlanRecorder
from tamesu.results.provenance import Provenance
from tamesu.results.records import RunSummaryFile
from tamesu.roles.human import Human


@dataclass
class TestOutcome:
    exit_code: int
    run_dir: Path
    records: list[CaseRecord]
    summary: RunSummaryFile
    along_the_way: str = ""
    """The console's last line on what changed no verdict (`report.along_the_way`), or ""."""

    __test__ = False


class JsonlRunner:
    """Plans the cases and runs them on the engine; `tests` narrows them (`--filter`, `--tags`, `--shard`)."""

    def __init__(self, plan: JsonlPlan, settings: TestSettings, reporter: CaseSink,
                 human: Human | None = None, *, provenance: Provenance | None = None,
                 also: Sequence[object] | None = None) -> None:
        self.plan = plan
        self.settings = settings
        self.reporter = reporter
        self.provenance = provenance
        """The run id, commit and branch (`results.provenance.Provenance`) for plan.json, as `tamesu run` keeps."""
        self.also = list(also or [])
        """More engine reporters, as `tamesu run` has them (the results store's writer)."""
        self.planner = CasePlanner(plan, settings, human)
        self.engine_plan = self.planner.engine_plan()
        self.engine: Runner | None = None
        """The engine's run, once started: its `run_dir` holds what an interrupted run finished."""

    async def run(self, tests: list[PlannedTest] | None = None, selection: str | None = None) -> TestOutcome:
        """`selection`: what a shard's run chose before `--shard` took its share (plan.json keeps it)."""
        chosen = self.engine_plan.tests if tests is None else tests
        options = RunOptions(out=self.settings.out, parallel=self.settings.parallel, repeat=self.settings.repeat,
                             fail_fast=self.settings.fail_fast, today=self.settings.today,
                             cache_mode=self.settings.cache_mode, update_golden=self.settings.update_golden)
        cases = CaseReporter(self.planner.cases, self.reporter, self.settings.output, self.plan.folder)
        recorder = PlanRecorder(self.settings.shard, self.plan.secrets.redactor.data, self.provenance,
                                self.plan.project.spec.trace_url, selection)
        self.engine = Runner(self.engine_plan, chosen, options, Fanout(cases, recorder, *self.also))
        outcome = await self.engine.run()
        # a verdict with an incomplete -o file is an infrastructure failure; an interrupt keeps its own code
        code = EXIT_INFRA if cases.output_failed and outcome.exit_code in (EXIT_OK, EXIT_FAILED) else \
            outcome.exit_code
        return TestOutcome(code, outcome.run_dir, cases.records, outcome.summary, cases.along_the_way.line())
