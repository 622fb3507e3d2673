"""`tamesu validate`: suites and JSONL test cases checked without running them (loaded only when used)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from tamesu.cli.main import _fail_config
from tamesu.errors import EXIT_CONFIG, ConfigError, Problem
from tamesu.report.words import count_of


@click.command(name="validate")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--config", type=click.Path(dir_okay=False))
@click.option("-n", "--name", "target", metavar="TARGET", help="JSONL files: the agent they test (default: the "
              "project's only target), so files it cannot carry and tool assertions it cannot see are checked.")
def validate_command(paths: tuple[str, ...], config: str | None, target: str | None) -> None:
    """Check suites (and JSONL test cases: files, folders of them, those the project's `suites` name) without
    running them: every problem at once, with file:line:col."""
    from tamesu.jsonl.validate import split_paths

    chosen = split_paths([Path(p) for p in paths], Path(config) if config else None)
    problems: list[Problem] = []
    said: list[str] = []
    if chosen.jsonl:
        problems += _validate_jsonl(chosen.jsonl, config, target, said)
    if chosen.load_suites:
        from tamesu.plan import load_plan

        try:
            plan = load_plan(chosen.suites, Path(config) if config else None, require_secrets=False)
        except ConfigError as exc:
            problems += exc.problems
        else:
            for warning in plan.warnings:
                click.echo(f"warning: {warning}", err=True)
            said.append(f"ok: {count_of(len(plan.tests), 'test')} in {count_of(len(plan.suites), 'suite')}")
    if problems:
        _fail_config(problems)
    for line in said:
        click.echo(line)


def _validate_jsonl(paths: list[Path], config: str | None, target: str | None, said: list[str]) -> list[Problem]:
    """The JSONL files' problems (their warnings printed, their `ok:` line added to `said` when there are none)."""
    from tamesu.jsonl.validate import TargetProblem, validate_files

    try:
        done = asyncio.run(validate_files(paths, Path(config) if config else None, target))
    except ConfigError as exc:
        return exc.problems
    except TargetProblem as exc:
        click.echo(f"tamesu validate: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    for warning in done.warnings:
        click.echo(f"warning: {warning}", err=True)
    against = f" for {done.target}" if done.target else ""
    said.append(f"ok: {done.cases} test case(s) in {done.files} JSONL file(s){against}")
    return []
