"""The SDKs' public `post` for a model call (openai's chat completion, anthropic's message), used only while nothing
instruments the SDK's `create`.

Why: `chat.completions.create` walks its plain-JSON arguments against the SDK's TypedDicts (`async_maybe_transform`:
every message against each of the six message types) and builds a typed `ChatCompletion` that tamesu turns back
into JSON. For tamesu's requests (JSON already, no aliased keys, no dates or files) neither changes a byte on the
wire, yet together they were over half of a simulated user's model call (`bench/model_layers.py`: 2.5 against
1.5 ms per call one at a time; docs/performance.md, issue 28). `messages.create` builds a typed `Message` the same
way, and merges its path into the client's `base_url` on every call. The SDK's client still sends the call: its URL,
auth, headers, timeout, error types and messages are the SDK's own, and the answer is the JSON as it came, which
`create`'s typed answer was turned back into. The URL is given whole, as the SDK would make it from its
`base_url` (`completions_url`, `messages_url`), so it is parsed once a client rather than once a call.

What it must not cost: the ecosystem's view of the calls. An instrumentation (OpenTelemetry's
`opentelemetry-instrumentation-openai-v2`, OpenLLMetry's for both SDKs) wraps `AsyncCompletions.create` or
`AsyncMessages.create`; while the method is not the SDK's own function, every call goes through `create` as before.
The anthropic SDK's own OpenTelemetry span (`anthropic.messages.create`) is named by the options `create` gives
`post`, which the post path gives too. test_model_sdk_post.py and test_model_sdk_post_anthropic.py record both
paths' requests on a local server and compare them (anthropic's byte for byte, and its span);
test_model_sdk_calls.py runs a persona with the openai instrumentation installed and counts a span per call.
"""

from __future__ import annotations

import functools
import importlib
import types
from pathlib import Path
from typing import Any

import httpx2

from tamesu.models._sdk_http import plain


class _Create:
    """One SDK's async `create`: its class, found once, and the SDK's own function, once seen, so the check per
    call is two identity comparisons (an `import` of the class on every call ran the import machinery each time)."""

    def __init__(self, package: str, module: str, name: str) -> None:
        self._package, self._module, self._name = package, module, name
        self._resource: type | None = None
        self._own: object = None

    def resource(self) -> type:
        """The class whose `create` an instrumentation wraps (importing it: the SDKs' clients leave it to their
        first call)."""
        found = self._resource
        if found is None:
            found = self._resource = getattr(importlib.import_module(self._module), self._name)
        return found

    def plain(self) -> bool:
        """True when the class's `create` is the SDK's own function (no instrumentation wraps it)."""
        found = (self._resource or self.resource()).__dict__.get("create")
        if found is not None and found is self._own:
            return True
        # wrapt's wrappers (the OTel and OpenLLMetry instrumentations) are not plain functions; a plain wrapper
        # (functools.wraps) has its code outside the SDK's package
        if type(found) is not types.FunctionType:
            return False
        package = Path(importlib.import_module(self._package).__file__ or "").resolve().parent
        if not Path(found.__code__.co_filename).resolve().is_relative_to(package):
            return False
        self._own = found
        return True


_COMPLETIONS = _Create("openai", "openai.resources.chat.completions", "AsyncCompletions")
_MESSAGES = _Create("anthropic", "anthropic.resources.messages", "AsyncMessages")


def create_is_plain() -> bool:
    """True when `AsyncCompletions.create` is the openai SDK's own function (no instrumentation wraps it)."""
    return _COMPLETIONS.plain()


def messages_create_is_plain() -> bool:
    """True when `AsyncMessages.create` is the anthropic SDK's own function (no instrumentation wraps it)."""
    return _MESSAGES.plain()


def completions_url(sdk: Any) -> str:
    """The URL `sdk.post("/chat/completions")` sends to, made once a client: the SDK merges a relative path into its
    `base_url` (which it keeps ending in a slash) on every call, parsing the whole URL again (`copy_with`, some 220
    calls a model call), where an absolute URL's text is parsed once and kept (httpx2's cache). Not for a client
    that rewrites the path (Azure's: the deployment's path, which it puts in front of `/chat/completions` alone)."""
    base = sdk.base_url
    return str(base.copy_with(raw_path=base.raw_path + b"chat/completions"))


async def post_completion(sdk: Any, url: str, params: dict[str, Any], headers: dict[str, str] | None) -> Any:
    """What `sdk.chat.completions.create(**params, extra_headers=headers)` sends, through the SDK's `post` to `url`
    (`completions_url`, or the path `/chat/completions`); the answer as JSON (a mapping, or the text of a body that
    is not JSON)."""
    # what `create` asks of the client's auth, and every other option at the SDK's own default
    options: dict[str, Any] = {**_defaults(), "security": {"bearer_auth": True}}
    if headers:
        options["headers"] = headers
    # the answer as the SDK's README reads an endpoint it has no type for (`cast_to=httpx2.Response`), then as its
    # `cast_to=object` would: JSON when the server says so, else the text; the SDK's `APIResponse` around it and its
    # parse cast for nothing (some forty calls a model call)
    answer = await sdk.post(url, body=params, cast_to=httpx2.Response, options=options)
    kind = answer.headers.get("content-type", "*").split(";", 1)[0]
    return answer.json() if kind.endswith("json") else answer.text


@functools.cache
def _defaults() -> dict[str, Any]:
    """The options of a request (`FinalRequestOptions`) a chat completion leaves at their defaults, given as those
    defaults: the SDK makes an option not given from its default by a deep copy (pydantic's `model_construct`:
    some sixty calls a model call), the same value it is handed here. test_model_sdk_post.py holds each to the
    SDK's default."""
    from openai import NOT_GIVEN

    return {"headers": NOT_GIVEN, "params": {}, "max_retries": NOT_GIVEN, "timeout": NOT_GIVEN,
            "idempotency_key": None, "follow_redirects": None, "synthesize_event_and_data": None,
            "stream_mode": "legacy", "extra_json": None, "post_parser": NOT_GIVEN}


def messages_url(sdk: Any, model: str) -> str | None:
    """The URL `sdk.messages.create(model=model, ...)` posts to, made once a client (as `completions_url`); None
    where `create` does something of its own for this client and model, so the call goes through it: a client at
    the SDK's default timeout (`create` works out a longer one from `max_tokens`; tamesu's clients are given the
    model's) or a model the SDK warns is deprecated."""
    from anthropic._constants import DEFAULT_TIMEOUT
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    if sdk.timeout == DEFAULT_TIMEOUT or model in DEPRECATED_MODELS:
        return None
    base = sdk.base_url
    return str(base.copy_with(raw_path=base.raw_path + b"v1/messages"))


def create_timeout(sdk: Any) -> Any:
    """The `timeout` a call names: the client's own. The anthropic SDK (2.17) writes a call's timeout into its
    `x-stainless-timeout` header as it is given, and one not given went out as `NOT_GIVEN` on every call of a client
    with a timeout of its own; named, it is the seconds the call may take (its read bound), as the header means.
    Not named for a client at the SDK's default timeout: `create` works out a longer one from `max_tokens` then,
    and names it."""
    from anthropic import NOT_GIVEN
    from anthropic._constants import DEFAULT_TIMEOUT

    return NOT_GIVEN if sdk.timeout == DEFAULT_TIMEOUT else sdk.timeout


async def post_message(sdk: Any, url: str, params: dict[str, Any], extra: dict[str, Any] | None,
                       headers: dict[str, str] | None) -> Any:
    """What `sdk.messages.create(**params, extra_body=extra, extra_headers=headers)` sends, through the SDK's `post`
    to `url` (`messages_url`); the answer as `plain` makes `create`'s: JSON (a mapping), or the text of a body that
    is not JSON. `params` in the order of `create`'s arguments, which orders the body it sends."""
    defaults = _message_defaults()
    # the headers `create` removes (`omit`: a suite's default of those names is not sent), then the call's own
    options: dict[str, Any] = {**defaults, "headers": {**defaults["headers"], **(headers or {})},
                               "timeout": sdk.timeout}  # `create_timeout`: the client's, named
    if extra is not None:
        options["extra_json"] = extra
    # `post` is told the call returns a `Message`, as `create` tells it (the SDK's own span of the call reads the
    # usage and content of a `Message`), and the `Message` it builds is the JSON as it came: the SDK's hook for a type
    # that builds itself (`build`), where `Message` was constructed from the JSON (some 600 calls a model call)
    # and turned back into it (`plain`, which reads a `Message` the SDK made otherwise)
    return plain(await sdk.post(url, body=params, cast_to=_message_as_json(), options=options))


@functools.cache
def _message_as_json() -> type:
    """The SDK's `Message` whose answer is the JSON it was built from (a mapping, or what else the body held)."""
    from anthropic.types import Message

    class MessageAsJson(Message):
        @classmethod
        def build(cls, *, response: httpx2.Response, data: object) -> object:
            del response
            return data

    return MessageAsJson


@functools.cache
def _message_defaults() -> dict[str, Any]:
    """The options of a request (`FinalRequestOptions`) `messages.create` gives `post`: the headers it removes
    unless given (its arguments `user_profile_id` and `workspace_id`), the names of its span (the anthropic SDK's own
    OpenTelemetry span of the call), and every option it leaves open at its default (as `_defaults`).
    test_model_sdk_post_anthropic.py holds them to what `create` gives."""
    from anthropic import NOT_GIVEN, omit
    from anthropic.lib._tracing._api_call import messages_create_request_attributes

    return {"headers": {"anthropic-user-profile-id": omit, "anthropic-workspace-id": omit}, "params": {},
            "max_retries": NOT_GIVEN, "timeout": NOT_GIVEN, "idempotency_key": None, "post_parser": NOT_GIVEN,
            "follow_redirects": None, "qualifiers": None, "span_name": "anthropic.messages.create",
            "span_route": "/v1/messages", "span_query_params": (), "span_content_query_params": (),
            "span_attributes": messages_create_request_attributes, "span_created_id": None, "extra_json": None}
