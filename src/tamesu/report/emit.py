"""Writing the requested reports of a finished run, and the baseline comparison they all show.

`tamesu run`, `tamesu report` and `tamesu merge` all end here, reading the run back from disk, so the three
write the same files for the same run.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tamesu.errors import os_words
from tamesu.report.baseline import Comparison, compare
from tamesu.report.formats import format_of, is_built_in
from tamesu.report.load import BASELINE_FILE, LoadedRun, load_run, resolve_run_dir
from tamesu.report.spec import ReportRequest
from tamesu.results.json_files import write_indented

STDOUT = "-"
"""A report's path that means standard output."""


@dataclass
class Emitted:
    written: list[tuple[str, Path | None]] = field(default_factory=list)
    """(kind, file) of every report written; github, and a report to standard output, have no file."""
    errors: list[str] = field(default_factory=list)


def compare_with(run: LoadedRun, baseline: Path, tolerance: float) -> tuple[Comparison, str | None]:
    """Compare with an earlier run (or the newest other run in a folder of runs) and keep the result on disk; the
    second value says why it could not be kept (a run folder another user owns, a read-only copy): the comparison
    is shown and reported all the same."""
    earlier = load_run(resolve_run_dir(baseline, exclude=run.dir))
    comparison = compare(run, earlier, tolerance)
    path = run.dir / BASELINE_FILE
    try:
        write_indented(path, comparison.model_dump(mode="json"), atomic=True)
    except OSError as exc:
        return comparison, f"cannot keep the comparison as {path}: {os_words(exc) if exc.filename else exc}"
    return comparison, None


def stored_comparison(run: LoadedRun) -> Comparison | None:
    """The comparison `--baseline` kept in the run directory, for re-rendering without naming it again."""
    path = run.dir / BASELINE_FILE
    try:
        return Comparison.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_reports(run: LoadedRun, requests: list[ReportRequest], comparison: Comparison | None) -> Emitted:
    emitted = Emitted()
    # a report on standard output is read alone there (`| jq`): what the others print (github's annotations, which
    # GitHub reads on either stream) goes to standard error
    others_print_to = sys.stderr if any(r.path == STDOUT for r in requests) else sys.stdout
    for request in requests:
        to_stdout = request.path == STDOUT
        try:
            if to_stdout:
                _print_report(run, request.kind, comparison)
                path = None
            else:
                path = request.target(run.dir)
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.redirect_stdout(others_print_to):
                    format_of(request.kind).write_function()(run, path, comparison)
        except OSError as exc:
            where = "standard output" if to_stdout else request.target(run.dir)
            emitted.errors.append(f"cannot write the {request.kind} report to {where}: "
                                  f"{os_words(exc) if exc.filename else exc.strerror or exc}")
            continue
        except Exception as exc:  # a plug-in's writer: its failure is said, the other reports still written
            if is_built_in(request.kind):
                raise
            emitted.errors.append(f"the {request.kind} report failed: {type(exc).__name__}: {exc}")
            continue
        emitted.written.append((request.kind, path))
    return emitted


def _print_report(run: LoadedRun, kind: str, comparison: Comparison | None) -> None:
    """`-` is standard output (`tamesu report RUN --report json:- | jq`). The report is written in a folder of its
    own, not the run's (which may be read-only, or another user's), its links still starting at the run folder;
    a file named `-` was made in the current folder."""
    writer = format_of(kind).write_function()
    with tempfile.TemporaryDirectory(prefix="tamesu-report-") as folder:
        path = Path(folder) / f"report.{kind}"
        if _takes_links_from(writer):
            writer(run, path, comparison, links_from=run.dir)
        else:
            writer(run, path, comparison)
        if path.exists():
            sys.stdout.flush()  # what the console printed before comes first
            sys.stdout.buffer.write(path.read_bytes())
            sys.stdout.buffer.flush()


def _takes_links_from(writer: Callable[..., object]) -> bool:
    """A writer whose report links to the run's files says so with a `links_from` keyword (the folder its links
    start from when its file is written elsewhere)."""
    try:
        return "links_from" in inspect.signature(writer).parameters
    except (TypeError, ValueError):
        return False
