"""`models/_sdk_post.py` for the anthropic SDK: while nothing instruments `AsyncMessages.create`, a message goes
through the SDK's `post` with the same request. Both paths' requests, recorded on a local server, are the same
byte for byte (method, path, query, every header, the body); the options `post` is given are those `create` gives
it (so the SDK's own OpenTelemetry span of the call is the same); their answers and failures read the same; and
wrapping `create` (wrapt, as OpenLLMetry's instrumentation does, or a plain decorator) sends every call back
through `create`, as does a client or a model for which `create` does something of its own."""

from __future__ import annotations

import base64
import functools
import json
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import wrapt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import tamesu.models.anthropic as provider_module
from sdk_groups import IN_PROCESS_SDKS
from tamesu.models import _sdk_post
from tamesu.models.anthropic import AnthropicProvider
from tamesu.models.base import Message, MessageFile, ModelError, ModelRequest, ToolRequest, ToolSpec
from tamesu.net.serve import ThreadServer

pytestmark = IN_PROCESS_SDKS  # every test here calls the anthropic SDK in this process
KEY = "sk-ant-test-0123456789"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
REQUESTS = [
    ModelRequest(purpose="simulator", messages=[Message(role="system", content="You are Ada."),
                                                Message(role="user", content="hé, where is my order?")],
                 json_schema={"type": "object", "properties": {"input": {"type": "string"}}}, temperature=0.3,
                 max_tokens=200, headers={"traceparent": "00-ab-cd-01"}),
    ModelRequest(purpose="target", messages=[
        Message(role="user", content="weather?", files=[MessageFile(name="sky.png", mime="image/png", data=PNG)]),
        Message(role="assistant", tool_calls=[ToolRequest(id="toolu_1", name="weather", arguments={"city": "Oslo"})]),
        Message(role="tool", tool_call_id="toolu_1", content='{"c": 3}', name="weather", is_error=True)],
        tools=[ToolSpec(name="weather", description="the weather", parameters={
            "type": "object", "properties": {"city": {"type": "string"}}})]),
    ModelRequest(purpose="judge", messages=[Message(role="user", content="grade this")]),
]
ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
          "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "hi"},
                      {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Rome"}}],
          "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 0}}


class Recorder:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.answer: Callable[[], Response] = lambda: JSONResponse(ANSWER)

    async def messages(self, request: Request) -> Response:
        self.seen.append({"method": request.method, "path": request.url.path, "query": request.url.query,
                          "body": await request.body(), "headers": list(request.headers.raw)})
        return self.answer()


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    server = ThreadServer(Starlette(routes=[Route("/v1/messages", recorder.messages, methods=["POST"])])).start()
    yield recorder, server.url
    server.stop()


def _provider(base_url: str, model: str = "claude-test") -> AnthropicProvider:
    return AnthropicProvider(model, api_key=KEY, base_url=base_url, headers={"X-Team": "qa"})


def _read(said: Exception | Any) -> Any:
    if isinstance(said, ModelError):
        return (str(said), said.retryable, said.retry_after, said.status)
    return said.model_dump()


async def _both(base_url: str, request: ModelRequest, monkeypatch: pytest.MonkeyPatch,
                calls: int = 1) -> list[Any]:
    """What `calls` calls of the post path read (an answer, or the error), then those of `create`, each path on a
    provider of its own."""
    said: list[Any] = []
    for plain_create in (True, False):
        monkeypatch.setattr(provider_module, "messages_create_is_plain", lambda plain=plain_create: plain)
        provider = _provider(base_url)
        try:
            for _ in range(calls):
                try:
                    said.append(_read(await provider.generate(request)))
                except ModelError as exc:
                    said.append(_read(exc))
        finally:
            await provider.aclose()
    return said


@pytest.mark.parametrize("request_number", range(len(REQUESTS)))
async def test_both_paths_send_the_same_bytes_and_read_the_same_answer(
        recorder: tuple[Recorder, str], request_number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder
    posted, created = await _both(base_url, REQUESTS[request_number], monkeypatch)
    assert posted == created and posted["text"] == "hi" and posted["tool_calls"][0]["arguments"] == {"city": "Rome"}
    assert len(server.seen) == 2
    assert server.seen[0] == server.seen[1]  # the body's bytes, and every header in its order and case
    headers = {name.decode(): value.decode() for name, value in server.seen[0]["headers"]}
    assert headers["authorization"] == f"Bearer {KEY}" and headers["x-team"] == "qa" and headers["anthropic-version"]
    assert json.loads(server.seen[0]["body"])["model"] == "claude-test"


@pytest.mark.parametrize("answer", [
    lambda: JSONResponse({"content": [{"type": "text", "text": "hé"}], "extra": {"kept": [1, None]}}),
    lambda: Response(json.dumps(ANSWER), media_type="text/plain; charset=utf-8"),  # JSON with another type
    lambda: Response("<html>login</html>", media_type="text/html"),
    lambda: Response("null", media_type="application/json"),
    lambda: Response('["a list"]', media_type="application/json"),
    lambda: JSONResponse({"content": [{"type": "a_block_of_tomorrow", "x": 1}, {"type": "text", "text": 3}]})])
async def test_an_answer_of_any_shape_reads_the_same_on_both_paths(
        recorder: tuple[Recorder, str], answer: Callable[[], Response], monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder
    server.answer = answer
    posted, created = await _both(base_url, REQUESTS[2], monkeypatch)
    assert posted == created


@pytest.mark.parametrize("code", [400, 401, 404, 429, 500, 529])
async def test_a_failure_reads_the_same_on_both_paths(recorder: tuple[Recorder, str], code: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder
    server.answer = lambda: JSONResponse({"type": "error", "error": {"type": "x", "message": f"refused {KEY}"}},
                                         status_code=code, headers={"retry-after": "3", "x-should-retry": "true"})
    posted, created = await _both(base_url, REQUESTS[2], monkeypatch)
    assert isinstance(posted, tuple) and posted == created and f"HTTP {code}" in posted[0]
    assert KEY not in posted[0]


async def test_a_refused_temperature_is_adapted_alike_on_both_paths(recorder: tuple[Recorder, str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = recorder

    def answer() -> Response:
        if b'"temperature"' in server.seen[-1]["body"]:
            return JSONResponse({"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": "temperature: not supported"}}, 400)
        return JSONResponse(ANSWER)

    server.answer = answer
    said = await _both(base_url, REQUESTS[0], monkeypatch, calls=2)
    assert said[:2] == said[2:]
    assert said[0]["adapted"] == ["the server refused temperature: sent without it from now on"]
    bodies = [seen["body"] for seen in server.seen]
    assert bodies[:3] == bodies[3:] and [b'"temperature"' in body for body in bodies] == [True, False, False] * 2


def test_a_wrapped_create_is_seen() -> None:
    from anthropic.resources.messages import AsyncMessages

    assert _sdk_post.messages_create_is_plain()
    own = AsyncMessages.__dict__["create"]
    try:
        # as OpenLLMetry's opentelemetry-instrumentation-anthropic wraps it
        wrapt.wrap_function_wrapper(AsyncMessages, "create", lambda wrapped, instance, args, kwargs:
                                    wrapped(*args, **kwargs))
        assert not _sdk_post.messages_create_is_plain()

        @functools.wraps(own)
        async def decorated(*args: Any, **kwargs: Any) -> Any:
            return await own(*args, **kwargs)

        AsyncMessages.create = decorated  # type: ignore[method-assign]
        assert not _sdk_post.messages_create_is_plain()
    finally:
        AsyncMessages.create = own  # type: ignore[method-assign]
    assert _sdk_post.messages_create_is_plain()


async def test_a_wrapped_create_sees_every_call(recorder: tuple[Recorder, str]) -> None:
    from anthropic.resources.messages import AsyncMessages

    server, base_url = recorder
    own = AsyncMessages.__dict__["create"]
    calls: list[str] = []

    async def counted(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append(kwargs["model"])
        return await wrapped(*args, **kwargs)

    provider = _provider(base_url)
    try:
        await provider.generate(REQUESTS[0])  # before: the post path, nothing to see
        wrapt.wrap_function_wrapper(AsyncMessages, "create", counted)
        for request in REQUESTS:
            await provider.generate(request)
    finally:
        AsyncMessages.create = own  # type: ignore[method-assign]
        await provider.aclose()
    assert calls == ["claude-test"] * len(REQUESTS) and len(server.seen) == 1 + len(REQUESTS)


async def test_a_model_the_sdk_warns_of_goes_through_create(recorder: tuple[Recorder, str]) -> None:
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    server, base_url = recorder
    model = sorted(DEPRECATED_MODELS)[0]
    provider = _provider(base_url, model)
    try:
        with pytest.warns(DeprecationWarning, match="deprecated"):  # create's own warning, which post never says
            await provider.generate(REQUESTS[2])
    finally:
        await provider.aclose()
    assert json.loads(server.seen[0]["body"])["model"] == model


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:9", "http://127.0.0.1:9/", "https://gateway.example/anthropic",
                                      "http://127.0.0.1:9/proxy?tenant=a b"])
async def test_the_post_path_sends_to_the_url_the_sdk_makes_of_its_path(base_url: str) -> None:
    import anthropic

    sdk = anthropic.AsyncAnthropic(api_key="k", base_url=base_url, timeout=30)
    default = anthropic.AsyncAnthropic(api_key="k", base_url=base_url)
    try:
        assert _sdk_post.messages_url(sdk, "claude-test") == str(sdk._prepare_url("/v1/messages"))
        # at the SDK's default timeout, create works out a longer one from max_tokens: left to create
        assert _sdk_post.messages_url(default, "claude-test") is None
    finally:
        await sdk.close()
        await default.close()


async def test_the_post_paths_url_is_made_once_a_client(recorder: tuple[Recorder, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2

    server, base_url = recorder
    made: list[object] = []
    copy_with = httpx2.URL.copy_with
    monkeypatch.setattr(httpx2.URL, "copy_with", lambda url, **kw: made.append(kw) or copy_with(url, **kw))
    provider = _provider(base_url)
    try:
        await provider.generate(REQUESTS[2])  # the client made (its base_url with its slash), and the URL
        first = len(made)
        for _ in range(2):
            await provider.generate(REQUESTS[2])
    finally:
        await provider.aclose()
    assert len(made) == first  # create merged its path into the base_url on every call
    assert [seen["path"] for seen in server.seen] == ["/v1/messages"] * 3


async def test_post_is_given_the_options_create_gives_it_and_none_is_copied_from_its_default(
        recorder: tuple[Recorder, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from anthropic import AsyncAnthropic, Omit
    from anthropic._models import FinalRequestOptions
    from pydantic.fields import FieldInfo

    _, base_url = recorder
    given: list[FinalRequestOptions] = []
    request = AsyncAnthropic.request
    monkeypatch.setattr(AsyncAnthropic, "request", lambda self, cast_to, options, **kw: (
        given.append(options), request(self, cast_to, options, **kw))[1])
    theirs = set(map(id, FinalRequestOptions.model_fields.values()))
    defaulted: list[object] = []
    get_default = FieldInfo.get_default
    monkeypatch.setattr(FieldInfo, "get_default", lambda field, *args, **kwargs: (
        defaulted.append((field, len(given))) if id(field) in theirs else None) or get_default(field, *args, **kwargs))
    await _both(base_url, REQUESTS[0], monkeypatch)
    posted, created = given
    assert [seen for seen in defaulted if seen[1] == 0] == []  # the post path's options, all given

    def fields(options: FinalRequestOptions) -> dict[str, str]:
        return {name: repr(getattr(options, name)) for name in FinalRequestOptions.model_fields}

    body = {key: value for key, value in created.json_data.items() if not isinstance(value, Omit)}  # type: ignore[union-attr]
    assert list(body) == list(posted.json_data) and body == posted.json_data  # type: ignore[arg-type]
    assert {**fields(posted), "json_data": "", "url": ""} == {**fields(created), "json_data": "", "url": ""}
    assert posted.span_name == "anthropic.messages.create" and posted.extra_json == {"temperature": 0.3}


async def test_the_sdks_own_span_of_a_call_is_the_same_on_both_paths(recorder: tuple[Recorder, str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    server, base_url = recorder
    spans: list[Any] = []
    for plain_create in (True, False):
        monkeypatch.setattr(provider_module, "messages_create_is_plain", lambda plain=plain_create: plain)
        exporter = InMemorySpanExporter()
        tracing = TracerProvider()
        tracing.add_span_processor(SimpleSpanProcessor(exporter))
        provider = _provider(base_url)
        # the client's `open_telemetry` option (its content too: the messages and the answer), set as its
        # constructor sets it
        provider._sdk()._set_open_telemetry({"tracer_provider": tracing, "traces": {"content_mode": "content"}})
        try:
            await provider.generate(REQUESTS[2])  # no traceparent of the turn's: the SDK's span sends its own
        finally:
            await provider.aclose()
            tracing.shutdown()
        [span] = exporter.get_finished_spans()
        spans.append((span.name, span.kind, dict(span.attributes or {})))
    posted, created = spans
    assert posted == created and posted[0] == "anthropic.messages.create"
    attributes = posted[2]
    assert attributes["gen_ai.request.model"] == "claude-test" and attributes["url.path"] == "/v1/messages"
    assert attributes["gen_ai.usage.input_tokens"] == 5 and attributes["gen_ai.response.id"] == "msg_1"
    assert "Rome" in str(attributes["gen_ai.output.messages"])
    assert "grade this" in str(attributes["gen_ai.input.messages"])
    # the span's trace context went with both requests
    assert all(b"traceparent" in dict(seen["headers"]) for seen in server.seen)


@pytest.mark.parametrize("plain_create", [True, False])
async def test_a_call_says_its_timeout_in_seconds_on_either_path(recorder: tuple[Recorder, str], plain_create: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The anthropic SDK 2.17 writes a call's timeout into `x-stainless-timeout` as given: one not given went out as
    `NOT_GIVEN`, on the post path and through `create` (a model the SDK warns of takes it too)."""
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    server, base_url = recorder
    monkeypatch.setattr(provider_module, "messages_create_is_plain", lambda: plain_create)
    for model in ("claude-test", sorted(DEPRECATED_MODELS)[0]):
        provider = AnthropicProvider(model, api_key=KEY, base_url=base_url, timeout=42.5)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # create's own, for the model it warns of
                await provider.generate(REQUESTS[2])
        finally:
            await provider.aclose()
    assert len(server.seen) == 2
    for seen in server.seen:
        headers = {name.decode(): value.decode() for name, value in seen["headers"]}
        assert headers["x-stainless-timeout"] == "42.5" and headers["x-stainless-read-timeout"] == "42.5", headers
