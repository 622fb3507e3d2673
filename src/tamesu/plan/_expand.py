"""One test of a suite into its planned tests: validated, its cases expanded, its assertions parsed, its
lints run (`plan.suites` reads the suite around it)."""

from __future__ import annotations

import collections
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from pydantic import ValidationError

from tamesu import checks, packs
from tamesu.checks import Assertion, AssertionProblem
from tamesu.errors import Problem
from tamesu.plan import _fit, _lint
from tamesu.plan._checks import (
    check_audio,
    check_models_needed,
    check_named_agents,
    check_remote_ports,
    check_steps,
    check_user_side,
    no_target,
)
from tamesu.plan._templates import var_problems
from tamesu.plan._typed_vars import typed_assertions
from tamesu.plan.cases import CaseRows, CasesFileError, read_case_rows
from tamesu.plan.model import LoadedSuite, PlannedTest
from tamesu.plan.project import label
from tamesu.suite.problems import problems_from
from tamesu.suite.schema import TestSpec
from tamesu.suite.templates import render_partial, resolve_vars
from tamesu.suite.yaml_reader import Document


def expand_test(
    suite: LoadedSuite,
    index: int,
    raw: Mapping[str, object],
    problems: list[Problem],
    warnings: list[Problem],
    today: dt.date,
) -> list[PlannedTest]:
    doc = suite.doc
    loc = ("tests", index)
    if "target" not in raw and len(suite.spec.targets) == 1:
        # one agent to talk to (the suite's, or the project's only one): a test need not name it
        raw = {**raw, "target": next(iter(suite.spec.targets))}
    target = raw.get("target")
    if isinstance(target, str) and target not in suite.spec.targets:
        problems.append(doc.problem((*loc, "target"), no_target(target, list(suite.spec.targets))))
    try:
        spec = TestSpec.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from(exc, doc, TestSpec, loc, owner="test"))
        # the rest of the test is still checked, so one run of `validate` shows every problem
        entries = raw.get("assert")
        if isinstance(entries, list):
            parse_assertions(entries, doc, loc, problems, suite.packs, suite.broken_packs, suite.search)
        return []
    if spec.quarantine and spec.quarantine.until and spec.quarantine.until < today:
        warnings.append(doc.problem((*loc, "quarantine", "until"),
                                    f"quarantine expired on {spec.quarantine.until}; the test counts again"))

    if len(spec.cases) > MAX_INLINE_CASES:
        problems.append(doc.problem((*loc, "cases"), f"{len(spec.cases):,} inline cases (at most "
                                    f"{MAX_INLINE_CASES:,}): put them in a cases_file (CSV or JSON)"))
        return []
    if "cases" in spec.model_fields_set and not spec.cases and spec.cases_file is None:
        problems.append(doc.problem((*loc, "cases"), "cases is empty: the test would run once with no case; "
                                    "write a case, or leave cases out"))
        return []
    cases = list(spec.cases)
    rows: CaseRows | None = None
    broken = False
    if spec.cases_file:
        try:
            rows = read_case_rows(suite.dir / spec.cases_file, label(suite.dir / spec.cases_file))
        except CasesFileError as exc:  # its rows' problems, where they are written in it (once for its tests)
            problems.extend(p for p in exc.problems if p not in problems)
            if exc.rows is None:
                return []
            rows, broken = exc.rows, True  # the other rows are checked on, and nothing runs
        except ValueError as exc:  # the file as a whole: where the suite names it
            problems.append(doc.problem((*loc, "cases_file"), str(exc)))
            return []
        cases.extend(rows.cases)
    counted = collections.Counter(c.name for c in cases)  # linear: 20,000 cases, not 20,000 squared
    for name in sorted(n for n, times in counted.items() if times > 1):
        # where the second is written: an inline case, else its row of the cases file
        second = [i for i, c in enumerate(cases) if c.name == name][1]
        said = f"two cases are named {name!r}"
        problems.append(doc.problem((*loc, "cases", second, "name"), said) if second < len(spec.cases) or rows is None
                        else rows.problem(rows.row_of(second - len(spec.cases)), "name", said))

    layers = (suite.project.spec.vars, suite.spec.vars, spec.vars)
    base_vars = {**layers[0], **layers[1], **layers[2]}
    variants: list[tuple[str | None, dict[str, object]]] = (
        [(c.name, {**base_vars, **c.vars}) for c in cases] if cases else [(None, base_vars)]
    )
    expanded: list[PlannedTest] = []
    cased = _CaseProblems(problems, rows, len(spec.cases), len(variants))
    for number, (case_name, written_vars) in enumerate(variants):
        cased.start(number, case_name)
        # a var may name another, at any depth: the test sees them put in (the run renders what is left once)
        merged_vars, wrong = resolve_vars(written_vars)
        if wrong:
            case = (number if number < len(spec.cases) else None, case_name or "", cases[number].vars) \
                if cases else None
            row = None if rows is None or number < len(spec.cases) else \
                partial(rows.problem, rows.row_of(number - len(spec.cases)))
            problems.extend(p for p in var_problems(loc, doc, suite.project.doc, layers, case, wrong, row)
                            if p not in problems)
            continue
        body = spec.model_dump(by_alias=True, exclude={"cases", "cases_file", "vars"}, exclude_unset=True)
        if not cases and spec.cases_file is None and "{{" not in json.dumps(body, default=str):
            # no case and no template: the test is its spec with the merged vars (rendering and validating it
            # again, as for a case, was a fifth of planning a plain test)
            case_spec = spec.model_copy(update={"vars": merged_vars})
        else:
            if "assert" in body:
                body["assert"] = typed_assertions(body["assert"], merged_vars)
            rendered = render_partial(body, {"vars": merged_vars})
            try:
                case_spec = TestSpec.model_validate({**rendered, "vars": merged_vars})
            except ValidationError as exc:
                problems.extend(problems_from(exc, doc, TestSpec, loc, owner="test"))
                cased.name_the_case()
                continue
        assertions = parse_assertions(case_spec.assert_, doc, loc, problems, suite.packs, suite.broken_packs,
                                       suite.search)
        # the warnings below name an assertion by its place under `assert:`, which a broken entry left out shifts
        placed = len(assertions) == len(case_spec.assert_)
        if placed:  # a case's vars may name the tool: said with the cases that name it
            problems.extend(_fit.undeclared_tools(suite, case_spec.target, assertions, len(case_spec.assert_), loc))
        cased.name_the_case()
        if case_name is None or case_name == variants[0][0]:
            check_steps(suite, case_spec, doc, loc, problems)
        attack = _attack(suite, case_spec, doc, loc, problems, assertions)
        if case_name is None or case_name == variants[0][0]:
            check_audio(suite, case_spec, doc, loc, problems, warnings)
            check_user_side(suite, case_spec, doc, loc, problems, warnings)
            check_models_needed(suite, case_spec, doc, loc, problems)
            check_named_agents(suite, case_spec, doc, loc, problems)
            check_remote_ports(suite, case_spec, doc, problems)
            problems.extend(_lint.missing_files(suite, case_spec, loc) or _lint.refused_files(suite, case_spec, loc))
        if (case_name is None or case_name == variants[0][0]) and placed:
            warnings.extend(_lint.a2a_tool_assertions(suite, case_spec, assertions, loc))
            warnings.extend(_lint.untraced_judges(suite, case_spec, assertions, loc))
            warnings.extend(_lint.untraced_spans(suite, case_spec, assertions, loc))
            warnings.extend(_lint.turns_past_script(suite, case_spec, assertions, loc))
            warnings.extend(_fit.unfit_assertions(suite, case_spec.target, assertions, len(case_spec.assert_), loc,
                                                   case_spec.steps, case_spec.counterpart.target
                                                   if case_spec.counterpart else None))
        if case_name is None or case_name == variants[0][0]:
            warnings.extend(_lint.ks_past_repeat(suite, case_spec, loc))
            warnings.extend(_lint.unselectable_tags(suite, case_spec, loc))
        if placed:
            warnings.extend(_lint.missing_golden(suite, case_spec, assertions, loc))  # each case its own file
        name = f"{spec.name} [{case_name}]" if case_name else spec.name
        tags = [*case_spec.tags, *([f"case:{case_name}"] if case_name else [])]
        expanded.append(PlannedTest(suite, case_spec, name, case_name, merged_vars, tags, assertions, {}, index,
                                    attack=attack))
    cased.finish()
    return [] if broken else expanded


class _CaseProblems:
    """A problem some cases' values made (an empty `expect` in `contains: "{{vars.expect}}"`) is said where the
    test writes it, naming each such case and, from a cases file, its row: said once for all cases, it named none
    of the 200 rows of a spreadsheet. One that every case has is the test's own, said once. At most `MAX_SAID`
    cases are said, then how many more."""

    MAX_SAID = 20

    def __init__(self, problems: list[Problem], rows: CaseRows | None, inline: int, variants: int) -> None:
        self.problems, self.rows, self.inline, self.variants = problems, rows, inline, variants
        self.said = len(problems)
        self.number, self.name = 0, ""
        self.seen: dict[Problem, list[tuple[int, str]]] = {}

    def start(self, number: int, name: str | None) -> None:
        self.number, self.name, self.said = number, name or "", len(self.problems)

    def name_the_case(self) -> None:
        if not self.name:
            return  # no case: the test's own problems
        for problem in self.problems[self.said:]:
            self.seen.setdefault(problem, []).append((self.number, self.name))
        del self.problems[self.said:]

    def finish(self) -> None:
        more: Problem | None = None
        count = 0
        for problem, cases in self.seen.items():
            if len(cases) == self.variants:
                self.problems.append(problem)
                continue
            for number, name in cases:
                count += 1
                if count > self.MAX_SAID:
                    more = more or problem
                    continue
                where = ""
                if self.rows is not None and number >= self.inline:
                    row = self.rows.problem(self.rows.row_of(number - self.inline), None, "")
                    where = f", {row.file}:{row.line}"
                self.problems.append(replace(problem, message=f"{problem.message} (case {name!r}{where})"))
        if more is not None:
            left = count - self.MAX_SAID
            self.problems.append(replace(more, message=f"{left:,} more cases with problems of their values",
                                         count=left))


MAX_INLINE_CASES = 2_000
"""Each inline case is a test validated on its own (about a millisecond each); more belong in a cases_file."""


def _attack(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...], problems: list[Problem],
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


def parse_assertions(
    entries: Sequence[object], doc: Document, loc: tuple[object, ...], problems: list[Problem],
    user_packs: dict[str, packs.PackSpec] | None = None, broken_packs: set[str] | None = None,
    search: list[Path] | None = None,
) -> list[Assertion]:
    parsed: list[Assertion] = []
    places: list[int] = []
    for i, entry in enumerate(entries):
        if broken_packs and packs.name_of(entry) in broken_packs:
            continue  # its problem is reported where the pack is written
        try:
            parsed.append(checks.parse_assertion(packs.inline(entry, user_packs or {}), search=search))
            places.append(i)
        except AssertionProblem as exc:
            problem = doc.problem((*loc, "assert", i, *exc.loc), exc.message, key=exc.at_key)
            if problem not in problems:
                problems.append(problem)
    return _named_apart(parsed, places) if len(parsed) > 1 else parsed  # one: nothing to name apart


def _named_apart(parsed: list[Assertion], places: list[int]) -> list[Assertion]:
    """A test's assertions with two of one name (two `contains`, two `not tool_called`) named by where each is
    written, `assert[1]/contains`, as two defaults are (`defaults[1]/contains`): both were `contains` in the
    console, result.json, JUnit and HTML, and which of them failed was the reader's guess."""
    labels = collections.Counter(a.label for a in parsed)
    return [a if labels[a.label] == 1 else replace(a, label=f"assert[{i}]/{a.label}")
            for i, a in zip(places, parsed, strict=True)]
