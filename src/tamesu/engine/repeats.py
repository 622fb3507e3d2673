"""A test's repeated runs: how many to make (all of `repeat`, or adaptively until the verdict is decided),
and the test's verdict and statistics from the runs made.

Adaptive repeats stop by `results.stats.sequential_decision`: a confidence sequence, which holds at every
number of runs at once, so deciding after each run keeps the stated error rate (docs/repeats.md says why).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from tamesu.plan import PlannedTest
from tamesu.results.records import RunResult, RunSummary, TestResult, TestStatus
from tamesu.results.stats import (
    AdaptiveOutcome,
    RepeatStats,
    repeat_stats,
    sequence_interval,
    sequential_decision,
)
from tamesu.suite.schema import AdaptiveSpec

Outcome = TypeVar("Outcome")
GRADED = ("passed", "failed")
"""The runs a verdict counts: a skipped run (no input to give), an inconclusive one (the simulated user spoiled
it) and an error (the environment broke it: a hook, the network, a judge that could not answer) say nothing of
the agent."""
OPEN = ("inconclusive", "error")
"""Runs that were made but say nothing of the agent: they count neither way, and a fixed number of runs they
leave undecided (had they passed, or failed, the verdict would differ) is not decided by the others."""


def run_dir_name(number: int, attempt: int = 1, rerun: int = 0) -> str:
    """`run-3`, `run-3-retry-1` (an error retried), `run-3-rerun-1` (an inconclusive run with a new seed)."""
    name = f"run-{number}" + (f"-rerun-{rerun}" if rerun else "")
    return name + (f"-retry-{attempt - 1}" if attempt > 1 else "")


def _tally(results: list[RunResult]) -> tuple[int, int]:
    graded = [r for r in results if r.status in GRADED]
    return sum(r.status == "passed" for r in graded), len(graded)


async def run_adaptively(start: Callable[[int], Awaitable[Outcome | None]], result_of: Callable[[Outcome], RunResult],
                         max_runs: int, adaptive: AdaptiveSpec, threshold: float, parallel: int
                         ) -> list[Outcome | None]:
    """`min_runs` runs, then more (as many at once as the run may start) until the verdict is decided or
    `max_runs` were made. A run that was not made (`None`: stopped) ends the loop."""
    first = min(adaptive.min_runs, max_runs)
    outcomes: list[Outcome | None] = list(await asyncio.gather(*(start(n) for n in range(1, first + 1))))
    while len(outcomes) < max_runs and None not in outcomes:
        passes, graded = _tally([result_of(o) for o in outcomes if o is not None])
        if sequential_decision(passes, graded, threshold, adaptive.confidence, adaptive.min_runs) is not None:
            break
        wave = range(len(outcomes) + 1, min(max_runs, len(outcomes) + max(1, parallel)) + 1)
        outcomes += await asyncio.gather(*(start(n) for n in wave))
    return outcomes


def _needed(threshold: float, runs: int) -> int:
    """The passes of `runs` that reach `threshold` (0.5 of 4 needs 2)."""
    return max(0, math.ceil(threshold * runs - 1e-9))


def _open(runs: list[RunResult], passes: int, threshold: float) -> tuple[TestStatus, str] | None:
    """A fixed number of runs, some of them saying nothing of the agent (OPEN): the verdict is the runs' only when
    it holds whatever those runs would have been; else the test is as undecided as they are."""
    made = [r for r in runs if r.status in (*GRADED, *OPEN)]
    spoiled = [r for r in made if r.status in OPEN]
    needed = _needed(threshold, len(made))
    if not spoiled or passes >= needed or passes + len(spoiled) < needed:
        return None
    # an error among them makes the test the environment's (exit 3): its runs are to be made again
    errors = [r for r in spoiled if r.status == "error"]
    shown = (errors or spoiled)[0]
    said = _open_said(len(errors), len(spoiled) - len(errors), len(made))
    return ("error" if errors else "inconclusive"), (
        f"{said}, too many to decide: {passes} passed, pass_threshold {threshold:g} needs {needed} of {len(made)} "
        f"(run {shown.run}: {shown.error or shown.fault_reason or 'no reason given'})")


def _open_said(errors: int, inconclusive: int, made: int) -> str:
    """`2 of 4 runs errored`, `1 errored and 2 inconclusive of 4 runs`."""
    if errors and inconclusive:
        return f"{errors} errored and {inconclusive} inconclusive of {made} runs"
    return f"{errors or inconclusive} of {made} runs {'errored' if errors else 'inconclusive'}"


def verdict(test: PlannedTest, runs: list[RunResult], adaptive: AdaptiveSpec | None, max_runs: int
            ) -> tuple[TestStatus, str | None, RepeatStats | None]:
    """The test's status, the reason when the runs as a whole decide it, and its statistics (for more than
    one run, or adaptive repeats)."""
    threshold = test.spec.pass_threshold
    passes, graded = _tally(runs)
    stats = None
    if len(runs) > 1 or max_runs > 1:
        stats = repeat_stats(passes, graded, threshold, test.spec.pass_k)
        if adaptive is not None:
            stats.adaptive = AdaptiveOutcome(
                confidence=adaptive.confidence, min_runs=adaptive.min_runs, max_runs=max_runs,
                runs_saved=max(0, max_runs - len(runs)),
                interval=sequence_interval(passes, graded, threshold, adaptive.confidence))
    if not graded:
        if any(r.status == "error" for r in runs):
            return "error", None, stats  # each run's error says why
        spoiled = next((r for r in runs if r.status == "inconclusive"), None)
        if spoiled is not None:
            return "inconclusive", spoiled.fault_reason, stats
        return "skipped", None, stats
    if adaptive is not None and stats is not None:
        decided = sequential_decision(passes, graded, threshold, adaptive.confidence, adaptive.min_runs)
        if decided is None and len(runs) >= max_runs:
            # every run made and the stopping rule still open: the runs are judged as a fixed number of them
            # (the interval the statistics show), not failed while the line above them says "decided: passes"
            decided = stats.decided
        if decided == "pass":
            return "passed", None, stats
        words = "undecided" if decided is None else "decided below the threshold"
        reason = f"{words} at {graded} runs: {stats.line()} (pass_threshold {threshold:g})"
        errors = sum(r.status == "error" for r in runs)
        inconclusive = sum(r.status == "inconclusive" for r in runs)
        if decided is None and errors + inconclusive:
            # the runs that said nothing might have decided it: not the agent's failure
            return ("error" if errors else "inconclusive"), \
                f"{reason}; {_open_said(errors, inconclusive, len(runs))}", stats
        return "failed", reason, stats
    undecided = _open(runs, passes, threshold)
    if undecided is not None:
        return undecided[0], undecided[1], stats
    made = [r for r in runs if r.status in (*GRADED, *OPEN)]
    if passes >= _needed(threshold, len(made)):
        return "passed", None, stats
    if stats is None:
        return "failed", None, stats  # one run: its failures say why
    # the runs together failed it, no one run did: the verdict says so (a failing run alone read as the cause)
    unsaid = [r for r in made if r.status in OPEN]
    reason = f"{passes} of {len(made)} runs passed, rate {passes / len(made):.2f} below pass_threshold {threshold:g}"
    if unsaid:
        errors = sum(r.status == "error" for r in unsaid)
        reason += f"; {_open_said(errors, len(unsaid) - errors, len(made))}, too few to reach it had they passed"
    return "failed", reason, stats


def aggregate(test: PlannedTest, runs: list[RunResult], test_dir: Path, root: Path, today: dt.date,
              adaptive: AdaptiveSpec | None = None, max_runs: int = 1) -> TestResult:
    """The test's result from its runs. A test whose every run was skipped is skipped; one whose every run
    the simulated user spoiled is inconclusive (exit 1, the audit's finding as its reason)."""
    status, reason, stats = verdict(test, runs, adaptive, max_runs)
    skip_reason = next((r.skip_reason for r in runs if r.skip_reason), "skipped") if status == "skipped" else None
    quarantine = test.spec.quarantine if test.quarantined(today) else None
    if status in ("failed", "error", "inconclusive") and quarantine is not None:
        status = "quarantined"
    folder = os.fspath(test_dir.relative_to(root))  # once a test, not a path made and cut again for each run
    summaries = [
        RunSummary(run=r.run, status=r.status, attempts=r.attempt, reruns=r.rerun, error=r.error, fault=r.fault,
                   fault_reason=r.fault_reason, failures=r.failed_assertions, not_evaluated=r.not_evaluated,
                   metrics=r.metrics, dir=os.path.join(folder, run_dir_name(r.run, r.attempt, r.rerun)))
        for r in sorted(runs, key=lambda r: r.run)]
    return TestResult(
        suite=test.suite.name, test=test.name, id=test.id, case=test.case, tags=test.tags, target=test.target_name,
        status=status, passed_runs=sum(r.status == "passed" for r in runs), total_runs=len(runs),
        inconclusive_runs=sum(r.status == "inconclusive" for r in runs),
        error_runs=sum(r.status == "error" for r in runs),
        pass_threshold=test.spec.pass_threshold, quarantine=quarantine.reason if quarantine else None,
        skip_reason=skip_reason, reason=reason, stats=stats, runs=summaries,
    )
