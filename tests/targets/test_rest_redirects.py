"""The rest target follows redirects as httpx did before it moved onto aiohttp directly (`tamesu.net.direct`):
the turn's `traceparent` on every hop, `Authorization` kept within the origin and dropped across origins, the
agent's cookies sent on the next hop, a 307 sending its body again and a 303 turning into a GET; against two real
servers on 127.0.0.1 (two origins: two ports)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import events, new_session
from tamesu import __version__
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest.http import Http
from tamesu.telemetry.traceparent import TraceContext


def _app(seen: list[dict[str, Any]], other: list[str]) -> web.Application:
    async def hop(request: web.Request) -> web.StreamResponse:
        seen.append({"path": request.path, "method": request.method, "body": await request.text(),
                     "traceparent": request.headers.get("traceparent"),
                     "authorization": request.headers.get("Authorization"),
                     "cookie": request.headers.get("Cookie"),
                     "user_agent": request.headers.get("User-Agent"),
                     "api_key": request.headers.get("X-Api-Key"), "plain": request.headers.get("X-Shop")})
        if request.path == "/start":  # a 307 keeps the method and the body, and sets a cookie
            answer = web.Response(status=307, headers={"Location": "/same"})
            answer.set_cookie("visit", "1", path="/")
            return answer
        if request.path == "/same":  # a 303 asks for a GET, to another origin
            return web.Response(status=303, headers={"Location": f"{other[0]}/elsewhere"})
        return web.json_response({"text": "arrived"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hop)
    return app


@pytest.fixture
async def servers() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    other: list[str] = []
    async with TestServer(_app(seen, other), host="127.0.0.1") as first, \
            TestServer(_app(seen, other), host="127.0.0.1") as second:
        other.append(f"http://127.0.0.1:{second.port}")
        yield f"http://127.0.0.1:{first.port}", seen


async def test_redirects_carry_the_trace_on_every_hop_and_drop_authorization_across_origins(
        servers: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    url, seen = servers
    session = new_session(tmp_path)
    session.trace = TraceContext.new()
    http = Http(session=session, connect=ConnectSpec(), pool_timeout=10, what="rest target", max_bytes=1_000_000)
    try:
        answer = await http.fetch(http.build("POST", f"{url}/start", {"Authorization": "Bearer k"},
                                             {"message": "hi"}, has_body=True))
    finally:
        await http.aclose()
    assert answer.status == 200 and answer.body == {"text": "arrived"}
    assert [(hop["path"], hop["method"]) for hop in seen] == [("/start", "POST"), ("/same", "POST"),
                                                              ("/elsewhere", "GET")]
    assert {hop["traceparent"] for hop in seen} == {session.trace.traceparent}
    assert [hop["authorization"] for hop in seen] == ["Bearer k", "Bearer k", None]
    assert [hop["body"] for hop in seen] == ['{"message":"hi"}', '{"message":"hi"}', ""]
    assert seen[1]["cookie"] == "visit=1"  # the jar's, on the next hop
    assert {hop["user_agent"] for hop in seen} == {f"tamesu/{__version__}"}  # who calls, not aiohttp's default


async def test_a_suites_own_user_agent_wins(servers: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    url, seen = servers
    http = Http(session=new_session(tmp_path), connect=ConnectSpec(), pool_timeout=10, what="rest target",
                max_bytes=1_000_000)
    try:
        await http.fetch(http.build("GET", f"{url}/elsewhere", {"User-Agent": "shop-tests/2"}, None, has_body=False))
    finally:
        await http.aclose()
    assert [hop["user_agent"] for hop in seen] == ["shop-tests/2"]


async def test_a_header_carrying_a_secret_is_not_sent_on_to_another_origin(
        servers: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    # before: Authorization was dropped across origins, but `X-Api-Key: {{secrets.K}}` went on to the other host
    url, seen = servers
    session = new_session(tmp_path)
    session.redactor.add("k-4411-secret")
    http = Http(session=session, connect=ConnectSpec(), pool_timeout=10, what="rest target", max_bytes=1_000_000)
    try:
        answer = await http.fetch(http.build("POST", f"{url}/start", {"X-Api-Key": "k-4411-secret", "X-Shop": "7",
                                                                     "Proxy-Authorization": "Basic eA=="},
                                             {"message": "hi"}, has_body=True))
    finally:
        await http.aclose()
    assert answer.status == 200
    assert [hop["api_key"] for hop in seen] == ["k-4411-secret", "k-4411-secret", None]  # same origin keeps it
    assert [hop["plain"] for hop in seen] == ["7", "7", "7"]  # a header with no secret goes on
    withheld = events(session, "redirect_headers_withheld")
    assert [(e["headers"], e["url"].endswith("/elsewhere")) for e in withheld] == [(["X-Api-Key"], True)]
