"""What an evaluator is given and what it answers: a sample of one finished run in, a score from 0 to 1 out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from tamesu.models.base import ModelClient, ModelError


class Score(BaseModel):
    """An evaluator's answer. Higher is more of what the evaluator measures (for `maliciousness`, more harm)."""

    score: float = Field(ge=0, le=1)
    reason: str = ""
    evidence: list[str] = Field(default_factory=list)
    """Quotes that support the score, where the evaluator has them (the unsupported claims, the off-topic
    sentences...)."""
    model: str | None = None
    """provider:model, when a model decided."""
    prompt_version: str | None = None
    fake: bool = False
    """Decided by the fake provider's rules, not by a model."""
    unsupported_evidence: list[str] = Field(default_factory=list)
    """Quotes of the evidence that are not in what the model was shown (the built-ins look them up)."""


@dataclass
class Sample:
    """One finished run as an evaluator sees it; `judge()` is the run's judge model for those that ask one."""

    question: str
    """What the user said, every user turn in order, one per line."""
    answer: str
    """What the agent said, every agent turn in order, one per line."""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """`{role, text, turn}` per message."""
    context: str | None = None
    """The reference text the answer should agree with (the assertion's `context`, else the run's tool results);
    None when there is none."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    """The assertion's `with:` mapping, for a plug-in's own settings."""
    evidence: Literal["strict", "lenient"] = "strict"
    """The assertion's `evidence`: with strict, a model's score none of whose quotes is in what it was shown is
    not taken (the built-ins raise); with lenient it is, the quotes marked in `unsupported_evidence`."""
    judge_client: Callable[[], ModelClient] | None = None

    def judge(self) -> ModelClient:
        """The judge model (the assertion's `model:`, else `models.judge`); ModelError when none is set."""
        if self.judge_client is None:
            raise ModelError("no model for the judge: set models.judge in tamesu.yaml or the suite")
        return self.judge_client()
