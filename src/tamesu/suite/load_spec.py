"""`load:` in a suite: its tests run again at growing concurrency, to find where the agent degrades."""

from __future__ import annotations

from pydantic import Field, field_validator

from tamesu.types import Duration, Strict, YamlInt


class LoadSpec(Strict):
    """`load: { ramp: [1, 4, 8, 16], hold: 60s }`: after the suite's tests ran, each stage keeps that many
    conversations going at once, the tests taken in turn, for `hold`; the report gives each stage's latency
    percentiles (tamesu.engine.load)."""

    ramp: list[YamlInt] = Field(min_length=1, max_length=50)  # a quoted stage (`["4"]`) is a typo, not 4
    """The concurrency of each stage, in order: how many conversations go at once (each 1 to 1,000)."""
    hold: Duration = Field(gt=0)
    """How long each stage starts new conversations; one under way at the end is let finish and counted."""
    max_runs: YamlInt = Field(10_000, ge=1, le=1_000_000)
    """The most conversations one stage starts, however short they are."""

    @field_validator("ramp")
    @classmethod
    def _stages(cls, ramp: list[int]) -> list[int]:
        bad = [n for n in ramp if not 1 <= n <= 1000]
        if bad:
            raise ValueError(f"a stage's concurrency is 1 to 1000, not {bad[0]}")
        return ramp
