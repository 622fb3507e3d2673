"""`tamesu store import RUN_DIR`: a run folder into the store, for runs made while the store was down or
before it existed. Importing the same folder again replaces its earlier copy."""

from __future__ import annotations

from pathlib import Path

from tamesu.report.load import load_run
from tamesu.store.db import PartInfo, RunInfo, Store, test_record


def import_run(store: Store, run_dir: Path) -> tuple[str, int, list[str]]:
    """The run's id in the store, how many tests were written and what of the folder could not be read (a
    result left out is said, never dropped unseen). Raises RunDirError for a bad folder."""
    run = load_run(run_dir)
    plan = run.plan
    started = run.summary.started_at or _stamp_of(run_dir)
    info = RunInfo(id=(plan.run_id if plan and plan.run_id else None) or run_dir.name, started_at=started,
                   commit=plan.commit if plan else None, branch=plan.branch if plan else None,
                   tamesu_version=None if run.summary.tamesu_version == "?" else run.summary.tamesu_version)
    part_id = store.begin_part(info, PartInfo(dir=str(run_dir.resolve()), started_at=started,
                                              shard=plan.shard if plan else None), replace=True)
    slos = {entry.id: entry.slo for entry in plan.tests if entry.slo} if plan else {}
    records = []
    for result in run.results:
        runs = [detail for summary in result.runs if (detail := run.run_result(summary)) is not None]
        records.append(test_record(result, runs, slos.get(result.id), run_dir))
    store.write_records(info, part_id, records)
    store.finish_part(part_id, run.summary.finished_at or started, run.summary.exit_code, run.summary.counts,
                      run.summary.interrupted)
    return info.id, len(run.results), run.problems




def _stamp_of(run_dir: Path) -> str:
    """A killed run has no run.json: its folder's name starts with the local time it began."""
    import datetime as dt

    try:
        return dt.datetime.strptime(run_dir.name[:15], "%Y%m%d-%H%M%S").astimezone(dt.UTC).isoformat()
    except ValueError:
        return dt.datetime.fromtimestamp(run_dir.stat().st_mtime, dt.UTC).isoformat()
