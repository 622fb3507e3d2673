"""What the engine runs: the project, its loaded suites, and each planned test (cases expanded, defaults
merged, assertions parsed)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tamesu import packs
from tamesu.checks import Assertion
from tamesu.errors import Problem
from tamesu.suite.schema import ProjectSpec, SuiteSpec, TestSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.traces_spec import TracesSpec
from tamesu.suite.yaml_reader import Document
from tamesu.targets.base import TargetSpec

if TYPE_CHECKING:  # what a test that brings its own user side hands the engine
    from tamesu.models.client import ModelRegistry
    from tamesu.results.records import RunResult
    from tamesu.roles.simulator import UserSimulator


class UserFactory(Protocol):
    """Who plays the user in run `number` of a test that brings its own user side (a JSONL case)."""

    def __call__(self, models: ModelRegistry | None, seed: int, number: int) -> UserSimulator: ...

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

    # cached: the plan, the engine and the reports ask a suite its name and folder several times a test, and each
    # answer was pathlib parsing its path again
    @functools.cached_property
    def name(self) -> str:
        return self.spec.name or self.doc.path.stem.removesuffix(".tamesu")

    @functools.cached_property
    def dir(self) -> Path:
        return self.doc.path.parent

    @property
    def search(self) -> list[Path]:
        """Where the functions its checks name (`script`, `custom`) are found: its folder, then the project's."""
        return list(self._search)

    @functools.cached_property
    def _search(self) -> tuple[Path, ...]:
        # resolved once per suite, not once per test (`resolve` is a system call per part of the path)
        return tuple(dict.fromkeys([self.dir.resolve(), self.project.dir]))

    @property
    def traces(self) -> TracesSpec | None:
        """The suite's `traces:`, else (unset or `true`) the project's; none when the suite says `traces: false`."""
        if self.spec.traces is False:
            return None
        return self.spec.traces if isinstance(self.spec.traces, TracesSpec) else self.project.spec.traces

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
    user_factory: UserFactory | None = None
    """`(models, seed, number) -> UserSimulator`: who plays the user when the test brings its own (JSONL
    cases: static turns, their simulator, a person, checkpoints); None: the scenario's script or persona."""
    line: int | None = None
    """The line that defines the test when it is not `tests[index]` of the suite's YAML (a JSONL case)."""
    classify: Callable[[RunResult, int], None] | None = None
    """`(result, number) -> None`: the test's own error classes, applied to run N's result before it is written
    (JSONL `--yao-errors`: the design's); None: tamesu's."""

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

    def past_the_script(self, assertion: Assertion, turn_beside: bool = False) -> str | None:
        """Why `assertion` asks for a turn the test's script never makes, or None; with `turn_beside`, for a
        result shown beside its own `on_turn` (`contains (turn 5)`), without saying that turn again."""
        turns = None if self.user_factory is not None else scripted_turns(self.spec, self.target)
        return turn_past(assertion, turns, turn_beside)

    def unfit(self, assertion: Assertion) -> str | None:
        """Why `assertion` reads what this test's target never gives, or None (`plan._fit`)."""
        from tamesu.plan._fit import unfit, unseen_tools

        if self.spec.target not in self.suite.targets:
            return None
        counterpart = self.suite.targets.get(self.spec.counterpart.target) if self.spec.counterpart else None
        return unfit(assertion, self.spec.target, self.target, self.spec.steps, counterpart) or unseen_tools(
            assertion, self.target.type, self.suite.spec.remote_agents, self.suite.traces is not None)


def scripted_turns(spec: TestSpec, target: TargetSpec | None = None) -> int | None:
    """The most turns a test's conversation can have when its user side is a script alone, or None when someone
    may say more (a simulator's goal or persona, a counterpart, an attack, browser steps) or a `wait_for` step
    listens instead of speaking. A turn past it is the suite's asking, never the agent's doing. A greeting the
    target's spec says will come is one more."""
    scenario = spec.scenario
    if not scenario.script or scenario.goal or scenario.attack or spec.persona or spec.counterpart or spec.steps \
            or any(step.wait_for is not None for step in scenario.script):
        return None
    greeting = target.greeting_turns() if target is not None else 0
    return min(len(scenario.script), scenario.max_turns) + greeting


@dataclass
class Plan:
    project: Project
    suites: list[LoadedSuite] = field(default_factory=list)
    tests: list[PlannedTest] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    secrets: Secrets = field(default_factory=Secrets)


def turn_asked(assertion: Assertion) -> int | None:
    """The turn an assertion grades, its own `on_turn` or its check's (`span: {on_turn: 3}`), when a number."""
    for turn in (assertion.on_turn, getattr(getattr(assertion.check, "spec", None), "on_turn", None)):
        if isinstance(turn, int) and not isinstance(turn, bool):
            return turn
    return None


def turn_past(assertion: Assertion, turns: int | None, turn_beside: bool = False) -> str | None:
    turn = turn_asked(assertion)
    if turn is None or turns is None or turn <= turns:
        return None
    said = f"past the script, which makes {turns} turn{'' if turns == 1 else 's'}"
    # a span's own `on_turn` is not the one shown beside the result: named, as it is alone (an error line)
    return said if turn_beside and turn == assertion.on_turn else f"on_turn {turn} is {said}"
