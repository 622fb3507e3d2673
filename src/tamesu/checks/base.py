"""The contract of an assertion, and the finished run it reads. A check never imports a target."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field

from tamesu.conversation import WRITE_GOLDEN, Event, Exchange, ToolCall
from tamesu.matching import show
from tamesu.models.base import Models
from tamesu.models.structured import Attempt
from tamesu.suite.secrets import Redactor
from tamesu.telemetry.spans import Span

__all__ = ["Check", "Exchange", "RunView", "Verdict", "show"]

from tamesu.suite.templates import Context


class Verdict(BaseModel):
    passed: bool
    reason: str = ""
    score: float | None = None
    evidence: list[str] = Field(default_factory=list)
    model: str | None = None
    """provider:model of a model-made verdict."""
    prompt_version: str | None = None
    fake: bool = False
    """Decided by the fake provider's rules, not by a model."""
    attempts: list[Attempt] = Field(default_factory=list)
    """A model-made verdict: every answer read for it (accepted, repaired, or rejected and asked again)."""
    unsupported_evidence: list[str] = Field(default_factory=list)
    """Quotes of the evidence that are not in what the judge was shown."""
    undecided: bool = False
    """The check could not be made (a value it reads has none, a metric was not measured, a backend did not
    answer): failed, and `negate` cannot turn it into a pass."""


@dataclass
class RunView:
    """What an assertion may read of one finished run."""

    exchanges: list[Exchange]
    metrics: Mapping[str, float]
    """By any name a metric assertion takes (`turn_latency_ms_p95`...)."""
    captured: dict[str, Any]
    events: list[Event]
    tool_calls: list[ToolCall]
    context: Context
    base_dir: Path
    vars: dict[str, Any] = field(default_factory=dict)
    command_timeout: float = 60.0
    models: Models | None = None
    """The run's models, for judges and other model-graded checks; None when none are configured."""
    update_golden: bool = False
    """`--update-golden`: golden checks write what they saw instead of comparing."""
    write_golden: str = WRITE_GOLDEN
    """How a missing golden file is told to be written (the pytest plug-in has no `--update-golden`)."""
    redactor: Redactor | None = None
    """Masks secrets in anything a check writes to disk (golden files)."""
    spans: list[Span] | None = None
    """The agent's own spans matched to this run (`traces:`), each with its turn; None without `traces:`."""
    turn_labelled: bool = False
    """Seen through `on_turn: N` for a check whose failure is said beside its turn (`json_path (turn 1): ...`):
    its reason need not name the turn again."""

    def scoped(self, on_turn: int | str | None, labelled: bool = False) -> RunView:
        """The same run seen through one agent turn (1-based, or `last`); `labelled`: the check's failure is said
        with `on_turn` beside it, which names the turn unless it is `last`."""
        if on_turn is None:
            return self
        if not self.exchanges:
            chosen: list[Exchange] = []
        elif on_turn == "last":
            chosen = [self.exchanges[-1]]
        else:
            position = int(on_turn) - 1
            chosen = [self.exchanges[position]] if 0 <= position < len(self.exchanges) else []
        indexes = {e.index for e in chosen}
        return RunView(
            exchanges=chosen,
            metrics=self.metrics,
            captured=self.captured,
            events=self.events,
            tool_calls=[c for c in self.tool_calls if c.turn is None or c.turn in indexes],
            context=self.context,
            base_dir=self.base_dir,
            vars=self.vars,
            command_timeout=self.command_timeout,
            models=self.models,
            update_golden=self.update_golden,
            write_golden=self.write_golden,
            redactor=self.redactor,
            spans=None if self.spans is None else [s for s in self.spans if s.turn in indexes],
            turn_labelled=labelled and on_turn != "last",
        )

    def agent_text(self) -> str:
        return "\n".join(e.agent.text for e in self.exchanges if e.agent.text)


SpecT = TypeVar("SpecT", bound=BaseModel, covariant=True)
"""A check's own options type: `class Turns(Check[TurnsSpec])` reads `self.spec` as a TurnsSpec; covariant, so
any check is a `Check[BaseModel]` where only its spec's being a model matters."""


class Check(ABC, Generic[SpecT]):
    """One assertion kind: the key a user writes under `assert:`, its options, and how it decides."""

    key: ClassVar[str]
    Spec: ClassVar[type[BaseModel]]
    shorthand: ClassVar[str | None] = None
    """The option a scalar value fills: `contains: "refund"` is `contains: {value: "refund"}`."""
    whole_run: ClassVar[str | None] = None
    """What the check reads that is the whole run's, not a turn's (`the run's metrics`): `on_turn` could not
    narrow it, so the suite is told where it writes one (it was taken and left unused)."""
    grades_unconnected: ClassVar[bool] = False
    needs: ClassVar[str | None] = None
    """What it reads that only some target types give, as a `Target.offers` name (`answers_http_status`): on
    a target without it the check could only fail, so the run is an error of the suite's and validate warns."""
    """This check decides about a session that never reached the agent (`call_ended_by: busy`): with it in a
    test, a busy or unanswered call is the check's to grade, not a failure of the conversation."""

    def __init__(self, spec: SpecT) -> None:
        self.spec: SpecT = spec

    @classmethod
    def parse(cls, value: object) -> Any:
        if cls.shorthand and not isinstance(value, dict):
            value = {cls.shorthand: value}
        return cls.Spec.model_validate(value)

    def prepare(self, search: list[Path]) -> None:
        """Resolve what the check names on disk (a function of the project) before any run, looking in
        `search` (the suite's folder, the project's); raise ValueError saying what is missing."""
        return None  # most checks name nothing on disk

    @abstractmethod
    async def evaluate(self, run: RunView) -> Verdict: ...


