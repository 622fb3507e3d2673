"""The statistics of a test's repeated runs: its pass rate with a Wilson interval, pass@k and pass^k, whether
the `pass_threshold` verdict is decided, and the sequential rule adaptive repeats stop by.

Two intervals, for two questions:

- **Wilson** (fixed number of runs): the 95% interval shown with every rate. It is the interval of a test that
  looked at its runs once, at the end; it stays sensible at 0 or n passes, where the normal ("Wald") interval
  collapses to a point.
- **The beta-binomial confidence sequence** (adaptive repeats): an interval that holds at every number of
  runs *at once*, so looking after each run and stopping when it no longer straddles the threshold keeps the
  stated error rate. It is `{p : M_n(p) < 1/alpha}` where `M_n(p)` is the mixture likelihood ratio of the
  runs against the rate `p` under a Beta prior centred on the threshold (Robbins' mixture method); by Ville's
  inequality the true rate is outside it at any time with probability at most `alpha`. A Wilson interval
  checked after every run would not keep its 5%: peeking again and again finds a lucky streak.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel, Field

Decision = Literal["pass", "fail"]
PRIOR_WEIGHT = 10.0
"""How many runs' worth of belief the confidence sequence's Beta prior holds, centred on the threshold: the
rule is then quickest for rates near the threshold, where runs are dearest."""


class AdaptiveOutcome(BaseModel):
    """What adaptive repeats did for one test."""

    confidence: float
    min_runs: int
    max_runs: int
    runs_saved: int
    """`max_runs` minus the runs made: what stopping early saved."""
    interval: tuple[float, float]
    """The confidence sequence's interval at the last run (the one the stopping rule reads)."""
    rule: str = "beta-binomial confidence sequence"


NO_RATE = "no rate: no run passed or failed"
"""A repeated test whose every run errored or was inconclusive, where a rate would be."""


class RepeatStats(BaseModel):
    """The statistics of a test's graded runs (passed or failed; skipped and inconclusive runs say nothing
    about the agent)."""

    runs: int
    passes: int
    rate: float
    confidence: float = 0.95
    interval: tuple[float, float]
    """Wilson's interval of the pass rate at `confidence`."""
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    """k -> the chance that at least one of k runs passes (unbiased over the n runs)."""
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    """k -> pass^k, the chance that all k runs pass (unbiased over the n runs)."""
    left_out_k: list[int] = Field(default_factory=list)
    """The ks of `pass_k` more than the runs: no k of n runs can be drawn, so they are not estimated (said)."""
    threshold: float = 1.0
    decided: Decision | None = None
    """`pass` when the interval lies at or above `threshold`, `fail` when below it, None when it straddles."""
    adaptive: AdaptiveOutcome | None = None

    def line(self) -> str:
        """`rate 0.77 [0.59, 0.88]`, as every report words it."""
        if not self.runs:  # every run errored or was inconclusive: 0 of 0 is no rate of 0
            return NO_RATE
        low, high = self.interval
        return f"rate {self.rate:.2f} [{low:.2f}, {high:.2f}]"

    def ks(self) -> str:
        """`pass@1 0.77 pass^1 0.77 pass^5 0.24`: pass^k for every k, pass@k beside it when it says more."""
        parts = []
        if not self.runs:
            return ""  # no run to draw k from: the line already says so
        for k, hat in self.pass_hat_k.items():
            at = self.pass_at_k.get(k)
            if at is not None and k != "1":
                parts.append(f"pass@{k} {at:.2f}")
            parts.append(f"pass^{k} {hat:.2f}")
        if self.left_out_k:
            ks = ", ".join(map(str, self.left_out_k))
            parts.append(f"(pass_k {ks}: more than the {self.runs} run{'' if self.runs == 1 else 's'}, left out)")
        return " ".join(parts)


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def wilson(passes: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a binomial rate; (0, 1) without runs."""
    if runs <= 0:
        return 0.0, 1.0
    z = _z(confidence)
    rate = passes / runs
    denominator = 1 + z * z / runs
    centre = (rate + z * z / (2 * runs)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / runs + z * z / (4 * runs * runs)) / denominator
    # the exact ends at 0 and n passes, not a rounding error's distance away
    return (0.0 if passes == 0 else max(0.0, centre - half)), (1.0 if passes == runs else min(1.0, centre + half))


def pass_at_k(runs: int, passes: int, k: int) -> float:
    """The chance that at least one of k runs drawn from the n passes: 1 - C(n-c, k) / C(n, k)."""
    if not 1 <= k <= runs:
        raise ValueError(f"k must be 1 to {runs}, got {k}")
    return 1.0 - math.comb(runs - passes, k) / math.comb(runs, k)


def pass_hat_k(runs: int, passes: int, k: int) -> float:
    """pass^k: the chance that all k runs drawn from the n pass, C(c, k) / C(n, k) (tau-bench's estimator)."""
    if not 1 <= k <= runs:
        raise ValueError(f"k must be 1 to {runs}, got {k}")
    return math.comb(passes, k) / math.comb(runs, k)


def decide(interval: tuple[float, float], threshold: float) -> Decision | None:
    low, high = interval
    if low >= threshold - 1e-12:
        return "pass"
    if high < threshold - 1e-12:
        return "fail"
    return None


def repeat_stats(passes: int, runs: int, threshold: float, ks: list[int] | None = None,
                 confidence: float = 0.95) -> RepeatStats:
    """The statistics of `passes` out of `runs`, pass@k and pass^k for each k of `ks` that is at most `runs`
    (default 1 and `runs`); the others are named in `left_out_k`."""
    chosen = sorted({k for k in (ks if ks else [1, runs]) if 1 <= k <= runs})
    interval = wilson(passes, runs, confidence)
    return RepeatStats(
        left_out_k=sorted({k for k in ks or [] if k > runs}),
        runs=runs, passes=passes, rate=passes / runs if runs else 0.0, confidence=confidence, interval=interval,
        pass_at_k={str(k): round(pass_at_k(runs, passes, k), 6) for k in chosen},
        pass_hat_k={str(k): round(pass_hat_k(runs, passes, k), 6) for k in chosen},
        threshold=threshold, decided=decide(interval, threshold) if runs else None)


def _prior(threshold: float) -> tuple[float, float]:
    # a threshold of 0 or 1 would make the prior improper: half a run of belief stays on the other side
    return max(threshold * PRIOR_WEIGHT, 0.5), max((1 - threshold) * PRIOR_WEIGHT, 0.5)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _log_mixture_ratio(passes: int, failures: int, rate: float, prior: tuple[float, float]) -> float:
    """log M_n(rate): the runs' likelihood under the Beta mixture over their likelihood at `rate`."""
    if (rate <= 0 and passes) or (rate >= 1 and failures):
        return math.inf  # a rate the runs have already disproved
    a, b = prior
    mixed = _log_beta(a + passes, b + failures) - _log_beta(a, b)
    at = (passes * math.log(rate) if passes else 0.0) + (failures * math.log(1 - rate) if failures else 0.0)
    return mixed - at


def sequence_interval(passes: int, runs: int, threshold: float, confidence: float) -> tuple[float, float]:
    """The confidence sequence's interval after `runs` runs: the rates the runs have not yet ruled out."""
    if runs <= 0:
        return 0.0, 1.0
    prior = _prior(threshold)
    bound = math.log(1 / (1 - confidence))
    failures = runs - passes
    rate = passes / runs

    def inside(p: float) -> bool:
        return _log_mixture_ratio(passes, failures, p, prior) < bound

    def edge(outer: float, inner: float) -> float:
        if inside(outer):
            return outer
        for _ in range(50):  # bisection to 1e-15: the ratio is convex in log p and log(1 - p)
            middle = (outer + inner) / 2
            if inside(middle):
                inner = middle
            else:
                outer = middle
        return inner

    if not inside(rate):  # the mixture rules out even the observed rate: an empty interval at it
        return rate, rate
    return edge(0.0, rate), edge(1.0, rate)


def sequential_decision(passes: int, runs: int, threshold: float, confidence: float,
                        min_runs: int) -> Decision | None:
    """Adaptive repeats' stopping rule: decided once the confidence sequence leaves the threshold's side."""
    if runs < min_runs or runs <= 0:
        return None
    if threshold <= 0:
        # every rate reaches 0: decided before any run (the mixture's prior at 0 never rules out a rate of 0, so
        # this rule alone made every run of `repeat`); `min_runs` are made for the statistics
        return "pass"
    # the ratio is convex in the rate with its least at the observed rate, so the interval leaves the
    # threshold exactly when the ratio at the threshold reaches 1/alpha: no interval needs computing
    ratio = _log_mixture_ratio(passes, runs - passes, threshold, _prior(threshold))
    if ratio < math.log(1 / (1 - confidence)):
        return None
    return "pass" if passes / runs >= threshold else "fail"


def runs_to_pass(threshold: float, confidence: float, min_runs: int, most: int = 10_000) -> int | None:
    """The fewest runs, all passing, that decide an adaptive test passes (its stopping rule, or the interval
    the runs are judged by once they are all made); None when no number up to `most` does (a threshold of 1:
    an interval's low end never reaches it)."""
    for runs in range(max(1, min_runs), most + 1):
        if decide(wilson(runs, runs), threshold) == "pass" or \
                sequential_decision(runs, runs, threshold, confidence, min_runs) == "pass":
            return runs
    return None


def adaptive_problem(repeat: int, threshold: float, confidence: float, min_runs: int) -> str | None:
    """Why an adaptive test of `repeat` runs cannot be run as written, or None: `min_runs` more than it, or even
    every run passing would leave it undecided, a failure."""
    if min_runs > repeat:
        return f"adaptive.min_runs ({min_runs}) is more than repeat ({repeat})"
    needed = runs_to_pass(threshold, confidence, min_runs, most=max(repeat, 10_000))
    if needed is not None and needed <= repeat:
        return None
    if needed is None:
        return (f"adaptive with pass_threshold {threshold:g}: no number of passing runs shows that rate with "
                "confidence, so the test can never pass (give pass_threshold below 1, e.g. 0.9)")
    low = wilson(repeat, repeat)[0]
    return (f"adaptive: even {repeat} passing runs of {repeat} would not show pass_threshold {threshold:g} "
            f"(their interval's low end is {low:.2f}), so the test can never pass: give repeat {needed} or more, "
            "or a lower pass_threshold")
