"""JSONL cases as planned tests of the one engine: `CasePlanner` turns each parsed case into a `PlannedTest`
of a suite made for the input (its user side is the case's `CaseUser`, its assertions the engine's checks),
which `tamesu test` (`cli.test.JsonlRunner`) runs with `engine.runner.Runner` like any suite: one run loop, one
run directory (`<run>/<file>/<case id>/run-N/result.json`, `results.jsonl`, `run.json`, `plan.json`).

The design's JSONL records (`-o`) and console tree are report formats (`tamesu.report.case_records`,
`tamesu.report.case_console`); the user side is `tamesu.roles.case_user`, checkpoints `tamesu.checks.checkpoint`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml.comments import CommentedMap

from tamesu.checks import Assertion
from tamesu.checks.base import RunView
from tamesu.checks.checkpoint import CheckpointCheck, Tracker
from tamesu.conversation import HistoryMessage, UserTurn
from tamesu.jsonl.parser import ParsedCase, file_ref
from tamesu.jsonl.schema import ChatMessage, ContentPart
from tamesu.models.cache import CacheMode
from tamesu.models.client import ModelRegistry
from tamesu.plan import LoadedSuite, Plan, PlannedTest, Project
from tamesu.plan.targets import ResolvedTarget, connector_target
from tamesu.results.design_classes import design_classes
from tamesu.results.records import RunResult
from tamesu.roles.case_user import CaseUser, Interaction, MissingInput
from tamesu.roles.human import Human
from tamesu.suite.schema import Scenario, SuiteSpec, TestSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.yaml_reader import Document

DEFAULT_TIMEOUT = 300.0
DEFAULT_HUMAN_TIMEOUT = 300.0


@dataclass
class TestSettings:
    """What the command line decides for every case."""

    out: Path
    parallel: int = 1
    fail_fast: bool = False
    timeout: float = DEFAULT_TIMEOUT
    connector: str | None = None
    on_missing_input: MissingInput | None = None
    """Overrides every case's own `on_missing_input` (default `skip`)."""
    interactive: bool = False
    skip_interactive: bool = False
    cache_mode: CacheMode | None = None
    output: Path | None = None
    """`-o`: the JSONL records, one line per case as it finishes."""
    today: dt.date = field(default_factory=dt.date.today)
    repeat: int | None = None
    """`--repeat`: every case N times (the record shows the first run; result.json has every run)."""
    shard: str | None = None
    """`--shard K/N` as written, for plan.json (the cases are chosen before the run)."""
    update_golden: bool = False
    yao_errors: bool = False
    """`--yao-errors` (or `yao_errors: true` in tamesu.yaml): the design's error classes
    (`PlannedCase.design_classes`)."""

    __test__ = False


@dataclass
class JsonlFile:
    """One input the cases of a plan come from: a suite of the run, named `name` (the file's stem; the folder of
    the run directory its cases' runs go in)."""

    name: str
    path: Path | None
    """The JSONL file, when the cases come from one (plan.json points annotations at its lines)."""
    cases: list[ParsedCase]
    source: str
    """How the header, problems and plan.json name it: a path, `message`, `agents:generator?count=3`."""


@dataclass
class JsonlPlan:
    project: Project
    secrets: Secrets
    target: ResolvedTarget
    base_dir: Path
    parts: list[JsonlFile]
    """The inputs: one, or (`-i FOLDER`, `folder`) each JSONL file of the folder, a suite of its own
    (`<file stem>/<case id>`)."""
    folder: bool = False


class PlannedCase:
    """One case's user side for each of its runs: the `CaseUser` and checkpoint tracker of run N."""

    def __init__(self, parsed: ParsedCase,
                 make_user: Callable[[ParsedCase, ModelRegistry | None, int, Tracker | None], CaseUser]) -> None:
        self.parsed = parsed
        self._make_user = make_user
        self.users: dict[int, CaseUser] = {}
        self.trackers: dict[int, Tracker] = {}

    def user_factory(self, models: ModelRegistry | None, seed: int, number: int) -> CaseUser:
        # a retry of run N replaces its user and tracker: the record shows the attempt that counted
        tracker = Tracker(self.parsed.checkpoints) if self.parsed.checkpoints else None
        user = self._make_user(self.parsed, models, seed, tracker)
        self.users[number] = user
        if tracker is not None:
            self.trackers[number] = tracker
        return user

    def design_classes(self, result: RunResult, number: int) -> None:
        """The agent test design's error classes over tamesu's, for a team migrating from its runner: an agent
        that fails (unreachable, refused) fails the case, where tamesu calls it an error (exit 3); a simulator
        that cannot give the next input skips a multi-turn case (the earlier revision: the turn is SKIPPED)
        and fails a dynamic one (the later). A judge or validator that fails stays an error."""
        user = self.users.get(number)
        design_classes(result, user.simulator_error if user is not None else None, self.parsed.case.mode == "dynamic")

    def tracker_of(self, view: RunView) -> Tracker:
        number = view.context.lookup("run.number")
        return self.trackers[int(number) if number is not None else min(self.trackers)]


def stand_in_suite(plan: JsonlPlan, part: JsonlFile | None = None) -> LoadedSuite:
    """The suite the cases of one input belong to: the input's name, the one target, the project's hooks (run
    from the project's folder, as they always were for `tamesu test`)."""
    part = part or plan.parts[0]
    doc_path = part.path if part.path is not None else plan.base_dir / part.name
    return LoadedSuite(spec=SuiteSpec(name=part.name), doc=Document(doc_path, CommentedMap(), part.source),
                       targets={plan.target.name: plan.target.spec}, project=plan.project,
                       hook_dir=plan.project.dir)


class CasePlanner:
    """JSONL cases as the engine's planned tests."""

    def __init__(self, plan: JsonlPlan, settings: TestSettings, human: Human | None = None) -> None:
        self.plan = plan
        self.settings = settings
        self._human = human
        self.suites = [stand_in_suite(plan, part) for part in plan.parts]
        self.suite = self.suites[0]
        self.cases: dict[str, PlannedCase] = {}
        """By test id (`<input name>/<case id>`): a case id is unique in its file, so ids of two files of a
        folder never clash."""

    def engine_plan(self) -> Plan:
        tests: list[PlannedTest] = []
        for suite, part in zip(self.suites, self.plan.parts, strict=True):
            tests += [self.planned(len(tests), parsed, suite) for parsed in part.cases]
        return Plan(self.plan.project, suites=self.suites, tests=tests, secrets=self.plan.secrets)

    def planned(self, index: int, parsed: ParsedCase, suite: LoadedSuite | None = None) -> PlannedTest:
        """The case as a PlannedTest: per-turn assertions on their turn, then the final ones, then one
        assertion per checkpoint."""
        case = parsed.case
        planned_case = PlannedCase(parsed, self._user)
        connector = self.settings.connector or (case.options.connector if case.options else None)
        # the engine asks the user side once more after the last turn, so it can end the conversation itself
        turns = 2 if case.mode == "standard" else min(case.turn_limit() + 1, 1000)
        suite = suite or self.suite
        target = connector_target(suite.targets, self.plan.target, connector)
        spec = TestSpec(name=case.id, target=target, scenario=Scenario(max_turns=turns),
                        timeout=case.timeout or self.settings.timeout, **case.repeats())
        assertions = [g.assertion for n in sorted(parsed.turn_assertions) for g in parsed.turn_assertions[n]]
        assertions += [g.assertion for g in parsed.final]
        assertions += [Assertion(key="checkpoint", check=CheckpointCheck(planned_case.tracker_of, c.id),
                                 on_turn=None, label=f"checkpoint {c.id}") for c in case.checkpoints]
        test = PlannedTest(suite, spec, case.id, None, {}, [f"mode:{case.mode}"], assertions, {}, index,
                           user_factory=planned_case.user_factory, line=parsed.line,
                           classify=planned_case.design_classes if self.settings.yao_errors else None)
        self.cases[test.id] = planned_case
        return test

    def _user(self, parsed: ParsedCase, models: ModelRegistry | None, seed: int, tracker: Tracker | None) -> CaseUser:
        case, settings = parsed.case, self.settings
        options = case.options.sent() if case.options else {}
        if settings.connector:
            options["connector"] = settings.connector
        wants_person = settings.interactive or (case.interactive is not None and case.interactive.enabled)
        human = None
        if wants_person and not settings.skip_interactive:
            if self._human is None:
                self._human = Human()
            human = self._human
        timeout = case.interactive.timeout if case.interactive is not None else DEFAULT_HUMAN_TIMEOUT
        policy = settings.on_missing_input or case.on_missing_input or "skip"
        static = static_turns(parsed, options, settings.connector)
        return CaseUser(case.id, case.mode, static, parsed.simulator, base_dir=parsed.base_dir, models=models,
                        seed=seed, options=options, max_turns=case.turn_limit(), on_missing_input=policy,
                        interaction=Interaction(human, timeout), tracker=tracker)


def user_turn(messages: list[ChatMessage], base_dir: Path | list[Path], options: Mapping[str, object], *,
              attachments: list[ContentPart] | None = None, source: str = "static") -> UserTurn:
    """The last message as the turn, the ones before it as its history."""
    *earlier, last = messages
    history = [HistoryMessage(role=m.role, content=m.text, files=[file_ref(p, base_dir) for p in m.files])
               for m in earlier]
    files = [file_ref(p, base_dir) for p in [*last.files, *(attachments or [])]]
    return UserTurn(text=last.text, files=files, history=history, options=options, source=source)


def static_turns(parsed: ParsedCase, options: Mapping[str, object], connector: str | None = None) -> list[UserTurn]:
    """What the case itself says: each of its turns (its own options over the case's; `-c`, `connector`, over
    both), or its input (one turn carrying the history)."""
    case, base = parsed.case, parsed.file_dirs or parsed.base_dir
    if case.turns:
        forced = {"connector": connector} if connector else {}
        return [user_turn([t.input], base, {**options, **(t.options.sent() if t.options else {}), **forced},
                          attachments=t.attachments) for t in case.turns]
    return [user_turn(case.input, base, options)] if case.input else []
