"""The contract between tamesu and a language model provider, and what a model call records.

A provider turns one `ModelRequest` into one `ModelResponse`. Everything around it (the replay cache,
retries, fallback, cost accounting, the budget) is the `ModelClient`'s job, so a provider stays short.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, runtime_checkable

from pydantic import BaseModel, Field, model_serializer

from tamesu.net.json_depth import MAX_JSON_DEPTH

if TYPE_CHECKING:
    from tamesu.models.spec import ModelSpec

Purpose = Literal["simulator", "judge", "extract", "target", "counterpart", "generator", "browser",
                  "simulator_audit", "embedding"]


def _no_parameters() -> dict[str, object]:
    return {"type": "object", "properties": {}}


class ToolSpec(BaseModel):
    """A function the model may call (model and mcp targets)."""

    name: str
    description: str = ""
    parameters: dict[str, object] = Field(default_factory=_no_parameters)


TOO_DEEP_ARGUMENTS = f"the arguments were JSON nested more than {MAX_JSON_DEPTH} levels deep"
"""A ToolRequest's `unreadable` for arguments deeper than a run's records hold: JSON a tool runtime would have
read, unlike broken JSON, so the model target fails the turn rather than ask the model again."""


class ToolRequest(BaseModel):
    """A call the model asked for."""

    id: str
    name: str
    arguments: dict[str, object] = Field(default_factory=dict)
    unreadable: str | None = None
    """Why the model's arguments could not be read as one JSON object (then `arguments` is empty and
    `written` holds them): no tool is called with arguments made up from them."""
    written: str | None = None
    """The arguments as the model wrote them, when they were unreadable: sent back to it as written."""

    @model_serializer(mode="wrap")
    def _without_readable(self, handler: Any) -> object:
        # a call whose arguments were read dumps as before: replay-cache keys (an assistant message holds its
        # calls) and the recorded responses stay the same
        data = handler(self)
        if isinstance(data, dict) and self.unreadable is None:
            data.pop("unreadable", None)
            data.pop("written", None)
        return data


class MessageFile(BaseModel):
    """A file a user message carries to the model (an attachment): its bytes, or a URL the provider fetches.
    Each provider sends it in its own content-part shape (`tamesu.models.attachments`)."""

    name: str
    mime: str
    data: str | None = None
    """The bytes, base64."""
    url: str | None = None


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolRequest] = Field(default_factory=list)
    """Calls an assistant message asked for."""
    tool_call_id: str | None = None
    """For a tool message: the call it answers."""
    name: str | None = None
    files: list[MessageFile] = Field(default_factory=list)
    """Attachments of a user message, sent as the provider's image, audio or file content parts."""
    is_error: bool = False
    """For a tool message: the tool failed (its result is `{"error": ...}`); Anthropic's API takes it as the
    `tool_result` block's `is_error`, OpenAI's has no such flag."""

    @classmethod
    def tool_result(cls, result: object, call_id: str | None, name: str | None) -> Message:
        """The tool message answering a call: a string result as it is, anything else as JSON; a result that is
        `{"error": ...}` alone (how tamesu's targets answer a failed or refused call) is an error."""
        content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        failed = isinstance(result, dict) and list(result) == ["error"]
        return cls(role="tool", content=content, tool_call_id=call_id, name=name, is_error=failed)

    @model_serializer(mode="wrap")
    def _without_empty_files(self, handler: Any) -> object:
        # a message without files (or one that is no failed tool's) dumps as it did before they existed, so
        # replay-cache keys stay the same
        data = handler(self)
        if isinstance(data, dict) and not self.files:
            data.pop("files", None)
        if isinstance(data, dict) and not self.is_error:
            data.pop("is_error", None)
        return data


class ModelRequest(BaseModel):
    """Everything that shapes an answer; the replay cache keys on all of it."""

    purpose: Purpose
    messages: list[Message]
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    json_schema: dict[str, object] | None = None
    """Ask for JSON that fits this schema (structured output), where the provider supports it."""
    tools: list[ToolSpec] = Field(default_factory=list)
    prompt_version: str | None = None
    """Which version of tamesu's prompt template built the messages (simulator, judge...)."""
    context: dict[str, object] = Field(default_factory=dict)
    """The structured inputs the messages were built from (persona, goal, transcript, rubric...).
    Real providers ignore it; the fake provider's rules read it. Part of the cache key."""
    headers: dict[str, str] = Field(default_factory=dict, exclude=True)
    """HTTP headers for this request only (the model target's turn `traceparent`): real providers send them
    unless the model's own `headers` set the same name. Not part of the cache key (nor of the record)."""


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    reported: bool = Field(True, exclude=True)
    """Not written (a raw response keeps the server's own fields). False: the server's answer carried no token
    counts (some local servers, proxies), so the call counts 0 tokens and $0, which a budget cannot see; the
    client says so as a `model_usage_missing` event."""

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


class Embeddings(BaseModel):
    """What an embeddings API answered: a vector per text, in the texts' order."""

    vectors: list[list[float]]
    usage: Usage = Field(default_factory=Usage)


class ModelResponse(BaseModel):
    text: str = ""
    tool_calls: list[ToolRequest] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    provider: str
    model: str
    cost_usd: float = 0.0
    cached: bool = False
    """Replayed from the cache: no call was made, nothing was spent."""
    fake: bool = False
    """Answered by the fake provider's rules, not by a model."""
    reasoning: str = ""
    """What a reasoning model thought before it answered, when the server sent it: in a field of its own
    (`reasoning_content`, `reasoning`, Anthropic's thinking blocks) or at the head of the text between
    `<think>` tags. Never part of `text`."""
    reasoning_in_text: bool = False
    """The reasoning came inside the answer's text, between `<think>` tags, and was taken out of it."""
    adapted: list[str] = Field(default_factory=list)
    """What the provider changed in the request to get this answer, for the rest of the run (a parameter the
    server refused by name: `seed`, `temperature`, `response_format`...)."""

    @model_serializer(mode="wrap")
    def _without_absent_extras(self, handler: Any) -> object:
        # an answer without reasoning or adaptation dumps as before there were any: a turn's response and its
        # JSON paths, the replay cache's entries and the recorded outputs stay as they were
        data = handler(self)
        if isinstance(data, dict):
            if not self.reasoning and not self.reasoning_in_text:
                data.pop("reasoning", None)
                data.pop("reasoning_in_text", None)
            if not self.adapted:
                data.pop("adapted", None)
        return data


class ModelError(Exception):
    """A model call failed. `retryable` errors (rate limits, timeouts, 5xx) are tried again within a limit."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None,
                 timed_out: bool = False, should_retry: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The server's HTTP status, when it answered with one (a retry's wait names it)."""
        # the server's own word (`x-should-retry`, which the SDKs honour) overrides what the status suggests
        self.retryable = {"true": True, "false": False}.get((should_retry or "").strip().lower(), retryable)
        self.retry_after = retry_after
        self.timed_out = timed_out
        """No answer within the timeout (counted apart from other retried failures)."""


class Provider(ABC):
    """One model on one provider. Subclasses are small: build the wire request, read the wire answer."""

    name: str

    def __init__(self, model: str) -> None:
        self.model = model

    @classmethod
    def from_spec(cls, spec: ModelSpec, api_key: str | None, *, base_dir: Path | None = None) -> Self:
        """The one way every provider, built in or a plug-in's, is made: from the user's `ModelSpec` (its
        templates rendered; the key handed over apart in `api_key`, None when the suite sets none, and never
        kept in the spec) and the folder a relative path in the spec is read from (`base_dir`, None: the
        current one). By default `cls(spec.model)`."""
        return cls(spec.model)

    @abstractmethod
    async def generate(self, request: ModelRequest) -> ModelResponse:
        """One call, bounded by the provider's timeout. Raises ModelError."""

    async def embed(self, texts: list[str]) -> Embeddings:
        """One vector per text (`similar_to` with `method: embedding`), bounded by the provider's timeout. Raises
        ModelError; by default, that this provider has no embeddings API."""
        raise ModelError(f"{self.name}:{self.model}: the {self.name} provider has no embeddings API "
                         "(an openai, azure or fake model has)")

    def prepare(self) -> None:  # noqa: B027 - most providers have nothing to make ready
        """Do now what the first call would do before it reaches the network (import an SDK, make its client),
        for a caller whose time limit is meant for the call alone (`tamesu doctor`)."""

    async def aclose(self) -> None:  # noqa: B027 - most providers hold nothing to release
        """Release connections; called once when the run ends."""


class ModelClient(Protocol):
    """What roles (simulator, judge, extractor) and the model target call: a provider with the cache,
    retries, fallback and budget around it."""

    async def generate(self, request: ModelRequest) -> ModelResponse: ...


class Embedder(Protocol):
    """A model that gives vectors for texts (a `models:` entry on a provider with an embeddings API)."""

    async def embed(self, texts: list[str]) -> Embeddings: ...


@runtime_checkable
class EmbeddingModels(Protocol):
    """Models that can also name an embedder: a run's registry."""

    def embedder(self, name: str) -> Embedder | None:
        """The `models:` entry called `name` as an embedder, None when there is none of that name."""
        ...


class Models(Protocol):
    """The models of one run, by role: `simulator`, `judge`, `extract` (default: the judge's), or any name
    under `models:`. `override` is an assertion's `model:` (a name or a spec). Raises ModelError naming the
    missing `models.<role>` when nothing is configured for the role."""

    def client(self, role: str, override: object = None) -> ModelClient: ...


def per_request_headers(request: ModelRequest, own: set[str]) -> dict[str, str]:
    """`request.headers` without those the model's own `headers` set (lower-cased names in `own`): they win."""
    return {name: value for name, value in request.headers.items() if name.lower() not in own}
