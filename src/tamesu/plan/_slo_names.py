"""`defaults.slo` names checked before the run. An SLO passes a test that does not measure its metric (an audio SLO
on a text test: Concepts), so a misspelt one (`ttft_p95`) passed every test, said only by a warning at the run's
end. Where every target a suite's tests talk to (or have as a counterpart) declares what it measures
(`Target.metric_names`), a name that none of them, no run, and no other target type measures is a problem where
written, with the nearest name any type measures. A metric other types measure passes a text suite's tests, but
on a suite whose targets do what it needs (speak audio) and never measure it (a sip call's `interruption_stop_ms`)
it is a problem too. Where a target does not declare (a plug-in's), what its runs measure is known only once they
ran: the end-of-run warning says it, as it says an SLO on another target type's metric that no test measured."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from tamesu import targets
from tamesu.audio import measured
from tamesu.errors import Problem
from tamesu.telemetry.genai import SPAN_METRICS

if TYPE_CHECKING:
    from tamesu.plan.model import LoadedSuite, Project

_RUN = (
    # every run's (`engine.metrics`), and tamesu's own model spending (`engine.conversation._spending`)
    "turns", "turn_latency_ms", "time_to_first_token_ms", "llm_cost_usd", "llm_tokens", "llm_retries",
    "llm_timeouts",
    # what the remote agents a suite serves and the tools it fuzzes count (`remote.group`, `fuzzing`)
    "tools_fuzzed", "delegations", "delegations_refused", "counterpart_delegations", "counterpart_tools_fuzzed",
    "counterpart_delegations_refused",
    # the agent's spans (`traces:`, `engine.traces.attach`): per turn, over the run, and what came of them
    *SPAN_METRICS, *(f"{name}_total" for name in SPAN_METRICS),
    "trace_not_found", "trace_incomplete", "trace_spans_received", "trace_spans_over_limit")
RUN_METRICS = frozenset(_RUN)
"""The metrics any run may measure, whatever its target."""

DISTRIBUTIONS = frozenset({
    "turn_latency_ms", "time_to_first_token_ms",  # every run's (`engine.metrics.from_exchanges`)
    *measured.PER_TURN, measured.STOP,  # an audio call's turns' own measures
    "bot_interrupted_ms", "interruption_audio_stop_ms",  # a pipecat turn's (`targets.pipecat`)
    *SPAN_METRICS})  # each turn's, from the agent's spans (`engine.traces`)
"""The metrics measured once per turn: each a distribution, read with `_pNN`, `_max`, `_min`, `_mean`; any other a
built-in target records is one number, said so where a statistic of it is asked for."""

_SUFFIX = re.compile(r"^(?P<base>.+?)(?P<stat>_(?:p\d{1,2}(?:\.\d+)?|max|min|mean))$")
"""A distribution's statistic, as `engine.metrics` reads a name (`turn_latency_ms_p95`)."""


def vocabulary(suite: LoadedSuite, used: Iterable[str]) -> frozenset[str] | None:
    """What the tests of `suite`, talking to the targets `used`, may measure; None when a target does not say."""
    names = set(RUN_METRICS)
    for name in used:
        spec = suite.targets.get(name)
        if spec is None or not targets.is_known(spec.type):
            return None
        declared = targets.target_class(spec.type).metric_names
        if declared is None:
            return None
        names |= declared
    return frozenset(names)


@cache
def elsewhere() -> frozenset[str]:
    """Every metric a built-in target type says it measures: asked only of a name the suite's own targets never
    measure (it imports every built-in target type; a run asks it of each SLO its target does not measure)."""
    return frozenset().union(*targets.declared_metrics().values())


def measurable(name: str, known: frozenset[str]) -> bool:
    """Whether a run that measures `known` measures `name`: one of them, or a statistic of a distribution among them
    (`engine.metrics.Metrics`: a statistic of a number measured once, `turns_p95`, is measured by no run)."""
    if name in known:
        return True
    match = _SUFFIX.match(name)
    return match is not None and match.group("base") in known and not one_number(match.group("base"))


def one_number(metric: str) -> bool:
    """Whether a built-in target type, or every run, records `metric` as one number, not per turn. A plug-in's own
    metric is not known to be: a statistic of it is left to the run. Asked beyond the run's and the audio calls'
    metrics only of a statistic written of a name that is no distribution (it imports every built-in type)."""
    if metric in DISTRIBUTIONS:
        return False
    return metric in RUN_METRICS or metric in measured.SPOKEN or metric in elsewhere()


def base_of(name: str) -> str:
    """The metric a statistic is of (`turn_latency_ms` of `turn_latency_ms_p95`), else the name."""
    match = _SUFFIX.match(name)
    return match.group("base") if match else name


def measured_by(name: str, declared: dict[str, frozenset[str]]) -> list[str]:
    """The target types of `declared` (`targets.declared_metrics()`) that measure `name`."""
    return sorted(kind for kind, names in declared.items() if measurable(name, names))


@cache
def metric_needs() -> dict[str, str]:
    """What a target must do to measure each metric only some target types measure (`Target.offers`), from what
    they declare: speak audio for the audio toolkit's (`audio.measured.SPOKEN`), make a phone call or take browser
    steps for one only such types declare. Imports every built-in target type: asked only of a metric the target in
    question does not declare."""
    declared = targets.declared_metrics()
    needs = dict.fromkeys(measured.SPOKEN, "speaks_audio")
    for metric in sorted(frozenset().union(*declared.values()) - RUN_METRICS - measured.SPOKEN):
        owners = [targets.target_class(kind) for kind, names in declared.items() if metric in names]
        need = next((need for need in ("phone_call", "takes_steps") if all(getattr(o, need) for o in owners)), None)
        if need is not None:
            needs[metric] = need
    return needs


def need_of(metric: str) -> str | None:
    """`metric_needs()` of a metric as an assertion names it: a statistic of a distribution, or one a call records
    as itself (`frame_late_ms_p99`)."""
    needs = metric_needs()
    return needs.get(metric) or needs.get(base_of(metric))


def said(name: str, known: frozenset[str], whose: str) -> str:
    """The problem of an SLO on `name`, which nothing `whose` measures nor any target type: the nearest name any
    target type measures (and which, when not `whose`), else every one `whose` measures."""
    return (f"{name} is measured by no run of {whose}, nor by any other target type, so this SLO would pass every "
            f"test unchecked: {hint(name, known, whose)}")


def hint(name: str, known: frozenset[str], whose: str) -> str:
    """What a metric name no target type measures may have meant (`said`): the nearest name, else the known ones."""
    declared = targets.declared_metrics()
    every = known | frozenset().union(*declared.values())
    match = _SUFFIX.match(name)
    base, stat = (match.group("base"), match.group("stat")) if match else (name, "")
    # a family recorded as a few statistics (an audio call's frame_late_ms_p99): another of it is measured by no run;
    # its base misspelt (loop_lag_m_p99) is matched as the family's, not as a plain name's (it was loop_cpu_ms)
    plain = sorted(n for n in every if not _SUFFIX.match(n))
    families = sorted({m.group("base") for n in every if (m := _SUFFIX.match(n)) is not None})
    near = [base] if base in families else difflib.get_close_matches(base, [*plain, *families], n=1, cutoff=0.6)
    family = near[0] if near and near[0] in families else base
    fixed = [n for n in sorted(every) if (m := _SUFFIX.match(n)) is not None and m.group("base") == family]
    # a statistic is kept as written, on a distribution: the name it is of is the misspelt part
    close = difflib.get_close_matches(family + stat, fixed, n=1, cutoff=0.0) or \
        [found + (stat if found in DISTRIBUTIONS else "")
         for found in difflib.get_close_matches(base, plain, n=1, cutoff=0.6)] or \
        difflib.get_close_matches(name, sorted(every), n=1, cutoff=0.6)
    # the agent's span metrics are one family, said by name: the list stays one readable line
    listed = [n for n in (*_RUN, *sorted(known - RUN_METRICS))
              if n in known and not n.startswith("trace_") and n.removesuffix("_total") not in SPAN_METRICS]
    nearest = f"did you mean {close[0]}?" if close else \
        f"the metrics: {', '.join(listed)}, and with traces: the agent's span metrics (docs/traces.md)"
    stats = _statistics(stat, close[0] if close else None, family, fixed, every)
    # a near name of another target type's (time_to_first_audio_ms on a rest suite) is said as theirs
    others = measured_by(close[0], declared) if close and not measurable(close[0], known) else []
    theirs = f"; {base_of(close[0])} is measured only by {targets.types_said(others)}, not by {whose}" if others \
        else ""
    return f"{nearest}{f' ({stats})' if stats else ''}{theirs}"


def _statistics(stat: str, meant: str | None, base: str, fixed: list[str], every: frozenset[str]) -> str | None:
    """What `said` adds of the statistic written (`stat`, "" when none), when it bears on the name `meant` (the one
    suggested, or None): the statistics a family of a few is recorded as, that a distribution takes them, or that the
    metric meant is one number."""
    if fixed:
        return f"{base} is recorded as {', '.join(n.removeprefix(base) for n in fixed)} only"
    if not stat or (meant is not None and meant in every and _SUFFIX.match(meant)):
        return None  # no statistic written, or a metric recorded as a statistic suggested (loop_lag_ms_p99)
    if meant is None or base_of(meant) in DISTRIBUTIONS:
        return "a distribution takes _pNN, _max, _min, _mean"
    # a name a built-in type records (a counter, a call's figure): one number; a plug-in's is not known to be
    return f"{meant} is one number: it takes no {stat}" if meant in every else None


def _of_their_kind(name: str, suite: LoadedSuite, used: set[str], whose: str) -> str | None:
    """The problem of an SLO on a metric other target types measure that the suite's targets would be expected to
    (they speak audio, make the call, take the steps it needs) and do not (a sip call's `interruption_stop_ms`)."""
    need = need_of(name)
    specs = [suite.targets[target] for target in sorted(used)]
    if need is None or not any(targets.is_known(spec.type) and targets.target_class(spec.type).offers(need, spec)
                               for spec in specs):
        return None  # an audio metric on a text test passes it (Concepts)
    why = "; ".join(dict.fromkeys(note for spec in specs if targets.is_known(spec.type)
                                  and (note := targets.target_class(spec.type).not_measured.get(base_of(name)))))
    others = targets.types_said(measured_by(name, targets.declared_metrics()))
    return (f"{name} is measured by no run of {whose}, only by {others}, so this SLO would pass every test "
            f"unchecked{f': {why}' if why else ''}")


def suite_slo_problems(suite: LoadedSuite, used: set[str] | None) -> list[Problem]:
    """The suite's own `defaults.slo` names its tests' targets never measure."""
    known = None if not used else vocabulary(suite, used)  # no test: nothing runs to measure it
    if known is None or used is None:
        return []
    kinds = sorted({suite.targets[name].type for name in used})
    whose = f"this suite's {' or '.join(kinds)} target{'s' if len(used) > 1 else ''}" if kinds else "it"
    unmeasured = [name for name in suite.spec.defaults.slo if not measurable(name, known)]
    others = elsewhere() if unmeasured else frozenset()
    said_of = {name: said(name, known, whose) if not measurable(name, others) else
               _of_their_kind(name, suite, used, whose) for name in unmeasured}
    return [suite.doc.problem(("defaults", "slo", name), why, key=True)
            for name, why in said_of.items() if why is not None]


def suite_vocabulary(suite: LoadedSuite, used: set[str] | None) -> frozenset[str] | None:
    """What the suite's tests may measure (None: not known before the run, or no test runs)."""
    return vocabulary(suite, used) if used else None


def project_slo_problems(project: Project, known: list[frozenset[str] | None]) -> list[Problem]:
    """tamesu.yaml's `defaults.slo` names no suite's tests measure (`known`: each suite's vocabulary)."""
    if project.doc is None or not known or any(k is None for k in known):
        return []
    every = frozenset().union(*(k for k in known if k is not None))
    unmeasured = [name for name in project.spec.defaults.slo if not measurable(name, every)]
    others = elsewhere() if unmeasured else frozenset()
    return [project.doc.problem(("defaults", "slo", name), said(name, every, "any suite"), key=True)
            for name in unmeasured if not measurable(name, others)]
