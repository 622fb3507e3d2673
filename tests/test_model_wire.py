"""The request tamesu builds itself (a model's base URL known: `known_shape` in each provider) against the one the
installed SDK sends for the same settings, both recorded by a local server: URL, method, body bytes, auth, the
API version and the suite's headers are the same (the SDK's platform headers, `x-stainless-*`, and its user
agent are left out on purpose). An SDK upgrade that changes its wire fails here instead of silently diverging."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.models import anthropic as anthropic_provider
from tamesu.models import openai as openai_provider
from tamesu.models._thin import SDK_CLIENT_DEFAULTS, USER_AGENT, transport_client
from tamesu.models.base import Message, ModelRequest, ToolSpec
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
KEY = "sk-wire-0123456789"


@dataclass
class Seen:
    method: str
    target: str
    """The path and query, as sent."""
    body: bytes
    headers: list[tuple[str, str]]


class Recorder:
    """Answers any POST as a chat completion or a Messages answer, and keeps the request as it came."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.app = Starlette(routes=[Route("/{path:path}", self._answer, methods=["POST"])])

    async def _answer(self, request: Request) -> JSONResponse:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        self.seen.append(Seen(request.method, target, await request.body(),
                              [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]))
        if request.url.path.endswith("/chat/completions"):
            return JSONResponse({"id": "c1", "object": "chat.completion", "model": "m", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        return JSONResponse({"id": "m1", "type": "message", "role": "assistant", "model": "m",
                             "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                             "usage": {"input_tokens": 1, "output_tokens": 1}})


def request() -> ModelRequest:
    return ModelRequest(
        purpose="simulator", temperature=0.5, max_tokens=200,
        messages=[Message(role="system", content="You are Ada, brief."),
                  Message(role="user", content="Où est ma commande ? \u2603")],
        json_schema={"title": "Turn", "type": "object", "properties": {"input": {"type": "string"}}},
        tools=[ToolSpec(name="lookup", description="Look an order up",
                        parameters={"type": "object", "properties": {"id": {"type": "string"}}})])


def compared(seen: Seen) -> tuple[str, str, bytes, list[tuple[str, str]]]:
    headers = sorted((k.lower(), v) for k, v in seen.headers
                     if not k.lower().startswith("x-stainless-") and k.lower() != "user-agent")
    return seen.method, seen.target, seen.body, headers


# (base URL below the server's, or None for the environment's; the suite's headers; environment variables)
OPENAI_CASES = [
    ("/v1", {"X-Suite": "kept"}, {}),
    ("/proxy/openai/v1/", {"User-Agent": "suite-agent", "authorization": "Token from-the-suite",
                           "Accept": "application/json; q=1"}, {}),
    (None, {}, {"OPENAI_BASE_URL": "/env/v1", "OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj-1"}),
]
ANTHROPIC_CASES = [
    ("", {"X-Suite": "kept"}, {}),
    ("/gateway/", {"anthropic-version": "2023-06-01", "anthropic-beta": "tools-1", "User-Agent": "suite-agent"},
     {}),
    (None, {}, {"ANTHROPIC_BASE_URL": "/env"}),
]


def configured(url: str, below: str | None, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str | None:
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS",
                 "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, url + value if name.endswith("_BASE_URL") else value)
    return None if below is None else url + below


@pytest.mark.parametrize("case", range(len(OPENAI_CASES)))
async def test_the_openai_request_tamesu_builds_is_the_sdks(serve: Serve, case: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    below, headers, env = OPENAI_CASES[case]
    recorder = Recorder()
    base_url = configured(serve(recorder.app).url, below, env, monkeypatch)
    model = openai_provider.OpenAIProvider("m", api_key=KEY, base_url=base_url, headers=headers)
    assert model._thin.shape is not None, "tamesu should build this request itself"
    sdk = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0, default_headers=headers or None,
                             http_client=transport_client())
    try:
        assert (await model.generate(request())).text == "hi"
        # what tamesu sent through the SDK before (its public `post`, as `create` asks for the key)...
        await sdk.post("/chat/completions", cast_to=object, body=model._params(request()),
                       options={"security": {"bearer_auth": True}})
        # ...and `create` itself, which orders the body's keys its own way
        await sdk.chat.completions.create(**model._params(request()))
    finally:
        await model.aclose()
        await sdk.close()
    ours, theirs, created = recorder.seen
    assert compared(ours) == compared(theirs)
    assert json.loads(ours.body) == json.loads(created.body)
    assert compared(ours)[3] == compared(created)[3] and ours.target == created.target
    assert dict((k.lower(), v) for k, v in ours.headers)["user-agent"] == headers.get("User-Agent", USER_AGENT)
    assert b"\\u2603" not in ours.body and "\u2603".encode() in ours.body  # UTF-8, as the SDK encodes it


@pytest.mark.parametrize("case", range(len(ANTHROPIC_CASES)))
async def test_the_anthropic_request_tamesu_builds_is_the_sdks(serve: Serve, case: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    below, headers, env = ANTHROPIC_CASES[case]
    recorder = Recorder()
    base_url = configured(serve(recorder.app).url, below, env, monkeypatch)
    model = anthropic_provider.AnthropicProvider("m", api_key=KEY, base_url=base_url, headers=headers)
    assert model._thin.shape is not None, "tamesu should build this request itself"
    sdk = anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url, max_retries=0, default_headers=headers or None,
                                   http_client=transport_client())
    try:
        assert (await model.generate(request())).text == "hi"
        await sdk.post("/v1/messages", cast_to=object, body=model._params(request()))
        params = model._params(request())
        # the 2.x SDK has no `temperature` argument: tamesu sends it in the body (see models/anthropic.py)
        extra = {"temperature": params.pop("temperature")}
        await sdk.messages.create(**params, extra_body=extra)
    finally:
        await model.aclose()
        await sdk.close()
    ours, theirs, created = recorder.seen
    assert compared(ours) == compared(theirs)
    assert json.loads(ours.body) == json.loads(created.body)
    assert compared(ours)[3] == compared(created)[3] and ours.target == created.target
    sent = dict((k.lower(), v) for k, v in ours.headers)
    assert sent["user-agent"] == headers.get("User-Agent", USER_AGENT)
    assert sent["anthropic-version"] == headers.get("anthropic-version", anthropic_provider.API_VERSION)


def test_the_api_version_and_transport_defaults_are_the_installed_sdks() -> None:
    from anthropic import _constants as anthropic_constants
    from openai import _constants as openai_constants

    assert anthropic_provider.API_VERSION == anthropic_constants.ANTHROPIC_API_VERSION
    for constants in (openai_constants, anthropic_constants):
        assert SDK_CLIENT_DEFAULTS["timeout"] == constants.DEFAULT_TIMEOUT
        assert SDK_CLIENT_DEFAULTS["limits"] == constants.DEFAULT_CONNECTION_LIMITS
    for made in (openai.DefaultAsyncHttpx2Client(), anthropic.DefaultAsyncHttpxClient()):
        assert made.follow_redirects is SDK_CLIENT_DEFAULTS["follow_redirects"]
        assert made.timeout == SDK_CLIENT_DEFAULTS["timeout"]


LOCAL = "http://127.0.0.1:9"


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
@pytest.mark.parametrize("base_url, env, built", [
    (LOCAL, {}, True),
    (None, {}, False),  # the SDK's default host, or one a profile names: the SDK's first request
    (None, {"BASE_URL": ""}, False),
    (None, {"BASE_URL": LOCAL}, True),
    (LOCAL, {"CUSTOM_HEADERS": "x-a: 1"}, False),  # the SDK's own rules for these headers
    (f"{LOCAL}/v1?api-version=1", {}, False),  # the SDKs merge a query their own way
], ids=["given", "none", "empty-env", "env", "custom-headers", "query"])
def test_what_tamesu_cannot_know_is_left_to_the_sdk(shape: str, base_url: str | None, env: dict[str, str],
                                                    built: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = shape.upper()
    for name in ("BASE_URL", "CUSTOM_HEADERS"):
        monkeypatch.delenv(f"{prefix}_{name}", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(f"{prefix}_{name}", value)
    known = openai_provider.known_shape if shape == "openai" else anthropic_provider.known_shape
    assert (known(KEY, base_url, {}) is not None) is built
