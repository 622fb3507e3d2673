"""What the rest target's `Http(pool_timeout=...)` bounds: only the wait for a free connection of the pool. It was
named `read_timeout`, while no read of an answer is timed by it (the caller's timeout, a turn's `turn_timeout` or
`session.open`'s, bounds the whole request). Against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict
from yarl import URL

from sessions import new_session
from tamesu.net.direct import DirectClient, Request, finish, timeouts, whole
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.http import Http

SLOW = 1.0


@pytest.fixture
async def slow_agent() -> AsyncIterator[str]:
    async def chat(request: web.Request) -> web.Response:
        await asyncio.sleep(SLOW)
        return web.json_response({"text": "late but whole"})

    app = web.Application()
    app.router.add_route("*", "/chat", chat)
    async with TestServer(app, host="127.0.0.1") as server:
        yield f"http://127.0.0.1:{server.port}/chat"


async def test_an_answer_slower_than_the_pool_timeout_is_read_whole(slow_agent: str, tmp_path: Path) -> None:
    http = Http(session=new_session(tmp_path), connect=ConnectSpec(), pool_timeout=0.2, what="rest target",
                max_bytes=1_000_000)
    try:
        answer = await http.fetch(http.build("POST", slow_agent, {}, {"message": "hi"}, has_body=True))
    finally:
        await http.aclose()
    assert answer.status == 200 and answer.body == {"text": "late but whole"}


async def test_a_request_waiting_for_a_free_connection_gives_up_at_the_pool_timeout(slow_agent: str) -> None:
    client = DirectClient(max_connections=1)  # one connection, held by the first request while it waits
    # a connection within `connect` once one is free, after at most `pool` waiting for one: 0.3 s in all
    timeout = timeouts(pool=0.2, connect=0.1)

    def request() -> Request:
        return Request("GET", URL(slow_agent), CIMultiDict(), None, timeout)

    try:
        first = asyncio.create_task(client.send(request()))
        await asyncio.sleep(0.2)  # the first request holds the pool's one connection
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            await client.send(request())
        assert time.monotonic() - started < SLOW * 0.8  # given up before the first answer freed the connection
        response = await first
        try:
            assert await whole(response) == b'{"text": "late but whole"}'
        finally:
            finish(response)
    finally:
        await client.aclose()
