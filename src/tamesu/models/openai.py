"""OpenAI chat completions, and any server that speaks them through `base_url` (Azure-compatible endpoints,
Ollama, vLLM, LM Studio, OpenRouter...).

Servers differ in what they accept. Rather than a table of quirks, the provider learns from a 400 that names
the parameter it rejected, adapts the request once, and remembers it for the rest of the run:
`json_schema` structured output falls back to `json_object` (then to asking in the prompt), `max_tokens`
becomes `max_completion_tokens` (reasoning models), and a `temperature` the model refuses is dropped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tamesu.models import _plain
from tamesu.models._sdk_http import plain, sdk_http_client
from tamesu.models._sdk_post import create_is_plain, post_completion
from tamesu.models._where import base_url_in_use, reached
from tamesu.models.attachments import openai_part
from tamesu.models.base import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolRequest,
    Usage,
    per_request_headers,
)
from tamesu.models.client import (
    DEFAULT_BASE_URLS,
    DEFAULT_ENV_BASE_URLS,
    LOCAL_PLACEHOLDER_KEY,
    is_local_url,
    not_a_completion,
    one_line,
    redact,
    retry_after_from_headers,
)
from tamesu.models.spec import ModelSpec
from tamesu.net.bounded import is_too_large
from tamesu.net.clients import os_reason
from tamesu.net.tls import TlsSpec
from tamesu.plugins import register

if TYPE_CHECKING:
    # the SDK is imported where it is used (`_sdk`, and a failed call): a run whose model calls all succeed
    # against a known base URL never imports it (43 MB of memory)
    import openai

_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


@register("providers", "openai")
class OpenAIProvider(Provider):
    name = "openai"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, timeout: float = 60.0,
                 headers: dict[str, str] | None = None, tls: TlsSpec | None = None) -> None:
        super().__init__(model)
        self.base_url = base_url
        self.timeout = timeout
        self._api_key = api_key
        self._own_headers = {name.lower() for name in headers or {}}
        self._headers = headers
        self._tls = tls
        self._client: Any = None
        """The SDK's client, made on the first call (importing the SDK is not free)."""
        # what this server refused once, so later calls do not pay for the 400 again
        self._response_format: str = "json_schema"  # json_schema -> json_object -> prompt
        self._max_tokens_param = "max_tokens"
        self._send_temperature = True

    @classmethod
    def from_spec(cls, spec: ModelSpec, api_key: str | None, *, base_dir: Path | None = None) -> OpenAIProvider:
        del base_dir  # reads no files
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not is_local_url(base_url_in_use(spec.base_url, DEFAULT_ENV_BASE_URLS["openai"], "")):
                raise ModelError("openai: no API key (set OPENAI_API_KEY or models.X.api_key)")
            key = LOCAL_PLACEHOLDER_KEY  # Ollama, vLLM, LM Studio on this machine need none
        return cls(spec.model, api_key=key, base_url=spec.base_url, timeout=spec.timeout, headers=spec.headers,
                   tls=spec.tls)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            import openai  # on the first call: a run that makes none does not pay for the import (43 MB)

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                max_retries=0,  # ResilientClient retries, with jittered backoff and a fallback model
                default_headers=self._headers or None, http_client=sdk_http_client(self._tls))
        client: openai.AsyncOpenAI = self._client
        return client

    # ---- one call ------------------------------------------------------------------------------------

    async def generate(self, request: ModelRequest) -> ModelResponse:
        # at most one adaptation per kind of refusal, so a server that refuses everything ends quickly
        for _ in range(4):
            try:
                # the SDK's documented call, so its instrumentations see it; the request's own headers (a
                # turn's traceparent) go with it unless the model's `headers` set that name (the suite's wins)
                params, headers = self._params(request), per_request_headers(request, self._own_headers) or None
                if create_is_plain():  # no instrumentation to see the call: the same request, without create's walk
                    completion = await post_completion(self._sdk(), params, headers)
                else:
                    completion = plain(await self._sdk().chat.completions.create(**params, extra_headers=headers))
            except Exception as exc:
                import openai  # a failed call's error is the SDK's (made from the answer): read as it always was

                if isinstance(exc, openai.BadRequestError) and self._adapt(exc):
                    continue
                if isinstance(exc, openai.OpenAIError):
                    raise self._error(exc) from None
                raise
            return self._response(completion)
        raise ModelError(f"openai:{self.model}: the server kept refusing the request's parameters")

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        messages = [_wire_message(m) for m in request.messages]
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.temperature is not None and self._send_temperature:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params[self._max_tokens_param] = request.max_tokens
        if request.seed is not None:
            params["seed"] = request.seed
        if request.tools:
            params["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}} for t in request.tools]
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

    def _adapt(self, exc: openai.BadRequestError) -> bool:
        """Learn from a 400 that names what the server refused; True when the request should be tried again."""
        text = _server_message(exc).lower()
        if "response_format" in text or "json_schema" in text:
            if self._response_format == "json_schema":
                self._response_format = "json_object"
                return True
            if self._response_format == "json_object":
                self._response_format = "prompt"
                return True
        if "max_completion_tokens" in text and self._max_tokens_param == "max_tokens":
            self._max_tokens_param = "max_completion_tokens"
            return True
        if "temperature" in text and self._send_temperature:
            self._send_temperature = False
            return True
        return False

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
            calls.append(ToolRequest(id=str(call.get("id") or ""), name=str(function.get("name") or ""),
                                     arguments=_arguments(function.get("arguments"))))
        usage = _plain.mapping(completion.get("usage"))
        return ModelResponse(
            text=_content(message.get("content")) or _plain.text(message.get("refusal")),
            tool_calls=calls,
            finish_reason=_plain.text(choice.get("finish_reason")) or None,
            usage=Usage(input_tokens=_plain.count(usage.get("prompt_tokens")),
                        output_tokens=_plain.count(usage.get("completion_tokens"))),
            provider=self.name,
            model=_plain.text(completion.get("model")) or self.model,
        )

    def _reached(self, exc: Exception) -> str:
        # the URL the failed request went to: the suite's base_url, else OPENAI_BASE_URL, else the public API
        base = base_url_in_use(self.base_url, DEFAULT_ENV_BASE_URLS["openai"], DEFAULT_BASE_URLS["openai"])
        return reached(exc, "/chat/completions", base)

    def _error(self, exc: openai.OpenAIError) -> ModelError:
        import openai

        where = f"openai:{self.model}"
        if is_too_large(exc):  # the model target's max_response_bytes: the same answer again would be refused too
            return ModelError(f"{where}: {one_line(str(exc.__cause__ or exc.__context__ or exc))}")
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"{where}: no answer within {self.timeout:g}s", retryable=True, timed_out=True)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f" ({os_reason(cause)})" if cause else ""  # a TLS failure's reason, or the OS's
            return ModelError(f"{where}: cannot reach {self._reached(exc)}{detail}", retryable=True)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = redact(one_line(_server_message(exc)), self._api_key)
            return ModelError(f"{where}: HTTP {status}: {message}",
                              retryable=status in (408, 409, 429) or status >= 500,
                              retry_after=retry_after_from_headers(exc.response.headers),
                              should_retry=exc.response.headers.get("x-should-retry"))
        return ModelError(f"{where}: {redact(one_line(str(exc)), self._api_key)}")


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
            "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}} for c in message.tool_calls]
    if message.name:
        wire["name"] = message.name
    return wire


def _content(value: object) -> str:
    if isinstance(value, list):  # content as parts, as some compatible servers send it
        return "".join(_plain.text(_plain.mapping(part).get("text")) for part in value)
    return _plain.text(value)


def _arguments(raw: object) -> dict[str, object]:
    if isinstance(raw, dict):  # a server that sends the arguments as an object rather than a JSON string
        return raw
    if not isinstance(raw, str | None):
        return {"_value": raw}
    # models sometimes write broken JSON arguments; keep the text rather than lose the call
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


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
