"""Run directories are named so that the newest run sorts last, even for runs started within one second."""

from __future__ import annotations

from pathlib import Path

from tamesu.report.load import latest_run_dir
from tamesu.results.rundir import new_run_dir


def test_runs_started_within_one_second_sort_in_the_order_they_started(tmp_path: Path) -> None:
    made = []
    for _ in range(5):
        run = new_run_dir(tmp_path)
        (run / "run.json").write_text("{}")
        made.append(run)
    assert sorted(made) == made
    assert latest_run_dir(tmp_path) == made[-1]
    assert latest_run_dir(tmp_path, exclude=made[-1]) == made[-2]
