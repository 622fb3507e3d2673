"""A suite's `load:` profile: its tests again at each `ramp` concurrency for `hold`, measured per stage.

Each stage keeps `concurrency` conversations going: a worker takes the suite's tests in turn (worker w starts at
test w, so the stage mixes them) and starts the next as soon as its last ends, until `hold` has passed; a
conversation under way then is let finish and counted. Every conversation is a full run (hooks, grading), its
artifacts under `load/SUITE/stage-N-xC/TEST/run-K/`; one cut short by Ctrl-C is not counted. Only the stage's
counts and latency percentiles are kept (`tamesu.results.load`). Stages run one after another, so each measures
the agent at one concurrency.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from tamesu.engine.artifacts import slug
from tamesu.engine.conversation import RunOutcome
from tamesu.plan import PlannedTest
from tamesu.results.along_the_way import AlongTheWay
from tamesu.results.load import LoadReport, LoadStage, Percentiles
from tamesu.results.records import RunResult, TestResult
from tamesu.suite.load_spec import LoadSpec

OneRun = Callable[[PlannedTest, int, Path], Awaitable[RunOutcome | None]]
"""(test, number, artifacts folder) -> the run's outcome; None: cut short (Ctrl-C), no verdict to count."""


class Warns(Protocol):
    def warning(self, message: str) -> None: ...


def load_finished(reporter: Warns, report: LoadReport) -> list[str]:
    """To the reporters that show a load report (the console's table); the others have no such method. Its
    warnings are said as every run's are, and returned for run.json."""
    show = getattr(reporter, "load_finished", None)
    if callable(show):
        show(report)
    said = [f"load {report.suite}: {warning}" for warning in report.warnings]
    for line in said:
        reporter.warning(line)
    return said


_VARYING = re.compile(r"\b[0-9a-f]{8,}\b|\d+(?:\.\d+)?")
"""What differs between two runs' words of one warning (a trace id, a count, a time): the kind is the rest."""


class Said:
    """What a ramp's runs warned of, once per kind (`_VARYING` aside) with how many runs did, the first run's words
    kept; and the notable events of every run (`results.along_the_way`)."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}
        self._runs: dict[str, int] = {}
        self.along = AlongTheWay()

    def add(self, test: PlannedTest, outcome: RunOutcome) -> None:
        self.along.add([outcome.result])
        for message in dict.fromkeys(outcome.warnings):  # a run saying one thing twice is one run
            kind = f"{test.id}: {_VARYING.sub('#', message)}"
            self._first.setdefault(kind, f"{test.id}: {message}")
            self._runs[kind] = self._runs.get(kind, 0) + 1

    def lines(self) -> list[str]:
        said = [words if (runs := self._runs[kind]) == 1 else f"{runs} runs warned: {words} (the first's words)"
                for kind, words in self._first.items()]
        return said + ([line] if (line := self.along.line()) else [])


def unreached(tests: list[PlannedTest], results: list[TestResult]) -> str | None:
    """Why the ramp is not run: every test of the suite was an error (the agent not up, a before_each hook
    failing), so each stage would only count that error again for its whole `hold`; None when one got further."""
    ids = {t.id for t in tests}
    mine = [r for r in results if r.id in ids]
    if not mine or any(r.status != "error" for r in mine):
        return None
    first = next((run.error for r in mine for run in r.runs if run.error), None) or "no reason given"
    return f"not run: every test of the suite was an error (the first: {first})"


async def run_load(spec: LoadSpec, suite: str, tests: list[PlannedTest], folder: Path, one_run: OneRun,
                   stopped: Callable[[], str | None], not_run: str | None = None) -> LoadReport:
    report = LoadReport(suite=suite, tests=[t.name for t in tests], stopped=not_run)
    if not_run is not None:
        return report
    said = Said()
    for index, concurrency in enumerate(spec.ramp, start=1):
        if stopped() is not None:
            break
        stage_dir = folder / f"stage-{index}-x{concurrency}"
        report.stages.append(await _stage(spec, concurrency, tests, stage_dir, one_run, stopped, said))
    report.warnings = said.lines()
    if (why := stopped()) is not None:
        # how far the last stage got, whether or not stages were left after it (a Ctrl-C in stage 1 of 3 too)
        last = report.stages[-1] if report.stages else None
        report.stopped = why if last is None or last.duration_s >= spec.hold else \
            f"{why} (its last stage cut after {last.duration_s:g}s of {spec.hold:g}s)"
    return report


async def _stage(spec: LoadSpec, concurrency: int, tests: list[PlannedTest], stage_dir: Path, one_run: OneRun,
                 stopped: Callable[[], str | None], said: Said) -> LoadStage:
    started = time.monotonic()
    deadline = started + spec.hold
    results: list[RunResult] = []
    numbers = iter(range(1, spec.max_runs + 1))

    async def worker(first: int) -> None:
        turn = first
        while time.monotonic() < deadline and stopped() is None:
            number = next(numbers, None)
            if number is None:
                return
            test = tests[turn % len(tests)]
            turn += 1
            # a folder as every run's is named: a test name with `/` or `..` in it stays inside the run folder
            outcome = await one_run(test, number, stage_dir / slug(test.name) / f"run-{number}")
            if outcome is not None:
                results.append(outcome.result)
                said.add(test, outcome)

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    stage = summarise(concurrency, spec.hold, time.monotonic() - started, results)
    if next(numbers, None) is None and stopped() is None and stage.duration_s < spec.hold:
        # its throughput and latencies are of a shorter stage than asked: said, so no one reads them as a hold's
        stage.cut = f"max_runs ({spec.max_runs}) reached after {stage.duration_s:g}s of its {spec.hold:g}s hold"
    return stage


def summarise(concurrency: int, hold: float, duration: float, results: list[RunResult]) -> LoadStage:
    latencies: list[float] = []
    first_audio: list[float] = []
    first_token: list[float] = []
    for result in results:
        for turn in result.turns:
            if turn.user is None or turn.cut is not None:
                continue  # a greeting answers no turn of the user's; a turn the timeout cut short has no answer
            agent = turn.agent
            latencies.append(agent.latency_ms)
            if (audio := agent.measures.get("time_to_first_audio_ms")) is not None:
                first_audio.append(audio)
            if (token := agent.first_token_ms) is not None:
                first_token.append(token)
    statuses = [r.status for r in results]
    return LoadStage(
        concurrency=concurrency, hold_s=hold, duration_s=round(duration, 3), runs=len(results),
        passed=statuses.count("passed"), failed=statuses.count("failed"), errors=statuses.count("error"),
        inconclusive=statuses.count("inconclusive"), skipped=statuses.count("skipped"),
        runs_per_s=round(len(results) / duration, 3) if duration > 0 else 0.0,
        turn_latency_ms=Percentiles.of(latencies), time_to_first_audio_ms=Percentiles.of(first_audio),
        first_token_ms=Percentiles.of(first_token))
