"""The real provider code paths (openai and anthropic SDKs) against local scripted servers (model_servers),
with the resilient client around them: retries, fallback, the replay cache, cost and the budget."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from model_servers import (
    DEFAULT_VERDICT,
    AnthropicServer,
    OpenAIServer,
    delay,
    raw,
    status,
    text,
    tool_call,
    tool_calls,
)
from ports import refused_port
from sdk_groups import IN_PROCESS_SDKS
from tamesu.errors import BudgetExceeded
from tamesu.models import pricing
from tamesu.models.anthropic import AnthropicProvider
from tamesu.models.base import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolRequest,
    ToolSpec,
    Usage,
)
from tamesu.models.cache import CacheMiss, ReplayCache
from tamesu.models.client import ModelRegistry, ResilientClient, check
from tamesu.models.ledger import Ledger
from tamesu.models.openai import OpenAIProvider
from tamesu.models.said import redact
from tamesu.models.spec import BudgetSpec, ModelSpec, PriceSpec
from tamesu.models.structured import StructuredOutputError, generate_structured
from tamesu.net.retry_after import retry_after_from_headers
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
pytestmark = IN_PROCESS_SDKS  # most tests here call an SDK in this process
KEY = "sk-test-0123456789abcdef"
VERDICT_SCHEMA = {"title": "Verdict", "type": "object", "required": ["pass", "reason"],
                  "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}}}


class Sleeps:
    """Records the waits between retries instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def ask(content: str = "hello", purpose: str = "simulator", **fields: Any) -> ModelRequest:
    return ModelRequest(purpose=purpose, messages=[Message(role="user", content=content)], **fields)  # type: ignore[arg-type]


def dead_base_url() -> str:
    return f"http://127.0.0.1:{refused_port()}/v1"


@pytest.fixture
def oai(serve: Serve) -> tuple[OpenAIServer, str]:
    server = OpenAIServer()
    return server, server.base_url(serve(server.app).url)


@pytest.fixture
def claude(serve: Serve) -> tuple[AnthropicServer, str]:
    server = AnthropicServer()
    return server, server.base_url(serve(server.app).url)


class _Verdict(BaseModel):
    passed: bool
    reason: str


def openai_spec(base_url: str, model: str = "gpt-4o-mini", **fields: Any) -> ModelSpec:
    return ModelSpec(provider="openai", model=model, base_url=base_url, api_key=KEY, **fields)


def registry(specs: dict[str, ModelSpec], **options: Any) -> ModelRegistry:
    return ModelRegistry(specs, sleep=options.pop("sleep", Sleeps()), **options)


# ---- openai: the wire ---------------------------------------------------------------------------------


async def test_openai_text_answer(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(text("Hi, how can I help?"))
    provider = OpenAIProvider("gpt-4o-mini", api_key=KEY, base_url=base_url)
    try:
        response = await provider.generate(ask("hello there"))
    finally:
        await provider.aclose()
    assert response.text == "Hi, how can I help?"
    assert (response.provider, response.model, response.finish_reason) == ("openai", "gpt-4o-mini", "stop")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens == 5
    [call] = server.calls()
    assert call.body["model"] == "gpt-4o-mini"
    assert call.body["messages"] == [{"role": "user", "content": "hello there"}]
    assert call.headers["authorization"] == f"Bearer {KEY}"
    assert "x-stainless-retry-count" not in call.headers or call.headers["x-stainless-retry-count"] == "0"


async def test_openai_tool_calls_round_trip(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(tool_calls([("lookup_order", {"order_id": "A-7"}), ("weather", {"city": "Lyon"})]),
                text("Your order A-7 ships tomorrow."))
    tools = [ToolSpec(name="lookup_order", description="find an order",
                      parameters={"type": "object", "properties": {"order_id": {"type": "string"}}}),
             ToolSpec(name="weather")]
    provider = OpenAIProvider("gpt-4o", api_key=KEY, base_url=base_url)
    try:
        first = await provider.generate(ask("where is A-7?", purpose="target", tools=tools))
        assert first.finish_reason == "tool_calls"
        assert [(c.name, c.arguments) for c in first.tool_calls] == [
            ("lookup_order", {"order_id": "A-7"}), ("weather", {"city": "Lyon"})]
        history = [
            Message(role="system", content="You are a shop assistant."),
            Message(role="user", content="where is A-7?"),
            Message(role="assistant", content="", tool_calls=first.tool_calls),
            Message(role="tool", tool_call_id=first.tool_calls[0].id, content='{"status": "shipping"}'),
            Message(role="tool", tool_call_id=first.tool_calls[1].id, content="sunny"),
        ]
        second = await provider.generate(ModelRequest(purpose="target", messages=history, tools=tools))
    finally:
        await provider.aclose()
    assert second.text == "Your order A-7 ships tomorrow." and second.tool_calls == []
    first_body, second_body = (c.body for c in server.calls())
    assert first_body["tools"][0] == {"type": "function", "function": {
        "name": "lookup_order", "description": "find an order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}
    assistant = second_body["messages"][2]
    assert assistant["role"] == "assistant" and assistant["content"] is None
    assert assistant["tool_calls"][0]["type"] == "function"
    assert assistant["tool_calls"][0]["id"] == first.tool_calls[0].id
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"order_id": "A-7"}
    assert second_body["messages"][3] == {"role": "tool", "tool_call_id": first.tool_calls[0].id,
                                          "content": '{"status": "shipping"}'}
    assert second_body["messages"][0] == {"role": "system", "content": "You are a shop assistant."}


async def test_openai_sends_seed_temperature_and_max_tokens(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    models = registry({"simulator": openai_spec(base_url, temperature=0.7, max_tokens=50)})
    try:
        await models.client("simulator").generate(ask(seed=42))
        await models.client("simulator").generate(ask(seed=42, temperature=0.0, max_tokens=9))
    finally:
        await models.aclose()
    defaults, explicit = (c.body for c in server.calls())
    assert (defaults["seed"], defaults["temperature"], defaults["max_tokens"]) == (42, 0.7, 50)
    assert (explicit["seed"], explicit["temperature"], explicit["max_tokens"]) == (42, 0.0, 9)


async def test_openai_structured_output_request(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    provider = OpenAIProvider("gpt-4o-mini", api_key=KEY, base_url=base_url)
    try:
        response = await provider.generate(ask("judge this", purpose="judge", json_schema=VERDICT_SCHEMA))
    finally:
        await provider.aclose()
    assert json.loads(response.text) == DEFAULT_VERDICT
    [call] = server.calls()
    assert call.body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Verdict", "schema": VERDICT_SCHEMA, "strict": False}}


async def test_json_schema_refused_falls_back_to_json_object_and_remembers(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
                            "with this model."))
    provider = OpenAIProvider("llama3", api_key=KEY, base_url=base_url)
    try:
        first = await provider.generate(ask("judge this", purpose="judge", json_schema=VERDICT_SCHEMA))
        second = await provider.generate(ask("and this", purpose="judge", json_schema=VERDICT_SCHEMA))
    finally:
        await provider.aclose()
    assert json.loads(first.text) == json.loads(second.text) == DEFAULT_VERDICT
    bodies = [c.body for c in server.calls()]
    assert len(bodies) == 3  # refused, retried once as json_object, then json_object straight away
    assert bodies[0]["response_format"]["type"] == "json_schema"
    for body in bodies[1:]:
        assert body["response_format"] == {"type": "json_object"}
        # json_object mode needs the word JSON in the messages, and the model still needs the schema
        instruction = body["messages"][0]
        assert instruction["role"] == "system" and "JSON" in instruction["content"]
        assert '"reason"' in instruction["content"]


async def test_a_400_that_names_nothing_is_not_retried(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(400, "messages: too long"))
    models = registry({"judge": openai_spec(base_url)})
    try:
        with pytest.raises(ModelError) as caught:
            await models.client("judge").generate(ask(purpose="judge", json_schema=VERDICT_SCHEMA))
    finally:
        await models.aclose()
    assert str(caught.value) == "openai:gpt-4o-mini: HTTP 400: messages: too long"
    assert not caught.value.retryable
    assert len(server.calls()) == 1


async def test_malformed_json_text_is_returned_as_is(oai: tuple[OpenAIServer, str]) -> None:
    # repairing it is the judge's job (roles/); the provider must hand back exactly what the model wrote
    server, base_url = oai
    server.plan(text('{"pass": tru, "reason": "ok"'))
    provider = OpenAIProvider("gpt-4o-mini", api_key=KEY, base_url=base_url)
    try:
        response = await provider.generate(ask(purpose="judge", json_schema=VERDICT_SCHEMA))
    finally:
        await provider.aclose()
    assert response.text == '{"pass": tru, "reason": "ok"'


async def test_openai_answers_read_as_plain_json(oai: tuple[OpenAIServer, str]) -> None:
    # the completion is read as the JSON it came as (no SDK model): what compatible servers vary in still reads
    server, base_url = oai
    server.plan(raw({"id": "x", "model": "served-name", "choices": [{"finish_reason": "stop", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "in "}, {"type": "text", "text": "parts"}]}}]}))
    server.plan(raw({"choices": [{"message": {"role": "assistant", "content": None, "refusal": "I cannot."}}],
                     "usage": None}))
    server.plan(raw({"choices": [{"finish_reason": "tool_calls", "message": {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": {"id": 7}}},
        {"id": "c2", "type": "function", "function": {"name": "broken", "arguments": "{not json"}},
        {"id": "c3", "type": "custom", "custom": {"name": "free-form"}}]}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3}}))
    server.plan(raw({"choices": [{"text": "a legacy completion"}]}))
    provider = OpenAIProvider("gpt-4o-mini", api_key=KEY, base_url=base_url)
    try:
        parts = await provider.generate(ask())
        refused = await provider.generate(ask())
        called = await provider.generate(ask())
        with pytest.raises(ModelError, match=r"not a chat completion \(choices\[0\] has no message\)"):
            await provider.generate(ask())
    finally:
        await provider.aclose()
    assert (parts.text, parts.model, parts.finish_reason, parts.usage.total) == ("in parts", "served-name", "stop", 0)
    assert (refused.text, refused.model, refused.finish_reason) == ("I cannot.", "gpt-4o-mini", None)
    assert [(c.id, c.name, c.arguments, c.written) for c in called.tool_calls] == [
        ("c1", "lookup", {"id": 7}, None), ("c2", "broken", {}, "{not json")]
    assert called.tool_calls[1].unreadable is not None and "not valid JSON" in called.tool_calls[1].unreadable
    assert (called.usage.input_tokens, called.usage.output_tokens) == (11, 3)


async def test_reasoning_model_parameters_adapt(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                            "Use 'max_completion_tokens' instead."),
                status(400, "Unsupported value: 'temperature' does not support 0 with this model."))
    provider = OpenAIProvider("o4-mini", api_key=KEY, base_url=base_url)
    try:
        await provider.generate(ask(temperature=0.0, max_tokens=100))
        await provider.generate(ask(temperature=0.0, max_tokens=100))
    finally:
        await provider.aclose()
    bodies = [c.body for c in server.calls()]
    assert len(bodies) == 4
    assert "max_tokens" in bodies[0] and "temperature" in bodies[0]
    for body in bodies[2:]:
        assert body["max_completion_tokens"] == 100
        assert "max_tokens" not in body and "temperature" not in body


async def test_a_server_that_refuses_seed_is_asked_without_it(oai: tuple[OpenAIServer, str]) -> None:
    # Mistral's API (and Azure AI Foundry's Mistral models) answer 422 to an OpenAI `seed`, in pydantic's words:
    # every simulator turn, which sends its run's seed, failed
    server, base_url = oai
    refusal = ('{"detail":[{"type":"extra_forbidden","loc":["body","seed"],"msg":"Extra inputs are not '
               'permitted","input":42}]}')
    server.plan(status(422, refusal, when="seed"), text("first"), status(422, refusal, when="seed"), text("second"))
    provider = OpenAIProvider("mistral-small-latest", api_key=KEY, base_url=base_url)
    try:
        first = await provider.generate(ask(seed=42))
        second = await provider.generate(ask(seed=42))  # learnt once, for the rest of the run
    finally:
        await provider.aclose()
    assert (first.text, second.text) == ("first", "second")
    assert ["seed" in c.body for c in server.calls()] == [True, False, False]
    assert (first.adapted, second.adapted) == (["the server refused seed: sent without it from now on"], [])


# ---- retries, fallback, timeouts, errors --------------------------------------------------------------


async def test_rate_limit_is_retried_after_the_servers_delay(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(429, "Rate limit reached for gpt-4o-mini", retry_after="1.5"), text("finally"))
    sleeps = Sleeps()
    models = registry({"simulator": openai_spec(base_url)}, sleep=sleeps)
    try:
        response = await models.client("simulator").generate(ask())
    finally:
        await models.aclose()
    assert response.text == "finally"
    assert len(server.calls()) == 2
    assert len(sleeps.delays) == 1 and 1.5 <= sleeps.delays[0] <= 1.5 * 1.25  # Retry-After, jittered past it


async def test_backoff_doubles_without_retry_after(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(500, "boom"), status(503, "busy"), status(502, "bad gateway"), text("up again"))
    sleeps = Sleeps()
    models = registry({"simulator": openai_spec(base_url, max_retries=3)}, sleep=sleeps)
    try:
        response = await models.client("simulator").generate(ask())
    finally:
        await models.aclose()
    assert response.text == "up again"
    # doubling, each jittered within its upper half
    assert [c / 2 <= d <= c for d, c in zip(sleeps.delays, [0.5, 1.0, 2.0], strict=True)] == [True] * 3


async def test_server_errors_exhausted_then_the_fallback_answers(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(500, "boom"), status(500, "boom"))
    spec = openai_spec(base_url, model="gpt-4o", max_retries=1, fallback=openai_spec(base_url, "gpt-4o-mini"))
    ledger = Ledger()
    models = registry({"judge": spec}, ledger=ledger)
    events: list[tuple[str, dict[str, object]]] = []
    try:
        recording = models.with_ledger(ledger, lambda name, **data: events.append((name, data)))
        response = await recording.client("judge").generate(ask("judge", purpose="judge"))
    finally:
        await models.aclose()
    assert [c.body["model"] for c in server.calls()] == ["gpt-4o", "gpt-4o", "gpt-4o-mini"]
    assert (response.provider, response.model) == ("openai", "gpt-4o-mini")
    # said as it happened (the run showed only the verdict's model): the console counts it along the way
    [(_name, data)] = [e for e in events if e[0] == "model_fallback"]
    assert data["model"] == "openai:gpt-4o" and data["fallback"] == "openai:gpt-4o-mini", data
    assert response.cost_usd > 0  # priced as the fallback model
    assert ledger.totals().calls == 1 and ledger.usd == pytest.approx(response.cost_usd)


async def test_primary_and_fallback_failing_reports_both(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(500, "primary down"), status(500, "fallback down"))
    spec = openai_spec(base_url, model="gpt-4o", max_retries=0,
                       fallback=openai_spec(base_url, "gpt-4o-mini", max_retries=0))
    models = registry({"judge": spec})
    try:
        with pytest.raises(ModelError) as caught:
            await models.client("judge").generate(ask(purpose="judge"))
    finally:
        await models.aclose()
    assert str(caught.value) == ("openai:gpt-4o: HTTP 500: primary down; "
                                 "fallback openai:gpt-4o-mini: HTTP 500: fallback down")


async def test_timeout_is_retryable_then_exhausted(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    # answers held 30 s, not 1.5: on a loaded machine a retry that reached the server after the first request's
    # wait ended was answered at once (that request took the retry's planned delay), and a 0.3 s timer run late
    # comes nearer a short hold
    server.plan(delay(30), delay(30))
    # 2 s, not 0.3: the timeout bounds the whole attempt, connecting and sending too, and a full CI run once starved
    # the retry so long that it gave up before its request reached the server (1 of 2 recorded)
    models = registry({"simulator": openai_spec(base_url, timeout="2s", max_retries=1)})
    try:
        with pytest.raises(ModelError) as caught:
            await models.client("simulator").generate(ask())
    finally:
        await models.aclose()
    assert caught.value.retryable
    assert str(caught.value) == "openai:gpt-4o-mini: no answer within 2s (gave up after 2 attempts)"
    # the server's thread records a request once it has read it, which a loaded machine may do after the client
    # gave up on it: waited for, not read at once
    deadline = time.monotonic() + 30
    while len(server.calls()) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert len(server.calls()) == 2


async def test_a_retry_that_comes_late_is_held_as_planned(oai: tuple[OpenAIServer, str]) -> None:
    """The scripted server's check, for the test above: a held request whose caller gave up took the answer
    planned for the retry once its own hold ended, so a retry that came later (a loaded machine) was answered at
    once. Here the retry comes 3 s after the first request's 2 s hold began."""
    server, base_url = oai
    server.plan(delay(2), delay(2))

    async def late(_seconds: float) -> None:
        await asyncio.sleep(3)

    models = registry({"simulator": openai_spec(base_url, timeout="300ms", max_retries=1)}, sleep=late)
    try:
        with pytest.raises(ModelError, match=r"no answer within 0\.3s \(gave up after 2 attempts\)"):
            await models.client("simulator").generate(ask())
    finally:
        await models.aclose()


async def test_unauthorised_is_not_retried_and_the_key_is_never_repeated(serve: Serve) -> None:
    server = OpenAIServer(require_key="sk-right-key-000000")
    base_url = server.base_url(serve(server.app).url)
    wrong = "sk-wrong-key-9876543210"
    spec = ModelSpec(provider="openai", model="gpt-4o-mini", base_url=base_url, api_key="{{secrets.KEY}}",
                     max_retries=3)
    models = registry({"judge": spec}, render=lambda value: value.replace("{{secrets.KEY}}", wrong))
    try:
        with pytest.raises(ModelError) as caught:
            await models.client("judge").generate(ask(purpose="judge"))
    finally:
        await models.aclose()
    message = str(caught.value)
    assert not caught.value.retryable
    assert message.startswith("openai:gpt-4o-mini: HTTP 401: Incorrect API key provided: ")
    assert wrong not in message and "9876543210" not in message
    assert len(server.calls()) == 1
    assert server.calls()[0].headers["authorization"] == f"Bearer {wrong}"  # the template was rendered


async def test_unreachable_server_is_retryable_and_names_no_key() -> None:
    base_url = dead_base_url()
    models = registry({"judge": openai_spec(base_url, max_retries=1)})
    try:
        with pytest.raises(ModelError) as caught:
            await models.client("judge").generate(ask(purpose="judge"))
    finally:
        await models.aclose()
    assert caught.value.retryable
    assert f"cannot reach {base_url}" in str(caught.value)
    assert KEY not in str(caught.value)


def test_redact_hides_keys_servers_quote_back() -> None:
    assert redact("Incorrect API key provided: sk-proj-abc123def456", None) == \
        "Incorrect API key provided: sk-proj-***"
    assert redact("bad key my-own-secret-value", "my-own-secret-value") == "bad key ***"


def test_retry_after_headers() -> None:
    assert retry_after_from_headers({"retry-after": "3"}) == 3.0
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert retry_after_from_headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_from_headers({"retry-after": "soon"}) is None
    assert retry_after_from_headers({}) is None


# ---- anthropic ----------------------------------------------------------------------------------------


async def test_anthropic_system_tool_blocks_and_json(claude: tuple[AnthropicServer, str]) -> None:
    server, base_url = claude
    server.plan(tool_call("lookup_order", {"order_id": "A-7"}, text="Let me check."))
    tools = [ToolSpec(name="lookup_order", description="find an order",
                      parameters={"type": "object", "properties": {"order_id": {"type": "string"}}})]
    provider = AnthropicProvider("claude-sonnet-4-20250514", api_key=KEY, base_url=base_url)
    try:
        first = await provider.generate(ModelRequest(purpose="target", tools=tools, temperature=0.0, seed=7,
                                                     messages=[Message(role="system", content="Be brief."),
                                                               Message(role="user", content="where is A-7?")]))
        history = [
            Message(role="system", content="Be brief."),
            Message(role="user", content="where is A-7?"),
            Message(role="assistant", content=first.text, tool_calls=[
                *first.tool_calls, ToolRequest(id="toolu_x", name="lookup_order", arguments={"order_id": "B"})]),
            Message(role="tool", tool_call_id=first.tool_calls[0].id, content="shipping"),
            # a failed call, as the model and mcp targets answer one: before, sent without is_error, so the model
            # read the failure as the tool's answer
            Message.tool_result({"error": "unknown order"}, "toolu_x", "lookup_order"),
        ]
        second = await provider.generate(ModelRequest(purpose="judge", messages=history,
                                                      json_schema=VERDICT_SCHEMA))
    finally:
        await provider.aclose()
    assert first.text == "Let me check." and first.finish_reason == "tool_use"
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("lookup_order", {"order_id": "A-7"})]
    assert json.loads(second.text) == DEFAULT_VERDICT
    first_body, second_body = (c.body for c in server.calls())
    assert first_body["system"] == "Be brief."
    assert first_body["messages"] == [{"role": "user", "content": "where is A-7?"}]
    assert first_body["tools"] == [{"name": "lookup_order", "description": "find an order",
                                    "input_schema": tools[0].parameters}]
    assert first_body["temperature"] == 0.0 and first_body["max_tokens"] == 4096
    assert "seed" not in first_body  # Anthropic has none
    assert second_body["system"].startswith("Be brief.\n\n") and '"reason"' in second_body["system"]
    assistant, results = second_body["messages"][1:]
    assert assistant == {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": first.tool_calls[0].id, "name": "lookup_order", "input": {"order_id": "A-7"}},
        {"type": "tool_use", "id": "toolu_x", "name": "lookup_order", "input": {"order_id": "B"}}]}
    # both results in one user turn, as the API requires
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": first.tool_calls[0].id, "content": "shipping"},
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": '{"error": "unknown order"}', "is_error": True}]}
    # a message that is no failed tool's dumps as before (the replay cache's keys stay the same)
    assert "is_error" not in history[3].model_dump() and history[4].model_dump()["is_error"] is True


async def test_anthropic_refused_temperature_is_dropped_for_the_run(claude: tuple[AnthropicServer, str]) -> None:
    server, base_url = claude
    server.plan(status(400, "temperature is not supported for this model"))
    provider = AnthropicProvider("claude-opus-4-7", api_key=KEY, base_url=base_url)
    try:
        await provider.generate(ask(temperature=0.0))
        await provider.generate(ask(temperature=0.0))
    finally:
        await provider.aclose()
    bodies = [c.body for c in server.calls()]
    assert len(bodies) == 3 and "temperature" in bodies[0]
    assert all("temperature" not in body for body in bodies[1:])


async def test_anthropic_answers_read_as_plain_json(claude: tuple[AnthropicServer, str]) -> None:
    server, base_url = claude
    server.plan(raw({"type": "message", "model": "served-name", "stop_reason": "tool_use", "content": [
        {"type": "text", "text": "Looking "}, "not a block", {"type": "thinking", "thinking": "hm"},
        {"type": "text", "text": "it up."}, {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"id": 7}},
        {"type": "tool_use", "id": "t2", "name": "odd", "input": [1, 2]}], "usage": {"input_tokens": 9}}))
    server.plan(raw({"type": "error", "error": {"message": "a proxy's JSON"}}))
    provider = AnthropicProvider("claude-opus-4-7", api_key=KEY, base_url=base_url)
    try:
        answer = await provider.generate(ask())
        with pytest.raises(ModelError, match=r'HTTP 200 but not a Messages answer \(the JSON has no "content"\)'):
            await provider.generate(ask())
    finally:
        await provider.aclose()
    assert (answer.text, answer.model, answer.finish_reason) == ("Looking it up.", "served-name", "tool_use")
    assert [(c.id, c.name, c.arguments, c.unreadable) for c in answer.tool_calls] == [
        ("t1", "lookup", {"id": 7}, None), ("t2", "odd", {}, "the arguments were JSON but not an object")]
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (9, 0)


async def test_anthropic_errors_map_like_openai(claude: tuple[AnthropicServer, str]) -> None:
    server, base_url = claude
    server.plan(status(529, "Overloaded"), status(429, "slow down", retry_after="2"), text("ok"))
    sleeps = Sleeps()
    spec = ModelSpec(provider="anthropic", model="claude-3-5-haiku-latest", base_url=base_url, api_key=KEY)
    models = registry({"simulator": spec}, sleep=sleeps)
    try:
        response = await models.client("simulator").generate(ask())
    finally:
        await models.aclose()
    assert response.text == "ok" and len(sleeps.delays) == 2
    assert 0.25 <= sleeps.delays[0] <= 0.5 and 2.0 <= sleeps.delays[1] <= 2.5
    assert response.cost_usd == pytest.approx(pricing.cost("claude-3-5-haiku", response.usage))
    assert server.calls()[0].headers["authorization"] == f"Bearer {KEY}"


async def test_anthropic_unauthorised_hides_the_key(serve: Serve) -> None:
    server = AnthropicServer(require_key="sk-ant-right")
    provider = AnthropicProvider("claude-sonnet-4", api_key="sk-ant-wrong-secret",
                                 base_url=server.base_url(serve(server.app).url))
    try:
        with pytest.raises(ModelError) as caught:
            await provider.generate(ask())
    finally:
        await provider.aclose()
    assert not caught.value.retryable
    assert str(caught.value).startswith("anthropic:claude-sonnet-4: HTTP 401: Incorrect API key provided")
    assert "wrong-secret" not in str(caught.value)


# ---- the replay cache ---------------------------------------------------------------------------------


async def test_an_answer_that_did_not_validate_is_not_replayed(tmp_path: Path) -> None:
    # before: every attempt's answer was recorded before it was read, so once a simulator's answers had all been
    # refused, every later run replayed the same three refusals (0 requests to a server since fixed)
    server = OpenAIServer()
    running = ThreadServer(server.app).start()
    spec = openai_spec(server.base_url(running.url))
    request = ask("transcript...", purpose="judge", temperature=0.0)
    verdict = '{"passed": true, "reason": "fine"}'
    try:
        server.plan(*[text('{"message": "x"}')] * 3)
        broken = registry({"judge": spec}, cache=ReplayCache(tmp_path / "cache", "use"))
        with pytest.raises(StructuredOutputError):
            await generate_structured(broken.client("judge"), request, _Verdict)
        await broken.aclose()
        assert not list((tmp_path / "cache").rglob("*.json"))
        # one refused, then one read: both kept, so that a replay asks them in the same order
        server.plan(text('{"nope": 1}'), text(verdict))
        fixed = registry({"judge": spec}, cache=ReplayCache(tmp_path / "cache", "use"))
        answer, _ = await generate_structured(fixed.client("judge"), request, _Verdict)
        await fixed.aclose()
        assert answer.passed and len(server.calls()) == 5 and len(list((tmp_path / "cache").rglob("*.json"))) == 2
        replayed = registry({"judge": spec}, cache=ReplayCache(tmp_path / "cache", "only"))
        again, responses = await generate_structured(replayed.client("judge"), request, _Verdict)
        await replayed.aclose()
        assert again.passed and [r.cached for r in responses] == [True, True] and len(server.calls()) == 5
    finally:
        running.stop()


async def test_record_then_replay_with_the_server_stopped(tmp_path: Path) -> None:
    server = OpenAIServer()
    running = ThreadServer(server.app).start()
    server.plan(text("I want to return my shoes."), tool_call("refund", {"order": "A-7"}))
    spec = openai_spec(server.base_url(running.url))
    requests = [ask("Hi, what can I do for you?", seed=1),
                ask("Which order?", purpose="target", tools=[ToolSpec(name="refund")]),
                ask("transcript...", purpose="judge", json_schema=VERDICT_SCHEMA, temperature=0.0)]
    recording = registry({"simulator": spec}, cache=ReplayCache(tmp_path / "cache", "use"))
    try:
        recorded = [await recording.client("simulator").generate(r) for r in requests]
    finally:
        await recording.aclose()
        running.stop()
    assert len(server.calls()) == 3 and not any(r.cached for r in recorded)

    ledger = Ledger(BudgetSpec(usd=0.0))  # a replay is free: even a zero budget holds
    replaying = registry({"simulator": spec}, cache=ReplayCache(tmp_path / "cache", "only"), ledger=ledger)
    try:
        replayed = [await replaying.client("simulator").generate(r) for r in requests]
    finally:
        await replaying.aclose()
    assert len(server.calls()) == 3
    for old, new in zip(recorded, replayed, strict=True):
        assert new.cached and new.cost_usd == 0.0
        assert new.model_dump(exclude={"cached", "cost_usd"}) == old.model_dump(exclude={"cached", "cost_usd"})
    assert ledger.usd == 0.0 and ledger.totals().cached_calls == 3

    cache = ReplayCache(tmp_path / "cache")
    key = cache.key(spec, requests[0])
    path = tmp_path / "cache" / key[:2] / f"{key}.json"
    content = path.read_text()
    assert content.startswith("{\n  ")  # indented, for review
    record = json.loads(content)
    assert record["response"]["cost_usd"] == recorded[0].cost_usd > 0  # the original cost is kept
    assert record["request"]["messages"][0]["content"] == "Hi, what can I do for you?"
    assert KEY not in content
    assert not list((tmp_path / "cache").rglob("*.tmp"))


async def test_cache_only_miss_names_purpose_and_model(tmp_path: Path) -> None:
    spec = openai_spec(dead_base_url())
    models = registry({"judge": spec}, cache=ReplayCache(tmp_path, "only"))
    try:
        with pytest.raises(CacheMiss) as caught:
            await models.client("judge").generate(ask(purpose="judge"))
    finally:
        await models.aclose()
    assert isinstance(caught.value, ModelError)
    assert str(caught.value) == ("cache miss for judge on openai:gpt-4o-mini with --cache-only: "
                                 "record the run once without --cache-only")
    assert models._providers == {}  # no provider was even created: a replay needs no SDK, key or server


async def test_cache_only_miss_of_a_cache_another_tamesu_recorded_says_so(oai: tuple[OpenAIServer, str],
                                                                          tmp_path: Path) -> None:
    # before: "record the run once" alone, every call of a committed cache a miss after tamesu reworded a prompt
    _, base_url = oai
    spec = openai_spec(base_url)
    recording = registry({"judge": spec}, cache=ReplayCache(tmp_path))
    try:
        for content in ("one", "two"):  # what an older tamesu asked: its judge prompt was judge.v0
            await recording.client("judge").generate(ask(content, purpose="judge", prompt_version="judge.v0"))
    finally:
        await recording.aclose()
    replaying = registry({"judge": spec}, cache=ReplayCache(tmp_path, "only"))
    try:
        with pytest.raises(CacheMiss) as newer:
            await replaying.client("judge").generate(ask("one", purpose="judge", prompt_version="judge.v1"))
        with pytest.raises(CacheMiss) as plain:  # the same prompt, a question never recorded: a plain miss
            await replaying.client("judge").generate(ask("three", purpose="judge", prompt_version="judge.v0"))
    finally:
        await replaying.aclose()
    assert str(newer.value) == (
        "cache miss for judge on openai:gpt-4o-mini with --cache-only: its 2 recorded answers for judge on this "
        "model were asked with judge.v0, this tamesu asks with judge.v1 (recorded by another version of tamesu?): "
        "record the run once without --cache-only")
    assert str(plain.value) == ("cache miss for judge on openai:gpt-4o-mini with --cache-only: "
                                "record the run once without --cache-only")


async def test_cache_off_neither_reads_nor_writes(oai: tuple[OpenAIServer, str], tmp_path: Path) -> None:
    _, base_url = oai
    spec = openai_spec(base_url)
    ReplayCache(tmp_path).put(spec, ask(), ModelResponse(text="stale", provider="openai", model="gpt-4o-mini"))
    before = sorted(tmp_path.rglob("*.json"))
    models = registry({"simulator": spec}, cache=ReplayCache(tmp_path, "off"))
    try:
        response = await models.client("simulator").generate(ask())
        await models.client("simulator").generate(ask("other"))
    finally:
        await models.aclose()
    assert response.text == "echo: hello" and not response.cached
    assert sorted(tmp_path.rglob("*.json")) == before


def test_cache_key_covers_what_shapes_the_answer_and_not_the_key(tmp_path: Path) -> None:
    cache = ReplayCache(tmp_path)
    base = openai_spec("http://127.0.0.1:1/v1")
    key = cache.key(base, ask())
    assert cache.key(base.model_copy(update={"api_key": "sk-other", "headers": {"x": "y"}}), ask()) == key
    assert cache.key(base.model_copy(update={"model": "gpt-4o"}), ask()) != key
    assert cache.key(base.model_copy(update={"base_url": "http://127.0.0.1:2/v1"}), ask()) != key
    assert cache.key(base, ask(seed=1)) != key
    assert cache.key(base, ask(purpose="judge")) != key
    assert cache.key(base, ask(context={"rubric": "polite"})) != key


async def test_a_damaged_cache_file_is_a_miss(oai: tuple[OpenAIServer, str], tmp_path: Path) -> None:
    _, base_url = oai
    spec = openai_spec(base_url)
    cache = ReplayCache(tmp_path)
    path = cache.path(cache.key(spec, ask()))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    models = registry({"simulator": spec}, cache=cache)
    try:
        response = await models.client("simulator").generate(ask())
    finally:
        await models.aclose()
    assert response.text == "echo: hello"
    assert json.loads(path.read_text())["response"]["text"] == "echo: hello"


# ---- cost and budget ----------------------------------------------------------------------------------


def test_cost_from_the_price_table() -> None:
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert pricing.cost("gpt-4o-mini", million) == pytest.approx(0.75)
    assert pricing.cost("gpt-4o-mini-2024-07-18", million) == pytest.approx(0.75)
    assert pricing.cost("gpt-4o", million) == pytest.approx(12.5)
    assert pricing.cost("openai/gpt-4.1-mini", million) == pytest.approx(2.0)
    assert pricing.cost("claude-sonnet-4-20250514", million) == pytest.approx(18.0)
    assert pricing.cost("claude-opus-4-1-20250805", million) == pytest.approx(90.0)
    assert pricing.known("o4-mini") and pricing.known("claude-3-5-haiku-latest")
    assert not pricing.known("llama3.1:8b") and pricing.cost("llama3.1:8b", million) == 0.0
    assert not pricing.known("gpt-4o-audio-preview")  # not gpt-4o's price


def test_cost_from_a_price_override() -> None:
    usage = Usage(input_tokens=2_000, output_tokens=1_000)
    override = PriceSpec(input_per_mtok=1.0, output_per_mtok=10.0)
    assert pricing.cost("llama3.1:8b", usage, override) == pytest.approx(0.012)
    spec = ModelSpec(provider="openai", model="gpt-4o", price=override)
    assert pricing.cost(spec, usage) == pytest.approx(0.012)
    assert pricing.cost(ModelSpec(provider="fake"), usage) == 0.0
    # docs/models.md: the fake provider's calls cost nothing, even beside a price
    assert pricing.cost(ModelSpec(provider="fake", price=override), usage) == 0.0


async def test_cost_of_a_call_uses_the_spec_price(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(text("priced", usage=(1000, 500)), text("table", usage=(1000, 500)))
    priced = openai_spec(base_url, "my-vllm-model", price={"input_per_mtok": 2.0, "output_per_mtok": 4.0})
    models = registry({"simulator": priced, "judge": openai_spec(base_url, "gpt-4o-mini")})
    try:
        first = await models.client("simulator").generate(ask())
        second = await models.client("judge").generate(ask(purpose="judge"))
    finally:
        await models.aclose()
    assert first.cost_usd == pytest.approx((1000 * 2.0 + 500 * 4.0) / 1e6)
    assert second.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    spent = models.ledger.by_purpose()
    assert spent["simulator"].usd == pytest.approx(first.cost_usd)
    assert spent["judge"].tokens == 1500


async def test_budget_exceeded_stops_spending(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(text("one", usage=(1000, 1000)), text("two", usage=(1000, 1000)))
    spec = openai_spec(base_url, price={"input_per_mtok": 100.0, "output_per_mtok": 100.0})
    run_ledger = Ledger(BudgetSpec(usd=0.25))
    models = registry({"simulator": spec}, ledger=run_ledger)
    first_run, second_run = run_ledger.scope(), run_ledger.scope()
    try:
        await models.with_ledger(first_run).client("simulator").generate(ask("a"))  # $0.20: within budget
        with pytest.raises(BudgetExceeded) as caught:
            await models.with_ledger(second_run).client("simulator").generate(ask("b"))  # $0.40 in all
        with pytest.raises(BudgetExceeded):
            await models.client("simulator").generate(ask("c"))  # refused before any call
    finally:
        await models.aclose()
    assert str(caught.value) == "budget of $0.25 exceeded: spent $0.40"
    assert len(server.calls()) == 2
    assert first_run.usd == pytest.approx(0.2) and second_run.usd == pytest.approx(0.2)
    assert first_run.tokens == 2000 and run_ledger.tokens == 4000


def test_token_budget_and_cached_answers_are_free() -> None:
    ledger = Ledger(BudgetSpec(tokens=100))
    cached = ModelResponse(provider="openai", model="m", usage=Usage(input_tokens=500), cached=True)
    ledger.charge(cached, "judge")
    assert ledger.tokens == 0 and ledger.totals().cached_calls == 1
    ledger.charge(ModelResponse(provider="openai", model="m", usage=Usage(input_tokens=60)), "judge")
    with pytest.raises(BudgetExceeded, match="budget of 100 tokens exceeded: spent 120 tokens"):
        ledger.charge(ModelResponse(provider="openai", model="m", usage=Usage(input_tokens=60)), "simulator")
    assert ledger.by_purpose()["simulator"].tokens == 60


# ---- the registry, keys, doctor -----------------------------------------------------------------------


async def test_registry_roles_and_overrides(oai: tuple[OpenAIServer, str]) -> None:
    _, base_url = oai
    judge = openai_spec(base_url, "gpt-4o")
    models = registry({"judge": judge, "cheap": openai_spec(base_url, "gpt-4o-mini")})
    try:
        assert models.spec("extract") is judge  # extract falls back to the judge
        assert models.client("judge") is models.client("extract")
        assert models.spec("judge", "cheap").model == "gpt-4o-mini"
        assert models.spec("judge", "anthropic:claude-3-5-haiku").provider == "anthropic"
        assert models.spec("judge", {"provider": "openai", "model": "gpt-4.1"}).model == "gpt-4.1"
        assert models.spec("judge", judge) is judge
        with pytest.raises(ModelError, match=r"no model for the simulator: set models\.simulator in tamesu\.yaml "
                                             r"or the suite"):
            models.client("simulator")
        with pytest.raises(ModelError, match="no model named 'nope' under models:"):
            models.client("judge", "nope")
        assert models._providers == {}  # created on first use only
        response = await models.client("judge", "cheap").generate(ask(purpose="judge"))
        assert response.model == "gpt-4o-mini"
        await models.client("judge").generate(ask(purpose="judge"))
        assert len(models._providers) == 2
    finally:
        await models.aclose()
    assert models._providers == {}


def test_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ModelError, match=r"openai: no API key \(set OPENAI_API_KEY or models.X.api_key\)"):
        OpenAIProvider.from_spec(ModelSpec(provider="openai", model="gpt-4o"), None)
    with pytest.raises(ModelError, match="anthropic: no API key"):
        AnthropicProvider.from_spec(ModelSpec(provider="anthropic", model="claude-sonnet-4"), None)
    local = OpenAIProvider.from_spec(ModelSpec(provider="openai", model="llama3",
                                               base_url="http://localhost:11434/v1"), None)
    assert local._api_key and local._api_key != KEY
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")  # local through the SDK's variable
    assert OpenAIProvider.from_spec(ModelSpec(provider="openai", model="llama3"), None)._api_key
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:8080")
    assert AnthropicProvider.from_spec(ModelSpec(provider="anthropic", model="claude-sonnet-4"), None)._api_key
    monkeypatch.setenv("OPENAI_BASE_URL", "https://models.example.com/v1")
    with pytest.raises(ModelError, match="openai: no API key"):
        OpenAIProvider.from_spec(ModelSpec(provider="openai", model="gpt-4o"), None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert OpenAIProvider.from_spec(ModelSpec(provider="openai", model="gpt-4o"), None)._api_key == "sk-from-env"
    assert OpenAIProvider.from_spec(ModelSpec(provider="openai", model="gpt-4o"), "sk-given")._api_key == "sk-given"


async def test_local_server_without_a_key(oai: tuple[OpenAIServer, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server, base_url = oai
    models = registry({"simulator": ModelSpec(provider="openai", model="llama3", base_url=base_url)})
    try:
        assert (await models.client("simulator").generate(ask())).text == "echo: hello"
    finally:
        await models.aclose()
    assert server.calls()[0].headers["authorization"].startswith("Bearer ")


async def test_doctor_check(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_server = OpenAIServer(require_key=KEY)
    anthropic_server = AnthropicServer()
    openai_url = openai_server.base_url(serve(openai_server.app).url)
    anthropic_url = anthropic_server.base_url(serve(anthropic_server.app).url)
    assert await check(openai_spec(openai_url)) is None
    assert await check(ModelSpec(provider="anthropic", model="claude-sonnet-4", base_url=anthropic_url)) is None
    assert [r.path for r in anthropic_server.requests] == ["/v1/models", "/v1/messages"]  # listed, then asked
    assert await check(ModelSpec(provider="fake")) is None
    refused = await check(ModelSpec(provider="openai", model="gpt-4o", base_url=openai_url, api_key="sk-bad-123456"))
    assert refused is not None and "refused" in refused and "sk-bad" not in refused
    missing = await check(ModelSpec(provider="openai", model="gpt-4o"))
    assert missing == "openai:gpt-4o: no API key (set OPENAI_API_KEY or api_key)"
    dead = await check(openai_spec(dead_base_url()))
    assert dead is not None and "not reachable" in dead and KEY not in dead


async def test_doctor_times_the_completion_not_the_sdk_import(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    """The doctor's completion budget is the call's: the SDK's first import (seconds on a loaded machine) is
    done before it starts. A first use of the SDK that outlasts the whole budget stands in for that import."""
    import tamesu.models.client as client_module

    server = OpenAIServer()
    spec = openai_spec(server.base_url(serve(server.app).url), timeout=4)
    monkeypatch.setattr(client_module, "TIMEOUT_MARGIN", 0.0)  # the budget is then the spec's 4 s
    made = OpenAIProvider._sdk

    def slow_first_use(self: OpenAIProvider) -> Any:
        if self._client is None:
            time.sleep(5)  # longer than the budget: counted in it, the check would say "no completion"
        return made(self)

    monkeypatch.setattr(OpenAIProvider, "_sdk", slow_first_use)
    assert await check(spec) is None
    assert [r.path for r in server.requests] == ["/v1/models", "/v1/chat/completions"]


async def test_doctor_asks_the_server_the_environment_names(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    """No base_url in the suite, `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` set: doctor asks that server (as the
    run's calls would go there), a local one needs no key, and a dead one is named by host and port only."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    openai_server, anthropic_server = OpenAIServer(), AnthropicServer()
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url(serve(openai_server.app).url))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url(serve(anthropic_server.app).url))
    assert await check(ModelSpec(provider="openai", model="llama3")) is None
    assert await check(ModelSpec(provider="anthropic", model="claude-sonnet-4")) is None
    assert [r.path for r in openai_server.requests] == ["/v1/models", "/v1/chat/completions"]
    assert [r.path for r in anthropic_server.requests] == ["/v1/models", "/v1/messages"]
    port = refused_port()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://someone:s3cret-pw@127.0.0.1:{port}/v1")
    dead = await check(ModelSpec(provider="openai", model="llama3"))
    assert dead is not None and dead.startswith(f"openai:llama3: 127.0.0.1:{port} not reachable (")
    assert "s3cret" not in dead and "someone" not in dead


async def test_client_without_registry_counts_attempts(oai: tuple[OpenAIServer, str]) -> None:
    server, base_url = oai
    server.plan(status(500, "boom"))
    provider = OpenAIProvider("gpt-4o-mini", api_key=KEY, base_url=base_url)
    client = ResilientClient(openai_spec(base_url), provider, sleep=Sleeps())
    try:
        assert (await client.generate(ask())).text == "echo: hello"
    finally:
        await provider.aclose()
    assert client.attempts == 2


class Canned(Provider):
    """A provider answering without a server (for the client's own logic)."""

    name = "fake"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="canned", provider="fake", model=self.model, fake=True)


async def test_fake_answers_are_never_cached(tmp_path: Path) -> None:
    client = ResilientClient(ModelSpec(provider="fake"), Canned(""), cache=ReplayCache(tmp_path, "only"))
    response = await client.generate(ask())
    assert response.text == "canned" and not response.cached and response.cost_usd == 0.0
    assert not list(tmp_path.iterdir())


async def test_the_fake_simulator_says_the_goal_word_for_word_then_follows_its_rules() -> None:
    """What docs/personas.md says of the fake simulator: its first turn is `scenario.goal` as written, whatever
    the persona; then the first rule whose `when` is in the agent's last turn; no rule hangs up."""
    from tamesu.models.fake import FakeProvider

    fake = FakeProvider([{"when": "(?i)which order", "say": "It is ORD-1001"}])
    persona = {"name": "Dana", "style": "brisk, types in fragments"}

    async def turn(**context: Any) -> dict[str, Any]:
        request = ModelRequest(purpose="simulator", messages=[Message(role="user", content="play")],
                               context={"goal": "Find out where order ORD-1001 is", "persona": persona, **context})
        return dict(json.loads((await fake.generate(request)).text))

    assert (await turn(simulator_turns=0))["input"] == "Find out where order ORD-1001 is"
    assert (await turn(simulator_turns=1, last_agent="Which order is it?"))["input"] == "It is ORD-1001"
    assert (await turn(simulator_turns=2, last_agent="Bye"))["stop"] is True


async def test_an_answer_without_token_usage_is_said_not_counted_silently(oai: tuple[OpenAIServer, str]) -> None:
    # a local server or proxy that leaves `usage` out: 0 tokens and $0, which a budget cannot see; said as an event
    server, base_url = oai
    completion = {"id": "x", "object": "chat.completion", "model": "gpt-4o",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "no counts"},
                               "finish_reason": "stop"}]}
    server.plan(raw(completion), text("with counts"))
    ledger = Ledger()
    models = registry({"judge": openai_spec(base_url, model="gpt-4o")}, ledger=ledger)
    events: list[tuple[str, dict[str, object]]] = []
    try:
        recording = models.with_ledger(ledger, lambda name, **data: events.append((name, data)))
        first = await recording.client("judge").generate(ask("judge", purpose="judge"))
        second = await recording.client("judge").generate(ask("judge again", purpose="judge"))
    finally:
        await models.aclose()
    assert (first.text, first.usage.reported, first.usage.total) == ("no counts", False, 0)
    assert second.usage.reported and second.usage.total > 0
    assert [(name, data["model"]) for name, data in events] == [("model_usage_missing", "openai:gpt-4o")]


def test_every_providers_own_key_variable_is_masked_as_a_secret() -> None:
    from tamesu.models.azure import AzureOpenAIProvider
    from tamesu.models.spec import PROVIDER_KEY_VARIABLES

    assert {OpenAIProvider.key_variable, AnthropicProvider.key_variable, AzureOpenAIProvider.key_variable} == \
        set(PROVIDER_KEY_VARIABLES)
