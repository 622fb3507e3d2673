"""Structured output: ask a model for JSON that fits a pydantic model, and repair what comes back.

Models wrap JSON in code fences, put a sentence before it, or miss a field. Rather than failing the run on
the first slip, the answer is read tolerantly, and when it still does not fit, the model is shown its answer
and the error and asked again, a bounded number of times.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest, ModelResponse

Model = TypeVar("Model", bound=BaseModel)

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_REPAIR = "That was not valid JSON for the schema: {error}. Answer with the JSON object only."


class StructuredOutputError(ModelError):
    """No usable answer within the attempts; `responses` are the calls made (they still cost)."""

    def __init__(self, message: str, responses: list[ModelResponse]) -> None:
        super().__init__(message, retryable=False)
        self.responses = responses


@functools.cache
def json_schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, built once per class: pydantic builds it anew on every call (a simulated turn
    paid over a millisecond for it). Callers must not change the dict they get."""
    return schema.model_json_schema(by_alias=True)


def find_json(text: str) -> Any:
    """The JSON object in a model's answer: the whole text, a fenced block, or the first balanced object.

    Raises ValueError when there is none.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer was empty")
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for block in _FENCE.findall(stripped):
        try:
            return json.loads(block.strip())
        except json.JSONDecodeError:
            continue
    # raw_decode parses one value and ignores what follows, which is exactly "the first balanced object"
    # even when prose comes after it; try each opening brace until one parses.
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", stripped):
        try:
            value, _ = decoder.raw_decode(stripped, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("no JSON object found in the answer")


def short_error(error: Exception) -> str:
    """One line a model (and a person reading the error) can act on."""
    if isinstance(error, ValidationError):
        parts = []
        for item in error.errors()[:5]:
            where = ".".join(str(p) for p in item["loc"]) or "the object"
            parts.append(f"{where}: {item['msg']}")
        return "; ".join(parts)
    return str(error)


def parse_answer(text: str, schema: type[Model]) -> Model:
    """Read one answer into `schema`; raises ValueError (a ValidationError is one) when it does not fit."""
    value = find_json(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return schema.model_validate(value)


async def generate_structured(
    client: ModelClient,
    request: ModelRequest,
    schema: type[Model],
    *,
    attempts: int = 3,
) -> tuple[Model, list[ModelResponse]]:
    """Ask `client` for an answer that validates as `schema`, repairing up to `attempts` calls in all.

    Returns the parsed answer and every response (each costs something). A provider failure (ModelError)
    passes through untouched: the client already retried it. After `attempts` unusable answers, raises
    StructuredOutputError (a non-retryable ModelError) naming the purpose and the last problem.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    current = request.model_copy(update={"json_schema": json_schema_of(schema)})
    responses: list[ModelResponse] = []
    last_error = ""
    for _ in range(attempts):
        response = await client.generate(current)
        responses.append(response)
        try:
            return parse_answer(response.text, schema), responses
        except ValueError as exc:
            last_error = short_error(exc)
        # the next request carries the bad answer and what was wrong with it, so the model can fix it
        current = current.model_copy(update={"messages": [
            *current.messages,
            Message(role="assistant", content=response.text),
            Message(role="user", content=_REPAIR.format(error=last_error)),
        ]})
    raise StructuredOutputError(
        f"{request.purpose}: no valid JSON after {attempts} attempts: {last_error}", responses)
