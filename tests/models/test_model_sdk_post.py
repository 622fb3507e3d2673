"""`models/_sdk_post.py`: while nothing instruments the openai SDK's `create`, a chat completion goes through the
SDK's `post` with the same request. Both paths' requests, recorded on a local server, are the same (method, path,
query, every header but the SDK's per-call ones, the body's JSON: `create` orders its keys by its signature);
their answers and their failures read the
same; and wrapping `create` (wrapt, as the OpenTelemetry instrumentations do, or a plain decorator) sends every
call back through `create`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import wrapt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import tamesu.models.openai as provider_module
from sdk_groups import IN_PROCESS_SDKS
from tamesu.models import _sdk_post
from tamesu.models.base import Message, ModelError, ModelRequest, ToolRequest, ToolSpec
from tamesu.models.openai import OpenAIProvider
from tamesu.net.serve import ThreadServer

pytestmark = IN_PROCESS_SDKS  # every test here calls the openai SDK in this process
SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}, "when": {"format": "date-time"}},
          "required": ["input"]}
REQUESTS = [
    ModelRequest(purpose="simulator", messages=[Message(role="system", content="You are Ada."),
                                                Message(role="user", content="hé, where is my order?")],
                 json_schema=SCHEMA, temperature=0.3, max_tokens=200, seed=7, headers={"traceparent": "00-ab-cd-01"}),
    ModelRequest(purpose="target", messages=[
        Message(role="user", content="weather?"),
        Message(role="assistant", tool_calls=[ToolRequest(id="call_1", name="weather", arguments={"city": "Oslo"})]),
        Message(role="tool", tool_call_id="call_1", content='{"c": 3}', name="weather")],
        tools=[ToolSpec(name="weather", description="the weather", parameters={
            "type": "object", "properties": {"city": {"type": "string"}}})]),
]
VOLATILE = {"x-stainless-retry-count", "x-stainless-read-timeout", "content-length"}
"""The SDK's per-call headers (a count and a timeout it sets on each request), and the length of a body whose keys
`create` orders by its signature (the body's JSON is compared whole)."""


class Recorder:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.answer: Callable[[], Response] = lambda: JSONResponse({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

    async def chat(self, request: Request) -> Response:
        self.seen.append({"method": request.method, "path": request.url.path, "query": request.url.query,
                          "body": json.loads(await request.body()),
                          "headers": sorted((k, v) for k, v in request.headers.items() if k not in VOLATILE)})
        return self.answer()


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    server = ThreadServer(Starlette(routes=[Route("/v1/chat/completions", recorder.chat, methods=["POST"])])).start()
    yield recorder, f"{server.url}/v1"
    server.stop()


def _provider(base_url: str) -> OpenAIProvider:
    return OpenAIProvider("m", api_key="sk-test-0123456789", base_url=base_url, headers={"X-Team": "qa"})


async def _both(base_url: str, request: ModelRequest, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The answer (or the error's text) of the post path, then of `create`, each on a provider of its own."""
    said: list[Any] = []
    for plain_create in (True, False):
        monkeypatch.setattr(provider_module, "create_is_plain", lambda plain=plain_create: plain)
        provider = _provider(base_url)
        try:
            said.append((await provider.generate(request)).model_dump())
        except ModelError as exc:
            said.append(str(exc))
        finally:
            await provider.aclose()
    return said


@pytest.mark.parametrize("request_number", range(len(REQUESTS)))
async def test_both_paths_send_the_same_request_and_read_the_same_answer(
        recorder: tuple[Recorder, str], request_number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder
    posted, created = await _both(base_url, REQUESTS[request_number], monkeypatch)
    assert posted == created
    assert len(server.seen) == 2
    assert server.seen[0] == server.seen[1]
    headers = dict(server.seen[0]["headers"])
    assert headers["authorization"] == "Bearer sk-test-0123456789" and headers["x-team"] == "qa"
    assert server.seen[0]["body"]["model"] == "m"


@pytest.mark.parametrize("code", [400, 401, 429, 500])
async def test_a_failure_reads_the_same_on_both_paths(recorder: tuple[Recorder, str], code: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder
    server.answer = lambda: JSONResponse({"error": {"message": f"refused sk-test-0123456789 ({code})",
                                                    "type": "x", "code": "x"}},
                                         status_code=code, headers={"retry-after": "3"})
    request = REQUESTS[1]  # no structured output: a 400 is not adapted away
    posted, created = await _both(base_url, request, monkeypatch)
    assert isinstance(posted, str) and posted == created
    assert "sk-test-0123456789" not in posted


async def test_a_body_that_is_not_json_reads_the_same(recorder: tuple[Recorder, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder
    server.answer = lambda: Response("<html>login</html>", media_type="text/html")
    posted, created = await _both(base_url, REQUESTS[1], monkeypatch)
    assert isinstance(posted, str) and posted == created and "HTTP 200 but not a chat completion" in posted


def test_a_wrapped_create_is_seen() -> None:
    from openai.resources.chat.completions import AsyncCompletions

    assert _sdk_post.create_is_plain()
    own = AsyncCompletions.__dict__["create"]
    try:
        # as opentelemetry-instrumentation-openai-v2 and OpenLLMetry wrap it
        wrapt.wrap_function_wrapper(AsyncCompletions, "create", lambda wrapped, instance, args, kwargs:
                                    wrapped(*args, **kwargs))
        assert not _sdk_post.create_is_plain()

        @functools.wraps(own)
        async def decorated(*args: Any, **kwargs: Any) -> Any:
            return await own(*args, **kwargs)

        AsyncCompletions.create = decorated  # type: ignore[method-assign]
        assert not _sdk_post.create_is_plain()
    finally:
        AsyncCompletions.create = own  # type: ignore[method-assign]
    assert _sdk_post.create_is_plain()


@pytest.mark.parametrize("check", [_sdk_post.create_is_plain, _sdk_post.messages_create_is_plain])
def test_the_check_finds_the_class_once_and_imports_nothing_a_call(check: Callable[[], bool],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    assert check()  # the class found (and the SDK's resource imported) once
    imported: list[str] = []
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *args, **kwargs: (
        imported.append(name), real(name, *args, **kwargs))[1])
    for _ in range(3):
        assert check()
    assert imported == []  # an `import` on every call ran the import machinery each time (some ten calls)


async def test_a_wrapped_create_sees_every_call(recorder: tuple[Recorder, str]) -> None:
    from openai.resources.chat.completions import AsyncCompletions

    _, base_url = recorder
    own = AsyncCompletions.__dict__["create"]
    calls: list[str] = []

    async def counted(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append(kwargs["model"])
        return await wrapped(*args, **kwargs)

    provider = _provider(base_url)
    try:
        await provider.generate(REQUESTS[0])  # before: the post path, nothing to see
        wrapt.wrap_function_wrapper(AsyncCompletions, "create", counted)
        for request in REQUESTS:
            await provider.generate(request)
    finally:
        AsyncCompletions.create = own  # type: ignore[method-assign]
        await provider.aclose()
    assert calls == ["m", "m"]


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/", "http://127.0.0.1:9",
                                      "https://models.example/openai/v1", "http://127.0.0.1:9/v1?tenant=a b"])
async def test_the_post_path_sends_to_the_url_the_sdk_makes_of_its_path(base_url: str) -> None:
    import openai

    sdk = openai.AsyncOpenAI(api_key="k", base_url=base_url)
    try:
        assert _sdk_post.completions_url(sdk) == str(sdk._prepare_url("/chat/completions"))
    finally:
        await sdk.close()


async def test_the_post_paths_url_is_made_once_a_client(recorder: tuple[Recorder, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2

    server, base_url = recorder
    made: list[object] = []
    copy_with = httpx2.URL.copy_with
    monkeypatch.setattr(httpx2.URL, "copy_with", lambda url, **kw: made.append(kw) or copy_with(url, **kw))
    provider = _provider(base_url)
    try:
        await provider.generate(REQUESTS[1])  # the client made (its base_url with its slash), and the URL
        first = len(made)
        for _ in range(2):
            await provider.generate(REQUESTS[1])
    finally:
        await provider.aclose()
    assert len(made) == first  # the SDK merged the path into its base_url on every call
    assert [seen["path"] for seen in server.seen] == ["/v1/chat/completions"] * 3


def test_the_options_a_call_leaves_open_are_given_as_the_sdks_defaults() -> None:
    from openai._models import FinalRequestOptions  # the SDK's own: what its `post` makes of the options

    given = _sdk_post._defaults()
    fields = FinalRequestOptions.model_fields
    for name, value in given.items():
        default = fields[name].get_default(call_default_factory=True)
        assert type(value) is type(default) and (value == default or type(value).__name__ == "NotGiven"), name
    made = FinalRequestOptions.construct(method="post", url="/x", json_data={"a": 1}, **given)
    left = FinalRequestOptions.construct(method="post", url="/x", json_data={"a": 1})
    assert {name: repr(getattr(made, name)) for name in fields} == {name: repr(getattr(left, name)) for name in fields}


async def test_the_post_path_leaves_no_option_to_be_copied_from_its_default(
        recorder: tuple[Recorder, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from openai._models import FinalRequestOptions
    from pydantic.fields import FieldInfo

    _, base_url = recorder
    theirs = set(map(id, FinalRequestOptions.model_fields.values()))
    defaulted: list[object] = []
    get_default = FieldInfo.get_default
    monkeypatch.setattr(FieldInfo, "get_default", lambda field, *args, **kwargs: (
        defaulted.append(field) if id(field) in theirs else None) or get_default(field, *args, **kwargs))
    provider = _provider(base_url)
    try:
        await provider.generate(REQUESTS[0])
    finally:
        await provider.aclose()
    assert defaulted == []


@pytest.mark.parametrize("answer", [
    lambda: JSONResponse({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}),
    lambda: Response('{"choices": [{"message": {"content": "hé"}}]}', media_type="application/vnd.api+json"),
    lambda: Response("null", media_type="application/json"),
    lambda: Response('{"choices": []}', media_type="text/plain; charset=utf-8")])
async def test_the_post_path_reads_the_answer_as_the_sdks_cast_to_object_without_its_response_class(
        recorder: tuple[Recorder, str], monkeypatch: pytest.MonkeyPatch, answer: Callable[[], Response]) -> None:
    import openai
    from openai._response import AsyncAPIResponse

    server, base_url = recorder
    server.answer = answer
    sdk = openai.AsyncOpenAI(api_key="k", base_url=base_url, max_retries=0)
    try:
        params = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        theirs = await sdk.post("/chat/completions", body=params, cast_to=object)
        monkeypatch.setattr(AsyncAPIResponse, "parse", lambda *args, **kwargs: pytest.fail("parsed by the SDK"))
        ours = await _sdk_post.post_completion(sdk, _sdk_post.completions_url(sdk), params, None)
    finally:
        await sdk.close()
    assert ours == theirs and type(ours) is type(theirs)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_a_models_timeout_reaches_its_sdk_as_a_timeout_and_is_sent_as_before(
        shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2

    from tamesu.models.anthropic import AnthropicProvider

    seen: list[dict[str, str]] = []

    async def answer(request: Request) -> Response:
        seen.append(dict(request.headers))
        if shape == "anthropic":
            return JSONResponse({"id": "m", "type": "message", "role": "assistant", "model": "m",
                                 "stop_reason": "end_turn", "content": [{"type": "text", "text": "hi"}],
                                 "usage": {"input_tokens": 1, "output_tokens": 1}})
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})

    server = ThreadServer(Starlette(routes=[Route("/v1/chat/completions", answer, methods=["POST"]),
                                            Route("/v1/messages", answer, methods=["POST"])])).start()
    provider: Any = (OpenAIProvider("m", api_key="k", base_url=f"{server.url}/v1", timeout=42.5) if shape == "openai"
                     else AnthropicProvider("m", api_key="k", base_url=server.url, timeout=42.5))
    timeouts: list[object] = []
    transport = type(provider._sdk()._client._transport)
    handle = transport.handle_async_request
    monkeypatch.setattr(transport, "handle_async_request", lambda self, request: (
        timeouts.append(request.extensions["timeout"]), handle(self, request))[1])
    try:
        assert (await provider.generate(REQUESTS[1])).text == "hi"
        sdk_timeout = provider._sdk().timeout
    finally:
        await provider.aclose()
        server.stop()
    # a Timeout, which httpx2 copies, where a number was checked against SupportsFloat and made one on every call
    assert isinstance(sdk_timeout, httpx2.Timeout)
    assert seen[0]["x-stainless-read-timeout"] == "42.5"
    assert timeouts == [{"connect": 42.5, "read": 42.5, "write": 42.5, "pool": 42.5}]
