"""`custom`: a check the project or a plug-in provides.

- `custom: "module:function"`: a function in a file of the project (`module` is a path from the suite's folder,
  `a.b` is `a/b.py`); installed modules and the standard library are not looked at.
- `custom: {name: NAME, with: {...}}`, or `custom: NAME` (a name without `:`; the Concepts page's "a
  registered assertion by name"): a check registered under NAME through the `tamesu.checks` entry points
  (a plug-in) or in the built-in table. A registered function is called like a project function; a registered
  `Check` class gets `with` as its options.

A function receives the run's view (`RunView`: exchanges, metrics, tool calls, captured values...) and the
`with` mapping as keyword arguments, and returns a Verdict, a bool, `(passed, reason)`, `{passed, reason,
score}`, a reason string (a failure) or None (a pass). An exception it raises is that test's error, never the
run's: a project function's is the suite's (`fault: suite`, exit 2: the suite's authors wrote the bug), a
plug-in's the environment's (exit 3: installed software broke, as a plug-in target's bug is); an
AssertionError is a failure with its message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, model_validator

from tamesu.checks._quote import exception_line
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.functions import check_callable, load_function
from tamesu.checks.script import call_verdict
from tamesu.errors import InfraError, SuiteProblem
from tamesu.plugins import register
from tamesu.types import Strict


class CustomSpec(Strict):
    function: str | None = None
    """`module:function` of the project."""
    name: str | None = None
    """A registered check."""
    with_: dict[str, object] = Field(default_factory=dict, alias="with")

    @model_validator(mode="before")
    @classmethod
    def _a_bare_name_is_registered(cls, value: object) -> object:
        # a project function is always `module:function`; a name without a colon can only be a registered check
        if isinstance(value, dict) and isinstance(value.get("function"), str) and ":" not in value["function"] \
                and "name" not in value:
            value = {("name" if key == "function" else key): item for key, item in value.items()}
        return value

    @model_validator(mode="after")
    def _one_of(self) -> CustomSpec:
        if (self.function is None) == (self.name is None):
            raise ValueError('custom is "module:function", or {name: REGISTERED, with: {...}}')
        return self


@register("checks", "custom")
class Custom(Check[CustomSpec]):
    key = "custom"
    Spec = CustomSpec
    shorthand = "function"
    spec: CustomSpec

    def __init__(self, spec: CustomSpec) -> None:
        super().__init__(spec)
        self._function: Callable[..., object] | None = None
        self._check: Check[BaseModel] | None = None
        if spec.name is not None:
            self._bind_registered(spec.name)

    def _bind_registered(self, name: str) -> None:
        from tamesu import checks

        found = checks.registered_custom(name)
        if isinstance(found, type) and issubclass(found, Check):
            found = checks.check_class(name)  # a plug-in's class without a Spec is said as such
            try:
                self._check = found(found.parse(self.spec.with_))
            except Exception as exc:
                raise ValueError(f"custom check {name!r}: {exc}") from None
        elif callable(found):
            self._function = found
            self._fits(name)
        else:
            raise ValueError(f"custom check {name!r} is neither a function nor a Check class")

    def prepare(self, search: list[Path]) -> None:
        if self.spec.function is not None:
            self._function = load_function(self.spec.function, search, project_only=True)
            self._fits(self.spec.function)
        elif self._check is not None:
            self._check.prepare(search)

    def _fits(self, name: str) -> None:
        assert self._function is not None
        keys = ", ".join(self.spec.with_)
        given = f"the run and with: {{{keys}}}" if keys else "the run alone (no with:)"
        try:
            check_callable(self._function, given, 1, self.spec.with_)
        except ValueError as exc:
            raise ValueError(f"custom {name}: {exc}") from None

    async def evaluate(self, run: RunView) -> Verdict:
        if self._check is not None:
            try:
                return await self._check.evaluate(run)
            except InfraError:
                raise
            except Exception as exc:  # a plug-in's bug is this test's error, with its name on it
                raise InfraError(f"custom {self.spec.name} raised {exception_line(exc)}") from exc
        label = f"custom {self.spec.function or self.spec.name}"
        if self._function is None:
            assert self.spec.function is not None
            try:
                self._function = load_function(self.spec.function, [run.base_dir], project_only=True)
            except ValueError as exc:
                raise SuiteProblem(f"{label}: {exc}") from None
        return await call_verdict(label, label, self._function, (run,), dict(self.spec.with_),
                                  project=self.spec.function is not None)
