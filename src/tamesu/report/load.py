"""Reading a run directory back: what every report, `tamesu report`, baselines, coverage and merge start from.

Reports are rendered from disk rather than from the live run, so a report written at the end of `tamesu run`
and one re-rendered later by `tamesu report RUN_DIR` are the same file. A run killed half-way has no run.json
and maybe a torn last line in results.jsonl: both are tolerated, since what finished is still worth reporting.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError

from tamesu.errors import EXIT_INFRA
from tamesu.results.records import (
    SCHEMA_VERSION,
    RunResult,
    RunSummary,
    RunSummaryFile,
    TestResult,
    Transcript,
    count,
    count_runs,
    exit_code_for,
    run_result_from_json,
)

PLAN_FILE = "plan.json"
BASELINE_FILE = "baseline.json"

_M = TypeVar("_M", bound=BaseModel)


class PlannedEntry(BaseModel):
    """One test an invocation set out to run, and where it is written (for annotations that point at it)."""

    id: str
    suite: str
    name: str
    case: str | None = None
    tags: list[str] = Field(default_factory=list)
    file: str | None = None
    """The suite file, absolute, so a report rendered from another folder can still make it relative."""
    line: int | None = None
    slo: dict[str, float] = Field(default_factory=dict)
    """The test's SLOs (metric -> limit), so the store can draw them beside the metric's history."""


class PlanRecord(BaseModel):
    """plan.json: written when a run starts, so a killed run still says what it meant to run."""

    schema_version: int = SCHEMA_VERSION
    shard: str | None = None
    """`K/N` when the run was one shard of N; merged runs list every shard they joined."""
    shards: list[str] = Field(default_factory=list)
    selection: str | None = None
    """A shard's: the tests its run chose before `--shard` took its share (`sharding.selection`)."""
    tests: list[PlannedEntry] = Field(default_factory=list)
    run_id: str | None = None
    """TAMESU_RUN_ID when it was set: the run the store files this folder under (shards share it)."""
    commit: str | None = None
    branch: str | None = None
    trace_url: str | None = None
    """tamesu.yaml's `trace_url` when the run started: reports link each turn's trace id with it."""


class RunDirError(Exception):
    """The folder is not a run directory tamesu can read."""


@dataclass
class LoadedRun:
    dir: Path
    summary: RunSummaryFile
    results: list[TestResult]
    plan: PlanRecord | None = None
    problems: list[str] = field(default_factory=list)
    """Lines that could not be read (a torn last line of a killed run), for a warning."""
    _runs: dict[str, RunResult | None] = field(default_factory=dict, repr=False)
    _planned: dict[str, PlannedEntry] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def unfinished(self) -> int:
        """Planned tests with no result: the run was interrupted or killed before they finished."""
        return _unfinished(self.plan, self.results)

    def unfinished_note(self) -> str | None:
        missing = self.unfinished
        if not missing or self.plan is None:
            return None
        planned = len(self.plan.tests)
        return f"{missing} of {planned} planned test{'' if planned == 1 else 's'} did not finish"

    def run_result(self, summary: RunSummary) -> RunResult | None:
        """The run's result.json, or None when it is missing (a run never started writes none)."""
        if summary.dir not in self._runs:
            try:
                text = (self.dir / summary.dir / "result.json").read_text(encoding="utf-8")
                self._runs[summary.dir] = run_result_from_json(text)
            except (OSError, ValidationError, ValueError):
                self._runs[summary.dir] = None
        return self._runs[summary.dir]

    def transcript(self, summary: RunSummary) -> Transcript | None:
        return _read_model(self.dir / summary.dir / "transcript.json", Transcript)

    def source(self, test_id: str) -> PlannedEntry | None:
        if self.plan is None:
            return None
        if self._planned is None:  # a report asks once per test: one pass over the plan, not one per test
            self._planned = {}
            for entry in self.plan.tests:
                self._planned.setdefault(entry.id, entry)
        return self._planned.get(test_id)

    def not_finished(self) -> list[PlannedEntry]:
        """Tests the plan named that have no result: the run was killed or stopped before them."""
        if self.plan is None:
            return []
        done = {r.id for r in self.results}
        return [entry for entry in self.plan.tests if entry.id not in done]


def _read_model(path: Path, model: type[_M]) -> _M | None:
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None


def shown_path(path: Path) -> str:
    """A path as reports print it: from the current folder when below it, so a report rendered again from
    the same place says the same thing whether the run directory was named relatively or not."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def is_run_dir(path: Path) -> bool:
    """A run killed before its first result is still a run: its plan.json is written first."""
    return any((path / name).is_file() for name in ("results.jsonl", "run.json", PLAN_FILE))


def run_dirs_in(names: Iterable[str]) -> list[Path]:
    """Each name a run directory, or a folder whose run directories are all taken (`tamesu merge`, `tamesu store
    import`); RunDirError names a folder that is neither."""
    found: list[Path] = []
    seen: dict[Path, Path] = {}
    for name in names:
        folder = Path(name)
        inside = [folder] if is_run_dir(folder) else sorted(p for p in folder.iterdir() if p.is_dir() and is_run_dir(p))
        if not inside:
            raise RunDirError(f"{folder}: not a run directory and holds none")
        for run in inside:
            # one run named twice (`shards/s1/* shards/s1/*`) would overlap itself, test by test
            if (first := seen.setdefault(run.resolve(), run)) is not run:
                raise RunDirError(f"{run}: given twice" + (f" (also as {first})" if str(first) != str(run) else ""))
        found.extend(inside)
    return found


def latest_run_dir(folder: Path, exclude: Path | None = None) -> Path | None:
    """The newest run directory directly inside `folder` (names start with a sortable stamp)."""
    if not folder.is_dir():
        return None
    skip = exclude.resolve() if exclude is not None else None
    candidates = [p for p in folder.iterdir() if p.is_dir() and is_run_dir(p) and p.resolve() != skip]
    return max(candidates, key=lambda p: (p.name, p.stat().st_mtime), default=None)


def resolve_run_dir(path: Path, exclude: Path | None = None) -> Path:
    """A run directory as given, or the newest one inside a folder of runs (such as `tamesu-runs`)."""
    if is_run_dir(path) and (exclude is None or path.resolve() != exclude.resolve()):
        return path
    latest = latest_run_dir(path, exclude)
    if latest is None:
        if is_run_dir(path):  # the run being compared itself
            raise RunDirError(f"{path}: is this run itself: name an earlier run, or the folder of runs")
        raise RunDirError(f"{path}: not a run directory (no results.jsonl) and holds no earlier run")
    return latest


def load_run(path: Path) -> LoadedRun:
    if not path.is_dir():
        raise RunDirError(f"{path}: no such directory")
    if not is_run_dir(path):
        raise RunDirError(f"{path}: not a run directory (no results.jsonl or run.json)")
    results: list[TestResult] = []
    problems: list[str] = []
    lines_path = path / "results.jsonl"
    if lines_path.is_file():
        for number, line in enumerate(lines_path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                results.append(TestResult.model_validate(json.loads(line)))
            except (ValueError, ValidationError) as exc:
                problems.append(f"{lines_path}:{number}: unreadable result ({type(exc).__name__}), left out")
    plan = _read_model(path / PLAN_FILE, PlanRecord)
    summary_path = path / "run.json"
    summary = _read_model(summary_path, RunSummaryFile)
    if summary is None:
        # a killed run: say so, and count what finished; with tests left it is not a passing run. A run.json
        # there but unreadable (cut short, edited) is said too: the run's own code is lost with it, and a folder
        # with nothing else readable is no passing run
        unreadable = summary_path.is_file()
        if unreadable:
            problems.append(f"{summary_path}: unreadable: the run is counted from what results.jsonl holds")
        left = _unfinished(plan, results)
        summary = RunSummaryFile(
            tamesu_version="?", started_at="", finished_at="",
            exit_code=exit_code_for(results) or (EXIT_INFRA if left or (unreadable and not results) else 0),
            duration_ms=round(sum(r.duration_ms for r in results), 3), counts=count(results),
            runs=count_runs(results),
            interrupted="its run.json is unreadable" if unreadable else "the run did not finish (no run.json)",
        )
    return LoadedRun(dir=path, summary=summary, results=results, plan=plan, problems=problems)


def _unfinished(plan: PlanRecord | None, results: list[TestResult]) -> int:
    if plan is None:
        return 0
    done = {r.id for r in results}
    return sum(1 for entry in plan.tests if entry.id not in done)


def mean_metrics(result: TestResult) -> dict[str, float]:
    """Every metric of a test, averaged over its runs (a test repeated N times has N values of each). A run that
    errored or was skipped is left out: it graded nothing, and its `turns: 0` would read as the agent's change."""
    values: dict[str, list[float]] = {}
    for run in result.runs:
        if run.status in ("error", "skipped"):
            continue
        for name, value in run.metrics.items():
            values.setdefault(name, []).append(value)
    return {name: sum(vs) / len(vs) for name, vs in values.items()}
