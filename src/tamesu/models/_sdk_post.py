"""The OpenAI SDK's public `post` for a chat completion, used only while nothing instruments `create`.

Why: `chat.completions.create` walks its plain-JSON arguments against the SDK's TypedDicts (`async_maybe_transform`:
every message against each of the six message types) and builds a typed `ChatCompletion` that tamesu turns back
into JSON. For tamesu's requests (JSON already, no aliased keys, no dates or files) neither changes a byte on the
wire, yet together they were over half of a simulated user's model call (`bench/model_layers.py`: 2.5 against
1.5 ms per call one at a time; docs/performance.md, issue 28). The SDK's client still sends the call: its URL,
auth, headers, timeout, error types and messages are the SDK's own, and the answer is read as its `cast_to=object`
reads it: the JSON as it came. The URL is given whole, as the SDK would make it from its `base_url`
(`completions_url`), so it is parsed once a client rather than once a call.

What it must not cost: the ecosystem's view of the calls. An instrumentation (OpenTelemetry's
`opentelemetry-instrumentation-openai-v2`, OpenLLMetry) wraps `AsyncCompletions.create`; while the method is not
the SDK's own function, every call goes through `create` as before. test_model_sdk_post.py records both paths'
requests on a local server and compares them byte for byte; test_model_sdk_calls.py runs a persona with the
instrumentation installed and counts a span per call.
"""

from __future__ import annotations

import functools
import importlib
import types
from pathlib import Path
from typing import Any

import httpx2


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


def create_is_plain() -> bool:
    """True when `AsyncCompletions.create` is the openai SDK's own function (no instrumentation wraps it)."""
    return _COMPLETIONS.plain()


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
