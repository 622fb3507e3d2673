"""Scored evaluators, by name: each scores one finished run from 0 to 1 with a reason (the `evaluator` assertion).

Built in: `faithfulness`, `answer_relevancy` and `maliciousness`, written on the judge and registered where they
are defined (`register("evaluators", NAME)`, see `tamesu.plugins`). Other packages add their own through the
`tamesu.evaluators` entry-point group, `name = "package.module:object"`, where the object is

- a function, plain or async, taking a `Sample` and returning a `Score`, a number, `(number, reason)` or a
  mapping `{score, reason, evidence}`; or
- a class, made once with no arguments, whose instances are such functions (`__call__`) or have `evaluate`.

An object may say which way its scores pass with `default_min` / `default_max` attributes (else `min: 0.5`).
Entry points are listed when an evaluator is looked up, and a plug-in's module is imported only when a suite
names it, so an installed plug-in costs nothing to a run that does not use it. A built-in name wins over a
plug-in of the same name.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tamesu import plugins
from tamesu.evaluators.base import Sample, Score

__all__ = ["ENTRY_POINT_GROUP", "Evaluator", "EvaluatorError", "Sample", "Score", "find", "names"]

ENTRY_POINT_GROUP = "tamesu.evaluators"

DEFAULT_MIN = 0.5
GENKIT_PREFIX = "genkitEval/"
"""Genkit names its built-in evaluators `genkitEval/faithfulness` ...: the same names reach tamesu's."""


class EvaluatorError(Exception):
    """An evaluator could not be found, loaded, or answered something that is not a score."""


@dataclass
class Evaluator:
    """One evaluator, loaded: what it is called, where it came from, and how its scores pass by default."""

    name: str
    source: str
    """`built-in`, or `plug-in <dist> <version>`."""
    call: Any
    default_min: float | None
    default_max: float | None

    async def score(self, sample: Sample) -> Score:
        answer = self.call(sample)
        if inspect.isawaitable(answer):
            answer = await answer
        return _as_score(self.name, answer)


def names() -> list[str]:
    """Every evaluator a suite may name: the built-ins and the installed plug-ins."""
    return plugins.names("evaluators")


_loaded: dict[tuple[str, str], Evaluator] = {}
"""Each evaluator made once (a class's instance), by name and what the name points at."""


def find(name: str) -> Evaluator:
    """The evaluator called `name`, imported now. EvaluatorError when there is none, or it does not load."""
    # Genkit's own names for the same built-in evaluators (the Concepts page writes genkitEval/faithfulness)
    genkit = name.removeprefix(GENKIT_PREFIX)
    key = genkit if name != genkit and plugins.is_built_in("evaluators", genkit) else name
    if not plugins.has("evaluators", key):
        close = difflib.get_close_matches(name, names(), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(names())}"
        raise EvaluatorError(f"unknown evaluator {name!r} ({hint})")
    source, reference = plugins.origin("evaluators", key), plugins.reference("evaluators", key)
    if (name, reference) in _loaded:
        return _loaded[name, reference]
    try:
        found = plugins.load("evaluators", key)
    except Exception as exc:  # a plug-in's import may fail any way; say which one and why
        cause = exc.__cause__ if isinstance(exc, plugins.PluginError) and exc.__cause__ is not None else exc
        raise EvaluatorError(f"evaluator {name!r} ({source}, {reference}) does not load: "
                             f"{type(cause).__name__}: {cause}") from None
    loaded = _loaded[name, reference] = _evaluator(name, found, source, reference)
    return loaded


def _evaluator(name: str, found: object, source: str, reference: str) -> Evaluator:
    target = found
    if inspect.isclass(found):
        try:
            target = found()
        except Exception as exc:
            raise EvaluatorError(f"evaluator {name!r} ({source}): {found.__name__}() failed: "
                                 f"{type(exc).__name__}: {exc}") from None
    call = getattr(target, "evaluate", None) or (target if callable(target) else None)
    if call is None:
        raise EvaluatorError(f"evaluator {name!r} ({source}, {reference}) is neither a function nor a class "
                             "with __call__ or evaluate")
    default_min = getattr(target, "default_min", None)
    default_max = getattr(target, "default_max", None)
    if default_min is None and default_max is None:
        default_min = DEFAULT_MIN
    return Evaluator(name=name, source=source, call=call, default_min=default_min, default_max=default_max)


def _as_score(name: str, answer: object) -> Score:
    try:
        if isinstance(answer, Score):
            return answer
        if isinstance(answer, bool):
            raise TypeError("a bool is not a score")
        if isinstance(answer, int | float):
            return Score(score=float(answer))
        if isinstance(answer, tuple) and len(answer) == 2:
            return Score(score=answer[0], reason=str(answer[1]))
        if isinstance(answer, Mapping):
            return Score.model_validate(dict(answer))
    except (ValidationError, TypeError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise EvaluatorError(f"evaluator {name!r} answered {answer!r:.120}, not a score: {first}") from None
    raise EvaluatorError(f"evaluator {name!r} answered {type(answer).__name__}, not a score (a number from 0 "
                         "to 1, (number, reason), {score, reason, evidence} or a Score)")
