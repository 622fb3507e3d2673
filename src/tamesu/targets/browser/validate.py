"""What the loader asks of a test's `steps`: each step well formed, on a browser target, its models there.

The loader calls `step_problems` once per test; the suite schema keeps `steps` as raw mappings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from tamesu.errors import Problem
from tamesu.targets.browser.spec import BrowserSpec, ExpectStep, GoalStep, parse_step, step_model

ProblemAt = Callable[[Sequence[Any], str], Problem]
"""`doc.problem`: a message at a location of the suite file."""


def step_problems(steps: Sequence[object], loc: tuple[object, ...], target: object, models: set[str],
                  problem_at: ProblemAt, from_validation: Callable[..., list[Problem]],
                  has_conversation: bool) -> list[Problem]:
    problems: list[Problem] = []
    if not steps:
        if isinstance(target, BrowserSpec) and target.chat is None:
            problems.append(problem_at(loc, "a browser test needs steps (goal, expect, action), or a chat block "
                                            "on its target to talk to the page's chat widget"))
        return problems
    if has_conversation:
        problems.append(problem_at((*loc, "steps"), "a test has steps or a conversation (scenario.script, "
                                                    "persona, counterpart), not both"))
    agent_model = target.model if isinstance(target, BrowserSpec) else "browser"
    for i, raw in enumerate(steps):
        where = (*loc, "steps", i)
        model = step_model(raw)
        try:
            step = parse_step(raw)
        except ValidationError as exc:
            assert model is not None
            problems.extend(from_validation(exc, model, where))
            continue
        except ValueError as exc:
            problems.append(problem_at(where, str(exc)))
            continue
        if isinstance(step, GoalStep) and agent_model not in models:
            problems.append(problem_at((*where, "goal"), f"a goal step is played by tamesu's browser agent: set "
                                                         f"models.{agent_model} (the target's `model`)"))
        if isinstance(step, ExpectStep) and step.model is None and "judge" not in models:
            problems.append(problem_at((*where, "expect"), "an expect step is graded by the judge: set "
                                                           "models.judge"))
    return problems
