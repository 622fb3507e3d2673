"""An assertion that reads what its test's target never gives (an HTTP status, a phone call, the digits on the
line, a handoff signal): it could only fail, or, negated or `handoff: false`, only pass, whatever the agent did.
That is the suite's asking, not the agent's doing: validate warns where it is written and each run is an error
(exit 2, fault `suite`), as an `on_turn` past the script is. So is a `metric` no run of the target and no target
type measures: a misspelt name, which failed every run as the agent's fault (or, `missing: pass`, passed it). So is
a tool assertion on an agent that reports no tool calls (A2A's) where neither a remote agent nor `traces:` sees them:
`tool_called` failed as the agent's fault and `tool_not_called` passed unchecked."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from tamesu import targets
from tamesu.audio import measured
from tamesu.checks import Assertion
from tamesu.checks.base import Check
from tamesu.checks.metric import Metric
from tamesu.checks.tools import tool_names
from tamesu.errors import Problem
from tamesu.plan._slo_names import RUN_METRICS, base_of, elsewhere, hint, measurable, measured_by, need_of, one_number
from tamesu.targets.base import TargetSpec

if TYPE_CHECKING:
    from tamesu.plan.model import LoadedSuite, PlannedTest

Loc = tuple[Any, ...]

_GIVES = {
    "answers_http_status": "needs an HTTP status on each turn, which {kind} target {name} never gives",
    "phone_call": "needs a phone call, which {kind} target {name} never makes",
    "hears_dtmf": "needs the digits the agent sends on the line, which {kind} target {name} never hears",
    "signals_handoff": "needs a handoff signal, which {kind} target {name} never gives: declare one with the "
                       "target's `handoff:` (a json_path or regex)",
}


_MEASURED = {
    "speaks_audio": "{metric} is measured only in audio, which {kind} target {name} does not speak",
    "phone_call": "{metric} is measured only on a phone call, which {kind} target {name} never makes",
    "takes_steps": "{metric} is measured only by browser steps, which {kind} target {name} never takes",
}
"""Why a metric only some target types measure (`_slo_names.metric_needs`, from what each declares) is not."""


_OF_GOALS = frozenset({"goal_steps", "goal_steps_total"})
"""Counted by a browser test's `goal` steps (the browser agent's actions), none of which a test may have."""


def unfit(assertion: Assertion, name: str, target: TargetSpec, steps: list[Any] | None = None,
          counterpart: TargetSpec | None = None) -> str | None:
    """Why `assertion` cannot be graded on the target `name`, or None. `steps`: the test's, when known (a metric of
    `goal` steps where the test has none is never measured); `counterpart`: the target playing the user, which
    counts on the run's session too."""
    check: Check[Any] = getattr(assertion.check, "inner", assertion.check)  # `negate: true` wraps it
    need, said = check.needs, _GIVES
    if isinstance(check, Metric):  # an SLO's (`missing: pass`) passes where its metric is not measured
        metric = check.spec.name
        if (misspelt := _measured_by_none(metric, name, target)) is not None:
            return misspelt  # with `missing: pass` too: it would pass every run unchecked
        if check.spec.missing == "pass":
            return None
        if metric != base_of(metric) and one_number(base_of(metric)):  # `turns_p95`: no run has a statistic of it
            return f"{metric} is measured by no run: {base_of(metric)} is one number, it takes no " \
                   f"{metric.removeprefix(base_of(metric))}"
        if base_of(metric) == "time_to_first_token_ms" and not target.streams_replies():
            return f"{metric} is measured only where the agent's reply streams (its first words before the rest), " \
                   f"which {target.type} target {name} never does: its replies come whole, so they have no first token"
        need = _metric_need(metric, target)
        said = {k: v.replace("{metric}", metric) for k, v in _MEASURED.items()}
        # the browser target declares goal_steps (so `need` is None for it): whether the test takes a goal step
        # is the test's, asked of every target that takes steps
        if (steps is not None and base_of(metric) in _OF_GOALS and need_of(metric) == "takes_steps"
                and not any(isinstance(step, dict) and "goal" in step for step in steps)):
            return f"{metric} is measured only by `goal` steps, which this test has none of"
        if need is not None and targets.is_known(target.type) and targets.target_class(target.type).offers(
                need, target):
            return _not_of_this_one(metric, name, target)
        if need is None:
            return _of_other_types(metric, name, target, counterpart)
    if need is None or not targets.is_known(target.type) or targets.target_class(target.type).offers(need, target):
        return None
    return said.get(need, "needs {need}, which {kind} target {name} never gives").format(
        need=need, kind=target.type, name=name)


def unseen_tools(assertion: Assertion, kind: str | None, remote: Collection[str], traced: bool) -> str | None:
    """Why a tool assertion can never see the tools it names on a target of type `kind`, an agent that reports no
    tool calls: only the suite's `remote` agents count as its calls, or, `traced`, its execute_tool spans. None when
    it can. YAML tests and JSONL cases (which have no remote agents) are told it alike, at validate and each run."""
    if traced or kind is None or not targets.is_known(kind) or targets.target_class(kind).reports_tool_calls:
        return None
    names = tool_names(assertion.check)
    if names is None or set(names) <= set(remote):
        return None
    tools = ", ".join(n for n in names if n not in remote)
    return (f"an A2A agent reports no tool calls, so this assertion can never see {tools} (only the suite's remote "
            f"agents, {', '.join(sorted(remote)) or 'none declared'}, count as calls; with `traces:`, the agent's "
            "execute_tool spans do)")


def undeclared_tools(suite: LoadedSuite, name: str | None, assertions: list[Assertion], count: int, loc: Loc
                     ) -> list[Problem]:
    """The test's own tool assertions (the first `count`) naming a tool its target does not declare (a `model`
    target's `tools`, the only ones its model is offered): a misspelt `tool_not_called` passed every run checking
    nothing, a `tool_called` failed as the agent's fault. Refused where written. `defaults.assert` is not: a guard
    such as `tool_not_called: drop_database` is meant for every target of the suite, whichever declares it."""
    target = suite.targets.get(name or "")
    declared = target.declared_tools() if target is not None else None
    if target is None or declared is None:
        return []
    problems = []
    for index, assertion in enumerate(assertions[:count]):
        unknown = [n for n in dict.fromkeys(tool_names(assertion.check) or []) if n not in declared and "{{" not in n]
        if not unknown:
            continue
        close = difflib.get_close_matches(unknown[0], declared, n=1)
        tools = f"no tool {unknown[0]!r}" if len(unknown) == 1 else f"no tools {', '.join(map(repr, unknown))}"
        meant = f": did you mean {close[0]!r}?" if close else ""
        problems.append(suite.doc.problem(
            (*loc, "assert", index, assertion.key),
            f"{target.type} target {name} declares {tools} (its tools: {', '.join(declared) or 'none'}), the only "
            f"ones its model can call{meant}"))
    return problems


def _metric_need(metric: str, target: TargetSpec) -> str | None:
    """What `target` must do to measure `metric` (None: every run measures it, or any target may). Only a metric
    the target's type does not declare is looked up among every type's (which imports them all)."""
    if measurable(metric, RUN_METRICS):
        return None
    declared = targets.target_class(target.type).metric_names if targets.is_known(target.type) else None
    if declared is not None and measurable(metric, declared):
        # declared by a type that also talks in text (pipecat's `mode: text`): measured only in audio still
        return "speaks_audio" if measurable(metric, measured.SPOKEN) else None
    return need_of(metric)


def _measured_by_none(metric: str, name: str, target: TargetSpec) -> str | None:
    """A metric no run of the target and no target type measures (`turn_latncy_ms_p95`, `ttft`): a misspelt name,
    which failed every run as the agent's fault, said with the name it is near. A target that does not say what it
    measures (a plug-in's) is not judged."""
    declared = targets.target_class(target.type).metric_names if targets.is_known(target.type) else None
    if declared is None:
        return None
    known = RUN_METRICS | declared
    if measurable(metric, known) or measurable(metric, elsewhere()):
        return None
    whose = f"{target.type} target {name}"
    return f"{metric} is measured by no run of {whose}, nor by any other target type: {hint(metric, known, whose)}"


def _not_of_this_one(metric: str, name: str, target: TargetSpec) -> str | None:
    """Why a target that does what `metric` needs (it speaks audio) still never measures it: its type does not
    declare it (a sip call's `interruption_stop_ms`)."""
    cls = targets.target_class(target.type)
    if cls.metric_names is None or measurable(metric, cls.metric_names):
        return None
    why = cls.not_measured.get(base_of(metric))
    others = targets.types_said(measured_by(metric, targets.declared_metrics()))
    return f"{metric} is measured only by {others}, not by {target.type} target {name}" + (f": {why}" if why else "")


def _of_other_types(metric: str, name: str, target: TargetSpec, counterpart: TargetSpec | None) -> str | None:
    """Why a metric that only other target types measure, needing nothing a target may do or not (voice's
    `voice_clears`, a2a's `a2a_tasks`: a protocol's own counters), is never measured on `target`, whose type says
    what it measures. A target that does not say (a plug-in's), and a name no type measures, are left to the run."""
    if measurable(metric, RUN_METRICS):
        return None
    for spec in (target, counterpart):
        if spec is None:
            continue
        if not targets.is_known(spec.type):
            return None
        declared = targets.target_class(spec.type).metric_names
        if declared is None or measurable(metric, declared):
            return None
    owners = measured_by(metric, targets.declared_metrics())
    if not owners:
        return None
    return f"{metric} is measured only by {targets.types_said(owners)}, not by {target.type} target {name}"


def unfit_assertions(suite: LoadedSuite, name: str | None, assertions: list[Assertion], count: int,
                     loc: Loc, steps: list[Any] | None = None, counterpart: str | None = None) -> list[Problem]:
    """The test's own assertions (the first `count`, as `assert:` writes them) its target cannot grade."""
    target = suite.targets.get(name or "")
    if target is None or name is None:
        return []
    other = suite.targets.get(counterpart) if counterpart is not None else None
    return [suite.doc.problem((*loc, "assert", index, assertion.key), f"{why}: every run of the test is an error")
            for index, assertion in enumerate(assertions[:count])
            if (why := unfit(assertion, name, target, steps, other)) is not None]


def unfit_defaults(suite: LoadedSuite, tests: list[PlannedTest], own: list[tuple[int, Assertion]],
                   project: list[tuple[int, Assertion]]) -> list[Problem]:
    """`defaults.assert` of the suite (`own`) and of tamesu.yaml (`project`) that a target of the suite's tests
    cannot grade, once each where written, naming the targets."""
    used = {test.spec.target: suite.targets[test.spec.target] for test in tests if test.spec.target in suite.targets}
    # a target that plays the user counts on the run's session too: a metric it measures may be measured
    paired = {test.spec.target: suite.targets.get(test.spec.counterpart.target) for test in tests
              if test.spec.target in used and test.spec.counterpart is not None}
    said: list[Problem] = []
    for doc, placed in ((suite.doc, own), (suite.project.doc, project)):
        if doc is None:
            continue
        for index, assertion in placed:
            said.extend(doc.problem(("defaults", "assert", index, assertion.key),
                                    f"{why}: every run of its tests is an error")
                        for name, target in sorted(used.items())
                        if (why := unfit(assertion, name, target, counterpart=paired.get(name))
                                    or unseen_tools(assertion, target.type, suite.spec.remote_agents,
                                                    suite.traces is not None)))
    return said
