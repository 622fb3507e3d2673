"""The repeat keys a JSONL case shares with a suite's test (`repeat`, `pass_threshold`, `pass_k`, `adaptive`,
`retries_inconclusive`), left unset when not written (the engine's defaults apply), and checked as the engine
will run them: an adaptive case that could never pass is refused where it is written."""

from __future__ import annotations

from pydantic import Field, model_validator

from tamesu.results.stats import adaptive_problem
from tamesu.suite.schema import AdaptiveSpec, Strict
from tamesu.types import YamlFloat, YamlInt

_NAMES = ("repeat", "pass_threshold", "pass_k", "adaptive", "retries_inconclusive")


class CaseRepeats(Strict):
    repeat: YamlInt | None = Field(None, ge=1, le=10000)
    """Run the case N times (`--repeat` on the command line wins); the verdict is over every run."""
    pass_threshold: YamlFloat | None = Field(None, ge=0.0, le=1.0)
    pass_k: list[YamlInt] | None = None
    adaptive: AdaptiveSpec | None = None
    retries_inconclusive: YamlInt | None = Field(None, ge=0, le=20)

    def repeats(self) -> dict[str, object]:
        """The fields a suite's test has of the same names, as written (the engine's defaults otherwise)."""
        return {name: getattr(self, name) for name in _NAMES if getattr(self, name) is not None}

    @model_validator(mode="after")
    def _adaptive_fits(self) -> CaseRepeats:
        # as a suite's test is checked (plan.suites): a case the engine could not run as written is refused here
        if self.adaptive is not None and (never := adaptive_problem(
                self.repeat or 1, 1.0 if self.pass_threshold is None else self.pass_threshold,
                self.adaptive.confidence, self.adaptive.min_runs)) is not None:
            raise ValueError(never)
        return self
