"""The console's `along the way:` line of a run read back from its folder; what counts and how it is said is
`results.along_the_way`'s, which the console and a `load:` profile's report use as the run goes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tamesu.results.along_the_way import NOTABLE, AlongTheWay

if TYPE_CHECKING:  # a run read back, for the reports written after it; the console needs none
    from tamesu.report.load import LoadedRun

__all__ = ["NOTABLE", "AlongTheWay", "of_run"]


def of_run(run: LoadedRun) -> str:
    """The line for a run read back from its folder (its `result.json` files), for the reports written after it."""
    along = AlongTheWay()
    along.add(found for result in run.results for summary in result.runs
              if (found := run.run_result(summary)) is not None)
    return along.line()
