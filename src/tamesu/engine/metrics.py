"""Metrics of a run, computed after it from the turns' transport timestamps and the target's counters.

A metric measured once per turn is a distribution: its plain name is the worst turn (`_max`), and any
`_pNN` suffix (`turn_latency_ms_p95`, `_p50`, `_p99`...) is computed on request, as are `_min`, `_mean`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping

from tamesu.conversation import AgentTurn, Exchange, TurnError

_STATS: dict[str, Callable[[list[float]], float]] = {"max": max, "min": min, "mean": lambda v: sum(v) / len(v)}
_SUFFIX = re.compile(r"^(?P<base>.+?)_(?:p(?P<pct>\d{1,2}(?:\.\d+)?)|(?P<stat>max|min|mean))$")


def percentile(values: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (as spreadsheets and numpy compute it)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (pct / 100.0) * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class Metrics(Mapping[str, float]):
    """Scalar metrics plus per-turn distributions, readable by any supported name."""

    def __init__(self, scalars: dict[str, float], distributions: dict[str, list[float]]) -> None:
        self._scalars = scalars
        self._distributions = {k: v for k, v in distributions.items() if v}

    def _derive(self, name: str) -> float | None:
        if name in self._scalars:
            return self._scalars[name]
        if name in self._distributions:
            return max(self._distributions[name])
        match = _SUFFIX.match(name)
        if not match or match.group("base") not in self._distributions:
            return None
        values = self._distributions[match.group("base")]
        if match.group("pct") is not None:
            return percentile(values, float(match.group("pct")))
        return _STATS[match.group("stat")](values)

    def __getitem__(self, name: str) -> float:
        value = self._derive(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._derive(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.standard())

    def __len__(self) -> int:
        return len(self.standard())

    def standard(self) -> dict[str, float]:
        """What result.json records: every scalar, and p50/p95/max of every distribution."""
        shown = dict(self._scalars)
        for base, values in self._distributions.items():
            shown[base] = max(values)
            shown[f"{base}_p50"] = round(percentile(values, 50), 3)
            shown[f"{base}_p95"] = round(percentile(values, 95), 3)
            shown[f"{base}_max"] = max(values)
        return shown


# What one user turn took to be answered: a turn no user turn asked for (a greeting, more words heard by a
# `wait_for`) answers none, and has its own metric (`greeting_ms`), as a load stage's percentiles leave it out.
_ANSWER_TIMES = frozenset({"turn_latency_ms", "time_to_first_token_ms", "time_to_first_audio_ms"})


def failed_turn(exc: TurnError, sent_at_ms: float, now_ms: float, trace_id: str | None) -> AgentTurn:
    """A failed turn, with what the agent did before it failed and how long it took. A turn that timed out
    completed when its time was up: the target gives up, and cleans up, a little after it, and a turn read as
    longer than it was given would blame the agent's slowness for the limit's."""
    began = exc.started_at_ms if exc.started_at_ms is not None else sent_at_ms
    done = now_ms if exc.limit_s is None else max(began, min(now_ms, began + exc.limit_s * 1000))
    if exc.events and isinstance(exc.raw, list):
        raw, response = list(exc.raw), exc.raw[-1] if exc.raw else None
    else:
        raw, response = [] if exc.raw is None else [exc.raw], exc.raw
    return AgentTurn(raw=raw, response=response, status=exc.status, sent_at_ms=began, completed_at_ms=done,
                     trace_id=trace_id, tool_calls=exc.tool_calls)


def from_exchanges(exchanges: Iterable[Exchange], counters: Mapping[str, float]) -> Metrics:
    """A run's metrics: `turns` counts every agent turn; the answer times count the replies to user turns."""
    done = list(exchanges)
    answers = [e.agent for e in done if e.user is not None]
    latencies = [round(t.latency_ms, 3) for t in answers if t.completed_at_ms >= t.sent_at_ms]
    first_tokens = [round(v, 3) for t in answers if (v := t.first_token_ms) is not None]
    scalars = {"turns": float(len(done)), **{k: float(v) for k, v in counters.items()}}
    distributions: dict[str, list[float]] = {"turn_latency_ms": latencies, "time_to_first_token_ms": first_tokens}
    for exchange in done:  # what a target measured per turn (audio: time_to_first_audio_ms...)
        for name, value in exchange.agent.measures.items():
            if exchange.user is None and name in _ANSWER_TIMES:
                continue
            distributions.setdefault(name, []).append(round(float(value), 3))
    return Metrics(scalars, distributions)


def recorded(name: str, measured: Mapping[str, float]) -> bool:
    """Whether `name` (a metric as an assertion names it) is one of a run's `measured` metrics as result.json
    records them (`Metrics.standard`: a distribution's other `_pNN`, `_min`, `_mean` come from its base name)."""
    if name in measured:
        return True
    match = _SUFFIX.match(name)
    return match is not None and match.group("base") in measured


def unmeasured_slos(slos: Iterable[str], runs_measured: Iterable[Mapping[str, float]]) -> dict[str, list[str]]:
    """Each SLO metric no run measured, with the measured names it may be a misspelling of. An SLO passes a
    test that does not measure its metric (an audio SLO on a text test), so a misspelt one passes every test:
    the run says so instead."""
    runs = [measured for measured in runs_measured if measured]
    if not runs:  # nothing finished: the runs' errors are what the run says
        return {}
    known = sorted({name for measured in runs for name in measured})
    out: dict[str, list[str]] = {}
    for name in dict.fromkeys(slos):
        if not any(recorded(name, measured) for measured in runs):
            out[name] = difflib.get_close_matches(name, known, n=2, cutoff=0.75)
    return out


def unmeasured_slo_lines(slos: list[str], graded: Iterable[Mapping[str, float]]) -> list[str]:
    """The run's line for each SLO no graded run measured (`graded`: the metrics of the runs that were graded)."""
    missing = unmeasured_slos(slos, graded)
    if not missing:
        return []
    from tamesu import targets  # every target type is imported to say which measure it: only when one is missing

    declared = targets.declared_metrics()
    said = []
    for name, close in missing.items():
        # an audio metric on text tests passes them (Concepts): which targets measure it says why none did
        kinds = [kind for kind, names in declared.items() if recorded(name, dict.fromkeys(names, 0.0))]
        said.append(f"slo {name}: no test of this run measured it, so it passed unchecked"
                    + (f" (did you mean {' or '.join(close)}?)" if close else "")
                    + (f": it is measured only by {targets.types_said(kinds)}" if kinds else ""))
    return said
