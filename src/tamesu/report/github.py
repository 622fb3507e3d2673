"""`--report github`: workflow-command annotations on stdout, and the job summary when GitHub asks for one.

A failed or errored test is an `::error`, a quarantined one a `::warning` (it must be seen without failing
the job), each pointing at the line of the suite that defines the test so GitHub shows it beside the code.
When `GITHUB_STEP_SUMMARY` names a file, the Markdown summary is appended to it (GitHub collects every step's).
"""

from __future__ import annotations

import os
from pathlib import Path

from tamesu.plugins import register
from tamesu.report.baseline import Comparison
from tamesu.report.junit import failure_text
from tamesu.report.load import LoadedRun
from tamesu.report.markdown import headline, render_markdown


def _data(text: str) -> str:
    # the escapes GitHub's workflow commands define for a message
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _relative(file: str) -> str:
    """Annotations need a path from the repository root: GITHUB_WORKSPACE, else the current folder."""
    root = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
    try:
        return Path(file).resolve().relative_to(root).as_posix()
    except ValueError:
        return file


def annotation_lines(run: LoadedRun, comparison: Comparison | None = None) -> list[str]:
    regressed = {c.id: c for c in comparison.regressions} if comparison else {}
    lines = []
    for result in run.results:
        if result.status not in ("failed", "error", "quarantined", "inconclusive"):
            continue
        level = "warning" if result.status == "quarantined" else "error"
        badge = {"failed": "FAIL", "error": "ERR", "quarantined": "QUAR", "inconclusive": "INC"}[result.status]
        props = []
        source = run.source(result.id)
        if source is not None and source.file:
            props.append(f"file={_property(_relative(source.file))}")
            if source.line:
                props.append(f"line={source.line}")
        props.append(f"title={_property(f'{badge} {result.id}')}")
        message = failure_text(result, run)
        if result.status == "inconclusive":
            spoiled = ("every run" if result.inconclusive_runs >= result.total_runs
                       else f"{result.inconclusive_runs} of {result.total_runs} runs, too many to decide")
            message = f"inconclusive: the simulated user, not the agent, spoiled {spoiled}:\n{message}"
        if result.status == "quarantined":
            message = f"quarantined ({result.quarantine}), not failing the run:\n{message}"
        if result.id in regressed:
            message = f"regression: passed in {comparison.baseline if comparison else 'the baseline'}\n{message}"
        lines.append(f"::{level} {','.join(props)}::{_data(message)}")
    lines.append(_closing(run))
    return lines


def _closing(run: LoadedRun) -> str:
    """The run's own line: a notice, or an error when the run did not end by its verdicts (interrupted, stopped,
    tests left unfinished): "1 passed, 0 failed" alone read as a green run over exit 143."""
    notes = [note for note in (run.summary.interrupted, run.summary.stopped) if note]
    if missing := run.not_finished():
        planned = len(run.plan.tests) if run.plan is not None else len(missing)
        shown = ", ".join(entry.id for entry in missing[:10]) + (", ..." if len(missing) > 10 else "")
        notes.append(f"{len(missing)} of {planned} planned tests did not finish: {shown}")
    said = _data("\n".join([headline(run), *notes]))
    return f"::{'error' if notes else 'notice'} title=tamesu::{said}"


def emit_github(run: LoadedRun, comparison: Comparison | None = None) -> list[str]:
    """Print the annotations; append the job summary when GitHub provides the file. Returns the lines printed."""
    lines = annotation_lines(run, comparison)
    for line in lines:
        print(line, flush=True)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as handle:
            handle.write(render_markdown(run, comparison) + "\n")
    return lines


@register("reports", "github", default_file=None)
def write_report(run: LoadedRun, path: Path | None, comparison: Comparison | None = None) -> None:
    """The `github` entry of `report.formats`: no file, annotations and the job summary."""
    emit_github(run, comparison)
