"""The HTTP clients read an answer's cookies only when it sets one (`tamesu.net.clients.SetCookies`; aiohttp's
session for the rest target, `tamesu.net.direct`), and keep and send back the cookies an agent sets, as httpx's
own client does; against a real server on 127.0.0.1."""

from __future__ import annotations

import http.cookiejar
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from rest_client import RestClient
from sessions import new_session
from tamesu.net.clients import async_client
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.http import Http


class CountingJar(http.cookiejar.CookieJar):
    """The standard library's jar, counting the answers handed to it."""

    def __init__(self) -> None:
        super().__init__()
        self.extracted = 0

    def extract_cookies(self, response: Any, request: Any) -> None:
        self.extracted += 1
        super().extract_cookies(response, request)


async def _answer(request: web.Request) -> web.Response:
    answer = web.json_response({"cookie": request.headers.get("Cookie", "")})
    if "set" in request.query:
        answer.set_cookie("session", request.query["set"], path="/")
    return answer


@pytest.fixture
async def agent() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/chat", _answer)
    async with TestServer(app, host="127.0.0.1") as server:  # a free port, closed when the test ends
        yield str(server.make_url("/chat"))


class CountingAioJar(aiohttp.CookieJar):
    """aiohttp's jar (the rest target's, `tamesu.net.direct`), counting the answers handed to it."""

    def __init__(self) -> None:
        super().__init__(unsafe=True)
        self.extracted = 0

    def update_cookies_from_headers(self, headers: Any, response_url: Any) -> Any:
        self.extracted += 1
        return super().update_cookies_from_headers(headers, response_url)


def _rest_client(tmp_path: Path, jar: CountingAioJar) -> Any:
    http = Http(session=new_session(tmp_path), connect=ConnectSpec(), pool_timeout=30, what="rest target",
                max_bytes=1_000_000)
    http.client.cookies = jar  # before the first request: the session opens with it
    return RestClient(http)


@pytest.mark.parametrize("route", ["rest", "hooks_and_checks"])
async def test_cookies_set_by_the_agent_are_sent_back_and_only_answers_that_set_one_reach_the_jar(
        route: str, agent: str, tmp_path: Path) -> None:
    jar: Any
    if route == "rest":
        jar = CountingAioJar()
        client = _rest_client(tmp_path, jar)

        def cookie(name: str) -> str | None:
            found = jar.filter_cookies(URL(agent)).get(name)
            return None if found is None else str(found.value)
    else:
        client = async_client(30)
        jar = CountingJar()
        client.cookies = jar

        def cookie(name: str) -> str | None:
            found: str | None = client.cookies.get(name)
            return found
    try:
        plain = await client.get(agent)
        assert plain.json() == {"cookie": ""}
        assert jar.extracted == 0  # no Set-Cookie: the jar is not consulted
        await client.get(agent, params={"set": "abc"})
        assert jar.extracted == 1
        again = await client.get(agent)
        assert again.json() == {"cookie": "session=abc"}
        assert jar.extracted == 1
        assert cookie("session") == "abc"
    finally:
        await client.aclose()
