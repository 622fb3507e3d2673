"""A send that a 301 or 302 turned into a GET without its body, refused there: the URL has moved (most often http://
to https://, or a path to its new place), said in one line as the URL to set; a Post/Redirect/Get answer still
goes on as a browser follows it. Against a real aiohttp server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import new_session
from tamesu.conversation import UserTurn
from tamesu.errors import InfraError
from tamesu.targets.rest.target import RestSpec, RestTarget


def _app() -> web.Application:
    async def moved(request: web.Request) -> web.StreamResponse:
        return web.Response(status=int(request.query["status"]), headers={"Location": "/v2/chat"})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return web.json_response({"text": f"v2 heard {body['message']}"})

    async def chat_get(request: web.Request) -> web.StreamResponse:  # as FastAPI refuses a method: JSON
        return web.json_response({"detail": "Method Not Allowed"}, status=405)

    async def submit(request: web.Request) -> web.StreamResponse:  # Post/Redirect/Get, as Rails and Django write it
        body = await request.json()
        return web.Response(status=302, headers={"Location": f"/result?said={body['message']}"})

    async def result(request: web.Request) -> web.StreamResponse:
        return web.json_response({"text": f"result for {request.query['said']}"})

    app = web.Application()
    app.router.add_post("/chat", moved)
    app.router.add_post("/v2/chat", chat)
    app.router.add_get("/v2/chat", chat_get)
    app.router.add_post("/submit", submit)
    app.router.add_get("/result", result)
    return app


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with TestServer(_app(), host="127.0.0.1") as running:
        yield f"http://127.0.0.1:{running.port}"


async def _say(url: str, tmp_path: Path) -> str:
    target = RestTarget(RestSpec.model_validate({"type": "rest", "url": url}), "api")
    await target.open(new_session(tmp_path))
    try:
        return (await target.send(UserTurn(text="hello"))).text
    finally:
        await target.close()


@pytest.mark.parametrize("status", [301, 302])
async def test_a_send_moved_by_a_redirect_that_drops_its_body_says_where_to(server: str, tmp_path: Path,
                                                                           status: int) -> None:
    with pytest.raises(InfraError) as failed:
        await _say(f"{server}/chat?status={status}", tmp_path)
    assert str(failed.value) == (
        f"rest target api: POST {server}/chat?status={status} was redirected (HTTP {status}) to {server}/v2/chat, "
        f"which refused the GET a {status} is followed with, without its body (HTTP 405): use "
        f"{server}/v2/chat in the suite (a server that moved the endpoint keeps the request with 307 or 308)")


async def test_a_307_keeps_the_request(server: str, tmp_path: Path) -> None:
    assert await _say(f"{server}/chat?status=307", tmp_path) == "v2 heard hello"


async def test_post_redirect_get_is_followed(server: str, tmp_path: Path) -> None:
    assert await _say(f"{server}/submit", tmp_path) == "result for hello"
