"""A model writing JSONL test cases for an agent (`tamesu test -i agents:NAME?count=..&focus=..`): it is told the
agent's name, description and tools, how many cases and of what kind, and answers `{"cases": [...]}` in
structured output (repaired when malformed, like every role's answer). The prompt is `prompts/generator`."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from tamesu.errors import InfraError
from tamesu.matching import quoted
from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest
from tamesu.models.structured import StructuredOutputError, generate_structured, json_in
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.failures import infra_error


class GeneratorAnswer(BaseModel):
    cases: list[dict[str, Any]] = Field(min_length=1)


async def write_cases(client: ModelClient, about: dict[str, Any], count: int, params: dict[str, str]) -> list[Any]:
    """The cases the model wrote (as it wrote them: the caller validates them like lines of a file)."""
    prompt = _prompts.load("generator")
    tools = ", ".join(f"{t['name']} ({t['description']})" if t["description"] else t["name"]
                      for t in about["target_tools"]) or "none declared"
    values = {"target": about["target_agent"], "description": about["target_description"] or "(none given)",
              "tools": tools, "count": count, "focus": params.get("focus", "happy-path"),
              "complexity": params.get("complexity", "medium")}
    user = prompt.render("user", **values)
    request = ModelRequest(
        purpose="generator", messages=[Message(role="system", content=prompt.render("system")),
                                       Message(role="user", content=user)],
        prompt_version=prompt.version,
        # `message` is what the fake provider's rules read; the rest are the structured inputs
        context={"message": user, **about, "count": count, "focus": values["focus"],
                 "complexity": values["complexity"]},
    )
    try:
        answer, _ = await generate_structured(client, request, GeneratorAnswer)
    except (StructuredOutputError, ModelError) as exc:
        raise infra_error("generator", exc) from exc
    return answer.cases


def cases_answered(name: str, response: object, text: str) -> list[Any]:
    """The cases a generator agent answered: {cases: [...]}, or the JSON array of test cases the design's example
    generator prompt asks for ("Output as JSON array of test cases"), whole or as a block in its text."""
    for answer in (response, json_in(text)):
        cases = answer.get("cases") if isinstance(answer, dict) else answer
        if isinstance(cases, list) and cases:
            return cases
    said = text or json.dumps(response, default=str)
    raise InfraError(f"generator {name}: no test cases ({{\"cases\": [...]}} or a JSON array of them) in "
                     f"{quoted(said, 200)}")


def cases_in_jsonl(text: str, name: str) -> list[object]:
    """JSONL text a generator returned: a line that is not JSON is the generator's failure, told by its number
    (json's own message would say line 1 of every line)."""
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                cases.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InfraError(f"generator {name} returned JSONL whose line {number} is not JSON: {exc.msg} "
                                 f"(column {exc.colno})") from None
    return cases
