"""A model writing JSONL test cases for an agent (`tamesu test -i agents:NAME?count=..&focus=..`): it is told the
agent's name, description and tools, how many cases and of what kind, and answers `{"cases": [...]}` in
structured output (repaired when malformed, like every role's answer). The prompt is `prompts/generator`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest
from tamesu.models.structured import StructuredOutputError, generate_structured
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
