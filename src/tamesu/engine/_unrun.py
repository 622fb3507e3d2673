"""The result of a test that never ran: skipped (its own `skip`, or the run stopped first), or an error of what
it needed before it could start (a failing `before_all` hook, a traces receiver that could not listen)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from tamesu.plan import PlannedTest
from tamesu.results.records import RunSummary, TestResult


def unrun(test: PlannedTest, status: Literal["skipped", "error"], reason: str, today: dt.date) -> TestResult:
    if status == "error" and test.spec.skip:  # it would not have run: its own skip says why, not the hook
        return unrun(test, "skipped", test.spec.skip if isinstance(test.spec.skip, str) else "skip: true", today)
    # a quarantined test never changes the exit code, also when a failing before_all hook kept it from starting
    quarantine = test.spec.quarantine if status == "error" and test.quarantined(today) else None
    return TestResult(
        suite=test.suite.name, test=test.name, id=test.id, case=test.case, tags=test.tags,
        target=test.target_name, status="quarantined" if quarantine else status,
        quarantine=quarantine.reason if quarantine else None,
        pass_threshold=test.spec.pass_threshold, skip_reason=reason if status == "skipped" else None,
        # a test that never started for a hook or a receiver is the environment's, as every run error is
        runs=[RunSummary(run=0, status=status, dir="", error=reason, fault="environment", fault_reason=reason)
              ] if status == "error" else [],
    )
