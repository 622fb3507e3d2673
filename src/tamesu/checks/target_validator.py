"""`"type": "agent"` with `use` naming a target of tamesu.yaml: the JSONL design's validator interface, answered
by another agent (the conversation in scope as messages, the metadata with the criteria, the case's `test_id`)
with {passed, score, reason, suggestions}; `options.connector` is the model that target answers with."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from tamesu.checks._quote import their_line
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.roles.scripted_users import HelperAgent, conversation
from tamesu.types import Strict


class ValidatorReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    passed: bool
    score: float | None = None
    reason: str = ""
    suggestions: list[str] = Field(default_factory=list)


class TargetValidator(Check[Strict]):
    key = "agent"
    Spec = Strict  # no options: the validator's metadata come from the JSONL case

    def __init__(self, helper: HelperAgent, metadata: Mapping[str, object], test_id: str = "",
                 connector: str | None = None) -> None:
        super().__init__(Strict())
        self.helper = helper
        self.metadata = metadata
        self.test_id = test_id
        self.connector = connector

    async def evaluate(self, run: RunView) -> Verdict:
        request = {**self.metadata, "test_id": self.test_id, "messages": conversation(run.exchanges)}
        reply = await self.helper.answer("validator", request, run.models, ValidatorReply, self.connector)
        assert isinstance(reply, ValidatorReply)
        said = their_line(reply.reason) or "no reason given"
        return Verdict(passed=reply.passed, reason=f"{said} ({self.helper.name})",
                       score=reply.score, evidence=reply.suggestions, model=f"target:{self.helper.name}")
