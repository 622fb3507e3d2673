"""Anthropic's Messages API (and servers shaped like it, through `base_url`).

Differences from chat completions that matter here: the system prompt is a separate field, tool calls and
their results are content blocks (`tool_use` in the assistant turn, `tool_result` in the next user turn),
`max_tokens` is required, and there is no seed. Structured output is asked for in the system prompt, with the
schema, which every Anthropic-shaped server understands.

The 2.x SDK has no `temperature` argument (newer models refuse sampling parameters), yet older models and
compatible servers take it and judges want 0; so it goes in the body, and is dropped for the rest of the run if
the server refuses it once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tamesu.models import _plain
from tamesu.models._reasoning import split_reasoning
from tamesu.models._sdk_http import plain, sdk_http_client, sdk_timeout
from tamesu.models._sdk_post import create_timeout, messages_create_is_plain, messages_url, post_message
from tamesu.models._sdk_provider import SdkProvider
from tamesu.models.attachments import anthropic_block
from tamesu.models.base import (
    TOO_DEEP_ARGUMENTS,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolRequest,
    Usage,
    per_request_headers,
)
from tamesu.models.said import not_a_completion
from tamesu.net.json_depth import deeper_than
from tamesu.plugins import register

if TYPE_CHECKING:
    # the SDK is imported where it is used (`_sdk`, and a failed call): a run whose model calls all succeed
    # against a known base URL never imports it (72 MB of memory: its `__init__` imports every type module)
    import anthropic

API_VERSION = "2026-10-21"
"""The `anthropic-version` the installed SDK sends (its `ANTHROPIC_API_VERSION`; test_model_wire.py compares)."""

DEFAULT_MAX_TOKENS = 4096
"""The Messages API needs a limit; this one is enough for a user turn or a verdict."""


@register("providers", "anthropic")
class AnthropicProvider(SdkProvider):
    name = "anthropic"

    key_variable = "ANTHROPIC_API_KEY"
    call_path = "/v1/messages"

    _posted_to: tuple[object, str | None] | None = None
    """The SDK client, and the URL its messages are posted to (`_post_url`; None: through `create`)."""

    @staticmethod
    def _server_message(exc: Any) -> str:
        return _server_message(exc)

    def base_url_meant(self, path: str) -> str | None:
        # the SDK adds /v1/messages itself: a base_url that ends in /v1 asks for /v1/v1/messages
        if "/v1/v1/" not in path or self.base_url is None:
            return None
        return self.base_url.rstrip("/").removesuffix("/v1")

    def _sdk(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            import anthropic  # on the first call: a run that makes none does not pay for the import (72 MB)

            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url, timeout=sdk_timeout(self.timeout),
                max_retries=0,  # ResilientClient retries, with jittered backoff and a fallback
                default_headers=self._headers or None, http_client=sdk_http_client(self._tls))
        client: anthropic.AsyncAnthropic = self._client
        return client

    def prepare(self) -> None:
        super().prepare()
        messages_create_is_plain()  # imports the SDK's messages resource too, which its client leaves to the first call

    async def generate(self, request: ModelRequest) -> ModelResponse:
        adapted: list[str] = []
        for _ in range(2):
            try:
                params = self._params(request)
                # the 2.x SDK no longer names `temperature`; Anthropic-shaped servers still read it
                extra = {"temperature": params.pop("temperature")} if "temperature" in params else None
                # the request's own headers (a turn's traceparent) go with it unless the model's `headers` set that
                # name (the suite's wins)
                headers = per_request_headers(request, self._own_headers) or None
                sdk = self._sdk()
                # the SDK's documented call while an instrumentation wraps it, so it sees every call; else the same
                # request through the SDK's `post`, without create's path merge and typed answer (`_sdk_post`)
                if messages_create_is_plain() and (url := self._post_url(sdk)) is not None:
                    message = await post_message(sdk, url, params, extra, headers)
                else:
                    message = plain(await sdk.messages.create(**params, extra_body=extra, extra_headers=headers,
                                                              timeout=create_timeout(sdk)))
            except Exception as exc:
                import anthropic  # a failed call's error is the SDK's (made from the answer): read as it always was

                if isinstance(exc, anthropic.BadRequestError) and self._send_temperature \
                        and request.temperature is not None and "temperature" in _server_message(exc).lower():
                    self._send_temperature = False
                    adapted = ["the server refused temperature: sent without it from now on"]
                    continue
                if isinstance(exc, anthropic.AnthropicError):
                    raise self._error(exc, anthropic) from None
                raise
            response = self._response(message)
            return response.model_copy(update={"adapted": adapted}) if adapted else response
        raise ModelError(f"anthropic:{self.model}: the server kept refusing the request's parameters")

    def _post_url(self, sdk: anthropic.AsyncAnthropic) -> str | None:
        """Where `post_message` sends, worked out once a client (`messages_url`)."""
        posted_to = self._posted_to
        if posted_to is None or posted_to[0] is not sdk:
            posted_to = self._posted_to = (sdk, messages_url(sdk, self.model))
        return posted_to[1]

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system" and m.content)
        if request.json_schema is not None:
            instruction = ("Answer with one JSON object only (no prose, no code fence) that fits this JSON schema:\n"
                           + json.dumps(request.json_schema, ensure_ascii=False))
            system = f"{system}\n\n{instruction}" if system else instruction
        # in the order of `messages.create`'s arguments, the order of the body it sends (`post_message` sends these)
        params: dict[str, Any] = {
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": _wire_messages(request.messages),
            "model": self.model,
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                               for t in request.tools]
        if request.temperature is not None and self._send_temperature:
            params["temperature"] = request.temperature
        return params

    def _response(self, message: Any) -> ModelResponse:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            # a 200 from something that is not a Messages API (a web page, another API's JSON)
            raise ModelError(f"anthropic:{self.model}: HTTP 200 but not a Messages answer "
                             f"({not_a_completion(message, 'content')})")
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolRequest] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                thinking.append(block["thinking"])
            elif kind == "tool_use":
                arguments = block.get("input")
                odd = not isinstance(arguments, dict)  # a server's, never Anthropic's: no arguments to call with
                # too deep for the run's records to hold (written as well): said as the model's, called with none
                deep = not odd and deeper_than(arguments)
                calls.append(ToolRequest(id=_plain.text(block.get("id")), name=_plain.text(block.get("name")),
                                         arguments={} if odd or deep else arguments,
                                         unreadable="the arguments were JSON but not an object" if odd else
                                         TOO_DEEP_ARGUMENTS if deep else None,
                                         written=json.dumps(arguments, ensure_ascii=False) if odd else None))
        usage = _plain.mapping(message.get("usage"))
        # servers that speak the Messages API for an open reasoning model may put its thinking in the text
        answer, inline = split_reasoning("".join(texts))
        return ModelResponse(
            text=answer,
            reasoning="\n\n".join(thinking) or inline or "",
            reasoning_in_text=inline is not None,
            tool_calls=calls,
            finish_reason=_plain.text(message.get("stop_reason")) or None,
            usage=Usage(input_tokens=_plain.count(usage.get("input_tokens")),
                        output_tokens=_plain.count(usage.get("output_tokens")),
                        reported="input_tokens" in usage or "output_tokens" in usage),
            provider=self.name,
            model=_plain.text(message.get("model")) or self.model,
        )


def _wire_messages(messages: list[Message]) -> list[dict[str, object]]:
    """Messages as the API wants them: no system turns, tool results inside a user turn, and consecutive turns
    of one role merged (the results of several tool calls must arrive together, in one user turn)."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for turn in wire:
        # a turn of one text block is sent as plain text, the common and most compatible form
        content = turn["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            turn["content"] = content[0]["text"]
    return wire


def _blocks(message: Message) -> list[dict[str, object]]:
    if message.role == "tool":
        block: dict[str, object] = {"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                                     "content": message.content}
        if message.is_error:
            block["is_error"] = True  # the model is told the call failed, as the API asks
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content or not (message.tool_calls or message.files):
        # the API refuses empty text blocks; an empty turn still needs some text
        blocks.append({"type": "text", "text": message.content or "(empty)"})
    blocks.extend(anthropic_block(f) for f in message.files)
    blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls)
    return blocks


def _server_message(exc: anthropic.APIStatusError) -> str:
    message = getattr(exc, "api_message", None)
    if message:
        return str(message)
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if body.get("message"):
            return str(body["message"])
    if isinstance(body, str) and body:
        return body
    return f"HTTP {exc.status_code}"
