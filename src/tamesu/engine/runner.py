"""A whole invocation: suites in order, their tests side by side, repeats, retries, hooks, results on disk."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import signal
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from tamesu import __version__, targets
from tamesu.conversation import WRITE_GOLDEN
from tamesu.engine._halts import Halts
from tamesu.engine._late_spans import tell_spans
from tamesu.engine._run_records import written
from tamesu.engine._unrun import unrun
from tamesu.engine.artifacts import RunDirectory, new_run_dir, slug
from tamesu.engine.conversation import Going, RunInputs, RunOutcome, crashed_run, execute_run
from tamesu.engine.hooks import HookFailed, HookGroup, run_hooks
from tamesu.engine.metrics import unmeasured_slo_lines
from tamesu.engine.repeats import aggregate, run_adaptively, run_dir_name
from tamesu.engine.runlog import LOG_FILE, library_logs
from tamesu.engine.stop import RunStop
from tamesu.engine.traces import Receivers, SuiteTraces
from tamesu.errors import EXIT_INFRA, InfraError, os_words
from tamesu.models.cache import CacheMode, ReplayCache
from tamesu.models.client import ModelRegistry
from tamesu.models.ledger import Ledger
from tamesu.plan import LoadedSuite, Plan, PlannedTest
from tamesu.results.records import (
    ModelSpend,
    RunResult,
    RunSummaryFile,
    TestResult,
    count,
    count_runs,
    exit_code_for,
)
from tamesu.runtime.signals import Interrupted, gentle_stop
from tamesu.suite.templates import Context, resolve_vars
from tamesu.telemetry import otel

_SAME_AGAIN = ("not run again: a script plays the user, and reads no seed, so a rerun would play it the same "
               "(retries_inconclusive reruns a model's simulated user with a new seed)")


class Reporter(Protocol):
    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None: ...
    def run_started(self, test: PlannedTest, number: int, total: int) -> None: ...
    def run_finished(self, test: PlannedTest, result: RunResult) -> None: ...
    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None: ...
    def warning(self, message: str) -> None: ...
    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None: ...


@dataclass
class RunOptions:
    out: Path
    parallel: int = 1
    repeat: int | None = None
    fail_fast: bool = False
    today: dt.date = field(default_factory=dt.date.today)
    cache_mode: CacheMode | None = None
    """`--no-cache` (off) or `--cache-only` (only) over the project's `cache.mode`."""
    update_golden: bool = False
    write_golden: str = WRITE_GOLDEN
    """How a missing golden file is told to be written: the pytest plug-in has no `--update-golden`."""
    load: bool = True
    """A suite's `load:` stages after its tests (the pytest plug-in's items, one test's verdict each, run none)."""


@dataclass
class Outcome:
    exit_code: int
    run_dir: Path
    results: list[TestResult]
    summary: RunSummaryFile


class Runner:
    def __init__(self, plan: Plan, tests: list[PlannedTest], options: RunOptions, reporter: Reporter) -> None:
        self.plan = plan
        self.tests = tests
        self.options = options
        self.reporter = reporter
        self.results: list[TestResult] = []
        self._slots = asyncio.Semaphore(max(1, options.parallel))
        self._going = Going()  # the runs going now, which a 429's line says (`--parallel` is only how many may)
        self._pinned = asyncio.Lock()
        """Held by a run whose suite has remote agents on a fixed `addr`, or whose target (or counterpart) binds one
        (an a2a target's `push.addr`, a rest target's `response.listen.addr`): two such runs would fight for
        the port."""
        self._in_turn = asyncio.Lock()
        """At --parallel 1, held by a test from its first run until it is recorded: the slot alone let the next
        test start (its RUN line) before the last one's verdict was printed."""
        self.ledger = Ledger(plan.project.spec.budget)
        self.halts = Halts(self.ledger, fail_fast=options.fail_fast, repeat=options.repeat, today=options.today)
        cache_spec = plan.project.spec.cache
        if options.cache_mode is not None:
            cache_spec = cache_spec.model_copy(update={"mode": options.cache_mode})
        self.cache = ReplayCache.from_spec(cache_spec, base_dir=plan.project.dir, mask=plan.secrets.redactor.data)
        self.stopping = RunStop()
        """Set by the first Ctrl-C or SIGTERM: the runs in flight end, no new one starts."""
        self.write_failed: str | None = None
        """Why the run folder could not take a result (full disk, read-only): the run stops, exit 3."""
        self.run_dir: Path | None = None
        """Set as soon as the run's directory exists (an interrupted run is found there)."""
        self.receivers = Receivers(plan.secrets)
        """`traces:`: the OTLP receivers the suites name, for the whole invocation."""
        self._runs_said: list[str] = []
        """Each run's warnings (its traces that never came...), as the console said them: run.json keeps them."""

    async def run(self) -> Outcome:
        started_wall = dt.datetime.now(dt.UTC)
        started = time.monotonic()
        try:
            run_dir = self.run_dir = new_run_dir(self.options.out)
            directory = RunDirectory(run_dir, self.plan.secrets.redactor)
            self.reporter.start(self.plan, self.tests, run_dir)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            # before any test runs: one line, exit 3
            why = os_words(exc) if isinstance(exc, OSError) else "no folder can be named that: it holds a NUL byte"
            where = str(self.options.out).replace("\0", "\\0")
            raise RunFolderError(f"cannot write the run folder in {where}: {why}") from None
        # the plan's own (an expired quarantine, an unset secret no run renders): said on the console before the
        # run, and kept with it, where a CI job reading run.json alone looks
        warnings: list[str] = [str(w) for w in self.plan.warnings]
        interrupted: str | None = None
        told_spans = False
        try:
            with gentle_stop(self._interrupt), library_logs(run_dir, self.plan.secrets.redactor.text) as logs, \
                    otel.active().span("tamesu.run", run=run_dir.name, tests=len(self.tests)):
                for suite in self.plan.suites:
                    chosen = [t for t in self.tests if t.suite is suite]
                    if chosen and self.stopping.signum is None:
                        suite_said = await self._run_suite(suite, chosen, directory)
                        warnings.extend(self._drain_runs_said())  # the suite's runs', then its after_all hooks'
                        warnings.extend(suite_said)
                for said in self._unmeasured_slos():
                    warnings.append(said)
                    self.reporter.warning(said)
                told_spans = tell_spans(await self.receivers.stop(), warnings, self.reporter.warning,
                                        self.receivers.collector.dropped.late_in, directory)
            interrupted = self.stopping.reason
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = self.stopping.reason or "interrupted"
            raise
        finally:
            # what targets share across tests (one browser) goes with the run, so nothing outlives it
            await asyncio.shield(targets.shutdown())
            stopped = await asyncio.shield(self.receivers.stop())
            if not told_spans:  # a second signal cancelled the run first: what was collected is still written
                tell_spans(stopped, warnings, self.reporter.warning, self.receivers.collector.dropped.late_in,
                           directory)
            try:
                directory.close()  # results.jsonl on the disk before the run says it is done
            except OSError as exc:
                self._cannot_write(directory.results_path, exc)
            # an interrupted run exits 128 + the signal (130 after Ctrl-C): run.json says the same
            code = (128 + (self.stopping.signum or signal.SIGINT)) if interrupted else \
                EXIT_INFRA if self.write_failed else exit_code_for(self.results, self.halts.budget_exceeded)
            summary = RunSummaryFile(
                tamesu_version=__version__, started_at=started_wall.isoformat(),
                finished_at=dt.datetime.now(dt.UTC).isoformat(),
                duration_ms=round((time.monotonic() - started) * 1000, 3), exit_code=code,
                counts=count(self.results), runs=count_runs(self.results), interrupted=interrupted,
                stopped=self.halts.said(), warnings=[*warnings, *self._drain_runs_said()],  # a cut run's too
                models=self._spend(), parallel=self.options.parallel,
            )
            try:
                directory.write_json(run_dir / "run.json", summary)
            except OSError as exc:
                self.reporter.warning(f"run.json could not be written: {os_words(exc)}")
        if logs.records:
            self.reporter.warning(f"{logs.records} record{'' if logs.records == 1 else 's'} from the libraries "
                                  f"(a2a-sdk, uvicorn, grpc, mcp) in {run_dir / LOG_FILE}")
        self.reporter.finish(summary, run_dir)
        if self.stopping.signum is not None:
            raise Interrupted(self.stopping.signum)
        return Outcome(code, run_dir, self.results, summary)

    def _drain_runs_said(self) -> list[str]:
        said, self._runs_said = self._runs_said, []
        return said

    def _spend(self) -> ModelSpend | None:
        totals = self.ledger.totals()
        if not (totals.calls or totals.cached_calls):
            return None
        return ModelSpend(**{**vars(totals), "usd": round(totals.usd, 6)})

    def _unmeasured_slos(self) -> list[str]:
        graded = (run.metrics for result in self.results for run in result.runs
                  if run.status == "passed" or (run.status == "failed" and not run.not_evaluated))
        return unmeasured_slo_lines([name for test in self.tests for name in test.slo], graded)

    def _interrupt(self, signum: int) -> None:
        self.stopping.trigger(signum)

    def _models_for(self, suite: LoadedSuite) -> ModelRegistry | None:
        specs = {**self.plan.project.spec.models, **suite.spec.models}
        if not specs:
            return None
        budget = suite.spec.budget
        ledger = Ledger(budget, parent=self.ledger) if budget.usd is not None or budget.tokens is not None \
            else self.ledger
        context = self._suite_context(suite)
        return ModelRegistry(specs, render=context.render_text, render_url=context.render_url, cache=self.cache,
                             ledger=ledger, mask=self.plan.secrets.redactor.data)

    def _suite_context(self, suite: LoadedSuite) -> Context:
        merged, _ = resolve_vars({**self.plan.project.spec.vars, **suite.spec.vars})  # their problems: the plan's
        return Context(secrets=self.plan.secrets, env=dict(os.environ), vars=merged)

    async def _run_suite(self, suite: LoadedSuite, tests: list[PlannedTest], directory: RunDirectory) -> list[str]:
        warnings: list[str] = []
        # before the hooks, so they start the agent with OTEL_EXPORTER_OTLP_ENDPOINT pointing at the receiver
        try:
            traces = await self.receivers.for_suite(suite.traces)
        except InfraError as exc:
            # as a failing before_all hook: the suite's tests are errors (exit 3), the other suites still run
            # and the run's reports and run.json say so (the run stopped with run.json at exit 0, no reports)
            for test in tests:
                self._record(directory, unrun(test, "error", str(exc), self.options.today), [])
            await self._load(suite, tests, directory, None, None)  # no stage: it says why (every test an error)
            return [f"suite {suite.name}: {exc}"]
        context = self._suite_context(suite)
        try:
            async with asyncio.timeout(None) as deadline:
                self.stopping.watch(deadline)  # Ctrl-C cuts a before_all hook still running (it waited for it)
                await run_hooks(self._hooks(suite, "before_all"), context, "before_all")
        except TimeoutError:
            if self.stopping.reason is None:
                raise
            # its tests never started: the reports list them as not finished; what the before_all hooks before
            # it set up (a container) is cleaned up still, as after a failing one
            return await self._after_all(suite, context)
        except HookFailed as exc:
            for test in tests:
                self._record(directory, unrun(test, "error", str(exc), self.options.today), [])
            await self._load(suite, tests, directory, None, None)  # no stage: it says why (every test an error)
            # what the before_all hooks before it set up (a container, a seeded database) is cleaned up still
            return [str(exc), *await self._after_all(suite, context)]
        models = self._models_for(suite)
        try:
            await asyncio.gather(*(self._traced_test(test, directory, models, traces) for test in tests))
            if suite.spec.load is not None:
                await self._load(suite, tests, directory, models, traces)
        finally:
            if models is not None:
                await models.aclose()
            warnings += await self._after_all(suite, context)
        return warnings

    def _hooks(self, suite: LoadedSuite, stage: str) -> list[HookGroup]:
        """The project's hooks of `stage` (run in its folder: its paths are relative to tamesu.yaml), then the
        suite's (in the suite's folder)."""
        return [(getattr(self.plan.project.spec.hooks, stage), self.plan.project.dir),
                (getattr(suite.spec.hooks, stage), suite.hook_dir or suite.dir)]

    async def _after_all(self, suite: LoadedSuite, context: Context) -> list[str]:
        try:
            await run_hooks(self._hooks(suite, "after_all"), context, "after_all")
        except HookFailed as exc:
            said = f"suite {suite.name}: {exc}"  # two suites' after_all hooks failing read as one line twice
            self.reporter.warning(said)
            return [said]
        return []

    def _record(self, directory: RunDirectory, result: TestResult, runs: list[RunResult]) -> None:
        if self.write_failed:
            return  # the folder cannot take it: the run is stopping
        try:
            directory.append_result(result)
        except OSError as exc:
            self._cannot_write(directory.results_path, exc)
            return
        self.results.append(result)
        self.reporter.test_finished(result, runs)

    async def _traced_test(self, test: PlannedTest, directory: RunDirectory, models: ModelRegistry | None,
                           traces: SuiteTraces | None = None) -> None:
        """The test under a span of its own (when tamesu exports spans), its status on it."""
        async with self._in_turn if self.options.parallel <= 1 else contextlib.nullcontext():
            with otel.active().span("tamesu.test", test=test.id, suite=test.suite.name) as span:
                await self._run_test(test, directory, models, traces)
                if span is not None:
                    recorded = next((r for r in reversed(self.results) if r.id == test.id), None)
                    span.set_attribute("tamesu.status", recorded.status if recorded else "not recorded")

    def _cannot_write(self, path: Path, exc: OSError) -> None:
        """A full disk or an unwritable folder mid-run: no new run starts, what finished is kept."""
        if self.write_failed is None:
            self.write_failed = f"the run folder cannot be written ({path.name}): {os_words(exc)}"
            self.halts.reason = self.write_failed
            self.reporter.warning(self.write_failed)

    async def _run_test(self, test: PlannedTest, directory: RunDirectory, models: ModelRegistry | None,
                        traces: SuiteTraces | None = None) -> None:
        if test.spec.skip:
            reason = test.spec.skip if isinstance(test.spec.skip, str) else "skip: true"
            self._record(directory, unrun(test, "skipped", reason, self.options.today), [])
            return
        test_dir = directory.test_dir(test.suite.name, test.name)
        repeat = self.options.repeat or test.spec.repeat
        adaptive = self.halts.adaptive(test, repeat)

        def start(number: int) -> Awaitable[RunOutcome | None]:
            return self._run_with_retries(test, number, repeat, test_dir, directory, models, traces)

        if adaptive is None:
            outcomes = await asyncio.gather(*(start(number) for number in range(1, repeat + 1)))
        else:
            outcomes = await run_adaptively(start, lambda o: o.result, repeat, adaptive,
                                            test.spec.pass_threshold, self.options.parallel)
        finished = [o for o in outcomes if o is not None]
        if self.stopping.signum is not None:
            return  # a test cut short by Ctrl-C or SIGTERM did not finish: the plan still names it
        if not finished:
            stopped = self.halts.stopped(test)
            reason = f"not run: {stopped}" if stopped else "not run"
            self._record(directory, unrun(test, "skipped", reason, self.options.today), [])
            return
        runs = [o.result for o in finished]
        if adaptive is None and len(finished) < repeat and self.halts.could_pass(test, repeat):
            # a verdict on the runs that happened would hold a threshold to fewer runs than it was set for (2 of
            # 4 passing at 0.5 passed a test whose last two runs fail-fast had cut)
            stopped = self.halts.stopped(test) or "the run stopped"
            reason = f"not run: {stopped} ({len(finished)} of {repeat} runs made)"
            self._record(directory, unrun(test, "skipped", reason, self.options.today), runs)
            return
        result = aggregate(test, runs, test_dir, directory.root, self.options.today, adaptive, repeat)
        # the time the runs took (each with the attempts and reruns it took), not the time spent waiting for a slot
        result.duration_ms = round(sum(o.spent_ms for o in finished), 3)
        self._record(directory, result, runs)
        self.halts.test_finished(test, result, adaptive)

    async def _run_with_retries(
        self, test: PlannedTest, number: int, total: int, test_dir: Path, directory: RunDirectory,
        models: ModelRegistry | None, traces: SuiteTraces | None = None,
    ) -> RunOutcome | None:
        pins_addr = any(agent.addr for agent in test.suite.spec.remote_agents.values()) or _binds_fixed_addr(test)
        async with self._slots, (self._pinned if pins_addr else contextlib.nullcontext()):
            if self.halts.stopped(test) or self.stopping.signum is not None:
                return None
            self.reporter.run_started(test, number, total)
            outcome: RunOutcome | None = None
            spent = 0.0
            for rerun in range(test.spec.retries_inconclusive + 1):
                outcome = await self._attempts(test, number, rerun, test_dir, directory, models, traces)
                if outcome is None:
                    return None
                spent += outcome.spent_ms
                outcome.spent_ms = spent
                if outcome.result.status != "inconclusive" or outcome.budget_exceeded or self.halts.stopped(test):
                    break
                if outcome.rerun_with is None:
                    if rerun < test.spec.retries_inconclusive:  # as the result says why it was not
                        outcome.result.fault_reason = f"{outcome.result.fault_reason} ({_SAME_AGAIN})"
                    break
                if rerun < test.spec.retries_inconclusive:
                    self.reporter.warning(
                        f"{test.id}: run {number} is inconclusive ({outcome.result.fault_reason}); running it "
                        f"again {outcome.rerun_with} ({rerun + 1} of {test.spec.retries_inconclusive})")
            assert outcome is not None
            self.halts.run_finished(test, outcome.result, total)
            self.reporter.run_finished(test, outcome.result)
            return outcome

    async def _load(self, suite: LoadedSuite, tests: list[PlannedTest], directory: RunDirectory,
                    models: ModelRegistry | None, traces: SuiteTraces | None) -> None:
        """`load:`: the suite's tests again, stage by stage (tamesu.engine.load); `load/SUITE.json` and the
        reporters get each stage's numbers."""
        from tamesu.engine.load import load_finished, run_load, unreached

        runnable = [t for t in tests if not t.spec.skip]
        if not runnable or suite.spec.load is None or not self.options.load \
                or self.halts.suite_stopped(suite.name) or self.stopping.signum is not None:
            return
        folder = directory.root / "load" / slug(suite.name)

        async def one_run(test: PlannedTest, number: int, run_dir: Path) -> RunOutcome | None:
            inputs = RunInputs(
                test=test, number=number, attempt=1, run_id=f"{directory.root.name}-load-{number}",
                artifacts_dir=run_dir, secrets=self.plan.secrets, before_each=self._hooks(suite, "before_each"),
                after_each=self._hooks(suite, "after_each"), models=models, stop=self.stopping, going=self._going,
                user_factory=None if test.user_factory is None else partial(test.user_factory, number=number),
                traces=traces)
            try:
                outcome = await execute_run(inputs)
            except Exception as exc:  # as in _attempts: only this conversation's error
                outcome = crashed_run(inputs, exc)
            # its artifacts, as docs/performance.md says (none were written: a failing load run left nothing)
            with contextlib.suppress(OSError):
                outcome = written(directory, run_dir, outcome, inputs)
            if self.stopping.signum is not None and outcome.result.status == "error":
                return None  # cut short by Ctrl-C or SIGTERM: no verdict, not an error of the agent's
            if outcome.budget_exceeded:  # no stage goes on spending past the budget
                self.halts.over_budget(test)
            return outcome

        report = await run_load(suite.spec.load, suite.name, runnable, folder, one_run,
                                lambda: self.halts.reason or self.stopping.reason, unreached(runnable, self.results))
        try:
            directory.write_json(folder.with_suffix(".json"), report)
        except OSError as exc:
            self._cannot_write(folder.with_suffix(".json"), exc)
        self._runs_said.extend(load_finished(self.reporter, report))

    async def _attempts(self, test: PlannedTest, number: int, rerun: int, test_dir: Path, directory: RunDirectory,
                        models: ModelRegistry | None, traces: SuiteTraces | None = None) -> RunOutcome | None:
        """One run (its seed moved on by `rerun`), made again on an error up to `retries` times; None when it
        was cut short or cannot be written."""
        outcome: RunOutcome | None = None
        spent = 0.0
        for attempt in range(1, test.spec.retries + 2):
            run_dir = test_dir / run_dir_name(number, attempt, rerun)
            inputs = RunInputs(
                test=test, number=number, attempt=attempt, run_id=f"{directory.root.name}-{number}",
                artifacts_dir=run_dir, secrets=self.plan.secrets, rerun=rerun,
                before_each=self._hooks(test.suite, "before_each"), after_each=self._hooks(test.suite, "after_each"),
                models=models, update_golden=self.options.update_golden, going=self._going,
                write_golden=self.options.write_golden,
                stop=self.stopping,
                user_factory=None if test.user_factory is None else partial(test.user_factory, number=number),
                traces=traces,
            )
            try:
                outcome = await execute_run(inputs)
            except Exception as exc:  # what escaped the run's own guards is still only this run's error
                outcome = crashed_run(inputs, exc)
            spent += outcome.result.duration_ms
            outcome.spent_ms = spent
            if test.classify is not None and self.stopping.signum is None:
                test.classify(outcome.result, number)
            if self.stopping.signum is not None and outcome.result.status == "error":
                # cut short: no verdict, so no line of results.jsonl (the test did not finish) and no retry; what
                # the conversation said until then is kept in its run folder, not lost
                with contextlib.suppress(OSError):
                    directory.write_json(run_dir / "transcript.json", outcome.transcript)
                    directory.write_json(run_dir / "result.json", outcome.result)
                return None
            try:
                outcome = written(directory, run_dir, outcome, inputs)
            except OSError as exc:
                self._cannot_write(run_dir / "result.json", exc)
                return None
            for message in outcome.warnings:
                self.reporter.warning(f"{test.id}: {message}")
                self._runs_said.append(f"{test.id}: {message}")  # CI reading run.json learns it too
            if outcome.budget_exceeded:
                self.halts.over_budget(test)
            if outcome.result.status != "error" or outcome.budget_exceeded or outcome.result.fault == "suite":
                break  # `retries` are for infrastructure: the suite's own mistake would come out the same again
        return outcome


class RunFolderError(InfraError):
    """The run folder cannot be created or written before any test runs."""


def _binds_fixed_addr(test: PlannedTest) -> bool:
    names = [test.spec.target] + ([test.spec.counterpart.target] if test.spec.counterpart else [])
    return any(test.suite.targets[name].fixed_addrs() for name in names if name in test.suite.targets)
