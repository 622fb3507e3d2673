"""`--baseline`: what changed since an earlier run. Regressions, fixes, new and removed tests, metric moves.

A quarantined test never counts as a regression (that is what quarantine is for): it is listed on its own so
the failure it hides stays visible. A baseline does not change the exit code: a regression is a failing test,
which already fails the run.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from tamesu.report.load import LoadedRun, mean_metrics
from tamesu.report.words import failure_reason as failure_reason  # its users import it from here too
from tamesu.results.records import SCHEMA_VERSION, TestResult, TestStatus
from tamesu.results.sharding import Shard, in_shard


class StatusChange(BaseModel):
    id: str
    before: TestStatus
    now: TestStatus
    reason: str = ""
    """Why it fails now (the first failing assertion or the error), for regressions and quarantined tests."""


class MetricChange(BaseModel):
    id: str
    metric: str
    before: float
    now: float
    change: float | None
    """(now - before) / before; None when the baseline's value was 0."""


class Comparison(BaseModel):
    """baseline.json in the run directory: the comparison, kept so `tamesu report` can show it again."""

    schema_version: int = SCHEMA_VERSION
    baseline: str
    """The baseline run directory's name."""
    tolerance: float
    regressions: list[StatusChange] = Field(default_factory=list)
    fixes: list[StatusChange] = Field(default_factory=list)
    quarantined: list[StatusChange] = Field(default_factory=list)
    """Failing now under quarantine: not regressions, but shown."""
    skipped: list[StatusChange] = Field(default_factory=list)
    """Graded in the baseline, skipped now (`reason`: the skip's): no verdict any more, which no exit code shows."""
    new: list[str] = Field(default_factory=list)
    """Tests with no earlier verdict: not in the baseline, or skipped there."""
    removed: list[str] = Field(default_factory=list)
    metric_changes: list[MetricChange] = Field(default_factory=list)

    def headline(self) -> str:
        parts = [_n(len(self.regressions), "regression"), _n(len(self.fixes), "fix", "fixes"),
                 f"{len(self.new)} new", f"{len(self.removed)} removed",
                 _n(len(self.metric_changes), "metric change")]
        if self.quarantined:
            parts.insert(2, f"{len(self.quarantined)} quarantined")
        if self.skipped:
            parts.insert(-3, f"{len(self.skipped)} skipped now")
        return ", ".join(parts)


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


_FAILING = {"failed", "error", "inconclusive"}
"""What no longer passes: an inconclusive test is not the agent's failure, but it no longer shows the agent
passes, and it fails the run (exit 1): a passed test gone inconclusive is listed, its reason says why."""


def compare(current: LoadedRun, baseline: LoadedRun, tolerance: float = 0.2) -> Comparison:
    before = {r.id: r for r in baseline.results}
    now = {r.id: r for r in current.results}
    result = Comparison(baseline=baseline.name, tolerance=tolerance)
    for test_id, test in now.items():
        old = before.get(test_id)
        if old is None or (old.status == "skipped" and test.status != "skipped"):
            result.new.append(test_id)  # nothing earlier to compare with: a test un-skipped fails as a new one would
            continue
        change = StatusChange(id=test_id, before=old.status, now=test.status, reason=failure_reason(test))
        if test.status == "skipped":
            if old.status != "skipped":
                result.skipped.append(change)
        elif test.status == "quarantined":
            result.quarantined.append(change)
        elif old.status == "passed" and test.status in _FAILING:
            result.regressions.append(change)
        elif old.status in (*_FAILING, "quarantined") and test.status == "passed":
            result.fixes.append(change.model_copy(update={"reason": failure_reason(old)}))
        result.metric_changes.extend(_metric_changes(test_id, old, test, tolerance))
    shard = Shard.parse(current.plan.shard) if current.plan and current.plan.shard else None
    # a shard only ran its share of the tests: the others are elsewhere, not removed
    result.removed = [i for i in before if i not in now and (shard is None or in_shard(i, shard))]
    result.metric_changes.sort(key=lambda m: (-abs(m.change) if m.change is not None else float("-inf"), m.id))
    return result


MIN_MS = 25.0
"""A timing metric (`..._ms`, its `_pNN`) must move by more than this as well as by the tolerance to count."""
_TIMED = ("_ms", "_ms_p50", "_ms_p95", "_ms_p99", "_ms_max", "_ms_min", "_ms_mean")


def _metric_changes(test_id: str, old: TestResult, new: TestResult, tolerance: float) -> list[MetricChange]:
    if not old.runs or not new.runs:
        return []
    before, now = mean_metrics(old), mean_metrics(new)
    changes = []
    for name in sorted(before.keys() & now.keys()):
        a, b = before[name], now[name]
        if a == b or _folded(name, before, now):
            continue  # the plain name's line says it
        if name.endswith(_TIMED) and abs(b - a) < MIN_MS:
            continue  # a few milliseconds of a fast agent's jitter is no change (1.9 ms -> 7.3 ms read +283%)
        if a == 0:
            changes.append(MetricChange(id=test_id, metric=name, before=a, now=b, change=None))
        elif abs(b - a) > tolerance * abs(a):
            changes.append(MetricChange(id=test_id, metric=name, before=a, now=b, change=(b - a) / abs(a)))
    return changes


_FIGURE = re.compile(r"^(?P<base>.+)_(?:p\d{1,2}(?:\.\d+)?|max|min|mean)$")
_ROUNDED = 1e-3
"""result.json rounds a distribution's percentiles to 3 decimals, and not its plain name (the worst turn)."""


def _folded(name: str, before: dict[str, float], now: dict[str, float]) -> bool:
    """A figure of a distribution (`_p50`, `_p95`, `_max`...) that equals its plain name in both runs: one turn's
    latency is its own p50, p95 and max, and four lines of one move say it once."""
    match = _FIGURE.match(name)
    base = match.group("base") if match else None
    return base is not None and base in before and base in now and \
        abs(before[name] - before[base]) <= _ROUNDED and abs(now[name] - now[base]) <= _ROUNDED


def describe_change(change: MetricChange) -> str:
    moved = "new" if change.change is None else f"{change.change:+.0%}"
    return f"{change.metric} {_num(change.before)} -> {_num(change.now)} ({moved})"


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.3g}"


def console_lines(comparison: Comparison, limit: int = 20) -> list[tuple[str, str]]:
    """(style, line) pairs for the console, most important first."""
    lines: list[tuple[str, str]] = [("bold", f"compared with {comparison.baseline}: {comparison.headline()}")]
    for change in comparison.regressions[:limit]:
        lines.append(("red", f"  regression  {change.id}: was {change.before}, now {change.now}: {change.reason}"))
    for change in comparison.fixes[:limit]:
        lines.append(("green", f"  fixed       {change.id}: was {change.before}"))
    for change in comparison.quarantined[:limit]:
        lines.append(("yellow", f"  quarantined {change.id}: was {change.before} (not a regression)"))
    for change in comparison.skipped[:limit]:
        lines.append(("yellow", f"  skipped     {change.id}: was {change.before}, skipped now: {change.reason}"))
    for test_id in comparison.new[:limit]:
        lines.append(("dim", f"  new         {test_id}"))
    for test_id in comparison.removed[:limit]:
        lines.append(("dim", f"  removed     {test_id}"))
    for metric in comparison.metric_changes[:limit]:
        lines.append(("dim", f"  metric      {metric.id}: {describe_change(metric)}"))
    cut = sum(max(0, len(group) - limit) for group in (comparison.regressions, comparison.fixes,
                                                       comparison.quarantined, comparison.skipped, comparison.new,
                                                       comparison.removed, comparison.metric_changes))
    if cut:
        lines.append(("dim", f"  ... and {cut} more (all of them in baseline.json)"))
    return lines
