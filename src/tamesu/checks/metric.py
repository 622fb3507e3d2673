"""`metric`: one measured number of the run, `{name: time_to_first_token_ms_p95, lt: 1500}`.

A metric the run did not measure fails, unless `missing: pass`: the engine turns `defaults.slo` into
`metric` checks with it, because an SLO on an audio metric must not fail a text test.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tamesu.checks._compare import Bounds, compare, describe, expectations
from tamesu.checks._unheard import unheard
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.span import NO_TRACES
from tamesu.errors import SuiteProblem
from tamesu.matching import number_text
from tamesu.plugins import register
from tamesu.suite.metric_ranges import unmeetable
from tamesu.telemetry.genai import from_spans
from tamesu.types import Finite, narrows


class MetricSpec(Bounds):
    name: str = Field(min_length=1)
    equals: Finite | None = None
    missing: Literal["fail", "pass"] = "fail"

    @field_validator("equals", mode="before")
    @classmethod
    @narrows
    def _not_null(cls, value: object) -> object:
        # kept as `equals: null` it would fail every run: a measured number is never null
        if value is None:
            raise ValueError("expected a number, not null")
        return value

    @model_validator(mode="after")
    def _something(self) -> MetricSpec:
        if not expectations(self):
            raise ValueError("give a bound: one of lt, lte, gt, gte, equals")
        if (why := unmeetable(self.name, expectations(self))) is not None:  # it would fail every run, the agent blamed
            raise ValueError(why)
        return self


_OF_THE_TRACES = frozenset({"trace_not_found", "trace_incomplete", "trace_spans_received", "trace_spans_over_limit"})
"""Span metrics that count what came and what did not: whole whatever never came."""


@register("checks", "metric")
class Metric(Check[MetricSpec]):
    key = "metric"
    whole_run = "the run's metrics"
    Spec = MetricSpec
    spec: MetricSpec

    def reads_spans(self) -> bool:
        """Whether only the agent's spans measure this metric, and its absence fails (`traces:` is needed)."""
        return self.spec.missing == "fail" and from_spans(self.spec.name)

    async def evaluate(self, run: RunView) -> Verdict:
        name = self.spec.name
        expected = expectations(self.spec)
        if name not in run.metrics:
            measured = ", ".join(sorted(run.metrics)) or "none"
            if self.spec.missing == "pass":
                return Verdict(passed=True, reason=f"{name} was not measured by this test (passes)")
            if run.spans is None and self.reads_spans():
                # nothing could measure it: the suite's making (no `traces:`), not the agent's failure
                raise SuiteProblem(f"{name} is measured from the agent's spans: {NO_TRACES}")
            if _came_whole(run, name):
                # the target may stream (validate could not say no) and this agent's replies did not: there is no
                # first token to time, which is the suite's asking on this agent, not a slow or silent agent
                raise SuiteProblem(f"{name} was not measured: this agent's replies came whole, not streamed, so "
                                   "there is no first token to time")
            close = difflib.get_close_matches(name, list(run.metrics), n=1, cutoff=0.75)
            meant = f"; did you mean {close[0]}?" if close else ""  # a misspelt name is never measured
            return Verdict(passed=False, reason=f"{name} was not measured (measured: {measured}){meant}",
                           undecided=True)
        value = run.metrics[name]
        if from_spans(name) and name not in _OF_THE_TRACES and (missing := unheard(run)) and \
                (missing.shared or not _decided_so_far(value, expected)):
            # measured without the spans of a trace that never came: not the agent's number, unless what came
            # decides it, as a `span` count does (spans can only raise a count or a time)
            raise missing.undecided(f"{name} was {number_text(value)} without them")
        problems = compare(value, expected)
        if problems:
            turn = worst_turn(run, name, value)
            where = f" (turn {turn})" if turn is not None and len(run.exchanges) > 1 else ""
            return Verdict(passed=False, reason=f"{name}: {'; '.join(problems)}{where}")
        return Verdict(passed=True, reason=f"{name} was {number_text(value)}, expected {describe(expected)}")


def _came_whole(run: RunView, name: str) -> bool:
    """Whether `name` times a first token (`time_to_first_token_ms`, or a statistic of it) and the run's agent
    replied to every user turn with words, none of which had a first token: its replies came in one piece (a rest
    agent that answered plain JSON where `streaming` was not set, an A2A card that does not stream)."""
    if name != "time_to_first_token_ms" and not name.startswith("time_to_first_token_ms_"):
        return False
    answers = [exchange.agent for exchange in run.exchanges if exchange.user is not None]
    return bool(answers) and all(a.text and a.first_token_ms is None for a in answers)


def _decided_so_far(value: float, expected: Mapping[str, object]) -> bool:
    """Whether a span metric measured on some of the spans is decided whatever the rest holds: every span metric
    (a count, a sum of times or tokens, per turn or over the run, its worst, percentile or total) only grows
    with more spans. Past an upper bound (`lt`, `lte`, above `equals`) it fails; it passes when it holds only
    lower bounds (`gt`, `gte`) and has them."""
    for key, bound in expected.items():
        if not isinstance(bound, int | float):
            return False
        if (key == "lt" and value >= bound) or (key in ("lte", "equals") and value > bound):
            return True
    return all(key in ("gt", "gte") for key in expected) and not compare(value, expected)


def worst_turn(run: RunView, name: str, value: float) -> int | None:
    """The turn a per-turn metric's value came from when it is the worst turn's (the plain name, or `_max`):
    a failure is placed on its turn, as a text check's is ("llm_time_ms: ... (turn 3)")."""
    base = name.removesuffix("_max")
    for exchange in run.exchanges:
        agent = exchange.agent
        if base == "turn_latency_ms":
            measured: object = agent.latency_ms if exchange.user is not None else None
        elif base == "time_to_first_token_ms":
            measured = agent.first_token_ms if exchange.user is not None else None
        else:
            measured = agent.measures.get(base)
        if isinstance(measured, int | float) and round(float(measured), 3) == value:
            return exchange.index
    return None
