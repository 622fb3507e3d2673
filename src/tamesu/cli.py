"""The command line: thin, everything it does lives in the engine, the loader and the reports."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from tamesu import __version__
from tamesu.errors import EXIT_CONFIG, EXIT_INFRA, ConfigError, Problem

COLOR = click.Choice(["auto", "always", "never"])


def _fail_config(problems: list[Problem]) -> None:
    files = list(dict.fromkeys(p.file for p in problems))
    for problem in sorted(problems, key=lambda p: (files.index(p.file), p.line, p.column)):
        click.echo(str(problem), err=True)
    count = len(problems)
    click.echo(f"{count} problem{'s' if count != 1 else ''} found", err=True)
    sys.exit(EXIT_CONFIG)


def _load(paths: tuple[str, ...], config: str | None, *, require_secrets: bool) -> Any:
    from tamesu.suite.loader import load_plan

    try:
        return load_plan([Path(p) for p in paths], Path(config) if config else None,
                         require_secrets=require_secrets)
    except ConfigError as exc:
        _fail_config(exc.problems)


def _select(plan: Any, pattern: str | None, tags: str | None) -> list[Any]:
    chosen = list(plan.tests)
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            click.echo(f"--filter: not a valid regular expression: {exc}", err=True)
            sys.exit(EXIT_CONFIG)
        chosen = [t for t in chosen if regex.search(t.id) or regex.search(t.name)]
    if tags:
        wanted = [t.strip() for t in tags.split(",") if t.strip()]
        include = {t for t in wanted if not t.startswith(("!", "-"))}
        exclude = {t[1:] for t in wanted if t.startswith(("!", "-"))}
        chosen = [t for t in chosen
                  if (not include or include & set(t.tags)) and not (exclude & set(t.tags))]
    return chosen


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tamesu")
def main() -> None:
    """Test conversational AI agents the way their users meet them."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--filter", "pattern", metavar="REGEX", help="Run only tests whose suite/name matches.")
@click.option("--tags", metavar="TAGS", help="Comma-separated tags to run; !tag excludes.")
@click.option("--parallel", "-p", type=click.IntRange(1, 10000), help="Runs at the same time (default 1).")
@click.option("--repeat", type=click.IntRange(1, 10000), help="Run every test N times (overrides repeat).")
@click.option("--out", type=click.Path(file_okay=False), help="Where run directories go (default tamesu-runs).")
@click.option("--fail-fast", is_flag=True, help="Stop starting tests after the first failure.")
@click.option("--color", type=COLOR, default="auto", show_default=True)
@click.option("--config", type=click.Path(dir_okay=False), help="The project file (default: nearest tamesu.yaml).")
@click.option("-v", "--verbose", count=True, help="-v: transcripts of failing runs; -vv: of every run.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the replay cache of model calls.")
@click.option("--cache-only", is_flag=True, help="Answer every model call from the replay cache; a miss fails.")
@click.option("--update-golden", is_flag=True, help="golden assertions write what they saw instead of comparing.")
def run(paths: tuple[str, ...], pattern: str | None, tags: str | None, parallel: int | None,
        repeat: int | None, out: str | None, fail_fast: bool, color: str, config: str | None,
        verbose: int, no_cache: bool, cache_only: bool, update_golden: bool) -> None:
    """Run suites (files or folders; default: the project's suites)."""
    from tamesu.engine.runner import Runner, RunOptions
    from tamesu.report.console import ConsoleReporter, make_console

    plan = _load(paths, config, require_secrets=True)
    console = make_console(color)
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, markup=True)
    tests = _select(plan, pattern, tags)
    if not tests:
        click.echo("no test matches the filter", err=True)
        sys.exit(EXIT_CONFIG)
    out_dir = Path(out) if out else plan.project.dir / plan.project.spec.out
    if no_cache and cache_only:
        click.echo("--no-cache and --cache-only contradict each other: choose one", err=True)
        sys.exit(EXIT_CONFIG)
    options = RunOptions(out=out_dir, parallel=parallel or plan.project.spec.parallel, repeat=repeat,
                         fail_fast=fail_fast, cache_mode="off" if no_cache else "only" if cache_only else None,
                         update_golden=update_golden)
    reporter = ConsoleReporter(console, plan.secrets.redactor, verbose)
    try:
        outcome = asyncio.run(Runner(plan, tests, options, reporter).run())
    except KeyboardInterrupt:
        click.echo("interrupted: finished tests are in results.jsonl", err=True)
        sys.exit(130)
    sys.exit(outcome.exit_code)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--config", type=click.Path(dir_okay=False))
def validate(paths: tuple[str, ...], config: str | None) -> None:
    """Check suites without running them: every problem at once, with file:line:col."""
    plan = _load(paths, config, require_secrets=False)
    for warning in plan.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"ok: {len(plan.tests)} test(s) in {len(plan.suites)} suite(s)")


@main.command(name="list")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--config", type=click.Path(dir_okay=False))
@click.option("--filter", "pattern", metavar="REGEX")
@click.option("--tags", metavar="TAGS")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per test.")
def list_tests(paths: tuple[str, ...], config: str | None, pattern: str | None, tags: str | None,
               as_json: bool) -> None:
    """List the tests that `run` would run."""
    plan = _load(paths, config, require_secrets=False)
    today = dt.date.today()
    for test in _select(plan, pattern, tags):
        if as_json:
            click.echo(json.dumps({"id": test.id, "suite": test.suite.name, "name": test.name,
                                   "target": test.target_name, "tags": test.tags,
                                   "quarantined": test.quarantined(today)}))
        else:
            extra = f"  [{', '.join(test.tags)}]" if test.tags else ""
            mark = "  (quarantined)" if test.quarantined(today) else ""
            click.echo(f"{test.id}  -> {test.target_name}{extra}{mark}")


@main.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str) -> None:
    """Write a tamesu.yaml and a first suite that validates."""
    from tamesu.scaffold import write_scaffold

    try:
        written = write_scaffold(Path(directory))
    except FileExistsError as exc:
        click.echo(f"{exc}: already exists, nothing written", err=True)
        sys.exit(EXIT_CONFIG)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo("next: point the target in suites/first.yaml at your agent, then run `tamesu run`")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--config", type=click.Path(dir_okay=False))
def doctor(paths: tuple[str, ...], config: str | None) -> None:
    """Check this machine and the project: Python, packages, suites, secrets, targets reachable."""
    from tamesu.doctor import diagnose

    checks = asyncio.run(diagnose([Path(p) for p in paths], Path(config) if config else None))
    worst = 0
    for ok, line in checks:
        mark = "ok  " if ok is True else "warn" if ok is None else "FAIL"
        click.echo(f"{mark}  {line}")
        if ok is False:
            worst = EXIT_INFRA
    sys.exit(worst)


def entry() -> None:
    """The `tamesu` command: a bug of ours is one line and exit 3, never a traceback (TAMESU_DEBUG=1 shows it)."""
    import os

    try:
        main(standalone_mode=True)
    except Exception as exc:
        if os.environ.get("TAMESU_DEBUG"):
            raise
        click.echo(f"tamesu: internal error: {type(exc).__name__}: {exc} (set TAMESU_DEBUG=1 for details)", err=True)
        sys.exit(EXIT_INFRA)


if __name__ == "__main__":
    entry()
