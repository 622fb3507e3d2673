"""Structured output: ask a model for JSON that fits a pydantic model, and repair what comes back.

Models wrap JSON in code fences, put a sentence before it, or miss a field. Rather than failing the run on
the first slip, the answer is read, and when it does not fit, the model is shown its answer and the error and
asked again, a bounded number of times.

Two readers. The tolerant one (simulator, extractor, generator) takes the JSON wherever it is in the text.
The strict one (verdicts, `strict=True`) takes only what is exactly the schema: a fenced block alone is
unwrapped and said so (a repair: nothing in it is changed); anything else that is not exactly one JSON object
of the schema (prose around it, a duplicate key, `"pass": "yes"`, a key the schema has not, a score that
contradicts the pass) is rejected and asked again. Every attempt is recorded (`Attempt`), so a verdict can
say what was done to get it.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest, ModelResponse
from tamesu.types import JSONValue

Model = TypeVar("Model", bound=BaseModel)

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_REPAIR = "That was not valid JSON for the schema: {error}. Answer with the JSON object only."
_REASONING_TAKEN_OUT = "the model's reasoning came at the head of its answer, in <think> tags: taken out"
_WHOLE_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```\Z", re.DOTALL)


class Attempt(BaseModel):
    """One model answer read for a structured result: accepted as is, repaired (and how), or rejected (and
    why; the model was then asked again, unless it was the last attempt)."""

    number: int
    outcome: Literal["accepted", "repaired", "rejected"]
    reason: str = ""


@dataclass
class Structured(Generic[Model]):
    """A structured answer, the calls behind it (each costs something) and what it took to read it."""

    value: Model
    responses: list[ModelResponse]
    attempts: list[Attempt] = field(default_factory=list)


class StructuredOutputError(ModelError):
    """No usable answer within the attempts; `responses` are the calls made (they still cost)."""

    def __init__(self, message: str, responses: list[ModelResponse], attempts: list[Attempt] | None = None) -> None:
        super().__init__(message, retryable=False)
        self.responses = responses
        self.attempts = attempts or []


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            # json.loads would keep the last; a verdict that says two things is not read as either
            raise _DuplicateKey(f"the key {key!r} appears twice ({_shown(seen[key])} and {_shown(value)})")
        seen[key] = value
    return seen


class _NotJson(ValueError):
    pass


def _not_json(name: str) -> object:
    # Python's json reads NaN and Infinity; JSON has neither, and a score of NaN compares false with anything
    raise _NotJson(f"{name} is not a JSON number")


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)[:60]


def read_strict(text: str, schema: type[Model]) -> tuple[Model, str | None]:
    """Exactly one JSON object of `schema`, alone or alone in one code fence. Returns the value and what was
    repaired (None when nothing was); raises ValueError saying why the answer cannot be taken as it is."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer was empty")
    repaired = None
    fenced = _WHOLE_FENCE.match(stripped)
    if fenced:
        stripped, repaired = fenced.group(1).strip(), "the JSON was inside a markdown code fence: unwrapped"
    try:
        value = json.loads(stripped, object_pairs_hook=_no_duplicates, parse_constant=_not_json)
    except (_DuplicateKey, _NotJson) as exc:
        raise ValueError(str(exc)) from None
    except json.JSONDecodeError:
        try:
            find_json(text)
        except ValueError:
            raise ValueError("no JSON object in the answer") from None
        raise ValueError("the JSON object was surrounded by other text; answer with the object alone") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return schema.model_validate(value, strict=True), repaired


@functools.cache
def json_schema_of(schema: type[BaseModel]) -> dict[str, object]:
    """A model's JSON schema, built once per class: pydantic builds it anew on every call (a simulated turn
    paid over a millisecond for it). Callers must not change the dict they get."""
    return schema.model_json_schema(by_alias=True)


def find_json(text: str) -> JSONValue:
    """The JSON object in a model's answer: the whole text, a fenced block, or the first balanced object.

    Raises ValueError when there is none.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer was empty")
    try:
        parsed: JSONValue = json.loads(stripped)
        return parsed
    except json.JSONDecodeError:
        pass
    for block in _FENCE.findall(stripped):
        try:
            parsed = json.loads(block.strip())
            return parsed
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


def json_in(text: str) -> JSONValue | None:
    """The JSON value in a helper's text (`find_json`), or None when there is none."""
    try:
        return find_json(text)
    except ValueError:
        return None


def short_error(error: Exception) -> str:
    """One line a model (and a person reading the error) can act on."""
    if isinstance(error, ValidationError):
        parts = []
        for item in error.errors()[:5]:
            where = ".".join(str(p) for p in item["loc"])
            message = item["msg"].removeprefix("Value error, ")
            if not where:  # a rule of the whole object says which fields itself
                parts.append(message)
                continue
            # what was given, so "pass: Input should be a valid boolean" says it was "yes"
            given = f" (got {_shown(item['input'])})" if item["type"] not in ("missing", "value_error") \
                and "input" in item else ""
            parts.append(f"{where}: {message}{given}")
        return "; ".join(parts)
    return str(error)


def parse_answer(text: str, schema: type[Model]) -> Model:
    """Read one answer into `schema`; raises ValueError (a ValidationError is one) when it does not fit."""
    value = find_json(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return schema.model_validate(value)


def _unanswered(response: ModelResponse) -> str | None:
    """Why an empty answer or one that is only reasoning gave nothing to read, or None when it is not that."""
    if response.text.strip():
        return None
    if response.finish_reason in ("content_filter", "refusal"):
        # Azure's content filter (finish_reason content_filter); Claude's refusal (stop_reason refusal)
        return f"the server withheld the answer (finish reason {response.finish_reason!r})"
    if not response.reasoning:
        return None
    if response.finish_reason in ("length", "max_tokens"):
        return ("the model was still reasoning when it reached its token limit: no answer came "
                "(raise the model's max_tokens, or turn its reasoning off)")
    return "the model reasoned but gave no answer"


@runtime_checkable
class ForgetsAnswers(Protocol):
    """A client with a replay cache that can drop an answer it recorded (ResilientClient)."""

    def forget(self, request: ModelRequest) -> None: ...


async def generate_structured(
    client: ModelClient,
    request: ModelRequest,
    schema: type[Model],
    *,
    attempts: int = 3,
) -> tuple[Model, list[ModelResponse]]:
    """Ask `client` for an answer that validates as `schema`, read tolerantly, up to `attempts` calls in all.

    Returns the parsed answer and every response (each costs something). A provider failure (ModelError)
    passes through untouched: the client already retried it. After `attempts` unusable answers, raises
    StructuredOutputError (a non-retryable ModelError) naming the purpose and the last problem.
    """
    found = await ask_structured(client, request, schema, attempts=attempts)
    return found.value, found.responses


async def ask_structured(
    client: ModelClient,
    request: ModelRequest,
    schema: type[Model],
    *,
    attempts: int = 3,
    strict: bool = False,
) -> Structured[Model]:
    """`generate_structured` with the record of every attempt; `strict` reads with `read_strict`."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    wanted = json_schema_of(schema)
    # a request made for this answer may carry its schema already (the simulated user's does): no copy then
    current = request if request.json_schema == wanted else request.model_copy(update={"json_schema": wanted})
    responses: list[ModelResponse] = []
    record: list[Attempt] = []
    refused: list[ModelRequest] = []
    last_error = ""
    for number in range(1, attempts + 1):
        response = await client.generate(current)
        responses.append(response)
        try:
            if strict:
                value, repaired = read_strict(response.text, schema)
            else:
                value, repaired = parse_answer(response.text, schema), None
        except ValueError as exc:
            last_error = _unanswered(response) or short_error(exc)
            record.append(Attempt(number=number, outcome="rejected", reason=last_error))
            refused.append(current)
        else:
            repairs = [part for part in (_REASONING_TAKEN_OUT if response.reasoning_in_text else None, repaired)
                       if part]
            record.append(Attempt(number=number, outcome="repaired" if repairs else "accepted",
                                  reason="; ".join(repairs)))
            return Structured(value, responses, record)
        # the next request carries the bad answer and what was wrong with it, so the model can fix it
        current = current.model_copy(update={"messages": [
            *current.messages,
            Message(role="assistant", content=response.text),
            Message(role="user", content=_REPAIR.format(error=last_error)),
        ]})
    # given up: the refused answers leave the replay cache, which would give them back on every later run (those
    # before an answer that was read stay: a replay of that run asks them again, in the same order)
    if isinstance(client, ForgetsAnswers):
        for asked in refused:
            client.forget(asked)
    # every answer's problem, not only the last one's: a model that failed three ways says all three
    reasons = [a.reason for a in record]
    said = last_error if len(set(reasons)) == 1 else "; ".join(f"attempt {a.number}: {a.reason}" for a in record)
    raise StructuredOutputError(
        f"{request.purpose}: no valid JSON after {attempts} attempts: {said}", responses, record)
