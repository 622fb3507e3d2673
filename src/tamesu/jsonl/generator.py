"""Generated test cases: `-i agents:NAME?count=10&focus=edge-cases&complexity=medium` asks a model (or a target
of tamesu.yaml, as the design's generator agent) for them, `-i scripts:module:function?k=v` calls a function.

The model (`NAME` under `models:`, `tamesu.roles.generator`) gets the target's name, description and tools (a
model target's declared tools), `count`, `focus` and `complexity`; a function gets the same as one mapping,
every query parameter included, and returns a list of cases (or JSONL text). Either way each case is then
validated like a line of a file; a case without an id gets `G001`, `G002`... Only the first `count` are kept.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from tamesu.errors import InfraError, SuiteProblem
from tamesu.models.base import ModelClient, Models
from tamesu.roles.generator import cases_answered, cases_in_jsonl, write_cases
from tamesu.roles.scripted_users import HelperAgent
from tamesu.targets.base import TargetSpec

DEFAULT_COUNT = 5
MAX_COUNT = 200


def describe(name: str, spec: TargetSpec) -> dict[str, Any]:
    """What a generator is told about the agent under test."""
    tools = [{"name": t.name, "description": t.description} for t in getattr(spec, "tools", []) or []
             if hasattr(t, "name")]
    return {"target_agent": name, "target_description": spec.description or "", "target_tools": tools}


def count_of(params: dict[str, str]) -> int:
    raw = params.get("count", str(DEFAULT_COUNT))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_COUNT:
        raise ValueError(f"count must be a number from 1 to {MAX_COUNT}, got {raw!r}")
    return int(raw)


def _with_ids(cases: list[Any], count: int) -> list[object]:
    kept = cases[:count]
    for number, case in enumerate(kept, start=1):
        if isinstance(case, dict) and not case.get("id"):
            case["id"] = f"G{number:03d}"
    return kept


MODEL_PARAMS = ("count", "focus", "complexity")
"""What a model generator reads of `-i agents:NAME?...` (an agent or a script is given every parameter)."""


async def from_model(client: ModelClient, about: dict[str, Any], params: dict[str, str]) -> list[object]:
    if unread := [key for key in params if key not in MODEL_PARAMS]:
        # a misspelt parameter dropped in silence would generate the defaults' cases as if it had been read
        close = difflib.get_close_matches(unread[0], MODEL_PARAMS, n=1)
        raise ValueError(f"a model generator reads count, focus and complexity, not {', '.join(unread)}"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    count = count_of(params)
    return _with_ids(await write_cases(client, about, count, params), count)


async def from_target(helper: HelperAgent, about: Mapping[str, object], params: dict[str, str],
                      models: Models | None) -> list[object]:
    """A target answering the design's generator interface (`TargetHelper`): {cases: [...]}, or the JSON array
    of test cases the design's example generator prompt asks for ("Output as JSON array of test cases")."""
    count = count_of(params)
    request = {**about, **params, "count": count}
    response, text = await helper.ask("generator", request, models)
    return _with_ids(cases_answered(helper.name, response, text), count)


async def from_script(function: Callable[..., object], name: str, about: Mapping[str, object],
                      params: dict[str, str]) -> list[object]:
    count = count_of(params) if "count" in params else MAX_COUNT
    inputs = {**about, **params, **({"count": count} if "count" in params else {})}
    # the project's own function: what it raises or answers wrong is the suite's to fix (exit 2), as a script
    # assertion's or a script simulator's is, never the environment's
    try:
        result = function(inputs)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        raise SuiteProblem(f"generator {name} raised {type(exc).__name__}: {exc}") from exc
    if isinstance(result, str):
        try:
            result = cases_in_jsonl(result, name)
        except InfraError as exc:
            raise SuiteProblem(str(exc)) from None
    if isinstance(result, dict) and isinstance(result.get("cases"), list):
        result = result["cases"]
    if isinstance(result, list) and not result:
        raise SuiteProblem(f"generator {name} returned no test cases")
    if not isinstance(result, list):
        raise SuiteProblem(f"generator {name} returned {type(result).__name__}; expected a list of test cases, "
                           "{\"cases\": [...]} or JSONL text")
    return _with_ids(result, count)

