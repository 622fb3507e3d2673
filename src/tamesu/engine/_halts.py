"""Why no more runs of a test start: fail-fast, a budget passed (the whole invocation's or one suite's), a run
folder that cannot take a result. Ctrl-C and SIGTERM are `engine.stop`'s: they also end the runs in flight."""

from __future__ import annotations

import datetime as dt

from tamesu.models.ledger import Ledger
from tamesu.plan import PlannedTest
from tamesu.results.records import RunResult, TestResult
from tamesu.suite.schema import AdaptiveSpec

FAIL_FAST = "fail-fast: an earlier test failed"


class Halts:
    def __init__(self, ledger: Ledger, *, fail_fast: bool, repeat: int | None, today: dt.date) -> None:
        self.ledger = ledger
        self.fail_fast = fail_fast
        self.repeat = repeat
        """`--repeat N`, which turns a suite's adaptive repeats into N plain runs."""
        self.today = today
        self.reason: str | None = None
        """Why no more runs start at all: fail-fast, the invocation's budget, the run folder."""
        self.suites: dict[str, str] = {}
        """Suites whose own budget was passed: their runs stop, the others go on."""
        self.budget_exceeded = False
        self._failures: dict[str, int] = {}
        """Failed runs per test so far: fail-fast stops once a test cannot pass (`could_pass`)."""

    def adaptive(self, test: PlannedTest, repeat: int) -> AdaptiveSpec | None:
        # `--repeat N` keeps its meaning, N runs of every test: adaptive repeats are the suite's own `repeat`
        return test.spec.adaptive if self.repeat is None and repeat > 1 else None

    def could_pass(self, test: PlannedTest, runs: int) -> bool:
        """Whether `test` may still reach its pass_threshold with the runs it failed so far, of `runs`."""
        if self.adaptive(test, runs) is not None:
            return True  # decided by its sequence of runs, not by counts
        return (runs - self._failures.get(test.id, 0)) / runs >= test.spec.pass_threshold - 1e-9

    def stopped(self, test: PlannedTest) -> str | None:
        """Why no more runs of `test` start, or None."""
        return self.reason or self.suites.get(test.suite.name)

    def suite_stopped(self, suite: str) -> bool:
        return self.reason is not None or suite in self.suites

    def said(self) -> str | None:
        """What run.json says stopped the run."""
        return self.reason or "; ".join(self.suites.values()) or None

    def over_budget(self, test: PlannedTest) -> None:
        """A run passed a budget: the whole invocation's stops every run after it; a suite's own, stricter one
        only that suite's (it stopped the other suites too, so a run's results hung on its files' order)."""
        self.budget_exceeded = True
        if self.ledger.exceeded:
            self.reason = "the budget was exceeded"
        else:
            self.suites[test.suite.name] = f"the budget of suite {test.suite.name} was exceeded"

    def run_finished(self, test: PlannedTest, result: RunResult, total: int) -> None:
        """Counted before the run's slot is released, so no later run slips in after a failure."""
        # a skipped run (the agent awaited input nobody gave) is not a failure
        failed = result.status in ("failed", "error") and not test.quarantined(self.today)
        if failed:
            self._failures[test.id] = self._failures.get(test.id, 0) + 1
        # a repeated test fails by its runs together (`pass_threshold`): fail-fast waits until it cannot pass
        if self.fail_fast and failed and self.reason is None and not self.could_pass(test, total):
            self.reason = FAIL_FAST

    def test_finished(self, test: PlannedTest, result: TestResult, adaptive: AdaptiveSpec | None) -> None:
        if self.fail_fast and result.status in ("failed", "error") and self.reason is None \
                and adaptive is not None and not test.quarantined(self.today):
            self.reason = FAIL_FAST  # adaptive runs decide by their sequence, not counts
