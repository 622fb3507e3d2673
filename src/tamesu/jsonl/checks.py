"""The assertion types of the JSONL design that tamesu's checks do not already have: `equals` (the reply is
exactly this), `type` (the JSON type of a value), `script` (a Python function), and `negate` for the kinds
without a `not_` sibling. They are engine checks like any other: graded by `engine.conversation.grade`."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from tamesu._match import shown
from tamesu._types import Strict
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.json_path import compile_path, find
from tamesu.errors import InfraError

JsonType = Literal["string", "number", "integer", "boolean", "array", "object", "null"]


def _last_text(run: RunView) -> tuple[str, str]:
    """The text of the last agent turn in scope, and where it came from."""
    if not run.exchanges:
        return "", "no agent turn"
    last = run.exchanges[-1]
    return last.agent.text, f"turn {last.index}"


def _located(path_text: str, run: RunView) -> tuple[list[Any], str] | None:
    """The values of a JSONPath in the last turn whose response has it, as `json_path` reads them."""
    path = compile_path(path_text)
    for exchange in reversed(run.exchanges):
        nodes = find(path, exchange.agent.response)
        if nodes:
            return nodes, f"turn {exchange.index}"
    return None


class EqualsSpec(Strict):
    value: Any
    path: str | None = None


class Equals(Check):
    """The agent's reply (the last turn in scope, surrounding blanks aside) is exactly `value`."""

    key = "equals"
    Spec = EqualsSpec
    spec: EqualsSpec

    async def evaluate(self, run: RunView) -> Verdict:
        if self.spec.path is not None:
            found = _located(self.spec.path, run)
            if found is None:
                return Verdict(passed=False, reason=f"{self.spec.path}: no match in the responses")
            nodes, where = found
            value = nodes[0] if len(nodes) == 1 else nodes
            return Verdict(passed=value == self.spec.value,
                           reason=f"{self.spec.path} is {shown(value)} in {where}")
        text, where = _last_text(run)
        expected = str(self.spec.value)
        if text.strip() == expected.strip():
            return Verdict(passed=True, reason=f"{where} is exactly {shown(expected)}")
        return Verdict(passed=False, reason=f"expected exactly {shown(expected)}, {where} said {shown(text)}")


class TypeSpec(Strict):
    path: str
    value: JsonType


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class TypeCheck(Check):
    """The value at `path` has this JSON type (`integer` is a `number` too)."""

    key = "type"
    Spec = TypeSpec
    spec: TypeSpec

    async def evaluate(self, run: RunView) -> Verdict:
        found = _located(self.spec.path, run)
        if found is None:
            return Verdict(passed=False, reason=f"{self.spec.path}: no match in the responses")
        nodes, where = found
        value = nodes[0] if len(nodes) == 1 else nodes
        kind = json_type(value)
        passed = kind == self.spec.value or (self.spec.value == "number" and kind == "integer")
        return Verdict(passed=passed, reason=f"{self.spec.path} is {shown(value)} ({kind}) in {where}")


class Negated(Check):
    """`negate: true` on a kind that has no `not_` sibling: passes exactly when the inner check fails."""

    key = "negate"
    Spec = Strict

    def __init__(self, inner: Check) -> None:
        super().__init__(None)
        self.inner = inner

    async def evaluate(self, run: RunView) -> Verdict:
        verdict = await self.inner.evaluate(run)
        return verdict.model_copy(update={"passed": not verdict.passed, "reason": f"negated: {verdict.reason}"})


# ---- script assertions ------------------------------------------------------------------------------


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


ScriptResult = bool | str | dict[str, Any] | tuple[bool, str] | None


Role = Literal["validate", "generate", "simulate"]
"""The function a script id calls by convention: an assertion's `validate`, a generator's `generate`, a
simulator's `simulate`."""


def load_function(reference: str, search: list[Path], role: Role = "validate") -> Callable[..., Any]:
    """The function a script reference names; raises ValueError saying what is missing. Two forms:

    - `scripts:module:function` (or `module:function`): the module is a file under one of the `search`
      folders (`a.b` is `a/b.py`), else an importable module;
    - `scripts:a.b-c` (the design's script id, no second colon): the file `scripts/a/b-c.py` under one of the
      `search` folders (hyphens allowed), and its function named after the role (`validate`, `generate`,
      `simulate`); failing that, `scripts/a.py` with a function named `b-c`'s last segment (so
      `scripts:tests.expense.generate` may also be `generate` in `scripts/tests/expense.py`)."""
    body = reference.removeprefix("scripts:")
    if ":" not in body:
        return _script_id(body, search, role)
    module_name, _, function_name = body.rpartition(":")
    if not module_name or not function_name:
        raise ValueError(f"expected scripts:module:function or a script id (scripts:tests.{role}), "
                         f"got {reference!r}")
    module = _module(module_name, search)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{module_name} has no function {function_name!r}")
    return function


def _script_id(name: str, search: list[Path], role: Role) -> Callable[..., Any]:
    segments = name.split(".")
    if not name or not all(segments) or any("/" in s or "\\" in s for s in segments):
        raise ValueError(f"expected a script id such as scripts:tests.{role} (a file under scripts/), got "
                         f"{'scripts:' + name!r}")
    folders = list(dict.fromkeys(folder / "scripts" for folder in search))
    for folder in folders:
        path = folder.joinpath(*segments).with_suffix(".py")
        if path.is_file():
            function = getattr(_from_file(path.resolve()), role, None)
            if not callable(function):
                raise ValueError(f"{path} has no function {role!r} (a script id calls {role}())")
            return function
    if len(segments) > 1 and segments[-1].isidentifier():
        for folder in folders:
            path = folder.joinpath(*segments[:-1]).with_suffix(".py")
            if path.is_file():
                function = getattr(_from_file(path.resolve()), segments[-1], None)
                if callable(function):
                    return function
    where = ", ".join(str(folder.joinpath(*segments).with_suffix(".py")) for folder in folders)
    raise ValueError(f"no script {name!r}: looked for {where}")


_LOADED: dict[Path, Any] = {}


def _module(name: str, search: list[Path]) -> Any:
    relative = Path(*name.split("."))
    for folder in search:
        path = (folder / relative).with_suffix(".py")
        if path.is_file():
            return _from_file(path.resolve())
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        where = ", ".join(str(folder) for folder in search)
        raise ValueError(f"no module {name!r} (looked for {relative}.py in {where}, then on the Python path: "
                         f"{exc})") from None


def _from_file(path: Path) -> Any:
    # loaded once per process under a private name, so two folders with a `checks.py` do not collide
    if path not in _LOADED:
        unique = f"tamesu_script_{len(_LOADED)}_{path.stem}"
        spec = importlib.util.spec_from_file_location(unique, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique] = module
        spec.loader.exec_module(module)
        _LOADED[path] = module
    return _LOADED[path]


class ScriptSpec(Strict):
    use: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class Script(Check):
    """A Python function decides: it returns True/False, `(passed, reason)`, `{passed, reason, score}`, a
    reason string (a failure), or None (a pass); an AssertionError it raises is a failure with its message.
    Any other exception is a bug in the script: the run is an error (exit 3), never a verdict on the agent."""

    key = "script"
    Spec = ScriptSpec
    spec: ScriptSpec

    def __init__(self, spec: ScriptSpec, function: Callable[..., Any]) -> None:
        super().__init__(spec)
        self.function = function
        self.test_id = ""
        """Set by the parser: the case this assertion belongs to."""

    async def evaluate(self, run: RunView) -> Verdict:
        script_run = ScriptRun(
            text=run.agent_text(),
            response=run.exchanges[-1].agent.response if run.exchanges else None,
            turns=[{"turn": e.index, "input": e.user.display() if e.user else None, "output": e.agent.text,
                    "response": e.agent.response} for e in run.exchanges],
            tool_calls=[call.model_dump(mode="json") for call in run.tool_calls],
            metadata=dict(self.spec.metadata), test_id=self.test_id,
        )
        try:
            result = self.function(script_run)
            if inspect.isawaitable(result):
                result = await result
        except AssertionError as exc:
            return Verdict(passed=False, reason=str(exc) or f"{self.spec.use} failed")
        except Exception as exc:
            raise InfraError(f"script {self.spec.use} raised {type(exc).__name__}: {exc}") from exc
        return _script_verdict(result, self.spec.use)


def _script_verdict(result: ScriptResult, name: str) -> Verdict:
    if result is None or result is True:
        return Verdict(passed=True, reason=f"{name} passed")
    if result is False:
        return Verdict(passed=False, reason=f"{name} returned False")
    if isinstance(result, str):
        return Verdict(passed=False, reason=result)
    if isinstance(result, tuple) and len(result) == 2:
        return Verdict(passed=bool(result[0]), reason=str(result[1]))
    if isinstance(result, dict) and "passed" in result:
        score = result.get("score")
        return Verdict(passed=bool(result["passed"]), reason=str(result.get("reason") or name),
                       score=float(score) if isinstance(score, int | float) else None)
    raise InfraError(f"script {name} returned {shown(result)}; expected a bool, (passed, reason), "
                     "{passed, reason} or a reason string")
