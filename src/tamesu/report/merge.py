"""`tamesu merge DIRS...`: join the run directories of shards into one run, as if one machine had run it all.

The artifacts are copied (not linked) so the merged directory stands alone: CI jobs usually download each
shard into a folder that is gone by the time someone opens the report. A test found in two inputs is an
error, since shards never overlap and silently keeping one result would hide the other.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from tamesu import __version__
from tamesu.errors import EXIT_BUDGET, EXIT_CONFIG, EXIT_FAILED, EXIT_INFRA, EXIT_OK
from tamesu.report.load import PLAN_FILE, LoadedRun, PlannedEntry, PlanRecord, load_run
from tamesu.results.json_files import write_indented
from tamesu.results.load import LoadReport
from tamesu.results.records import ModelSpend, RunSummaryFile, TestResult, count, count_runs, exit_code_for
from tamesu.results.rundir import new_run_dir


class MergeError(Exception):
    pass


def _when(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def _same(values: Iterable[int | None]) -> int | None:
    """The one value every shard had (its `parallel`), else None: no single one describes the merged run."""
    seen = set(values)
    return seen.pop() if len(seen) == 1 else None


def _write(path: Path, data: object) -> None:
    write_indented(path, data)


def _copy_artifacts(run: LoadedRun, result: TestResult, dest: Path, taken: set[str]) -> TestResult:
    """Copy the test's folder; when another input already used its name, pick a free one and repoint the runs."""
    if not result.runs:
        return result
    folder = PurePosixPath(result.runs[0].dir).parent
    name, n = str(folder), 1
    while name in taken:
        n += 1
        name = f"{folder}-{n}"
    taken.add(name)
    source = run.dir / folder
    if source.is_dir():
        shutil.copytree(source, dest / name)
    runs = [r.model_copy(update={"dir": str(PurePosixPath(name) / PurePosixPath(r.dir).relative_to(folder))})
            if PurePosixPath(r.dir).is_relative_to(folder) else r for r in result.runs]
    return result.model_copy(update={"runs": runs})


def _copy_load(run: LoadedRun, dest: Path) -> None:
    """A shard's `load:` stages (`load/SUITE.json`, its conversations under `load/SUITE/`), which the reports read.
    Each shard ramps the tests it holds: a suite whose tests two shards share has two load reports, each kept and
    named with its shard, never one dropped or the two mixed into figures no ramp measured."""
    source = run.dir / "load"
    if not source.is_dir():
        return
    (dest / "load").mkdir(exist_ok=True)
    shard = run.plan.shard if run.plan is not None else None
    for found in sorted(source.glob("*.json")):
        name, n = found.stem, 1
        while (dest / "load" / f"{name}.json").exists():
            n += 1
            name = f"{found.stem}-{n}"
        try:
            report = LoadReport.model_validate_json(found.read_bytes())
        except (OSError, ValidationError):
            shutil.copyfile(found, dest / "load" / f"{name}.json")  # as it is: the report skips what it cannot read
            continue
        if shard:  # its ramp had this shard's tests alone, while the other shards' ramps ran
            report.suite = f"{report.suite} (shard {shard})"
        write_indented(dest / "load" / f"{name}.json", report.model_dump(mode="json"))
        if (source / found.stem).is_dir():
            shutil.copytree(source / found.stem, dest / "load" / name)


def merge_runs(inputs: list[Path], out: Path) -> tuple[Path, list[str]]:
    """The merged run's folder, and what of the inputs could not be read or does not agree (said by the caller, kept
    in run.json)."""
    runs = [load_run(path) for path in inputs]
    unread = [problem for run in runs for problem in run.problems]
    _one_split(runs)  # first: shards of two splits overlap too, and that is not why they cannot be joined
    unread += _one_commit(runs)
    _each_shard_once(runs)
    _one_selection(runs)
    seen: dict[str, Path] = {}
    clashes = []
    for run in runs:
        for result in run.results:
            if result.id in seen:
                clashes.append(f"{result.id} (in {seen[result.id]} and {run.dir})")
            seen.setdefault(result.id, run.dir)
    if clashes:
        raise MergeError("the same test is in two runs; shards never overlap: " + "; ".join(clashes[:10]))

    dest = new_run_dir(out)
    taken: set[str] = set()
    merged: list[TestResult] = []
    with (dest / "results.jsonl").open("w", encoding="utf-8") as handle:
        for run in runs:
            for result in run.results:
                copied = _copy_artifacts(run, result, dest, taken)
                merged.append(copied)
                handle.write(json.dumps(copied.model_dump(mode="json"), ensure_ascii=False) + "\n")

    for run in runs:
        _copy_load(run, dest)

    entries: dict[str, PlannedEntry] = {}
    shards: list[str] = []
    for run in runs:
        if run.plan is not None:
            for entry in run.plan.tests:
                entries.setdefault(entry.id, entry)
            shards.extend(s for s in run.plan.shards if s not in shards)
    shards.sort(key=lambda s: tuple(int(p) for p in s.split("/")) if s.replace("/", "").isdigit() else (0, 0))
    # the shards of one CI run share its id, commit and trace links: the merged run keeps the first one's
    first = next((run.plan for run in runs if run.plan is not None), None)
    keep = {k: getattr(first, k) for k in ("run_id", "commit", "branch", "trace_url")} if first else {}
    _write(dest / PLAN_FILE, PlanRecord(shards=shards, tests=list(entries.values()), **keep).model_dump(
        mode="json", exclude={"selection"}))  # a shard's alone

    starts = [t for t in (_when(r.summary.started_at) for r in runs) if t]
    ends = [t for t in (_when(r.summary.finished_at) for r in runs) if t]
    duration = (max(ends) - min(starts)).total_seconds() * 1000 if starts and ends else \
        sum(r.summary.duration_ms for r in runs)
    budget = any(r.summary.exit_code == EXIT_BUDGET for r in runs)
    notes = [f"{r.name}: {r.summary.interrupted}" for r in runs if r.summary.interrupted]
    stops = [f"{r.name}: {r.summary.stopped}" for r in runs if r.summary.stopped]
    missing = missing_shards(shards)
    if missing:
        them = "their" if len(missing) > 1 else "its"
        stops.append(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing: none of {them} tests "
                     f"is in the merged run (did {them} job end before it kept {them} run folder?)")
    summary = RunSummaryFile(
        tamesu_version=__version__, started_at=min(starts).isoformat() if starts else "",
        finished_at=max(ends).isoformat() if ends else "", duration_ms=round(duration, 3),
        exit_code=EXIT_INFRA if missing and _merged_code(runs, merged, budget) in _BELOW_INFRA
        else _merged_code(runs, merged, budget), counts=count(merged), runs=count_runs(merged),
        interrupted="; ".join(notes) or None, stopped="; ".join(stops) or None,
        # each shard said the plan's own warnings (an expired quarantine): once in the merged run
        warnings=list(dict.fromkeys([w for r in runs for w in r.summary.warnings] + unread)),
        models=sum((r.summary.models for r in runs if r.summary.models), start=ModelSpend()) if any(
            r.summary.models for r in runs) else None,
        parallel=_same(r.summary.parallel for r in runs),
    )
    temporary = dest / "run.json.tmp"
    _write(temporary, summary.model_dump(mode="json"))
    os.replace(temporary, dest / "run.json")
    return dest, unread


def _one_split(runs: list[LoadedRun]) -> None:
    """Refuse shards of different splits: a test's shard among 3 says nothing of its shard among 4, so `2/3` beside
    `2/4` leaves some tests in none of them, and no shard of either split can be called missing."""
    splits: dict[str, list[str]] = {}
    for run in runs:
        for shard in run.plan.shards if run.plan is not None else []:
            _, _, total = shard.partition("/")
            splits.setdefault(total, []).append(f"{shard} ({run.dir})")
    if len(splits) > 1:
        raise MergeError("shards of different splits: " + ", ".join(s for named in splits.values() for s in named)
                         + ": a test's shard among one N says nothing of its shard among another, so some tests ran "
                         "in none of these; merge the K/N shards of one N")


def _each_shard_once(runs: list[LoadedRun]) -> None:
    """Refuse one shard in two runs (a job run again into the same folder): their tests overlap, or the first one
    ended before any finished and its interruption would be the merged run's code, whatever the second did."""
    held: dict[str, Path] = {}
    for run in runs:
        shard = run.plan.shard if run.plan is not None else None
        if shard is not None and shard in held:
            raise MergeError(f"shard {shard} is in two runs: {held[shard]} and {run.dir} (its job ran again? "
                             "merge one of them)")
        if shard is not None:
            held[shard] = run.dir


def _one_selection(runs: list[LoadedRun]) -> None:
    """Refuse shards whose runs chose different tests before `--shard` took its share (other suites, `--filter`,
    `--tags`, a test added between the jobs): a test one of them chose and its shard's run did not is in none."""
    chose: dict[str, list[str]] = {}
    for run in runs:
        if run.plan is not None and run.plan.shard and run.plan.selection:
            chose.setdefault(run.plan.selection, []).append(f"{run.plan.shard} ({run.dir})")
    if len(chose) > 1:
        named = "; ".join(f"{', '.join(shards)} chose {count} test{'' if count == '1' else 's'} ({digest[:8]})"
                          for (count, _, digest), shards in ((p.partition(":"), s) for p, s in chose.items()))
        raise MergeError(f"shards of different selections of tests: {named}: every shard's job must choose the same "
                         "tests (suites, --filter, --tags) for --shard to split them")


def _one_commit(runs: list[LoadedRun]) -> list[str]:
    """Refuse runs of different commits: the merged run would be filed under the first one's, its verdicts of code
    it never tested. Changes on top of one commit (`HEAD+<fingerprint>`, a checkout's files that git does not
    track count by their time of change, which differs between machines) are a warning, not a refusal."""
    commits: dict[str, list[str]] = {}
    for run in runs:
        if run.plan is not None and run.plan.commit:
            commits.setdefault(run.plan.commit, []).append(str(run.dir))
    heads = {commit.partition("+")[0] for commit in commits}
    named = "; ".join(f"{commit} ({', '.join(dirs)})" for commit, dirs in commits.items())
    if len(heads) > 1:
        raise MergeError(f"runs of different commits: {named}: shards of one run test one commit; "
                         "merge the shards of one commit")
    return [f"the runs tested different changes on top of one commit: {named}"] if len(commits) > 1 else []


def missing_shards(shards: list[str]) -> list[str]:
    """The `K/N` shards of a split that none of the merged runs was (all of one split: the same N)."""
    split = [tuple(int(p) for p in s.split("/")) for s in shards if s.replace("/", "").isdigit() and "/" in s]
    totals = {total for _, total in split}
    if len(totals) != 1:
        return []
    total = totals.pop()
    return [f"{k}/{total}" for k in range(1, total + 1) if (k, total) not in split]


_BELOW_INFRA = (EXIT_OK, EXIT_FAILED, EXIT_CONFIG)
"""The codes a missing or interrupted shard outranks: every verdict of the tests, the suite's errors among them."""


def _merged_code(runs: list[LoadedRun], merged: list[TestResult], budget: bool) -> int:
    """The code of the joined results, unless a shard was interrupted or killed: then that shard's code."""
    code = exit_code_for(merged, budget)
    stopped = [r.summary.exit_code for r in runs if r.summary.interrupted and r.summary.exit_code]
    return stopped[0] if stopped and code in _BELOW_INFRA else code
