"""From files on disk to a plan of tests: project, suites, targets, cases, assertions, templates.

Every problem in what a user wrote is collected with its position and raised together as ConfigError.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tamesu import checks, packs, plugins, targets
from tamesu.checks import Assertion, AssertionProblem
from tamesu.errors import ConfigError, Problem
from tamesu.models.spec import ModelSpec
from tamesu.suite._errors import problems_from
from tamesu.suite._yaml import Document, load_yaml
from tamesu.suite.schema import ProjectSpec, SuiteSpec, TestSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import references, render_partial, walk_strings
from tamesu.targets.base import TargetSpec

PROJECT_FILE = "tamesu.yaml"


@dataclass
class Project:
    spec: ProjectSpec
    dir: Path
    doc: Document | None = None

    @property
    def path(self) -> Path | None:
        return self.doc.path if self.doc else None


@dataclass
class LoadedSuite:
    spec: SuiteSpec
    doc: Document
    targets: dict[str, TargetSpec]
    project: Project
    broken_packs: set[str] = field(default_factory=set)
    """The suite's packs with a problem in them, reported where they are written and not where they are used."""
    hook_dir: Path | None = None
    """Where before_all/after_all hooks run (default the suite's folder; JSONL cases: the project's)."""

    @property
    def name(self) -> str:
        return self.spec.name or self.doc.path.stem.removesuffix(".tamesu")

    @property
    def dir(self) -> Path:
        return self.doc.path.parent

    @property
    def search(self) -> list[Path]:
        """Where the functions its checks name (`script`, `custom`) are found: its folder, then the project's."""
        return list(dict.fromkeys([self.dir.resolve(), self.project.dir]))

    @property
    def packs(self) -> dict[str, packs.PackSpec]:
        """The packs its tests may name besides the built-in ones: the project's, then the suite's own."""
        return {**self.project.spec.packs, **self.spec.packs}


@dataclass
class PlannedTest:
    """One test as it will run: cases expanded, defaults merged, assertions parsed."""

    suite: LoadedSuite
    spec: TestSpec
    name: str
    case: str | None
    vars: dict[str, Any]
    tags: list[str]
    assertions: list[Assertion]
    slo: dict[str, float]
    index: int
    """Position of the test in the suite's `tests` list, for messages."""
    attack: packs.AttackSpec | None = None
    """The attack the simulated user plays (`scenario.attack`), from its pack."""
    user_factory: Any = None
    """`(models, seed, number) -> UserSimulator`: who plays the user when the test brings its own (JSONL
    cases: static turns, their simulator, a person, checkpoints); None: the scenario's script or persona."""
    line: int | None = None
    """The line that defines the test when it is not `tests[index]` of the suite's YAML (a JSONL case)."""

    @property
    def target_name(self) -> str:
        return self.spec.target

    @property
    def target(self) -> TargetSpec:
        return self.suite.targets[self.spec.target]

    @property
    def id(self) -> str:
        return f"{self.suite.name}/{self.name}"

    def quarantined(self, today: dt.date) -> bool:
        return self.spec.quarantine is not None and self.spec.quarantine.active(today)


@dataclass
class Plan:
    project: Project
    suites: list[LoadedSuite] = field(default_factory=list)
    tests: list[PlannedTest] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    secrets: Secrets = field(default_factory=Secrets)


# ---------------------------------------------------------------- finding files


def find_project(start: Path) -> Path | None:
    """The nearest tamesu.yaml in `start` or a folder above it."""
    folder = start if start.is_dir() else start.parent
    for candidate in [folder.resolve(), *folder.resolve().parents]:
        if (candidate / PROJECT_FILE).is_file():
            return candidate / PROJECT_FILE
    return None


def _label(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_project(path: Path | None, fallback_dir: Path) -> Project:
    if path is None:
        return Project(ProjectSpec(), fallback_dir.resolve())
    doc = load_yaml(path, _label(path))
    if not isinstance(doc.data, dict):
        raise ConfigError([doc.problem((), "tamesu.yaml must be a mapping")])
    try:
        spec = ProjectSpec.model_validate(doc.data)
    except ValidationError as exc:
        raise ConfigError(problems_from(exc, doc, ProjectSpec, owner="project")) from None
    problems: list[Problem] = []
    spec.models = _resolve_models(spec.models, doc, path.parent.resolve(), problems)
    _check_reports(spec, doc, problems)
    if problems:
        raise ConfigError(problems)
    return Project(spec, path.parent.resolve(), doc)


def _check_reports(spec: ProjectSpec, doc: Document, problems: list[Problem]) -> None:
    """`report:` names formats that exist (built in, or a plug-in's)."""
    from tamesu.report.spec import ReportSpecError, parse_reports

    for i, entry in enumerate(spec.report.formats):
        try:
            parse_reports([entry])
        except ReportSpecError as exc:
            written = doc.data.get("report")
            loc: tuple[Any, ...] = ("report", i) if isinstance(written, list) else \
                ("report", "formats", i) if isinstance(written, dict) else ("report",)
            problems.append(doc.problem(loc, str(exc)))


def _resolve_models(
    models: dict[str, ModelSpec], doc: Document, base_dir: Path, problems: list[Problem]
) -> dict[str, ModelSpec]:
    """Fake rules files resolve against the file that names them, and every fake's rules are checked now."""
    from tamesu.models.fake import FakeProvider

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
            if isinstance(model.rules, str) and not Path(model.rules).is_absolute():
                model.rules = str(base_dir / model.rules)
            try:
                FakeProvider.from_spec(model, None, base_dir=base_dir)
            except (ValueError, OSError) as exc:
                problems.append(doc.problem(loc, f"fake rules: {exc}"))
        resolved[name] = spec
    return resolved


def suite_files(paths: list[Path], project: Project) -> list[Path]:
    """The suite files named by `paths` (files, or folders of YAML), or by the project's `suites` globs."""
    found: list[Path] = []
    if paths:
        for path in paths:
            if path.is_dir() and project.dir == path.resolve():
                # the project's own folder: its `suites` patterns say which YAML files are suites
                found.extend(p for pattern in project.spec.suites for p in sorted(path.glob(pattern))
                             if p.name != PROJECT_FILE)
            elif path.is_dir():
                found.extend(p for p in sorted(path.glob("*.y*ml")) if p.name != PROJECT_FILE)
            else:
                found.append(path)
    else:
        for pattern in project.spec.suites:
            found.extend(p for p in sorted(project.dir.glob(pattern)) if p.name != PROJECT_FILE)
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


# ---------------------------------------------------------------- loading


def load_plan(
    paths: list[Path],
    project_path: Path | None = None,
    *,
    today: dt.date | None = None,
    require_secrets: bool = True,
) -> Plan:
    """Load the project and every suite; raise ConfigError with all problems of all files at once.

    A secret that is not set is a problem when `require_secrets`, else a warning (for `validate` in CI).
    """
    today = today or dt.date.today()
    if project_path is None:
        project_path = find_project(paths[0] if paths else Path.cwd())
    project = load_project(project_path, Path.cwd())
    secrets = Secrets(project.dir / name for name in project.spec.secrets.env_files)
    plan = Plan(project, secrets=secrets)
    files = suite_files(paths, project)
    problems: list[Problem] = []
    if not files:
        where = ", ".join(str(p) for p in paths) if paths else ", ".join(project.spec.suites)
        raise ConfigError([Problem(str(paths[0]) if paths else ".", 1, 1, "", f"no suite files in {where}")])
    project_asserts = _project_assertions(project, problems)
    for path in files:
        try:
            loaded, tests, warnings = _load_suite(path, project, project_asserts, today, secrets, require_secrets)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        plan.suites.append(loaded)
        plan.tests.extend(tests)
        plan.warnings.extend(warnings)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    plan.warnings = list(dict.fromkeys(plan.warnings))
    return plan


def _project_assertions(project: Project, problems: list[Problem]) -> list[Assertion]:
    parsed: list[Assertion] = []
    if project.doc is not None:
        _check_packs(project.spec.packs, project.doc, problems)
    for i, entry in enumerate(project.spec.defaults.assert_):
        try:
            parsed.append(checks.parse_assertion(packs.inline(entry, project.spec.packs), prefix="defaults/",
                                                 search=[project.dir]))
        except AssertionProblem as exc:
            if project.doc is not None:
                loc = ("defaults", "assert", i, *exc.loc)
                problems.append(project.doc.problem(loc, exc.message, key=exc.at_key))
    return parsed


def _load_suite(
    path: Path,
    project: Project,
    project_asserts: list[Assertion],
    today: dt.date,
    secrets: Secrets,
    require_secrets: bool,
) -> tuple[LoadedSuite, list[PlannedTest], list[Problem]]:
    doc = load_yaml(path, _label(path))
    if not isinstance(doc.data, dict):
        raise ConfigError([doc.problem((), "a suite must be a mapping with targets and tests")])
    problems: list[Problem] = []
    warnings: list[Problem] = []
    try:
        spec = SuiteSpec.model_validate(doc.data)
    except ValidationError as exc:
        raise ConfigError(problems_from(exc, doc, SuiteSpec, owner="suite")) from None
    spec.models = _resolve_models(spec.models, doc, path.parent.resolve(), problems)

    target_specs = _load_targets(spec, doc, problems, warnings)
    suite = LoadedSuite(spec, doc, target_specs, project)
    suite.broken_packs = _check_packs(spec.packs, doc, problems)

    suite_asserts: list[Assertion] = []
    for i, entry in enumerate(spec.defaults.assert_):
        try:
            if packs.name_of(entry) in suite.broken_packs:
                continue
            suite_asserts.append(checks.parse_assertion(packs.inline(entry, suite.packs), prefix="defaults/",
                                                        search=suite.search))
        except AssertionProblem as exc:
            problems.append(doc.problem(("defaults", "assert", i, *exc.loc), exc.message, key=exc.at_key))
    slo = {**project.spec.defaults.slo, **spec.defaults.slo}

    planned: list[PlannedTest] = []
    seen_names: dict[str, int] = {}
    for index, raw in enumerate(spec.tests):
        for test in _expand_test(suite, index, raw, problems, warnings, today):
            test.assertions = [*project_asserts, *suite_asserts, *test.assertions]
            test.slo = slo
            if test.name in seen_names:
                problems.append(doc.problem(("tests", index, "name"), f"another test is named {test.name!r}"))
            seen_names[test.name] = index
            _check_templates(test, doc, problems if require_secrets else warnings, problems, warnings, secrets)
            planned.append(test)
    if problems:
        raise ConfigError(problems)
    return suite, planned, warnings


def load_project_targets(project: Project) -> tuple[dict[str, TargetSpec], list[Problem]]:
    """The `targets:` of tamesu.yaml (for `tamesu test -n NAME`), validated by their types; raises ConfigError.
    Returns the targets and the warnings (a key of another target type)."""
    if project.doc is None or not project.spec.targets:
        return {}, []
    problems: list[Problem] = []
    warnings: list[Problem] = []
    loaded = _load_targets(project.spec, project.doc, problems, warnings)
    if problems:
        raise ConfigError(problems)
    return loaded, warnings


def _load_targets(
    spec: SuiteSpec | ProjectSpec, doc: Document, problems: list[Problem], warnings: list[Problem]
) -> dict[str, TargetSpec]:
    loaded: dict[str, TargetSpec] = {}
    for name, raw in spec.targets.items():
        loc = ("targets", name)
        kind = raw.get("type")
        if kind is None:
            problems.append(doc.problem(loc, "missing required key 'type' (one of "
                                        f"{', '.join(targets.known_types())})"))
            continue
        if not isinstance(kind, str) or not targets.is_known(kind):
            problems.append(doc.problem((*loc, "type"), f"unknown target type {kind!r} (one of "
                                        f"{', '.join(targets.known_types())})"))
            continue
        if not targets.is_implemented(kind):
            problems.append(doc.problem((*loc, "type"),
                                        f"target type {kind!r} is not available in this version of tamesu"))
            continue
        try:
            cls = targets.target_class(kind)
        except plugins.PluginError as exc:
            problems.append(doc.problem((*loc, "type"), str(exc)))
            continue
        own_keys = targets.keys_of(kind)
        kept = dict(raw)
        for key in raw:
            owner = targets.foreign_key_owner(kind, key)
            if key not in own_keys and owner is not None:
                warnings.append(doc.problem((*loc, key), f"{key!r} is a key of {owner} targets, "
                                            f"not {kind}; ignored", key=True))
                kept.pop(key)
        try:
            loaded[name] = cls.Spec.model_validate(kept)
        except ValidationError as exc:
            problems.extend(problems_from(exc, doc, cls.Spec, loc, owner=f"{kind} target"))
    return loaded


def _expand_test(
    suite: LoadedSuite,
    index: int,
    raw: dict[str, Any],
    problems: list[Problem],
    warnings: list[Problem],
    today: dt.date,
) -> list[PlannedTest]:
    doc = suite.doc
    loc = ("tests", index)
    target = raw.get("target")
    if isinstance(target, str) and target not in suite.spec.targets:
        known = ", ".join(suite.spec.targets) or "none declared"
        problems.append(doc.problem((*loc, "target"), f"no target named {target!r} (targets: {known})"))
    try:
        spec = TestSpec.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from(exc, doc, TestSpec, loc, owner="test"))
        # the rest of the test is still checked, so one run of `validate` shows every problem
        entries = raw.get("assert")
        if isinstance(entries, list):
            _parse_assertions(entries, doc, loc, problems, suite.packs, suite.broken_packs, suite.search)
        return []
    if spec.quarantine and spec.quarantine.until and spec.quarantine.until < today:
        warnings.append(doc.problem((*loc, "quarantine", "until"),
                                    f"quarantine expired on {spec.quarantine.until}; the test counts again"))

    cases = list(spec.cases)
    if spec.cases_file:
        cases_loc = (*loc, "cases_file")
        try:
            cases.extend(read_cases(suite.dir / spec.cases_file))
        except ValueError as exc:
            problems.append(doc.problem(cases_loc, str(exc)))
            return []
    names = [c.name for c in cases]
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(doc.problem((*loc, "cases"), f"two cases are named {name!r}"))

    base_vars = {**suite.project.spec.vars, **suite.spec.vars, **spec.vars}
    variants: list[tuple[str | None, dict[str, Any]]] = (
        [(c.name, {**base_vars, **c.vars}) for c in cases] if cases else [(None, base_vars)]
    )
    expanded: list[PlannedTest] = []
    for case_name, merged_vars in variants:
        body = spec.model_dump(by_alias=True, exclude={"cases", "cases_file", "vars"}, exclude_unset=True)
        rendered = render_partial(body, {"vars": merged_vars})
        try:
            case_spec = TestSpec.model_validate({**rendered, "vars": merged_vars})
        except ValidationError as exc:
            problems.extend(problems_from(exc, doc, TestSpec, loc, owner="test"))
            continue
        assertions = _parse_assertions(case_spec.assert_, doc, loc, problems, suite.packs, suite.broken_packs,
                                       suite.search)
        attack = _attack(suite, case_spec, doc, loc, problems, assertions)
        if case_name is None or case_name == variants[0][0]:
            _check_user_side(suite, case_spec, doc, loc, problems)
            _check_models_needed(suite, case_spec, doc, loc, problems)
        name = f"{spec.name} [{case_name}]" if case_name else spec.name
        tags = [*case_spec.tags, *([f"case:{case_name}"] if case_name else [])]
        expanded.append(PlannedTest(suite, case_spec, name, case_name, merged_vars, tags, assertions, {}, index,
                                    attack=attack))
    return expanded


def _attack(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[Any, ...], problems: list[Problem],
    assertions: list[Assertion],
) -> packs.AttackSpec | None:
    """`scenario.attack`: the pack's attack for the simulator, and the pack added to `assertions` unless the
    test, the suite's or the project's defaults assert that pack already."""
    name = spec.scenario.attack
    if name is None:
        return None
    where = (*loc, "scenario", "attack")

    def report(message: str) -> None:
        problem = doc.problem(where, message)
        if problem not in problems:
            problems.append(problem)

    try:
        attack = packs.attack_of(name, suite.packs)
    except ValueError as exc:
        report(str(exc))
        return None
    defaults = [*suite.project.spec.defaults.assert_, *suite.spec.defaults.assert_]
    if name in suite.broken_packs or any(packs.name_of(e) == name for e in [*spec.assert_, *defaults]):
        return attack
    entry = {"pack": name, "name": f"pack {name}"}
    configured = {**suite.project.spec.models, **suite.spec.models}
    if not spec.skip and "judge" not in configured and packs.needs_judge(entry, suite.packs):
        report(f"attack {name!r} is graded by pack {name}, which needs a model: set models.judge in tamesu.yaml "
               f"or the suite, or assert it yourself (pack: {{name: {name}, judges: false}})")
    try:
        assertions.append(checks.parse_assertion(packs.inline(entry, suite.packs)))
    except AssertionProblem as exc:
        report(f"pack {name}: {exc.message}")
    return attack


def _check_user_side(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[Any, ...], problems: list[Problem]
) -> None:
    """Something must play the user: script steps, or a simulator model with a goal, or a counterpart."""
    if spec.skip:
        return
    scenario = spec.scenario
    if spec.counterpart is not None:
        if scenario.attack is not None:
            problems.append(doc.problem((*loc, "scenario", "attack"), "a counterpart plays the user in this "
                                        "test, so nothing would attack: drop counterpart or scenario.attack"))
        _check_counterpart(suite, spec, doc, loc, problems)
        return
    has_simulator = "simulator" in suite.spec.models or "simulator" in suite.project.spec.models
    if scenario.attack is not None and not has_simulator:
        problems.append(doc.problem((*loc, "scenario", "attack"), "an attack is played by the simulated user: "
                                    "set models.simulator in tamesu.yaml or the suite"))
        return
    if scenario.script and not has_simulator:
        return
    if not has_simulator:
        problems.append(doc.problem((*loc, "scenario") if "scenario" in doc_keys(doc, loc) else loc,
                                    "nothing plays the user: add scenario.script steps, or set models.simulator "
                                    "so the persona can speak"))
    elif not scenario.goal and not scenario.script and scenario.attack is None:
        problems.append(doc.problem((*loc, "scenario") if "scenario" in doc_keys(doc, loc) else loc,
                                    "the simulated user needs scenario.goal (or scenario.script steps)"))


def _check_counterpart(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[Any, ...], problems: list[Problem]
) -> None:
    """The counterpart is a target of the suite, and it has something to start from."""
    counterpart = spec.counterpart
    assert counterpart is not None
    if counterpart.target not in suite.spec.targets:
        known = ", ".join(suite.spec.targets) or "none declared"
        problems.append(doc.problem((*loc, "counterpart", "target"),
                                    f"no target named {counterpart.target!r} (targets: {known})"))
    if counterpart.opening is None and not spec.scenario.goal:
        problems.append(doc.problem((*loc, "counterpart"), "the counterpart needs an opening, or scenario.goal "
                                    "to answer first"))


_JUDGED = {"judge", "grounded"}


def _check_models_needed(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[Any, ...], problems: list[Problem]
) -> None:
    """A judge, a golden file judged by a model, or an extracted capture need models.judge (or a `model:`)."""
    configured = {**suite.project.spec.models, **suite.spec.models}
    if "judge" in configured or "extract" in configured:
        return
    for i, entry in enumerate(spec.assert_):
        if not isinstance(entry, dict):
            continue
        key = next((k for k in entry if k not in checks.META_KEYS), None)
        options = entry.get(key) if key else None
        own_model = isinstance(options, dict) and options.get("model") is not None
        judged = key in _JUDGED or (isinstance(options, dict) and (
            (key == "golden" and options.get("mode") == "judge") or (key == "handoff" and options.get("summary")))) \
            or (key == "pack" and packs.needs_judge(entry, suite.packs))
        if judged and not own_model:
            problems.append(doc.problem((*loc, "assert", i, key), f"{key} needs a model: set models.judge in "
                                        "tamesu.yaml or the suite, or give this assertion a model:", key=True))
    for i, capture in enumerate(spec.capture):
        if capture.extract is not None and "judge" not in configured:
            problems.append(doc.problem((*loc, "capture", i, "extract"), "extract needs a model: set models.judge "
                                        "(or models.extract) in tamesu.yaml or the suite", key=True))


def doc_keys(doc: Document, loc: tuple[Any, ...]) -> set[str]:
    node: Any = doc.data
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return set()
    return set(node) if isinstance(node, dict) else set()


def _parse_assertions(
    entries: list[Any], doc: Document, loc: tuple[Any, ...], problems: list[Problem],
    user_packs: dict[str, packs.PackSpec] | None = None, broken_packs: set[str] | None = None,
    search: list[Path] | None = None,
) -> list[Assertion]:
    parsed: list[Assertion] = []
    for i, entry in enumerate(entries):
        if broken_packs and packs.name_of(entry) in broken_packs:
            continue  # its problem is reported where the pack is written
        try:
            parsed.append(checks.parse_assertion(packs.inline(entry, user_packs or {}), search=search))
        except AssertionProblem as exc:
            problem = doc.problem((*loc, "assert", i, *exc.loc), exc.message, key=exc.at_key)
            if problem not in problems:
                problems.append(problem)
    return parsed


def _check_packs(defined: dict[str, packs.PackSpec], doc: Document, problems: list[Problem]) -> set[str]:
    """A pack's assertions are checked where the pack is written, once, not at every test that uses it.
    Returns the names of the packs with a problem."""
    broken: set[str] = set()
    for name, pack in defined.items():
        for i, entry in enumerate(pack.assert_):
            try:
                checks.parse_assertion(entry)
            except AssertionProblem as exc:
                broken.add(name)
                problems.append(doc.problem(("packs", name, "assert", i, *exc.loc), exc.message, key=exc.at_key))
    return broken


def read_cases(path: Path) -> list[Any]:
    """Cases from a CSV file (header row, a `name` column) or a JSON array of objects with `name`."""
    from tamesu.suite.schema import Case

    if not path.is_file():
        raise ValueError(f"cases file not found: {path.name}")
    text = path.read_text(encoding="utf-8")
    rows: list[dict[str, Any]]
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise ValueError(f"{path.name} must be a JSON array of objects")
        rows = data
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or "name" not in reader.fieldnames:
            raise ValueError(f"{path.name} needs a header row with a name column")
        rows = list(reader)
    else:
        raise ValueError(f"{path.name}: cases files are .csv or .json")
    cases = []
    for number, row in enumerate(rows, start=1):
        name = row.get("name")
        if not name or not str(name).strip():
            where = f"row {number + 1}" if path.suffix.lower() == ".csv" else f"item {number}"
            raise ValueError(f"{path.name} {where} has no name")
        values = {k: v for k, v in row.items() if k not in ("name", "vars")}
        if isinstance(row.get("vars"), dict):
            values.update(row["vars"])
        cases.append(Case(name=str(name), vars=values))
    return cases


_VAR_REF = re.compile(r"^vars\.([^.]+)")
_REMOTE_REF = re.compile(r"^remote\.([^.]+)(?:\.(.+))?$")
_REMOTE_FIELDS = ("url", "grpc", "card")
_CAPTURED_REF = re.compile(r"^captured\.([^.]+)")
_SECRET_REF = re.compile(r"^secrets\.([^.]+)$")
_ENV_REF = re.compile(r"^env\.([^.]+)$")


def _check_templates(
    test: PlannedTest,
    doc: Document,
    secret_problems: list[Problem],
    problems: list[Problem],
    warnings: list[Problem],
    secrets: Secrets,
) -> None:
    """Every template in the test and its target names something that can exist at run time."""
    captures = {c.name for c in test.spec.capture}
    raw_test = test.suite.spec.tests[test.index]
    raw_target = test.suite.spec.targets.get(test.target_name, {})
    sources = [(("tests", test.index), raw_test), (("targets", test.target_name), raw_target)]
    for prefix, raw in sources:
        for path, text in walk_strings(raw):
            if prefix[0] == "tests" and path and path[0] in ("cases", "vars"):
                continue
            for expr, problem in references(text):
                loc = (*prefix, *path)
                if problem:
                    problems.append(doc.problem(loc, problem))
                    continue
                if (m := _VAR_REF.match(expr)) and m.group(1) not in test.vars:
                    problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: no var {m.group(1)!r} "
                                                f"in the test, its cases or the suite"))
                elif (m := _CAPTURED_REF.match(expr)) and m.group(1) not in captures and prefix[0] == "tests":
                    problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: the test captures no "
                                                f"{m.group(1)!r}"))
                elif (m := _ENV_REF.match(expr)) and m.group(1) not in os.environ:
                    secret_problems.append(doc.problem(loc, f"environment variable {m.group(1)} is not set"))
                elif (m := _SECRET_REF.match(expr)) and not secrets.has(m.group(1)):
                    secret_problems.append(doc.problem(loc, f"secret {m.group(1)} is not set (environment or .env)"))
                elif (m := _REMOTE_REF.match(expr)) and (wrong := _remote_problem(test, m)):
                    problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: {wrong}"))


def _remote_problem(test: PlannedTest, match: re.Match[str]) -> str | None:
    """What is wrong with `{{remote.NAME.FIELD}}`: an agent the suite does not declare, or an unknown field."""
    name, field_name = match.group(1), match.group(2)
    declared = test.suite.spec.remote_agents
    if name not in declared:
        return f"no remote agent {name!r} (remote_agents: {', '.join(declared) or 'none declared'})"
    if field_name not in _REMOTE_FIELDS:
        return f"a remote agent has {', '.join(_REMOTE_FIELDS)}"
    return None
