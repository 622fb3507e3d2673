"""`tamesu validate FILE.jsonl...`: JSONL test cases checked as `tamesu test` loads them, without running.

Every problem of every file at once (`file:line:col: path: problem`, exit 2). The agent under test is `-n`, or
the project's only target: with it known, a file it cannot carry refuses its case and a tool assertion on an
A2A agent is a warning, exactly as `tamesu test -n` would say; without one, those checks are skipped (said).
`parse_settings` is also how `tamesu test` parses, so the two never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tamesu.errors import ConfigError, Problem
from tamesu.jsonl import assertions, parser
from tamesu.jsonl.helpers import TargetHelper
from tamesu.jsonl.targets import ResolvedTarget, TargetProblem, file_refusal, resolve
from tamesu.plan import Project, find_project, load_project, load_project_targets
from tamesu.suite.secrets import Secrets

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def is_jsonl(path: str) -> bool:
    return path.lower().endswith(JSONL_SUFFIXES)


def parse_settings(project: Project, secrets: Secrets, base_dir: Path, resolved: ResolvedTarget | None, *,
                   simulator: str | None = None, connector: str | None = None) -> parser.ParseSettings:
    """What a case may name (the project's models and targets, scripts beside the file, the project or the
    current folder) and what the agent under test can take."""
    specs = load_project_targets(project)[0] if project.spec.targets else {}
    resolver = assertions.Resolver(models=set(project.spec.models), targets=set(specs),
                                   search=list(dict.fromkeys([base_dir, project.dir, Path.cwd()])),
                                   helpers={n: TargetHelper(n, s, secrets, project.dir) for n, s in specs.items()})
    return parser.ParseSettings(
        resolver, default_simulator=simulator, file_dirs=[project.dir],
        file_refusal=file_refusal(resolved, project, connector) if resolved is not None else None,
        target_type=resolved.spec.type if resolved is not None else None)


@dataclass
class Validated:
    cases: int = 0
    files: int = 0
    target: str | None = None
    """How the agent under test was named (`expense (rest)`), or None when no target could be chosen."""
    warnings: list[str] = field(default_factory=list)


async def validate_files(paths: list[Path], config: Path | None, name: str | None) -> Validated:
    """Raises ConfigError with every problem of every file; TargetProblem when `-n` names nothing."""
    project = load_project(config if config else find_project(paths[0]), Path.cwd())
    secrets = Secrets(project.dir / env for env in project.spec.secrets.env_files)
    done = Validated(files=len(paths))
    resolved: ResolvedTarget | None = None
    if name is not None or len(project.spec.targets) == 1:
        resolved = await _target(name, project, secrets, done)
        done.target = resolved.about
    elif project.spec.targets:
        done.warnings.append(f"no -n: {len(project.spec.targets)} targets in tamesu.yaml, so what the agent "
                             "under test can carry (files, tool calls) is not checked")
    problems: list[Problem] = []
    for path in paths:
        settings = parse_settings(project, secrets, path.parent.resolve(), resolved)
        try:
            done.cases += len(parser.parse_file(path, _label(path), settings))
        except ConfigError as exc:
            problems.extend(exc.problems)
        done.warnings += [str(w) for w in settings.warnings]
    if problems:
        raise ConfigError(problems)
    return done


async def _target(name: str | None, project: Project, secrets: Secrets, done: Validated) -> ResolvedTarget:
    """The agent under test as `tamesu test -n` finds it; an unset variable or secret it needs is a warning
    here, as `validate` says of suites (CI validates without them)."""
    try:
        resolved, warnings = await resolve(name, project, secrets)
    except ConfigError as exc:
        if not all(p.message.endswith(("is not set", "is not set (environment or .env)")) for p in exc.problems):
            raise
        done.warnings += [str(p) for p in exc.problems]
        chosen = name or next(iter(project.spec.targets))
        spec = load_project_targets(project)[0][chosen]
        return ResolvedTarget(chosen, spec, f"{chosen} ({spec.type})")
    done.warnings += [str(w) for w in warnings]
    return resolved


def _label(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


__all__ = ["TargetProblem", "Validated", "is_jsonl", "parse_settings", "validate_files"]
