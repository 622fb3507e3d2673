"""Model calls that are retried or time out say so (events, and counts in the run's metrics); a
`Retry-After: 0` is bounded; against local OpenAI- and Anthropic-shaped servers through the real providers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from model_servers import AnthropicServer, OpenAIServer, delay, status, text
from tamesu._serve import ThreadServer
from tamesu.models.base import Message, ModelError, ModelRequest
from tamesu.models.client import RETRY_FLOOR, ModelRegistry
from tamesu.models.ledger import Ledger
from tamesu.models.spec import ModelSpec

Serve = Callable[[Any], ThreadServer]


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, **data: Any) -> None:
        self.seen.append((name, data))


def ask() -> ModelRequest:
    return ModelRequest(purpose="judge", messages=[Message(role="user", content="hello")])


@pytest.fixture(params=[OpenAIServer, AnthropicServer], ids=["openai", "anthropic"])
def server(request: pytest.FixtureRequest, serve: Serve) -> tuple[Any, ModelSpec]:
    model_server = request.param()
    provider = "openai" if request.param is OpenAIServer else "anthropic"
    spec = ModelSpec(provider=provider, model="test-model", api_key="local",
                     base_url=model_server.base_url(serve(model_server.app).url), timeout=5, max_retries=3)
    return model_server, spec


async def test_retry_after_zero_is_never_a_burst(server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    model_server.plan(*(status(429, "slow down", retry_after="0") for _ in range(3)), text("at last"))
    sleeps, events, ledger = Sleeps(), Events(), Ledger()
    models = ModelRegistry({"judge": spec}, sleep=sleeps, ledger=ledger).with_ledger(ledger.scope(), events)
    response = await models.client("judge").generate(ask())
    assert response.text == "at last"
    # the floor doubles: four calls take at least 0.25 + 0.5 + 1 s, never a few milliseconds
    assert sleeps.delays == [RETRY_FLOOR, RETRY_FLOOR * 2, RETRY_FLOOR * 4]
    assert [(name, data["attempt"], data["wait_s"]) for name, data in events.seen] == [
        ("model_retry", 2, 0.25), ("model_retry", 3, 0.5), ("model_retry", 4, 1.0)]
    assert "HTTP 429: slow down" in events.seen[0][1]["after"]
    assert events.seen[0][1]["model"] == f"{spec.provider}:test-model" and events.seen[0][1]["purpose"] == "judge"
    assert ledger.totals().retries == 3 and ledger.totals().timeouts == 0


async def test_retry_after_zero_really_waits(server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    model_server.plan(status(429, "slow down", retry_after="0"), text("ok"))
    models = ModelRegistry({"judge": spec})
    await models.client("judge").generate(ask())
    await models.aclose()
    first, second = model_server.calls()
    assert second.at - first.at >= RETRY_FLOOR


async def test_timeouts_are_counted_and_recorded(server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    spec = spec.model_copy(update={"timeout": 0.3, "max_retries": 1})
    model_server.plan(delay(1.0), delay(1.0))
    events, ledger = Events(), Ledger()
    models = ModelRegistry({"judge": spec}, sleep=Sleeps(), ledger=ledger).with_ledger(ledger.scope(), events)
    with pytest.raises(ModelError, match=r"no answer within 0\.3s \(gave up after 2 attempts\)") as caught:
        await models.client("judge").generate(ask())
    assert caught.value.timed_out
    assert [(name, data["attempt"]) for name, data in events.seen] == [
        ("model_timeout", 1), ("model_retry", 2), ("model_timeout", 2)]
    assert events.seen[0][1]["retried"] is True and events.seen[2][1]["retried"] is False
    assert ledger.totals().retries == 1 and ledger.totals().timeouts == 2
