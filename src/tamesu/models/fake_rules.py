"""The fake provider's rules: what each kind of rule may say (a simulator's or a model target's turn, a verdict,
a value extracted), told apart by their keys; `tamesu.models.fake` answers by them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from tamesu.models._fake_rule_errors import guessed
from tamesu.types import Strict, YamlBool, YamlFloat


def _compile(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
    return value


_TURN_PATTERNS = ("when",)
_JUDGE_PATTERNS = ("rubric", "evaluator", "transcript", "not_transcript", "context", "trace")
_EXTRACT_PATTERNS = ("description", "text", "pattern")


class _Rule(Strict):
    """A rule of the fake provider, as a user writes it: keys it does not know refused, booleans `true` and
    `false` only."""


class FakeToolCall(_Rule):
    name: str = Field(min_length=1)
    args: dict[str, object] = Field(default_factory=dict)


class TurnRule(_Rule):
    """Simulator and model-target rules: when the other side's last text matches `when`, answer."""

    when: str | None = None
    """A regular expression searched in the other side's last text; absent means any text."""
    say: str | None = None
    stop: YamlBool = False
    """Simulator: hang up here."""
    dtmf: str | None = Field(None, pattern=r"^[0-9*#A-Da-d]+$")
    """Simulator on a phone line: the keys it presses (with `say`, or alone)."""
    goal_achieved: YamlBool = False
    """Simulator: the persona's goal is reached, so the conversation ends."""
    stop_when_met: YamlBool = False
    """Simulator: the scenario's `stop_when` condition holds, so the conversation ends."""
    tool_calls: list[FakeToolCall] = Field(default_factory=list)
    """Model target: the calls to ask for first; `say` is the answer once their results are back."""

    _when = field_validator(*_TURN_PATTERNS)(_compile)

    @model_validator(mode="after")
    def _does_something(self) -> TurnRule:
        if self.say is None and not (self.stop or self.goal_achieved or self.stop_when_met or self.tool_calls
                                     or self.dtmf):
            raise ValueError("a rule with `when` needs say, dtmf, tool_calls, stop, goal_achieved or stop_when_met")
        ends = [name for name in ("stop", "goal_achieved", "stop_when_met") if getattr(self, name)]
        said = [name for name in ("say", "dtmf") if getattr(self, name) is not None]
        if ends and said:
            # a simulator's answer that ends the conversation sends nothing: the words would be dropped unsaid
            raise ValueError(f"{' and '.join(said)} would never be sent: a rule with {ends[0]} ends the "
                             f"conversation without a turn; drop {' and '.join(said)}, or {ends[0]}")
        return self


class JudgeRule(_Rule):
    """A verdict, given when every condition written holds."""

    check: Literal["rubric", "grounded", "evaluator", "simulator_audit"] = "rubric"
    """`simulator_audit`: the audit of the simulated user (`models.simulator_audit`); `pass: false` says the
    simulated user broke its part, with `reason` and `evidence` quoted from its lines."""
    rubric: str | None = None
    """A regular expression searched in the rubric (rubric checks only)."""
    evaluator: str | None = None
    """A regular expression searched in the evaluator's name (evaluator checks only)."""
    transcript: str | None = None
    """Searched in the transcript, one `user: ...` / `agent: ...` line per turn; grounded: in the claims."""
    not_transcript: str | None = None
    context: str | None = None
    """Searched in the reference text given to the judge."""
    trace: str | None = None
    """Searched in the summary of the agent's spans given to the judge (`judge: {trace: true}`)."""
    passed: YamlBool | None = Field(None, alias="pass")
    """Required, except by an evaluator rule, whose score is what counts."""
    score: YamlFloat | None = None
    """Default: 1/0 (binary, grounded, evaluator), 5/1 (1-5)."""
    reason: str | None = None
    evidence: list[str] | None = None
    """Default: what `transcript` matched."""

    _regexes = field_validator(*_JUDGE_PATTERNS)(_compile)

    @model_validator(mode="after")
    def _rubric_only_for_rubrics(self) -> JudgeRule:
        if self.check != "rubric" and self.rubric is not None:
            raise ValueError(f"a {self.check} rule has no rubric; match the claims with `transcript`")
        if self.check != "evaluator" and self.evaluator is not None:
            raise ValueError("only an evaluator rule (check: evaluator) names an evaluator")
        if self.check == "evaluator":
            if self.passed is None and self.score is None:
                raise ValueError("an evaluator rule needs a score (from 0 to 1), or pass")
            if self.score is not None and not 0 <= self.score <= 1:
                raise ValueError("an evaluator's score is from 0 to 1")
        elif self.passed is None:
            raise ValueError("missing required key 'pass' (true or false)")
        return self


class ExtractRule(_Rule):
    """A value for a description: fixed (`value`), or taken from the turn (`pattern`, its first group)."""

    description: str
    text: str | None = None
    """Only when the turn text matches this too."""
    value: str | None = None
    pattern: str | None = None

    _regexes = field_validator(*_EXTRACT_PATTERNS)(_compile)

    @model_validator(mode="after")
    def _one_source(self) -> ExtractRule:
        if "value" in self.model_fields_set and self.pattern is not None:
            raise ValueError("an extract rule takes value or pattern, not both")
        if "value" not in self.model_fields_set and self.pattern is None:
            raise ValueError("an extract rule needs value (null: not found) or pattern")
        return self


Rule = TurnRule | JudgeRule | ExtractRule
PATTERN_KEYS: dict[type[BaseModel], tuple[str, ...]] = {
    TurnRule: _TURN_PATTERNS, JudgeRule: _JUDGE_PATTERNS, ExtractRule: _EXTRACT_PATTERNS}
"""The keys of each kind of rule that are regular expressions (the plan refuses those that can run for ever)."""

_KINDS: list[tuple[set[str], type[BaseModel], str]] = [
    ({"pass", "passed", "rubric", "transcript", "not_transcript", "check", "evaluator", "trace"}, JudgeRule,
     "judge"),
    ({"description"}, ExtractRule, "extract"),
    ({"when", "say", "dtmf", "stop", "goal_achieved", "stop_when_met", "tool_calls"}, TurnRule, "turn"),
]

def rule_kind(raw: Iterable[object]) -> tuple[type[BaseModel], str] | None:
    """The model a written rule (its keys) is checked against and its kind's name; None: no key says."""
    keys = set(raw)
    for markers, model, kind in _KINDS:
        if keys & markers:
            return model, kind
    return None


UNKNOWN_KIND_HINT = ("a simulator or model-target rule has when/say/stop, a judge rule has pass, an extract "
                     "rule has description")


def unknown_kind(raw: Iterable[object]) -> str:
    """Why a rule with no telling key (`raw`: its keys) is refused, with the keys it may have meant."""
    keys = sorted(map(str, raw))
    known = sorted({key for _, model, _ in _KINDS for key in _keys(model)})
    written = ", ".join(guessed(key, known) for key in keys) or "none"
    return f"cannot tell what it is for (keys: {written}); {UNKNOWN_KIND_HINT}"


def _keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]
