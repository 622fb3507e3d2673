"""`load.json`: what a suite's `load:` stages measured (tamesu.engine.load)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

SCHEMA_VERSION = 1


class Percentiles(BaseModel):
    count: int
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Percentiles | None:
        if not values:
            return None
        ordered = sorted(values)
        return cls(count=len(ordered), p50=_rank(ordered, 0.50), p90=_rank(ordered, 0.90),
                   p99=_rank(ordered, 0.99), max=round(ordered[-1], 3))


def _rank(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile: a value that was measured, never one between two."""
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 3)


class LoadStage(BaseModel):
    concurrency: int
    hold_s: float
    duration_s: float
    """From the stage's start to its last conversation's end."""
    runs: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    inconclusive: int = 0
    """Runs the simulated user spoiled (no verdict on the agent)."""
    skipped: int = 0
    runs_per_s: float = 0.0
    turn_latency_ms: Percentiles | None = None
    """Every agent turn that answered a user turn: sent to complete."""
    time_to_first_audio_ms: Percentiles | None = None
    """Audio targets: each turn's `time_to_first_audio_ms`."""
    first_token_ms: Percentiles | None = None
    """Streaming targets: sent to the first token."""
    cut: str | None = None
    """Why the stage ended before its `hold` with the run still going (`max_runs` reached)."""


class LoadReport(BaseModel):
    schema_version: int = SCHEMA_VERSION
    suite: str
    tests: list[str] = Field(default_factory=list)
    stages: list[LoadStage] = Field(default_factory=list)
    stopped: str | None = None
    """Why the ramp ended before its last stage (the run was stopped), or was not run at all."""
    warnings: list[str] = Field(default_factory=list)
    """What the stage runs warned of, once per kind with how many runs did (`engine.load.Said`), and what happened
    along the way in them (requests sent again, answers cut: `results.along_the_way`). Not written when empty."""

    @model_serializer(mode="wrap")
    def _quiet(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("warnings") == []:
            del data["warnings"]  # a ramp that warned of nothing is written as every one before the field was
        return data


def _cell(p: Percentiles | None) -> str:
    return "-" if p is None else f"{p.p50:g}/{p.p90:g}/{p.p99:g}/{p.max:g}"


def table_lines(report: LoadReport) -> list[str]:
    """The stages as the console shows them: one line each, latencies as p50/p90/p99 in ms."""
    audio = any(s.time_to_first_audio_ms is not None for s in report.stages)
    token = any(s.first_token_ms is not None for s in report.stages)
    other = any(s.inconclusive or s.skipped for s in report.stages)  # the columns then add up to `runs`
    head = (f"{'at once':>8} {'runs':>6} {'passed':>6} {'failed':>6} {'errors':>6}"
            + (f" {'other':>6}" if other else "") + f" {'runs/s':>7}  {'turn latency p50/p90/p99/max ms':<31}"
            + ("  first token p50/p90/p99/max ms" if token else "")
            + ("  first audio p50/p90/p99/max ms" if audio else ""))
    lines = [f"load: {report.suite} ({', '.join(report.tests)})", head.rstrip()]
    for s in report.stages:
        line = (f"{s.concurrency:>8} {s.runs:>6} {s.passed:>6} {s.failed:>6} {s.errors:>6}"
                + (f" {s.inconclusive + s.skipped:>6}" if other else "") + f" {s.runs_per_s:>7g}  "
                f"{_cell(s.turn_latency_ms):<31}"
                + (f"  {_cell(s.first_token_ms):<31}" if token else "")
                + (f"  {_cell(s.time_to_first_audio_ms)}" if audio else ""))
        lines.append(line.rstrip())
    lines += [f"stage {n} ({s.concurrency} at once): {s.cut}" for n, s in enumerate(report.stages, 1) if s.cut]
    if report.stopped:
        lines.append(f"load stopped: {report.stopped}")
    return lines
