"""`script`: a Python function of the project decides (the JSONL design's script assertions, usable from YAML
suites too: `script: checks:has_reference` or `script: {use: ..., metadata: {...}}`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from tamesu.checks._quote import exception_line, their_line
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.functions import check_callable, load_function
from tamesu.errors import InfraError, SuiteProblem
from tamesu.matching import shown
from tamesu.plugins import register
from tamesu.types import Strict

__all__ = ["Script", "ScriptRun", "ScriptSpec", "call_verdict", "load_function", "verdict_of"]


@dataclass
class ScriptRun:
    """What a script assertion's function receives."""

    text: str
    """The agent's text in scope (every turn in scope, joined by newlines)."""
    response: Any
    """The last turn's response document (the JSON body, the final event...)."""
    turns: list[dict[str, Any]]
    """`{turn, input, output, response}` for every turn in scope."""
    tool_calls: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    """The assertion's `options.metadata`."""
    test_id: str = ""
    """The id of the test case being graded."""


class ScriptSpec(Strict):
    use: str
    metadata: dict[str, Any] = Field(default_factory=dict)


@register("checks", "script")
class Script(Check[ScriptSpec]):
    """A Python function decides: it returns True/False, `(passed, reason)`, `{passed, reason, score}`, a
    reason string (a failure), or None (a pass); an AssertionError it raises is a failure with its message.
    Any other exception is a bug in the script, the suite's to fix: the run is an error of `fault: suite`
    (exit 2), never a verdict on the agent."""

    key = "script"
    Spec = ScriptSpec
    shorthand = "use"
    spec: ScriptSpec

    def __init__(self, spec: ScriptSpec, function: Callable[..., object] | None = None) -> None:
        super().__init__(spec)
        self.function = function
        self.test_id = ""
        """Set by the JSONL parser: the case this assertion belongs to."""

    def prepare(self, search: list[Path]) -> None:
        self.function = load_function(self.spec.use, search)
        try:
            check_callable(self.function, "one argument, the run", 1, {})
        except ValueError as exc:
            raise ValueError(f"script {self.spec.use}: {exc}") from None

    async def evaluate(self, run: RunView) -> Verdict:
        if self.function is None:
            try:
                self.function = load_function(self.spec.use, [run.base_dir])
            except ValueError as exc:
                raise SuiteProblem(f"script {self.spec.use}: {exc}") from None
        script_run = ScriptRun(
            text=run.agent_text(),
            response=run.exchanges[-1].agent.response if run.exchanges else None,
            turns=[{"turn": e.index, "input": e.user.display() if e.user else None, "output": e.agent.text,
                    "response": e.agent.response} for e in run.exchanges],
            tool_calls=[call.model_dump(mode="json") for call in run.tool_calls],
            metadata=dict(self.spec.metadata), test_id=self.test_id,
        )
        return await call_verdict(f"script {self.spec.use}", self.spec.use, self.function, (script_run,), {})


async def call_verdict(what: str, name: str, function: Callable[..., object], args: tuple[object, ...],
                       kwargs: Mapping[str, object], project: bool = True) -> Verdict:
    """A function's answer as a verdict (awaited when it is a coroutine); `name` is how a verdict names it,
    `what` how an error does. An AssertionError it raises is a failure; any other exception is the test's
    error: the suite's (SuiteProblem) when the function is the project's own code, which the suite's authors
    fix as they fix a wrong JSONPath; an installed plug-in's (`project=False`) is the environment's
    (InfraError), as a plug-in target's bug is."""
    try:
        result = function(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
    except AssertionError as exc:
        return Verdict(passed=False, reason=their_line(str(exc)) or f"{name} failed")
    except Exception as exc:
        said = f"{what} raised {exception_line(exc)}"
        raise (SuiteProblem(said) if project else InfraError(said)) from exc
    return verdict_of(result, name)


def verdict_of(result: object, name: str) -> Verdict:
    if isinstance(result, Verdict):
        return result
    if result is None or result is True:
        return Verdict(passed=True, reason=f"{name} passed")
    if result is False:
        return Verdict(passed=False, reason=f"{name} returned False")
    if isinstance(result, str):
        return Verdict(passed=False, reason=their_line(result))
    if isinstance(result, tuple) and len(result) == 2:
        return Verdict(passed=bool(result[0]), reason=their_line(str(result[1])))
    if isinstance(result, dict) and "passed" in result:
        score = result.get("score")
        return Verdict(passed=bool(result["passed"]), reason=their_line(str(result.get("reason") or name)),
                       score=float(score) if isinstance(score, int | float) else None)
    raise SuiteProblem(f"{name} returned {shown(result)}; expected a bool, (passed, reason), "
                     "{passed, reason}, a Verdict or a reason string")
