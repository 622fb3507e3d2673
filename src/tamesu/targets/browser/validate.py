"""What the loader asks of a test's `steps`: each step well formed, on a browser target, its models there.

The loader calls `step_problems` once per test; the suite schema keeps `steps` as raw mappings."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
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


def storage_state_problem(path: Path, given: str) -> str | None:
    """Why the file at `path` (`storage_state: GIVEN`) is no Playwright storage state, or None: said where the
    suite names it, since at run time Playwright's refusal was an infrastructure error of every test (exit 3)."""
    if not path.is_file():
        return f"no file {given} (a Playwright storage state, relative to the suite)"
    what = f"{given} is not a Playwright storage state"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return f"{what}: it is not UTF-8 text"
    except json.JSONDecodeError as exc:
        return f"{what}: line {exc.lineno}, column {exc.colno}: {exc.msg}"
    if not isinstance(state, dict):
        return f"{what}: it holds a JSON {type(state).__name__}, not an object with cookies and origins"
    for key in ("cookies", "origins"):
        if not isinstance(state.get(key, []), list):
            return f"{what}: {key} is not a list"
    for i, cookie in enumerate(state.get("cookies", [])):
        if not isinstance(cookie, dict) or not all(isinstance(cookie.get(k), str) for k in ("name", "value")):
            return f"{what}: cookies[{i}] needs a name and a value (strings)"
        if not isinstance(cookie.get("domain"), str) and not isinstance(cookie.get("url"), str):
            return f"{what}: cookies[{i}] ({cookie['name']}) needs a domain or a url"
    for i, origin in enumerate(state.get("origins", [])):
        if not isinstance(origin, dict) or not isinstance(origin.get("origin"), str):
            return f"{what}: origins[{i}] needs an origin (a string such as http://127.0.0.1:8000)"
    return None
