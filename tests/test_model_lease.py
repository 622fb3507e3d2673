"""Model calls in flight at once each get an SDK client (a connection pool) of their own, reused afterwards,
so no pool is shared, and scanned, by every conversation (the cost issue 20 measured)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from model_servers import AnthropicServer, OpenAIServer, delay, text
from tamesu.models._lease import ClientLease
from tamesu.models.anthropic import AnthropicProvider
from tamesu.models.base import Message, ModelRequest
from tamesu.models.openai import OpenAIProvider
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]


def ask(words: str) -> ModelRequest:
    return ModelRequest(purpose="simulator", messages=[Message(role="user", content=words)])


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_calls_at_once_get_clients_of_their_own_and_later_calls_reuse_them(serve: Serve, shape: str) -> None:
    server = OpenAIServer() if shape == "openai" else AnthropicServer()
    url = server.base_url(serve(server.app).url)
    provider = (OpenAIProvider if shape == "openai" else AnthropicProvider)("m", api_key="k-test", base_url=url)
    for _ in range(4):  # four slow answers, so four calls are in flight together
        server.plan(delay(0.3))
    try:
        answers = await asyncio.gather(*(provider.generate(ask(f"call {n}")) for n in range(4)))
        at_once = provider._clients.size
        for n in range(5):  # one at a time: the warm client is lent again, none is made
            await provider.generate(ask(f"later {n}"))
        after = provider._clients.size
    finally:
        await provider.aclose()
    assert [a.text for a in answers] == [f"echo: call {n}" for n in range(4)]  # each answer is its own call
    assert at_once == 4
    assert after == 4
    assert len(server.calls()) == 9
    assert provider._clients.size == 0  # closed


async def test_a_lease_lends_the_last_returned_client_first_and_closes_every_one() -> None:
    made: list[int] = []
    closed: list[int] = []

    async def close(client: int) -> None:
        closed.append(client)

    lease: ClientLease[int] = ClientLease(lambda: made.append(len(made)) or made[-1], close)
    async with lease.client() as first, lease.client() as second:
        assert (first, second) == (0, 1)
    async with lease.client() as again:
        assert again == 0  # returned last (the outer block exits last), so lent first
    await lease.aclose()
    assert sorted(closed) == [0, 1] and lease.size == 0


async def test_a_failed_call_returns_its_client(serve: Serve) -> None:
    server = OpenAIServer()
    url = server.base_url(serve(server.app).url)
    provider = OpenAIProvider("m", api_key="k-test", base_url=url)
    from model_servers import status

    server.plan(status(500, "boom"))
    server.plan(text("fine"))
    try:
        with pytest.raises(Exception, match="HTTP 500"):
            await provider.generate(ask("one"))
        answer = await provider.generate(ask("two"))
        size = provider._clients.size
    finally:
        await provider.aclose()
    assert answer.text == "fine" and size == 1
