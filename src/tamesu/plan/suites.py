"""From files on disk to a plan of tests: project, suites, targets, cases, assertions, templates.

Every problem in what a user wrote is collected with its position and raised together as ConfigError.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from tamesu import checks, packs
from tamesu.checks import Assertion, AssertionProblem
from tamesu.errors import ConfigError, Problem
from tamesu.models.spec import OUTER_MODELS
from tamesu.plan import _fit, _lint, _slo_names
from tamesu.plan._checks import check_prompted_targets
from tamesu.plan._expand import expand_test
from tamesu.plan._templates import (
    check_default_templates,
    check_hook_templates,
    check_suite_hooks,
    check_templates,
    check_unused_targets,
    model_secret_warnings,
)
from tamesu.plan.model import LoadedSuite, Plan, PlannedTest, Project
from tamesu.plan.project import (
    ProjectError,
    find_project,
    jsonl_among,
    label,
    load_project,
    resolve_models,
    suite_files,
)
from tamesu.plan.targets import load_project_targets, load_targets
from tamesu.results.stats import adaptive_problem
from tamesu.runtime.gc_pause import collector_paused
from tamesu.suite.problems import problems_from
from tamesu.suite.schema import SuiteSpec, without_extensions
from tamesu.suite.secrets import Secrets
from tamesu.suite.yaml_reader import Document, load_yaml


def _no_suite_files(paths: list[Path], project: Project) -> Problem:
    """The one line for a run or validate that found nothing to load, pointing at what named nothing."""
    if paths:
        return Problem(str(paths[0]), 1, 1, "", f"no suite files in {', '.join(str(p) for p in paths)}")
    globs = project.spec.suites
    message = f"no suite files match {', '.join(globs)}" if globs else \
        "the list is empty: name suite files or globs here (suites: [\"suites/*.yaml\"]), or give paths"
    if project.doc is not None and isinstance(project.doc.data, dict) and "suites" in project.doc.data:
        # a null value has no place of its own (YAML puts it at the next token): then the key's
        return project.doc.problem(("suites",), message, key=project.doc.data["suites"] is None)
    if project.path is None:  # most likely a first try in a new folder: say what makes a project
        return Problem(".", 1, 1, "", f"{message}, and there is no tamesu.yaml here or above: `tamesu init` writes "
                                      "one with a first suite, or give the suite files to use")
    return Problem(label(project.path), 1, 1, "", f"{message} (the default suites of a project; tamesu.yaml can "
                                                  "name others)")


@collector_paused()  # the plan lives to the end: walking it while it grows is wasted (tamesu.runtime.gc_pause)
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
    problems: list[Problem] = []
    try:
        project = load_project(project_path, Path.cwd())
    except ProjectError as exc:
        if exc.partial is None:
            raise
        # tamesu.yaml's problems hid every suite's: the suites are checked against what of it could be read
        project, problems = exc.partial, exc.problems
    secrets = Secrets(project.dir / name for name in project.spec.secrets.env_files)
    plan = Plan(project, secrets=secrets)
    files, jsonl = jsonl_among(suite_files(paths, project))
    not_suites = [f"{NOT_A_SUITE}: `tamesu test -i {'FILE' if p.is_dir() else label(p)} -n TARGET` "
                  "runs them, `tamesu validate` checks them" for p in jsonl]
    said = [Problem(label(p), 1, 1, "", why) for p, why in zip(jsonl, not_suites, strict=True)]
    if not files:
        raise ConfigError([*problems, *(said or [_no_suite_files(paths, project)])])
    plan.warnings += [*secrets.warnings, *said]
    if project.doc is not None:
        plan.warnings += model_secret_warnings(project.doc, secrets)
        plan.warnings += _lint.keyless_models(project.doc, project.spec.models)
    project_asserts = _project_assertions(project, problems)
    named: dict[str, LoadedSuite] = {}
    for path in files:
        try:
            loaded, tests, warnings = _load_suite(path, project, project_asserts, today, secrets, require_secrets)
        except ConfigError as exc:
            problems.extend(exc.problems)
            plan.warnings.extend(exc.warnings)
            continue
        first = named.setdefault(loaded.name, loaded)
        if first is not loaded:
            # a test's id is suite/test: two suites of one name (billing/smoke.yaml, support/smoke.yaml) would
            # share ids, filters, history and baselines
            problems.append(loaded.doc.problem(("name",) if loaded.spec.name else (),
                                               f"another suite is named {loaded.name!r} ({label(first.doc.path)}): "
                                               "test ids (suite/test) would be the same; give one a `name:`"))
        plan.suites.append(loaded)
        plan.tests.extend(tests)
        plan.warnings.extend(warnings)
    problems.extend(_slo_names.project_slo_problems(project, [
        _slo_names.suite_vocabulary(suite, _used_targets(suite.spec, [t for t in plan.tests if t.suite is suite]))
        for suite in plan.suites]))
    if project.doc is not None and isinstance(project.doc.data, dict):
        # the project's hooks run with every suite: a var any of them (or any test) has may be meant
        known = {*project.spec.vars, *(name for suite in plan.suites for name in suite.spec.vars)}
        check_default_templates(project.doc, plan.tests, problems)
        check_suite_hooks(project.doc, problems)  # `{{remote...}}`: said there, with why
        check_hook_templates(project.doc.data.get("hooks"), project.doc, known,
                             {test.id: set(test.vars) for test in plan.tests if not test.spec.skip},
                             problems if require_secrets else plan.warnings, problems, secrets)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)), warnings=list(dict.fromkeys(plan.warnings)))
    plan.warnings = list(dict.fromkeys(plan.warnings))
    for doc in [project.doc, *(suite.doc for suite in plan.suites)]:
        if doc is not None:
            secrets.mask_named(doc.data)
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


def _named_apart(project: list[tuple[int, Assertion]], suite: list[tuple[int, Assertion]]) -> list[Assertion]:
    """The defaults a suite's tests get, two of one name (two `contains`) named apart by where each is written
    (`defaults[1]/contains`, `tamesu.yaml defaults[0]/contains`): both were `defaults/contains` in every report."""
    labels = Counter(a.label for _, a in [*project, *suite])
    return [a if labels[a.label] == 1 else dataclasses.replace(
                a, label=f"{where}defaults[{i}]/{a.label.removeprefix('defaults/')}")
            for where, placed in (("tamesu.yaml ", project), ("", suite)) for i, a in placed]


def _load_suite(
    path: Path,
    project: Project,
    project_asserts: list[Assertion],
    today: dt.date,
    secrets: Secrets,
    require_secrets: bool,
) -> tuple[LoadedSuite, list[PlannedTest], list[Problem]]:
    doc = load_yaml(path, label(path))
    if not isinstance(doc.data, dict):
        raise ConfigError([doc.problem((), "a suite must be a mapping with targets and tests")])
    problems: list[Problem] = []
    warnings: list[Problem] = []
    outer: dict[str, object] = {OUTER_MODELS: project.spec.models}  # a suite's fallback may name a model of tamesu.yaml
    try:
        spec = SuiteSpec.model_validate(without_extensions(doc.data), context=outer)
    except ValidationError as exc:
        said = problems_from(exc, doc, SuiteSpec, owner="suite")
        rest = _without_broken_parts(doc.data, exc, outer)
        if rest is None:
            raise ConfigError(said) from None
        problems.extend(said)
        spec = rest
    spec.models = resolve_models(spec.models, doc, path.parent.resolve(), problems)

    if not spec.tests:
        # an empty file (or one with no tests) is most likely a mistake; never a silent "ok"
        warnings.append(doc.problem((), "an empty suite: no tests" if not doc.data else "no tests in this suite"))
    target_specs = load_targets(spec, doc, problems, warnings)
    if project.spec.targets:
        # the project's targets (as `tamesu test -n NAME` sees them) serve every suite; a suite's own wins
        shared, _ = load_project_targets(project)
        for name, shared_spec in shared.items():
            if name not in target_specs:
                target_specs[name] = shared_spec
                spec.targets[name] = project.spec.targets[name]
    check_suite_hooks(doc, problems)
    suite = LoadedSuite(spec, doc, target_specs, project)
    check_prompted_targets(suite, problems)
    warnings.extend(_lint.remote_tokens(suite, doc, secrets, problems))
    warnings.extend(_lint.remote_names(suite, doc, problems))
    warnings.extend(_lint.unreachable_remote_agents(suite, doc))
    warnings.extend(_lint.unpriced_models(suite))
    warnings.extend(_lint.missing_tls_files(suite))
    warnings.extend(model_secret_warnings(doc, secrets))
    warnings.extend(_lint.keyless_models(doc, spec.models))
    suite.broken_packs = _check_packs(spec.packs, doc, problems)

    suite_asserts: list[Assertion] = []
    placed: list[tuple[int, Assertion]] = []
    for i, entry in enumerate(spec.defaults.assert_):
        try:
            if packs.name_of(entry) in suite.broken_packs:
                continue
            suite_asserts.append(checks.parse_assertion(packs.inline(entry, suite.packs), prefix="defaults/",
                                                        search=suite.search))
            placed.append((i, suite_asserts[-1]))
        except AssertionProblem as exc:
            problems.append(doc.problem(("defaults", "assert", i, *exc.loc), exc.message, key=exc.at_key))
    # the project's defaults by their index in tamesu.yaml: when one did not parse, that is the problem to say
    project_placed = list(enumerate(project_asserts)) \
        if len(project_asserts) == len(project.spec.defaults.assert_) else []
    warnings.extend(_lint.untraced_default_judges(suite, placed, project_placed))
    defaults = _named_apart(project_placed or list(enumerate(project_asserts)), placed)
    slo = {**project.spec.defaults.slo, **spec.defaults.slo}
    adaptive = spec.defaults.adaptive or project.spec.defaults.adaptive

    planned: list[PlannedTest] = []
    seen_names: dict[str, int] = {}
    for index, raw in enumerate(spec.tests):
        for test in expand_test(suite, index, raw, problems, warnings, today):
            test.assertions = [*defaults, *test.assertions]
            test.slo = slo
            if adaptive is not None and test.spec.adaptive is None and test.spec.repeat > 1:
                # a default cannot know each test's repeat: its min_runs is at most the test's runs
                fitted = adaptive.model_copy(update={"min_runs": min(adaptive.min_runs, test.spec.repeat)})
                test.spec = test.spec.model_copy(update={"adaptive": fitted})
            if test.spec.adaptive is not None and (never := adaptive_problem(
                    test.spec.repeat, test.spec.pass_threshold, test.spec.adaptive.confidence,
                    test.spec.adaptive.min_runs)) is not None:
                own = isinstance(raw, dict) and "adaptive" in raw
                where = doc.problem(("tests", index, "adaptive") if own else ("tests", index),
                                    never if own else f"{never} (adaptive from defaults)")
                if where not in problems:  # once for a test of many cases
                    problems.append(where)
            if test.name in seen_names and seen_names[test.name] != index:  # two cases of one test: said
                problems.append(doc.problem(("tests", index, "name"), f"another test is named {test.name!r}"))
            seen_names[test.name] = index
            check_templates(test, doc, problems if require_secrets else warnings, problems, warnings, secrets)
            planned.append(test)
    warnings.extend(_fit.unfit_defaults(suite, planned, placed, project_placed))
    if (used := _used_targets(spec, planned)) is not None:
        check_unused_targets(suite, used, problems, warnings, secrets)
    problems.extend(_slo_names.suite_slo_problems(suite, used))
    suite_vars = {*project.spec.vars, *spec.vars}
    test_vars = {test.id: set(test.vars) for test in planned if not test.spec.skip}
    check_default_templates(doc, planned, problems)
    check_hook_templates(doc.data.get("hooks") if isinstance(doc.data, dict) else None, doc, suite_vars, test_vars,
                         problems if require_secrets else warnings, problems, secrets,
                         _capture_names(spec.tests))
    if problems:
        raise ConfigError(problems, warnings=warnings)
    return suite, planned, warnings


def _capture_names(tests: list[dict[str, object]]) -> set[str]:
    """The names the tests capture, as written: a test that did not plan for a problem of its own still has
    them (its problem is said; a hook naming its capture is not one more)."""
    written = [test.get("capture") for test in tests]
    return {str(c["name"]) for capture in written if isinstance(capture, list)
            for c in capture if isinstance(c, dict) and "name" in c}


def _used_targets(spec: SuiteSpec, planned: list[PlannedTest]) -> set[str] | None:
    """The targets the suite's tests talk to or have as a counterpart, also a test that did not plan (its own
    problems are said); None when one that did not plan names its target by a template (which one is not known)."""
    used = {name for test in planned
            for name in (test.target_name, test.spec.counterpart.target if test.spec.counterpart else None) if name}
    planned_at = {test.index for test in planned}
    for index, raw in enumerate(spec.tests):
        if not isinstance(raw, dict):
            continue
        counterpart = raw.get("counterpart")
        named = [raw.get("target", next(iter(spec.targets)) if len(spec.targets) == 1 else None),
                 counterpart.get("target") if isinstance(counterpart, dict) else None]
        for name in named:
            if isinstance(name, str) and "{{" in name:
                if index not in planned_at:
                    return None
            elif isinstance(name, str):
                used.add(name)
    return used


_SELF_CONTAINED = frozenset({"name", "description", "budget", "traces", "load", "formats", "baseline", "tolerance",
                             "hooks", "defaults"})
"""Top-level keys of a suite nothing else in it names: one that is wrong is said, and the suite is checked on
without it (targets, tests, steps), so `validate` says every problem at once. A wrong `models`, `vars`, `packs`
or `remote_agents` would make the tests that name them wrong too: then its problems alone are said."""


def _without_broken_parts(data: Mapping[str, object], exc: ValidationError,
                          outer: dict[str, object]) -> SuiteSpec | None:
    broken = {error["loc"][0] for error in exc.errors() if error["loc"]}
    if not broken or not broken <= _SELF_CONTAINED:
        return None
    kept = without_extensions(data)
    if not isinstance(kept, dict):
        return None
    try:
        return SuiteSpec.model_validate({k: v for k, v in kept.items() if k not in broken}, context=outer)
    except ValidationError:
        return None


NOT_A_SUITE = "JSONL test cases, not a suite"
"""How a JSONL file among a project's suites is said (`tamesu test` runs it; doctor checks the rest)."""


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
