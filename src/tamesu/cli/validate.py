"""`tamesu validate`: suites and JSONL test cases checked without running them (loaded only when used)."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from tamesu.cli.main import _fail_config
from tamesu.cli.shared import CONFIG_HELP, CONFIG_PATH, SUITE_PATH, parse_settings
from tamesu.errors import EXIT_CONFIG, ConfigError, Problem
from tamesu.plan import Project, find_project, load_project, load_project_targets
from tamesu.plan.project import label, split_paths
from tamesu.plan.targets import ResolvedTarget, TargetProblem, resolve, voice_warnings
from tamesu.report.words import count_of
from tamesu.suite.secrets import Secrets


@click.command(name="validate")
@click.argument("paths", nargs=-1, type=SUITE_PATH)
@click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)
@click.option("-n", "--name", "target", metavar="TARGET", help="JSONL files: the agent they test (default: the "
              "project's only target), so files it cannot carry and tool assertions it cannot see are checked.")
def validate_command(paths: tuple[str, ...], config: str | None, target: str | None) -> None:
    """Check suites (and JSONL test cases: files, folders of them, those the project's `suites` name) without
    running them: every problem at once, with file:line:col."""
    chosen = split_paths([Path(p) for p in paths], Path(config) if config else None)
    problems: list[Problem] = []
    said: list[str] = []
    warn = _Warnings()
    if chosen.jsonl:
        problems += _validate_jsonl(chosen.jsonl, config, target, said, warn)
    if chosen.load_suites:
        from tamesu.plan import load_plan

        try:
            plan = load_plan(chosen.suites, Path(config) if config else None, require_secrets=False)
        except ConfigError as exc:
            problems += exc.problems
            warn(exc.warnings)  # said with the problems: fixing them should not uncover more
        else:
            warn([*plan.warnings, *_out_warnings(plan.project)])
            said.append(f"ok: {count_of(len(plan.tests), 'test')} in {count_of(len(plan.suites), 'suite')}")
    if problems:
        _fail_config(problems)
    for line in said:
        click.echo(line)


class _Warnings:
    """Prints each warning once: the JSONL files and the suites of one project share its `.env` and its words."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def __call__(self, warnings: list[Problem] | list[str]) -> None:
        for warning in map(str, warnings):
            if warning not in self.said:
                self.said.add(warning)
                click.echo(f"warning: {warning}", err=True)


def _validate_jsonl(paths: list[Path], config: str | None, target: str | None, said: list[str],
                    warn: _Warnings) -> list[Problem]:
    """The JSONL files' problems (their warnings printed, their `ok:` line added to `said` when there are none)."""
    try:
        done = asyncio.run(validate_files(paths, Path(config) if config else None, target))
    except ConfigError as exc:
        warn(exc.warnings)
        return exc.problems
    except TargetProblem as exc:
        click.echo(f"tamesu validate: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    warn(done.warnings)
    against = f" for {done.target}" if done.target else ""
    said.append(f"ok: {done.cases} test case(s) in {done.files} JSONL file(s){against}")
    return []


@dataclass
class Validated:
    cases: int = 0
    files: int = 0
    target: str | None = None
    """How the agent under test was named (`expense (rest)`), or None when no target could be chosen."""
    warnings: list[str] = field(default_factory=list)


async def validate_files(paths: list[Path], config: Path | None, name: str | None) -> Validated:
    """JSONL test cases checked as `tamesu test` loads them, without running: every problem of every file at
    once. The agent under test is `-n`, or the project's only target: with it known, a file it cannot carry
    refuses its case and a tool assertion on an A2A agent is a warning, exactly as `tamesu test -n` would say;
    without one, those checks are skipped (said). Raises ConfigError with every problem of every file,
    TargetProblem when `-n` names nothing."""
    from tamesu.jsonl import parser

    project = load_project(config if config else find_project(paths[0]), Path.cwd())
    secrets = Secrets(project.dir / env for env in project.spec.secrets.env_files)
    done = Validated(files=len(paths), warnings=[str(w) for w in secrets.warnings])
    resolved: ResolvedTarget | None = None
    if name is not None or len(project.spec.targets) == 1:
        resolved = await _target(name, project, secrets, done, paths[0])
        done.target = resolved.about
    elif project.spec.targets:
        done.warnings.append(f"no -n: {len(project.spec.targets)} targets in tamesu.yaml, so what the agent "
                             "under test can carry (files, tool calls) is not checked")
    problems: list[Problem] = []
    for path in paths:
        settings = parse_settings(project, secrets, path.parent.resolve(), resolved)
        try:
            cases = parser.parse_file(path, label(path), settings)
        except ConfigError as exc:
            problems.extend(exc.problems)
        else:
            done.cases += len(cases)
            if resolved is not None:  # a voice, behaviours or a DTMF digit the agent cannot get, as `test` says
                done.warnings += voice_warnings(cases, resolved.name, resolved.spec)
        done.warnings += [str(w) for w in settings.warnings]
    if problems:
        raise ConfigError(problems, warnings=list(secrets.warnings))
    return done


async def _target(name: str | None, project: Project, secrets: Secrets, done: Validated,
                  looked_from: Path) -> ResolvedTarget:
    """The agent under test as `tamesu test -n` finds it; an unset variable or secret it needs is a warning
    here, as `validate` says of suites (CI validates without them)."""
    try:
        resolved, warnings = await resolve(name, project, secrets, looked_from)
    except ConfigError as exc:
        if not all(p.message.endswith("is not set") or p.message.endswith(f"is not set ({secrets.sources})")
                   for p in exc.problems):
            raise
        done.warnings += [str(p) for p in exc.problems]
        chosen = name or next(iter(project.spec.targets))
        spec = load_project_targets(project)[0][chosen]
        return ResolvedTarget(chosen, spec, f"{chosen} ({spec.type})")
    done.warnings += [str(w) for w in warnings]
    return resolved


def _out_warnings(project: Project) -> list[Problem]:
    """`out:` naming a file (or a path through one): every run would stop at exit 3 before its first test, unless
    `--out` names another folder; said by validate, which a run is not needed for."""
    out = project.dir / project.spec.out
    blocked = next((p for p in [out, *out.parents] if p.exists() and not p.is_dir()), None)
    if blocked is None or project.doc is None:
        return []
    return [project.doc.problem(("out",), f"{blocked} is a file: no run folder can be made under it (unless --out "
                                          "names another folder)")]
