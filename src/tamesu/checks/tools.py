"""`tool_called`, `tool_not_called`, `tool_sequence`: the tools the agent called (`run.tool_calls`).

A call is described by a name and, optionally, `args` that must match as a subset of the actual arguments:
every key given must be there; a value equal to the actual one matches; a string that is not equal is tried
as a full regular expression against the actual value's text (JSON for non-strings); mappings recurse and
lists match item by item. A delegation to a remote agent counts as a call named after the agent (its args:
`message`), so `tool_not_called: shipping` sees it; `delegated_to` asserts on delegations alone.

When the target's answers carry no tool calls and the suite receives the agent's spans (`traces:`), the calls
are those of the agent's GenAI-convention `execute_tool` spans (`gen_ai.tool.name`, and the arguments when the
agent records `gen_ai.tool.call.arguments`). Every reason says which source it read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from itertools import groupby
from typing import Any

from pydantic import BaseModel, Field, field_validator

from tamesu.checks._compare import template_failed
from tamesu.checks._unheard import Unheard, unheard
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.conversation import ToolCall
from tamesu.errors import SuiteProblem, TemplateError
from tamesu.matching import args_problem, shown
from tamesu.plugins import register
from tamesu.suite.patterns import runaway_in
from tamesu.suite.schema import Strict
from tamesu.suite.templates import Context
from tamesu.telemetry import genai
from tamesu.types import YamlBool


class CallSpec(Strict):
    name: str = Field(min_length=1)
    args: dict[str, Any] | None = None

    @field_validator("args")
    @classmethod
    def _no_runaway(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # a string is tried as a pattern on the agent's arguments: one that backtracks for ever holds the run
        # past every timeout and signal, as any other pattern would
        if value is not None and (why := runaway_in(value, "args")) is not None:
            raise ValueError(why)
        return value

    def label(self) -> str:
        return self.name if self.args is None else f"{self.name}({shown(self.args)})"


def call_problem(spec: CallSpec, call: ToolCall, expected_args: Mapping[str, object] | None) -> str | None:
    if call.name != spec.name:
        return f"called {call.name}"
    if expected_args is None:
        return None
    return args_problem(expected_args, call.args)


def _tool_calls(run: RunView) -> tuple[list[ToolCall], str, Unheard | None]:
    """The calls, and where they were read when the suite receives spans: the target's answers, or else the
    agent's spans; then also the traces that never came (calls may be in them: a verdict they could change
    is not made)."""
    own = [c for c in run.tool_calls if c.kind in ("tool", "delegation")]
    if run.spans is None:
        return own, "", None
    if own:
        return own, " (from the target's answers)", None
    missing = unheard(run)
    if not run.spans:  # "none called" read from nothing at all: said, so a pass is not taken for evidence
        return [], " (from the agent's spans: none came)", missing
    calls = [ToolCall(**call) for call in genai.tool_calls(run.spans)]
    if missing.shared:  # calls of another run's among them, or this one's among its: nothing is decided
        raise missing.undecided(f"tools called: {_names(calls)}")
    return calls, " (from the agent's spans)", missing


NAMED = 20
"""Tools (or runs of one tool) a reason names before it counts the rest: an agent looping on one tool made
hundreds of calls, each named, in the one line a failure is shown in."""


def _names(calls: list[ToolCall]) -> str:
    """Each tool called, once, with how often when more than once: `lookup_order ×300, refund`."""
    if not calls:
        return "none"
    counts = Counter(c.name for c in calls)
    said = [name if n == 1 else f"{name} ×{n}" for name, n in counts.items()]
    return ", ".join(said[:NAMED]) + (f", … and {len(said) - NAMED} more tools" if len(said) > NAMED else "")


def _sequence(calls: list[ToolCall]) -> str:
    """The calls in order, a run of one tool said once with its count: `lookup_order ×300 -> refund`."""
    runs = [(name, len(list(group))) for name, group in groupby(c.name for c in calls)]
    said = [name if n == 1 else f"{name} ×{n}" for name, n in runs]
    more = sum(n for _, n in runs[NAMED:])
    return " -> ".join(said[:NAMED]) + (f" -> … and {more} more calls" if more else "")


def _offered_by_none(names: list[str], run: RunView, calls: list[ToolCall]) -> None:
    """A name no MCP server of the run lists (nor a remote agent of the suite), that nothing called either: the
    suite's mistake, found once the server said its tools (a misspelt `tool_not_called: refund_ordr` passed every
    run, checking nothing; `tool_called` failed it as the agent's fault). A name the server lists but
    `allow_tools` withholds is no mistake: the model may still try it."""
    listed = [e.data.get("tools") for e in run.events if e.name == "mcp_server"]
    if not listed:
        return  # a target that does not say all its tools: any name may be one
    tools = sorted({str(t) for found in listed if isinstance(found, list) for t in found})
    known = {*tools, *(str(e.data.get("agent")) for e in run.events if e.name == "remote_agent_started"),
             *(c.name for c in calls)}
    unknown = list(dict.fromkeys(n for n in names if n not in known))
    if unknown:
        tool = "tool" if len(unknown) == 1 else "tools"
        raise SuiteProblem(f"the MCP server offers no {tool} {', '.join(map(repr, unknown))} (its tools: "
                           f"{', '.join(tools) or 'none'}), nor was one called by that name: misspelt?")


def _turn(call: ToolCall) -> str:
    return f" at turn {call.turn}" if call.turn is not None else ""


def _rendered_args(spec: CallSpec, context: Context) -> dict[str, object] | None:
    return None if spec.args is None else context.render_value(spec.args)


@register("checks", "tool_called")
class ToolCalled(Check[CallSpec]):
    """At least one call with this name (and matching args) was made."""

    key = "tool_called"
    Spec = CallSpec
    shorthand = "name"
    spec: CallSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            expected = _rendered_args(self.spec, run.context)
        except TemplateError as exc:
            return template_failed(exc)
        calls, source, missing = _tool_calls(run)
        named = [c for c in calls if c.name == self.spec.name]
        _offered_by_none([self.spec.name], run, calls)
        if not named:
            if missing:
                raise missing.undecided(f"tools called: {_names(calls)}")
            return Verdict(passed=False, reason=f"expected a call to {self.spec.name}; tools called: "
                                                f"{_names(calls)}{source}")
        for call in named:
            if call_problem(self.spec, call, expected) is None:
                return Verdict(passed=True,
                               reason=f"{self.spec.name} called{_turn(call)} with {shown(call.args)}{source}")
        problem = call_problem(self.spec, named[0], expected)
        if missing:
            raise missing.undecided(f"{len(named)} call(s) to {self.spec.name}, none matching (first: {problem})")
        return Verdict(
            passed=False,
            reason=f"expected {self.spec.name} with {shown(expected)}; {len(named)} call(s) to it, "
            f"none matching (first: {problem}){source}",
            evidence=[shown(c.args, 400) for c in named],
        )


@register("checks", "tool_not_called")
class ToolNotCalled(Check[CallSpec]):
    """No call with this name (and, when given, matching args) was made."""

    key = "tool_not_called"
    Spec = CallSpec
    shorthand = "name"
    spec: CallSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            expected = _rendered_args(self.spec, run.context)
        except TemplateError as exc:
            return template_failed(exc)
        calls, source, missing = _tool_calls(run)
        _offered_by_none([self.spec.name], run, calls)
        for call in calls:
            if call_problem(self.spec, call, expected) is None:
                with_args = f" with {shown(expected)}" if expected is not None else ""
                return Verdict(
                    passed=False,
                    reason=f"expected no call to {self.spec.name}{with_args}; called{_turn(call)} "
                    f"with {shown(call.args)}{source}",
                )
        if missing:
            raise missing.undecided(f"tools called: {_names(calls)}")
        return Verdict(passed=True,
                       reason=f"{self.spec.label()} was not called; tools called: {_names(calls)}{source}")


class SequenceSpec(Strict):
    calls: list[CallSpec] = Field(min_length=1)
    strict: YamlBool = False
    """True: the calls are exactly these, in this order. False: in this order, others allowed between."""

    @field_validator("calls", mode="before")
    @classmethod
    def _names_are_calls(cls, value: object) -> object:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


@register("checks", "tool_sequence")
class ToolSequence(Check[SequenceSpec]):
    key = "tool_sequence"
    Spec = SequenceSpec
    shorthand = "calls"
    spec: SequenceSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            wanted = [(spec, _rendered_args(spec, run.context)) for spec in self.spec.calls]
        except TemplateError as exc:
            return template_failed(exc)
        calls, source, missing = _tool_calls(run)
        _offered_by_none([spec.name for spec in self.spec.calls], run, calls)
        order = " -> ".join(spec.label() for spec in self.spec.calls)
        found = _sequence(calls) or "no tool calls"
        problem = _strict_problem(wanted, calls) if self.spec.strict else _in_order_problem(wanted, calls)
        # calls in a trace that never came may fall anywhere: only calls found in order, others allowed
        # between, are decided by what came
        if missing and (problem or self.spec.strict):
            raise missing.undecided(f"tools called: {found}")
        if problem:
            kind = "exactly" if self.spec.strict else "in order"
            return Verdict(passed=False, reason=f"expected {kind}: {order}; found {found} ({problem}){source}")
        return Verdict(passed=True, reason=f"tools called: {found}{source}")


Wanted = list[tuple[CallSpec, dict[str, Any] | None]]


def _in_order_problem(wanted: Wanted, calls: list[ToolCall]) -> str | None:
    """Each wanted call matched by a later call than the one before; the earliest match is always safe."""
    position = 0
    for spec, args in wanted:
        while position < len(calls) and call_problem(spec, calls[position], args) is not None:
            position += 1
        if position == len(calls):
            return f"no {spec.label()} after the calls before it"
        position += 1
    return None


def _strict_problem(wanted: Wanted, calls: list[ToolCall]) -> str | None:
    for index, ((spec, args), call) in enumerate(zip(wanted, calls, strict=False), start=1):
        problem = call_problem(spec, call, args)
        if problem:
            return f"call {index}: expected {spec.label()}, {problem}"
    if len(calls) != len(wanted):
        return f"{len(calls)} call(s) instead of {len(wanted)}"
    return None


def tool_names(check: Check[BaseModel]) -> list[str] | None:
    """The tool names a tool assertion's check asks about (a negated one's too), or None for any other check:
    for validation, which warns about tool assertions on agents that report no tool calls."""
    check = getattr(check, "inner", check)
    if isinstance(check, ToolCalled | ToolNotCalled):
        return [check.spec.name]
    if isinstance(check, ToolSequence):
        return [call.name for call in check.spec.calls]
    return None
