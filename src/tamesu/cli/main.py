"""The command line: thin, everything it does lives in the engine, the loader and the reports."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tamesu import __version__
from tamesu.cli._lazy import LazyGroup
from tamesu.cli.shared import (
    COLOR,
    COLOR_HELP,
    CONFIG_HELP,
    CONFIG_PATH,
    SUITE_PATH,
    TOLERANCE_HELP,
    cache_mode,
    finish_reports,
    interrupted_note,
    joined_reports,
    no_match,
    open_store_writer,
    parse_shard,
    point_to_view,
    report_requests,
    run_options,
    select_tests,
    settle_for,
    start_telemetry,
    stop_telemetry,
    to_stdout,
)
from tamesu.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_INFRA, ConfigError, InfraError, Problem, os_words

if TYPE_CHECKING:
    from rich.console import Console

    from tamesu.report.load import LoadedRun

MAX_SHOWN_PROBLEMS = 200
"""Problems printed at most: a file of thousands of broken cases is told in a screenful, not in 40,000 lines."""


def _fail_config(problems: list[Problem]) -> None:
    files = {file: number for number, file in enumerate(dict.fromkeys(p.file for p in problems))}
    ordered = sorted(problems, key=lambda p: (files[p.file], p.line, p.column))
    for problem in ordered[:MAX_SHOWN_PROBLEMS]:
        click.echo(str(problem), err=True)
    count = sum(p.count for p in problems)  # a cases file's "N more problems" line is N of them
    if len(problems) > MAX_SHOWN_PROBLEMS:
        click.echo(f"... and {len(problems) - MAX_SHOWN_PROBLEMS:,} more, not shown: fix these first", err=True)
    click.echo(f"{count:,} problem{'s' if count != 1 else ''} found", err=True)
    sys.exit(EXIT_CONFIG)


def _load(paths: tuple[str, ...], config: str | None, *, require_secrets: bool) -> Any:
    from tamesu.plan import load_plan

    try:
        return load_plan([Path(p) for p in paths], Path(config) if config else None,
                         require_secrets=require_secrets)
    except ConfigError as exc:
        _fail_config(exc.problems)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tamesu")
def main() -> None:
    """Test conversational AI agents the way their users meet them."""
    # gRPC's core writes its INFO lines (a TLS handshake that failed, each retry) to the console past the
    # logging module: tamesu says the failure in one line of its own. Set GRPC_VERBOSITY to see them.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@main.command()
@click.argument("paths", nargs=-1, type=SUITE_PATH)
@run_options("tests", ids="suite/name", verbose="-v: transcripts of failing runs; -vv: of every run.",
             parallel="tamesu.yaml's parallel, else 1",
             repeat=" (overrides repeat)")
def run(paths: tuple[str, ...], pattern: str | None, tags: str | None, parallel: int | None,
        repeat: int | None, out: str | None, fail_fast: bool, color: str, config: str | None,
        verbose: int, no_cache: bool, cache_only: bool, update_golden: bool, reports: str | None,
        baseline: str | None, tolerance: float | None, shard_text: str | None) -> None:
    """Run suites (files or folders; default: the project's suites)."""
    from tamesu.engine.runner import Runner, RunOptions
    from tamesu.report.console import ConsoleReporter, make_console
    from tamesu.report.recorder import Fanout, PlanRecorder
    from tamesu.results.sharding import select, selection
    from tamesu.runtime.gc_pause import collector_paused
    from tamesu.runtime.signals import Interrupted, run_stoppable
    from tamesu.suite.secrets import mask_logging

    # no cyclic collection walks the plan while it is loaded and the run is set up: on again once it is frozen
    paused = contextlib.ExitStack()
    paused.enter_context(collector_paused())
    plan = _load(paths, config, require_secrets=True)
    mask_logging(plan.secrets.redactor)  # a library's log line must not show a secret either
    requests = report_requests(reports, plan.project)
    console = make_console(color, stderr=to_stdout(requests))
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, markup=True)
    tests = select_tests(plan, pattern, tags)
    if not tests:
        asked = pattern or tags
        click.echo(no_match(plan, pattern, tags) if asked else "no test to run: the suites hold none", err=True)
        sys.exit(EXIT_CONFIG)
    shard = parse_shard(shard_text)
    chose = selection(t.id for t in tests) if shard is not None else None
    if shard is not None:
        # an empty shard is a valid, empty run: its CI job passes and `merge` finds its directory
        tests = select(tests, shard)
    settings = plan.project.spec.report
    baseline_dir = Path(baseline).expanduser() if baseline else \
        (plan.project.dir / settings.baseline if settings.baseline else None)
    out_dir = Path(out).expanduser() if out else plan.project.dir / plan.project.spec.out
    options = RunOptions(out=out_dir, parallel=parallel or plan.project.spec.parallel, repeat=repeat,
                         fail_fast=fail_fast, cache_mode=cache_mode(no_cache, cache_only), update_golden=update_golden)
    from tamesu.results.provenance import provenance

    origin = provenance(plan.project.dir, own=(out_dir, plan.project.dir / ".tamesu"))
    console_reporter = ConsoleReporter(console, plan.secrets.redactor, verbose)
    reporters: list[Any] = [console_reporter,
                            PlanRecorder(str(shard) if shard else None, plan.secrets.redactor.data, origin,
                                         plan.project.spec.trace_url, chose)]
    store_writer = open_store_writer(plan.project, plan.secrets.redactor, origin, str(shard) if shard else None,
                                     console)
    if store_writer is not None:
        reporters.append(store_writer)
    telemetry = start_telemetry(console)
    runner = Runner(plan, tests, options, Fanout(*reporters))
    # this process is the run's: what was made before it lives to its end (see _heap)
    settle_for(min(options.parallel, max(1, len(tests) * (options.repeat or 1))), console)
    paused.close()
    try:
        outcome = run_stoppable(runner.run())
    except InfraError as exc:  # the run folder, a traces receiver or backend: before any test ran
        console_reporter.close()
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INFRA)
    except Interrupted as stop:
        console_reporter.close()
        if store_writer is not None:
            store_writer.close(timeout=5)
        click.echo(interrupted_note(stop, runner.run_dir), err=True)
        if requests and runner.run_dir is not None and (runner.run_dir / "run.json").is_file():
            # a CI job cancelled or timed out still gets the reports it asks for, of what finished
            finish_reports(runner.run_dir, requests, None, settings.tolerance, console, stop.exit_code)
        sys.exit(stop.exit_code)
    finally:
        stop_telemetry(telemetry)
    code = outcome.exit_code
    if requests or baseline_dir is not None:
        code = finish_reports(outcome.run_dir, requests, baseline_dir,
                               settings.tolerance if tolerance is None else tolerance, console, code)
    point_to_view(store_writer, console)
    sys.exit(code)


@main.command(name="list")
@click.argument("paths", nargs=-1, type=SUITE_PATH)
@click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)
@click.option("--filter", "pattern", metavar="REGEX", help="List only tests whose suite/name matches.")
@click.option("--tags", metavar="TAGS", help="Comma-separated tags to list; !tag excludes.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per test.")
@click.option("--shard", "shard_text", metavar="K/N", help="Only the tests of the K-th of N shards.")
def list_tests(paths: tuple[str, ...], config: str | None, pattern: str | None, tags: str | None,
               as_json: bool, shard_text: str | None) -> None:
    """List the tests that `run` would run."""
    from tamesu.report.words import visible
    from tamesu.results.sharding import select

    plan = _load(paths, config, require_secrets=False)
    today = dt.date.today()
    shard = parse_shard(shard_text)
    chosen = select_tests(plan, pattern, tags)
    if not chosen and (pattern or tags):  # as `run` says it; an empty list read as "nothing is wrong"
        click.echo(no_match(plan, pattern, tags), err=True)
    for test in select(chosen, shard) if shard is not None else chosen:
        if as_json:
            click.echo(json.dumps({"id": test.id, "suite": test.suite.name, "name": test.name,
                                   "target": test.target_name, "tags": test.tags,
                                   "quarantined": test.quarantined(today)}))
        else:
            extra = f"  [{', '.join(test.tags)}]" if test.tags else ""
            mark = "  (quarantined)" if test.quarantined(today) else ""
            click.echo(visible(f"{test.id}  -> {test.target_name}{extra}{mark}"))  # a name's escapes, shown


@main.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str) -> None:
    """Write a tamesu.yaml and a first suite that validates, in DIRECTORY (default: the current folder)."""
    from tamesu.cli.scaffold import ignore_what_runs_leave, write_scaffold
    from tamesu.cli.schema_export import left_out_lines

    left_out: list[str] = []
    try:
        written = write_scaffold(Path(directory), left_out)
    except FileExistsError as exc:
        click.echo(f"{exc}: already exists, nothing written", err=True)
        sys.exit(EXIT_CONFIG)
    except OSError as exc:  # a read-only folder, a full disk: where we could not write, and why
        click.echo(f"cannot write {exc.filename or directory}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_INFRA)
    for path in written:
        click.echo(f"wrote {path}")
    for line in left_out_lines(left_out):
        click.echo(line, err=True)
    try:
        ignored = ignore_what_runs_leave(Path(directory))
    except OSError as exc:  # the project is written: only its .gitignore could not be
        click.echo(f"warning: cannot write {exc.filename}: {exc.strerror or exc} (ignore .env, tamesu-runs/ and "
                   ".tamesu/store.db* in your version control)", err=True)
    else:
        if ignored:
            click.echo(ignored)
    there = Path(directory)
    step_in = "" if there.resolve() == Path.cwd().resolve() else f"`cd {shlex.quote(directory)}`, then "
    click.echo(f"next: {step_in}`tamesu run` (its hooks start the sample agent in suites/agent.py); then point the "
               "target in suites/first.yaml at your agent")


@main.command()
@click.argument("paths", nargs=-1, type=SUITE_PATH)
@click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)
def doctor(paths: tuple[str, ...], config: str | None) -> None:
    """Check this machine and the project: Python, packages, suites, secrets, targets reachable."""
    from tamesu.cli.doctor import diagnose

    checks = asyncio.run(diagnose([Path(p) for p in paths], Path(config) if config else None))
    worst = 0
    for ok, line in checks:
        mark = "ok  " if ok is True else "warn" if ok is None else "FAIL"
        click.echo(f"{mark}  {line}")
        if ok is False:
            worst = EXIT_INFRA
    sys.exit(worst)


def _project_near(config: str | None, start: Path) -> Any:
    """The project file for commands that read runs, not suites: --config, else the nearest tamesu.yaml."""
    from tamesu.plan import find_project, load_project

    path = Path(config) if config else find_project(start) or find_project(Path.cwd())
    if path is None:
        return None
    try:
        return load_project(path, Path.cwd())
    except ConfigError as exc:
        _fail_config(exc.problems)


def _print_summary(run: LoadedRun, console: Console) -> None:
    """A finished run as `tamesu run` printed it: one line per test with its reasons, then the counts."""
    from tamesu.report.console import ConsoleReporter
    from tamesu.suite.secrets import Redactor

    # artifacts on disk are already masked; nothing is left to redact
    reporter = ConsoleReporter(console, Redactor(), 0)
    for result in run.results:
        reporter.test_finished(result, [])
    reporter.finish(run.summary, run.dir)


@main.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--report", "reports", metavar="SPECS", multiple=True, callback=joined_reports,
              help="junit[:PATH],html[:PATH],json[:PATH],markdown[:PATH],github (default: tamesu.yaml's report:).")
@click.option("--baseline", type=click.Path(exists=True, file_okay=False),
              help="Compare with an earlier run (default: the comparison kept by the run's own --baseline).")
@click.option("--tolerance", type=click.FloatRange(0), metavar="FRACTION", help=TOLERANCE_HELP)
@click.option("--color", type=COLOR, default="auto", show_default=True, help=COLOR_HELP)
@click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)
def report(run_dir: str, reports: str | None, baseline: str | None, tolerance: float | None, color: str,
           config: str | None) -> None:
    """Render reports of a finished run again (its console summary when no report is named)."""
    from tamesu.report.console import make_console
    from tamesu.report.load import RunDirError, load_run

    project = _project_near(config, Path(run_dir))
    # run again, a run shows its console summary unless reports are named (here or in tamesu.yaml)
    requests = report_requests(reports, project, default=False)
    # a report written to stdout (`--report json:-`) keeps it to itself: the baseline's comparison goes to stderr
    console = make_console(color, stderr=to_stdout(requests))
    try:
        run = load_run(Path(run_dir))
    except RunDirError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    if not requests:
        _print_summary(run, console)
    if note := run.unfinished_note():
        why = run.summary.interrupted or ("results.jsonl has unreadable lines" if run.problems else "stopped early")
        click.echo(f"{run.dir}: {note} ({why})", err=True)
    default_tolerance = project.spec.report.tolerance if project is not None else 0.2
    # the run's own code: a report of a failed or interrupted run is not a green CI step
    code = finish_reports(run.dir, requests, Path(baseline).expanduser() if baseline else None,
                           default_tolerance if tolerance is None else tolerance, console, run.summary.exit_code)
    sys.exit(code)


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(file_okay=False),
              help="Where the merged run goes (default: tamesu.yaml's out, else tamesu-runs).")
@click.option("--report", "reports", metavar="SPECS", multiple=True, callback=joined_reports,
              help="Reports of the merged run, as for `run` (default: tamesu.yaml's report:, else none).")
@click.option("--baseline", type=click.Path(file_okay=False), help="Compare with an earlier run, as for `run`.")
@click.option("--tolerance", type=click.FloatRange(0), metavar="FRACTION", help=TOLERANCE_HELP)
@click.option("--color", type=COLOR, default="auto", show_default=True, help=COLOR_HELP)
@click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)
def merge(dirs: tuple[str, ...], out: str | None, reports: str | None, baseline: str | None,
          tolerance: float | None, color: str, config: str | None) -> None:
    """Join run directories (shards) into one run; exits with the merged run's code.

    Each DIR is a run directory, or a folder whose run directories are all taken."""
    from tamesu.report.console import make_console
    from tamesu.report.load import RunDirError, load_run, run_dirs_in
    from tamesu.report.merge import MergeError, merge_runs

    try:
        inputs = run_dirs_in(dirs)
    except RunDirError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    project = _project_near(config, Path.cwd())
    out_dir = (Path(out).expanduser() if out
               else project.dir / project.spec.out if project is not None else Path("tamesu-runs"))
    try:
        merged, unread = merge_runs(inputs, out_dir)
    except (MergeError, RunDirError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    requests = report_requests(reports, project, default=False)
    console = make_console(color, stderr=to_stdout(requests))
    run = load_run(merged)
    click.echo(f"merged {len(inputs)} run{'' if len(inputs) == 1 else 's'} into {merged}", err=to_stdout(requests))
    _print_summary(run, console)
    for problem in unread:
        click.echo(f"warning: {problem}", err=True)
    if note := run.unfinished_note():
        click.echo(f"{merged}: {note}" + (" (results.jsonl of a run has unreadable lines)" if unread else ""),
                   err=True)
    if run.summary.stopped:
        click.echo(f"{merged}: {run.summary.stopped}", err=True)
    default_tolerance = project.spec.report.tolerance if project is not None else 0.2
    code = finish_reports(merged, requests,
                           Path(baseline).expanduser() if baseline else None,
                           default_tolerance if tolerance is None else tolerance, console, run.summary.exit_code)
    sys.exit(code)


@main.command()
@click.argument("run_dir", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The coverage as one JSON document.")
@click.option("--fail-under", type=click.FloatRange(0, 100), metavar="PERCENT",
              help="Exit 1 when less than PERCENT of what the agents offered was exercised.")
@click.option("--color", type=COLOR, default="auto", show_default=True, help=COLOR_HELP)
@click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)
def coverage(run_dir: str | None, as_json: bool, fail_under: float | None, color: str, config: str | None) -> None:
    """Which skills, tools and remote agents a run exercised, and which it never touched.

    Reads RUN_DIR (or a folder of runs: its newest), default the newest run in the project's out folder."""
    from tamesu.report.console import make_console
    from tamesu.report.coverage import coverage as compute
    from tamesu.report.coverage import table_lines
    from tamesu.report.load import RunDirError, load_run, resolve_run_dir

    if run_dir is None:
        project = _project_near(config, Path.cwd())
        folder = project.dir / project.spec.out if project is not None else Path("tamesu-runs")
    else:
        folder = Path(run_dir)
    try:
        run = load_run(resolve_run_dir(folder))
    except RunDirError as exc:
        click.echo(f"{exc}; pass RUN_DIR, or `tamesu run` first", err=True)
        sys.exit(EXIT_CONFIG)
    result = compute(run)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        console = make_console(color)
        console.print(f"coverage of {run.dir}", style="dim", highlight=False, markup=False)
        for style, line in table_lines(result):
            console.print(line, style=style, highlight=False, markup=False, soft_wrap=True)
    if fail_under is not None and result.percent is None and fail_under > 0:
        # a gate asked for is not passed by nothing to measure (an agent card never fetched, no tool list kept)
        click.echo(f"coverage: nothing was offered to cover in {run.dir}: --fail-under {fail_under:g}% cannot be met",
                   err=True)
        sys.exit(EXIT_FAILED)
    if fail_under is not None and result.percent is not None and result.percent < fail_under:
        click.echo(f"coverage {result.percent:.0f}% is under {fail_under:.0f}%", err=True)
        sys.exit(EXIT_FAILED)


@main.command()
@click.argument("kind", type=click.Choice(["suite", "project"]), default="suite")
@click.option("--write", "directory", type=click.Path(file_okay=False), metavar="DIR",
              help="Write both schemas into DIR (suite.schema.json, project.schema.json) instead of printing.")
def schema(kind: str, directory: str | None) -> None:
    """The JSON Schema of a suite (or of tamesu.yaml), for editors; generated from the loader's own models."""
    from tamesu.cli.schema_export import left_out_lines, project_schema, suite_schema, write_schemas

    left_out: list[str] = []
    if directory is not None:
        try:
            written = write_schemas(Path(directory), left_out)
        except OSError as exc:
            click.echo(f"tamesu schema: cannot write {directory}: {os_words(exc)}", err=True)
            sys.exit(EXIT_INFRA)
        for path in written:
            click.echo(f"wrote {path}")
    else:
        # only the one asked for: the suite's costs ~65 ms to generate, the project's ~25
        document = suite_schema(left_out) if kind == "suite" else project_schema(left_out)
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    for line in left_out_lines(left_out):
        click.echo(line, err=True)


_STARTS_PROCESSES = {"run", "test", "doctor"}
_RUNS_TESTS = {"run", "test", "merge"}


def entry(command: click.Command | None = None) -> None:
    """The `tamesu` command (or one of its commands alone): a bug of ours is one line and exit 3, never a
    traceback (TAMESU_DEBUG=1 shows it)."""
    import os

    from tamesu.cli._streams import steady_streams
    from tamesu.runtime.children import arm
    from tamesu.runtime.signals import exit_before_the_run

    # a console that goes away, or cannot write a character, never ends a run
    steady_streams(runs=command is not None or (len(sys.argv) > 1 and sys.argv[1] in _RUNS_TESTS))
    if command is not None or (sys.argv[1:2] and sys.argv[1] in _STARTS_PROCESSES):
        # every process this command starts, and what they start, ends with it (even on SIGKILL)
        arm()
    exit_before_the_run()
    try:
        (command or main)(standalone_mode=True)
    except Exception as exc:
        import traceback

        from tamesu.suite.secrets import mask_known

        # an exception's words can hold what a template put in (a secret in a URL it could not parse): masked
        if os.environ.get("TAMESU_DEBUG"):
            click.echo(mask_known("".join(traceback.format_exception(exc))).rstrip(), err=True)
            sys.exit(EXIT_INFRA)
        said = mask_known(f"{type(exc).__name__}: {exc}")
        click.echo(f"tamesu: internal error: {said} (set TAMESU_DEBUG=1 for details)", err=True)
        sys.exit(EXIT_INFRA)


if __name__ == "__main__":
    entry()
