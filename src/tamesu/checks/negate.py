"""`negate: true` on any assertion (a JSONL one, or a suite's): passes exactly when the inner check fails, and
fails when the inner check could not be made (`Verdict.undecided`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from tamesu.checks.base import Check, RunView, Verdict
from tamesu.types import Strict


class Negated(Check[Strict]):
    key = "negate"
    Spec = Strict

    def __init__(self, inner: Check[BaseModel], labelled: bool = False) -> None:
        super().__init__(Strict())  # no options of its own: the inner check's are its own
        self.inner = inner
        self.labelled = labelled
        """Its label says it is negated (`not not_contains`): its reason does not again (`negated: ...`)."""

    def prepare(self, search: list[Path]) -> None:
        self.inner.prepare(search)

    async def evaluate(self, run: RunView) -> Verdict:
        verdict = await self.inner.evaluate(run)
        if verdict.undecided:  # "could not check" is no evidence that the opposite holds
            said = "not decided" if self.labelled else "negated, but not decided"
            return verdict.model_copy(update={"reason": f"{said}: {verdict.reason}"})
        said = "" if self.labelled else "negated: "
        return verdict.model_copy(update={"passed": not verdict.passed, "reason": f"{said}{verdict.reason}"})
