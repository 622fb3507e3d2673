"""OpenAI chat completions, and any server that speaks them through `base_url` (Azure's /openai/v1, Ollama, vLLM,
LM Studio, OpenRouter...; Azure's deployments are `tamesu.models.azure`).

Servers differ in what they accept. Rather than a table of quirks, the provider learns from a 400 (or 422) that
names the parameter it rejected, adapts the request once, and remembers it for the rest of the run:
`json_schema` structured output falls back to `json_object` (then to asking in the prompt), `max_tokens`
becomes `max_completion_tokens` (reasoning models), and a `temperature` or `seed` the server refuses is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tamesu.models import _plain
from tamesu.models._reasoning import split_reasoning
from tamesu.models._sdk_http import plain, sdk_http_client, sdk_timeout
from tamesu.models._sdk_post import completions_url, create_is_plain, post_completion
from tamesu.models._sdk_provider import SdkProvider
from tamesu.models.attachments import openai_part
from tamesu.models.base import (
    TOO_DEEP_ARGUMENTS,
    Embeddings,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolRequest,
    Usage,
    per_request_headers,
)
from tamesu.models.said import not_a_completion
from tamesu.net.json_depth import MAX_JSON_DEPTH, deeper_than
from tamesu.net.tls import TlsSpec
from tamesu.plugins import register

if TYPE_CHECKING:
    # the SDK is imported where it is used (`_sdk`, and a failed call): a run whose model calls all succeed
    # against a known base URL never imports it (43 MB of memory)
    import openai

_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_SEED = re.compile(r"\bseed\b")


@register("providers", "openai")
class OpenAIProvider(SdkProvider):
    name = "openai"

    key_variable = "OPENAI_API_KEY"
    call_path = "/chat/completions"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, timeout: float = 60.0,
                 headers: dict[str, str] | None = None, tls: TlsSpec | None = None) -> None:
        super().__init__(model, api_key=api_key, base_url=base_url, timeout=timeout, headers=headers, tls=tls)
        # what this server refused once, so later calls do not pay for the 400 again
        self._response_format: str = "json_schema"  # json_schema -> json_object -> prompt
        self._max_tokens_param = "max_tokens"
        self._send_seed = True
        self._posted_to: tuple[object, str] | None = None
        """The SDK client, and the URL its chat completions are posted to (`_post_url`)."""

    @staticmethod
    def _server_message(exc: Any) -> str:
        return _server_message(exc)

    def base_url_meant(self, path: str) -> str | None:
        # Ollama, vLLM, LM Studio and llama.cpp serve OpenAI's API under /v1, and the SDK adds only the rest: a
        # base_url of the server alone asks for /chat/completions
        if self.base_url is None or urlsplit(self.base_url).path.strip("/") or path.startswith("/v1/"):
            return None
        return self.base_url.rstrip("/") + "/v1"

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            import openai  # on the first call: a run that makes none does not pay for the import (43 MB)

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=sdk_timeout(self.timeout),
                max_retries=0,  # ResilientClient retries, with jittered backoff and a fallback model
                default_headers=self._headers or None, http_client=sdk_http_client(self._tls))
        client: openai.AsyncOpenAI = self._client
        return client

    def prepare(self) -> None:
        super().prepare()
        create_is_plain()  # imports the SDK's chat resource too, which its client leaves to the first call

    # ---- one call ------------------------------------------------------------------------------------

    async def generate(self, request: ModelRequest) -> ModelResponse:
        # at most one adaptation per kind of refusal, so a server that refuses everything ends quickly
        adapted: list[str] = []
        for _ in range(6):
            try:
                # the SDK's documented call, so its instrumentations see it; the request's own headers (a
                # turn's traceparent) go with it unless the model's `headers` set that name (the suite's wins)
                params, headers = self._params(request), per_request_headers(request, self._own_headers) or None
                if create_is_plain():  # no instrumentation to see the call: the same request, without create's walk
                    sdk = self._sdk()
                    completion = await post_completion(sdk, self._post_url(sdk), params, headers)
                else:
                    completion = plain(await self._sdk().chat.completions.create(**params, extra_headers=headers))
            except Exception as exc:
                import openai  # a failed call's error is the SDK's (made from the answer): read as it always was

                # a 422 too: servers that validate with pydantic (Mistral's) refuse an unknown parameter so
                if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError) \
                        and (change := self._adapt(exc)) is not None:
                    adapted.append(change)
                    continue
                if isinstance(exc, openai.OpenAIError):
                    raise self._error(exc, openai) from None
                raise
            response = self._response(completion)
            return response.model_copy(update={"adapted": adapted}) if adapted else response
        raise ModelError(f"openai:{self.model}: the server kept refusing the request's parameters")

    async def embed(self, texts: list[str]) -> Embeddings:
        """The SDK's documented `embeddings.create` (its instrumentations see it), the model its `model`."""
        try:
            answer = await self._sdk().embeddings.create(model=self.model, input=texts)
        except Exception as exc:
            import openai

            if isinstance(exc, openai.OpenAIError):
                raise self._error(exc, openai) from None
            raise
        vectors = [[float(x) for x in item.embedding] for item in sorted(answer.data, key=lambda item: item.index)]
        used = answer.usage.prompt_tokens if answer.usage is not None else 0
        return Embeddings(vectors=vectors, usage=Usage(input_tokens=used))

    def _post_url(self, sdk: openai.AsyncOpenAI) -> str:
        """Where `post_completion` sends, worked out once a client (`completions_url`)."""
        posted_to = self._posted_to
        if posted_to is None or posted_to[0] is not sdk:
            posted_to = self._posted_to = (sdk, completions_url(sdk))
        return posted_to[1]

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        messages = [_wire_message(m) for m in request.messages]
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.temperature is not None and self._send_temperature:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params[self._max_tokens_param] = request.max_tokens
        if request.seed is not None and self._send_seed:
            params["seed"] = request.seed
        if request.tools:
            params["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": _parameters(t.parameters)}}
                for t in request.tools]
        if request.json_schema is not None:
            if self._response_format == "json_schema":
                params["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": _schema_name(request), "schema": request.json_schema, "strict": False}}
            else:
                # without a schema the server cannot hold the model to it: say it in the prompt
                # (json_object mode also requires the word JSON in the messages)
                params["messages"] = [{"role": "system", "content": _schema_instruction(request.json_schema)},
                                      *messages]
                if self._response_format == "json_object":
                    params["response_format"] = {"type": "json_object"}
        return params

    def _adapt(self, exc: openai.BadRequestError | openai.UnprocessableEntityError) -> str | None:
        """Learn from a 400 (or 422) that names what the server refused: what was changed for the rest of the run
        (the request is then tried again), or None."""
        text = _server_message(exc).lower()
        if "response_format" in text or "json_schema" in text:
            if self._response_format == "json_schema":
                self._response_format = "json_object"
                return "the server refused response_format json_schema: json_object from now on"
            if self._response_format == "json_object":
                self._response_format = "prompt"
                return "the server refused response_format json_object: the schema asked for in the prompt from now on"
        if "max_completion_tokens" in text and self._max_tokens_param == "max_tokens":
            self._max_tokens_param = "max_completion_tokens"
            return "the server refused max_tokens: max_completion_tokens from now on"
        if "temperature" in text and self._send_temperature:
            self._send_temperature = False
            return "the server refused temperature: sent without it from now on"
        if _SEED.search(text) and self._send_seed:
            self._send_seed = False
            return "the server refused seed: sent without it from now on"
        return None

    def _response(self, completion: Any) -> ModelResponse:
        # a 200 from a wrong base_url (a web page, a proxy's JSON) reaches here as a str, a list or a JSON
        # object with holes; say what came back instead of failing on a missing key
        choices = completion.get("choices") if isinstance(completion, dict) else None
        if not choices or not isinstance(choices, list):
            raise ModelError(f"openai:{self.model}: HTTP 200 but not a chat completion "
                             f"({not_a_completion(completion, 'choices')})")
        choice = _plain.mapping(choices[0])
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ModelError(f"openai:{self.model}: HTTP 200 but not a chat completion (choices[0] has no message)")
        calls = []
        for call in message.get("tool_calls") or []:
            function = _plain.mapping(call).get("function")
            if not isinstance(function, dict):  # custom (non-function) tools are never offered, so never expected
                continue
            arguments, unreadable = _arguments(function.get("arguments"))
            written = function.get("arguments")
            calls.append(ToolRequest(id=str(call.get("id") or ""), name=str(function.get("name") or ""),
                                     arguments=arguments, unreadable=unreadable,
                                     written=written if unreadable is not None and isinstance(written, str) else None))
        usage = _plain.mapping(completion.get("usage"))
        answer, inline = split_reasoning(_content(message.get("content")))
        # vLLM, llama.cpp and DeepSeek name the field reasoning_content; Ollama and OpenRouter, reasoning (most
        # answers have neither: not looked up then, four calls a model call)
        separate = _plain.text(message.get("reasoning_content")) or _plain.text(message.get("reasoning")) \
            if "reasoning_content" in message or "reasoning" in message else ""
        return ModelResponse(
            text=answer or _plain.text(message.get("refusal")),
            reasoning=separate or inline or "",
            reasoning_in_text=inline is not None,
            tool_calls=calls,
            finish_reason=_plain.text(choice.get("finish_reason")) or None,
            usage=Usage(input_tokens=_plain.count(usage.get("prompt_tokens")),
                        output_tokens=_plain.count(usage.get("completion_tokens")),
                        reported="prompt_tokens" in usage or "completion_tokens" in usage),
            provider=self.name,
            model=_plain.text(completion.get("model")) or self.model,
        )


def _wire_message(message: Message) -> dict[str, object]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    wire: dict[str, object] = {"role": message.role, "content": message.content}
    if message.files:
        text = [{"type": "text", "text": message.content}] if message.content else []
        wire["content"] = [*text, *(openai_part(f) for f in message.files)]
    if message.role == "assistant" and message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": c.written if c.written is not None
            else json.dumps(c.arguments, ensure_ascii=False)}} for c in message.tool_calls]
    if message.name:
        wire["name"] = message.name
    return wire


def _parameters(schema: Mapping[str, object]) -> dict[str, object]:
    """A tool's arguments schema as OpenAI's API takes it. JSON Schema (and MCP) allow an object's schema without
    `properties`, and MCP servers list a tool without arguments as `{"type": "object"}`; the API refuses the whole
    request for it (HTTP 400 "object schema missing properties"; 'got type "None"' without a type). Arguments are
    always an object, so both are added where missing: the schema accepts what it accepted."""
    if "type" in schema and schema["type"] != "object":
        return dict(schema)  # not an object's: the server's own refusal says it best
    return {**schema, "type": "object", "properties": schema.get("properties", {})}


def _content(value: object) -> str:
    if isinstance(value, list):  # content as parts, as some compatible servers send it
        return "".join(_plain.text(_plain.mapping(part).get("text")) for part in value)
    return _plain.text(value)


def _arguments(raw: object) -> tuple[dict[str, object], str | None]:
    """The call's arguments, or why they are none: models sometimes write broken JSON, and a tool called with
    arguments made up from it (`{"_raw": ...}`) answered a call the model never made."""
    if isinstance(raw, dict):  # a server that sends the arguments as an object rather than a JSON string
        return ({}, _TOO_DEEP) if deeper_than(raw) else (raw, None)
    if not isinstance(raw, str | None):
        return {}, f"the arguments were a JSON {type(raw).__name__}, not an object"
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        return {}, f"the arguments were not valid JSON ({exc})"
    except RecursionError:
        return {}, _TOO_DEEP
    if not isinstance(value, dict):
        return {}, "the arguments were JSON but not an object"
    # brackets counted first (in C): only arguments that could be that deep are walked
    if raw is not None and raw.count("[") + raw.count("{") > MAX_JSON_DEPTH and deeper_than(value):
        return {}, _TOO_DEEP
    return value, None


_TOO_DEEP = TOO_DEEP_ARGUMENTS
"""The model's, not tamesu's: dumped into the run's records they would end the test as a bug of tamesu's."""


def _schema_name(request: ModelRequest) -> str:
    title = request.json_schema.get("title") if request.json_schema else None
    name = _NAME.sub("_", str(title or request.purpose))[:64]
    return name or "answer"


def _schema_instruction(schema: Mapping[str, object]) -> str:
    return ("Answer with one JSON object only (no prose, no code fence) that fits this JSON schema:\n"
            + json.dumps(schema, ensure_ascii=False))


def _server_message(exc: openai.APIStatusError) -> str:
    # the SDK keeps the body's `error` object; its `message` is the server's own words
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error")
        if isinstance(message, dict):
            message = message.get("message")
        if message:
            return str(message)
    if isinstance(body, str) and body:
        return body
    return exc.message
