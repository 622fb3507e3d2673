"""A reply that is a JSON number or boolean (`42`, a streamed token ` 2024`) is the agent's text, against a real
server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sessions import new_session
from tamesu.conversation import UserTurn
from tamesu.targets.rest.spec import RestSpec
from tamesu.targets.rest.target import RestTarget


async def _answer(request: web.Request) -> web.StreamResponse:
    return web.Response(text=request.query["said"], content_type=request.query.get("type", "text/plain"))


async def _tokens(request: web.Request) -> web.StreamResponse:
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await stream.prepare(request)
    for token in ("The year is", " 2024", ", and it is", " true", "."):
        await stream.write(f"data: {token}\n\n".encode())
    await stream.write(b"data: [DONE]\n\n")
    return stream


@pytest.fixture
async def agent() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/answer", _answer)
    app.router.add_post("/tokens", _tokens)
    async with TestServer(app, host="127.0.0.1") as server:  # a free port, closed when the test ends
        yield f"http://127.0.0.1:{server.port}"


async def _said(url: str, tmp_path: Path, **keys: object) -> str:
    target = RestTarget(RestSpec(type="rest", url=url, **keys), "calculator")
    await target.open(new_session(tmp_path))
    try:
        return (await target.send(UserTurn(text="what is 6 times 7?"))).text
    finally:
        await target.close()


@pytest.mark.parametrize(("said", "content_type"), [("42", "text/plain"), ("42", "application/json"),
                                                   ("-0.5", "text/plain"), ("true", "text/plain")])
async def test_an_answer_that_is_a_number_is_its_text(said: str, content_type: str, agent: str,
                                                      tmp_path: Path) -> None:
    # before: '42' parsed as JSON gave no text: 'equals: "42"' failed on 'turn 1 said ""'
    assert await _said(f"{agent}/answer?said={said}&type={content_type}", tmp_path) == said


@pytest.mark.parametrize("streaming", ["sse", None])
async def test_a_streamed_token_that_is_a_number_is_kept(streaming: str | None, agent: str, tmp_path: Path) -> None:
    # before: 'The year is, and it is.': the tokens ' 2024' and ' true' were read as JSON and dropped
    keys = {"streaming": streaming} if streaming else {}
    assert await _said(f"{agent}/tokens", tmp_path, **keys) == "The year is 2024, and it is true."
