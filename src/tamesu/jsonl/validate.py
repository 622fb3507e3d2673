"""`tamesu validate FILE.jsonl|FOLDER...`: JSONL test cases checked as `tamesu test` loads them, without running.

`split_paths` says which of validate's paths are JSONL: `.jsonl`/`.ndjson` files, those directly in a folder
named (its YAML files stay suites), and those the project's `suites` patterns match (a file, or a folder they
name), so that the YAML loader never reads a JSON line as YAML.

Every problem of every file at once (`file:line:col: path: problem`, exit 2). The agent under test is `-n`, or
the project's only target: with it known, a file it cannot carry refuses its case and a tool assertion on an
A2A agent is a warning, exactly as `tamesu test -n` would say; without one, those checks are skipped (said).
`parse_settings` is also how `tamesu test` parses, so the two never disagree.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from tamesu.errors import ConfigError, Problem
from tamesu.jsonl import assertions, parser, voice_fields
from tamesu.jsonl.helpers import TargetHelper
from tamesu.jsonl.targets import ResolvedTarget, TargetProblem, file_refusal, resolve
from tamesu.plan import PROJECT_FILE, Project, find_project, load_project, load_project_targets, suite_files
from tamesu.plan.project import JSONL_SUFFIXES, MAX_SUITE_FILES, is_jsonl, jsonl_among
from tamesu.suite.secrets import Secrets


@dataclass
class Split:
    jsonl: list[Path] = field(default_factory=list)
    suites: list[Path] = field(default_factory=list)
    """What the YAML loader is given; with `load_suites` and no paths, the project's own suites as before."""
    load_suites: bool = True


def split_paths(paths: list[Path], config: Path | None) -> Split:
    """The JSONL files among validate's paths, and what is left for the YAML loader. A project that cannot be
    read, or a pattern the loader refuses, leaves everything to the loader, which says what is wrong."""
    try:
        project = load_project(config if config else find_project(paths[0] if paths else Path.cwd()), Path.cwd())
        split = Split()
        for path in paths or [project.dir]:
            if path.is_dir() and path.resolve() == project.dir:
                _split_project(path, project, split)
            elif path.is_dir():
                yaml, jsonl = _in_folder(path)
                split.jsonl += jsonl
                if yaml or not jsonl:  # a folder with neither stays the loader's ("no suite files in ...")
                    split.suites.append(path)
            elif is_jsonl(path):
                split.jsonl.append(path)
            else:
                split.suites.append(path)
    except (ConfigError, OSError, RuntimeError):
        return Split(jsonl=[p for p in paths if is_jsonl(p)], suites=[p for p in paths if not is_jsonl(p)],
                     load_suites=not paths or any(not is_jsonl(p) for p in paths))
    split.jsonl = list({path.resolve(): path for path in split.jsonl}.values())
    split.load_suites = bool(split.suites) or not split.jsonl
    if not paths and split.load_suites and split.suites == [project.dir]:
        split.suites = []  # no JSONL among the project's suites: the loader reads them exactly as before
    return split


def _split_project(folder: Path, project: Project, split: Split) -> None:
    """The project's `suites` matches, split as `tamesu run` splits them (`jsonl_among`): JSONL files, and
    those in a folder a pattern names, are validated as JSONL; when there is any, the loader gets the other
    matches one by one instead of the project's patterns."""
    others, named = jsonl_among(suite_files([folder], project))
    jsonl = [p for path in named for p in (_in_folder(path)[1] if path.is_dir() else [path])]
    split.jsonl += jsonl
    split.suites += others if named else [folder]


def jsonl_in_folder(folder: Path) -> list[Path]:
    """The JSONL files directly in `folder`, sorted by name (`tamesu test -i FOLDER` runs them in that order)."""
    return _in_folder(folder)[1]


def _in_folder(folder: Path) -> tuple[list[Path], list[Path]]:
    """(YAML, JSONL) files directly in `folder`, each list sorted, at most MAX_SUITE_FILES of each."""
    def some(pattern: str) -> list[Path]:
        return list(itertools.islice(folder.glob(pattern), MAX_SUITE_FILES))

    yaml = [p for p in some("*.y*ml") if p.name != PROJECT_FILE and p.is_file()]
    jsonl = [p for suffix in JSONL_SUFFIXES for p in some(f"*{suffix}") if p.is_file()]
    return sorted(yaml), sorted(jsonl)


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
            cases = parser.parse_file(path, _label(path), settings)
        except ConfigError as exc:
            problems.extend(exc.problems)
        else:
            done.cases += len(cases)
            if resolved is not None:  # a voice, behaviours or a DTMF digit the agent cannot get, as `test` says
                done.warnings += voice_fields.warnings(cases, resolved.name, resolved.spec)
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


__all__ = ["Split", "TargetProblem", "Validated", "parse_settings", "split_paths", "validate_files"]
