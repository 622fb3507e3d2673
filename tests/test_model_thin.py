"""The providers' thin path (`models/_thin.py`): when tamesu knows the request's whole shape it builds it itself,
otherwise the SDK sends a provider's first call and later calls replay the URL and headers it chose. Against the
local model servers: the requests on the wire are the SDK's, and every failure on the thin path (the SDK's shape
replayed, or tamesu's own) reads exactly as the SDK's own call made it read.

The SDK-first path is taken here the way a user meets it: the SDK's environment adds headers tamesu leaves to
it (`OPENAI_CUSTOM_HEADERS`, `ANTHROPIC_CUSTOM_HEADERS`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from model_servers import AnthropicServer, OpenAIServer, Planned, delay, raw, status, text
from ports import refused_port
from tamesu.models.anthropic import AnthropicProvider
from tamesu.models.base import Message, ModelError, ModelRequest, Provider
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
KEY = "sk-test-0123456789abcdef"
SHAPES = ["openai", "anthropic"]
ENV_HEADERS = {"openai": "OPENAI_CUSTOM_HEADERS", "anthropic": "ANTHROPIC_CUSTOM_HEADERS"}


def sdk_first(shape: str, base_url: str, monkeypatch: pytest.MonkeyPatch, timeout: float = 30.0) -> Provider:
    """A provider whose first call the SDK builds: its environment asks for a header tamesu does not add."""
    monkeypatch.setenv(ENV_HEADERS[shape], "x-from-env: the SDK's")
    try:
        model = provider(shape, base_url, timeout)
    finally:
        monkeypatch.delenv(ENV_HEADERS[shape])
    assert model._thin.shape is None  # type: ignore[attr-defined]
    return model


def ask(words: str) -> ModelRequest:
    return ModelRequest(purpose="simulator", messages=[Message(role="user", content=words)], temperature=0.5)


def started(serve: Serve, shape: str) -> tuple[OpenAIServer | AnthropicServer, str]:
    server = OpenAIServer() if shape == "openai" else AnthropicServer()
    return server, server.base_url(serve(server.app).url)


def provider(shape: str, base_url: str, timeout: float = 30.0) -> Provider:
    from tamesu.models.openai import OpenAIProvider

    kind = OpenAIProvider if shape == "openai" else AnthropicProvider
    return kind("m", api_key=KEY, base_url=base_url, timeout=timeout, headers={"x-suite": "kept"})


def sdk_class(shape: str) -> Any:
    return openai.AsyncOpenAI if shape == "openai" else anthropic.AsyncAnthropic


@pytest.mark.parametrize("shape", SHAPES)
async def test_later_calls_send_the_request_the_sdk_built_first(serve: Serve, shape: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = started(serve, shape)
    built: list[str] = []
    original = sdk_class(shape)._build_request

    def counting(self: Any, options: Any, **kwargs: Any) -> Any:
        built.append(options.url)
        return original(self, options, **kwargs)

    monkeypatch.setattr(sdk_class(shape), "_build_request", counting)
    monkeypatch.setenv(ENV_HEADERS[shape], "x-from-env: the SDK's")
    model = provider(shape, base_url)
    try:
        answers = [await model.generate(ask(f"call {n}")) for n in range(3)]
    finally:
        await model.aclose()
    assert [a.text for a in answers] == [f"echo: call {n}" for n in range(3)]
    assert len(built) == 1  # the SDK built the first request only
    calls = server.calls()
    assert len(calls) == 3

    def wire(headers: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in headers.items() if k != "content-length"}

    assert wire(calls[1].headers) == wire(calls[2].headers) == wire(calls[0].headers)
    assert calls[0].headers["authorization"] == f"Bearer {KEY}" and calls[0].headers["x-suite"] == "kept"
    assert calls[2].headers["x-from-env"] == "the SDK's"
    # the bodies are each call's own, as the SDK encodes them
    first, later = calls[0].body, calls[2].body
    assert set(first) == set(later) and first["temperature"] == later["temperature"] == 0.5
    assert "call 2" in str(later["messages"]) and "call 2" not in str(first["messages"])


FAILURES = [
    status(400, "the request was malformed"),
    status(401, f"Incorrect API key provided: {KEY}"),
    status(429, "slow down", retry_after="2"),
    status(500, "internal trouble"),
    status(404, "no such model"),
    raw("<html>a proxy's page</html>", content_type="text/html"),
    raw('{"choices": [', content_type="application/json"),
]


def outcome(error: ModelError) -> tuple[str, bool, float | None, bool]:
    return str(error), error.retryable, error.retry_after, error.timed_out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("failure", FAILURES, ids=lambda p: f"{p.kind}-{p.status}-{p.content_type}")
async def test_a_failure_on_the_thin_path_reads_as_the_sdks(serve: Serve, shape: str, failure: Planned,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = started(serve, shape)
    through_sdk, replayed = sdk_first(shape, base_url, monkeypatch), sdk_first(shape, base_url, monkeypatch)
    built = provider(shape, base_url)  # its base URL given: tamesu builds every request
    try:
        server.plan(failure)
        with pytest.raises(ModelError) as by_sdk:
            await through_sdk.generate(ask("first call"))  # the first call of a provider: the SDK's path
        server.plan(text("fine"), failure)
        assert (await replayed.generate(ask("first call"))).text == "fine"
        with pytest.raises(ModelError) as by_replay:
            await replayed.generate(ask("first call"))  # its second: the SDK's shape replayed
        server.plan(failure)
        with pytest.raises(ModelError) as by_tamesu:
            await built.generate(ask("first call"))
    finally:
        await through_sdk.aclose()
        await replayed.aclose()
        await built.aclose()
    assert outcome(by_replay.value) == outcome(by_sdk.value)
    assert outcome(by_tamesu.value) == outcome(by_sdk.value)
    assert KEY not in str(by_replay.value) and KEY not in str(by_tamesu.value)


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_timeout_on_the_thin_path_reads_as_the_sdks(serve: Serve, shape: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = started(serve, shape)
    through_sdk = sdk_first(shape, base_url, monkeypatch, timeout=0.3)
    replayed = sdk_first(shape, base_url, monkeypatch, timeout=0.3)
    built = provider(shape, base_url, timeout=0.3)
    try:
        server.plan(delay(1.5))
        with pytest.raises(ModelError) as by_sdk:
            await through_sdk.generate(ask("slow"))
        server.plan(text("fine"), delay(1.5))
        await replayed.generate(ask("quick"))
        with pytest.raises(ModelError) as by_replay:
            await replayed.generate(ask("slow"))
        server.plan(delay(1.5))
        with pytest.raises(ModelError) as by_tamesu:
            await built.generate(ask("slow"))
    finally:
        await through_sdk.aclose()
        await replayed.aclose()
        await built.aclose()
    assert outcome(by_replay.value) == outcome(by_sdk.value) == outcome(by_tamesu.value)
    assert by_replay.value.timed_out and by_replay.value.retryable


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("first", ["sdk", "tamesu"])
async def test_a_server_gone_on_the_thin_path_is_unreachable(serve: Serve, shape: str, first: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    server = OpenAIServer() if shape == "openai" else AnthropicServer()
    running = serve(server.app)
    base_url = server.base_url(running.url)
    model = sdk_first(shape, base_url, monkeypatch) if first == "sdk" else provider(shape, base_url)
    try:
        await model.generate(ask("hello"))
        running.stop()
        with pytest.raises(ModelError) as caught:
            await model.generate(ask("anyone?"))
    finally:
        await model.aclose()
    host = "api.openai.com" if shape == "openai" else "api.anthropic.com"
    assert str(caught.value).startswith(f"{shape}:m: cannot reach {server.base_url(running.url)} (")
    assert host not in str(caught.value) and caught.value.retryable


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("first", ["sdk", "tamesu"])
async def test_a_calls_own_headers_are_sent_with_it_and_never_replayed(serve: Serve, shape: str, first: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server, base_url = started(serve, shape)
    model = sdk_first(shape, base_url, monkeypatch) if first == "sdk" else provider(shape, base_url)
    thin = model._thin  # type: ignore[attr-defined]  (the path a trace header takes, issue 21)
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    try:
        await thin.post(body, headers={"traceparent": "00-" + "a" * 32 + "-" + "1" * 16 + "-01"})
        await thin.post(body, headers={"traceparent": "00-" + "b" * 32 + "-" + "2" * 16 + "-01"})
        await thin.post(body)
    finally:
        await model.aclose()
    sent = [call.headers.get("traceparent", "") for call in server.calls()]
    assert [value[3:4] for value in sent] == ["a", "b", ""]
    assert thin.shape is not None and all(name.lower() != "traceparent" for name, _ in thin.shape.headers)
    assert server.calls()[2].headers["authorization"] == f"Bearer {KEY}"


BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BELOW_HOST = {"openai": "/v1", "anthropic": ""}
"""What each provider's base URL has after host and port (`/v1` for chat completions)."""


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("first", ["sdk", "tamesu"])
def test_a_connection_error_names_the_url_the_request_went_to(tmp_path: Path, tamesu: Any, shape: str,
                                                               first: str) -> None:
    """The suite gives no base_url, the SDK's environment variable does: the error line names that URL (its
    credentials and query left out), never the public API; a model given the suite's base_url names that one,
    as before. `first=sdk` makes the SDK send the request, `tamesu` sends its own (`_thin.known_url`)."""
    env_port, suite_port = refused_port(), refused_port()
    below = BELOW_HOST[shape]
    model = f"provider: {shape}, model: m, max_retries: 0, timeout: 5s"
    (tmp_path / "tamesu.yaml").write_text(f"""\
suites: ['suite.yaml']
models:
  from_env: {{ {model} }}
  from_suite: {{ {model}, base_url: "http://127.0.0.1:{suite_port}{below}" }}
""")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  by_env: { type: model, system: "Be brief.", model: from_env }
  by_suite: { type: model, system: "Be brief.", model: from_suite }
tests:
  - name: through the environment
    target: by_env
    scenario: { script: [ { say: hello } ] }
  - name: through the suite
    target: by_suite
    scenario: { script: [ { say: hello } ] }
""")
    base = f"http://someone:s3cret-pw@127.0.0.1:{env_port}{below}"
    env = {BASE_URL_VARIABLES[shape]: base, KEY_VARIABLES[shape]: KEY}
    if first == "sdk":  # a query in the base URL and the headers variable: both leave the request to the SDK
        env[BASE_URL_VARIABLES[shape]] = base + "/?token=t0ken-x"
        env[ENV_HEADERS[shape]] = "x-from-env: the SDK's"
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    errors = {line["test"]: line["runs"][0]["error"]
              for line in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert f"{shape}:m: cannot reach http://***@127.0.0.1:{env_port}{below} (ConnectError)" \
        in errors["through the environment"], errors
    assert f"{shape}:m: cannot reach http://127.0.0.1:{suite_port}{below} (ConnectError)" \
        in errors["through the suite"], errors
    assert f"cannot reach http://***@127.0.0.1:{env_port}{below} (ConnectError)" in result.stdout
    written = [result.stdout, result.stderr, *(p.read_text(errors="replace") for p in run_dir.rglob("*")
                                               if p.is_file())]
    for secret in ("s3cret-pw", "someone", "t0ken-x", "api.openai.com", "api.anthropic.com"):
        assert not [text for text in written if secret in text], secret
