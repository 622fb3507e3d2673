"""Finding and loading the project file (tamesu.yaml) and the suite files it names; which of `tamesu validate`'s
paths are JSONL test cases (`split_paths`): `.jsonl`/`.ndjson` files, those directly in a folder named (its
YAML files stay suites), and those the project's `suites` patterns match, so that the YAML loader never reads
a JSON line as YAML."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from tamesu.errors import ConfigError, Problem
from tamesu.models.spec import ModelSpec
from tamesu.plan._suite_glob import suite_glob
from tamesu.plan.model import PROJECT_FILE, Project
from tamesu.suite.problems import problems_from
from tamesu.suite.schema import ProjectSpec, without_extensions
from tamesu.suite.yaml_reader import Document, load_yaml


def find_project(start: Path) -> Path | None:
    """The nearest tamesu.yaml in `start` or a folder above it, up to the root of the git repository `start` is
    in: a tamesu.yaml above the repository (one left in the home folder, or in /tmp) is no part of the project,
    and was read as its own (its suites, models and `out`)."""
    try:
        folder = (start if start.is_dir() else start.parent).resolve()
    except (OSError, RuntimeError):  # unreadable, or a symlink loop: loading the suite says so for it
        folder = start.absolute().parent
    for candidate in [folder, *folder.parents]:
        try:
            if (candidate / PROJECT_FILE).is_file():
                return candidate / PROJECT_FILE
            if (candidate / ".git").exists():  # a folder, or a file in a worktree or submodule
                return None
        except OSError:  # a folder we may not look into holds no project we could read
            continue
    return None


def label(path: Path) -> str:
    """A file as the user named it, relative to the working directory when it is below it. A symlink is named
    by its own path, never its target's (a dangling `rules.yaml` link was "nothere.yaml: file not found")."""
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except (ValueError, OSError):  # elsewhere, or the working directory reached through a symlink
        pass
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a symlink loop (which loading reports)
        return str(path)


@dataclass
class ProjectError(ConfigError):
    """tamesu.yaml's problems, with the project as far as it could be read (`partial`) for the suites' own
    problems to be said beside them; None when what is left out would make problems up in them (a `vars:` or
    `packs:` that is not a mapping, a target the suites would not find)."""

    partial: Project | None = None


_SUITES_READ = {"suites", "vars", "packs", "models", "targets"}
"""tamesu.yaml's keys whose loss would make a suite's own check say something that is not so."""


def load_project(path: Path | None, fallback_dir: Path) -> Project:
    if path is None:
        return Project(ProjectSpec(), fallback_dir.resolve())
    doc = load_yaml(path, label(path))
    if not isinstance(doc.data, dict):
        raise ConfigError([doc.problem((), "tamesu.yaml must be a mapping")])
    problems: list[Problem] = []
    lost: set[str] = set()
    try:
        spec = ProjectSpec.model_validate(without_extensions(doc.data))
    except ValidationError as exc:
        problems = problems_from(exc, doc, ProjectSpec, owner="project")
        rest, lost = _without_broken_parts(doc.data, exc)
        if rest is None:
            raise ConfigError(problems) from None
        spec = rest
    spec.models = resolve_models(spec.models, doc, path.parent.resolve(), problems)
    _check_reports(spec, doc, problems)
    if problems:
        # the targets' own problems too, so one `validate` says every problem of tamesu.yaml (it took three
        # rounds: a model's key, then a fake rule's, then the targets')
        from tamesu.plan.targets import load_targets

        said = len(problems)
        load_targets(spec, doc, problems, [])
        whole = lost.isdisjoint(_SUITES_READ) and len(problems) == said
        for name in (entry.split(".", 1)[1] for entry in lost if entry.startswith("models.")):
            spec.models[name] = ModelSpec(provider="fake")  # a stand-in: a suite naming it finds it
        partial = Project(spec, path.parent.resolve(), doc) if whole else None
        raise ProjectError(list(dict.fromkeys(problems)), partial=partial)
    return Project(spec, path.parent.resolve(), doc)


def _without_broken_parts(data: object, exc: ValidationError) -> tuple[ProjectSpec | None, set[str]]:
    """tamesu.yaml without what did not validate (a model or target entry, or another top-level key), for the
    rest to be checked too, and what was left out (`parallel`, `models.judge`); None when nothing is left to check
    that way."""
    kept = without_extensions(data)
    if not isinstance(kept, dict):
        return None, set()
    kept = dict(kept)
    lost: set[str] = set()
    for error in exc.errors():
        loc = error["loc"]
        if not loc:
            return None, lost
        entries = kept.get(loc[0])
        if loc[0] in ("models", "targets") and len(loc) > 1 and isinstance(entries, dict):
            kept[loc[0]] = {name: value for name, value in entries.items() if name != loc[1]}
            lost.add(f"{loc[0]}.{loc[1]}")
        else:
            kept.pop(str(loc[0]), None)
            lost.add(str(loc[0]))
    try:
        return ProjectSpec.model_validate(kept), lost
    except ValidationError:
        return None, lost


def _check_reports(spec: ProjectSpec, doc: Document, problems: list[Problem]) -> None:
    """`report:` names formats that exist (built in, or a plug-in's)."""
    from tamesu.report.spec import ReportSpecError, parse_reports

    before = len(problems)
    for i, entry in enumerate(spec.report.formats):
        try:
            parse_reports([entry])
        except ReportSpecError as exc:
            written = doc.data.get("report")
            loc: tuple[object, ...] = ("report", i) if isinstance(written, list) else \
                ("report", "formats", i) if isinstance(written, dict) else ("report",)
            problems.append(doc.problem(loc, str(exc)))
    if len(problems) > before:
        return
    try:
        parse_reports(spec.report.formats)  # what only the entries together break: two on standard output
    except ReportSpecError as exc:
        where = ("report", "formats") if isinstance(doc.data.get("report"), dict) else ("report",)
        problems.append(doc.problem(where, str(exc)))


def resolve_models(
    models: dict[str, ModelSpec], doc: Document, base_dir: Path, problems: list[Problem]
) -> dict[str, ModelSpec]:
    """Fake rules files resolve against the file that names them, and every fake's rules are checked now: each
    bad rule is a problem of its own, placed in the rules file or at the inline rule."""
    from tamesu.plan._fake_rules import rule_problems, rules_file_problems

    resolved: dict[str, ModelSpec] = {}
    for name, spec in models.items():
        chain: list[ModelSpec] = []
        current: ModelSpec | None = spec
        while current is not None:
            chain.append(current)
            current = current.fallback
        for depth, model in enumerate(chain):
            if model.provider != "fake":
                continue
            loc = ("models", name, *(["fallback"] * depth), "rules")
            if isinstance(model.rules, str):
                if not Path(model.rules).is_absolute():
                    model.rules = str(base_dir / model.rules)
                problems.extend(rules_file_problems(Path(model.rules), label(Path(model.rules)), doc, loc))
            else:
                problems.extend(rule_problems(model.rules, doc, loc))
        resolved[name] = spec
    return resolved


def suite_files(paths: list[Path], project: Project) -> list[Path]:
    """The suite files named by `paths` (files, or folders of YAML), or by the project's `suites` globs."""
    found: list[Path] = []
    if paths:
        for path in paths:
            if _is_dir(path):
                readable_folder(path)
            if _is_dir(path) and project.dir == path.resolve():
                # the project's own folder: its `suites` patterns say which YAML files are suites
                found.extend(p for pattern in project.spec.suites for p in _bounded_glob(path, pattern, project)
                             if p.name != PROJECT_FILE)
            elif _is_dir(path):
                found.extend(p for p in sorted(path.glob("*.y*ml")) if p.name != PROJECT_FILE)
            else:
                found.append(path)
    else:
        for pattern in project.spec.suites:
            if Path(pattern).is_absolute() or pattern.startswith("~"):
                message = f"{pattern[:80]!r}: patterns are relative to the folder of tamesu.yaml"
                raise ConfigError([project.doc.problem(("suites",), message) if project.doc else
                                   Problem(PROJECT_FILE, 1, 1, "suites", message)])
            found.extend(p for p in _bounded_glob(project.dir, pattern, project) if p.name != PROJECT_FILE)
    unique: dict[Path, Path] = {}
    for path in found:
        try:
            key = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop: the loader says so for this file
            key = path.absolute()
        unique.setdefault(key, path)
    return list(unique.values())


def _is_dir(path: Path) -> bool:
    """A folder; a path we may not look at is none, and loading it as a file tells why it cannot be read."""
    try:
        return path.is_dir()
    except OSError:
        return False


def readable_folder(path: Path) -> None:
    """A folder we may not list is one problem saying so, not an empty folder (glob hides the error)."""
    try:
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        raise ConfigError([Problem(label(path), 1, 1, "", f"cannot read the folder: {exc.strerror or exc}")]) \
            from None


MAX_SUITE_FILES = 5_000

JSONL_SUFFIXES = (".jsonl", ".ndjson")
"""JSONL test cases (`tamesu test`, `tamesu validate`), never read as YAML suites."""


def is_jsonl(path: Path) -> bool:
    return path.name.lower().endswith(JSONL_SUFFIXES)


def named_jsonl(path: Path) -> bool:
    """A path named on `tamesu validate`'s command line that holds JSONL test cases: a `.jsonl`/`.ndjson` file,
    or a `.json` one (a single case, as `tamesu test -i case.json` reads it; never a YAML suite)."""
    return is_jsonl(path) or path.name.lower().endswith(".json")


def jsonl_among(files: list[Path]) -> tuple[list[Path], list[Path]]:
    """(the suite files, the JSONL ones): a `.jsonl`/`.ndjson` file, or a folder a `suites` pattern named that
    holds them, is JSONL test cases, which `tamesu test` runs and `tamesu validate` checks."""
    suites: list[Path] = []
    jsonl: list[Path] = []
    for path in files:
        try:
            holds = path.is_dir() and any(is_jsonl(p) for p in itertools.islice(path.iterdir(), MAX_SUITE_FILES))
        except OSError:
            holds = False  # an unreadable folder: loading it says so
        (jsonl if is_jsonl(path) or holds else suites).append(path)
    return suites, jsonl


def _bounded_glob(folder: Path, pattern: str, project: Project) -> list[Path]:
    """The files a `suites` pattern matches, sorted; a pattern that matches more than MAX_SUITE_FILES (a whole
    file system) is a problem, found without walking all of it. Its `**` leaves out the run folders (the
    project's `out` and any other), hidden folders, `node_modules` and virtual environments (`suite_glob`)."""
    out = os.path.normpath(project.dir / project.spec.out)
    if not pattern.strip():  # pathlib's words for it were "Unacceptable pattern: ''"
        raise _at_pattern(project, pattern, "an empty pattern names no file: write a glob such as suites/*.yaml")
    try:
        found = list(itertools.islice(suite_glob(folder, pattern, skip=out), MAX_SUITE_FILES + 1))
    except (ValueError, NotImplementedError, OSError) as exc:
        raise _at_pattern(project, pattern, f"{pattern[:80]!r}: {exc}") from None
    if len(found) > MAX_SUITE_FILES:
        raise _at_pattern(project, pattern, f"{pattern[:80]!r} matches more than {MAX_SUITE_FILES:,} files: narrow "
                          "it (suites/*.yaml)")
    return sorted(found)


def _at_pattern(project: Project, pattern: str, message: str) -> ConfigError:
    """A problem of one `suites` pattern, where tamesu.yaml writes it (it was always line 1, column 1)."""
    if project.doc is not None and pattern in project.spec.suites:
        return ConfigError([project.doc.problem(("suites", project.spec.suites.index(pattern)), message)])
    return ConfigError([Problem(PROJECT_FILE, 1, 1, "suites", message)])


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
            elif named_jsonl(path):
                split.jsonl.append(path)
            else:
                split.suites.append(path)
    except (ConfigError, OSError, RuntimeError):
        return Split(jsonl=[p for p in paths if named_jsonl(p)], suites=[p for p in paths if not named_jsonl(p)],
                     load_suites=not paths or any(not named_jsonl(p) for p in paths))
    split.jsonl = list({_key(path): path for path in split.jsonl}.values())
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


def _key(path: Path) -> Path:
    """A file as one key however it is named; a symlink loop as named (its reader says what is wrong with it)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
