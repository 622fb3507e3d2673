"""What `tamesu view` reads from the store. Every query is bounded (a window of recent runs, a LIMIT), so a
page costs the same on a store of ten runs and of ten thousand."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError

from tamesu.report.load import LoadedRun, PlanRecord
from tamesu.results.records import AssertionResult, RunSummary, RunSummaryFile, TestResult, count, exit_code_for
from tamesu.results.stats import RepeatStats
from tamesu.store import _tables as t
from tamesu.store.db import Store

WINDOW = 200
"""Pass rates and flakiness are over the newest WINDOW runs: a test's recent behaviour, at a bounded cost."""


@dataclass
class RunRow:
    id: str
    started_at: str
    commit: str | None
    branch: str | None
    shards: list[str]
    dirs: list[str]
    counts: dict[str, int]
    finished: bool
    exit_code: int | None

    @property
    def pass_rate(self) -> float | None:
        ran = self.counts.get("total", 0) - self.counts.get("skipped", 0)
        return self.counts.get("passed", 0) / ran if ran else None


ONE_RUN = "its repeats"
"""What a flaky test is flaky on when its runs without a commit (no git checkout) passed and failed among the
repeats of one result."""


@dataclass
class TestRow:
    test_id: str
    results: int
    passed: int
    flaky_commits: list[str]
    """Commits on which the test both passed and failed."""
    last_status: str

    @property
    def pass_rate(self) -> float:
        return self.passed / self.results if self.results else 0.0


@dataclass
class RunOfTest:
    number: int
    attempt: int
    status: str
    error: str | None
    dir: str | None
    transcript: list[dict[str, Any]]
    trace_ids: list[str]
    assertions: list[dict[str, Any]]
    metrics: dict[str, float]
    fault: str | None = None
    fault_reason: str | None = None
    spans: dict[str, Any] = field(default_factory=dict)
    """Each turn's waterfall by turn number (report.waterfall.TurnSpans as JSON), with `traces:`."""
    not_evaluated: int = 0
    """The checks the run's root cause kept from grading (docs/faults.md, "Root cause first")."""

    @property
    def failures(self) -> list[AssertionResult]:
        """Its failed checks, as a run folder has them (what a report says of them reads them so)."""
        return [AssertionResult(name=a["name"], passed=False, reason=a["reason"], on_turn=_turn(a["on_turn"]))
                for a in self.assertions if not a["passed"]]


@dataclass
class HistoryEntry:
    run_id: str
    started_at: str
    commit: str | None
    status: str
    duration_ms: float | None
    run_dir: str
    slo: dict[str, float]
    runs: list[RunOfTest] = field(default_factory=list)
    stats: dict[str, Any] | None = None
    """A repeated test's statistics (results.stats.RepeatStats as JSON)."""
    reason: str | None = None


@dataclass
class DriftCase:
    test_id: str
    assertion: str
    transcript: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    """[{run_id, model, prompt_version, passed, score, reason}] for the same transcript."""


class Reader:
    def __init__(self, store: Store) -> None:
        self.engine = store.engine

    def _recent_run_ids(self, connection: sa.Connection, limit: int) -> list[str]:
        return list(connection.execute(sa.select(t.runs.c.id).order_by(t.runs.c.started_at.desc())
                                       .limit(limit)).scalars())

    def runs(self, limit: int = 100) -> list[RunRow]:
        """The newest runs, newest first, each with every shard's counts summed."""
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.runs).order_by(t.runs.c.started_at.desc()).limit(limit)).all()
            return self._with_parts(connection, rows)

    def run(self, run_id: str) -> RunRow | None:
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.runs).where(t.runs.c.id == run_id)).all()
            found = self._with_parts(connection, rows)
        return found[0] if found else None

    def _with_parts(self, connection: sa.Connection, rows: Sequence[Any]) -> list[RunRow]:
        ids = [row.id for row in rows]
        parts: dict[str, list[Any]] = defaultdict(list)
        for part in connection.execute(sa.select(t.run_parts).where(t.run_parts.c.run_id.in_(ids))):
            parts[part.run_id].append(part)
        # a part still running (or killed) has no counts yet: count its finished tests
        open_parts = [p.id for ps in parts.values() for p in ps if p.counts is None]
        live: dict[int, dict[str, int]] = defaultdict(dict)
        if open_parts:
            query = (sa.select(t.test_results.c.part_id, t.test_results.c.status, sa.func.count())
                     .where(t.test_results.c.part_id.in_(open_parts))
                     .group_by(t.test_results.c.part_id, t.test_results.c.status))
            for part_id, status, n in connection.execute(query):
                live[part_id][status] = n
        out = []
        for row in rows:
            totals: dict[str, int] = defaultdict(int)
            for part in parts[row.id]:
                counts = part.counts if part.counts is not None else {**live[part.id],
                                                                       "total": sum(live[part.id].values())}
                for key, value in counts.items():
                    totals[key] += value
            mine = parts[row.id]
            finished = bool(mine) and all(p.finished_at for p in mine)
            codes = [p.exit_code for p in mine if p.exit_code is not None]
            out.append(RunRow(id=row.id, started_at=row.started_at, commit=row.commit, branch=row.branch,
                              shards=sorted(p.shard for p in mine if p.shard), dirs=[p.dir for p in mine],
                              counts=dict(totals), finished=finished, exit_code=max(codes) if codes else None))
        return out

    def tests(self, window: int = WINDOW) -> list[TestRow]:
        """Each test's pass rate over the newest runs, flaky ones (passed and failed on one commit, or among
        the repeats of one result) first."""
        with self.engine.connect() as connection:
            recent = self._recent_run_ids(connection, window)
            r = t.test_results.c
            counted = connection.execute(
                sa.select(r.test_id, sa.func.count(), sa.func.sum(sa.case((r.status == "passed", 1), else_=0)))
                .where(r.run_id.in_(recent), r.status != "skipped").group_by(r.test_id)).all()
            flaky: dict[str, list[str]] = defaultdict(list)
            tr = t.test_runs.c
            # an error is the environment's, not the test's: a quarantined test is failing when a run of it failed,
            # not when the agent could not be reached (it is `quarantined` whatever its runs did)
            failing = sa.or_(r.status == "failed", sa.and_(
                r.status == "quarantined", r.id.in_(sa.select(tr.test_result_id).where(tr.status == "failed"))))
            both = (sa.select(r.test_id, r.commit)
                    .where(r.run_id.in_(recent), r.commit.is_not(None))
                    .group_by(r.test_id, r.commit)
                    .having(sa.func.sum(sa.case((r.status == "passed", 1), else_=0)) > 0)
                    .having(sa.func.sum(sa.case((failing, 1), else_=0)) > 0))
            for test_id, commit in connection.execute(both):
                flaky[test_id].append(commit)
            # a repeated test whose own runs both passed and failed: flaky on that code, with or without git (a
            # run that errored is the environment's, not a failure: passes beside errors are not flaky)
            mixed = (sa.select(r.test_id, r.commit).distinct()
                     .join(t.test_runs, tr.test_result_id == r.id)
                     .where(r.run_id.in_(recent), r.passed_runs > 0, r.passed_runs < r.total_runs)
                     .group_by(r.id, r.test_id, r.commit)
                     .having(sa.func.sum(sa.case((tr.status == "failed", 1), else_=0)) > 0))
            for test_id, commit in connection.execute(mixed):
                if (commit or ONE_RUN) not in flaky[test_id]:
                    flaky[test_id].append(commit or ONE_RUN)
            newest = sa.select(r.test_id, sa.func.max(r.id).label("last")).where(r.run_id.in_(recent)) \
                .group_by(r.test_id).subquery()
            last = dict(connection.execute(sa.select(r.test_id, r.status).join(newest, r.id == newest.c.last)).all())
        rows = [TestRow(test_id=test_id, results=n, passed=int(passed or 0), flaky_commits=sorted(flaky[test_id]),
                        last_status=last.get(test_id, "?")) for test_id, n, passed in counted]
        rows.sort(key=lambda row: (not row.flaky_commits, row.pass_rate, row.test_id))
        return rows

    def history(self, test_id: str, limit: int = 50) -> list[HistoryEntry]:
        """The test's newest results, newest first, with every run's transcript, verdicts and metrics."""
        with self.engine.connect() as connection:
            r = t.test_results.c
            results = connection.execute(
                sa.select(t.test_results, t.run_parts.c.dir.label("run_dir"))
                .join(t.run_parts, t.run_parts.c.id == r.part_id)
                .where(r.test_id == test_id).order_by(r.started_at.desc(), r.id.desc()).limit(limit)).all()
            entries = {row.id: HistoryEntry(run_id=row.run_id, started_at=row.started_at, commit=row.commit,
                                            status=row.status, duration_ms=row.duration_ms, run_dir=row.run_dir,
                                            slo=row.slo or {}, stats=row.stats, reason=row.reason)
                       for row in results}
            runs = self._runs_of(connection, list(entries))
        for result_id, items in runs.items():
            entries[result_id].runs = items
        return list(entries.values())

    def _runs_of(self, connection: sa.Connection, result_ids: list[int]) -> dict[int, list[RunOfTest]]:
        if not result_ids:
            return {}
        rows = connection.execute(sa.select(t.test_runs).where(t.test_runs.c.test_result_id.in_(result_ids))
                                  .order_by(t.test_runs.c.number, t.test_runs.c.attempt)).all()
        run_ids = [row.id for row in rows]
        graded: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for a in connection.execute(sa.select(t.assertions).where(t.assertions.c.test_run_id.in_(run_ids))
                                    .order_by(t.assertions.c.id)):
            graded[a.test_run_id].append({"name": a.name, "passed": a.passed, "reason": a.reason or "",
                                          "score": a.score, "model": a.model, "prompt_version": a.prompt_version,
                                          "on_turn": a.on_turn, "fake": a.fake})
        out: dict[int, list[RunOfTest]] = defaultdict(list)
        for row in rows:
            out[row.test_result_id].append(RunOfTest(
                number=row.number, attempt=row.attempt, status=row.status, error=row.error, dir=row.dir,
                transcript=row.transcript or [], trace_ids=row.trace_ids or [], assertions=graded[row.id],
                metrics=dict(row.metrics or {}), fault=row.fault, fault_reason=row.fault_reason,
                spans=row.spans or {}, not_evaluated=row.not_evaluated or 0))
        return out

    def as_loaded_run(self, run_id: str, run: RunRow | None = None) -> LoadedRun | None:
        """A run from the store in the shape `--baseline` compares (its folder may be on another machine);
        `run` is its row when the caller read it already."""
        run = run if run is not None and run.id == run_id else self.run(run_id)
        if run is None:
            return None
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(t.test_results).where(t.test_results.c.run_id == run_id)
                                      .order_by(t.test_results.c.id)).all()
            runs = self._runs_of(connection, [row.id for row in rows])
        results = []
        for row in rows:
            summaries = [RunSummary(
                run=item.number, status=item.status, dir=item.dir or "", attempts=item.attempt, error=item.error,
                # with its turn, as the run folder has it: a regression's "why" names it as `--baseline`'s does
                failures=item.failures,
                fault=item.fault, fault_reason=item.fault_reason,
                metrics=item.metrics, not_evaluated=item.not_evaluated) for item in runs.get(row.id, [])]
            # the verdict over every run (an undecided adaptive test's "why"), as results.jsonl has it
            results.append(TestResult(
                suite=row.suite, test=row.name, id=row.test_id, case=row.case_name, tags=row.tags or [],
                target=row.target or "", status=row.status, passed_runs=row.passed_runs,
                total_runs=row.total_runs, duration_ms=row.duration_ms or 0.0, quarantine=row.quarantine,
                skip_reason=row.skip_reason, runs=summaries, reason=row.reason, stats=_stats(row.stats),
                pass_threshold=row.pass_threshold if row.pass_threshold is not None else 1.0))
        summary = RunSummaryFile(tamesu_version="?", started_at=run.started_at, finished_at="", duration_ms=0.0,
                                 exit_code=exit_code_for(results), counts=count(results))
        # a run of one shard holds that shard's tests alone: the others are elsewhere, not removed (as `--baseline`
        # reads its plan.json); a run made of several shards compares whole
        shard = run.shards[0] if len(set(run.shards)) == 1 and len(run.shards) == len(run.dirs) else None
        return LoadedRun(dir=Path(run_id), summary=summary, results=results, plan=PlanRecord(shard=shard))

    def drift(self, window: int = 500, limit: int = 50) -> list[DriftCase]:
        """Judged assertions that graded one transcript differently under different models or prompt versions."""
        with self.engine.connect() as connection:
            recent = self._recent_run_ids(connection, window)
            a, tr, res = t.assertions.c, t.test_runs.c, t.test_results.c
            grader = sa.func.coalesce(a.model, "") + "|" + sa.func.coalesce(a.prompt_version, "")
            judged = connection.execute(sa.select(tr.transcript_hash, a.name)
                      .select_from(t.assertions.join(t.test_runs, tr.id == a.test_run_id)
                                   .join(t.test_results, res.id == tr.test_result_id))
                      .where(res.run_id.in_(recent), a.model.is_not(None), tr.transcript_hash.is_not(None))
                      .group_by(tr.transcript_hash, a.name)
                      .having(sa.func.count(sa.distinct(grader)) > 1)
                      .having(sa.or_(sa.func.count(sa.distinct(a.passed)) > 1,
                                     sa.func.max(a.score) != sa.func.min(a.score)))
                      .limit(limit)).all()
            # every verdict of every case in one read (a read per case was up to 50 round trips a page)
            wanted = {(transcript_hash, name) for transcript_hash, name in judged}
            verdicts: dict[tuple[str, str], list[Any]] = defaultdict(list)
            if wanted:
                rows = connection.execute(
                    sa.select(tr.transcript_hash, a.name, res.run_id, res.test_id, tr.transcript, a.model,
                              a.prompt_version, a.passed, a.score, a.reason)
                    .select_from(t.assertions.join(t.test_runs, tr.id == a.test_run_id)
                                 .join(t.test_results, res.id == tr.test_result_id))
                    .where(tr.transcript_hash.in_({h for h, _ in wanted}), a.name.in_({n for _, n in wanted}))
                    .order_by(res.started_at, a.id)).all()
                for row in rows:
                    if (row.transcript_hash, row.name) in wanted:
                        verdicts[(row.transcript_hash, row.name)].append(row)
            cases = []
            for transcript_hash, name in judged:
                found = verdicts[(transcript_hash, name)]
                cases.append(DriftCase(
                    test_id=found[0].test_id, assertion=name, transcript=found[0].transcript or [],
                    verdicts=[{"run_id": row.run_id, "model": row.model, "prompt_version": row.prompt_version,
                               "passed": row.passed, "score": row.score, "reason": row.reason or ""}
                              for row in found]))
        return cases


def _turn(stored: str | None) -> int | str | None:
    """An assertion's `on_turn` as written (`2`, `last`): the store keeps it as text."""
    return int(stored) if stored is not None and stored.isdigit() else stored


def _stats(value: object) -> RepeatStats | None:
    """A result's statistics as the store kept them; None when they are not whole (a store an older tamesu
    wrote, or written by hand): the verdict's reason still says what they decided."""
    if not isinstance(value, dict):
        return None
    try:
        return RepeatStats.model_validate(value)
    except ValidationError:
        return None
