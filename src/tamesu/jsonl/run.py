"""Running JSONL cases through the engine: each case is a `PlannedTest` of a suite made for the file, run once
by `engine.conversation.execute_run` with the case's user side (`CaseUser`), graded by the engine's checks.

Around it, what `engine.runner.Runner` does for suites, in the shape JSONL needs: the run directory
(`<run>/<file>/<case id>/run-1/result.json`, `results.jsonl`, `run.json`), the models with the replay cache
and the budget (exit 4), the project's hooks, `--parallel`, `--fail-fast`. It is not the suite Runner because
a JSONL run can be *skipped* (the agent awaited input nobody gave), which the suite Runner would count as a
failure, and because each finished case also becomes a record of the design's JSONL output.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ruamel.yaml.comments import CommentedMap

from tamesu import __version__
from tamesu.checks import Assertion
from tamesu.engine.artifacts import RunDirectory, new_run_dir
from tamesu.engine.conversation import RunInputs, execute_run
from tamesu.engine.hooks import HookFailed, run_hooks
from tamesu.engine.runner import aggregate
from tamesu.jsonl import records
from tamesu.jsonl.checkpoints import CheckpointCheck, Tracker
from tamesu.jsonl.human import Human
from tamesu.jsonl.parser import ParsedCase
from tamesu.jsonl.records import CaseRecord
from tamesu.jsonl.schema import MissingInput
from tamesu.jsonl.targets import ResolvedTarget
from tamesu.jsonl.user import CaseUser, Interaction
from tamesu.models.cache import CacheMode, ReplayCache
from tamesu.models.client import ModelRegistry
from tamesu.models.ledger import Ledger
from tamesu.results import RunResult, RunSummary, RunSummaryFile, TestResult, count, exit_code_for
from tamesu.suite._yaml import Document
from tamesu.suite.loader import LoadedSuite, PlannedTest, Project
from tamesu.suite.schema import Scenario, SuiteSpec, TestSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context

DEFAULT_TIMEOUT = 300.0
DEFAULT_HUMAN_TIMEOUT = 300.0


@dataclass
class TestSettings:
    """What the command line decides for every case."""

    out: Path
    parallel: int = 1
    fail_fast: bool = False
    timeout: float = DEFAULT_TIMEOUT
    connector: str | None = None
    on_missing_input: MissingInput | None = None
    """Overrides every case's own `on_missing_input` (default `skip`)."""
    interactive: bool = False
    skip_interactive: bool = False
    cache_mode: CacheMode | None = None
    output: Path | None = None
    """`-o`: the JSONL records, one line per case as it finishes."""
    today: dt.date = field(default_factory=dt.date.today)

    __test__ = False


@dataclass
class JsonlPlan:
    project: Project
    secrets: Secrets
    target: ResolvedTarget
    cases: list[ParsedCase]
    source: str
    """How the header names the input: a path, `message`, `agents:generator?count=3`."""
    name: str
    """The folder of the run directory the cases' runs go in (the file's stem)."""
    base_dir: Path


@dataclass
class TestOutcome:
    exit_code: int
    run_dir: Path
    records: list[CaseRecord]
    summary: RunSummaryFile

    __test__ = False


class Reporter(Protocol):
    def case_finished(self, record: CaseRecord) -> None: ...
    def warning(self, message: str) -> None: ...


def models_for(project: Project, secrets: Secrets, cache_mode: CacheMode | None) -> ModelRegistry | None:
    """The project's models with its cache and budget, as `tamesu run` builds them for a suite."""
    if not project.spec.models:
        return None
    cache_spec = project.spec.cache
    if cache_mode is not None:
        cache_spec = cache_spec.model_copy(update={"mode": cache_mode})
    context = Context(secrets=secrets, env=dict(os.environ), vars=project.spec.vars)
    return ModelRegistry(project.spec.models, render=context.render_text,
                         cache=ReplayCache.from_spec(cache_spec, base_dir=project.dir, mask=secrets.redactor.data),
                         ledger=Ledger(project.spec.budget))


class JsonlRunner:
    def __init__(self, plan: JsonlPlan, settings: TestSettings, reporter: Reporter,
                 human: Human | None = None) -> None:
        self.plan = plan
        self.settings = settings
        self.reporter = reporter
        self._human = human
        self.records: list[CaseRecord] = []
        self.results: list[TestResult] = []
        self._stop: str | None = None
        self._broken: str | None = None
        """A before_all hook failed: no case runs, each is an error."""
        self._budget_exceeded = False
        self._slots = asyncio.Semaphore(max(1, settings.parallel))
        self.suite = LoadedSuite(
            spec=SuiteSpec(name=plan.name),
            doc=Document(plan.base_dir / plan.name, CommentedMap(), plan.source),
            targets={plan.target.name: plan.target.spec}, project=plan.project,
        )
        self.models = models_for(plan.project, plan.secrets, settings.cache_mode)

    async def run(self) -> TestOutcome:
        started_wall, started = dt.datetime.now(dt.UTC), time.monotonic()
        run_dir = new_run_dir(self.settings.out)
        directory = RunDirectory(run_dir, self.plan.secrets.redactor)
        if self.settings.output is not None:
            self.settings.output.parent.mkdir(parents=True, exist_ok=True)
            self.settings.output.write_text("", encoding="utf-8")
        hooks = self.plan.project.spec.hooks
        context = Context(secrets=self.plan.secrets, env=dict(os.environ), vars=self.plan.project.spec.vars)
        warnings: list[str] = []
        try:
            await run_hooks(hooks.before_all, context, self.plan.project.dir, "before_all")
        except HookFailed as exc:
            self._broken, warnings = str(exc), [str(exc)]
        try:
            await asyncio.gather(*(self._case(i, case, directory) for i, case in enumerate(self.plan.cases)))
        finally:
            if self.models is not None:
                await self.models.aclose()
            try:
                await run_hooks(hooks.after_all, context, self.plan.project.dir, "after_all")
            except HookFailed as exc:
                warnings.append(str(exc))
                self.reporter.warning(str(exc))
        code = exit_code_for(self.results, self._budget_exceeded)
        summary = RunSummaryFile(
            tamesu_version=__version__, started_at=started_wall.isoformat(),
            finished_at=dt.datetime.now(dt.UTC).isoformat(), duration_ms=round((time.monotonic() - started) * 1000, 3),
            exit_code=code, counts=count(self.results), stopped=self._stop, warnings=warnings,
        )
        directory.write_json(run_dir / "run.json", summary)
        return TestOutcome(code, run_dir, self.records, summary)

    # -- one case ---------------------------------------------------------------------------------------

    async def _case(self, index: int, parsed: ParsedCase, directory: RunDirectory) -> None:
        async with self._slots:
            if self._broken or self._stop:
                self._not_run(parsed, directory, self._broken or self._stop or "")
                return
            test, tracker = self.planned(index, parsed)
            users: list[CaseUser] = []

            def user_factory(models: ModelRegistry | None, seed: int) -> CaseUser:
                user = self._user(parsed, models, seed, tracker)
                users.append(user)
                return user

            test_dir = directory.test_dir(self.plan.name, parsed.id)
            hooks = self.plan.project.spec.hooks
            outcome = await execute_run(RunInputs(
                test=test, number=1, attempt=1, run_id=f"{directory.root.name}-{index + 1}",
                artifacts_dir=test_dir / "run-1", secrets=self.plan.secrets, before_each=hooks.before_each,
                after_each=hooks.after_each, models=self.models, user_factory=user_factory,
            ))
            result = outcome.result
            directory.write_json(test_dir / "run-1" / "transcript.json", outcome.transcript)
            directory.write_json(test_dir / "run-1" / "result.json", result)
            for message in outcome.warnings:
                self.reporter.warning(f"{parsed.id}: {message}")
            if outcome.budget_exceeded:
                self._budget_exceeded, self._stop = True, "the budget was exceeded"
            elif self.settings.fail_fast and result.status in ("failed", "error") and self._stop is None:
                self._stop = "fail-fast: an earlier test failed"
        summary = self._test_result(test, result, test_dir, directory.root)
        where = str((test_dir / "run-1" / "result.json").relative_to(directory.root))
        self._record(directory, summary, records.build(parsed, result, users[0] if users else None, tracker, where))

    def planned(self, index: int, parsed: ParsedCase) -> tuple[PlannedTest, Tracker | None]:
        """The case as the engine's PlannedTest: per-turn assertions on their turn, then the final ones, then
        one assertion per checkpoint."""
        case = parsed.case
        connector = self.settings.connector or (case.options.connector if case.options else None)
        # the engine asks the user side once more after the last turn, so it can end the conversation itself
        turns = 2 if case.mode == "standard" else min(case.turn_limit() + 1, 1000)
        spec = TestSpec(name=case.id, target=self._target_for(connector), scenario=Scenario(max_turns=turns),
                        timeout=case.timeout or self.settings.timeout)
        tracker = Tracker(parsed.checkpoints) if parsed.checkpoints else None
        assertions = [g.assertion for n in sorted(parsed.turn_assertions) for g in parsed.turn_assertions[n]]
        assertions += [g.assertion for g in parsed.final]
        if tracker is not None:
            assertions += [Assertion(key="checkpoint", check=CheckpointCheck(tracker, c.id), on_turn=None,
                                     label=f"checkpoint {c.id}") for c in case.checkpoints]
        test = PlannedTest(self.suite, spec, case.id, None, {}, [f"mode:{case.mode}"], assertions, {}, index)
        return test, tracker

    def _target_for(self, connector: str | None) -> str:
        """A model target answered by the connector's model: the same target under its own name."""
        target = self.plan.target
        if connector is None or target.spec.type != "model":
            return target.name
        name = f"{target.name} ({connector})"
        self.suite.targets.setdefault(name, target.spec.model_copy(update={"model": connector}))
        return name

    def _user(self, parsed: ParsedCase, models: ModelRegistry | None, seed: int, tracker: Tracker | None) -> CaseUser:
        case, settings = parsed.case, self.settings
        options = case.options.sent() if case.options else {}
        if settings.connector:
            options["connector"] = settings.connector
        wants_person = settings.interactive or (case.interactive is not None and case.interactive.enabled)
        human = None
        if wants_person and not settings.skip_interactive:
            if self._human is None:
                self._human = Human()
            human = self._human
        timeout = case.interactive.timeout if case.interactive is not None else DEFAULT_HUMAN_TIMEOUT
        policy = settings.on_missing_input or case.on_missing_input or "skip"
        return CaseUser(parsed, models=models, seed=seed, options=options, max_turns=case.turn_limit(),
                        on_missing_input=policy, interaction=Interaction(human, timeout), tracker=tracker)

    def _test_result(self, test: PlannedTest, result: RunResult, test_dir: Path, root: Path) -> TestResult:
        summary = aggregate(test, [result], test_dir, root, self.settings.today)
        summary.duration_ms = result.duration_ms
        if result.status == "skipped":
            # a skipped run is not a failed one: the suite aggregation knows only pass thresholds
            summary.status, summary.skip_reason = "skipped", result.skip_reason
        return summary

    def _not_run(self, parsed: ParsedCase, directory: RunDirectory, why: str) -> None:
        """A case never started: skipped after fail-fast or the budget, an error after a before_all hook failed."""
        error = self._broken is not None
        summary = TestResult(suite=self.plan.name, test=parsed.id, id=f"{self.plan.name}/{parsed.id}",
                             target=self.plan.target.name, status="error" if error else "skipped",
                             skip_reason=None if error else f"not run: {why}",
                             runs=[RunSummary(run=0, status="error" if error else "skipped", dir="", error=why)])
        record = CaseRecord(id=parsed.id, name=parsed.case.title, mode=parsed.case.mode,
                            status="error" if error else "skipped", error=why if error else None,
                            skip_reason=None if error else f"not run: {why}", duration_ms=0.0)
        self._record(directory, summary, record)

    def _record(self, directory: RunDirectory, summary: TestResult, record: CaseRecord) -> None:
        self.results.append(summary)
        self.records.append(record)
        directory.append_result(summary)
        if self.settings.output is not None:
            line = directory.redactor.data(record.line())
            with self.settings.output.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                handle.flush()
        self.reporter.case_finished(record)
